"""Compiles models' CUDA modules in parallel processes before a device session's tests and
benchmarks use them (each module build is single-threaded work for nvcc and g++; a GPU machine's
cores build several at once). Usage: python benchmarks/prebuild_models.py eight_schools:duals:f32
diamonds:hand:f64:16 diamonds:hand:f64:direct:dense ... (model:gradient:dtype[:option...]; the
options: lanes, 1 .. 32 for a rows-form model, default lanes="auto"'s choice at 4,096 chains;
"direct", the model's qr=False form; "dense", the module with the dense-mass kernels);
"extension" builds the extension itself."""
from __future__ import annotations

import subprocess
import sys
import time

_BUILD = """
import torch
from fused_hmc import models
model = getattr(models, {name!r})(**{model_options!r})
target = model.target(gradient={gradient})
cuda = torch.device("cuda")
target.module({dtype}, cuda, {lanes} or target.lanes_for(4096, cuda), dense_mass={dense})
print("built", {spec!r}, flush=True)
"""
_EXTENSION = "import fused_hmc; fused_hmc.load_extension(); print('built the extension', flush=True)"


def main() -> None:
    start = time.perf_counter()
    procs = []
    for spec in sys.argv[1:]:
        if spec == "extension":
            procs.append((spec, subprocess.Popen([sys.executable, "-c", _EXTENSION])))
            continue
        name, gradient, dtype, *options = spec.split(":")
        lanes = [int(o) for o in options if o.isdigit()]
        code = _BUILD.format(name=name, gradient=gradient == "hand", spec=spec,
                             dtype={"f32": "torch.float32", "f64": "torch.float64"}[dtype],
                             lanes=lanes[0] if lanes else None, dense="dense" in options,
                             model_options={"qr": False} if "direct" in options else {})
        procs.append((spec, subprocess.Popen([sys.executable, "-c", code])))
    failed = [spec for spec, p in procs if p.wait() != 0]
    print(f"prebuilt {len(procs) - len(failed)} of {len(procs)} modules in "
          f"{time.perf_counter() - start:.0f} s" + (f"; failed: {failed}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
