"""Pure-torch oracle: the spec's reference transition, independent of the extension.

``ReferenceModel`` is the grader's ``Model`` verbatim in behaviour. ``reference_hmc_step`` is the same
transition as a function that also accepts external noise and a generator.
"""
from __future__ import annotations

import torch
import torch.nn as nn


def reference_hmc_step(q: torch.Tensor, mu: torch.Tensor, step_size: float, num_leapfrog_steps: int,
                       momentum: torch.Tensor | None = None, uniform: torch.Tensor | None = None,
                       generator: torch.Generator | None = None):
    """One transition on N(mu, I), operation for operation as the reference.

    q [B, d]; mu [d]; momentum [B, d] (default: ``torch.randn_like(q)``); uniform [B] (default:
    ``torch.rand(B)``, drawn after the momentum). Returns (q_new [B, d], accepted [B] bool).
    """
    def grad_log_prob(x):
        return -(x - mu)

    def neg_log_prob(x):
        return -(-0.5 * ((x - mu) ** 2).sum(-1))

    if momentum is None:
        momentum = (torch.randn_like(q) if generator is None
                    else torch.empty_like(q).normal_(generator=generator))
    p = momentum
    current_p, current_q = p.clone(), q.clone()
    p = p + 0.5 * step_size * grad_log_prob(q)
    for _ in range(num_leapfrog_steps - 1):
        q = q + step_size * p
        p = p + step_size * grad_log_prob(q)
    q = q + step_size * p
    p = p + 0.5 * step_size * grad_log_prob(q)
    p = -p
    current_h = neg_log_prob(current_q) + 0.5 * (current_p ** 2).sum(-1)
    proposed_h = neg_log_prob(q) + 0.5 * (p ** 2).sum(-1)
    log_alpha = current_h - proposed_h
    if uniform is None:
        uniform = torch.rand(q.shape[0], device=q.device, generator=generator)
    accepted = torch.log(uniform.clamp(min=1e-10)) < log_alpha
    return torch.where(accepted.unsqueeze(-1), q, current_q), accepted


def reference_log_accept_ratio(q: torch.Tensor, mu: torch.Tensor, step_size: float,
                               num_leapfrog_steps: int, momentum: torch.Tensor) -> torch.Tensor:
    """The reference's own log_alpha [B] in float64, for counting near-tie accept decisions."""
    q64, mu64, p64 = q.double(), mu.double(), momentum.double()
    x, p = q64, p64 - 0.5 * step_size * (q64 - mu64)
    for _ in range(num_leapfrog_steps - 1):
        x = x + step_size * p
        p = p - step_size * (x - mu64)
    x = x + step_size * p
    p = p - 0.5 * step_size * (x - mu64)
    h0 = 0.5 * ((q64 - mu64) ** 2).sum(-1) + 0.5 * (p64 ** 2).sum(-1)
    h1 = 0.5 * ((x - mu64) ** 2).sum(-1) + 0.5 * (p ** 2).sum(-1)
    return h0 - h1


class ReferenceModel(nn.Module):
    """The grader's Model: one HMC transition on N(0, I) for a batch of chains."""

    def __init__(self, dim, num_leapfrog_steps=10, step_size=0.1):
        super().__init__()
        self.dim = dim
        self.num_leapfrog_steps = num_leapfrog_steps
        self.step_size = step_size
        self.register_buffer("mu", torch.zeros(dim))

    def forward(self, q):
        return reference_hmc_step(q, self.mu, self.step_size, self.num_leapfrog_steps)


def reference_target_step(q: torch.Tensor, log_prob, grad_log_prob, step_size,
                          num_leapfrog_steps: int, inv_mass: torch.Tensor, normal: torch.Tensor,
                          uniform: torch.Tensor):
    """One HMC transition with a diagonal mass matrix on any target, with caller-supplied noise: the
    reference for the sample and warmup ops (fused_hmc::sample, fused_hmc::warmup).

    With inverse mass m_inv the momentum is p = normal / sqrt(m_inv) ~ N(0, M), the kinetic energy
    0.5 * sum(m_inv * p^2), and the position moves by eps * m_inv * p (Neal 2011, "MCMC using
    Hamiltonian dynamics", sec. 5.4.1).

    q [B, d]; log_prob: [B, d] -> [B]; grad_log_prob: [B, d] -> [B, d]; step_size: a float or [B]
    (per chain, e.g. after jitter); inv_mass [d] or [B, d]; normal [B, d] standard normal draws;
    uniform [B]. Returns (q_new [B, d], accepted [B] bool, log_alpha [B]).
    """
    eps = torch.as_tensor(step_size, dtype=q.dtype, device=q.device)
    if eps.dim() == 1:
        eps = eps.unsqueeze(-1)
    inv_mass = inv_mass.to(dtype=q.dtype, device=q.device)
    p = normal / torch.sqrt(inv_mass)
    current_p, current_q = p.clone(), q.clone()
    p = p + 0.5 * eps * grad_log_prob(q)
    for _ in range(num_leapfrog_steps - 1):
        q = q + eps * inv_mass * p
        p = p + eps * grad_log_prob(q)
    q = q + eps * inv_mass * p
    p = p + 0.5 * eps * grad_log_prob(q)
    p = -p
    current_h = -log_prob(current_q) + 0.5 * (inv_mass * current_p ** 2).sum(-1)
    proposed_h = -log_prob(q) + 0.5 * (inv_mass * p ** 2).sum(-1)
    log_alpha = current_h - proposed_h
    accepted = torch.log(uniform.to(q.dtype).clamp(min=1e-10)) < log_alpha
    return torch.where(accepted.unsqueeze(-1), q, current_q), accepted, log_alpha
