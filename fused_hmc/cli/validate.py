"""``fused-hmc validate``: the statistical validation suite; exit status 1 on any failure."""
from __future__ import annotations

import argparse
import time

import torch

from .flag_types import device as device_of


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from ..validation import report
    from ..validation.suite import FULL, QUICK, describe_budget, run_suite

    device = device_of(args.device)
    config = QUICK if args.quick else FULL
    if args.seed is not None:
        config = replace(config, seed=args.seed)
    print(f"fused_hmc validate: {'quick' if args.quick else 'full'} suite on {device} "
          f"(torch {torch.__version__}), seed {config.seed}", flush=True)
    start = time.perf_counter()
    result = run_suite(device, config=config,
                       progress=lambda name: print(f"  running {name} ...", flush=True))
    print(report.format_table(result.results, details=args.details))
    print(describe_budget(result))
    print(f"time {time.perf_counter() - start:.1f} s ("
          + ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items()) + ")")
    print(report.format_summary(result.results))
    return 0 if result.passed else 1
