"""Chains that never moved: they accepted none of a run's sampling transitions.

Such a chain reports its start as every draw, and its moments, ESS and R-hat then mislead (a
pooled or ChEES warm-up from Stan's uniform(-2, 2) starts left 68 of 256 kidiq chains so, with
R-hat 14.6, before :mod:`fused_hmc.sampling.far_starts`). ``sample()`` warns with :class:`StuckChainsWarning` and the CLI prints a warning,
naming how many chains and the first few.

Only runs of at least :data:`MIN_TRANSITIONS` sampling transitions are judged: a healthy chain at
acceptance 0.65 (ChEES's target, the lowest a tuned run aims for) rejects 20 in a row with
probability 0.35^20 = 7.6e-10, so a run of a million healthy chains warns with probability below
1e-3; a shorter run would warn of chains that only had bad luck.
"""
from __future__ import annotations

import warnings

import torch

MIN_TRANSITIONS = 20
SHOWN = 5  # chain ids named in the message


class StuckChainsWarning(UserWarning):
    """Some chains accepted none of their sampling transitions (see
    :mod:`fused_hmc.sampling.stuck_chains`)."""


def stuck_chain_ids(res) -> list[int]:
    """The global ids (chain_offset + b) of the result's chains that accepted no transition, in a
    run of at least MIN_TRANSITIONS sampling transitions ([] otherwise)."""
    if res.num_transitions < MIN_TRANSITIONS:
        return []
    stuck = torch.nonzero(res.accept_count == 0).flatten().cpu().tolist()
    return [res.chain_offset + b for b in stuck]


def describe(res, ids: list[int], remedy: str, *, count: int | None = None,
             chains: int | None = None) -> str:
    """The warning about chains `ids` of `res`, ending with `remedy`; count, chains: how many
    are stuck and of how many (default: len(ids) of res's chains; of every rank's, when ids
    holds only the first few)."""
    chains = res.accept_count.shape[0] if chains is None else chains
    count = len(ids) if count is None else count
    shown = ", ".join(str(b) for b in ids[:SHOWN]) + (", ..." if count > SHOWN else "")
    return (f"{count} of {chains} chains accepted none of their {res.num_transitions} "
            f"sampling transitions (chains {shown}): they never left their start, and their "
            f"draws distort the moments, ESS and R-hat; {remedy}")


def remedy(res, *, cli: bool) -> str:
    """What to try, in the API's words or the CLI's flags."""
    pooled = res.warmup is not None and res.num_warmup and res.warmup.pooled
    if pooled:
        return ("a per-chain warm-up (without --pooled and --adapt-trajectory-length) adapts a "
                "step size to each chain's own region" if cli else
                "a per-chain warm-up (pooled=False, adapt_trajectory_length=False) adapts a step "
                "size to each chain's own region")
    return ("a longer --warmup, a smaller --step-size, or starts nearer the posterior" if cli
            else "a longer num_warmup (per chain), a smaller step_size, or starts nearer the "
                 "posterior")


def warn_if_stuck(res, stacklevel: int = 3) -> None:
    """sample()'s warning (StuckChainsWarning) when some chains of `res` never moved."""
    ids = stuck_chain_ids(res)
    if ids:
        warnings.warn(describe(res, ids, remedy(res, cli=False)), StuckChainsWarning,
                      stacklevel=stacklevel)
