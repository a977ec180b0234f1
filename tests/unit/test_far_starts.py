"""The pooled warm-up's far-start handling (fused_hmc.sampling.far_starts): the per-chain first
phase is Stan's per-chain warm-up of the initial fast interval, whose median step size the pooled
warm-up starts from; chains that never move are restarted from chains that did, at the check
points, recorded in ``warmup_reseeded`` and the summary; a run without such chains is bit for bit
the same with or without the check points; checkpoints resume either mid-way.

Stuck chains are forced deterministically: on N(0, I) a chain at 1e160 has an energy that
overflows (q^2 / 2 = inf), so every proposal's energy error is inf - inf or inf and every
proposal is rejected, at any step size; the others start at N(0, I) draws. (The model tests of
tests/statistical/test_far_starts.py start from Stan's starts instead.)
"""
from __future__ import annotations

import io
import warnings

import pytest
import torch

import fused_hmc
from fused_hmc.sampling import far_starts
from fused_hmc.sampling.warmup import WarmupSettings

from ._windows_reference import warmup_windows
from .test_sampler import assert_results_equal
from .test_sampler_ctrl_c import _sigint_after_call, sigint_handler  # noqa: F401 - a fixture

CHAINS, FAR = 8, [1, 6]
# A fixed step size (nothing adapts it, so there is no first phase): the chains at 1e160 stay.
FIXED = dict(num_warmup=100, pooled=True, adapt_step_size=False, adapt_mass_matrix=False,
             step_size=0.5, num_leapfrog_steps=3, seed=11, progress=False)


def _q0(far=FAR, chains=CHAINS, dim=2) -> torch.Tensor:
    q0 = torch.randn(chains, dim, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    q0[far] = 1e160
    return q0


def _sample(q0, n=30, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fused_hmc.sample(q0, n, **kwargs)
    return res, [w for w in caught if issubclass(w.category, fused_hmc.StuckChainsWarning)]


@pytest.mark.parametrize("num_warmup, windows", [(1000, (75, 25, 50)), (100, (75, 25, 50)),
                                                 (300, (30, 10, 20)), (25, (75, 25, 50)),
                                                 (19, (75, 25, 50)), (200, (0, 25, 50))])
def test_check_points_end_the_initial_interval_and_every_slow_window(num_warmup, windows):
    """Against Stan's windows (the tests' oracle): the last iteration of the initial fast
    interval and of each slow window, a stretch under MIN_STRETCH joining the next."""
    settings = WarmupSettings(num_warmup, windows=windows, pooled=True)
    slow = warmup_windows(num_warmup, *windows)
    ends = ([slow[0][0] - 1] if slow else []) + [stop - 1 for _, stop in slow]
    expected, last = [], -1
    for end in ends:
        if end - last >= far_starts.MIN_STRETCH:
            expected.append(end)
            last = end
    assert far_starts.check_points(settings) == expected
    assert far_starts.first_phase_length(settings) == (slow[0][0] if slow else 0)
    assert far_starts.check_points(WarmupSettings(1000)) == [74, 99, 149, 249, 449, 949]


def test_no_first_phase_without_step_size_adaptation():
    assert far_starts.first_phase_length(WarmupSettings(1000, adapt_step_size=False,
                                                                  pooled=True)) == 0


def test_a_chain_that_never_moves_is_restarted_from_one_that_moved(device):
    q0 = _q0().to(device)
    res, caught = _sample(q0, **FIXED)
    expected = torch.zeros(CHAINS, dtype=torch.int64)
    expected[FAR] = 1  # restarted once, at iteration 89 (the one check point of 100)
    assert torch.equal(res.warmup_reseeded.cpu(), expected)
    assert bool((res.accept_count > 0).all()) and caught == []
    assert bool((res.final_state.abs() < 1e3).all())
    out = io.StringIO()
    res.summary(file=out)
    assert ("warm-up: 2 of 8 chains never moved from their starts and were restarted from "
            "other chains' states (warmup_reseeded)") in out.getvalue()
    # The donors are drawn from the seed: the same bits again, and with another chunking.
    assert_results_equal(_sample(q0, **FIXED)[0], res)
    assert_results_equal(_sample(q0, chunk_size=7, **FIXED)[0], res)


def test_with_no_chain_that_moved_there_is_nobody_to_restart_from():
    res, caught = _sample(_q0(far=list(range(CHAINS))), **FIXED)
    assert int(res.warmup_reseeded.sum()) == 0 and len(caught) == 1


@pytest.mark.parametrize("run", [dict(pooled=True), dict(adapt_trajectory_length=True)],
                         ids=["pooled", "chees"])
def test_without_stuck_chains_the_check_points_change_no_bit(run, monkeypatch):
    """A healthy run never meets the restart (0.35^20 = 7.6e-10 per chain and check point): its
    bits are those of the same run with no check points (and so no splits of its calls)."""
    q0 = _q0(far=[])
    kwargs = dict(run, num_warmup=150, seed=3, progress=False, jitter=0.1)
    res, _ = _sample(q0, **kwargs)
    assert far_starts.check_points(res.warmup) == [74, 99]
    assert int(res.warmup_reseeded.sum()) == 0
    monkeypatch.setattr(far_starts, "check_points", lambda settings: [])
    assert_results_equal(_sample(q0, **kwargs)[0], res)


def test_the_first_phase_is_the_per_chain_warm_up_of_the_initial_interval(monkeypatch):
    """The first F = 75 iterations of a pooled warm-up are a per-chain warm-up of F iterations
    (Stan's dual averaging per chain, no mass adaptation): the same states and step sizes; the
    pooled step size then starts at their median."""
    q0 = torch.randn(9, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    target = fused_hmc.DiagonalGaussian(torch.zeros(3), torch.tensor([0.1, 1.0, 10.0]))
    run = dict(target=target, seed=8, progress=False, step_size=0.3, jitter=0.2)
    seen = {}
    real = far_starts.FarStarts.after

    def after(self, q, i):
        end = i == self.first_phase - 1
        if end:
            seen.update(q=q.clone(), steps=self.per_chain.state.step_size.clone())
        real(self, q, i)
        if end:
            seen["pooled"] = float(self.kernel.state.step_size[0])

    monkeypatch.setattr(far_starts.FarStarts, "after", after)
    fused_hmc.sample(q0, 1, num_warmup=1000, pooled=True, **run)
    per_chain = fused_hmc.sample(q0, 1, num_warmup=75, pooled=False, adapt_mass_matrix=False,
                                 keep_samples=False, **run)
    assert torch.equal(seen["steps"], per_chain.step_size)
    assert seen["pooled"] == float(torch.quantile(per_chain.step_size, 0.5))
    # The per-chain run's first sampling transition moved its states on; its warm-up's end is
    # the pooled run's state after iteration 74: compare one transition later through the op.
    again = fused_hmc.sample(seen["q"], 1, first_transition=75, step_size=per_chain.step_size,
                             target=target, seed=8, progress=False, jitter=0.2)
    assert torch.equal(again.final_state, per_chain.final_state)


def test_a_checkpoint_resumes_in_the_first_phase_and_mid_stretch(sigint_handler,  # noqa: F811
                                                                 monkeypatch, tmp_path):
    """Ctrl-C in the first phase (a pooled ChEES warm-up), and in a stretch before a restart,
    writes checkpoints from which new samplers finish with the uninterrupted result."""
    chees = dict(num_warmup=100, adapt_trajectory_length=True, seed=5, progress=False,
                 chunk_size=4)
    # Stopped at transition 8 of the first phase (15 iterations), and at 30 of the stretch that
    # ends at the check point 89.
    for q0, run, call, before in ((_q0(far=[]), chees, 2, 15),
                                  (_q0(), dict(FIXED, chunk_size=10), 3, 89)):
        ck = tmp_path / f"run{call}.ckpt"
        whole = _sample(q0, 20, **run)[0]
        _sigint_after_call(monkeypatch, "warmup", call=call)
        res = _sample(q0, 20, checkpoint=ck, checkpoint_every=3600, **run)[0]
        assert res.interrupted and res.next_transition < before
        monkeypatch.undo()
        sampler = fused_hmc.Sampler.from_checkpoint(ck)
        assert_results_equal(sampler.run(), whole)


def test_saved_results_keep_the_restarts(tmp_path):
    res, _ = _sample(_q0(), **FIXED)
    res.save(tmp_path / "res.zarr")
    back = fused_hmc.load(tmp_path / "res.zarr")
    assert_results_equal(back, res)
    assert int(back.warmup_reseeded.sum()) == 2


def test_a_per_chain_warm_up_has_no_restarts():
    res, caught = _sample(_q0(), num_warmup=100, seed=2, progress=False)
    assert res.warmup_reseeded is None and len(caught) == 1  # its far chains stay: warned
