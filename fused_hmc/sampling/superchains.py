"""Superchains (Margossian et al. 2024, "Nested R-hat"): the chains split into K equal groups of
consecutive chains, every chain of a group started from one shared point, so that nested R-hat
(:func:`fused_hmc.diagnostics.rhat_nested`) can tell whether many short chains have converged.

Group k holds chains k M .. (k + 1) M - 1 of the batch (M = chains / K); all of them start at the
state that q0 gives the group's first chain, row k M (the paper draws one point per superchain from
an overdispersed initial distribution: pass q0 with such rows there). The chains of a group then
differ only by their philox streams.
"""
from __future__ import annotations

import numbers

import torch


def check_superchains(superchains, chains: int) -> int | None:
    """None, or a number K of superchains: an integer >= 2 (nested R-hat compares superchains)
    that divides the chains."""
    if superchains is None:
        return None
    if isinstance(superchains, bool) or not isinstance(superchains, numbers.Integral):
        raise TypeError(f"superchains must be an integer or None, got {superchains!r}")
    if superchains < 2:
        raise ValueError(f"superchains must be >= 2 (nested R-hat compares superchains), got "
                         f"{superchains}")
    if chains % superchains:
        raise ValueError(f"superchains = {superchains} must divide the {chains} chains (q0's rows) "
                         "into groups of equal size")
    return int(superchains)


def superchain_starts(q0: torch.Tensor, superchains: int) -> torch.Tensor:
    """q0 [chains, dim] with every row replaced by the first row of its superchain: row b becomes
    row (b // M) M, M = chains / superchains (a new tensor; q0 is not modified)."""
    chains = q0.shape[0]
    check_superchains(superchains, chains)
    size = chains // superchains
    return q0[::size].repeat_interleave(size, dim=0).contiguous()
