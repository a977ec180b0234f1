#!/usr/bin/env bash
# One device call for fmad_cost.py: the extension, then the probe's modules built at once beside
# the CUDA tests whose bits depend on how users' models are compiled (the lanes' bit-identity, the
# force carried across calls, the fma of dual.h), then the probe's timings in float32 and float64
# alone on the GPU. Logs: $OUT/builds.log, tests.log, fmad_cost.log.
#   OUT=dir [FORMS="hand torch"] [TESTS_S=280] bash benchmarks/probes/fmad_cost.sh [tests ...]
set -uo pipefail
source benchmarks/device_env.sh
OUT=${OUT:-gpu_logs}; mkdir -p "$OUT"
FORMS=${FORMS:-hand torch}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
python3 benchmarks/prebuild_models.py extension > "$OUT/builds.log" 2>&1
echo "extension built at ${SECONDS}s"
pids=()
for form in $FORMS; do for dtype in float32 float64; do for flags in fmad=false default; do
  python3 benchmarks/probes/fmad_cost.py --build-only --form $form --dtype $dtype --flags $flags \
    >> "$OUT/builds.log" 2>&1 & pids+=($!)
done; done; done
tests=("$@")
(( ${#tests[@]} )) || tests=(tests/unit/test_force_carry.py tests/unit/test_block_lanes.py
  tests/unit/test_torch_model_lanes.py tests/unit/test_lane_rows.py tests/unit/test_diamonds_lanes.py
  tests/unit/test_dual.py)
tests_s=${TESTS_S:-280}
timeout "$tests_s" python3 -m pytest -v -m cuda -p no:cacheprovider -n 8 --timeout $((tests_s - 10)) \
  --tb=short "${tests[@]}" > "$OUT/tests.log" 2>&1
echo "tests rc=$? $(grep -c ' PASSED' "$OUT/tests.log") passed, $(grep -c ' FAILED' "$OUT/tests.log") failed at ${SECONDS}s"
for p in "${pids[@]}"; do wait "$p" || echo "a build failed (pid $p)"; done
echo "builds done at ${SECONDS}s"; grep -hE "^built|rror" "$OUT/builds.log" | head -20
for dtype in float32 float64; do
  python3 -W ignore benchmarks/probes/fmad_cost.py --chains 4096 --dtype $dtype \
    --forms "${FORMS// /,}" >> "$OUT/fmad_cost.log" 2>&1
done
grep -E 'PASSED|FAILED|ERROR' "$OUT/tests.log" | head -30; tail -n 2 "$OUT/tests.log"
grep -E "gradients/s|compiling|rror" "$OUT/fmad_cost.log"
