"""Probe (issue 32): the terminal fast interval of a pooled step size on the harmonic mean (ChEES's
default statistic), Stan's 50 iterations against longer ones.

    python benchmarks/probes/harmonic_terminal.py --model eight_schools --chains 1024 \
        --terms 50 150 300 --seeds 2 3 4 5 6 7

Runs ChEES (pooled, harmonic mean) from Stan's starts, uniform(-2, 2) with the seed, float64, on
the CPU, 1000 + 1000, adapt_windows=(75, 25, TERM); prints per run the step size, the chains' mean
acceptance in sampling, the chains that never accepted, and the smallest bulk ESS (arviz-stats,
over the unconstrained coordinates) per 1,000 sampling gradients.

Measured on the 2-core development machine (eps / accept / ESS per 1,000 sampling gradients):

    eight schools, 1024 chains, seeds 2..7
      term  50: eps 0.229 0.186 0.185 0.197 0.206 0.212   ESS 71.3 56.1 54.9 57.9 61.2 64.4 (mean 61.0)
      term 150:            -     - 0.216 0.225 0.207 0.216   ESS    -    - 62.8 66.1 63.5 67.0
      term 300: eps 0.230 0.237 0.232 0.233 0.233 0.240   ESS 70.6 69.6 67.1 68.1 69.7 73.9 (mean 69.8)
      accept 0.983-0.987 at 50, 0.978-0.979 at 300; no chain stuck.
    logistic regression, 256 chains, seeds 2, 3
      term  50: eps 0.592 0.599, accept 0.839 0.837, ESS 148.8 161.8
      term 300: eps 0.677 0.700, accept 0.782 0.769, ESS 156.3 167.5
    diamonds (QR form), 128 chains, seeds 2, 3
      term  50: eps 0.649 0.597, accept 0.817 0.846, ESS 124.7 140.1
      term 300: eps 0.698 0.689, accept 0.782 0.790, ESS 120.5 132.4 (4% below)
    funnel, 1024 chains, seeds 2, 3 (stuck: chains with no accepted sampling transition)
      term  50: eps 0.0050 0.0046, stuck 0 1
      term 300: eps 0.0063 0.0091, stuck 0 2

The statistic is set by the chains that accept least, so it jumps from transition to transition;
50 iterations of dual averaging after the restart at 10x the step size leave exp(x_bar) low and
seed-dependent. 300 iterations settle eight schools at BlackJAX's step size (0.221 on the H100,
results/chees/README.md). Hence HARMONIC_WINDOWS (fused_hmc/sampling/warmup.py).
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from arviz_stats.base import array_stats

import fused_hmc
from fused_hmc import models


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="eight_schools", choices=sorted(models.MODELS))
    parser.add_argument("--chains", type=int, default=1024)
    parser.add_argument("--terms", type=int, nargs="+", default=[50, 300])
    parser.add_argument("--seeds", type=int, nargs="+", default=[2, 3])
    args = parser.parse_args()
    model = models.MODELS[args.model]()
    target = model.target(gradient=model.gradient_source is not None)
    for seed in args.seeds:
        q0 = 4 * torch.rand(args.chains, model.dim, dtype=torch.float64,
                            generator=torch.Generator().manual_seed(seed)) - 2
        for term in args.terms:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", fused_hmc.StuckChainsWarning)
                res = fused_hmc.sample(q0, 1000, target=target, num_warmup=1000, seed=seed,
                                       progress=False, adapt_trajectory_length=True,
                                       adapt_windows=(75, 25, term))
            x = res.samples.double().numpy()
            ess = float(np.min(array_stats.ess(x, chain_axis=0, draw_axis=1, method="bulk")))
            print(f"{args.model} seed {seed} term {term:4d}: eps "
                  f"{float(res.step_size.flatten()[0]):.4f} accept "
                  f"{float(res.mean_accept_prob.mean()):.3f} stuck "
                  f"{int((res.accept_count == 0).sum())} ESS per 1,000 sampling gradients "
                  f"{1000 * ess / float(res.sampling_gradient_evaluations):.2f} "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
