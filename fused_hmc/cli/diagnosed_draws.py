"""The draws ESS / R-hat look at: the first chains, draws and dimensions, within budgets, taken
from the result or (without kept draws) from those chains run again with draws kept."""
from __future__ import annotations

import torch

# ESS / R-hat look at the first chains and draws of the first dims: chains x draws x dims values
# (about a second per million per estimator), and the draws they need hold chains x draws x dim.
_DIAGNOSTIC_DIMS = 8
_DIAGNOSTIC_VALUES = 500_000
_DIAGNOSTIC_ELEMENTS = 2**24


def diagnostic_window(chains: int, kept: int, dim: int,
                       dims: int | None = None) -> tuple[int, int, int]:
    """(chains, draws, dims) that ESS / R-hat look at: the first ones, within the budgets; dims:
    how many quantities are diagnosed (default: the first _DIAGNOSTIC_DIMS of dim)."""
    dims = min(dim, _DIAGNOSTIC_DIMS) if dims is None else dims
    draws = max(1, min(kept, _DIAGNOSTIC_VALUES // (2 * dims), _DIAGNOSTIC_ELEMENTS // (2 * dim)))
    most = min(_DIAGNOSTIC_VALUES // (draws * dims), _DIAGNOSTIC_ELEMENTS // (draws * dim))
    return min(chains, max(2, most)), draws, dims


def diagnostic_draws(q0, options, res, window) -> torch.Tensor:
    """The first window[0] chains' first window[1] draws: from the result, or (without kept draws)
    by running those chains again with draws kept; chain b of either run is the same philox chain,
    so without pooled adaptation they are the very draws of the main run."""
    from ..sampling import Sampler

    chains, draws, _ = window
    if res.samples is not None:
        return res.samples[:chains, :draws]
    if res.samples_path is not None:  # streamed: read those draws from the store
        from ..sampling.storage import posterior_draws

        return posterior_draws(res.samples_path, res.num_kept)[:chains, :draws, :]
    first = res.next_transition - res.num_transitions  # the first sampling transition
    thin = res.thin
    transitions = thin * (first // thin + draws) - first  # the fewest that keep `draws`
    options = dict(options, superchains=None)  # q0 already holds the superchains' starts
    sub = Sampler(q0[:chains], keep_samples=True, progress=False, **options).run(transitions)
    return sub.samples
