"""``fused-hmc bench``: a quick side-by-side benchmark against the pure-torch reference."""
from __future__ import annotations

import argparse

import torch

from .flag_types import device as device_of


def run(args: argparse.Namespace) -> int:
    from ..bench import format_table, run_bench

    device = device_of(args.device)
    gpu = device.type == "cuda"
    chains = args.chains or (2048 if gpu else 256)
    transitions = args.transitions or (1000 if gpu else 100)
    print(f"fused-hmc bench on {device} (torch {torch.__version__}): {chains} chains x "
          f"{args.dim} dims, N(0, I), L={args.leapfrog}, eps=0.1, {args.dtype}", flush=True)
    rows = run_bench(device, chains, args.dim, args.leapfrog, transitions, args.seconds,
                     getattr(torch, args.dtype))
    print(format_table(rows))
    print("ratio: reference time / fused_hmc time (higher: fused_hmc faster). One transition: "
          "the HMC module against the reference Model, same draws, outputs checked equal; "
          "chained: fused_hmc.sample (moments and acceptance on the device) against the "
          "reference transition in a Python loop. Medians of back-to-back calls.")
    return 0
