#!/usr/bin/env bash
# The CUDA tests on a GPU machine within one device call: the light tests first (the main
# library's kernels), then the heavy ones (users' compiled models, dual numbers, the README,
# distributed, posteriordb, the lanes tests, whose user modules take minutes to build, and the two
# slowest light ones), one set after the other so they do not fight for the CPUs that build user
# modules. Each test's result is logged as it ends (-v). A test
# is stopped after TEST_S seconds (pytest-timeout: it fails with its traceback; heavy tests that
# build a model's CUDA modules get HEAVY_TEST_S, since two builds took over 100 s), well inside the
# set's limit, so that pytest reaches its summary and prints every failure's traceback: a run cut
# by the call's limit names what failed but not why. Usage:
#   OUT=dir [SETS="light heavy"] [LIGHT_S=200] [HEAVY_S=300] [TEST_S=120] [HEAVY_TEST_S=240] \
#     bash benchmarks/device_tests.sh [pytest arguments for the heavy set ...]
set -uo pipefail
source benchmarks/device_env.sh
OUT=${OUT:-gpu_logs}; mkdir -p "$OUT"
HEAVY=(tests/unit/test_dual.py tests/unit/test_models.py tests/unit/test_cpp_target.py
       tests/unit/test_cli_models.py tests/unit/test_readme.py tests/unit/test_distributed.py
       tests/statistical/test_posteriordb.py tests/unit/test_force_carry.py
       tests/unit/test_cuda_torch_stream.py::test_one_thousand_seeded_calls_count_near_ties
       tests/unit/test_properties.py::test_cuda_matches_reference_and_cpu_build
       tests/unit/test_diamonds_lanes.py tests/unit/test_chain_block.py tests/unit/test_lane_rows.py
       tests/unit/test_block_lanes.py tests/unit/test_torch_model_lanes.py)
ignore=(); for f in "${HEAVY[@]}"; do
  if [[ $f == *::* ]]; then ignore+=("--deselect=$f"); else ignore+=("--ignore=$f"); fi
done
run() {  # name, seconds, per-test seconds, pytest arguments...
  local name=$1 seconds=$2 per_test=$3; shift 3
  timeout "$seconds" python3 -m pytest -v -m cuda -p no:cacheprovider -p no:benchmark -rf \
    --timeout "$per_test" --tb=short --junitxml="$OUT/$name.xml" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: rc=$? $(grep -c ' PASSED' "$OUT/$name.log") passed, $(grep -c ' FAILED' "$OUT/$name.log") failed"
  grep ' FAILED' "$OUT/$name.log" | head -20
}
sets=" ${SETS:-light heavy} "
[[ $sets == *" light "* ]] &&
  run cuda_light "${LIGHT_S:-200}" "${TEST_S:-120}" -n 12 tests/unit tests/statistical/test_chees.py \
    "${ignore[@]}"
[[ $sets == *" heavy "* ]] &&
  run cuda_heavy "${HEAVY_S:-300}" "${HEAVY_TEST_S:-240}" -n 12 "${HEAVY[@]}" "$@"
