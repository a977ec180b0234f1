"""External noise: fused_hmc.hmc_step(q, mu, momentum=p, uniform=u) is the reference transition.

q_new is bit-identical to `reference_hmc_step` fed the same noise wherever the accept decisions agree,
and decisions differ only at near ties (see _helpers for the tolerance).
"""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc.reference import reference_hmc_step

from ._helpers import assert_accepted_agree, assert_bitwise_where_agree, rand, randn, seeded_generator

DTYPES = [torch.float32, torch.float64]
BATCHES = [1, 3, 2048]
DIMS = [1, 7, 64, 129]
STEPS = [1, 2, 10]
STEP_SIZES = [0.1, 0.37]


def _positions(batch, dim, dtype, device):
    """One q and one non-zero mu per (B, d, dtype).

    Chains start at scales 0.5, 1 and 1.5 around mu in turn, so that both accepts and rejects occur
    (overdispersed chains nearly always accept, underdispersed ones often reject).
    """
    gen = seeded_generator("positions", batch, dim, dtype)
    mu = randn(gen, dim, dtype=dtype, device=device)
    scale = torch.tensor([0.5, 1.0, 1.5], dtype=dtype, device=device).repeat(batch)[:batch, None]
    q = mu + scale * randn(gen, batch, dim, dtype=dtype, device=device)
    return q, mu


def _check_against_reference(q, mu, momentum, uniform, eps, steps):
    q_before, mu_before, p_before, u_before = q.clone(), mu.clone(), momentum.clone(), uniform.clone()
    q_new, accepted = fused_hmc.hmc_step(q, mu, momentum=momentum, uniform=uniform, step_size=eps,
                                         num_leapfrog_steps=steps)
    q_ref, accepted_ref = reference_hmc_step(q, mu, eps, steps, momentum=momentum, uniform=uniform)
    assert q_new.shape == q.shape and q_new.dtype == q.dtype and q_new.device == q.device
    assert accepted.shape == (q.shape[0],) and accepted.dtype == torch.bool
    assert accepted.device == q.device
    for after, before in ((q, q_before), (mu, mu_before), (momentum, p_before), (uniform, u_before)):
        assert torch.equal(after, before), "an input was modified"
    agree = assert_accepted_agree(accepted, accepted_ref, q, mu, momentum, uniform, eps, steps)
    assert_bitwise_where_agree(q_new, q_ref, agree)
    return accepted_ref


@pytest.mark.parametrize("eps", STEP_SIZES)
@pytest.mark.parametrize("steps", STEPS)
@pytest.mark.parametrize("mu_kind", ["zero", "random"])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_matches_reference(device, dtype, batch, dim, mu_kind, steps, eps):
    q, mu = _positions(batch, dim, dtype, device)
    if mu_kind == "zero":
        mu = torch.zeros_like(mu)
    gen = seeded_generator("noise", batch, dim, dtype, mu_kind, steps, eps)
    momentum = randn(gen, batch, dim, dtype=dtype, device=device)
    for uniform_dtype in dict.fromkeys([torch.float32, dtype]):
        uniform = rand(gen, batch, dtype=uniform_dtype, device=device)
        accepted_ref = _check_against_reference(q, mu, momentum, uniform, eps, steps)
        if batch == 2048 and eps == 0.37:
            # this corner of the grid must exercise both branches of the accept/revert
            assert accepted_ref.any() and not accepted_ref.all()


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_edge_uniforms(device, dtype):
    """u = 0 and u < 1e-10 hit the clamp, u near 1 and NaN (rejects, as in torch) behave alike."""
    gen = seeded_generator("edge", dtype)
    edges = [0.0, 1e-30, 1e-12, 1e-10, 0.5, 1.0 - 2.0 ** -24, 1.0, float("nan")]
    batch, dim = len(edges), 5
    q = randn(gen, batch, dim, dtype=dtype, device=device)
    mu = randn(gen, dim, dtype=dtype, device=device)
    momentum = randn(gen, batch, dim, dtype=dtype, device=device)
    for uniform_dtype in dict.fromkeys([torch.float32, dtype]):
        uniform = torch.tensor(edges, dtype=uniform_dtype, device=device)
        q_new, accepted = fused_hmc.hmc_step(q, mu, momentum=momentum, uniform=uniform,
                                             step_size=0.37, num_leapfrog_steps=4)
        q_ref, accepted_ref = reference_hmc_step(q, mu, 0.37, 4, momentum=momentum, uniform=uniform)
        assert torch.equal(accepted, accepted_ref)
        assert torch.equal(q_new, q_ref)
        assert not accepted[-1], "a NaN uniform must reject"


def test_nonfinite_positions_follow_reference(device):
    """An infinite coordinate gives a NaN log_alpha, which rejects in both (and q stays as it was)."""
    gen = seeded_generator("inf")
    q = randn(gen, 4, 3, device=device)
    q[1, 2] = float("inf")
    mu = torch.zeros(3, device=device)
    momentum, uniform = randn(gen, 4, 3, device=device), rand(gen, 4, device=device)
    q_new, accepted = fused_hmc.hmc_step(q, mu, momentum=momentum, uniform=uniform)
    q_ref, accepted_ref = reference_hmc_step(q, mu, 0.1, 10, momentum=momentum, uniform=uniform)
    assert torch.equal(accepted, accepted_ref) and not accepted[1]
    assert torch.equal(q_new, q_ref)
