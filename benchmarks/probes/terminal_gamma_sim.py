"""Probe (issue 32): why per-chain dual averaging overshoots target_accept, and the terminal gamma.

A numpy model of the warm-up's step-size adaptation (csrc/math/adaptation/dual_averaging.h, Stan's
restarts after the slow windows of a 1000-iteration warm-up) on a diagonal Gaussian with scales
10^-0.5 .. 10^0.5 (unit mass, so only the step size adapts), static HMC with L = 8 and jitter 0.2,
one dual averaging per chain. The terminal run (after the last slow window) uses `--gamma`;
`--shift` rescales the target there, as a changed inverse mass would. Prints the quantiles over
chains of the mean acceptance of 300 transitions at the final step size.

    python benchmarks/probes/terminal_gamma_sim.py --dim 10 --gamma 0.05 0.25

Measured (512 chains; median final acceptance for target 0.8):
    gamma 0.05 (Stan): d = 2 0.955, d = 10 0.936, d = 50 0.905
    gamma 0.25:        d = 2 0.833, d = 10 0.807, d = 50 0.793 (d = 10 target 0.9: 0.881)
    d = 10, gamma 0.2, target rescaled by 0.5 or 2 at the restart: 0.822, 0.835
"""
from __future__ import annotations

import argparse

import numpy as np

RESTARTS = (99, 149, 249, 449, 949)  # the ends of Stan's slow windows for 1000 iterations


def hmc(rng, q, eps, scales, steps=8, jitter=0.2):
    chains = q.shape[0]
    e = (eps * (1 + jitter * (2 * rng.random(chains) - 1)))[:, None]
    p = rng.standard_normal(q.shape)
    energy = lambda x, m: 0.5 * ((x / scales) ** 2).sum(1) + 0.5 * (m ** 2).sum(1)  # noqa: E731
    h0 = energy(q, p)
    x, m = q.copy(), p + 0.5 * e * (-q / scales ** 2)
    for step in range(steps):
        x = x + e * m
        if step < steps - 1:
            m = m + e * (-x / scales ** 2)
    m = m + 0.5 * e * (-x / scales ** 2)
    log_alpha = np.nan_to_num(h0 - energy(x, m), nan=-np.inf)
    accept = np.minimum(1.0, np.exp(np.minimum(log_alpha, 0.0)))
    q = np.where((rng.random(chains) < accept)[:, None], x, q)
    return q, accept


def run(dim, gamma, delta, shift, chains, seed):
    rng = np.random.default_rng(seed)
    scales = np.logspace(-0.5, 0.5, dim)
    q = rng.standard_normal((chains, dim)) * scales
    eps = np.full(chains, 0.1)
    mu, n, s_bar, x_bar, g = np.log(10 * eps), 0, np.zeros(chains), np.zeros(chains), 0.05
    for i in range(1000):
        q, a = hmc(rng, q, eps, scales)
        n += 1
        eta = 1 / (n + 10)
        s_bar = (1 - eta) * s_bar + eta * (delta - a)
        x = mu - s_bar * np.sqrt(n) / g
        w = n ** -0.75
        x_bar = (1 - w) * x_bar + w * x
        eps = np.exp(x)
        if i in RESTARTS:  # Stan: set_mu(log(10 eps)), restart
            mu, n, s_bar, x_bar = np.log(10 * eps), 0, 0 * s_bar, 0 * x_bar
            if i == RESTARTS[-1]:
                g, scales, q = gamma, scales * shift, q * shift
    final = np.exp(x_bar)
    accept = np.mean([hmc(rng, q, final, scales)[1] for _ in range(300)], axis=0)
    return np.quantile(accept, [0.05, 0.25, 0.5, 0.75, 0.95]), accept.mean()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=10)
    p.add_argument("--gamma", type=float, nargs="+", default=[0.05, 0.25])
    p.add_argument("--target-accept", type=float, default=0.8)
    p.add_argument("--shift", type=float, default=1.0)
    p.add_argument("--chains", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    for gamma in a.gamma:
        q, mean = run(a.dim, gamma, a.target_accept, a.shift, a.chains, a.seed)
        print(f"d {a.dim} terminal gamma {gamma}: acceptance q05..q95 "
              + " ".join(f"{v:.3f}" for v in q) + f"  mean {mean:.3f}", flush=True)


if __name__ == "__main__":
    main()
