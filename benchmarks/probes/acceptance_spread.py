"""Probe (issue 32): how far each chain's sampling acceptance lies from target_accept, split into
the estimation noise of a mean over N transitions and the error of the chain's step size.

    python benchmarks/probes/acceptance_spread.py --models eight_schools kidiq \
        --modes per_chain pooled chees --chains 128 --warmup 1000 --samples 400 \
        [--windows 75 25 50]

Each chain's mean acceptance statistic m over 2n sampling transitions is measured over its two
halves too (m1, m2: a Sampler run twice). The halves' difference carries only noise, so the noise
variance of m is Var(m1 - m2) / 4 (halves n transitions apart are nearly independent: the
statistic's autocorrelation dies within a few transitions), and what the spread of m across chains
has beyond it, Var(m) - Var(m1 - m2) / 4, is the spread of the chains' expected acceptances (their
step sizes, and with one shared step size the parts of the posterior they sample). Printed:

    pooled: mean of m over chains (the pooled acceptance)   bias: pooled - target
    sd(m): spread across chains; noise: its noise part; step: the rest (sqrt of the difference)
    within 0.03: fraction of chains with |m - target| <= 0.03; by noise: that fraction if every
    chain's expected acceptance were the pooled one (normal noise of the measured sd)
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import torch
from scipy.stats import norm

import fused_hmc
from fused_hmc import models

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "statistical"))
import _kidiq

MODES = {"per_chain": dict(pooled=False, num_leapfrog_steps=10, jitter=0.2),
         "pooled": dict(pooled=True, num_leapfrog_steps=10, jitter=0.2),
         "chees": dict(adapt_trajectory_length=True)}


def _target(name):
    if name == "kidiq":
        model = _kidiq.kidiq_model()
        return model, model.dim
    model = models.diamonds(qr=False) if name == "diamonds_direct" else models.MODELS[name]()
    return model.target(gradient=model.gradient_source is not None), model.dim


def probe(name, mode, chains, warmup, samples, seed, windows):
    target, dim = _target(name)
    q0 = 4 * torch.rand(chains, dim, generator=torch.Generator().manual_seed(seed),
                        dtype=torch.float64) - 2
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fused_hmc.StuckChainsWarning)
        sampler = fused_hmc.Sampler(q0, target=target, num_warmup=warmup, seed=seed,
                                    progress=False, keep_samples=False, adapt_windows=windows,
                                    **MODES[mode])
        half = samples // 2
        m1 = sampler.run(half).mean_accept_prob.clone()
        res = sampler.run(half)
    m = res.mean_accept_prob
    m2 = 2 * m - m1
    target_accept = res.warmup.target_accept
    pooled = float(m.mean())
    noise_var = float((m1 - m2).var()) / 4
    total_var = float(m.var())
    step = max(0.0, total_var - noise_var) ** 0.5
    within = float(((m - target_accept).abs() <= 0.03).double().mean())
    sd = noise_var ** 0.5
    by_noise = (norm.cdf((target_accept + 0.03 - pooled) / sd)
                - norm.cdf((target_accept - 0.03 - pooled) / sd)) if sd > 0 else float("nan")
    print(f"{name:16s} {mode:9s} target {target_accept:.3f}  pooled {pooled:.3f} "
          f"(bias {pooled - target_accept:+.3f})  sd(m) {total_var ** 0.5:.3f} = noise "
          f"{sd:.3f} + step {step:.3f}  within 0.03: {within:.2f} (by noise {by_noise:.2f})  "
          f"eps median {float(res.step_size.median()):.3g}  ({time.perf_counter() - t:.0f} s)",
          flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["eight_schools", "kidiq"])
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    p.add_argument("--chains", type=int, default=128)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--samples", type=int, default=400)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--windows", type=int, nargs=3, default=[75, 25, 50],
                   help="adapt_windows: init_buffer, base_window, term_buffer")
    a = p.parse_args()
    for name in a.models:
        for mode in a.modes:
            probe(name, mode, a.chains, a.warmup, a.samples, a.seed, tuple(a.windows))


if __name__ == "__main__":
    main()
