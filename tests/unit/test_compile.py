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


@pytest.mark.parametrize("mode", ["sample", "warmup"])
def test_chain_ops_compile_and_equal_eager(device, mode):
    """The sample and warmup ops (arguments by name, a Tensor[] of chain statistics mutated in
    place) trace with fullgraph=True and leave the same bits as an eager call."""
    from fused_hmc import ops
    from fused_hmc.sampling import chain_statistics

    q0 = _inputs(device, torch.float64, batch=5, dim=3)[0]
    f64 = dict(dtype=torch.float64, device=device)

    def state():
        chains = dict(q=q0.clone(), target="standard", target_tensors=[q0.new_zeros(3)],
                      target_scalars=[], step_size=torch.full((1,), 0.3, **f64),
                      inv_mass=torch.ones(1, 3, **f64), jitter=0.1, num_leapfrog_steps=3, seed=4,
                      chain_offset=0, first_transition=0, num_transitions=6,
                      statistics=chain_statistics.as_list(chain_statistics.zeros(5, device)))
        if mode == "sample":
            return dict(chains, mean=q0.new_zeros(5, 3), m2=q0.new_zeros(5, 3))
        return dict(chains, dual_averaging=q0.new_zeros(1, 3), window_mean=q0.new_zeros(5, 3),
                    window_m2=q0.new_zeros(5, 3), num_warmup=10, adapt_step_size=True,
                    adapt_mass_matrix=True)

    op = getattr(ops, mode)

    def run(arguments):
        op(**arguments)
        return arguments["q"] * 1

    eager, traced = state(), state()
    run(eager)
    torch.compile(run, fullgraph=True)(traced)
    for name in ("q", "step_size", "inv_mass"):
        assert torch.equal(eager[name], traced[name]), name
    for name, a, b in zip(chain_statistics.NAMES, eager["statistics"], traced["statistics"]):
        assert torch.equal(a, b), name
    assert int(eager["statistics"][2].sum()) == 5 * 6 * 4  # L + 1 gradient evaluations each
