"""What compiling users' models with nvcc --fmad=false costs (fused_hmc/_build.py's
USER_CUDA_FLAGS): gradient evaluations per second of a rows-form model, the library's diamonds
with its hand-written gradient (lanes auto), at a fixed small step size and L = 8, its module
built with the flag, without it (the flag dropped in this process, so the module's build name
differs too), and with it again. Each figure is the best of 3 timed calls after an untimed one.

    python3 benchmarks/probes/fmad_cost.py --chains 4096 --dtype float32   # on a GPU
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


def gradient_rate(q0: torch.Tensor, transitions: int) -> float:
    """Best of 3 of (gradients / s) for `transitions` transitions from q0, with a fresh target
    (so that its module is built with the flags now in force)."""
    target = models.diamonds().target(gradient=True)
    kw = dict(target=target, num_warmup=0, step_size=1e-3, num_leapfrog_steps=8, seed=1,
              progress=False)
    fused_hmc.sample(q0, 2, **kw)  # builds or loads the module
    best = 0.0
    for _ in range(3):
        if q0.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        result = fused_hmc.sample(q0, transitions, **kw)
        if q0.is_cuda:
            torch.cuda.synchronize()
        best = max(best, result.sampling_gradient_evaluations / (time.perf_counter() - start))
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--chains", type=int, default=4096)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--transitions", type=int, default=40)
    args = parser.parse_args()
    q0 = models.diamonds().initial_point(args.chains, dtype=getattr(torch, args.dtype),
                                         generator=torch.Generator().manual_seed(0))
    q0 = q0.to(args.device)
    flags = _build.USER_CUDA_FLAGS
    rows = [("--fmad=false", gradient_rate(q0, args.transitions))]
    _build.USER_CUDA_FLAGS = ()
    rows.append(("nvcc's default (contraction)", gradient_rate(q0, args.transitions)))
    _build.USER_CUDA_FLAGS = flags
    rows.append(("--fmad=false again", gradient_rate(q0, args.transitions)))
    for label, rate in rows:
        print(f"{label:30s} {rate:.4g} gradients/s  ({rate / rows[1][1]:.3f}x the default's)")


if __name__ == "__main__":
    main()
