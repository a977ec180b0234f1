"""Writes the generated CUDA sources of a few library models' CppTarget modules (one folder each)
so that .ci/compile_cuda.py --user-kernels compiles them: the kernels users' models run in (one
thread a chain, duals; a chain over lanes, a hand-written gradient; code that TorchModel generates
from the models' torch forms, one thread a chain and in the rows form over lanes; block lanes,
a block of up to 256 threads a chain over data of 65,536 rows and more; a dense mass's kernels),
which the extension's own sources do not instantiate. Run with the CPU venv (it needs the
package); nothing is compiled here.
Usage: python .ci/generate_user_kernels.py OUT_DIR
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from fused_hmc import cpp_build, models
from fused_hmc.lanes import BLOCK_ROWS, choose_lanes

H200_SMS = 132  # what lanes="auto" reads from the GPU (CI has none): the H200's SM count

# (model, hand-written gradient, dtype, lanes): one thread a chain with duals; a rows-form model
# on 8 lanes, on 16 (lanes="auto"'s choice at 4,096 chains on an H200) and on one lane (its 32
# partials and their stack of gradients in one thread: the most registers).
MODULES = (("eight_schools", False, torch.float64, 1), ("diamonds", True, torch.float32, 8),
           ("diamonds", True, torch.float64, 16), ("diamonds", True, torch.float64, 1))
# (model, dtype): the torch form compiled by TorchModel (lanes="auto": one thread a chain for
# eight schools, the rows form for diamonds), on the lanes "auto" takes at 4,096 chains on an H200.
TORCH_MODULES = (("eight_schools", torch.float32), ("diamonds", torch.float64))
# Block lanes: the library's logistic regression (k = 25) over BLOCK_ROWS generated rows, its
# torch form (so P = 256 partials), in float64 on 256 lanes ("auto"'s choice), on 64 (the
# smallest block) and on one lane (256 partials and their 8-level stack of gradients in one
# thread: the most registers; its spills are reported, not failed, as every user kernel's).
BLOCK_LANES = (256, 64, 1)
# The kernels of a dense mass (the second module a run with mass_matrix="dense" builds): diamonds'
# direct form, the model a dense mass serves, on lanes="auto"'s 16 lanes.
DENSE_MODULES = (("diamonds", {"qr": False}, torch.float64, 16),)


def write(out: Path, label: str, spec) -> None:
    folder = out / label
    folder.mkdir(parents=True, exist_ok=True)
    for file, text in cpp_build.generated_files(spec).items():
        (folder / file).write_text(text)
    print(f"generated {folder}")


def main() -> None:
    out = Path(sys.argv[1])
    for name, hand, dtype, lanes in MODULES:
        spec = getattr(models, name)().target(gradient=hand).build_spec(dtype, "cuda", lanes)
        write(out, f"{name}_{'hand' if hand else 'duals'}_{spec.scalar}_lanes{lanes}", spec)
    for name, dtype in TORCH_MODULES:
        target = getattr(models, name)().torch_form().model()
        lanes = target.lanes if target.lanes != "auto" else choose_lanes(
            4096, H200_SMS, target.data_rows)
        spec = target.build_spec(dtype, "cuda", lanes)
        write(out, f"{name}_torch_{spec.scalar}_lanes{lanes}", spec)
    for name, options, dtype, lanes in DENSE_MODULES:
        target = getattr(models, name)(**options).target(gradient=True)
        spec = target.build_spec(dtype, "cuda", lanes, dense_mass=True)
        write(out, f"{name}_direct_hand_{spec.scalar}_lanes{lanes}_dense", spec)
    block = models.logistic_regression(n=BLOCK_ROWS).torch_form().model()
    assert block.row_partials == 256, block.row_partials
    for lanes in BLOCK_LANES:
        spec = block.build_spec(torch.float64, "cuda", lanes)
        write(out, f"logistic_regression_torch_{spec.scalar}_p256_lanes{lanes}", spec)


if __name__ == "__main__":
    main()
