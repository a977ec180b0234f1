"""Critical values of the validation suite, derived from one suite-wide false-failure budget.

A correct sampler must fail the whole suite less than once per 10^6 runs. The suite runs K
statistical checks; by Bonferroni's inequality, P(any check fails) <= sum of the per-check rates, so
giving each check alpha = 10^-6 / K keeps the suite's false-failure rate below 10^-6 whatever the
dependence between checks. A check that tests a family of m statistics (say one z per coordinate)
splits its alpha again into alpha / m. Deterministic checks (bit equality) cannot fail by chance
and take no share.

Each function returns the acceptance region of one test at false-alarm rate ``alpha``, computed
with scipy from the statistic's exact null distribution where there is one; the docstrings say
which distribution and why it applies.
"""
from __future__ import annotations

import functools
import math

SUITE_FALSE_FAILURE_RATE = 1e-6  # a correct sampler fails the whole suite < once per 10^6 runs


def scipy_stats():
    try:
        from scipy import stats
    except ImportError as exc:  # scipy is a test/validation extra, not a runtime dependency
        raise ImportError("fused_hmc.validation needs scipy: pip install scipy") from exc
    return stats


def per_check_alpha(num_checks: int, total: float = SUITE_FALSE_FAILURE_RATE) -> float:
    """Bonferroni: K checks at total / K each fail together with probability <= total."""
    if num_checks < 1:
        raise ValueError(f"num_checks must be >= 1, got {num_checks}")
    return total / num_checks


@functools.lru_cache(maxsize=None)
def z_critical(alpha: float) -> float:
    """Two-sided test of a statistic that is N(0, 1) under H0: pass when |z| < z_c with
    P(|Z| >= z_c) = alpha, i.e. z_c = Phi^-1(1 - alpha / 2). alpha = 2e-8 gives 5.61."""
    return float(scipy_stats().norm.isf(alpha / 2))


@functools.lru_cache(maxsize=None)
def t_critical(alpha: float, df: int) -> float:
    """Two-sided one-sample t test with ``df`` degrees of freedom: pass when |t| < t_c with
    P(|T_df| >= t_c) = alpha. Exact when the averaged values are iid normal; per-chain averages
    of thousands of terms are normal to high accuracy by the CLT, and the t quantile is wider than
    the normal one, which also absorbs the error of estimating the spread."""
    return float(scipy_stats().t.isf(alpha / 2, df))


@functools.lru_cache(maxsize=None)
def ks_critical(n: int, alpha: float) -> float:
    """Two-sided one-sample Kolmogorov-Smirnov: pass when D_n < d_c with P(D_n >= d_c) = alpha
    under the exact finite-n distribution of D_n for a continuous F (scipy.stats.kstwo, Simard &
    L'Ecuyer 2011). About sqrt(-ln(alpha / 2) / (2 n)). Our samples sit on float32 grids (and
    curand's uniform has 2^-32 resolution); for data rounded from a continuous law the ECDF
    moves by at most the rounding of each value, a shift below 1e-6 in F here, negligible
    against d_c >= 2.6e-4 at the sizes used (and KS on discrete data is conservative)."""
    return float(scipy_stats().kstwo.isf(alpha, n))


def ks_p_value(statistic: float, n: int) -> float:
    """P(D_n >= statistic) under H0, from the same exact distribution."""
    return float(scipy_stats().kstwo.sf(statistic, n))


@functools.lru_cache(maxsize=None)
def binomial_interval(n: int, p: float, alpha: float) -> tuple[int, int]:
    """Two-sided exact binomial test of K ~ Bin(n, p): pass when lo <= K <= hi, where lo is the
    smallest count with P(K < lo) <= alpha / 2 and hi the largest with P(K > hi) <= alpha / 2
    (binom.ppf / binom.isf; for a discrete law the realised rate is at most alpha)."""
    stats = scipy_stats()
    lo = int(stats.binom.ppf(alpha / 2, n, p))
    if stats.binom.cdf(lo - 1, n, p) > alpha / 2:  # ppf's boundary: keep P(K < lo) <= alpha / 2
        lo -= 1
    hi = int(stats.binom.isf(alpha / 2, n, p))
    if stats.binom.sf(hi, n, p) > alpha / 2:
        hi += 1
    return lo, hi


def binomial_p_value(k: int, n: int, p: float) -> float:
    """Two-sided p-value of K = k: twice the smaller tail, capped at 1."""
    stats = scipy_stats()
    return float(min(1.0, 2 * min(stats.binom.cdf(k, n, p), stats.binom.sf(k - 1, n, p))))


@functools.lru_cache(maxsize=None)
def chi2_interval(df: float, alpha: float) -> tuple[float, float]:
    """Two-sided chi-square test: pass when lo < S < hi with P(S <= lo) = P(S >= hi) = alpha / 2
    for S ~ chi2(df). With a known mean, the sum of squares of df iid N(0, 1) values is exactly
    chi2(df), so this is an exact variance test."""
    stats = scipy_stats()
    return float(stats.chi2.ppf(alpha / 2, df)), float(stats.chi2.isf(alpha / 2, df))


def chi2_p_value(statistic: float, df: float) -> float:
    stats = scipy_stats()
    return float(min(1.0, 2 * min(stats.chi2.cdf(statistic, df), stats.chi2.sf(statistic, df))))


def normal_p_value(z: float) -> float:
    """Two-sided P(|Z| >= |z|)."""
    return float(math.erfc(abs(z) / math.sqrt(2.0)))


def t_p_value(t: float, df: int) -> float:
    return float(2 * scipy_stats().t.sf(abs(t), df))
