"""Command line: ``fused-hmc sample|validate|bench`` (also ``python -m fused_hmc``)."""
from __future__ import annotations

import argparse
import time

import torch


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _sample(args: argparse.Namespace) -> int:
    from .transition import hmc_step

    device = torch.device(args.device or default_device())
    gen_device = device if device.type == "cuda" else "cpu"
    torch.manual_seed(args.seed)
    q = torch.randn(args.chains, args.dim, device=device, generator=None)
    mu = torch.zeros(args.dim, device=device)
    hmc_step(q, mu, step_size=args.step_size, num_leapfrog_steps=args.leapfrog)  # build + warm-up
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    accepted = torch.zeros(args.chains, device=device)
    total = torch.zeros(args.chains, args.dim, device=device)
    total_sq = torch.zeros_like(total)
    start = time.perf_counter()
    for _ in range(args.samples):
        q, acc = hmc_step(q, mu, step_size=args.step_size, num_leapfrog_steps=args.leapfrog)
        accepted += acc
        total += q
        total_sq += q * q
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    mean = total / args.samples
    var = total_sq / args.samples - mean ** 2
    print(f"device {device} ({gen_device}), {args.chains} chains x {args.dim} dims, "
          f"{args.samples} transitions, L={args.leapfrog}, eps={args.step_size}")
    print(f"acceptance rate     {accepted.mean().item() / args.samples:.4f}")
    print(f"mean of coordinates {mean.mean().item():+.4f}  (truth 0)")
    print(f"variance            {var.mean().item():.4f}   (truth 1)")
    print(f"time                {elapsed:.3f} s ({1e6 * elapsed / args.samples:.1f} us/transition)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fused-hmc", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sample = sub.add_parser("sample", help="run many chains on N(0, I) and report")
    sample.add_argument("--chains", type=int, default=2048)
    sample.add_argument("--dim", type=int, default=64)
    sample.add_argument("--samples", type=int, default=1000)
    sample.add_argument("--leapfrog", type=int, default=10)
    sample.add_argument("--step-size", type=float, default=0.1)
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--device", choices=["cpu", "cuda"], default=None)
    sample.set_defaults(run=_sample)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)
