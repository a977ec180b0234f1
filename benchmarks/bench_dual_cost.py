"""What dual-number gradients cost against hand-written ones (issue 14): gradient evaluations per
second of a model's CppTarget in the sampling kernel (bench_models.gradient_rate), both ways, for
eight schools (dim 10, one dual pass of width 10) and logistic regression (dim 25, 1000 rows,
four passes of width 8). Usage: python benchmarks/bench_dual_cost.py [--device cpu|cuda]
[--chains N] [--out file.json]; on the CPU one thread (the per-chain cost, not the parallelism)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--chains", type=int, default=64)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ["FUSED_HMC_BENCH_DEVICE"] = args.device
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch

    import bench_models
    from fused_hmc import models

    if args.device == "cpu":
        torch.set_num_threads(1)
    rows = {}
    for name in ("eight_schools", "logistic_regression"):
        model = getattr(models, name)()
        rate = {g: bench_models.gradient_rate(model, args.chains, g, torch.float32)
                ["gradients_per_second"] for g in (False, True)}
        rows[name] = {"duals_per_second": rate[False], "hand_written_per_second": rate[True],
                      "dual_cost": rate[True] / rate[False]}
        print(name, rows[name], flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"device": args.device, "chains": args.chains,
                                              "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
