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
  |x - median|; it is near 1 when all chains sample the same distribution;
- nested R-hat (``arviz_stats.rhat_nested``, Margossian, Hoffman, Sountsov, Riou-Durand, Vehtari &
  Gelman 2024, "Nested R-hat: assessing the convergence of Markov chain Monte Carlo when running
  many short chains", Bayesian Analysis): for chains run in superchains (groups of chains started
  from one shared point each; ``sample(..., superchains=K)``), the same rank-normalised and folded
  statistic computed from the between-superchain variance of the superchain means over the
  within-superchain variance, so that it tells whether the superchains agree even when each chain
  is too short to mix on its own.

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
import numbers
from typing import NamedTuple

import numpy as np

TAIL_PROB = 0.05

# The values (chains x draws x dims) that SampleResult.summary examines by default: about 2 s.
SUMMARY_VALUES = 1_000_000
# The parameters a summary table shows by default: every one of most models (eight schools' 10,
# a regression's few dozen); more are left out, and said so.
SUMMARY_ROWS = 40


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


def parameter_indices(values, dim: int, names=None, *, default: int,
                      argument: str = "var_names") -> list[int]:
    """The dimensions `values` chooses, in its order: parameter names (of `names`, one per
    dimension) or dimension indices, one or a list; None: the first `default`. `argument` names
    the argument in errors."""
    if values is None:
        return list(range(min(default, dim)))
    if isinstance(values, (str, numbers.Integral)):
        values = [values]
    values = list(values)
    known = {str(n): j for j, n in enumerate(names)} if names is not None else {}
    indices = []
    for v in values:
        if isinstance(v, str) and v in known:
            indices.append(known[v])
        elif isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= v < dim:
            indices.append(int(v))
        else:
            choose = (f"a name of {list(known)[:12]}{' ...' if len(known) > 12 else ''} or "
                      if known else "")
            raise ValueError(f"{argument} must be {choose}dimension indices in [0, {dim}); "
                             f"{v!r} is not")
    if not indices or len(set(indices)) != len(indices):
        raise ValueError(f"{argument} must name distinct parameters, at least one, got {values}")
    return indices


def row_count(max_rows) -> int:
    """`max_rows` checked: an integer >= 1."""
    if isinstance(max_rows, bool) or not isinstance(max_rows, numbers.Integral) or max_rows < 1:
        raise ValueError(f"max_rows must be an integer >= 1, got {max_rows!r}")
    return int(max_rows)


def superchain_ids(chains: int, superchains: int) -> np.ndarray:
    """[chains] int64, the superchain of each chain: chain b is in superchain b // (chains /
    superchains), the groups ``sample(..., superchains=K)`` starts from one point each."""
    return np.arange(chains) // (chains // superchains)


def rhat_nested(samples, superchains: int) -> np.ndarray:
    """Rank-normalised nested R-hat per dimension, [dim] float64, of chains in `superchains`
    equal groups of consecutive chains (:func:`superchain_ids`; at least 2 groups)."""
    draws = as_draws(samples)
    ids = superchain_ids(draws.shape[0], superchains)
    return np.atleast_1d(_arviz_stats().rhat_nested(draws, superchain_ids=ids, method="rank",
                                                    chain_axis=0, draw_axis=1))


class Diagnostics(NamedTuple):
    """ESS and R-hat per dimension for the chains and dimensions that were examined.

    ess_bulk, ess_tail, r_hat: [dims] float64, for dimensions 0 .. dims - 1.
    chains: how many chains entered (the first ones; with superchains, the first
    chains_per_superchain chains of each of the first ``superchains``); draws: draws per chain.
    nested_r_hat: [dims] float64 nested R-hat of those chains, when they were run in superchains
    (else None); superchains: how many superchains entered (None without).
    """
    ess_bulk: np.ndarray
    ess_tail: np.ndarray
    r_hat: np.ndarray
    chains: int
    draws: int
    nested_r_hat: np.ndarray | None = None
    superchains: int | None = None

    @property
    def max_nested_r_hat(self) -> float:
        values = self.nested_r_hat
        return (float(np.nanmax(values)) if values is not None and np.isfinite(values).any()
                else math.nan)

    @property
    def min_ess_bulk(self) -> float:
        return float(np.nanmin(self.ess_bulk)) if np.isfinite(self.ess_bulk).any() else math.nan

    @property
    def min_ess_tail(self) -> float:
        return float(np.nanmin(self.ess_tail)) if np.isfinite(self.ess_tail).any() else math.nan

    @property
    def max_r_hat(self) -> float:
        return float(np.nanmax(self.r_hat)) if np.isfinite(self.r_hat).any() else math.nan

    @property
    def ess_cap(self) -> float:
        """arviz-stats' largest ESS: N log10 N for the N = chains x 2 x (draws // 2) values of
        the split chains (it bounds the autocorrelation time below by 1 / log10 N, so that
        antithetic chains, as HMC's often are, do not report an ESS without bound)."""
        n = self.chains * 2 * (self.draws // 2)
        return n * math.log10(n) if n > 1 else math.nan

    def at_cap(self, values: np.ndarray) -> np.ndarray:
        """Which of the ESS `values` are at :attr:`ess_cap` (to rounding)."""
        return np.isfinite(values) & (np.asarray(values) >= self.ess_cap * (1 - 1e-9))


def _superchain_window(total: int, superchains: int, chains: int) -> tuple[int, int]:
    """(superchains k, chains per superchain m) to examine within about `chains` chains: every
    superchain's first chains when they fit one each, else fewer superchains (at least 2)."""
    size = total // superchains
    per = min(size, max(1, chains // superchains))
    return min(superchains, max(2, chains // per)), per


def _superchain_draws(samples, size: int, k: int, m: int, columns: slice):
    """The first m chains of each of the first k superchains of `size` chains."""
    if m == size:
        return samples[:k * size, :, columns]
    if hasattr(samples, "reshape"):  # a tensor or array in memory: one strided slice
        draws = samples[:k * size, :, columns]
        return draws.reshape(k, size, *draws.shape[1:])[:, :m].reshape(k * m, *draws.shape[1:])
    return np.concatenate([as_draws(samples[j * size:j * size + m, :, columns])
                           for j in range(k)])


def diagnose(samples, *, max_chains: int | None = None, max_dims: int | None = None,
             max_values: int | None = None, superchains: int | None = None,
             rows=None) -> Diagnostics:
    """Bulk/tail ESS and R-hat of the first ``max_chains`` chains and ``max_dims`` dimensions
    (None: all), or of the dimensions ``rows`` (indices, in that order; not with max_dims).
    ``max_values`` bounds the cost: it lowers the chains (the first ones, at least 2) so that at
    most about that many values (chains x draws x dims) are examined.

    superchains: the chains form that many equal groups of consecutive chains, each started from
    one point (``sample(..., superchains=K)``); the nested R-hat of the chains examined is then
    computed too. The chains examined are then, within the same budget, the first chains of
    every superchain (of the first superchains, at least 2, when fewer than one chain each fits),
    so that every superchain examined has as many chains."""
    shape = tuple(samples.shape)
    if len(shape) not in (2, 3):
        raise ValueError(f"draws must be shaped (chain, draw, dim) or (chain, draw), got {shape}")
    total, draws, dims = shape if len(shape) == 3 else (*shape, 1)
    if rows is not None and max_dims is not None:
        raise ValueError("pass max_dims (the first dimensions) or rows (chosen ones), not both")
    rows = np.arange(dims if max_dims is None else min(dims, max_dims)) if rows is None else (
        np.asarray(rows, dtype=np.int64))
    # Read the span of the rows where the draws are (device, or a store on disk), then pick.
    columns, pick = slice(int(rows.min()), int(rows.max()) + 1), rows - rows.min()
    chains = total if max_chains is None else min(total, max_chains)
    if max_values is not None:
        chains = min(chains, max(2, max_values // max(1, draws * len(rows))))
    if len(shape) == 2:
        samples = samples[:, :, None]
    if superchains is not None:
        if not 2 <= superchains <= total or total % superchains:
            raise ValueError(f"superchains must be >= 2 and divide the {total} chains, got "
                             f"{superchains}")
        k, m = _superchain_window(total, superchains, chains)
        draws = as_draws(_superchain_draws(samples, total // superchains, k, m, columns))[
            :, :, pick]
        return Diagnostics(ess_bulk(draws), ess_tail(draws), rhat(draws), chains=k * m,
                           draws=draws.shape[1], nested_r_hat=rhat_nested(draws, k),
                           superchains=k)
    draws = as_draws(samples[:chains, :, columns])[:, :, pick]
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


def format_table(mean: np.ndarray, sd: np.ndarray, diag: Diagnostics | None, rows=None, *,
                 missing: str = "ESS and R-hat need the draws (keep_samples=True)",
                 chains: int | None = None, names=None) -> str:
    """Per-dimension mean, sd, ess_bulk, ess_tail, r_hat of the dimensions `rows` (indices, in
    order; default: the first SUMMARY_ROWS), a line saying how many were left out, then one line
    of aggregates (min ESS, max R-hat) over the rows diagnosed, or the line `missing` saying why
    there are none; a footnote names arviz's ESS cap where an ESS shown is at it. diag: of the
    rows, in their order. chains: all the run's chains, to say when the diagnostics examined
    fewer. names: one per dimension, shown instead of the index."""
    dim = len(mean)
    rows = list(range(min(dim, SUMMARY_ROWS))) if rows is None else [int(j) for j in rows]
    labels = [str(j) for j in range(dim)] if names is None else [str(n) for n in names]
    if len(labels) != dim:
        raise ValueError(f"names has {len(labels)} entries for {dim} dimensions")
    head, unit = ("dim", "dims") if names is None else ("name", "parameters")
    width = max([6, len(head)] + [len(labels[j]) for j in rows])
    lines = [f"{head:>{width}} {'mean':>10} {'sd':>9} {'ess_bulk':>10} {'ess_tail':>10} "
             f"{'r_hat':>7}"]
    capped = False

    def ess(values, i):
        nonlocal capped
        if diag is None or i >= len(values) or not np.isfinite(values[i]):
            return "- "
        if diag.at_cap(values[i:i + 1])[0]:
            capped = True
            return f"{values[i]:.0f}*"
        return f"{values[i]:.0f} "

    for i, j in enumerate(rows):
        r_hat = (format(diag.r_hat[i], ".4f") if diag is not None and i < len(diag.r_hat)
                 and np.isfinite(diag.r_hat[i]) else "-")
        lines.append(f"{labels[j]:>{width}} {mean[j]:>+10.4f} {sd[j]:>9.4f} "
                     f"{ess(diag.ess_bulk if diag else (), i):>11}"
                     f"{ess(diag.ess_tail if diag else (), i):>11}{r_hat:>7}")
    if len(rows) < dim:
        lines.append(f"{'...':>{width}} ({dim - len(rows)} more {unit} not shown)")
    if diag is None:
        lines.append(missing)
        return "\n".join(lines)
    shown = len(diag.r_hat)
    scope = (f"all {dim} {unit}" if shown == dim else
             f"first {shown} of {dim} {unit}" if rows[:shown] == list(range(shown)) else
             f"{shown} of {dim} {unit}")
    of = f" of {chains}" if chains is not None and chains > diag.chains else ""
    lines.append(f"{scope} ({diag.chains}{of} chains x {diag.draws} draws): "
                 f"min ess_bulk {diag.min_ess_bulk:.0f}, min ess_tail {diag.min_ess_tail:.0f}, "
                 f"max r_hat {diag.max_r_hat:.4f}")
    if diag.nested_r_hat is not None:
        lines.append(f"max nested r_hat {diag.max_nested_r_hat:.4f} ({diag.superchains} "
                     f"superchains x {diag.chains // diag.superchains} chains)")
    if capped:
        lines.append(cap_note(diag))
    return "\n".join(lines)


def cap_note(diag: Diagnostics) -> str:
    """The footnote of an ESS at arviz's cap (marked *)."""
    n = diag.chains * 2 * (diag.draws // 2)
    return (f"* ESS at arviz-stats' cap N log10 N = {diag.ess_cap:,.0f} (N = {n:,} draws "
            "examined); the true ESS may be higher")
