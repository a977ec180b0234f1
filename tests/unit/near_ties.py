"""Counting accept decisions that may legitimately differ from the reference.

The reference decides log(u) < H0 - H1 with H0, H1 summed in q's dtype; each sum carries a rounding
error of at most about d * eps_mach * H (pairwise summation does better). A decision can flip only
when |log u - log_alpha| is below that error; we use 8 * d * eps_mach * (H0 + H1 + 1) as the
tolerance, a generous bound that still isolates ~1e-4 of chains at d=64 in float32.
"""
from __future__ import annotations

import torch

from fused_hmc.reference import reference_log_accept_ratio


def near_tie_mask(q, mu, step_size, num_steps, momentum, uniform) -> torch.Tensor:
    log_alpha = reference_log_accept_ratio(q, mu, step_size, num_steps, momentum)
    energy = 0.5 * ((q.double() - mu.double()) ** 2).sum(-1) + 0.5 * (momentum.double() ** 2).sum(-1)
    eps = torch.finfo(q.dtype).eps
    tol = 8 * q.shape[1] * eps * (2 * energy.abs() + 1)
    log_u = torch.log(uniform.double().clamp(min=1e-10))
    return (log_u - log_alpha).abs() <= tol


def assert_same_decisions(accepted, accepted_ref, tie_mask, max_ties: int | None = None) -> int:
    """Every disagreement must be a near-tie; returns the number of disagreements."""
    differ = accepted != accepted_ref
    unexplained = differ & ~tie_mask
    assert not unexplained.any(), f"{int(unexplained.sum())} accept decisions differ away from ties"
    if max_ties is not None:
        assert int(tie_mask.sum()) <= max_ties, f"{int(tie_mask.sum())} near-ties, expected <= {max_ties}"
    return int(differ.sum())
