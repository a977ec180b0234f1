"""On CUDA, a rows-form CppTarget's draws do not depend on its lanes (csrc/math/lane_rows.h: log p
is one fixed tree over 32 strided partials; a chain's lanes share them).

The library's diamonds (5,000 rows, 26 parameters, the hand-written gradient, float64): the same
seed gives the same draws bit for bit for lanes 1, 2, 4, 8, 16, 32 and "auto", through a
per-chain warm-up and sampling with jittered trajectories (the chains of a warp take different
numbers of steps); and with lanes="auto", a run split over two calls (chain_offset) and resumed
from a result, where "auto" picks other lanes for the halves, gives the run's draws bit for bit.
"""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc import CppTarget, models
from fused_hmc.lanes import choose_lanes, device_sm_count

pytestmark = [pytest.mark.cuda, pytest.mark.slow]

RUN = dict(seed=11, progress=False, jitter=0.3, num_leapfrog_steps=6, step_size=0.02)


def _target(lanes) -> CppTarget:
    model = models.diamonds()
    return CppTarget(model.source + "\n" + model.gradient_source, model.dim,
                     data=dict(model.data), gradient=True, lanes=lanes)


def _start(chains: int) -> torch.Tensor:
    """Stan's starts, scaled by 0.1 towards the origin (theta is about unit scale there)."""
    q0 = models.diamonds().initial_point(chains, generator=torch.Generator().manual_seed(2))
    return (q0 * 0.1).cuda()


def test_draws_are_bit_identical_for_every_lanes():
    """70 chains (a partial last warp), 30 warm-up transitions (per-chain step sizes: different
    step counts within a warp) and 12 draws."""
    q0 = _start(70)
    runs = {g: fused_hmc.sample(q0, 12, num_warmup=30, target=_target(g), **RUN)
            for g in (1, 2, 4, 8, 16, 32, "auto")}
    base = runs[1]
    assert float(base.accept_rate.mean()) > 0.3 and not torch.equal(base.final_state, q0)
    for g, res in runs.items():
        expected = choose_lanes(70, device_sm_count(q0.device), 5000) if g == "auto" else g
        assert res.lanes == expected
        assert torch.equal(res.samples, base.samples), g
        assert torch.equal(res.step_size, base.step_size), g
        assert torch.equal(res.inverse_mass, base.inverse_mass), g


def test_a_split_and_a_resume_with_auto_lanes_are_bit_identical():
    """4,096 chains in one call, against the same warm-up and first half of the draws, then the
    second half continued in two calls of 2,048 chains (chain_offset): "auto" takes other lanes
    at 2,048 chains than at 4,096 on a large GPU (16 against 32 on an H200), and the draws must
    not notice."""
    chains, half = 4096, 2048
    q0 = _start(chains)
    target = _target("auto")
    whole = fused_hmc.sample(q0, 10, num_warmup=20, target=target, **RUN)
    first = fused_hmc.sample(q0, 5, num_warmup=20, target=target, **RUN)
    sms = device_sm_count(q0.device)
    assert whole.lanes == first.lanes == choose_lanes(chains, sms, 5000)
    parts = []
    for offset in (0, half):
        chosen = slice(offset, offset + half)
        part = fused_hmc.sample(
            first.final_state[chosen], 5, target=target, chain_offset=offset,
            first_transition=first.next_transition, step_size=first.step_size[chosen],
            inverse_mass=first.inverse_mass[chosen],
            **{k: v for k, v in RUN.items() if k != "step_size"})
        assert part.lanes == choose_lanes(half, sms, 5000)
        parts.append(part)
    assert torch.equal(whole.samples[:, :5], first.samples)
    resumed = torch.cat([p.samples for p in parts])
    assert torch.equal(whole.samples[:, 5:], resumed)
    assert torch.equal(whole.final_state, torch.cat([p.final_state for p in parts]))
