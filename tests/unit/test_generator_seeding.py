"""rng="philox" seeded from torch's generators, and its transition against the reference.

Without seed=, the philox stream is keyed from a torch.Generator (the device's default one unless
generator= is given), so torch.manual_seed makes it reproducible and every call draws fresh numbers.
"""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc.reference import reference_hmc_step

from ._helpers import assert_accepted_agree, randn, rng_state, seeded_generator


def _inputs(device, dtype=torch.float32, batch=256, dim=24):
    gen = seeded_generator("seeding", dtype, batch, dim)
    return (randn(gen, batch, dim, dtype=dtype, device=device),
            randn(gen, dim, dtype=dtype, device=device))


def _traced(q, mu, generator=None, eps=0.37, steps=4):
    return fused_hmc.ops.transition(q, mu, eps, steps, "philox", generator, trace=True)


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def test_manual_seed_makes_philox_reproducible(device):
    q, mu = _inputs(device)
    torch.manual_seed(5)
    first = fused_hmc.hmc_step(q, mu, rng="philox")
    traced_first = _traced(q, mu)
    torch.manual_seed(5)
    second = fused_hmc.hmc_step(q, mu, rng="philox")
    traced_second = _traced(q, mu)
    assert _same(first, second)
    assert _same(traced_first, traced_second)
    # hmc_step and the traced transition op are the same transition
    torch.manual_seed(5)
    traced = _traced(q, mu, eps=0.1, steps=10)
    assert _same(first, traced[:2])


def test_successive_calls_draw_fresh_noise(device):
    q, mu = _inputs(device)
    torch.manual_seed(5)
    before = rng_state(device)
    _, _, p1, u1 = _traced(q, mu)
    after_one = rng_state(device)
    _, _, p2, u2 = _traced(q, mu)
    assert not torch.equal(before, after_one), "philox mode must advance the default generator"
    assert (p1 != p2).all() and (u1 != u2).all()
    torch.manual_seed(6)
    _, _, p3, _ = _traced(q, mu)
    assert (p3 != p1).all()


def test_explicit_generator_is_used_and_default_untouched(device):
    q, mu = _inputs(device)
    gen = torch.Generator(device=device)
    torch.manual_seed(1)
    default_before = rng_state(device)
    gen.manual_seed(77)
    gen_before = gen.get_state()
    first = _traced(q, mu, gen)
    assert torch.equal(rng_state(device), default_before), "generator= must leave the default alone"
    assert not torch.equal(gen.get_state(), gen_before), "the given generator must advance"
    second = _traced(q, mu, gen)
    assert not torch.equal(first[2], second[2])
    torch.manual_seed(2)  # a different global seed changes nothing when generator= is given
    gen.manual_seed(77)
    assert _same(first, _traced(q, mu, gen))
    assert _same(first[:2], fused_hmc.hmc_step(q, mu, step_size=0.37, num_leapfrog_steps=4,
                                               rng="philox", generator=gen.manual_seed(77)))
    gen.manual_seed(78)
    assert (_traced(q, mu, gen)[2] != first[2]).all()


def test_module_rng_and_generator_arguments(device):
    q, mu = _inputs(device, dim=8)
    gen = torch.Generator(device=device)
    model = fused_hmc.HMC(8, rng="philox", generator=gen).to(device)
    model.mu.copy_(mu)
    gen.manual_seed(3)
    out = model(q)
    gen.manual_seed(3)
    want = fused_hmc.hmc_step(q, mu, rng="philox", generator=gen)
    assert _same(out, want)


@pytest.mark.parametrize("steps,eps", [(1, 0.1), (10, 0.1), (10, 0.37), (3, 0.9)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_philox_transition_is_the_reference_transition(device, dtype, steps, eps):
    """The fused-FMA leapfrog of philox mode, fed its own traced noise, is the reference's up to
    rounding: L steps of O(u) relative error each (rtol 1e-5 in float32, 1e-12 in float64)."""
    q, mu = _inputs(device, dtype, batch=1024, dim=33)
    q = mu + torch.tensor([0.5, 1.0, 1.5], dtype=dtype, device=device).repeat(342)[:1024, None] * (
        q - mu)
    torch.manual_seed(11)
    q_new, accepted, momentum, uniform = _traced(q, mu, eps=eps, steps=steps)
    q_ref, accepted_ref = reference_hmc_step(q, mu, eps, steps, momentum=momentum, uniform=uniform)
    agree = assert_accepted_agree(accepted, accepted_ref, q, mu, momentum, uniform, eps, steps)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(q_new[agree], q_ref[agree], rtol=tol, atol=tol)
    if steps > 1 or eps > 0.5:
        assert accepted_ref.any() and not accepted_ref.all()
