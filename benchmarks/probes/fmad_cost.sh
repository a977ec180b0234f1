#!/usr/bin/env bash
# One device call for fmad_cost.py: the extension and the probe's 8 modules built at once, the
# probe in float32 and float64, then the CUDA tests whose bits depend on how users' models are
# compiled (lanes bit-identity, the force carried across calls), until DEADLINE s after start.
#   OUT=dir [DEADLINE=560] bash benchmarks/probes/fmad_cost.sh
set -uo pipefail
source benchmarks/device_env.sh
OUT=${OUT:-gpu_logs}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
pids=()
python3 benchmarks/prebuild_models.py extension > "$OUT/build_extension.log" 2>&1 & pids+=($!)
for form in hand torch; do for dtype in float32 float64; do for flags in fmad=false default; do
  python3 benchmarks/probes/fmad_cost.py --build-only --form $form --dtype $dtype --flags $flags \
    > "$OUT/build_${form}_${dtype}_${flags}.log" 2>&1 & pids+=($!)
done; done; done
for p in "${pids[@]}"; do wait "$p" || echo "a build failed (pid $p)"; done
echo "builds done at ${SECONDS}s"; tail -n 2 "$OUT"/build_*.log | grep -E "built|rror" | head -20
for dtype in float32 float64; do
  python3 benchmarks/probes/fmad_cost.py --chains 4096 --dtype $dtype 2>&1 | tee -a "$OUT/fmad_cost.log"
done
left=$(( ${DEADLINE:-560} - SECONDS )); echo "tests get ${left}s"
timeout $left python3 -m pytest -v -m cuda -p no:cacheprovider -n 12 --timeout $((left - 10)) \
  --tb=short tests/unit/test_force_carry.py tests/unit/test_block_lanes.py \
  tests/unit/test_torch_model_lanes.py tests/unit/test_lane_rows.py tests/unit/test_diamonds_lanes.py \
  > "$OUT/tests.log" 2>&1
echo "tests rc=$? $(grep -c ' PASSED' "$OUT/tests.log") passed, $(grep -c ' FAILED' "$OUT/tests.log") failed"
grep -E ' FAILED|^FAILED|ERROR' "$OUT/tests.log" | head -20; tail -n 3 "$OUT/tests.log"
cat "$OUT/fmad_cost.log"
