"""Probe (issue 32): the acceptance the warm-up's step sizes give in sampling, per chain and pooled,
on the library models from Stan's starts, and how many chains never accept a move.

    python benchmarks/probes/final_acceptance.py --models eight_schools logistic_regression \
        --chains 128 --warmup 1000 --samples 300 [--pooled] [--chees]

Prints, per model, quantiles over chains of the mean acceptance statistic min(1, exp(log_alpha))
in sampling, the pooled mean, the step sizes' quantiles, and the chains with accept_count == 0.

Measured on the CPU (issue 32), per-chain warm-up, 128 chains from Stan's starts (seed 1), 1000
warm-up + 300 transitions, L = 8, jitter 0.2, target 0.8; acceptance quantiles 5/25/50/75/95%
over chains, pooled mean, median step size:

    eight schools  Stan's gamma 0.05: 0.907 0.938 0.955 0.964 0.972  0.948  eps 0.31
                   terminal 0.25:     0.694 0.752 0.803 0.834 0.878  0.794  eps 0.47
    logistic reg.  Stan's gamma 0.05: 0.856 0.871 0.883 0.898 0.913  0.884  eps 0.51
                   terminal 0.25:     0.723 0.766 0.792 0.813 0.835  0.787  eps 0.72

The choice of gamma came from a numpy simulation of the same adaptation on Gaussians (d = 2, 10,
50; median final acceptance 0.83, 0.81, 0.79 with 0.25; 0.955, 0.936, 0.905 with Stan's 0.05).
"""
from __future__ import annotations

import argparse
import time

import torch

import fused_hmc
from fused_hmc import models

QUANTILES = torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95], dtype=torch.float64)


def probe(model, chains, warmup, samples, seed, pooled, chees, steps, jitter, gradient):
    q0 = model.initial_point(chains, generator=torch.Generator().manual_seed(seed))
    kwargs = dict(adapt_trajectory_length=True) if chees else dict(pooled=pooled)
    t = time.perf_counter()
    res = fused_hmc.sample(q0, samples, target=model.target(gradient=gradient), num_warmup=warmup,
                           seed=seed, num_leapfrog_steps=steps, jitter=jitter, progress=False,
                           keep_samples=False, **kwargs)
    acc = res.mean_accept_prob
    q = torch.quantile(acc, QUANTILES).tolist()
    eps = torch.quantile(res.step_size, QUANTILES[[0, 2, 4]]).tolist()
    stuck = int((res.accept_count == 0).sum())
    print(f"{model.name:22s} acc q05..q95 " + " ".join(f"{v:.3f}" for v in q)
          + f"  pooled {float(acc.mean()):.3f}  eps q05/50/95 "
          + " ".join(f"{v:.3g}" for v in eps) + f"  stuck {stuck}/{chains}"
          + f"  ({time.perf_counter() - t:.0f} s)", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["eight_schools", "logistic_regression"])
    p.add_argument("--chains", type=int, default=128)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--jitter", type=float, default=0.2)
    p.add_argument("--pooled", action="store_true")
    p.add_argument("--chees", action="store_true")
    p.add_argument("--direct", action="store_true", help="diamonds in the direct form (qr=False)")
    a = p.parse_args()
    for name in a.models:
        model = (models.diamonds(qr=False) if name == "diamonds" and a.direct
                 else models.MODELS[name]())
        probe(model, a.chains, a.warmup, a.samples, a.seed, a.pooled, a.chees, a.steps, a.jitter,
              model.gradient_source is not None)


if __name__ == "__main__":
    main()
