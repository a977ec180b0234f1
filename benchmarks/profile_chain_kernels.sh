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
metrics=smsp__inst_executed.sum,smsp__warps_launched.sum,sm__inst_executed.avg.per_cycle_active,\
smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,\
sm__warps_active.avg.pct_of_peak_sustained_active,launch__waves_per_multiprocessor,dram__bytes.sum,\
lts__t_bytes.sum,sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,\
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
      f"{'waves':>5s} {'DRAM MB':>8s} {'L2 MB':>7s} {'fp64%':>5s} {'us':>9s}")
table = []
for m, r in zip(manifest, rows):
    per = f(r, "smsp__inst_executed.sum") / f(r, "smsp__warps_launched.sum") / m["transitions"]
    line = dict(case=m["case"], kernel=r["Kernel Name"][:90], inst_per_warp_per_transition=per,
                ipc=f(r, "sm__inst_executed.avg.per_cycle_active"),
                issue_pct=f(r, "smsp__issue_active.avg.pct_of_peak_sustained_active"),
                registers=f(r, "launch__registers_per_thread"),
                occupancy_pct=f(r, "sm__warps_active.avg.pct_of_peak_sustained_active"),
                waves=f(r, "launch__waves_per_multiprocessor"),
                dram_mb=f(r, "dram__bytes.sum") / 1e6, l2_mb=f(r, "lts__t_bytes.sum") / 1e6,
                fp64_pct=f(r, "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"),
                us=f(r, "gpu__time_duration.sum") / 1e3)
    table.append(line)
    print(f"{m['case']:26s} {per:11.0f} {line['ipc']:5.2f} {line['issue_pct']:6.1f} "
          f"{line['registers']:4.0f} {line['occupancy_pct']:5.1f} {line['waves']:5.2f} "
          f"{line['dram_mb']:8.1f} {line['l2_mb']:7.1f} {line['fp64_pct']:5.1f} {line['us']:9.1f}")
json.dump(table, open(f"{out}/profile_table.json", "w"), indent=1)
PY
