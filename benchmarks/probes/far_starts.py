"""Probe (issue 32): the pooled and ChEES warm-ups from Stan's starts (uniform(-2, 2) on the
unconstrained scale): chains that never accept in sampling, chains the warm-up restarted, R-hat,
acceptance, and the answer against a reference.

    python benchmarks/probes/far_starts.py --models kidiq eight_schools funnel \
        --modes pooled chees --chains 256 --warmup 1000 --samples 300 --seeds 1 2 \
        [--restarts-only]

kidiq is the stand-in of tests/statistical/_kidiq.py (exact posterior moments); funnel and
rosenbrock have exact moments, eight_schools, diamonds and diamonds_direct (qr=False)
posteriordb's reference; logistic_regression has none (only R-hat). One line per (model, mode,
seed):

    stuck: chains with accept_count == 0 in sampling; restarted: chains with warmup_reseeded > 0
    acc: pooled mean acceptance statistic in sampling, and its 5/50/95% quantiles over chains
    rhat: the largest split R-hat over the (unconstrained) coordinates, the first 512 chains
    worst z: the largest |mean - reference| / its Monte Carlo error (ESS from arviz-stats)
    grads: gradient evaluations, warm-up + sampling, all chains
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

import fused_hmc
from fused_hmc import diagnostics, models

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "statistical"))
import _kidiq

RHAT_CHAINS = 512  # R-hat over the first 512 chains (about 2 s per million values on a core)
MODES = {"pooled": dict(pooled=True, num_leapfrog_steps=20),
         "chees": dict(adapt_trajectory_length=True),
         "per_chain": dict(pooled=False, num_leapfrog_steps=20)}


def model_and_reference(name: str):
    """(target, dim, reference): reference maps the draws [chains, draws, dim] to the worst |z|
    of their means against known ones (ESS of the mean), or is None."""
    if name == "kidiq":
        target = _kidiq.kidiq_model()
        exact = _kidiq.exact_moments()
        order = ("b0", "b1", "b2", "sigma")

        def reference(res):
            draws = res.constrained_draws()
            values = np.stack([draws[k].cpu().numpy() for k in order], -1)
            return _worst_z(values, np.array([exact[k][0] for k in order]),
                            np.array([exact[k][1] for k in order]))
        return target, target.dim, reference
    direct = name == "diamonds_direct"
    model = models.diamonds(qr=False) if direct else models.MODELS[name]()
    target = model.target(gradient=model.gradient_source is not None)
    if model.exact_mean is not None:
        def reference(res):
            return _worst_z(res.samples.cpu().numpy(), model.exact_mean.numpy(),
                            model.exact_var.sqrt().numpy())
    elif model.posteriordb is not None:
        from fused_hmc.validation import posteriordb

        def reference(res):
            report = posteriordb.compare_draws(
                model.constrained_values(res.samples.double()).cpu().numpy(),
                model.posteriordb)
            return abs(report.worst.z)
    else:
        reference = None
    return target, model.dim, reference


def _worst_z(draws: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> float:
    ess = diagnostics.ess_mean(diagnostics.as_draws(draws))
    z = np.abs(draws.mean((0, 1)) - mean) / (sd / np.sqrt(ess))
    return float(z.max())


def probe(name, mode, chains, warmup, samples, seed, device="cpu"):
    target, dim, reference = model_and_reference(name)
    q0 = (4 * torch.rand(chains, dim, generator=torch.Generator().manual_seed(seed),
                         dtype=torch.float64) - 2).to(device)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fused_hmc.StuckChainsWarning)
        res = fused_hmc.sample(q0, samples, target=target, num_warmup=warmup, seed=seed,
                               progress=False, **MODES[mode])
    seconds = time.perf_counter() - t
    res = res.cpu()
    acc = res.mean_accept_prob
    q = torch.quantile(acc, torch.tensor([0.05, 0.5, 0.95], dtype=acc.dtype)).tolist()
    restarted = getattr(res, "warmup_reseeded", None)
    restarted = "-" if restarted is None else int((restarted > 0).sum())
    rhat = float(np.max(diagnostics.diagnose(res.samples, max_chains=RHAT_CHAINS).r_hat))
    z = reference(res) if reference is not None else float("nan")
    length = "" if res.trajectory_length is None else f" T {res.trajectory_length:.3g}"
    grads = res.warmup_gradient_evaluations + res.sampling_gradient_evaluations
    print(f"{name:16s} {mode:9s} seed {seed}  stuck {int((res.accept_count == 0).sum()):3d}  "
          f"restarted {restarted!s:>3}  acc {float(acc.mean()):.3f} ({q[0]:.3f} {q[1]:.3f} "
          f"{q[2]:.3f})  eps {float(res.step_size.median()):.3g}{length}  rhat {rhat:.3f}  "
          f"worst z {z:.1f}  grads {grads / 1e6:.2f}M  ({seconds:.0f} s)", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["kidiq"])
    p.add_argument("--modes", nargs="+", default=["pooled", "chees"], choices=list(MODES))
    p.add_argument("--chains", type=int, default=256)
    p.add_argument("--warmup", type=int, default=1000)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--device", default="cpu")
    p.add_argument("--restarts-only", action="store_true",
                   help="the alternative measured against: no per-chain first phase, only the "
                        "restarts of chains that never moved")
    a = p.parse_args()
    if a.restarts_only:
        from fused_hmc.sampling import far_starts

        far_starts.first_phase_length = lambda settings: 0
    for name in a.models:
        for mode in a.modes:
            for seed in a.seeds:
                probe(name, mode, a.chains, a.warmup, a.samples, seed, a.device)


if __name__ == "__main__":
    main()
