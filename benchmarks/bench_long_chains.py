"""Long runs on CUDA: fused_hmc's persistent kernel against JAX, BlackJAX, NumPyro and torch, one run.

Workloads: 1000 transitions of 2048 chains (d=64, L=10, eps=0.1, no draws kept); per-transition cost
at 1,048,576 chains x 64 and at 2048 chains x 1024. Reports element-transitions per second.
Writes JSON to benchmarks/results/ (and $OUT if set).

    python benchmarks/bench_long_chains.py [--no-jax]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import environment, save, time_per_call  # noqa: E402

import fused_hmc  # noqa: E402
from fused_hmc import ops  # noqa: E402
from fused_hmc.reference import ReferenceModel  # noqa: E402
from fused_hmc.sampling import chain_statistics  # noqa: E402

L, EPS = 10, 0.1


def kernel_seconds(chains: int, dim: int, transitions: int, repeats: int = 5) -> float:
    """The sample op alone on N(0, I) (buffers preallocated, no draws kept; the "sample op" rows):
    seconds per call of `transitions`."""
    q = torch.randn(chains, dim, device="cuda")
    mu = torch.zeros(dim, device="cuda")
    step = torch.full((1,), EPS, device="cuda", dtype=torch.float64)
    inv_mass = torch.ones(1, dim, device="cuda")
    mean = torch.zeros(chains, dim, device="cuda", dtype=torch.float64)
    statistics = chain_statistics.as_list(chain_statistics.zeros(chains, "cuda"))
    return time_per_call(lambda: ops.sample(
        q=q, target="standard", target_tensors=[mu], target_scalars=[], step_size=step,
        inv_mass=inv_mass, jitter=0.0, num_leapfrog_steps=L, seed=7, chain_offset=0,
        first_transition=0, num_transitions=transitions, statistics=statistics, mean=mean,
        m2=torch.zeros_like(mean)), 1, repeats=repeats)


def api_seconds(chains: int, dim: int, transitions: int) -> float:
    """fused_hmc.sample end to end (allocation, launch(es), result), synchronised host clock."""
    q0 = torch.randn(chains, dim, device="cuda")
    run = lambda: fused_hmc.sample(q0, transitions, step_size=EPS, num_leapfrog_steps=L,  # noqa: E731
                                   keep_samples=False, progress=False, seed=3)
    run()
    torch.cuda.synchronize()
    best = []
    for _ in range(5):
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        best.append(time.perf_counter() - start)
    return sorted(best)[len(best) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-jax", action="store_true")
    args = parser.parse_args()
    rows: dict[str, float] = {}
    rows["fused_hmc sample op kernel, 1000 transitions"] = kernel_seconds(2048, 64, 1000)
    rows["fused_hmc.sample API, 1000 transitions"] = api_seconds(2048, 64, 1000)
    reference = ReferenceModel(64).cuda()
    q = torch.randn(2048, 64, device="cuda")
    rows["reference eager, 1000 transitions"] = 1000 * time_per_call(lambda: reference(q), 100, 3)
    compiled = torch.compile(reference)
    rows["reference torch.compile default, 1000 transitions"] = \
        1000 * time_per_call(lambda: compiled(q), 300, 3)
    if not args.no_jax:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        from anchors_jax import blackjax_scan, jax_scan, numpyro_vectorized

        for name, fn in (("JAX jit/lax.scan", jax_scan), ("BlackJAX vmap+scan", blackjax_scan),
                         ("NumPyro vectorized", numpyro_vectorized)):
            try:
                rows[f"{name}, 1000 transitions"] = fn(2048, 64, L, EPS, 1000)
            except Exception as exc:  # noqa: BLE001 - an anchor that cannot run is reported, not fatal
                print(f"{name}: not measured ({type(exc).__name__}: {exc})")
    per_transition = {
        "fused_hmc sample op, 1,048,576 chains x 64, per transition":
            kernel_seconds(1 << 20, 64, 20) / 20,
        "fused_hmc sample op, 2048 chains x 1024, per transition":
            kernel_seconds(2048, 1024, 200) / 200,
    }
    big = torch.randn(1 << 20, 64, device="cuda")
    big_mu = torch.zeros(64, device="cuda")
    per_transition["fused_hmc hmc_step philox, 1,048,576 chains x 64, per transition"] = \
        time_per_call(lambda: ops.transition(big, big_mu, EPS, L, "philox"), 20)

    print(f"\n{'workload (L=10, eps=0.1)':<66} {'ms':>10} {'elem-transitions/s':>20}")
    for name, seconds in rows.items():
        print(f"{name:<66} {seconds * 1e3:>10.3f} {2048 * 64 * 1000 / seconds:>20.3e}")
    sizes = [(1 << 20) * 64, 2048 * 1024, (1 << 20) * 64]
    for (name, seconds), size in zip(per_transition.items(), sizes):
        print(f"{name:<66} {seconds * 1e3:>10.4f} {size / seconds:>20.3e}")
    results = {"environment": environment("python benchmarks/bench_long_chains.py"
                                          + (" --no-jax" if args.no_jax else "")),
               "seconds_1000_transitions_2048x64": rows,
               "seconds_per_transition": per_transition}
    save(results, "bench_long_chains.json")


if __name__ == "__main__":
    main()
