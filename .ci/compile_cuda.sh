#!/usr/bin/env bash
# Compiles every CUDA source of the extension (compile only: no GPU needed, nothing runs) and prints
# ptxas's registers, spills and stack per kernel; fails on a compile error or on spills in a kernel
# not in .ci/cuda_spill_allowlist.txt. Locally: `bash .ci/compile_cuda.sh` (reuses .venv-cuda and
# recompiles only sources whose inputs changed; --force recompiles all).
set -euo pipefail
cd "$(dirname "$0")/.."

# A CUDA build of torch, in its own venv so the CPU venv stays small: torch 2.14.1 is built with
# CUDA 13.0, the machines' nvcc. It lies on disk here (about 1 minute, 5.4 GB installed).
venv=${FUSED_HMC_CUDA_VENV:-.venv-cuda}
torch_version=2.14.1
has_torch="import torch, ninja, sys
sys.exit(not (torch.__version__.startswith('$torch_version') and torch.version.cuda))"
if ! "$venv/bin/python" -c "$has_torch" 2>/dev/null; then
    echo "setting up $venv (torch==$torch_version, CUDA build)"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet "torch==$torch_version" ninja
fi
venv=$(cd "$venv" && pwd)
PATH="$venv/bin:$PATH" exec "$venv/bin/python" .ci/compile_cuda.py "$@"
