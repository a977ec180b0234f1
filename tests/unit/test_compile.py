"""torch.compile(fullgraph=True) traces through the ops (fake impls) and gives eager's results."""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc.reference import ReferenceModel

from ._helpers import rand, randn, rng_state, seeded_generator


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    fused_hmc.load_extension()  # the extension cannot be built while dynamo traces
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _inputs(device, dtype=torch.float32, batch=64, dim=11):
    gen = seeded_generator("compile", dtype)
    return (randn(gen, batch, dim, dtype=dtype, device=device),
            randn(gen, dim, dtype=dtype, device=device),
            randn(gen, batch, dim, dtype=dtype, device=device),
            rand(gen, batch, device=device))


def _same(a, b):
    assert len(a) == len(b)
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_philox_seeded_step_compiles(device, dtype):
    q, mu, _, _ = _inputs(device, dtype)

    def step(q, mu):
        return fused_hmc.hmc_step(q, mu, rng="philox", seed=3)

    eager = step(q, mu)
    compiled = torch.compile(step, fullgraph=True)(q, mu)
    assert _same(compiled, eager)


def test_external_noise_step_compiles_with_surrounding_ops(device):
    q, mu, p, u = _inputs(device)

    def step(q, mu, p, u):
        q_new, accepted = fused_hmc.hmc_step(q * 1.0, mu, momentum=p, uniform=u, step_size=0.37,
                                             num_leapfrog_steps=4)
        return q_new + 0.0, accepted.float().mean()

    eager = step(q, mu, p, u)
    compiled = torch.compile(step, fullgraph=True)(q, mu, p, u)
    assert _same(compiled, eager)


def test_generator_seeded_modes_compile(device):
    """rng="philox" keyed from the default generator and the drop-in module (rng="torch"): the
    compiled call consumes and produces exactly what eager does under the same seed."""
    q, mu, _, _ = _inputs(device)
    model = fused_hmc.HMC(q.shape[1]).to(device)

    def philox_step(q, mu):
        return fused_hmc.hmc_step(q, mu, rng="philox")

    for eager_fn, compiled_fn in ((philox_step, torch.compile(philox_step, fullgraph=True)),
                                  (model, torch.compile(model, fullgraph=True))):
        args = (q, mu) if eager_fn is philox_step else (q,)
        torch.manual_seed(8)
        eager = eager_fn(*args)
        eager_state = rng_state(device)
        torch.manual_seed(8)
        compiled = compiled_fn(*args)
        assert _same(compiled, eager)
        assert torch.equal(rng_state(device), eager_state)
    torch.manual_seed(8)
    compiled = torch.compile(model, fullgraph=True)(q)
    torch.manual_seed(8)
    assert _same(compiled, ReferenceModel(q.shape[1]).to(device)(q))


def test_generator_argument_under_fullgraph_says_what_to_do(device):
    """Dynamo passes no torch.Generator to an op; instead of its "Failed to convert args/kwargs to
    proxy", tracing a call with generator= raises naming the argument and the way out."""
    q, mu, _, _ = _inputs(device)
    gen = torch.Generator(device=device).manual_seed(2)
    module = fused_hmc.HMC(q.shape[1], generator=gen).to(device)
    promoting = fused_hmc.HMC(q.shape[1], generator=gen).to(device).double()  # draws before the op

    def philox_step(q, mu):
        return fused_hmc.hmc_step(q, mu, rng="philox", generator=gen)

    for fn, args in ((module, (q,)), (promoting, (q,)), (philox_step, (q, mu))):
        with pytest.raises(Exception, match="generator= cannot be traced by torch.compile"):
            torch.compile(fn, fullgraph=True)(*args)
        torch._dynamo.reset()


def test_generator_argument_without_fullgraph_runs_eagerly(device):
    """Without fullgraph the refused trace falls back to eager: the generator's numbers, as
    eager."""
    q, _, _, _ = _inputs(device)
    gen = torch.Generator(device=device)
    module = fused_hmc.HMC(q.shape[1], generator=gen).to(device)
    gen.manual_seed(6)
    eager = module(q)
    eager_state = gen.get_state()
    gen.manual_seed(6)
    compiled = torch.compile(module)(q)
    assert _same(compiled, eager)
    assert torch.equal(gen.get_state(), eager_state)
