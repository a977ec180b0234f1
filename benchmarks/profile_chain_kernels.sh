#!/usr/bin/env bash
# Nsight Compute on one launch of each chain-kernel workload (benchmarks/profile_case.py), then
# the figures issue 13 asks for per case: warp instructions per warp per transition, IPC, issue
# slots busy, registers, occupancy, waves, DRAM and L2 bytes, FP64 pipe. Usage:
#   OUT=dir [CASES=a,b] bash benchmarks/profile_chain_kernels.sh
set -uo pipefail
OUT=${OUT:-gpu_logs}; mkdir -p "$OUT"
cases=${CASES:-$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import profile_case as p; print(','.join(p.CASES))")}
ncu --set full --import-source yes --profile-from-start off -f -o "$OUT/chain_kernels" \
  python3 benchmarks/profile_case.py --cases "$cases" --manifest "$OUT/profile_manifest.json" \
  > "$OUT/ncu.log" 2>&1 || { echo "ncu failed"; tail -20 "$OUT/ncu.log"; exit 1; }
# (--set full does not collect smsp__warps_launched or dram__bytes under those names: warps come
# from the launch's grid and block; memory traffic is in the details page.)
metrics=smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,\
sm__warps_active.avg.pct_of_peak_sustained_active,launch__waves_per_multiprocessor,\
sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,\
launch__grid_size,launch__block_size
ncu -i "$OUT/chain_kernels.ncu-rep" --page raw --csv --print-units base --metrics "$metrics" \
  > "$OUT/profile_raw.csv"
# The sections (speed of light, warp states, launch statistics, ...) as text, per launch.
ncu -i "$OUT/chain_kernels.ncu-rep" --page details --print-units base > "$OUT/profile_details.txt"
python3 - "$OUT" <<'PY'
import csv, json, sys
out = sys.argv[1]
manifest = json.load(open(f"{out}/profile_manifest.json"))
rows = list(csv.DictReader(open(f"{out}/profile_raw.csv")))[1:]  # row 0: units
assert len(rows) == len(manifest), (len(rows), [r["Kernel Name"][:40] for r in rows])
def f(r, k): return float(r[k].replace(",", ""))
print(f"{'case':26s} {'inst/warp/T':>11s} {'IPC':>5s} {'issue%':>6s} {'regs':>4s} {'occ%':>5s} "
      f"{'waves':>6s} {'fp64%':>5s} {'us/T':>9s}")
table = []
for m, r in zip(manifest, rows):
    warps = f(r, "launch__grid_size") * f(r, "launch__block_size") / 32
    per = f(r, "smsp__inst_executed.sum") / warps / m["transitions"]
    line = dict(case=m["case"], kernel=r["Kernel Name"][:90], inst_per_warp_per_transition=per,
                ipc=f(r, "sm__inst_executed.avg.per_cycle_active"),
                issue_pct=f(r, "smsp__issue_active.avg.pct_of_peak_sustained_active"),
                registers=f(r, "launch__registers_per_thread"),
                occupancy_pct=f(r, "sm__warps_active.avg.pct_of_peak_sustained_active"),
                waves=f(r, "launch__waves_per_multiprocessor"),
                fp64_pct=f(r, "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"),
                us_per_transition=f(r, "gpu__time_duration.sum") / 1e3 / m["transitions"])
    table.append(line)
    print(f"{m['case']:26s} {per:11.0f} {line['ipc']:5.2f} {line['issue_pct']:6.1f} "
          f"{line['registers']:4.0f} {line['occupancy_pct']:5.1f} {line['waves']:6.2f} "
          f"{line['fp64_pct']:5.1f} {line['us_per_transition']:9.2f}")
json.dump(table, open(f"{out}/profile_table.json", "w"), indent=1)
PY
