"""The targets of test_block_lanes.py, and a CLI that builds their modules ahead, in parallel.

A logistic regression over ROWS = 65,573 generated rows (P = 256 strided partials: more than
fused_hmc.lanes.BLOCK_ROWS; not a multiple of 256, so the lanes' shares differ in size), K = 3
predictors and an intercept, in two forms:

- ``rows_target(lanes)``: a C++ rows-form CppTarget (log_density_rows and its hand-written
  gradient);
- ``generated_target(lanes)``: the same density written in PyTorch, compiled by TorchModel (the
  generated rows form).

Each lanes is its own module (minutes of nvcc each), so on the GPU machine build them first:

    python -m tests.unit._block_lanes_targets --jobs 8           # every module the cuda tests use
    python -m tests.unit._block_lanes_targets --device cpu --jobs 2     # the CPU tests' ones
"""
from __future__ import annotations

import argparse
import concurrent.futures
import functools
import subprocess
import sys
import time

import torch

from ._rows_logistic import GRADIENT, SHARE

ROWS, K = 65_573, 3
DIM = K + 1  # the coefficients, then the intercept
EVERY_LANES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
GENERATED_LANES = (1, 32, 256)  # the generated form: a warp's extremes and a block



@functools.cache
def data() -> dict:
    """XT [K, ROWS] (by column, so a warp's lanes read neighbouring rows) and y [ROWS] in {0, 1},
    from y ~ Bernoulli(sigmoid(X beta + 0.3)), beta = (0.8, -0.5, 0.3)."""
    gen = torch.Generator().manual_seed(35)
    X = torch.randn(ROWS, K, generator=gen, dtype=torch.float64)
    eta = X @ torch.tensor([0.8, -0.5, 0.3], dtype=torch.float64) + 0.3
    y = (torch.rand(ROWS, generator=gen, dtype=torch.float64) < torch.sigmoid(eta)).double()
    return {"XT": X.T.contiguous(), "y": y}


def log_prob(x: torch.Tensor, d: dict) -> torch.Tensor:
    """The torch reference of the density at one x [DIM]."""
    eta = d["XT"].T.to(x.dtype) @ x[:K] + x[K]
    y = d["y"].to(x.dtype)
    return (y * eta - torch.nn.functional.softplus(eta)).sum() - 0.125 * (x * x).sum()


def _torch_fn(p, d):
    beta, alpha = p["beta"], p["alpha"]
    eta = d["XT"].T @ beta + alpha
    prior = -0.125 * ((beta * beta).sum() + alpha * alpha)
    return (d["y"] * eta - torch.nn.functional.softplus(eta)).sum() + prior


@functools.cache
def rows_target(lanes):
    from fused_hmc import CppTarget

    return CppTarget(SHARE + GRADIENT, DIM, data=data(), log_prob=log_prob, gradient=True,
                     lanes=lanes)


@functools.cache
def generated_target(lanes):
    from fused_hmc import TorchModel

    return TorchModel(_torch_fn, {"beta": (K,), "alpha": ()}, data=data(), lanes=lanes)


def modules(device: str) -> list[tuple[str, str, int]]:
    """(device, form, lanes) of every float64 module the tests take with `device`: on "cuda",
    every lanes of both forms and the CPU module the CUDA draws are compared with."""
    cpu = [("cpu", "rows", 1)]
    if device == "cpu":
        return cpu
    return ([("cuda", "rows", g) for g in EVERY_LANES]
            + [("cuda", "generated", g) for g in GENERATED_LANES] + cpu)


def build(device: str, form: str, lanes: int) -> float:
    """Builds (or finds built) one module; returns its seconds."""
    start = time.perf_counter()
    target = (rows_target if form == "rows" else generated_target)(lanes)
    target.module(torch.float64, torch.device(device), lanes)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description="Build test_block_lanes.py's modules ahead.")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--jobs", type=int, default=4, help="modules built at once (processes)")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # DEVICE:FORM:LANES
    args = parser.parse_args()
    if args.one is not None:
        device, form, lanes = args.one.split(":")
        print(f"{args.one}: {build(device, form, int(lanes)):.0f} s", flush=True)
        return 0
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")

    def child(module) -> int:
        return subprocess.run([sys.executable, "-m", "tests.unit._block_lanes_targets",
                               "--one", ":".join(map(str, module))], check=False).returncode

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        codes = list(pool.map(child, modules(args.device)))
    failed = [m for m, c in zip(modules(args.device), codes) if c != 0]
    if failed:
        print(f"failed: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
