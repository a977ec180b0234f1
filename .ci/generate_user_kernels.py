"""Writes the generated CUDA sources of a few library models' CppTarget modules (one folder each)
so that .ci/compile_cuda.py --user-kernels compiles them: the kernels users' models run in (one
thread a chain, duals; a chain over lanes, a hand-written gradient), which the extension's own
sources do not instantiate. Run with the CPU venv (it needs the package); nothing is compiled here.
Usage: python .ci/generate_user_kernels.py OUT_DIR
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from fused_hmc import cpp_build, models

# (model, hand-written gradient, dtype): one thread a chain with duals; 8 lanes a chain.
MODULES = (("eight_schools", False, torch.float64), ("diamonds", True, torch.float32))


def main() -> None:
    out = Path(sys.argv[1])
    for name, hand, dtype in MODULES:
        spec = getattr(models, name)().target(gradient=hand).build_spec(dtype, "cuda")
        folder = out / f"{name}_{'hand' if hand else 'duals'}_{spec.scalar}"
        folder.mkdir(parents=True, exist_ok=True)
        for file, text in cpp_build.generated_files(spec).items():
            (folder / file).write_text(text)
        print(f"generated {folder}")


if __name__ == "__main__":
    main()
