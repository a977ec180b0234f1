#!/usr/bin/env bash
# An A/B on one GPU: the chain kernels of OLD (an export of an older commit, e.g.
# `git archive 24b6070 csrc fused_hmc pyproject.toml | tar -x -C device_old`) and of this checkout,
# built in parallel, then timed one after the other by bench_chain_kernel.py. Usage:
#   OUT=dir [OLD_API=sample] bash benchmarks/chain_kernel_ab.sh device_old   (OLD_API: the op the
#   old tree's chains run through, "run" before the sample/warmup split)
set -uo pipefail
old=${1:?the old tree}; OUT=${OUT:-gpu_logs}; mkdir -p "$OUT"
export TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=8 PYTHONUNBUFFERED=1
build() {  # tree, extensions dir
  (cd "$1" && TORCH_EXTENSIONS_DIR=$2 python3 -c \
    "import fused_hmc._build as b; b.load_extension(); assert b.has_cuda_kernels()")
}
build "$old" /tmp/ext_old > "$OUT/build_old.log" 2>&1 & old_pid=$!
build . /tmp/ext_new > "$OUT/build_new.log" 2>&1 || { echo "new build failed"; tail -30 "$OUT/build_new.log"; }
wait $old_pid || { echo "old build failed"; tail -30 "$OUT/build_old.log"; }
TORCH_EXTENSIONS_DIR=/tmp/ext_old python3 benchmarks/bench_chain_kernel.py --tree "$old" --api "${OLD_API:-run}" \
  --out "$OUT/chain_kernel_old.json"
TORCH_EXTENSIONS_DIR=/tmp/ext_new python3 benchmarks/bench_chain_kernel.py --tree . --api sample \
  --out "$OUT/chain_kernel_new.json"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
old, new = (json.load(open(f"{out}/chain_kernel_{k}.json"))["rows"] for k in ("old", "new"))
print(f"{'workload':58s} {'old us':>9s} {'new us':>9s} {'new/old':>8s}")
for a, b in zip(old, new):
    print(f"{a['workload']:58s} {a['seconds']*1e6:9.2f} {b['seconds']*1e6:9.2f} "
          f"{b['seconds']/a['seconds']:8.3f}")
PY
