"""The per-chain statistics (csrc/math/stats/chain_statistics.def): every one reaches the result,
saved files and checkpoints; and divergences by known answers, on every device.

Known answers for divergences (an energy error H_new - H_old above 1000 or not finite):
- N(0, sigma^2 I) with sigma = 1e-3 and step size 1: eps / sigma = 1000 > 2, so the leapfrog is
  unstable and each step multiplies the state by about (eps / sigma)^2 = 1e6. After L = 4 steps
  the energy error is about 1e24 (x^2 + p^2) / 2 in units of the start's, above 1000 unless both
  the momentum and the start are below 1e-10 in magnitude, a chance of order 1e-20 per transition:
  every transition diverges (and none is accepted: min(1, exp(-1e24)) = 0).
- N(0, I) with step size 1e-3 and L = 2: the leapfrog's energy error is O(eps^2 |x|^2) ~ 1e-5 for
  the starts here (|x| < 10), far below 1000: none diverges.
"""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc.sampling import chain_statistics
from fused_hmc.sampling.checkpoint import FORMAT, read_checkpoint
from fused_hmc.targets import DiagonalGaussian

from ._helpers import randn, run_op, seeded_generator
from .test_sampler import assert_results_equal

CHAINS, DIM, TRANSITIONS = 5, 3, 12
DTYPES = [torch.float32, torch.float64]


def _q0(device, dtype=torch.float64):
    return randn(seeded_generator("chain-statistics", CHAINS, DIM), CHAINS, DIM, dtype=dtype,
                 device=device)


def _run(q0, n, **kw):
    kw.setdefault("seed", 77)
    kw.setdefault("progress", False)
    return fused_hmc.sample(q0, n, **kw)


def test_the_def_is_read_in_order():
    """Python reads the def's names and dtypes (the one source); the ops take that many."""
    assert chain_statistics.NAMES[:4] == ("accept_count", "accept_prob_sum",
                                          "gradient_evaluations", "divergences")
    dtypes = {s.name: s.dtype for s in chain_statistics.STATISTICS}
    assert dtypes["accept_prob_sum"] == torch.float64 and dtypes["divergences"] == torch.int64


@pytest.mark.parametrize("num_warmup", [0, 10])
def test_every_statistic_reaches_the_result(device, num_warmup):
    res = _run(_q0(device), TRANSITIONS, num_warmup=num_warmup)
    for part in (res.chain_statistics, res.warmup_chain_statistics):
        assert list(part) == list(chain_statistics.NAMES)
        for statistic in chain_statistics.STATISTICS:
            t = part[statistic.name]
            assert t.shape == (CHAINS,) and t.dtype == statistic.dtype, statistic.name
            assert t.device == res.final_state.device
    # the public accessors are views of the same counts
    assert torch.equal(res.accept_count, res.chain_statistics["accept_count"])
    assert torch.equal(res.mean_accept_prob,
                       res.chain_statistics["accept_prob_sum"] / TRANSITIONS)
    assert res.sampling_gradient_evaluations == int(
        res.chain_statistics["gradient_evaluations"].sum())
    assert res.warmup_gradient_evaluations == int(
        res.warmup_chain_statistics["gradient_evaluations"].sum())
    # a Gaussian evaluates the force at each start: L + 1 per transition
    assert bool((res.chain_statistics["gradient_evaluations"] == TRANSITIONS * 11).all())
    warm = res.warmup_chain_statistics["gradient_evaluations"]
    assert bool((warm == num_warmup * 11).all())


def test_saved_results_keep_every_statistic(tmp_path):
    res = _run(_q0("cpu"), TRANSITIONS, num_warmup=10)
    res.save(tmp_path / "run")
    back = fused_hmc.load(tmp_path / "run")
    assert_results_equal(back, res)
    assert list(back.chain_statistics) == list(chain_statistics.NAMES)


def test_checkpoint_resumes_every_statistic_bit_for_bit(tmp_path):
    q0, ck = _q0("cpu", torch.float32), tmp_path / "run.ckpt"
    whole = _run(q0, TRANSITIONS, num_warmup=8, jitter=0.3)
    sampler = fused_hmc.Sampler(q0, seed=77, progress=False, num_warmup=8, jitter=0.3,
                                checkpoint=ck, checkpoint_every=0.0, chunk_size=5)
    sampler.run(7)
    _, tensors, _, _ = read_checkpoint(ck)
    for part in ("warmup", "sampling"):
        for name in chain_statistics.NAMES:
            assert f"chains_{part}_{name}" in tensors
    resumed = fused_hmc.Sampler.from_checkpoint(ck).run(TRANSITIONS - 7)
    for name in chain_statistics.NAMES:
        for part in ("chain_statistics", "warmup_chain_statistics"):
            assert torch.equal(getattr(resumed, part)[name], getattr(whole, part)[name]), name


def test_an_older_checkpoint_is_refused_naming_its_format(tmp_path, monkeypatch):
    from fused_hmc.sampling import checkpoint

    ck = tmp_path / "old.ckpt"
    monkeypatch.setattr(checkpoint, "FORMAT", FORMAT - 1)
    _run(_q0("cpu"), 4, checkpoint=ck)
    monkeypatch.setattr(checkpoint, "FORMAT", FORMAT)
    with pytest.raises(ValueError, match=rf"of format {FORMAT - 1}; this fused_hmc reads format "
                                         rf"{FORMAT}"):
        fused_hmc.Sampler.from_checkpoint(ck)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_step_far_too_large_makes_every_transition_diverge(device, dtype):
    narrow = DiagonalGaussian(torch.zeros(DIM), torch.full((DIM,), 1e-3))
    q0 = 1e-3 * _q0(device, dtype)
    res = _run(q0, TRANSITIONS, target=narrow, step_size=1.0, num_leapfrog_steps=4)
    assert res.chain_statistics["divergences"].tolist() == [TRANSITIONS] * CHAINS
    assert res.accept_count.tolist() == [0] * CHAINS


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_tiny_step_never_diverges(device, dtype):
    res = _run(_q0(device, dtype), TRANSITIONS, step_size=1e-3, num_leapfrog_steps=2,
               num_warmup=0)
    assert res.chain_statistics["divergences"].tolist() == [0] * CHAINS
    assert res.accept_count.sum() > 0


@pytest.mark.parametrize("pooled", [False, True], ids=["per_chain", "pooled"])
def test_warmup_counts_divergences_of_a_wild_start(device, pooled):
    """A warm-up from a step size far too large: its first transitions diverge (the known answer
    above), so the warm-up's count is positive, and each divergence is a rejection."""
    narrow = DiagonalGaussian(torch.zeros(DIM), torch.full((DIM,), 1e-3))
    res = _run(1e-3 * _q0(device), 4, target=narrow, step_size=1.0, num_leapfrog_steps=4,
               num_warmup=20, pooled=pooled)
    warm = res.warmup_chain_statistics
    assert bool((warm["divergences"] >= 1).all())
    assert bool((warm["divergences"] <= 20 - warm["accept_count"]).all())


def test_divergences_are_rejections(device):
    """A divergent transition's acceptance probability is below exp(-1000): it is rejected. With a
    step size near the stability limit some transitions diverge and some do not."""
    q0 = 3.0 * _q0(device)
    stats = run_op(q0, "standard", [torch.zeros(DIM, dtype=q0.dtype, device=device)], [],
                   torch.full((1,), 1.99, dtype=torch.float64, device=device),
                   q0.new_empty(0), 0.0, 30, 5, 0, 0, 40,
                   mean=torch.zeros(CHAINS, DIM, dtype=torch.float64, device=device),
                   m2=torch.zeros(CHAINS, DIM, dtype=torch.float64, device=device))
    assert bool((stats["divergences"] <= 40 - stats["accept_count"]).all())


def test_the_summary_reports_divergences(capsys):
    narrow = DiagonalGaussian(torch.zeros(DIM), torch.full((DIM,), 1e-3))
    res = _run(1e-3 * _q0("cpu"), TRANSITIONS, target=narrow, step_size=1.0,
               num_leapfrog_steps=4)
    res.summary()
    total = CHAINS * TRANSITIONS
    assert f"divergences {total} of {total} sampling transitions (100%)" in capsys.readouterr().out
