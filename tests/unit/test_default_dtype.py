"""torch.set_default_dtype(torch.float64): torch.rand(B) is then float64, and rng="torch" still
reproduces the reference exactly, on every path (the CPU op, the CUDA op, the module) and in the
fake impls, which give the traced uniform the dtype the real op returns.

The reference's accept test then compares log(u) in float64 with the float32 log_alpha promoted
to float64 (torch's type promotion), which the kernels reproduce.
"""
from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import fused_hmc
from fused_hmc import ops
from fused_hmc.reference import ReferenceModel, reference_hmc_step

from ._helpers import assert_accepted_agree, assert_bitwise_where_agree, randn, seeded_generator


@pytest.fixture
def float64_default():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _positions(device, dtype, batch=600, dim=9):
    gen = seeded_generator("default-dtype", batch, dim, dtype)
    scale = torch.tensor([0.5, 1.0, 1.5], dtype=dtype).repeat(batch)[:batch, None].to(device)
    return scale * randn(gen, batch, dim, dtype=dtype, device=device)


def _generator(device, seed):
    return torch.Generator(device=device).manual_seed(seed)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("call", ["hmc_step", "op"])
def test_torch_mode_matches_reference(device, dtype, call, float64_default):
    q = _positions(device, dtype)
    mu = torch.zeros(q.shape[1], dtype=dtype, device=device)
    eps, steps = 0.45, 6
    gen_ours, gen_ref = _generator(device, 5), _generator(device, 5)
    if call == "hmc_step":
        q_new, accepted = fused_hmc.hmc_step(q, rng="torch", step_size=eps,
                                             num_leapfrog_steps=steps, generator=gen_ours)
    else:
        q_new, accepted = ops.transition(q, mu, eps, steps, "torch", gen_ours)
    q_ref, acc_ref = reference_hmc_step(q, mu, eps, steps, generator=gen_ref)
    assert torch.equal(gen_ours.get_state(), gen_ref.get_state())
    noise_gen = _generator(device, 5)
    momentum = torch.empty_like(q).normal_(generator=noise_gen)
    uniform = torch.rand(q.shape[0], device=device, generator=noise_gen)
    assert uniform.dtype == torch.float64
    agree = assert_accepted_agree(accepted, acc_ref, q, mu, momentum, uniform, eps, steps)
    assert_bitwise_where_agree(q_new, q_ref, agree)
    assert acc_ref.any() and not acc_ref.all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_traced_uniform_is_torch_rand_in_the_default_dtype(device, dtype, float64_default):
    q = _positions(device, dtype, batch=33, dim=4)
    mu = torch.zeros(4, dtype=dtype, device=device)
    gen = _generator(device, 11)
    out = ops.transition(q, mu, 0.1, 3, "torch", gen, trace=True)
    gen.manual_seed(11)
    assert torch.equal(out[2], torch.empty_like(q).normal_(generator=gen))
    assert torch.equal(out[3], torch.rand(33, device=device, generator=gen))
    assert out[3].dtype == torch.float64
    with FakeTensorMode() as mode:
        fake = ops.transition(mode.from_tensor(q), mode.from_tensor(mu), 0.1, 3, "torch",
                              trace=True)
    assert [t.dtype for t in fake] == [t.dtype for t in out]
    assert [t.stride() for t in fake] == [t.stride() for t in out]


def test_module_matches_reference_model(device, float64_default):
    """The module's mu buffer is float64 now (torch.zeros(dim)), as the reference Model's, so a
    float32 q is promoted; its noise is drawn in q's dtype first, as the reference draws it."""
    q = _positions(device, torch.float32)
    ref, ours = ReferenceModel(9).to(device), fused_hmc.HMC(9).to(device)
    assert ref.mu.dtype == ours.mu.dtype == torch.float64
    torch.manual_seed(3)
    q_ref, acc_ref = ref(q)
    torch.manual_seed(3)
    q_new, accepted = ours(q)
    torch.manual_seed(3)
    momentum = torch.randn_like(q).double()
    uniform = torch.rand(q.shape[0], device=device)
    agree = assert_accepted_agree(accepted, acc_ref, q.double(), ref.mu, momentum, uniform, 0.1, 10)
    assert_bitwise_where_agree(q_new, q_ref, agree)


@pytest.mark.parametrize("q_dtype", [torch.float32, torch.float64], ids=["q32", "q64"])
@pytest.mark.parametrize("u_dtype", [torch.float32, torch.float64], ids=["u32", "u64"])
def test_external_uniform_of_either_dtype_promotes_like_the_reference(device, q_dtype, u_dtype):
    """Any pairing of q's and u's dtype is the reference's transition (float64 u with float32 q is
    what torch.rand(B) gives under a float64 default dtype)."""
    q = _positions(device, q_dtype, batch=2048, dim=3)
    mu = torch.zeros(3, dtype=q_dtype, device=device)
    momentum = randn(seeded_generator("ext-dtype", q_dtype, u_dtype), 2048, 3, dtype=q_dtype,
                     device=device)
    uniform = torch.rand(2048, generator=seeded_generator("ext-u", q_dtype, u_dtype),
                         dtype=u_dtype).to(device)
    q_new, accepted = fused_hmc.hmc_step(q, mu, momentum=momentum, uniform=uniform,
                                         step_size=0.9, num_leapfrog_steps=3)
    q_ref, acc_ref = reference_hmc_step(q, mu, 0.9, 3, momentum=momentum, uniform=uniform)
    agree = assert_accepted_agree(accepted, acc_ref, q, mu, momentum, uniform, 0.9, 3)
    assert_bitwise_where_agree(q_new, q_ref, agree)
