"""One rank of tests/unit/test_distributed.py (started by torch.multiprocessing.spawn): runs the
scenarios on a gloo process group and saves what each rank saw to out_dir/rank<r>.pt."""
from __future__ import annotations

import datetime
import os
import time

import torch
import torch.distributed as dist

import fused_hmc
from fused_hmc.sampling.distributed import end_rank_process

CHAINS, DIM, SEED = 7, 3, 1234  # 7 global chains: uneven shards on 2 and 3 ranks
RUN = dict(step_size=0.3, num_leapfrog_steps=4, num_warmup=30, jitter=0.1, progress=False)
SAMPLES = 20
# Pooled over the ranks: 20 warm-up transitions make Stan's windows 3 / 15 / 2 (one slow window,
# so the inverse mass is pooled once); a diagonal target with unequal scales, so it matters.
POOLED = dict(RUN, num_warmup=20, pooled=True)
POOLED_NAMES = ("samples", "final_state", "accept_count", "step_size", "inverse_mass")
# ChEES pooled over the ranks as well (its means and terms reduced across them), on the same target.
CHEES = dict(POOLED, adapt_trajectory_length=True, max_leapfrog_steps=20)
CHEES_NAMES = POOLED_NAMES + ("trajectory_length",)
# ChEES on the chains' mean acceptance (its default is their harmonic mean; pooled_acceptance.h's
# terms summed over the ranks either way).
MEAN_CHEES = dict(CHEES, pooled_acceptance="mean")
# A dense mass (CPU): pooled over the ranks (every rank's window co-moments gathered at the window's
# end), and per chain (each chain's own: the one process's bits); a correlated target.
DENSE = dict(POOLED, mass_matrix="dense")
DENSE_NAMES = POOLED_NAMES + ("mass_factorization_failures",)
DENSE_PER_CHAIN = dict(RUN, mass_matrix="dense")
# Chains that never move in a pooled warm-up (far_starts.py): global chains 1 and 5 start where the
# energy of N(0, I) overflows (every proposal rejected); nothing pooled is adapted, so the ranks'
# bits are the one process's, restarts included (at iteration 26, from other ranks' chains too).
RESTARTS = dict(step_size=0.3, num_leapfrog_steps=4, num_warmup=30, pooled=True,
                adapt_step_size=False, adapt_mass_matrix=False, progress=False)
RESTART_NAMES = ("samples", "final_state", "accept_count", "warmup_reseeded")
FAR = [1, 5]


def pooled_target():
    return fused_hmc.DiagonalGaussian(torch.zeros(DIM), torch.tensor([0.5, 1.0, 3.0]))


def dense_target():
    cov = torch.tensor([[1.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 2.0]], dtype=torch.float64)
    return fused_hmc.DenseGaussian(torch.zeros(DIM, dtype=torch.float64), torch.linalg.inv(cov))


def global_start() -> torch.Tensor:
    return torch.randn(CHAINS, DIM, generator=torch.Generator().manual_seed(5), dtype=torch.float64)


def far_start() -> torch.Tensor:
    q0 = global_start()
    q0[FAR] = 1e160
    return q0


def shard(rank: int, world: int) -> slice:
    """Rank r's rows of the global chains (uneven: the first ranks get the fewer)."""
    bounds = [CHAINS * r // world for r in range(world + 1)]
    return slice(bounds[rank], bounds[rank + 1])


def _outcome(call) -> dict:
    start = time.monotonic()
    try:
        call()
        return {"error": None, "seconds": time.monotonic() - start}
    except Exception as exc:  # noqa: BLE001 - the test looks at which error each rank raised
        return {"error": type(exc).__name__, "message": str(exc),
                "seconds": time.monotonic() - start}


def main(rank: int, world: int, rendezvous: str, out_dir: str, device: str = "cpu") -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=30))
    group = dist.group.WORLD
    q0 = global_start()[shard(rank, world)].to(device)  # on CUDA: ranks sharing one GPU
    saved = {}
    res = fused_hmc.sample(q0, SAMPLES, seed=SEED, process_group=group, **RUN)
    saved["result"] = {name: getattr(res, name) for name in (
        "samples", "final_state", "accept_count", "step_size", "inverse_mass", "chain_offset",
        "seed", "mean", "var", "chain_statistics")}
    saved["global"] = res.global_summary
    torch.manual_seed(100 + rank)  # seed=None: each rank would draw another; rank 0's is taken
    saved["drawn_seed"] = fused_hmc.Sampler(q0, process_group=group, progress=False).seed
    pooled = fused_hmc.sample(q0, SAMPLES, seed=SEED, process_group=group, target=pooled_target(),
                              **POOLED)
    saved["pooled"] = {name: getattr(pooled, name) for name in POOLED_NAMES}
    chees = fused_hmc.sample(q0, SAMPLES, seed=SEED, process_group=group, target=pooled_target(),
                             **CHEES)
    saved["chees"] = {name: getattr(chees, name) for name in CHEES_NAMES}
    mean = fused_hmc.sample(q0, SAMPLES, seed=SEED, process_group=group, target=pooled_target(),
                            **MEAN_CHEES)
    saved["mean_chees"] = {name: getattr(mean, name) for name in CHEES_NAMES}
    if device == "cpu":  # a dense mass pooled over ranks runs on the CPU only
        for key, options in (("dense", DENSE), ("dense_per_chain", DENSE_PER_CHAIN)):
            dense = fused_hmc.sample(q0, SAMPLES, seed=SEED, process_group=group,
                                     target=dense_target(), **options)
            saved[key] = {name: getattr(dense, name) for name in DENSE_NAMES}
    restarts = fused_hmc.sample(far_start()[shard(rank, world)].to(device), SAMPLES, seed=SEED,
                                process_group=group, **RESTARTS)
    saved["restarts"] = {name: getattr(restarts, name) for name in RESTART_NAMES}
    saved["restarts_global"] = restarts.global_summary
    saved["seed_mismatch"] = _outcome(lambda: fused_hmc.Sampler(q0, seed=rank,
                                                                process_group=group))
    bad_dim = q0 if rank != 1 else torch.zeros(len(q0), DIM + 1, dtype=q0.dtype)
    saved["wrong_dim"] = _outcome(lambda: fused_hmc.Sampler(bad_dim, seed=SEED,
                                                            process_group=group))
    bad_start = q0 if rank != 1 else torch.full_like(q0, float("nan"))
    saved["nan_start"] = _outcome(lambda: fused_hmc.Sampler(bad_start, seed=SEED,
                                                            process_group=group))
    saved["warmup_mismatch"] = _outcome(lambda: fused_hmc.Sampler(
        q0, seed=SEED, process_group=group, num_warmup=20 if rank == 1 else 30))
    other = fused_hmc.DiagonalGaussian(torch.zeros(DIM), torch.tensor([0.5, 1.0, 2.0]))
    saved["target_mismatch"] = _outcome(lambda: fused_hmc.Sampler(
        q0, seed=SEED, process_group=group, target=other if rank == 1 else pooled_target()))
    per_chain = torch.full((len(q0),), 0.1 + 0.01 * rank, dtype=torch.float64)  # rows differ
    saved["per_chain_step_sizes"] = _outcome(lambda: fused_hmc.Sampler(
        q0, seed=SEED, process_group=group, step_size=per_chain))
    sampler = fused_hmc.Sampler(q0, seed=SEED, process_group=group, progress=False)
    saved["bad_run"] = _outcome(lambda: sampler.run(0 if rank == 1 else 5))
    pooled_sampler = fused_hmc.Sampler(q0, seed=SEED, process_group=group, progress=False,
                                       pooled=True, num_warmup=20)
    saved["bad_pooled_run"] = _outcome(lambda: pooled_sampler.run(0 if rank == 1 else 5))
    failing = fused_hmc.Sampler(q0, seed=SEED, process_group=group, progress=False, pooled=True,
                                num_warmup=20)
    if rank == 1:  # rank 1's ops fail in the middle of the pooled warm-up
        real = failing._chains.run_op

        def run_op(op, q, first, *args, **kwargs):
            if first == 7:
                raise ValueError("injected failure at transition 7")
            return real(op, q, first, *args, **kwargs)

        failing._chains.run_op = run_op
    saved["fails_in_pooled_warmup"] = _outcome(lambda: failing.run(5))
    failing = fused_hmc.Sampler(q0, seed=SEED, process_group=group, progress=False, pooled=True,
                                num_warmup=20)
    if rank == 1:  # rank 1's ops fail in the per-chain first phase (far_starts.py)
        first_phase = failing._chains.far_starts.per_chain
        real_first = first_phase.run_op

        def first_run_op(op, q, first, *args, **kwargs):
            if first == 1:
                raise ValueError("injected failure at transition 1")
            return real_first(op, q, first, *args, **kwargs)

        first_phase.run_op = first_run_op
    saved["fails_in_first_phase"] = _outcome(lambda: failing.run(5))
    torch.save(saved, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()
    end_rank_process(0)  # not through the interpreter's finalization, where gloo ranks can abort
