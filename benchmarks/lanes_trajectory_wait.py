"""What per-chain trajectory lengths cost where several chains share a warp (issue 35).

How the kernels schedule them: a chain on G lanes (G < 32) shares its warp with 32 / G other
chains. With a trajectory length T (``trajectory_length=``, or ChEES), each chain's transition
runs its own L = min(cap, max(1, ceil(w T / eps_t))) leapfrog steps
(csrc/math/adaptation/trajectory_adaptation.h: w uniform on [0, 1), eps_t the chain's step size
jittered to eps (1 + jitter (2 u - 1)); the kernels draw w once per transition for every chain and
u per chain, math/hmc/transition.h's transition_uniforms, so L differs between chains only through
their jittered step sizes). The chains of a warp diverge inside
the leapfrog loop (the lanes' shuffles stay within a chain's lanes, so no chain waits on another
to exchange), and reconverge at the end of the transition: the warp spends max_c L_c steps, of
which only the finished chains' lanes idle. A chain on 32 lanes, or on a block (64 .. 256), is
alone in its warps: it never waits. Without a trajectory length every chain runs
num_leapfrog_steps steps (the jitter moves the step size, not the count): no wait either.

What this measures (on the CPU; no GPU): the useful fraction of lane-steps, E[sum_c L_c] / (C
E[max_c L_c]), C = 32 / G chains of a warp, for the step counts a per-chain warm-up draws:

1. a per-chain warm-up (fused_hmc.sample, num_warmup, trajectory_length=T, jitter) on the CPU of a
   built-in diagonal Gaussian (d = 16, scales 0.1 .. 10 log-spaced; the mass is adapted, so the
   preconditioned target is near N(0, I)) gives each chain its own step size eps_b;
2. each transition's L of each chain is drawn by the formula above from numpy uniforms w and u
   (the kernel's are philox's, uniform all the same) with that chain's eps_b, w shared by the
   chains (the kernels' rule) and, for comparison, drawn per chain (the rule before); u per chain, for --warps warps of
   C consecutive chains over --transitions transitions, with T set so that the chain of median
   step size takes --mean-steps steps on average (T = 2 m eps_median: w's mean is 1/2). The
   spread of the final step sizes is the smallest the warm-up has (its iterates scatter more
   before the terminal window), so the run also scales the spread of log eps_b around its median
   by --spread-factors to show the trend.

The chains are shuffled into warps at random (the chains' step sizes do not depend on their
index). Writes --out (JSON): the settings, the step sizes' spread, and per (mean steps, spread
factor, lanes) the useful fraction, the mean L and the mean warp max.

    python benchmarks/lanes_trajectory_wait.py --out benchmarks/results/lanes/trajectory_wait.json
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

WARP = 32
WARP_LANES = (1, 2, 4, 8, 16, 32)


def per_chain_step_sizes(chains: int, warmup: int, length: float, jitter: float,
                         seed: int) -> np.ndarray:
    """The step sizes a per-chain warm-up ends with, [chains] float64."""
    import fused_hmc

    scale = torch.logspace(-1, 1, 16, dtype=torch.float64)
    target = fused_hmc.targets.DiagonalGaussian(torch.zeros(16, dtype=torch.float64), scale)
    q0 = torch.randn(chains, 16, generator=torch.Generator().manual_seed(seed),
                     dtype=torch.float64) * scale
    res = fused_hmc.sample(q0, 1, num_warmup=warmup, target=target, seed=seed, progress=False,
                           trajectory_length=length, jitter=jitter, step_size=0.1)
    return res.step_size.double().numpy()


def step_counts(eps: np.ndarray, transitions: int, length: float, jitter: float, cap: int,
                shared: bool, rng: np.random.Generator) -> np.ndarray:
    """L [transitions, chains] by trajectory_steps' formula, the trajectory jitter w drawn once
    per transition (`shared`) or per chain and transition, the step-size jitter u per chain."""
    w = rng.random((transitions, 1 if shared else eps.size))
    u = rng.random((transitions, eps.size))
    eps_t = eps[None, :] * (1.0 + jitter * (2.0 * u - 1.0))
    return np.clip(np.ceil(w * length / eps_t), 1, cap)


def useful_fraction(steps: np.ndarray, lanes: int) -> dict:
    """The lane-steps spent on a chain's own steps, with 32 / lanes chains a warp."""
    per_warp = WARP // lanes if lanes < WARP else 1
    chains = steps.shape[1] // per_warp * per_warp
    grouped = steps[:, :chains].reshape(steps.shape[0], -1, per_warp)
    mean_steps = float(grouped.mean())
    mean_max = float(grouped.max(axis=2).mean())
    return {"lanes": lanes, "chains_per_warp": per_warp, "useful_fraction": mean_steps / mean_max,
            "mean_steps": mean_steps, "mean_warp_max": mean_max}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=1024, help="warm-up chains")
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--trajectory-length", type=float, default=1.5,
                        help="the warm-up's T (its step sizes)")
    parser.add_argument("--jitter", type=float, default=0.2)
    parser.add_argument("--cap", type=int, default=1000, help="max_leapfrog_steps")
    parser.add_argument("--warps", type=int, default=4096, help="simulated warps")
    parser.add_argument("--transitions", type=int, default=200)
    parser.add_argument("--mean-steps", default="4,8,32",
                        help="the median chain's mean leapfrog steps (sets T)")
    parser.add_argument("--spread-factors", default="0,1,2,4")
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    started = time.perf_counter()
    eps = per_chain_step_sizes(args.chains, args.warmup, args.trajectory_length, args.jitter,
                               args.seed)
    log_eps = np.log(eps)
    centre, spread = float(np.median(log_eps)), float(log_eps.std())
    rng = np.random.default_rng(args.seed)
    rows = []
    for mean_steps in (int(m) for m in args.mean_steps.split(",")):
        length = 2.0 * mean_steps * math.exp(centre)
        for factor in (float(f) for f in args.spread_factors.split(",")):
            # Chains for --warps full warps of one-lane chains, step sizes resampled from the
            # warm-up's with their log spread scaled by `factor`.
            drawn = rng.choice(log_eps, WARP * args.warps)
            chain_eps = np.exp(centre + factor * (drawn - centre))
            for jitters in ("shared", "per_chain"):
                steps = step_counts(chain_eps, args.transitions, length, args.jitter, args.cap,
                                    jitters == "shared", rng)
                for lanes in WARP_LANES:
                    row = {"jitters": jitters, "mean_steps_target": mean_steps,
                           "trajectory_length": length, "spread_factor": factor,
                           **useful_fraction(steps, lanes)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    record = {
        "what": "useful fraction of lane-steps when the chains of a warp run different leapfrog "
                "step counts (benchmarks/lanes_trajectory_wait.py's docstring); lanes 32 and block "
                "lanes (64..256) are one chain a warp or more: fraction 1",
        "command": "python benchmarks/lanes_trajectory_wait.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "out"),
        "host": platform.node() or "unknown", "torch": torch.__version__,
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "warmup_step_sizes": {"median": math.exp(centre), "log_sd": spread,
                              "q05": float(np.quantile(eps, 0.05)),
                              "q95": float(np.quantile(eps, 0.95))},
        "rows": rows, "seconds": time.perf_counter() - started}
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
