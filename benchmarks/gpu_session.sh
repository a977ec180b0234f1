#!/usr/bin/env bash
# One device call: build, CUDA tests, sanitizers, benchmarks. Logs go to $OUT (or ./gpu_logs).
# Usage: [STEPS="build bench"] bash benchmarks/gpu_session.sh [pytest selection ...]
# STEPS picks steps by name (default: all). The bench step (benchmarks/run.py) gets the time left
# until BENCH_DEADLINE seconds after this script started (default 555, inside a 10-minute call).
# $OUT receives build.log tests.log sanitizers.log bench.log bench_suite.json report.tgz validate.log.
# benchmarks/device_env.sh sets the build's environment and installs the wheels in .whl/.
set -uo pipefail
OUT=${OUT:-gpu_logs}; mkdir -p "$OUT"
source benchmarks/device_env.sh
export FUSED_HMC_VERBOSE_BUILD=1
status=()
step() {  # name, command...
  local name=$1; shift
  [[ -z "${STEPS:-}" || " $STEPS " == *" $name "* ]] || return 0
  local t0=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  status+=("$(printf '%-12s rc=%-3s %4ss' "$name" "$rc" $((SECONDS - t0)))")
  tail -n 15 "$OUT/$name.log"
}
step build bash -c "nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; python3 -c \"import fused_hmc._build as b; b.load_extension(); assert b.has_cuda_kernels(); print('cuda kernels loaded')\""
grep -sE "spill|Used [0-9]+ registers" "$OUT/build.log" | sort | uniq -c | sort -rn | head -5
step tests python3 -m pytest -q -m cuda -p no:cacheprovider "${@:-tests}"
step sanitizers bash -c "compute-sanitizer --tool memcheck --error-exitcode 3 python3 benchmarks/sanitize_smoke.py && compute-sanitizer --tool racecheck --error-exitcode 3 python3 benchmarks/sanitize_smoke.py"
bench_budget=$(( ${BENCH_DEADLINE:-555} - SECONDS )); (( bench_budget < 60 )) && bench_budget=60
# The suite, then its plots and tables (README.md, benchmarks/README.md, results/TABLE.md, PNGs),
# packed into $OUT/report.tgz: untar it at the repository root to take them.
report() {
  python3 benchmarks/run.py --budget "$bench_budget" ${BENCH_ARGS:-} &&
    python3 benchmarks/plots.py && python3 benchmarks/report.py &&
    tar czf "$OUT/report.tgz" README.md benchmarks/README.md benchmarks/results/TABLE.md \
      benchmarks/results/*.png benchmarks/results/bench_suite.json
}
step bench report
[ -d fused_hmc/validation ] && step validate python3 -m fused_hmc validate --device cuda
printf '%s\n' "${status[@]}"
