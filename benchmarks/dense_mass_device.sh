#!/usr/bin/env bash
# One device call for the dense mass on CUDA (issue 32): the builds in parallel (the extension,
# the diamonds modules, the eight-schools modules of test_cpp_target's dense test, and
# test_block_lanes' generated modules), the CUDA tests of the dense mass and of what it touched,
# then diamonds at 4,096 chains: its direct form with the pooled dense mass beside its QR form with
# the diagonal one (benchmarks/probes/diamonds_dense.py). Logs and JSON go to $OUT.
# Usage: OUT=dir [TESTS_S=300] [DEADLINE_S=585] bash benchmarks/dense_mass_device.sh (the benchmark
# gets what is left until DEADLINE_S seconds after the start).
set -uo pipefail
source benchmarks/device_env.sh
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$PWD/.ext}  # kept by a warm machine's next call
OUT=${OUT:-gpu_logs}; mkdir -p "$OUT"
t0=$SECONDS
stamp() { echo "$1: rc=$2 at $((SECONDS - t0)) s"; }

python3 benchmarks/prebuild_models.py extension diamonds:hand:f64 diamonds:hand:f64:direct \
  diamonds:hand:f64:direct:dense \
  > "$OUT/prebuild.log" 2>&1 &
python3 - > "$OUT/prebuild_eight_schools.log" 2>&1 <<'EOF' &
import torch
from fused_hmc import CppTarget
from tests.unit.test_cpp_target import DIM, SOURCE, data
target = CppTarget(SOURCE, DIM, data=data())
for device, dense in (("cpu", False), ("cuda", False), ("cuda", True)):
    target.module(torch.float64, torch.device(device), 1, dense_mass=dense)
print("built", flush=True)
EOF
for g in 1 32 256; do
  python3 -m tests.unit._block_lanes_targets --one "cuda:generated:$g" > "$OUT/generated_$g.log" 2>&1 &
done
wait
stamp builds 0
grep -sE "spill|Used [0-9]+ registers" "$OUT"/*.log | grep -i dense | sort | uniq -c | sort -rn | head -5

timeout "${TESTS_S:-300}" python3 -m pytest -v -m cuda -p no:cacheprovider -p no:benchmark -rf \
  --timeout 200 --tb=short -n 8 \
  tests/unit/test_cuda_dense_mass.py tests/statistical/test_dense_mass.py \
  tests/unit/test_cuda_chain_kernels.py ${EXTRA_TESTS:-} \
  tests/unit/test_cpp_target.py::test_a_dense_mass_on_cuda_builds_its_kernels_and_agrees_with_cpu \
  tests/unit/test_block_lanes.py::test_generated_draws_are_bit_identical_for_warp_and_block_lanes \
  tests/unit/test_bad_input.py::test_per_chain_chees_runs_on_the_cpu_and_is_refused_on_cuda \
  tests/unit/test_chees.py::test_per_chain_chees_is_refused_on_cuda > "$OUT/tests.log" 2>&1
stamp tests $?
grep -E " FAILED|^FAILED|^ERROR|passed|failed" "$OUT/tests.log" | tail -25

bench_s=$(( ${DEADLINE_S:-585} - (SECONDS - t0) )); (( bench_s < 30 )) && bench_s=30
timeout "$bench_s" python3 benchmarks/probes/diamonds_dense.py --device cuda --chains 4096 \
  --warmup 1000 --draws 1000 --configs qr_diagonal direct_dense_pooled \
  --out "$OUT/diamonds_dense_cuda.json" > "$OUT/diamonds_dense.log" 2>&1
stamp diamonds $?
cat "$OUT/diamonds_dense.log" | tail -4
