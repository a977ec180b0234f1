"""A closed-form oracle: on N(mu, I), leapfrog is a rotation of each coordinate.

With x = q - mu, cos(theta) = 1 - eps^2 / 2 and s = sqrt(1 - eps^2 / 4) (Neal 2011, sec. 5.2.3.3):
    x_L = cos(L theta) x0 + sin(L theta) p0 / s
and 0.5 (s^2 x^2 + p^2) is conserved, so dH = H1 - H0 = (eps^2 / 8) (|x_L|^2 - |x0|^2) exactly.
Nothing here shares code with the implementations or with reference.py.
"""
from __future__ import annotations

import math

import pytest
import torch

import fused_hmc

from ._helpers import randn, seeded_generator

CASES = [(1, 0.1), (2, 0.37), (10, 0.1), (10, 0.37), (7, 0.9), (25, 0.37)]


def closed_form(x0: torch.Tensor, p0: torch.Tensor, eps: float, steps: int):
    """(x_L [B, d], dH [B]) in float64."""
    x0, p0 = x0.double(), p0.double()
    theta = math.acos(1 - eps ** 2 / 2)
    s = math.sqrt(1 - eps ** 2 / 4)
    x = math.cos(steps * theta) * x0 + math.sin(steps * theta) * p0 / s
    dh = (eps ** 2 / 8) * ((x ** 2).sum(-1) - (x0 ** 2).sum(-1))
    return x, dh


def _noise(device, dtype, batch=512, dim=64):
    gen = seeded_generator("closed-form", dtype)
    mu = randn(gen, dim, dtype=dtype, device=device)
    scale = torch.tensor([0.3, 1.0, 2.0], dtype=dtype).repeat(batch)[:batch, None].to(device)
    q = mu + scale * randn(gen, batch, dim, dtype=dtype, device=device)
    return q, mu, randn(gen, batch, dim, dtype=dtype, device=device)


def _position_tolerance(dtype, x_closed, steps):
    """float64: ~L ulps of |x| plus slack, 1e-12; float32: 1e-5 scaled by the coordinate size."""
    size = x_closed.abs().amax(-1, keepdim=True).clamp(min=1)
    if dtype == torch.float64:
        return 1e-12 * size * max(1, steps / 10)
    return 1e-5 * size * max(1, steps / 10)


@pytest.mark.parametrize("steps,eps", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_proposal_is_the_rotation(device, dtype, steps, eps):
    q, mu, p = _noise(device, dtype)
    tiny = torch.full((q.shape[0],), 1e-20, dtype=dtype, device=device)  # accept unless dH > 23
    x_closed, dh = closed_form(q - mu, p, eps, steps)
    assert (dh < 20).all()
    q_new, accepted = fused_hmc.hmc_step(q, mu, momentum=p, uniform=tiny, step_size=eps,
                                         num_leapfrog_steps=steps)
    assert accepted.all()
    err = ((q_new - mu).double() - x_closed).abs()
    assert (err <= _position_tolerance(dtype, x_closed, steps)).all(), float(err.max())


@pytest.mark.parametrize("steps,eps", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_accept_decision_follows_exact_energy_change(device, dtype, steps, eps):
    """u = exp(-dH - m) must accept and u = exp(-dH + m) must reject (where that u < 1).

    The margin m = 64 u_q (1 + H0 + H1) covers the rounding of dH in q's dtype (about sqrt(d) u_q H
    in practice, ~1e-5 at d = 64 in float32); it must leave many chains where rejecting is possible.
    """
    q, mu, p = _noise(device, dtype)
    x0 = (q - mu).double()
    x_closed, dh = closed_form(x0, p, eps, steps)
    h0 = 0.5 * (x0 ** 2).sum(-1) + 0.5 * (p.double() ** 2).sum(-1)
    margin = 64 * (torch.finfo(dtype).eps / 2) * (1 + 2 * h0 + dh)
    accept_u = torch.exp(-dh - margin).clamp(max=1.0 - 1e-7)
    reject_u = torch.exp(-dh + margin)
    can_reject = ((reject_u < 1) & (reject_u > 1e-9)).cpu()
    assert can_reject.float().mean() > 0.2
    for uniform, want in ((accept_u, True), (reject_u.clamp(max=1.0), False)):
        uniform = uniform.to(dtype=dtype, device=device)
        q_new, accepted = fused_hmc.hmc_step(q, mu, momentum=p, uniform=uniform, step_size=eps,
                                             num_leapfrog_steps=steps)
        accepted = accepted.cpu()
        if want:
            assert accepted.all()
        else:
            assert not accepted[can_reject].any()
            assert torch.equal(q_new[can_reject.to(device)], q[can_reject.to(device)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_philox_fused_leapfrog_is_the_rotation(device, dtype):
    """The philox mode's own (fused-FMA) integrator against the closed form, with its traced noise."""
    q, mu, _ = _noise(device, dtype, batch=300, dim=33)
    for steps, eps in CASES:
        q_new, accepted, p, u = fused_hmc.ops.transition(q, mu, eps, steps, "philox", None,
                                                         17, steps, trace=True)
        x_closed, dh = closed_form(q - mu, p, eps, steps)
        want_q = torch.where(accepted[:, None], x_closed, (q - mu).double())
        err = ((q_new - mu).double() - want_q).abs()
        assert (err <= _position_tolerance(dtype, x_closed, steps)).all(), (steps, eps)
        log_u = torch.log(u.double().clamp(min=1e-10))
        h0 = 0.5 * ((q - mu).double() ** 2).sum(-1) + 0.5 * (p.double() ** 2).sum(-1)
        clear = (log_u + dh).abs() > 64 * (torch.finfo(dtype).eps / 2) * (1 + 2 * h0 + dh)
        assert clear.float().mean() > 0.9
        assert torch.equal(accepted[clear], (log_u < -dh)[clear])
