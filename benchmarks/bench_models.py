"""Users' models on the GPU, side by side (issue 14): eight schools (posteriordb's non-centred
form), 4096 chains, 1000 warm-up + 1000 draws; wall time of warm-up and sampling together (after
one untimed run that compiles everything), the smallest bulk ESS over the reported parameters
(theta[1..8], mu, tau), ESS per second, and the worst |mean - reference| / reference sd.

fused_hmc: the model's CppTarget (dual-number gradients, or the hand-written one) in the chain
kernels, per-chain warm-up (dual averaging + diagonal mass), step jitter 0.2, L = 8.
BlackJAX 1.7.1: chees_adaptation(mass_matrix_estimation="diagonal") then dynamic HMC with the
adapted step size, trajectory length and mass, as its documentation runs it, float32.

Usage: python benchmarks/bench_models.py [--chains 4096] [--out file.json] [--no-jax]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
DEVICE = os.environ.get("FUSED_HMC_BENCH_DEVICE", "cuda")  # "cpu": a dry run of this script
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _summary(draws: np.ndarray, ref) -> dict:
    """draws [chain, draw, P] constrained, in the reference's order."""
    from arviz_stats.base import array_stats

    ess = np.asarray(array_stats.ess(draws, chain_axis=0, draw_axis=1, method="bulk"))
    means = draws.reshape(-1, draws.shape[-1]).mean(0)
    worst = float(np.max(np.abs(means - np.asarray(ref.mean)) / np.asarray(ref.sd)))
    return {"min_bulk_ess": float(ess.min()), "worst_mean_error_sd": worst}


def fused(model, chains: int, warmup: int, draws: int, gradient: bool, dtype) -> dict:
    import fused_hmc

    target = model.target(gradient=gradient)
    q0 = model.initial_point(chains, generator=torch.Generator().manual_seed(0)).to(DEVICE, dtype)

    def run(seed):
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        res = fused_hmc.sample(q0, draws, target=target, num_warmup=warmup, seed=seed,
                               num_leapfrog_steps=8, jitter=0.2, progress=False)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        return res, time.perf_counter() - start

    run(1)  # compiles the model and loads everything
    res, wall = run(2)
    x = model.constrained_values(res.samples.double().cpu()).numpy()
    out = {"wall_s": wall, "accept": float(res.mean_accept_prob.mean()),
           "gradient_evaluations": res.warmup_gradient_evaluations
           + res.sampling_gradient_evaluations}  # the kernel's count
    return out | _summary(x, _reference(model))


def gradient_rate(model, chains: int, gradient: bool, dtype, transitions: int = 5) -> dict:
    """Gradient evaluations per second of the model's CppTarget in the sampling kernel at
    `chains` chains (target_gradient_rate), from Stan's starts scaled by 0.1 (near the mode:
    finite everywhere)."""
    q = model.initial_point(chains, generator=torch.Generator().manual_seed(0)).to(DEVICE, dtype)
    return target_gradient_rate(model.target(gradient=gradient), q * 0.1, transitions)


def target_gradient_rate(target, q: torch.Tensor, transitions: int = 5,
                         step_size: float = 0.05) -> dict:
    """Gradient evaluations per second of any CppTarget in the sampling kernel at positions q
    [chains, dim]: `transitions` transitions of L = 8 per timed sample op call at a fixed step size
    (0.05 unless given), each chain carrying its gradient across them (8 per transition plus one
    per call, as the op counts them). mean_accept_prob: over every timed and untimed transition
    (a trajectory that left the finite numbers has 0)."""
    from fused_hmc import ops
    from fused_hmc.sampling import chain_statistics
    from timing import time_adaptive

    chains, dtype = q.shape[0], q.dtype
    name = target.op_name(dtype, q.device, chains=chains)
    tensors, scalars = target.op_tensors(dtype, q.device), target.op_scalars()
    f64 = dict(dtype=torch.float64, device=q.device)
    step = torch.full((1,), step_size, **f64)
    counts = chain_statistics.zeros(chains, q.device)
    stats = dict(mean=torch.zeros(q.shape, **f64), m2=torch.zeros(q.shape, **f64),
                 statistics=chain_statistics.as_list(counts))
    empty = q.new_empty(0)
    calls = [0]

    def call():
        ops.sample(q=q, target=name, target_tensors=tensors, target_scalars=scalars,
                   step_size=step, inv_mass=empty, jitter=0.0, num_leapfrog_steps=8, seed=3,
                   chain_offset=0, first_transition=0, num_transitions=transitions, **stats)
        calls[0] += 1

    seconds, _ = time_adaptive(call, q.device.type, target_s=0.2, repeats=3)
    accept = float(counts["accept_prob_sum"].sum()) / (chains * transitions * calls[0])
    return {"chains": chains, "seconds_per_call": seconds,
            "transitions_per_second": chains * transitions / seconds,
            "gradients_per_second": chains * (transitions * 8 + 1) / seconds,
            "mean_accept_prob": accept}


def _reference(model):
    from fused_hmc.validation.posteriordb import load_reference

    return load_reference(model.posteriordb)


def blackjax_chees(model, chains: int, warmup: int, draws: int) -> dict:
    import blackjax
    import jax
    import jax.numpy as jnp
    import optax

    import jax_models

    logdensity = jax_models.eight_schools(model.data)

    q0 = jnp.asarray(model.initial_point(chains, generator=torch.Generator().manual_seed(0))
                     .float().numpy())

    def go(seed):
        key = jax.random.key(seed)
        k_warm, k_sample = jax.random.split(key)
        warm = blackjax.chees_adaptation(logdensity, chains, target_acceptance_rate=0.651,
                                         mass_matrix_estimation="diagonal")
        (states, params), _ = warm.run(k_warm, q0, step_size=0.1,
                                       optim=optax.adam(0.025), num_steps=warmup)
        kernel = blackjax.dynamic_hmc(logdensity, **params).step

        def one(states, key):
            keys = jax.random.split(key, chains)
            states, _ = jax.vmap(kernel)(keys, states)
            return states, states.position

        _, positions = jax.lax.scan(one, states, jax.random.split(k_sample, draws))
        return jax.block_until_ready(positions)

    go(1)
    start = time.perf_counter()
    positions = np.asarray(go(2))  # [draw, chain, 10]
    wall = time.perf_counter() - start
    x = np.transpose(positions, (1, 0, 2)).astype(np.float64)
    constrained = model.constrained_values(torch.from_numpy(x)).numpy()
    return {"wall_s": wall} | _summary(constrained, _reference(model))


def main() -> None:
    from fused_hmc import models

    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=4096)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--out", default=None)
    parser.add_argument("--no-jax", action="store_true")
    parser.add_argument("--only-f32", action="store_true")
    parser.add_argument("--rate-chains", type=int, default=1 << 20)
    args = parser.parse_args()
    model = models.eight_schools()
    rows = {}
    for name, fn in (("fused_hmc duals f32", lambda: fused(model, args.chains, args.warmup,
                                                           args.draws, False, torch.float32)),
                     ("fused_hmc hand-written f32", lambda: fused(model, args.chains, args.warmup,
                                                                  args.draws, True,
                                                                  torch.float32)),
                     ("fused_hmc duals f64", lambda: fused(model, args.chains, args.warmup,
                                                           args.draws, False, torch.float64))):
        if args.only_f32 and name.endswith("f64"):
            continue
        rows[name] = fn()
        print(name, rows[name], flush=True)
    for gradient in (False, True):
        kind = "hand-written" if gradient else "duals"
        key = f"gradient evaluations/s at {args.rate_chains} chains ({kind} f32)"
        rows[key] = gradient_rate(model, args.rate_chains, gradient, torch.float32)
        print(key, rows[key], flush=True)
    if not args.no_jax:
        try:
            rows["blackjax chees+dhmc f32"] = blackjax_chees(model, args.chains, args.warmup,
                                                             args.draws)
            print("blackjax", rows["blackjax chees+dhmc f32"], flush=True)
        except Exception as exc:  # noqa: BLE001 - report the anchor's failure, keep ours
            rows["blackjax chees+dhmc f32"] = {"error": repr(exc)}
            print("blackjax failed:", repr(exc), flush=True)
    print(f"\n{'sampler':30s} {'wall s':>8s} {'min ESS':>10s} {'ESS/s':>10s} {'worst':>7s}")
    for name, r in rows.items():
        if "wall_s" in r:
            print(f"{name:30s} {r['wall_s']:8.2f} {r['min_bulk_ess']:10.3g} "
                  f"{r['min_bulk_ess'] / r['wall_s']:10.3g} {r['worst_mean_error_sd']:7.3f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"chains": args.chains, "warmup": args.warmup, "draws": args.draws,
                       "rows": rows, "device": (torch.cuda.get_device_name()
                                                if DEVICE == "cuda" else "cpu")}, f, indent=1)


if __name__ == "__main__":
    main()
