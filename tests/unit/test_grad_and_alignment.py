"""Inputs the ops cannot honour are refused, naming the argument: tensors that require grad (the
transitions are not differentiable, so outputs would require grad and carry none) and Welford
buffers off the 16-byte alignment the CUDA kernels' vector loads assume (one check, every
device)."""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc import ops

from ._helpers import run_op

B, D = 3, 4


def _grad_inputs(device):
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(8, 3, generator=gen).to(device)
    mu = torch.randn(3, generator=gen).to(device)
    p = torch.randn(8, 3, generator=gen).to(device)
    u = torch.rand(8, generator=gen).to(device)
    return q, mu, p, u


def test_q_requiring_grad_is_refused_on_every_entry_point(device):
    q, mu, p, u = _grad_inputs(device)
    q = q.requires_grad_()
    calls = {
        "hmc_step philox seed": lambda: fused_hmc.hmc_step(q, rng="philox", seed=0),
        "hmc_step philox generator": lambda: fused_hmc.hmc_step(q, mu, rng="philox"),
        "hmc_step torch": lambda: fused_hmc.hmc_step(q, mu, rng="torch"),
        "hmc_step external noise": lambda: fused_hmc.hmc_step(q, mu, momentum=p, uniform=u),
        "pybind binding": lambda: ops.transition(q, mu, 0.1, 2, "philox", None, 0),
        "dispatcher": lambda: torch.ops.fused_hmc.transition.default(q, mu, 0.1, 2, "philox", None,
                                                                     0, 0),
        "traced op": lambda: ops.transition(q, mu, 0.1, 2, "philox", None, 0, trace=True),
        "given-noise op": lambda: ops.transition(q, mu, 0.1, 2, "given", momentum=p, uniform=u),
        "chain ops": lambda: _sample(q.detach().clone().requires_grad_(), "standard", 1,
                                  _run_buffers(device, q.shape[0], q.shape[1])),
        "HMC module": lambda: fused_hmc.HMC(3).to(device)(q),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r"\bq requires grad.*pass q\.detach\(\)"):
            call()
            pytest.fail(f"{name} accepted q with requires_grad")


def test_other_inputs_requiring_grad_are_refused(device):
    q, mu, p, u = _grad_inputs(device)
    for name, kwargs in (("mu", dict(mu=mu.requires_grad_())),
                         ("momentum", dict(mu=mu.detach(), momentum=p.requires_grad_(),
                                           uniform=u)),
                         ("uniform", dict(mu=mu.detach(), momentum=p.detach(),
                                          uniform=u.requires_grad_()))):
        with pytest.raises(ValueError, match=rf"\b{name} requires grad.*{name}\.detach\(\)"):
            fused_hmc.hmc_step(q, **kwargs)
    # the chain ops' target tensors: q moves as a function of them, but would carry no gradient
    mu = mu.detach().requires_grad_()
    with pytest.raises(ValueError, match=r"\bmu requires grad.*mu\.detach\(\)"):
        run_op(q, "standard", [mu], [], torch.full((1,), 0.1, dtype=torch.float64,
                                                    device=device),
                torch.ones(1, 3, device=device), 0.0, 2, 0, 0, 0, 2,
                **{k: v for k, v in _run_buffers(device, 8, 3).items() if "window" not in k})


def test_grad_free_uses_of_a_grad_tensor_work(device):
    """Under no_grad, or detached, the same q gives the usual result, not requiring grad."""
    q, mu, _, _ = _grad_inputs(device)
    want = fused_hmc.hmc_step(q, mu, rng="philox", seed=4)
    q.requires_grad_()
    with torch.no_grad():
        got = fused_hmc.hmc_step(q, mu, rng="philox", seed=4)
    detached = fused_hmc.hmc_step(q.detach(), mu, rng="philox", seed=4)
    for out in (got, detached):
        assert not out[0].requires_grad
        assert torch.equal(out[0], want[0]) and torch.equal(out[1], want[1])


def test_sample_refuses_a_start_that_requires_grad(device):
    """sample() refuses a grad-requiring q0 as HMC and hmc_step do (the transitions are not
    differentiable), saying to detach it; the detached start runs, and under no_grad the same
    tensor runs with the detached start's result."""
    q, _, _, _ = _grad_inputs(device)
    with pytest.raises(ValueError, match=r"q0 requires grad.*q0\.detach\(\)"):
        fused_hmc.sample(q.clone().requires_grad_(), 3, seed=2, progress=False)
    ref = fused_hmc.sample(q, 3, seed=2, progress=False)
    with torch.no_grad():
        res = fused_hmc.sample(q.clone().requires_grad_(), 3, seed=2, progress=False)
    assert not res.final_state.requires_grad and not res.samples.requires_grad
    assert torch.equal(res.final_state, ref.final_state) and torch.equal(res.samples, ref.samples)


# ---- alignment of the Welford buffers ----------------------------------------------------------

def _misaligned(device, *shape):
    """A float64 view 8 bytes past a 16-byte boundary (contiguous, right shape and dtype)."""
    n = 1
    for s in shape:
        n *= s
    t = torch.zeros(n + 1, dtype=torch.float64, device=device)[1:].view(*shape)
    assert t.data_ptr() % 16 == 8 and t.is_contiguous()
    return t


def _run_buffers(device, batch=B, dim=D):
    f64 = dict(dtype=torch.float64, device=device)
    return dict(mean=torch.zeros(batch, dim, **f64), m2=torch.zeros(batch, dim, **f64),
                accept_count=torch.zeros(batch, dtype=torch.int64, device=device),
                accept_prob_sum=torch.zeros(batch, **f64),
                window_mean=torch.zeros(batch, dim, **f64),
                window_m2=torch.zeros(batch, dim, **f64))


def _target(q, target):
    mu = torch.zeros(q.shape[1], dtype=q.dtype, device=q.device)
    return [mu] if target == "standard" else [mu, torch.ones_like(mu)]


def _sample(q, target, groups, buffers):
    """The sample op running two transitions (G = groups), keeping no draws."""
    f64 = dict(dtype=torch.float64, device=q.device)
    run_op(q, target, _target(q, target), [], torch.full((groups,), 0.1, **f64),
            torch.ones(groups, q.shape[1], dtype=q.dtype, device=q.device), 0.0, 2, 0, 0, 0, 2,
            **{k: buffers[k] for k in ("mean", "m2", "accept_count", "accept_prob_sum")})


def _warmup(q, target, groups, buffers):
    """The warmup op running two transitions of ten (G = groups)."""
    f64 = dict(dtype=torch.float64, device=q.device)
    run_op(q, target, _target(q, target), [], torch.full((groups,), 0.1, **f64),
            torch.ones(groups, q.shape[1], dtype=q.dtype, device=q.device), 0.0, 2, 0, 0, 0, 2,
            dual_averaging=torch.zeros(groups, 3, **f64), window_mean=buffers["window_mean"],
            window_m2=buffers["window_m2"], num_warmup=10, windows=[3, 5, 2],
            adapt_step_size=True, adapt_mass_matrix=True)


def _sample_standard(q, buffers):
    _sample(q, "standard", 1, buffers)


def _sample_diagonal_per_chain(q, buffers):
    _sample(q, "diagonal", q.shape[0], buffers)


def _warmup_pooled(q, buffers):
    _warmup(q, "standard", 1, buffers)


def _warmup_per_chain(q, buffers):
    _warmup(q, "diagonal", q.shape[0], buffers)


@pytest.mark.parametrize("op, name", [(_sample_standard, "mean"), (_sample_standard, "m2"),
                                      (_sample_diagonal_per_chain, "mean"),
                                      (_sample_diagonal_per_chain, "m2"),
                                      (_warmup_pooled, "window_mean"),
                                      (_warmup_per_chain, "window_m2")],
                         ids=["sample-mean", "sample-m2", "per-chain-mean", "per-chain-m2",
                              "warmup-window_mean", "warmup-window_m2"])
def test_misaligned_welford_buffer_is_refused(device, op, name):
    q = torch.randn(B, D, generator=torch.Generator().manual_seed(1)).to(device)
    start = q.clone()
    buffers = _run_buffers(device)
    op(q, buffers)  # aligned buffers: runs
    assert not torch.equal(q, start)
    moved = q.clone()
    buffers[name] = _misaligned(device, B, D)
    with pytest.raises(ValueError, match=rf"\b{name} must be 16-byte aligned"):
        op(q, buffers)
    assert torch.equal(q, moved)  # refused before any work
    # a view that keeps the alignment is fine
    buffers[name] = torch.zeros(B * D + 2, dtype=torch.float64, device=device)[2:].view(B, D)
    op(q, buffers)
