"""The driver with targets, mass matrices, jitter and warm-up: contract, reproducibility, resumption.

The seed sampler's own contract (test_sampler.py) must hold unchanged when none of these is asked
for; here we check the new paths and that they reduce to it where they should.
"""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc import ops
from fused_hmc.sampling.kernel import ChainKernel
from fused_hmc.targets import DenseGaussian, DiagonalGaussian, StandardGaussian

from .test_sampler import assert_results_equal
from .test_targets import make_target


def _q0(chains=6, dim=5, dtype=torch.float64, key=0):
    return torch.randn(chains, dim, generator=torch.Generator().manual_seed(key), dtype=dtype)


def _run(q0, n, **kw):
    kw.setdefault("seed", 1234)
    kw.setdefault("progress", False)
    return fused_hmc.sample(q0, n, **kw)


WARM = dict(num_warmup=160, jitter=0.2, target=DiagonalGaussian(torch.zeros(5),
                                                                 torch.logspace(-1, 1, 5)))


def test_default_path_is_the_seed_sampler():
    q0 = _q0()
    sampler = fused_hmc.Sampler(q0, seed=3, progress=False)
    chains = sampler._chains
    assert isinstance(chains, ChainKernel) and chains.target_name == "standard"
    assert chains.state.step_size.shape == (1,) and chains.state.inverse_mass.shape == (1, 5)
    assert chains.warmup_left == 0 and chains.state.dual_averaging is None
    res = sampler.run(7)
    assert torch.equal(res.step_size, torch.full((6,), 0.1, dtype=torch.float64))
    assert torch.equal(res.inverse_mass, torch.ones(6, 5, dtype=torch.float64))
    assert res.num_warmup == 0
    # An explicit StandardGaussian, or a one-element step size tensor, is the same plain sampler.
    mu = torch.linspace(-1, 1, 5, dtype=torch.float64)
    a = _run(q0, 9, mu=mu, thin=2)
    b = _run(q0, 9, target=StandardGaussian(mu), thin=2,
             step_size=torch.tensor([0.1], dtype=torch.float64))
    assert_results_equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_trivial_configuration_equals_the_seed_sampler(dtype):
    """The chain ops with an identity-scale target, unit inverse mass and no jitter gives the
    seed sampler's result bit for bit (draws, Welford moments, acceptance)."""
    q0 = _q0(dtype=dtype)
    mu = torch.linspace(-1, 1, 5, dtype=torch.float64)
    plain = _run(q0, 11, mu=mu, thin=3, step_size=0.3)
    for kw in (dict(target=DiagonalGaussian(mu, torch.ones(5))),
               dict(mu=mu, inverse_mass=torch.ones(5)),
               dict(mu=mu, step_size=torch.full((6,), 0.3, dtype=torch.float64))):
        kw.setdefault("step_size", 0.3)
        configured = _run(q0, 11, thin=3, **kw)
        # (the results describe their targets as given: a unit-scale DiagonalGaussian is not mu=)
        assert_results_equal(configured._replace(target=None), plain._replace(target=None))


@pytest.mark.parametrize("pooled", [False, True])
def test_warmup_result_contract(pooled):
    q0 = _q0()
    res = _run(q0, 12, thin=4, pooled=pooled, **WARM)
    assert res.num_warmup == 160 and res.num_transitions == 12 and res.next_transition == 172
    assert res.samples.shape == (6, 3, 5)  # transitions 163, 167, 171: warm-up draws are not kept
    assert res.step_size.shape == (6,) and res.step_size.dtype == torch.float64
    assert res.inverse_mass.shape == (6, 5) and res.inverse_mass.dtype == torch.float64
    assert (res.step_size.unique().numel() == 1) == pooled
    assert bool((res.inverse_mass != 1).all())
    assert torch.equal(q0, _q0())  # q0 is copied, never modified


@pytest.mark.parametrize("pooled", [False, True])
def test_warmup_is_reproducible_and_chunk_invariant(pooled):
    q0 = _q0()
    target = make_target("dense", 5)
    kw = dict(num_warmup=120, target=target, jitter=0.1, pooled=pooled, thin=2)
    first = _run(q0, 30, **kw)
    assert_results_equal(_run(q0, 30, **kw), first)
    for chunk_size in (1, 7):
        assert_results_equal(_run(q0, 30, chunk_size=chunk_size, **kw), first)
    assert not torch.equal(_run(q0, 30, **{**kw, "seed": 1235}).samples, first.samples)


def test_pooled_warmup_does_not_depend_on_the_thread_count():
    q0 = _q0(chains=64)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _run(q0, 20, pooled=True, **WARM)
        torch.set_num_threads(max(2, threads))
        many = _run(q0, 20, pooled=True, **WARM)
    finally:
        torch.set_num_threads(threads)
    assert_results_equal(one, many)


def test_resume_after_warmup():
    """Runs split across run() calls, or continued by a new sample() call from the result (seed,
    next_transition, step_size, inverse_mass), equal one long run."""
    q0 = _q0()
    whole = _run(q0, 20, thin=2, **WARM)
    sampler = fused_hmc.Sampler(q0, seed=1234, thin=2, progress=False, **WARM)
    sampler.run(6)
    assert_results_equal(sampler.run(14), whole)
    first = _run(q0, 6, thin=2, **WARM)
    rest = _run(first.final_state, 14, thin=2, seed=first.seed,
                first_transition=first.next_transition, step_size=first.step_size,
                inverse_mass=first.inverse_mass, target=WARM["target"], jitter=WARM["jitter"])
    assert torch.equal(torch.cat([first.samples, rest.samples], dim=1), whole.samples)
    assert torch.equal(rest.final_state, whole.final_state)


def _not_called(**kwargs):
    raise AssertionError("a sampling call")


def test_ctrl_c_during_warmup(monkeypatch):
    q0 = _q0()
    whole = _run(q0, 10, **WARM)
    real, calls = ops.warmup, []

    def patched(**kwargs):
        calls.append(kwargs["first_transition"])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(**kwargs)

    monkeypatch.setattr(ops, "sample", _not_called)  # warm-up calls only
    monkeypatch.setattr(ops, "warmup", patched)
    sampler = fused_hmc.Sampler(q0, seed=1234, chunk_size=50, progress=False, **WARM)
    res = sampler.run(10)
    assert calls == [0, 50, 100] and res.interrupted
    assert (res.num_warmup, res.num_transitions, res.next_transition) == (100, 0, 100)
    assert res.samples.shape == (6, 0, 5)
    monkeypatch.undo()
    assert_results_equal(sampler.run(10), whole)  # carries on with warm-up, then samples


def test_batch_split_invariance():
    """Per-chain adaptation: chains [0:3] and [3:6] (chain_offset 3) equal the whole batch."""
    q0 = _q0()
    whole = _run(q0, 10, **WARM)
    parts = [_run(q0[:3], 10, **WARM), _run(q0[3:], 10, chain_offset=3, **WARM)]
    for name in ("samples", "final_state", "step_size", "inverse_mass", "accept_count"):
        assert torch.equal(torch.cat([getattr(p, name) for p in parts]), getattr(whole, name))


def test_summary_mentions_warmup(capsys):
    _run(_q0(), 8, **WARM).summary()
    assert "160 warm-up + 8 transitions" in capsys.readouterr().out


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(target=StandardGaussian(torch.zeros(3)), mu=torch.zeros(3)), ValueError, "not both"),
    (dict(target=StandardGaussian(torch.zeros(4))), ValueError, "target has dim 4"),
    (dict(target="gaussian"), TypeError, "target must be"),
    (dict(num_warmup=-1), ValueError, "num_warmup"),
    (dict(num_warmup=1.5), ValueError, "num_warmup"),
    (dict(target_accept=1.0), ValueError, "target_accept"),
    (dict(adapt_step_size=1), TypeError, "adapt_step_size"),
    (dict(pooled="yes"), TypeError, "pooled"),
    (dict(jitter=1.0), ValueError, "jitter"),
    (dict(jitter=-0.1), ValueError, "jitter"),
    (dict(step_size=torch.ones(3)), ValueError, "one per chain"),
    (dict(step_size=torch.tensor([0.1, -0.1])), ValueError, "step_size must be finite and > 0"),
    (dict(inverse_mass=torch.ones(2)), ValueError, "inverse_mass must have shape"),
    (dict(inverse_mass=torch.zeros(3)), ValueError, "inverse_mass must be finite and > 0"),
    (dict(pooled=True, num_warmup=50, step_size=torch.tensor([0.1, 0.2])), ValueError,
     "pooled=True adapts one step size"),
    (dict(adapt_windows=(75, 0, 50)), ValueError, "adapt_windows"),
    (dict(adapt_windows=(75, 25)), ValueError, "adapt_windows"),
])
def test_bad_input_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        fused_hmc.sample(torch.zeros(2, 3), 4, progress=False, **kwargs)


@pytest.mark.cuda
@pytest.mark.parametrize("kwargs", [dict(num_warmup=30, adapt_step_size=False), dict(jitter=0.1),
                                    dict(inverse_mass=torch.linspace(0.5, 2, 3)),
                                    dict(target=DenseGaussian(torch.zeros(3), torch.eye(3) * 2))])
def test_cuda_chain_kernels_features_agree_with_the_cpu(kwargs):
    """Every sampler feature runs on CUDA and agrees with the CPU build to the rounding of the
    float32 normals (see test_cuda_chain_kernels.py; step-size adaptation amplifies them, so the
    warm-up here adapts the mass only)."""
    q0 = torch.randn(5, 3, generator=torch.Generator().manual_seed(3))
    runs = [fused_hmc.sample(q0.to(device), 40, progress=False, seed=11, **kwargs)
            for device in ("cpu", "cuda")]
    assert runs[1].samples.is_cuda
    cpu, cuda = runs[0], runs[1].cpu()
    torch.testing.assert_close(cuda.samples, cpu.samples, rtol=2e-4, atol=2e-4)
    torch.testing.assert_close(cuda.step_size, cpu.step_size, rtol=2e-4, atol=0)
    torch.testing.assert_close(cuda.inverse_mass, cpu.inverse_mass, rtol=2e-4, atol=0)
    assert torch.equal(cuda.accept_count, cpu.accept_count)


def test_chains_hold_their_state_on_the_chains_device():
    sampler = fused_hmc.Sampler(_q0(), seed=1, progress=False, pooled=True, **WARM)
    chains = sampler._chains
    assert isinstance(chains, ChainKernel)
    state = chains.state
    assert state.step_size.shape == (1,) and state.inverse_mass.shape == (1, 5)
    assert state.dual_averaging.shape == (1, 3) and state.window_mean.shape == (6, 5)
    assert state.window_m2.shape == (6, 5)
    assert all(t.device == sampler.device for t in state if t is not None)  # (chees: None)
    sampler.run(1)
    assert chains.warmup_left == 0
    assert chains.state.dual_averaging is None and chains.state.window_mean is None
