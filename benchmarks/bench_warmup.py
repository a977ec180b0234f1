"""Warm-up on CUDA: what a warm-up transition costs, and ESS per second after warm-up against
BlackJAX's window_adaptation on the same ill-conditioned target, side by side in one process.

1. Cost per transition (2048 chains x 64, float32, L = 10, diagonal target, jitter 0.2; 1000
   transitions per call, CUDA events, median of 5) of the sample and warmup ops: sampling N(0, I)
   with unit mass ("sample op, N(0, I)", the seed sampler), sampling the target per chain
   ("sample op, target"), warming up with one adaptation state per chain and pooled ("warmup op";
   one cooperative kernel with a grid-wide barrier per transition). Issue 7 asks for warm-up
   within 1.5x of a sampling transition.
2. ESS/s: N(mu, diag(sigma^2)), d = 64, sigma log-spaced over 0.01 .. 100 (condition number 1e8 of
   the covariance), chains started at N(0, I); 1000 warm-up + 1000 kept transitions, L = 10,
   target acceptance 0.8. fused_hmc.sample (float32 and float64; pooled and per-chain adaptation,
   jitter 0.2) against BlackJAX window_adaptation + hmc, vmapped over the chains and jitted (Stan's
   windows, per-chain adaptation, float32, no jitter: blackjax.hmc has a fixed step). Wall time of
   warm-up and sampling together (BlackJAX after one compiling call, fused_hmc after one build
   call); ESS is the bulk ESS (arviz-stats) of every coordinate and of every coordinate's square,
   the minimum over them, computed on the first 64 chains and scaled to all chains (chains are
   exchangeable), per second of wall time.

    python benchmarks/bench_warmup.py [--chains 512] [--no-blackjax]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import environment, save, time_per_call  # noqa: E402

import fused_hmc  # noqa: E402
from fused_hmc import diagnostics, ops  # noqa: E402
from fused_hmc.sampling import chain_statistics  # noqa: E402
from fused_hmc.targets import DiagonalGaussian  # noqa: E402

L, WARMUP, DRAWS, JITTER = 10, 1000, 1000, 0.2
ESS_CHAINS = 64


def ill_conditioned(d: int) -> DiagonalGaussian:
    return DiagonalGaussian(torch.linspace(-3.0, 3.0, d, dtype=torch.float64),
                            torch.logspace(-2, 2, d, dtype=torch.float64))


def transition_costs(chains: int = 2048, dim: int = 64, transitions: int = 1000) -> dict:
    """Milliseconds per transition of every chain, each op running `transitions` per call."""
    target = ill_conditioned(dim)
    q = torch.randn(chains, dim, device="cuda")
    tensors = target.op_tensors(q.dtype, q.device)
    f64 = dict(dtype=torch.float64, device="cuda")
    statistics = chain_statistics.as_list(chain_statistics.zeros(chains, "cuda"))
    stats = dict(mean=torch.zeros(chains, dim, **f64), m2=torch.zeros(chains, dim, **f64),
                 statistics=statistics)

    def state(groups):
        return (torch.full((groups,), 0.01, **f64), torch.ones(groups, dim, device="cuda"),
                dict(dual_averaging=torch.zeros(groups, 3, **f64),
                     window_mean=torch.zeros(chains, dim, **f64),
                     window_m2=torch.zeros(chains, dim, **f64)))

    def warmup(s):
        return lambda: ops.warmup(
            q=q, target=target.op_target, target_tensors=tensors, target_scalars=[],
            step_size=s[0], inv_mass=s[1], jitter=JITTER, num_leapfrog_steps=L, seed=1,
            chain_offset=0, first_transition=0, num_transitions=transitions,
            statistics=statistics, **s[2], warmup_start=0, num_warmup=transitions,
            windows=[75, 25, 50], target_accept=0.8, adapt_step_size=True,
            adapt_mass_matrix=True)

    own, pooled, unit = state(chains), state(1), state(1)
    # "sample op, N(0, I)": the sample op on N(0, I) with one step size and unit mass (report.py
    # reads these labels).
    calls = {
        "sample op, N(0, I) (seed sampler)": lambda: ops.sample(
            q=q, target="standard", target_tensors=[torch.zeros(dim, device="cuda")],
            target_scalars=[], step_size=torch.full((1,), 0.01, **f64), inv_mass=unit[1],
            jitter=0.0, num_leapfrog_steps=L, seed=1, chain_offset=0, first_transition=0,
            num_transitions=transitions, **stats),
        "sample op, target": lambda: ops.sample(
            q=q, target=target.op_target, target_tensors=tensors, target_scalars=[],
            step_size=own[0], inv_mass=own[1], jitter=JITTER, num_leapfrog_steps=L, seed=1,
            chain_offset=0, first_transition=0, num_transitions=transitions, **stats),
        "warmup op, per chain": warmup(own),
        "warmup op, pooled": warmup(pooled),
    }
    return {name: 1e3 * time_per_call(fn, 1, repeats=5, warmup=1) / transitions
            for name, fn in calls.items()}


def min_ess(draws: np.ndarray, mu: np.ndarray) -> float:
    """Smallest bulk ESS over every coordinate and every coordinate's square, of all chains (from
    the first ESS_CHAINS)."""
    x = draws[:ESS_CHAINS].astype(np.float64) - mu
    values = np.concatenate([x, x ** 2], axis=-1)
    return float(np.min(diagnostics.ess_bulk(values))) * draws.shape[0] / min(ESS_CHAINS,
                                                                               draws.shape[0])


def fused_run(chains: int, dim: int, dtype: torch.dtype, pooled: bool,
              jitter: float = JITTER) -> dict:
    target = ill_conditioned(dim)
    q0 = torch.randn(chains, dim, generator=torch.Generator().manual_seed(0), dtype=dtype)

    def run(seed):
        torch.cuda.synchronize()
        start = time.perf_counter()
        res = fused_hmc.sample(q0.cuda(), DRAWS, num_warmup=WARMUP, target=target, pooled=pooled,
                               jitter=jitter, num_leapfrog_steps=L, step_size=0.1, seed=seed,
                               progress=False)
        torch.cuda.synchronize()
        return res, time.perf_counter() - start

    run(1)  # builds and warms up
    res, seconds = run(2)
    ess = min_ess(res.samples.cpu().numpy(), target.mean.numpy())
    return {"seconds": seconds, "min_ess": ess, "ess_per_second": ess / seconds,
            "accept_prob": res.mean_accept_prob.mean().item()}


def blackjax_run(chains: int, dim: int) -> dict:
    import blackjax
    import jax
    import jax.numpy as jnp

    target = ill_conditioned(dim)
    mu = jnp.asarray(target.mean.numpy(), dtype=jnp.float32)
    scale = jnp.asarray(target.scale.numpy(), dtype=jnp.float32)

    def logdensity(x):
        return -0.5 * jnp.sum(((x - mu) / scale) ** 2)

    def one_chain(key, position):
        warm_key, sample_key = jax.random.split(key)
        warmup = blackjax.window_adaptation(blackjax.hmc, logdensity, target_acceptance_rate=0.8,
                                            initial_step_size=0.1, num_integration_steps=L)
        (state, params), _ = warmup.run(warm_key, position, num_steps=WARMUP)
        kernel = blackjax.hmc(logdensity, **params)

        def step(state, key):
            state, info = kernel.step(key, state)
            return state, (state.position, info.acceptance_rate)

        _, (positions, accept) = jax.lax.scan(step, state, jax.random.split(sample_key, DRAWS))
        return positions, accept

    run = jax.jit(jax.vmap(one_chain))
    q0 = jnp.asarray(np.random.default_rng(0).standard_normal((chains, dim)), dtype=jnp.float32)

    def timed(seed):
        keys = jax.random.split(jax.random.PRNGKey(seed), chains)
        start = time.perf_counter()
        positions, accept = run(keys, q0)
        positions.block_until_ready()
        return positions, accept, time.perf_counter() - start

    _, _, compile_and_run = timed(1)
    positions, accept, seconds = timed(2)
    ess = min_ess(np.asarray(positions), target.mean.numpy())
    return {"seconds": seconds, "first_call_seconds": compile_and_run, "min_ess": ess,
            "ess_per_second": ess / seconds, "accept_prob": float(np.mean(np.asarray(accept)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=512)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--no-blackjax", action="store_true")
    args = parser.parse_args()
    fused_hmc.load_extension()

    costs = transition_costs()
    sampling = costs["sample op, target"]
    print("ms per transition, 2048 chains x 64, float32, L=10:")
    for name, ms in costs.items():
        print(f"  {name:28s} {ms:8.4f} ms  ({ms / sampling:4.2f}x the sample op on the target)", flush=True)

    runs = {}
    for dtype in (torch.float32, torch.float64):
        for pooled in (True, False):
            name = f"fused_hmc {str(dtype)[6:]} {'pooled' if pooled else 'per-chain'}"
            runs[name] = fused_run(args.chains, args.dim, dtype, pooled)
            print(name, runs[name], flush=True)
    runs["fused_hmc float32 pooled, no jitter"] = fused_run(args.chains, args.dim, torch.float32,
                                                           True, jitter=0.0)
    if not args.no_blackjax:
        runs["BlackJAX window_adaptation + hmc (vmap, jit)"] = blackjax_run(args.chains, args.dim)
        print(runs["BlackJAX window_adaptation + hmc (vmap, jit)"], flush=True)
    print(f"\nESS/s, {args.chains} chains, d={args.dim}, sigma 0.01..100, "
          f"{WARMUP} warm-up + {DRAWS} draws, L={L}:")
    print(f"  {'method':46s} {'seconds':>8s} {'min ESS':>9s} {'ESS/s':>10s} {'accept':>7s}")
    for name, r in runs.items():
        print(f"  {name:46s} {r['seconds']:8.3f} {r['min_ess']:9.0f} {r['ess_per_second']:10.0f} "
              f"{r['accept_prob']:7.3f}")
    save({"environment": environment("python benchmarks/bench_warmup.py"),
          "ms_per_transition_2048x64_f32": costs, "ess_ill_conditioned": runs,
          "settings": {"chains": args.chains, "dim": args.dim, "warmup": WARMUP, "draws": DRAWS,
                       "L": L, "jitter": JITTER}}, "bench_warmup.json")


if __name__ == "__main__":
    main()
