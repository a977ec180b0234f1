"""Drop-in parity: fused_hmc.HMC is the reference Model under the same torch seed.

Same seed -> q_new bit-identical, accepted identical (near ties aside), the default generator left in
the same state (so the next torch.randn matches too). External noise through forward() as well.
"""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc.reference import ReferenceModel, reference_hmc_step

from ._helpers import (assert_accepted_agree, assert_bitwise_where_agree, rand, randn, rng_state,
                       seeded_generator)

CONFIGS = [  # (batch, dim, num_leapfrog_steps, step_size)
    (2048, 64, 10, 0.1),   # the seed problem
    (1, 1, 1, 0.1),
    (3, 7, 2, 0.37),
    (300, 129, 10, 0.37),
]


def test_model_new_is_hmc():
    assert fused_hmc.ModelNew is fused_hmc.HMC


def _pair(dim, steps, eps, device, mu=None):
    ref = ReferenceModel(dim, num_leapfrog_steps=steps, step_size=eps).to(device)
    ours = fused_hmc.HMC(dim, num_leapfrog_steps=steps, step_size=eps).to(device)
    if mu is not None:
        ref.mu.copy_(mu)
        ours.mu.copy_(mu)
    assert ours.mu.dtype == ref.mu.dtype == torch.float32
    return ref, ours


def _run_seeded(model, q, seed, device):
    torch.manual_seed(seed)
    out = model(q)
    state = rng_state(device)
    following = torch.randn(5, device=device)
    return out, state, following


@pytest.mark.parametrize("mu_kind", ["zero", "random"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "B{}-d{}-L{}-eps{}".format(*c))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_same_seed_same_outputs_and_generator_state(device, dtype, config, mu_kind):
    batch, dim, steps, eps = config
    gen = seeded_generator("module", batch, dim, dtype, mu_kind)
    mu = randn(gen, dim, device=device) if mu_kind == "random" else None
    q = randn(gen, batch, dim, dtype=dtype, device=device)
    ref, ours = _pair(dim, steps, eps, device, mu)
    for seed in (0, 1234):
        (q_ref, acc_ref), state_ref, next_ref = _run_seeded(ref, q, seed, device)
        (q_new, acc), state, following = _run_seeded(ours, q, seed, device)
        assert q_new.dtype == q_ref.dtype == dtype
        # the noise both drew, to judge near ties against
        torch.manual_seed(seed)
        momentum = torch.randn_like(q)
        uniform = torch.rand(batch, device=device)
        mu_used = ref.mu.to(dtype)
        agree = assert_accepted_agree(acc, acc_ref, q, mu_used, momentum, uniform, eps, steps)
        assert_bitwise_where_agree(q_new, q_ref, agree)
        assert torch.equal(state, state_ref), "the generator advanced differently from the reference"
        assert torch.equal(following, next_ref)


def test_successive_calls_track_the_reference(device):
    """Three transitions in a row from one seed: the generator stays in lock-step throughout."""
    q0 = randn(seeded_generator("chain"), 512, 16, device=device)
    ref, ours = _pair(16, 10, 0.1, device)
    torch.manual_seed(7)
    q_ref = q0
    for _ in range(3):
        q_ref, _ = ref(q_ref)
    torch.manual_seed(7)
    q = q0
    for _ in range(3):
        q, _ = ours(q)
    assert torch.equal(q, q_ref)


def test_traced_torch_noise_is_what_the_reference_draws(device):
    """rng="torch" draws exactly torch.randn_like(q) then torch.rand(B) from the default generator."""
    gen = seeded_generator("traced-torch")
    for dtype in (torch.float32, torch.float64):
        q = randn(gen, 33, 9, dtype=dtype, device=device)
        mu = torch.zeros(9, dtype=dtype, device=device)
        torch.manual_seed(99)
        _, _, momentum, uniform = fused_hmc.ops.transition(q, mu, 0.1, 3, "torch", trace=True)
        torch.manual_seed(99)
        assert torch.equal(momentum, torch.randn_like(q))
        assert torch.equal(uniform, torch.rand(33, device=device))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_external_noise_through_forward(device, dtype):
    batch, dim, steps, eps = 257, 33, 6, 0.37
    gen = seeded_generator("module-external", dtype)
    q = randn(gen, batch, dim, dtype=dtype, device=device)
    momentum = randn(gen, batch, dim, dtype=dtype, device=device)
    uniform = rand(gen, batch, device=device)
    mu = randn(gen, dim, device=device)
    _, ours = _pair(dim, steps, eps, device, mu)
    mu_used = ours.mu.to(dtype)  # the reference's promotion of its float32 buffer
    before = rng_state(device)
    q_new, acc = ours(q, momentum=momentum, uniform=uniform)
    assert torch.equal(rng_state(device), before), "external noise must not touch the generator"
    q_ref, acc_ref = reference_hmc_step(q, mu_used, eps, steps, momentum=momentum, uniform=uniform)
    agree = assert_accepted_agree(acc, acc_ref, q, mu_used, momentum, uniform, eps, steps)
    assert_bitwise_where_agree(q_new, q_ref, agree)
    assert acc_ref.any() and not acc_ref.all()


def test_module_holds_reference_ctor_arguments():
    m = fused_hmc.HMC(12, 4, 0.25)
    assert (m.dim, m.num_leapfrog_steps, m.step_size) == (12, 4, 0.25)
    assert m.mu.shape == (12,) and not m.mu.any()
    default = fused_hmc.HMC(64)
    assert (default.num_leapfrog_steps, default.step_size) == (10, 0.1)
    assert "mu" in dict(default.named_buffers())


def test_float64_module_on_float32_q_promotes_like_the_reference(device):
    """HMC(d).double() given float32 q: the reference draws its noise in float32 and computes in
    float64 (its mu buffer is float64), returning float64; so must we, under the same seed."""
    gen = seeded_generator("module-promote")
    q = randn(gen, 512, 16, device=device)
    ref = ReferenceModel(16).to(device).double()
    ours = fused_hmc.HMC(16).to(device).double()
    (q_ref, acc_ref), state_ref, next_ref = _run_seeded(ref, q, 5, device)
    (q_new, acc), state, following = _run_seeded(ours, q, 5, device)
    assert q_new.dtype == q_ref.dtype == torch.float64
    torch.manual_seed(5)
    momentum = torch.randn_like(q)
    uniform = torch.rand(q.shape[0], device=device)
    agree = assert_accepted_agree(acc, acc_ref, q.double(), ref.mu, momentum.double(), uniform,
                                  0.1, 10)
    assert_bitwise_where_agree(q_new, q_ref, agree)
    assert torch.equal(state, state_ref) and torch.equal(following, next_ref)
