"""What compiling users' models with nvcc --fmad=false costs (fused_hmc/_build.py's
USER_CUDA_FLAGS): gradient evaluations per second of diamonds (rows form, 5,000 rows, lanes auto)
at a fixed small step size and L = 8, in its hand-written C++ form and its PyTorch form
(TorchModel), each module built with the flag and without it (the flag dropped in the process, so
the module's build name differs too). Each figure is the best of 3 timed calls after an untimed
one; the flag's rows are timed again last, to show the drift between repeats.

    python3 benchmarks/probes/fmad_cost.py --build-only --form torch --dtype float32 --flags default
    python3 benchmarks/probes/fmad_cost.py --chains 4096 --dtype float32   # on a GPU

--build-only builds one module and exits (run one process per module, all at once, before the
timed run: each build is single-threaded work for nvcc; build the extension first).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import fused_hmc  # noqa: E402
from fused_hmc import _build, models  # noqa: E402

FLAGS = {"fmad=false": ("--fmad=false",), "default": ()}


def make_target(form: str, flags: str):
    """A fresh target of diamonds in `form` whose module is built with `flags` (a key of FLAGS)."""
    _build.USER_CUDA_FLAGS = FLAGS[flags]
    model = models.diamonds()
    return model.torch_form().model() if form == "torch" else model.target(gradient=True)


def gradient_rate(target, q0: torch.Tensor, transitions: int) -> float:
    """Best of 3 of (gradients / s) for `transitions` transitions from q0."""
    kw = dict(target=target, num_warmup=0, step_size=1e-3, num_leapfrog_steps=8, seed=1,
              progress=False)
    fused_hmc.sample(q0, 2, **kw)  # builds or loads the module
    best = 0.0
    for _ in range(3):
        torch.cuda.synchronize()
        start = time.perf_counter()
        result = fused_hmc.sample(q0, transitions, **kw)
        torch.cuda.synchronize()
        best = max(best, result.sampling_gradient_evaluations / (time.perf_counter() - start))
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=4096)
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    parser.add_argument("--transitions", type=int, default=40)
    parser.add_argument("--forms", default="hand,torch")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--form", default="hand", choices=("hand", "torch"))
    parser.add_argument("--flags", default="fmad=false", choices=tuple(FLAGS))
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    cuda = torch.device("cuda")
    q0 = models.diamonds().initial_point(args.chains, dtype=dtype,
                                         generator=torch.Generator().manual_seed(0)).to(cuda)
    if args.build_only:  # by the timed run's own path, so that it finds this very module
        fused_hmc.sample(q0, 2, target=make_target(args.form, args.flags), num_warmup=0,
                         step_size=1e-3, num_leapfrog_steps=8, seed=1, progress=False)
        print(f"built {args.form} {args.dtype} {args.flags}", flush=True)
        return
    for form in args.forms.split(","):
        rows = [(flags, gradient_rate(make_target(form, flags), q0, args.transitions))
                for flags in ("fmad=false", "default", "fmad=false")]
        for flags, rate in rows:
            print(f"{form:5s} {args.dtype:7s} {flags:10s} {rate:.4g} gradients/s "
                  f"({rate / rows[1][1]:.3f}x nvcc's default)", flush=True)


if __name__ == "__main__":
    main()
