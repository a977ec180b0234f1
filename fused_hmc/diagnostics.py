"""Convergence diagnostics over many chains: bulk and tail ESS and rank-normalised split R-hat.

The estimators are ArviZ's (``arviz_stats.ess`` / ``arviz_stats.rhat`` on arrays), after Vehtari,
Gelman, Simpson, Carpenter & Buerkner (2021), "Rank-normalization, folding, and localization: an
improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2):

- bulk ESS: ESS of the rank-normalised split chains (how well the centre of the distribution is
  explored; for iid draws it is close to chains * draws);
- mean ESS: ESS of the split chains without rank normalisation, the one that gives the Monte Carlo
  standard error of a mean (of the draws, or of a function of them);
- tail ESS: the smaller of the ESS of the indicators of the 5% and 95% quantiles;
- R-hat: the larger of the rank-normalised split R-hat of the draws and of their folded values
  |x - median|; it is near 1 when all chains sample the same distribution.

Draws are arrays or tensors shaped (chain, draw, dim) (or (chain, draw) for one dimension). The cost
is arviz-stats' ranking of every value of a dimension, three times (bulk ESS, and R-hat's ranks of
the draws and of their folded values; scipy's rankdata, an argsort each): about 2 s per million
values on one core, 60% of it in argsort (profiled at 2048 chains x 1000 draws x 2 dims: 6.6 s, of
which argsort 3.8 s, norm.ppf 1.0 s). arviz-stats loops over dimensions and has no cheaper method
for these, so :func:`diagnose` limits the values it examines (``max_values``; ``summary`` examines
:data:`SUMMARY_VALUES`), taking the first chains. arviz-stats, arviz-base, xarray and
xarray-einstats are dependencies of the package.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

TAIL_PROB = 0.05

# The values (chains x draws x dims) that SampleResult.summary examines by default: about 2 s.
SUMMARY_VALUES = 1_000_000


def _arviz_stats():
    try:
        import arviz_stats
        arviz_stats.ess  # noqa: B018 - the array API is missing when an optional import failed
    except (ImportError, AttributeError) as exc:
        raise ImportError(
            "fused_hmc's ESS/R-hat diagnostics need arviz-stats with its xarray extras "
            "(dependencies of fused_hmc): pip install arviz-stats arviz-base xarray "
            "xarray-einstats") from exc
    return arviz_stats


def as_draws(samples) -> np.ndarray:
    """Draws as a float64 numpy array (chain, draw, dim); a (chain, draw) input gets dim = 1."""
    if hasattr(samples, "detach"):  # a torch tensor, on any device
        samples = samples.detach().cpu().double().numpy()
    draws = np.asarray(samples, dtype=np.float64)
    if draws.ndim == 2:
        draws = draws[:, :, None]
    if draws.ndim != 3:
        raise ValueError(f"draws must be shaped (chain, draw, dim) or (chain, draw), got "
                         f"{draws.shape}")
    return draws


def ess_bulk(samples) -> np.ndarray:
    """Bulk effective sample size per dimension, [dim] float64 (NaN with fewer than 4 draws)."""
    return np.atleast_1d(_arviz_stats().ess(as_draws(samples), method="bulk", chain_axis=0,
                                            draw_axis=1))


def ess_mean(samples) -> np.ndarray:
    """Effective sample size of the mean estimator per dimension, [dim] float64: the classic ESS
    of the draws themselves (split chains, no rank normalisation), so that the Monte Carlo
    standard error of the mean of f(draws) is sd(f) / sqrt(ess_mean(f(draws)))."""
    return np.atleast_1d(_arviz_stats().ess(as_draws(samples), method="mean", chain_axis=0,
                                            draw_axis=1))


def ess_tail(samples, prob: float = TAIL_PROB) -> np.ndarray:
    """Tail effective sample size per dimension: min ESS of the prob and 1 - prob quantiles."""
    return np.atleast_1d(_arviz_stats().ess(as_draws(samples), method="tail", prob=prob,
                                            chain_axis=0, draw_axis=1))


def rhat(samples) -> np.ndarray:
    """Rank-normalised split R-hat per dimension, [dim] float64 (needs >= 2 chains or draws)."""
    return np.atleast_1d(_arviz_stats().rhat(as_draws(samples), method="rank", chain_axis=0,
                                             draw_axis=1))


class Diagnostics(NamedTuple):
    """ESS and R-hat per dimension for the chains and dimensions that were examined.

    ess_bulk, ess_tail, r_hat: [dims] float64, for dimensions 0 .. dims - 1.
    chains: how many chains (the first ones) entered; draws: draws per chain.
    """
    ess_bulk: np.ndarray
    ess_tail: np.ndarray
    r_hat: np.ndarray
    chains: int
    draws: int

    @property
    def min_ess_bulk(self) -> float:
        return float(np.nanmin(self.ess_bulk)) if np.isfinite(self.ess_bulk).any() else math.nan

    @property
    def min_ess_tail(self) -> float:
        return float(np.nanmin(self.ess_tail)) if np.isfinite(self.ess_tail).any() else math.nan

    @property
    def max_r_hat(self) -> float:
        return float(np.nanmax(self.r_hat)) if np.isfinite(self.r_hat).any() else math.nan


def diagnose(samples, *, max_chains: int | None = None, max_dims: int | None = None,
             max_values: int | None = None) -> Diagnostics:
    """Bulk/tail ESS and R-hat of the first ``max_chains`` chains and ``max_dims`` dimensions
    (None: all). ``max_values`` bounds the cost: it lowers the chains (the first ones, at least 2)
    so that at most about that many values (chains x draws x dims) are examined."""
    shape = tuple(samples.shape)
    if len(shape) not in (2, 3):
        raise ValueError(f"draws must be shaped (chain, draw, dim) or (chain, draw), got {shape}")
    chains, draws, dims = shape if len(shape) == 3 else (*shape, 1)
    chains = chains if max_chains is None else min(chains, max_chains)
    dims = dims if max_dims is None else min(dims, max_dims)
    if max_values is not None:
        chains = min(chains, max(2, max_values // max(1, draws * dims)))
    if len(shape) == 3:  # slice where the draws are (device, or a store on disk), then copy
        samples = samples[:chains, :, :dims]
    draws = as_draws(samples)[:chains, :, :dims]
    return Diagnostics(ess_bulk(draws), ess_tail(draws), rhat(draws), chains=draws.shape[0],
                       draws=draws.shape[1])


def pooled_moments(mean: np.ndarray, var: np.ndarray, draws_per_chain: int):
    """Mean and SD per dimension of all draws of all chains, from per-chain means and variances.

    mean, var: [chains, dim], var unbiased (m2 / (n - 1)); the law of total variance pools them
    exactly: SS = sum_b (n - 1) var_b + n sum_b (mean_b - grand)^2, SD = sqrt(SS / (chains n - 1)).
    """
    mean = np.asarray(mean, dtype=np.float64)
    n, chains = draws_per_chain, mean.shape[0]
    grand = mean.mean(axis=0)
    within = np.zeros_like(grand) if n < 2 else (n - 1) * np.asarray(var, np.float64).sum(axis=0)
    between = n * ((mean - grand) ** 2).sum(axis=0)
    total = chains * n
    sd = np.sqrt((within + between) / (total - 1)) if total > 1 else np.full_like(grand, np.nan)
    return grand, sd


def format_table(mean: np.ndarray, sd: np.ndarray, diag: Diagnostics | None,
                 max_dims: int = 8,
                 missing: str = "ESS and R-hat need the draws (keep_samples=True)",
                 chains: int | None = None, names=None) -> str:
    """Per-dimension mean, sd, ess_bulk, ess_tail, r_hat for the first ``max_dims`` dimensions,
    then one line of aggregates (min ESS, max R-hat) over every dimension diagnosed, or the line
    `missing` saying why there are none. chains: all the run's chains, to say when the
    diagnostics examined fewer. names: one per dimension, shown instead of the index."""
    dim = len(mean)
    labels = [str(j) for j in range(dim)] if names is None else [str(n) for n in names]
    if len(labels) != dim:
        raise ValueError(f"names has {len(labels)} entries for {dim} dimensions")
    head, unit = ("dim", "dims") if names is None else ("name", "parameters")
    width = max([6, len(head)] + [len(s) for s in labels[:max_dims]])
    lines = [f"{head:>{width}} {'mean':>10} {'sd':>9} {'ess_bulk':>10} {'ess_tail':>10} "
             f"{'r_hat':>7}"]

    def fmt(values, j, spec):
        if diag is None or j >= len(values) or not np.isfinite(values[j]):
            return "-"
        return format(values[j], spec)

    for j in range(min(dim, max_dims)):
        lines.append(
            f"{labels[j]:>{width}} {mean[j]:>+10.4f} {sd[j]:>9.4f} "
            f"{fmt(diag.ess_bulk if diag else (), j, '.0f'):>10} "
            f"{fmt(diag.ess_tail if diag else (), j, '.0f'):>10} "
            f"{fmt(diag.r_hat if diag else (), j, '.4f'):>7}")
    if dim > max_dims:
        more = "dimensions" if names is None else unit
        lines.append(f"{'...':>{width}} ({dim - max_dims} more {more})")
    if diag is None:
        lines.append(missing)
    else:
        covered = len(diag.r_hat)
        scope = f"all {covered} {unit}" if covered == dim else f"first {covered} of {dim} {unit}"
        of = f" of {chains}" if chains is not None and chains > diag.chains else ""
        lines.append(f"{scope} ({diag.chains}{of} chains x {diag.draws} draws): "
                     f"min ess_bulk {diag.min_ess_bulk:.0f}, min ess_tail {diag.min_ess_tail:.0f}, "
                     f"max r_hat {diag.max_r_hat:.4f}")
    return "\n".join(lines)
