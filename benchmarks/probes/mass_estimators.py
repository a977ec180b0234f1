"""Probe (issue 32): the inverse mass from the draws (Stan's, mass_estimator="draws") against the
one from the draws and their gradients (nutpie's, "gradients"; csrc/math/hmc/gradient_mass.h), on
the library models, on the CPU, side by side in one run.

    python benchmarks/probes/mass_estimators.py --chains 16 --warmups 150 1000 --draws 1000

Each run starts from Stan's starts (uniform(-2, 2), seed 1), L = 8, jitter 0.2, float64, with a
short and a long warm-up, and prints the smallest bulk ESS of the reported parameters
(arviz-stats), ESS per 1,000 gradient evaluations (warm-up and sampling), the mean acceptance and,
where posteriordb has the model, its verdict (alpha = 1e-6) and worst |z|.

Measured on the CPU (2-core Zen 4, commit 2767422, 16 chains, 1000 draws, seed 1; min bulk ESS,
ESS per 1,000 gradient evaluations of warm-up and sampling, posteriordb's verdict):

    model                mass                 warm-up   draws                  gradients
    eight schools        diagonal, per chain    150     7,049  47.8            7,209  48.9
                                               1000     5,589  21.8            7,501  29.3
                         dense, pooled          150     7,798  52.9            9,171  62.2
                                               1000     7,329  28.6            8,942  34.9
    logistic regression  diagonal, per chain    150     5,483  37.1            4,231  28.6
                                               1000     2,886  11.2            2,754  10.7
                         dense, pooled          150     2,949  19.9            1,797  12.2
                                               1000     1,983   7.7            1,706   6.6
    diamonds (QR form)   diagonal, per chain    150       213   1.4            3,083  20.2
                                               1000     2,291   8.6            2,119   8.0
                         dense, pooled          150    12,548  82.0 DISAGREES  2,610  17.0
                                               1000     1,959   7.3            1,836   6.9
    diamonds (direct)    diagonal, per chain    150        17   0.1 DISAGREES     17   0.1 DISAGREES
                                               1000        16   0.1 DISAGREES     17   0.1 DISAGREES
                         dense, pooled          150     4,690  30.8            2,592  16.9
                                               1000     1,949   7.3            1,879   7.0

After 1000 warm-up iterations the two agree within one seed's noise. After 150 the gradients
rescue diamonds' QR form (ESS 213 -> 3,083 with a per-chain diagonal mass; with the pooled dense
mass the draws' estimate leaves chains that disagree with posteriordb, |z| 9.5), and help eight
schools, but cost logistic regression and diamonds' direct form about 1.5x to 1.8x. No diagonal
mass, from either estimator, samples diamonds' direct form: its correlations need the dense one.
(A fixed L = 8 resonates on logistic regression, docs/CPU.md's figures, so its rows are noisy.)
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import fused_hmc
from fused_hmc import models
from fused_hmc.validation.posteriordb import compare_draws

MODELS = {"eight_schools": models.eight_schools,
          "logistic_regression": models.logistic_regression,
          "diamonds_qr": lambda: models.diamonds(qr=True),
          "diamonds_direct": lambda: models.diamonds(qr=False)}
# (mass_matrix, pooled) per configuration
MASSES = {"diagonal, per chain": ("diagonal", False), "dense, pooled": ("dense", True)}


def run(name, mass, estimator, chains, warmup, draws, seed):
    from arviz_stats.base import array_stats

    model = MODELS[name]()
    mass_matrix, pooled = MASSES[mass]
    q0 = model.initial_point(chains, generator=torch.Generator().manual_seed(seed))
    target = model.target(gradient=True)
    start = time.perf_counter()
    res = fused_hmc.sample(q0, draws, target=target, num_warmup=warmup, seed=seed,
                           num_leapfrog_steps=8, jitter=0.2, mass_matrix=mass_matrix,
                           pooled=pooled, mass_estimator=estimator, progress=False)
    seconds = time.perf_counter() - start
    values = model.constrained_values(res.samples.double())
    ess = float(np.asarray(array_stats.ess(values.numpy(), chain_axis=0, draw_axis=1,
                                           method="bulk")).min())
    gradients = res.warmup_gradient_evaluations + res.sampling_gradient_evaluations
    row = {"model": name, "mass": mass, "estimator": estimator, "warmup": warmup,
           "wall_s": round(seconds, 2), "min_bulk_ess": round(ess),
           "ess_per_1k_gradients": round(1000 * ess / gradients, 2),
           "accept": round(float(res.mean_accept_prob.mean()), 3)}
    if getattr(model, "posteriordb", None) is not None:
        report = compare_draws(values, model.posteriordb, alpha=1e-6)
        row.update(posteriordb="agrees" if report.passed else "DISAGREES",
                   worst_z=round(abs(report.worst.z), 1))
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=16)
    parser.add_argument("--warmups", type=int, nargs="+", default=[150, 1000])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args()
    for name in args.models:
        for mass in MASSES:
            for warmup in args.warmups:
                for estimator in ("draws", "gradients"):
                    print(run(name, mass, estimator, args.chains, warmup, args.draws, args.seed),
                          flush=True)


if __name__ == "__main__":
    main()
