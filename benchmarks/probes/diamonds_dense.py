"""Probe (issue 32): diamonds in its direct form (`qr=False`, condition number about 2.6e5 after a
diagonal mass) with a dense mass, against the QR form with a diagonal mass.

    python benchmarks/probes/diamonds_dense.py --chains 16 --warmup 400 --draws 400
    python benchmarks/probes/diamonds_dense.py --device cuda --chains 4096 --warmup 1000 \
        --draws 1000 --configs qr_diagonal direct_dense_pooled --out diamonds_dense.json

Each configuration runs the library's hand-written gradient from Stan's starts (seed 1), L = 8,
jitter 0.2, and prints: wall time, gradient evaluations, the smallest bulk ESS of the reported
parameters (arviz-stats, in b), ESS per 1,000 gradient evaluations, the mean acceptance, the
divergences, and posteriordb's verdict (fused_hmc.validation.posteriordb.compare_draws,
alpha = 1e-6) with its worst |z|.

Measured on the CPU (16 chains, 400 + 400, seed 1; bulk ESS, ESS per 1,000 sampling gradients):

    qr_diagonal             1,069  20.1   agrees (|z| 1.6)
    direct_diagonal            17   0.31  DISAGREES (|z| 77)
    direct_dense_per_chain     22   0.39  DISAGREES (|z| 13)
    direct_dense_pooled     1,178  21.1   agrees (|z| 1.9)

With ChEES instead of L = 8 (`adapt_trajectory_length=True`, same size and seed): the direct form
with the dense mass 1,124 (121 per 1,000 gradients, T 1.06), the QR form with the diagonal one
1,083 (113, T 1.06); both agree with posteriordb, and no chain is stuck.

The pooled estimate before this one (each chain's own window correlations, averaged) gave ESS 20
and 21 for seeds 2 and 3 (|z| 43 and 33, DISAGREES); this one gives 1,075 and 1,411 (agrees).
A fixed dense mass from a long QR-form run's draws gives ESS 1,399 in the direct form: the
kernel was never the limit, the estimate was. In one window a chain hardly moves along the
posterior's long directions, so its own window covariance (and a mean of such) misses them; the
chains' spread between each other carries them (csrc/math/hmc/dense_mass.h).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch

import fused_hmc
from fused_hmc import models
from fused_hmc.validation.posteriordb import compare_draws

CONFIGS = {  # name: (qr, mass_matrix, pooled)
    "qr_diagonal": (True, "diagonal", False),
    "direct_diagonal": (False, "diagonal", False),
    "direct_dense_pooled": (False, "dense", True),
    "direct_dense_per_chain": (False, "dense", False),
}


def run(name, chains, warmup, draws, seed, device="cpu", chees=False):
    from arviz_stats.base import array_stats

    qr, mass, pooled = CONFIGS[name]
    model = models.diamonds(qr=qr)
    q0 = model.initial_point(chains, generator=torch.Generator().manual_seed(seed)).to(device)
    trajectory = dict(adapt_trajectory_length=True) if chees else dict(num_leapfrog_steps=8)
    if device != "cpu":  # the modules' build (prebuild_models.py) and a warm GPU, untimed
        fused_hmc.sample(q0, 2, target=model.target(gradient=True), num_warmup=2, seed=seed,
                         mass_matrix=mass, pooled=pooled, progress=False, **trajectory)
        torch.cuda.synchronize()
    start = time.perf_counter()
    res = fused_hmc.sample(q0, draws, target=model.target(gradient=True), num_warmup=warmup,
                           seed=seed, jitter=0.2, mass_matrix=mass, pooled=pooled,
                           progress=False, **trajectory)
    if device != "cpu":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    values = model.constrained_values(res.samples.cpu().double())
    ess = np.asarray(array_stats.ess(values.numpy(), chain_axis=0, draw_axis=1, method="bulk"))
    gradients = res.warmup_gradient_evaluations + res.sampling_gradient_evaluations
    report = compare_draws(values, model.posteriordb, alpha=1e-6)
    divergences = int(res.chain_statistics["divergences"].sum())
    ess_min = float(ess.min())
    return {"config": name, "device": str(device), "chains": chains, "chees": chees,
            "wall_s": round(seconds, 1), "gradients": gradients,
            "ess_per_s": round(ess_min / seconds, 1),
            "min_bulk_ess": ess_min,
            "ess_per_1k_sampling_gradients": 1000 * ess_min / res.sampling_gradient_evaluations,
            "accept": float(res.mean_accept_prob.mean()), "divergences": divergences,
            "never_accepted": int((res.chain_statistics["accept_count"] == 0).sum()),
            "posteriordb": "agrees" if report.passed else "DISAGREES",
            "worst_z": abs(report.worst.z)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=400)
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--chees", action="store_true", help="ChEES instead of L = 8")
    parser.add_argument("--out", default=None, help="also write the rows here (JSON)")
    args = parser.parse_args()
    rows = []
    for name in args.configs:
        rows.append(run(name, args.chains, args.warmup, args.draws, args.seed, args.device,
                        args.chees))
        print(rows[-1], flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"command": " ".join(sys.argv), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
