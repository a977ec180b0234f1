"""Any layout of q (and of the noise and mu) is accepted and gives the contiguous input's result."""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc.reference import ReferenceModel

from ._helpers import randn, seeded_generator

BATCH, DIM = 40, 9


def _layouts(device, dtype):
    """(name, q) pairs: q.t() of a contiguous [d, B] tensor, a strided slice, an expanded row."""
    gen = seeded_generator("layouts", dtype)
    transposed = randn(gen, DIM, BATCH, dtype=dtype, device=device).t()
    wide = randn(gen, BATCH, 2 * DIM, dtype=dtype, device=device)
    sliced = wide[:, ::2]
    every_other_chain = randn(gen, 2 * BATCH, DIM, dtype=dtype, device=device)[::2]
    expanded = randn(gen, 1, DIM, dtype=dtype, device=device).expand(BATCH, DIM)
    layouts = [("transposed", transposed), ("column-slice", sliced),
               ("row-slice", every_other_chain), ("expanded", expanded)]
    for _, q in layouts:
        assert not q.is_contiguous()
    return layouts


def _same(a, b):
    return torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_external_noise_any_layout(device, dtype):
    gen = seeded_generator("noise-layouts", dtype)
    p = randn(gen, DIM, BATCH, dtype=dtype, device=device).t()       # non-contiguous momentum
    u = randn(gen, 2 * BATCH, device=device).abs().remainder(1)[::2]  # non-contiguous uniform
    mu = randn(gen, 2 * DIM, dtype=dtype, device=device)[::2]          # non-contiguous mu
    for name, q in _layouts(device, dtype):
        q_before = q.clone()
        out = fused_hmc.hmc_step(q, mu, momentum=p, uniform=u, step_size=0.37,
                                 num_leapfrog_steps=5)
        want = fused_hmc.hmc_step(q.contiguous(), mu.contiguous(), momentum=p.contiguous(),
                                  uniform=u.contiguous(), step_size=0.37, num_leapfrog_steps=5)
        assert _same(out, want), name
        assert out[0].is_contiguous() and torch.equal(q, q_before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_philox_any_layout(device, dtype):
    """The native stream indexes noise by (chain, coordinate), not by memory order."""
    mu = torch.zeros(DIM, dtype=dtype, device=device)
    for name, q in _layouts(device, dtype):
        out = fused_hmc.hmc_step(q, mu, rng="philox", seed=5, transition=2)
        want = fused_hmc.hmc_step(q.contiguous(), mu, rng="philox", seed=5, transition=2)
        assert _same(out, want), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_torch_mode_any_layout_matches_reference(device, dtype):
    """rng="torch" draws as torch.randn_like(q) would for q's own layout, so it matches the
    reference on the same (non-contiguous) q; where randn_like gives a contiguous tensor anyway
    (non-dense layouts), that is also the contiguous input's result."""
    ref, ours = ReferenceModel(DIM).to(device), fused_hmc.HMC(DIM).to(device)
    for name, q in _layouts(device, dtype):
        torch.manual_seed(21)
        want = ref(q)
        torch.manual_seed(21)
        out = ours(q)
        assert _same(out, want), name
        if torch.empty_like(q).is_contiguous():
            torch.manual_seed(21)
            assert _same(out, ours(q.contiguous())), name


def test_empty_batch(device):
    q = torch.empty(0, DIM, device=device)
    for kwargs in ({"rng": "philox", "seed": 1}, {"rng": "torch"},
                   {"momentum": torch.empty(0, DIM, device=device),
                    "uniform": torch.empty(0, device=device)}):
        q_new, accepted = fused_hmc.hmc_step(q, **kwargs)
        assert q_new.shape == (0, DIM) and accepted.shape == (0,) and accepted.dtype == torch.bool
