"""torch.library.opcheck on every operator the extension registers: schema (mutation annotations,
aliasing), autograd registration, the fake impls against the real kernels (shapes, dtypes,
strides), and AOT dispatch, on CPU and (marked cuda) CUDA, float32 and float64, for each noise
mode and for a non-contiguous q. The list of operators comes from the dispatcher, so an operator
added without samples here fails test_every_registered_op_has_samples.
"""
from __future__ import annotations

import pytest
import torch

from fused_hmc import _build

from ._helpers import randn, seeded_generator

B, D = 5, 3
_F64 = dict(dtype=torch.float64)


def _state(device, dtype, transposed=False):
    gen = seeded_generator("opcheck", dtype, transposed)
    q = randn(gen, D, B, dtype=dtype, device=device).t() if transposed else \
        randn(gen, B, D, dtype=dtype, device=device)
    return q, randn(gen, D, dtype=dtype, device=device)


def _moments(device, draws_kept, dtype):
    """samples [B, K, d], mean, m2 [B, d] float64, accept_count [B] int64, accept_prob_sum [B]."""
    return (torch.zeros(B, draws_kept, D, dtype=dtype, device=device),
            torch.zeros(B, D, device=device, **_F64), torch.zeros(B, D, device=device, **_F64),
            torch.zeros(B, dtype=torch.long, device=device), torch.zeros(B, device=device, **_F64))


def _targets(device, dtype):
    """(target_kind, precision) of each Gaussian target: identity, diagonal, dense SPD; the
    samples pair them with shared (G = 1) and per-chain (G = B) step sizes in turn."""
    a = randn(seeded_generator("opcheck-precision"), D, D, dtype=dtype, device=device)
    return [(0, torch.empty(0, dtype=dtype, device=device)),
            (1, torch.full((D,), 2.0, dtype=dtype, device=device)),
            (2, a @ a.t() + D * torch.eye(D, dtype=dtype, device=device))]


def _hmc_step_noise(device, dtype):
    q, mu = _state(device, dtype)
    p = randn(seeded_generator("opcheck-p"), B, D, dtype=dtype, device=device)
    return [(q, mu, p, torch.rand(B, dtype=u, device=device), 0.3, 4)
            for u in (torch.float32, torch.float64)]


def _noise_drawing(device, dtype):
    q, mu = _state(device, dtype)
    q_t, _ = _state(device, dtype, transposed=True)
    return [(q, mu, 0.3, 4, "torch"), (q_t, mu, 0.3, 4, "torch"), (q, mu, 0.3, 4, "philox"),
            (q_t, mu, 0.3, 4, "philox", None, 7, 2)]


def _philox4x32(device, dtype):
    counters = torch.randint(-2**31, 2**31 - 1, (6, 4), dtype=torch.int32,
                             generator=seeded_generator("opcheck-counters")).to(device)
    return [(counters, 0x1234_5678_9ABC_DEF0)]


def _run_chains(device, dtype):
    q, mu = _state(device, dtype)
    return [(q.clone(), mu, 0.3, 4, 7, 0, 3, 4, 2, *_moments(device, 2, dtype), 0),
            (q.clone(), mu, 0.3, 4, 7, 0, 0, 3, 1, torch.empty(0, dtype=dtype, device=device),
             *_moments(device, 0, dtype)[1:], 0)]


def _run_chains_tuned(device, dtype):
    q, mu = _state(device, dtype)
    samples = []
    for (kind, precision), groups in zip(_targets(device, dtype), (1, B, 1)):
        step = torch.full((groups,), 0.3, device=device, **_F64)
        inv_mass = torch.full((groups, D), 0.8, dtype=dtype, device=device)
        samples.append((q.clone(), kind, mu, precision, step, inv_mass, 0.2, 4, 7, 0, 0, 4, 2,
                        *_moments(device, 2, dtype), 0))
    return samples


def _warmup_chains(device, dtype):
    q, mu = _state(device, dtype)
    samples = []
    for (kind, precision), groups in zip(_targets(device, dtype), (B, 1, B)):
        step = torch.full((groups,), 0.3, device=device, **_F64)
        inv_mass = torch.ones(groups, D, dtype=dtype, device=device)
        state = (torch.zeros(groups, 3, device=device, **_F64),
                 torch.zeros(B, D, device=device, **_F64), torch.zeros(B, D, device=device, **_F64))
        samples.append((q.clone(), kind, mu, precision, step, inv_mass, 0.1, 3, 7, 0, 0, 20, 0, 40,
                        5, 5, 5, 0.8, True, True, *state))
    return samples


SAMPLES = {
    "hmc_step_noise": _hmc_step_noise,
    "hmc_step": _noise_drawing,
    "hmc_step_traced": _noise_drawing,
    "philox4x32": _philox4x32,
    "run_chains": _run_chains,
    "run_chains_tuned": _run_chains_tuned,
    "warmup_chains": _warmup_chains,
}


def _registered_ops() -> set[str]:
    _build.load_extension()
    prefix = "fused_hmc::"
    return {name[len(prefix):] for name in torch._C._dispatch_get_all_op_names()
            if name.startswith(prefix)}


def test_every_registered_op_has_samples():
    assert _registered_ops() == set(SAMPLES)


def _opcheck(name, device, dtype):
    _build.load_extension()
    op = getattr(torch.ops.fused_hmc, name).default
    for args in SAMPLES[name](device, dtype):
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_opcheck(device, name, dtype):
    _opcheck(name, device, dtype)


@pytest.mark.parametrize("name", ["hmc_step", "hmc_step_traced"])
def test_opcheck_under_float64_default_dtype(device, name):
    """torch.rand(B) is float64 then: the ops and their fake impls must agree on it too."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _opcheck(name, device, torch.float32)
    finally:
        torch.set_default_dtype(before)
