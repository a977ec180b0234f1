"""On CUDA, a rows-form CppTarget's draws do not depend on its lanes (csrc/math/targets/lane_rows.h:
log p is one fixed tree over 32 strided partials; a chain's lanes share them).

The library's diamonds (5,000 rows, 26 parameters, the hand-written gradient, float64): the same
seed gives the same draws bit for bit for lanes 1, 2, 4, 8, 16, 32 and "auto", sampling with
jittered trajectories (the chains of a warp take different numbers of steps); and with
lanes="auto", a run split over two calls (chain_offset) and resumed from a result, where "auto"
picks other lanes for the halves, gives the run's draws bit for bit. So do the acceptance
probabilities, and so a per-chain warm-up, which adapts the step size from them (the model's
sums of products are written as fma, which no compiler contracts otherwise: docs/LANES.md).
"""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc import CppTarget, models
from fused_hmc.lanes import choose_lanes, device_sm_count

pytestmark = [pytest.mark.cuda, pytest.mark.slow]

RUN = dict(seed=11, progress=False, jitter=0.3, num_leapfrog_steps=6, step_size=1e-3)


def _target(lanes) -> CppTarget:
    model = models.diamonds()
    return CppTarget(model.source + "\n" + model.gradient_source, model.dim,
                     data=dict(model.data), gradient=True, lanes=lanes)


def _start(chains: int) -> torch.Tensor:
    """Near the posterior (Intercept about 7.8, log sigma about -2.1; theta near 0), where
    RUN's step size accepts (benchmarks/profile_case.py's start)."""
    model = models.diamonds()
    q0 = model.initial_point(chains, generator=torch.Generator().manual_seed(2)) * 0.01
    q0[:, model.dim - 2] += 7.8
    q0[:, model.dim - 1] -= 2.1
    return q0.cuda()


def _every_lanes(q0: torch.Tensor, **run) -> dict:
    return {g: fused_hmc.sample(q0, 12, target=_target(g), **RUN, **run)
            for g in (1, 2, 4, 8, 16, 32, "auto")}


def _assert_identical(runs: dict, q0: torch.Tensor, every_bit: bool) -> None:
    base = runs[1]
    assert float(base.accept_rate.mean()) > 0.3 and not torch.equal(base.final_state, q0)
    for g, res in runs.items():
        expected = choose_lanes(q0.shape[0], device_sm_count(q0.device), 5000) if g == "auto" \
            else g
        assert res.lanes == expected
        assert torch.equal(res.samples, base.samples), g
        assert torch.equal(res.accept_count, base.accept_count), g
        if every_bit:
            assert torch.equal(res.mean_accept_prob, base.mean_accept_prob), g
            assert torch.equal(res.step_size, base.step_size), g


def test_draws_are_bit_identical_for_every_lanes():
    """70 chains (a partial last warp), 12 transitions with jittered step sizes (the chains of a
    warp take different numbers of steps): the draws and acceptances."""
    q0 = _start(70)
    _assert_identical(_every_lanes(q0), q0, every_bit=False)


def test_acceptance_probabilities_and_warm_up_are_bit_identical_for_every_lanes():
    """Every bit: the mean acceptance probabilities, and 30 per-chain warm-up transitions."""
    q0 = _start(70)
    _assert_identical(_every_lanes(q0), q0, every_bit=True)
    _assert_identical(_every_lanes(q0, num_warmup=30), q0, every_bit=True)


def test_a_split_and_a_resume_with_auto_lanes_are_bit_identical():
    """4,096 chains in one call, against the first half of the draws, then the second half
    continued in two calls of 2,048 chains (chain_offset): "auto" takes other lanes at 2,048
    chains than at 4,096 on a large GPU (32 against 16 on an H200), and the draws must not
    notice."""
    chains, half = 4096, 2048
    q0 = _start(chains)
    target = _target("auto")
    whole = fused_hmc.sample(q0, 10, target=target, **RUN)
    assert float(whole.accept_rate.mean()) > 0.3
    first = fused_hmc.sample(q0, 5, target=target, **RUN)
    sms = device_sm_count(q0.device)
    assert whole.lanes == first.lanes == choose_lanes(chains, sms, 5000)
    parts = []
    for offset in (0, half):
        part = fused_hmc.sample(first.final_state[offset:offset + half], 5, target=target,
                                chain_offset=offset, first_transition=first.next_transition,
                                **RUN)
        assert part.lanes == choose_lanes(half, sms, 5000)
        parts.append(part)
    assert torch.equal(whole.samples[:, :5], first.samples)
    assert torch.equal(whole.samples[:, 5:], torch.cat([p.samples for p in parts]))
    assert torch.equal(whole.final_state, torch.cat([p.final_state for p in parts]))
