#!/usr/bin/env bash
# Device calls for issue 32's side by side (benchmarks/bench_chees.py, results/chees/README.md).
# fused_hmc's rows need their modules built and BlackJAX's and NumPyro's need none, so the work
# splits into two calls that fit 10 minutes each:
#   PART=fused: every target's modules built at once, the CUDA tests in $TESTS, then fused_hmc's
#               rows (bench_chees --no-jax) into $OUT/bench_chees_fused.json;
#   PART=jax:   BlackJAX's and NumPyro's rows (bench_chees --no-fused) into $OUT/bench_chees_jax.json.
# Usage: OUT=dir PART=fused|jax [TARGETS="eight_schools funnel ..."] [TESTS="tests/... ..."]
#        [BUILDS="funnel:duals:f64 ..."] [FUSED_ARGS="--fused-configs ..."]
#        [DEADLINE_S=570] bash benchmarks/adaptation_device.sh
set -uo pipefail
source benchmarks/device_env.sh
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$PWD/.ext}  # kept by a warm machine's next call
OUT=${OUT:-gpu_logs}; mkdir -p "$OUT"
TARGETS=${TARGETS:-eight_schools logistic_regression funnel diamonds diamonds_direct}
t0=$SECONDS
left() { echo $(( ${DEADLINE_S:-570} - (SECONDS - t0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"

if [[ "${PART:-fused}" == fused ]]; then
  # The diagonal module serves the pooled warm-up's first phase and the per-chain rows; the
  # dense one the rows with mass_matrix="dense".
  specs=(extension)
  for t in $TARGETS; do
    case $t in
      funnel) specs+=(funnel:duals:f32 funnel:duals:f32:dense) ;;
      diamonds_direct) specs+=(diamonds:hand:f32:direct diamonds:hand:f32:direct:dense) ;;
      *) specs+=("$t:hand:f32" "$t:hand:f32:dense") ;;
    esac
  done
  [[ -n "${BUILDS:-}" ]] && specs=(extension $BUILDS)  # in place of the above
  python3 benchmarks/prebuild_models.py "${specs[@]}" > "$OUT/prebuild.log" 2>&1
  echo "builds: rc=$? at $((SECONDS - t0)) s: $(tail -1 "$OUT/prebuild.log")"
  if [[ -n "${TESTS:-}" ]]; then
    timeout "${TESTS_S:-150}" python3 -m pytest -q -m cuda -p no:cacheprovider -p no:benchmark \
      -rf -n 8 --timeout 140 $TESTS > "$OUT/tests.log" 2>&1
    echo "tests: rc=$? at $((SECONDS - t0)) s"; tail -4 "$OUT/tests.log"
  fi
  timeout "$(left)" python3 benchmarks/bench_chees.py --no-jax --targets $TARGETS ${FUSED_ARGS:-} \
    --out "$OUT/bench_chees_fused.json" > "$OUT/bench_chees_fused.log" 2>&1
  echo "fused rows: rc=$? at $((SECONDS - t0)) s"; tail -20 "$OUT/bench_chees_fused.log"
else
  budget=$(left)
  timeout "$budget" python3 benchmarks/bench_chees.py --no-fused --targets $TARGETS \
    --deadline $((budget - 15)) ${JAX_ARGS:-} --out "$OUT/bench_chees_jax.json" \
    > "$OUT/bench_chees_jax.log" 2>&1
  echo "JAX rows: rc=$? at $((SECONDS - t0)) s"; tail -16 "$OUT/bench_chees_jax.log"
fi
