"""Chains over several processes (process_group=, fused_hmc.sampling.distributed) on CPU with gloo.

Each rank runs its shard of 7 global chains (uneven on 2, 3 and 4 ranks) in a spawned process
(tests/unit/_distributed_worker.py); every rank's shard must be bit for bit the rows of a
one-process run of all 7 chains (per-chain warm-up with jitter: the philox stream is keyed by the
global chain id, and per-chain adaptation reads its own chain only), and the global summary must
match the one-process statistics. The bad-input scenarios must end every rank with an error, fast.
"""
from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from hypothesis import given, settings, strategies as st

import fused_hmc
from fused_hmc import diagnostics
from fused_hmc.sampling.distributed import merge_moments

from . import _distributed_worker as worker

EPS = np.finfo(np.float64).eps


@given(st.lists(st.integers(0, 6), min_size=1, max_size=5), st.integers(0, 2**32 - 1))
@settings(max_examples=30, deadline=None)
def test_merge_moments_is_the_moments_of_the_union(sizes, seed):
    """Chan et al.'s k-part merge of (n, mean, M2) against numpy on the concatenated values."""
    rng = np.random.default_rng(seed)
    parts = [rng.normal(3.0, 2.0, size=(n, 2)) for n in sizes]
    counts = torch.tensor(sizes)
    means = torch.tensor(np.stack([p.mean(0) if len(p) else np.zeros(2) for p in parts]))
    m2s = torch.tensor(np.stack([((p - p.mean(0)) ** 2).sum(0) if len(p) else np.zeros(2)
                                 for p in parts]))
    total, mean, m2 = merge_moments(counts, means, m2s)
    values = np.concatenate(parts)
    assert total == len(values)
    if not len(values):
        assert torch.isnan(mean).all() and torch.isnan(m2).all()
        return
    # float64 sums of <= 30 values of size ~10: a few hundred eps of the values' squares.
    scale = (values ** 2).max()
    np.testing.assert_allclose(mean.numpy(), values.mean(0), rtol=0, atol=64 * len(values) * EPS
                               * np.abs(values).max())
    np.testing.assert_allclose(m2.numpy(), ((values - values.mean(0)) ** 2).sum(0), rtol=0,
                               atol=64 * len(values) * EPS * scale)


@pytest.fixture(scope="module")
def one_process():
    return fused_hmc.sample(worker.global_start(), worker.SAMPLES, seed=worker.SEED, **worker.RUN)


def _spawn(world: int, tmp_path: Path, device: str = "cpu") -> list[dict]:
    mp.spawn(worker.main, args=(world, str(tmp_path / "rendezvous"), str(tmp_path), device),
             nprocs=world)
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(world)]


@pytest.fixture(scope="module", params=[2, 3, 4])  # one rank: test_one_rank_is_...
def ranks(request, tmp_path_factory):
    return _spawn(request.param, tmp_path_factory.mktemp(f"ranks{request.param}"))


def test_shards_are_the_one_process_run_bit_for_bit(ranks, one_process):
    world = len(ranks)
    for name in ("samples", "final_state", "accept_count", "step_size", "inverse_mass", "mean",
                 "var"):
        joined = torch.cat([r["result"][name] for r in ranks])
        assert torch.equal(joined, getattr(one_process, name)), name
    for name, t in one_process.chain_statistics.items():
        joined = torch.cat([r["result"]["chain_statistics"][name] for r in ranks])
        assert torch.equal(joined, t), name
    assert [r["result"]["chain_offset"] for r in ranks] == [
        worker.shard(k, world).start for k in range(world)]
    assert {r["result"]["seed"] for r in ranks} == {worker.SEED}


def test_global_summary_is_the_one_process_statistics(ranks, one_process):
    draws = one_process.samples.double().reshape(-1, worker.DIM).numpy()
    n = len(draws)  # float64 Welford and merge over n values: a few n eps of the squares
    atol = 64 * n * EPS * (draws ** 2).max()
    for r in ranks:
        g = r["global"]
        assert (g.chains, g.ranks, g.draws) == (worker.CHAINS, len(ranks), n)
        np.testing.assert_allclose(g.mean, draws.mean(0), rtol=0, atol=atol)
        np.testing.assert_allclose(g.var, draws.var(0, ddof=1), rtol=0, atol=atol)
        assert g.accept_count == int(one_process.accept_count.sum())
        assert g.transitions == worker.CHAINS * worker.SAMPLES
        np.testing.assert_allclose(g.mean_accept_prob,
                                   one_process.mean_accept_prob.mean().item(), rtol=1e-12)
        # every chain statistic, summed over every rank's chains (integers exactly)
        assert list(g.statistics) == list(one_process.chain_statistics)
        for name, t in one_process.chain_statistics.items():
            if t.dtype == torch.int64:
                assert g.statistics[name] == int(t.sum()), name
            else:
                np.testing.assert_allclose(g.statistics[name], float(t.sum()), rtol=1e-12)
        # The very chains and draws a one-process summary() diagnoses, so the same ESS / R-hat.
        mine, theirs = g.diagnose(), diagnostics.diagnose(
            one_process.samples, max_dims=diagnostics.SUMMARY_ROWS,
            max_values=diagnostics.SUMMARY_VALUES)
        assert mine.chains == theirs.chains == worker.CHAINS
        for field in ("ess_bulk", "ess_tail", "r_hat"):
            assert np.array_equal(getattr(mine, field), getattr(theirs, field)), field


@pytest.mark.cuda
def test_two_ranks_sharing_one_gpu_are_the_one_process_run(tmp_path):
    """Issue 16's single-GPU check: 2 gloo ranks with CUDA chains on the one GPU."""
    one = fused_hmc.sample(worker.global_start().cuda(), worker.SAMPLES, seed=worker.SEED,
                           **worker.RUN)
    ranks = _spawn(2, tmp_path, "cuda")
    for name in ("samples", "final_state", "accept_count", "step_size", "inverse_mass"):
        assert torch.equal(torch.cat([r["result"][name] for r in ranks]), getattr(one, name))
    assert ranks[0]["global"].accept_count == int(one.accept_count.sum())
    _assert_pooled_across_ranks(ranks, fused_hmc.sample(
        worker.global_start().cuda(), worker.SAMPLES, seed=worker.SEED,
        target=worker.pooled_target(), **worker.POOLED))


def test_seed_none_takes_rank_0s_draw(ranks):
    assert len({r["drawn_seed"] for r in ranks}) == 1


@pytest.fixture(scope="module")
def one_process_pooled():
    return fused_hmc.sample(worker.global_start(), worker.SAMPLES, seed=worker.SEED,
                            target=worker.pooled_target(), **worker.POOLED)


@pytest.fixture(scope="module")
def one_process_chees():
    return fused_hmc.sample(worker.global_start(), worker.SAMPLES, seed=worker.SEED,
                            target=worker.pooled_target(), **worker.CHEES)


def _assert_pooled_across_ranks(ranks, one, key="pooled"):
    """The warm-up pooled over every rank's chains: the same step size and inverse mass on every
    rank, bit for bit, and the one-process pooled warm-up's to rounding. The two sum the same
    statistics in another order (a rank's chains, then the ranks; the kernel pairwise over all
    chains): an ulp or so per transition, which the dual averaging's feedback (the step size
    moves the next acceptance) amplifies about 2x every 3 transitions. Measured here over one
    rank: 1e-13 relative after 10 warm-up transitions, 1e-11 after 20, 1e-9 after 40; so 20
    transitions and 1e-8, a margin of about 1000 (the runs are deterministic: fixed seeds, the
    same bits each time). An accept decision that flipped would show as a difference of order 1;
    pooling over one rank's chains alone moves the step size by percents. The draws follow the
    step size through the leapfrog steps and move further: measured 4.2e-8 relative apart over 4
    ranks here and 1.3e-8 over 2 ranks on the H200 (the pooled kernel's block sums, another order
    again), so 1e-6 for them (a margin above 20, still a million times below a flipped
    decision)."""
    for name in ("step_size", "inverse_mass"):  # as every chain's rows
        joined = torch.cat([r[key][name] for r in ranks])
        assert torch.equal(joined, joined[:1].expand_as(joined)), name
        torch.testing.assert_close(joined, getattr(one, name), rtol=1e-8, atol=0)
    for name in ("samples", "final_state"):
        joined = torch.cat([r[key][name] for r in ranks])
        torch.testing.assert_close(joined, getattr(one, name), rtol=1e-6, atol=1e-12)
    assert torch.equal(torch.cat([r[key]["accept_count"] for r in ranks]), one.accept_count)


def test_pooled_warmup_pools_every_ranks_chains(ranks, one_process_pooled):
    _assert_pooled_across_ranks(ranks, one_process_pooled)


def test_chees_pools_every_ranks_chains(ranks, one_process_chees):
    """ChEES across ranks (two reductions per transition, outside the kernel): the same
    trajectory length on every rank, bit for bit, and the one-process kernel's to rounding, with
    the tolerances of _assert_pooled_across_ranks. Measured over one rank: 5e-14 relative in T,
    the step size and the inverse mass after these 20 transitions (a margin of 2e5 to 1e-8),
    1e-8 after 40, order 1 after 100 (the feedback through the jittered step counts is chaotic,
    as for any two summation orders). A jittered step count that flipped would move the draws by
    order 1."""
    _assert_pooled_across_ranks(ranks, one_process_chees, key="chees")
    lengths = {r["chees"]["trajectory_length"] for r in ranks}
    assert len(lengths) == 1
    assert lengths.pop() == pytest.approx(one_process_chees.trajectory_length, rel=1e-8, abs=0)
    assert one_process_chees.trajectory_length != worker.CHEES["step_size"] * worker.CHEES[
        "num_leapfrog_steps"]  # adapted away from T0


def test_chees_on_the_mean_acceptance_pools_every_ranks_chains(ranks):
    """pooled_acceptance="mean" over the ranks (ChEES's default, "harmonic", is
    test_chees_pools_every_ranks_chains'; pooled_ranks.acceptance_terms gives either's sums): the
    one-process kernel's run, with the tolerances of _assert_pooled_across_ranks, and not the
    harmonic mean's."""
    one = fused_hmc.sample(worker.global_start(), worker.SAMPLES, seed=worker.SEED,
                           target=worker.pooled_target(), **worker.MEAN_CHEES)
    _assert_pooled_across_ranks(ranks, one, key="mean_chees")
    harmonic = torch.cat([r["chees"]["step_size"] for r in ranks])
    assert not torch.allclose(harmonic, one.step_size, rtol=1e-3)


@pytest.fixture(scope="module")
def one_process_dense():
    return {key: fused_hmc.sample(worker.global_start(), worker.SAMPLES, seed=worker.SEED,
                                  target=worker.dense_target(), **options)
            for key, options in (("dense", worker.DENSE),
                                 ("dense_per_chain", worker.DENSE_PER_CHAIN))}


def test_dense_pooled_warmup_pools_every_ranks_chains(ranks, one_process_dense):
    """The pooled dense mass over the ranks (every rank's window co-moments gathered, the one
    kernel's pooled covariance formed from them on every rank): the tolerances of
    _assert_pooled_across_ranks, whose step size feedback is the same."""
    one = one_process_dense["dense"]
    _assert_pooled_across_ranks(ranks, one, key="dense")
    assert not torch.equal(one.inverse_mass[0], torch.eye(worker.DIM, dtype=torch.float64))
    failures = torch.cat([r["dense"]["mass_factorization_failures"] for r in ranks])
    assert torch.equal(failures, one.mass_factorization_failures)


def test_per_chain_dense_is_the_one_process_run(ranks, one_process_dense):
    one = one_process_dense["dense_per_chain"]
    for name in worker.DENSE_NAMES:
        joined = torch.cat([r["dense_per_chain"][name] for r in ranks])
        assert torch.equal(joined, getattr(one, name)), name


@pytest.mark.parametrize("scenario, error", [
    ("seed_mismatch", "different seeds"), ("wrong_dim", "differ in dim"),
    ("warmup_mismatch", "num_warmup (ranks [1] differ from rank 0"),
    ("target_mismatch", "target (ranks [1] differ from rank 0")])
def test_refused_on_every_rank(ranks, scenario, error):
    """Ranks given different settings (rank 1's num_warmup or target) all raise, naming it."""
    for r in ranks:
        assert r[scenario]["error"] == "ValueError" and error in r[scenario]["message"]
        assert r[scenario]["seconds"] < 10


def test_per_chain_settings_are_each_ranks_own_rows(ranks):
    """Per-chain step sizes differ between ranks by design (each holds its chains' rows)."""
    assert all(r["per_chain_step_sizes"]["error"] is None for r in ranks)


def test_restarts_draw_the_same_donors_across_ranks(ranks):
    """Chains that never moved restart from the chains of any rank, as in one process: with
    nothing pooled adapted the ranks' results are the one process's bit for bit."""
    one = fused_hmc.sample(worker.far_start(), worker.SAMPLES, seed=worker.SEED,
                           **worker.RESTARTS)
    expected = torch.zeros(worker.CHAINS, dtype=torch.int64)
    expected[worker.FAR] = 1
    assert torch.equal(one.warmup_reseeded, expected) and bool((one.accept_count > 0).all())
    for name in worker.RESTART_NAMES:
        assert torch.equal(torch.cat([r["restarts"][name] for r in ranks]), getattr(one, name))
    assert all(r["restarts_global"].restarted_count == len(worker.FAR) for r in ranks)


@pytest.mark.parametrize("scenario, own_error", [("nan_start", "non-finite"),
                                                 ("bad_run", "num_transitions"),
                                                 ("bad_pooled_run", "num_transitions"),
                                                 ("fails_in_pooled_warmup", "injected failure"),
                                                 ("fails_in_first_phase", "injected failure")])
def test_an_error_on_one_rank_ends_every_rank(ranks, scenario, own_error):
    """Rank 1 fails (a NaN start; run(0), also before a pooled warm-up; its chain ops in the middle
    of a pooled warm-up, or in its per-chain first phase): it raises its error, every other rank
    RuntimeError, at once (the process group's timeout is 30 s)."""
    for k, r in enumerate(ranks):
        outcome = r[scenario]
        if k == 1:
            assert outcome["error"] == "ValueError" and own_error in outcome["message"]
        else:
            assert outcome["error"] == "RuntimeError" and "another rank" in outcome["message"]
        assert outcome["seconds"] < 10


def test_one_rank_is_the_one_process_run_and_chain_offset_is_refused(tmp_path, one_process,
                                                                    one_process_pooled,
                                                                    one_process_chees):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                            world_size=1, timeout=datetime.timedelta(seconds=30))
    try:
        alone = fused_hmc.sample(worker.global_start(), worker.SAMPLES, seed=worker.SEED,
                                 process_group=dist.group.WORLD, **worker.RUN)
        assert torch.equal(alone.samples, one_process.samples)
        assert alone.global_summary.chains == worker.CHAINS and one_process.global_summary is None
        pooled = fused_hmc.sample(worker.global_start(), worker.SAMPLES, seed=worker.SEED,
                                  process_group=dist.group.WORLD, target=worker.pooled_target(),
                                  **worker.POOLED)  # the pooled_update path, over one rank
        _assert_pooled_across_ranks([{"pooled": {name: getattr(pooled, name)
                                                 for name in worker.POOLED_NAMES}}],
                                    one_process_pooled)
        chees = fused_hmc.sample(worker.global_start(), worker.SAMPLES, seed=worker.SEED,
                                 process_group=dist.group.WORLD, target=worker.pooled_target(),
                                 **worker.CHEES)
        _assert_pooled_across_ranks([{"chees": {name: getattr(chees, name)
                                                for name in worker.CHEES_NAMES}}],
                                    one_process_chees, key="chees")
        with pytest.raises(ValueError, match="chain_offset must be 0 with process_group"):
            fused_hmc.Sampler(torch.zeros(2, 2), chain_offset=3, process_group=dist.group.WORLD)
        with pytest.raises(TypeError, match="process_group must be a torch.distributed"):
            fused_hmc.Sampler(torch.zeros(2, 2), process_group="world")
        # each rank would adapt its own T from its own chains
        with pytest.raises(ValueError, match="pooled=False runs in one process for now"):
            fused_hmc.Sampler(torch.zeros(2, 2), num_warmup=10, adapt_trajectory_length=True,
                              pooled=False, process_group=dist.group.WORLD)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("flag, says", [("--pooled", "pooled over every rank's chains"),
                                        ("--adapt-trajectory-length", "adapted by ChEES")])
def test_torchrun_cli_reports_every_ranks_chains_once(flag, says):
    torchrun = Path(sys.executable).parent / "torchrun"
    done = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "fused_hmc", "sample",
         "--device", "cpu", "--chains", "4", "--dim", "3", "--samples", "20", "--no-progress",
         "--warmup", "30", flag],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("fused_hmc: 8 chains on 2 ranks") == 1, done.stdout
    assert "r_hat" in done.stdout or "R-hat" in done.stdout, done.stdout
    assert says in done.stdout, done.stdout


@pytest.mark.parametrize("flags, named", [(["--checkpoint", "x.zip"], "--checkpoint"),
                                          (["--superchains", "2"], "--superchains")])
def test_torchrun_cli_refuses_what_ranks_cannot_do_yet(flags, named):
    """Under torchrun (WORLD_SIZE > 1) the CLI names the flag it cannot honour yet, before it
    joins the process group (so nothing waits for the other ranks)."""
    done = subprocess.run(
        [sys.executable, "-m", "fused_hmc", "sample", "--device", "cpu", "--chains", "4", "--dim",
         "3", "--samples", "5", "--no-progress", *flags], capture_output=True, text=True,
        timeout=120, env=dict(os.environ, WORLD_SIZE="2", RANK="0"))
    assert done.returncode != 0
    assert named in done.stderr and "torchrun" in done.stderr, done.stderr


def _torchrun(args: list[str], timeout: int = 120) -> subprocess.CompletedProcess:
    torchrun = Path(sys.executable).parent / "torchrun"
    return subprocess.run([str(torchrun), "--standalone", "--nproc_per_node", "2", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))


@pytest.mark.slow  # two processes start torch: about 10 s, more on a loaded machine
def test_torchrun_cli_warns_as_a_one_process_run_does():
    """Chains that never move (N(0, 1e-6 I) with step 0.5: every proposal rejected): rank 0
    prints the R-hat and stuck-chain warnings a one-process run prints, once, of every rank's
    chains."""
    done = _torchrun(["-m", "fused_hmc", "sample", "--device", "cpu", "--chains", "4", "--dim",
                      "2", "--samples", "30", "--no-progress", "--target", "diagonal", "--scale",
                      "0.001", "--step-size", "0.5", "--leapfrog", "3"])
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("fused-hmc sample: warning: R-hat max") == 1, done.stderr
    assert done.stderr.count("8 of 8 chains accepted none of their 30 sampling transitions "
                             "(chains 0, 1, 2, 3, 4, ...)") == 1, done.stderr


@pytest.mark.slow  # two processes start torch: about 10 s, more on a loaded machine
def test_torchrun_cli_ranks_given_different_flags_all_stop_naming_it(tmp_path):
    """One launch over two nodes runs a command on each: here rank 1's asks for another
    --warmup. Every rank ends with the one-line error naming it (exit 2), before any chain runs."""
    script = tmp_path / "rank.py"
    script.write_text(
        "import os, sys\n"
        "from fused_hmc import cli\n"
        "warmup = '20' if os.environ['RANK'] == '1' else '30'\n"
        "sys.exit(cli.main(['sample', '--device', 'cpu', '--chains', '4', '--dim', '2',\n"
        "                   '--samples', '10', '--no-progress', '--warmup', warmup]))\n")
    done = _torchrun([str(script)])
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if "error: argument --warmup" in line]
    assert len(errors) == 2 and all("ranks [1] differ from rank 0" in e for e in errors), (
        done.stderr)
    assert "fused_hmc:" not in done.stdout  # nothing ran
