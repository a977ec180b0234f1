"""Probe (issue 32): why ChEES on kidiq ends at acceptance 0.92 for the target 0.651.

    python benchmarks/probes/terminal_cliff.py

Runs the ChEES warm-up on the kidiq stand-in from Stan's starts (256 chains, seed 1), then
measures the pooled acceptance at 25 step sizes with the adapted mass and trajectory length (10
sampling transitions from the warm-up's end, each), and replays the terminal interval's dual
averaging (Stan's, restarted at mu = log(10 eps), 50 iterations, the pooled statistic with noise of
sd 0.02) on that curve for several gains gamma. Prints the curve, then per gamma the median final
step size exp(x_bar) and the acceptance it gets.
"""
from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

import fused_hmc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "statistical"))
import _kidiq


def curve(chains=256, seed=1):
    model = _kidiq.kidiq_model()
    q0 = 4 * torch.rand(chains, model.dim, generator=torch.Generator().manual_seed(seed),
                        dtype=torch.float64) - 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fused_hmc.sample(q0, 1, target=model, num_warmup=1000, seed=seed, progress=False,
                               adapt_trajectory_length=True, keep_samples=False)
        grid = np.exp(np.linspace(math.log(0.03), math.log(0.5), 25))
        accept = [float(fused_hmc.sample(
            res.final_state, 10, target=model, step_size=float(e),
            trajectory_length=res.trajectory_length, inverse_mass=res.inverse_mass[0], seed=5,
            first_transition=2000, progress=False, keep_samples=False).mean_accept_prob.mean())
            for e in grid]
    print(f"warm-up: T {res.trajectory_length:.3g}, final step size {float(res.step_size[0]):.4g}")
    return grid, np.array(accept)


def replay(grid, accept, eps_before, gamma, rng, n=50, delta=0.651, noise=0.02):
    """Stan's dual averaging restarted at eps_before on the curve; the final exp(x_bar)."""
    mu, s_bar, x_bar, eps = math.log(10 * eps_before), 0.0, 0.0, eps_before
    for k in range(1, n + 1):
        a = np.interp(math.log(eps), np.log(grid), accept) + rng.normal(0, noise)
        eta = 1 / (k + 10)
        s_bar = (1 - eta) * s_bar + eta * (delta - min(1.0, max(0.0, a)))
        x = mu - s_bar * math.sqrt(k) / gamma
        w = k ** -0.75
        x_bar = (1 - w) * x_bar + w * x
        eps = math.exp(x)
    return math.exp(x_bar)


def main():
    grid, accept = curve()
    for e, a in zip(grid, accept):
        print(f"  eps {e:.4f}  acceptance {a:.3f}")
    before = float(np.interp(0.651, accept[::-1], grid[::-1]))  # about where the last window was
    rng = np.random.default_rng(0)
    for gamma in (0.05, 0.1, 0.25, 0.5):
        final = np.median([replay(grid, accept, before, gamma, rng) for _ in range(200)])
        print(f"gamma {gamma}: final step size {final:.4f}, acceptance "
              f"{np.interp(math.log(final), np.log(grid), accept):.3f}")


if __name__ == "__main__":
    main()
