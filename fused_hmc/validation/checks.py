"""Statistical checks: pure functions from samples to a ``CheckResult``.

Each check takes tensors (or arrays), computes its statistic in float64 on the samples' own device,
and compares it with a critical value from ``thresholds`` at the false-alarm rate ``alpha`` it is
given. NaN or infinite samples make a check fail, never pass. None of them draws random numbers.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import torch

from . import thresholds as th


class CheckResult(NamedTuple):
    """One check's outcome.

    name: what was tested.
    statistic: the test statistic (z, t, KS distance D, a count, ...), as a float.
    threshold: the acceptance region of ``statistic``, e.g. "|z| < 5.54" or "[3187, 3846]".
    p_value: two-sided p-value under the null hypothesis (nan for exact, deterministic checks).
    passed: whether ``statistic`` lies in the acceptance region.
    detail: a line of context (sample size, raw estimates, expected values).
    alpha: the false-alarm rate the threshold was derived for (0 for deterministic checks).
    """
    name: str
    statistic: float
    threshold: str
    p_value: float
    passed: bool
    detail: str
    alpha: float


def _flat64(samples) -> torch.Tensor:
    return torch.as_tensor(samples).detach().reshape(-1).to(torch.float64)


def _finite(x: torch.Tensor) -> bool:
    return bool(torch.isfinite(x).all())


# ---- distribution tests ----------------------------------------------------------------------

def ks_test(name: str, samples, cdf: Callable[[torch.Tensor], torch.Tensor], alpha: float,
            law: str) -> CheckResult:
    """One-sample two-sided Kolmogorov-Smirnov test of iid ``samples`` against ``cdf``.

    D = sup |F_n - F| = max(max_i(i/n - F(x_(i))), max_i(F(x_(i)) - (i-1)/n)) over the sorted
    sample (exact with ties too). Threshold: ``thresholds.ks_critical(n, alpha)``.
    """
    x = _flat64(samples)
    n = x.numel()
    if not _finite(x):
        return CheckResult(name, math.nan, "finite samples", 0.0, False,
                           f"n={n}: non-finite samples", alpha)
    f = cdf(torch.sort(x).values)
    i = torch.arange(1, n + 1, dtype=torch.float64, device=x.device)
    d = max(float((i / n - f).max()), float((f - (i - 1) / n).max()))
    crit = th.ks_critical(n, alpha)
    return CheckResult(name, d, f"D < {crit:.3g}", th.ks_p_value(d, n), d < crit,
                       f"n={n} vs {law}", alpha)


def ks_normal(name: str, samples, alpha: float) -> CheckResult:
    """KS against N(0, 1) (Phi via torch.special.ndtr)."""
    return ks_test(name, samples, torch.special.ndtr, alpha, "N(0,1)")


def ks_uniform(name: str, samples, alpha: float) -> CheckResult:
    """KS against U(0, 1)."""
    return ks_test(name, samples, lambda x: x.clamp(0.0, 1.0), alpha, "U(0,1)")


def ks_chi2(name: str, samples, df: int, alpha: float) -> CheckResult:
    """KS against chi-square(df): F(x) = P(df/2, x/2), the regularised lower incomplete gamma."""
    return ks_test(name, samples,
                   lambda x: torch.special.gammainc(torch.full_like(x, df / 2), x.clamp(min=0) / 2),
                   alpha, f"chi2({df})")


# ---- moments of N(0, 1) samples --------------------------------------------------------------

def _z_result(name: str, z: float, alpha: float, detail: str) -> CheckResult:
    crit = th.z_critical(alpha)
    return CheckResult(name, z, f"|z| < {crit:.3g}", th.normal_p_value(z), abs(z) < crit,
                       detail, alpha)


def mean_z(name: str, samples, alpha: float, mean: float = 0.0, sd: float = 1.0) -> CheckResult:
    """z = (xbar - mean) sqrt(n) / sd, exactly N(0, 1) for iid N(mean, sd^2) samples."""
    x = _flat64(samples)
    n = x.numel()
    xbar = float(x.mean())
    z = (xbar - mean) * math.sqrt(n) / sd
    return _z_result(name, z, alpha, f"n={n}: mean {xbar:+.3e} (expect {mean:g}, sd {sd / math.sqrt(n):.2e})")


def variance_chi2(name: str, samples, alpha: float, mean: float = 0.0) -> CheckResult:
    """Variance about the known mean: S = sum (x - mean)^2 ~ chi2(n) exactly for iid N(mean, 1);
    pass when chi2_{alpha/2}(n) < S < chi2_{1-alpha/2}(n), reported as the variance S / n (its
    sd is sqrt(2 / n); z in the detail)."""
    x = _flat64(samples)
    n = x.numel()
    s = float(((x - mean) ** 2).sum())
    lo, hi = th.chi2_interval(n, alpha)
    var = s / n
    z = (var - 1.0) / math.sqrt(2.0 / n)
    return CheckResult(name, var, f"({lo / n:.5f}, {hi / n:.5f})", th.chi2_p_value(s, n),
                       lo < s < hi, f"n={n}: z={z:+.2f} (sd of the variance {math.sqrt(2 / n):.1e})",
                       alpha)


def _central_moments(x: torch.Tensor) -> tuple[float, float, float]:
    c = x - x.mean()
    c2 = c * c
    return float(c2.mean()), float((c2 * c).mean()), float((c2 * c2).mean())


def skewness_z(name: str, samples, alpha: float) -> CheckResult:
    """Sample skewness g1 = m3 / m2^1.5 of iid normal samples has mean 0 and exact variance
    6 (n - 2) / ((n + 1)(n + 3)) (~6/n); its law is symmetric with excess kurtosis ~36/n, so
    z = g1 / sd is N(0, 1) to O(1/n) in the tails used here."""
    x = _flat64(samples)
    n = x.numel()
    m2, m3, _ = _central_moments(x)
    g1 = m3 / m2 ** 1.5
    sd = math.sqrt(6.0 * (n - 2) / ((n + 1) * (n + 3)))
    return _z_result(name, g1 / sd, alpha, f"n={n}: skewness {g1:+.2e} (sd {sd:.1e})")


def kurtosis_z(name: str, samples, alpha: float) -> CheckResult:
    """Sample kurtosis b2 = m4 / m2^2 of iid normal samples: exact mean 3 (n - 1) / (n + 1) and
    variance 24 n (n - 2)(n - 3) / ((n + 1)^2 (n + 3)(n + 5)) (~24/n for the excess kurtosis).
    Its law is right-skewed (skewness ~ 6 sqrt(6 / n)), which at |z| ~ 5.5 would shift the tail
    rate by tens of percent, so the standardised value goes through Anscombe & Glynn's (1983)
    cube-root transform, which matches the first three exact moments; that z is N(0, 1) (the same
    statistic as scipy.stats.kurtosistest)."""
    x = _flat64(samples)
    n = x.numel()
    m2, _, m4 = _central_moments(x)
    b2 = m4 / m2 ** 2
    mean_b2 = 3.0 * (n - 1) / (n + 1)
    var_b2 = 24.0 * n * (n - 2) * (n - 3) / ((n + 1) ** 2 * (n + 3) * (n + 5))
    raw = (b2 - mean_b2) / math.sqrt(var_b2)
    sqrt_beta1 = (6.0 * (n * n - 5 * n + 2) / ((n + 7) * (n + 9))
                  * math.sqrt(6.0 * (n + 3) * (n + 5) / (n * (n - 2) * (n - 3))))
    a = 6.0 + 8.0 / sqrt_beta1 * (2.0 / sqrt_beta1 + math.sqrt(1.0 + 4.0 / sqrt_beta1 ** 2))
    denom = 1.0 + raw * math.sqrt(2.0 / (a - 4.0))
    if denom == 0 or not math.isfinite(denom):
        z = math.copysign(math.inf, raw) if math.isfinite(raw) else math.nan
    else:
        term2 = math.copysign(abs((1.0 - 2.0 / a) / denom) ** (1.0 / 3.0), denom)
        z = (1.0 - 2.0 / (9.0 * a) - term2) / math.sqrt(2.0 / (9.0 * a))
    return _z_result(name, z, alpha, f"n={n}: excess kurtosis {b2 - 3:+.2e} "
                     f"(exact mean {mean_b2 - 3:+.1e}, sd {math.sqrt(var_b2):.1e}; raw z {raw:+.2f})")


# ---- independence ----------------------------------------------------------------------------

def correlation_z(name: str, x, y, alpha: float) -> CheckResult:
    """Pearson correlation r of the pairs (x_i, y_i); z = r sqrt(n).

    Under independence of each pair's members (any laws with finite fourth moments), r sqrt(n)
    -> N(0, 1): var(r) = E[x^2 y^2] / (n var x var y) = 1/n. Pairs may share members (chain b vs
    b+1 for all b): the products of centred pairs are then still uncorrelated (e.g.
    E[x_b x_{b+1}^2 x_{b+2}] = 0), so var(r) stays 1/n and the CLT for m-dependent sums applies.
    """
    xs, ys = _flat64(x), _flat64(y)
    if xs.numel() != ys.numel():
        raise ValueError(f"{name}: x has {xs.numel()} values, y has {ys.numel()}")
    n = xs.numel()
    xc, yc = xs - xs.mean(), ys - ys.mean()
    r = float((xc * yc).sum() / torch.sqrt((xc * xc).sum() * (yc * yc).sum()))
    return _z_result(name, r * math.sqrt(n), alpha, f"n={n} pairs: r={r:+.2e}")


# ---- rates and families ----------------------------------------------------------------------

def binomial_count(name: str, count: int, trials: int, probability: float, alpha: float,
                   what: str = "events") -> CheckResult:
    """``count`` of ``trials`` independent events of ``probability``: exact binomial interval."""
    lo, hi = th.binomial_interval(trials, probability, alpha)
    return CheckResult(name, float(count), f"[{lo}, {hi}]",
                       th.binomial_p_value(count, trials, probability), lo <= count <= hi,
                       f"{trials} trials: rate {count / trials:.5f} "
                       f"(expect {probability:.5f} -> {probability * trials:.0f} {what})", alpha)


def per_coordinate_means(name: str, x, mean, alpha: float) -> CheckResult:
    """x [B, d] of iid rows N(mean, I): z_j = (xbar_j - mean_j) sqrt(B) is exactly N(0, 1) for
    each coordinate j; the d tests share alpha (Bonferroni, alpha / d each), so the check passes
    when max_j |z_j| < z_c(alpha / d)."""
    x = torch.as_tensor(x).detach().to(torch.float64)
    mean = torch.as_tensor(mean).to(device=x.device, dtype=torch.float64)
    b, d = x.shape
    z = (x.mean(0) - mean) * math.sqrt(b)
    worst = int(z.abs().argmax())
    zmax = float(z.abs().max()) if _finite(z) else math.nan
    crit = th.z_critical(alpha / d)
    p = min(1.0, d * th.normal_p_value(zmax)) if math.isfinite(zmax) else 0.0
    return CheckResult(name, zmax, f"max|z| < {crit:.3g}", p, zmax < crit,
                       f"{d} coordinates x {b} chains: worst z={float(z[worst]):+.2f} "
                       f"(coordinate {worst})", alpha)


def per_coordinate_variances(name: str, x, mean, alpha: float) -> CheckResult:
    """x [B, d] of iid rows N(mean, I): S_j = sum_b (x_bj - mean_j)^2 ~ chi2(B) exactly for each
    coordinate j; pass when every S_j / B lies in the chi2(B) interval at alpha / d."""
    x = torch.as_tensor(x).detach().to(torch.float64)
    mean = torch.as_tensor(mean).to(device=x.device, dtype=torch.float64)
    b, d = x.shape
    s = ((x - mean) ** 2).sum(0)
    lo, hi = th.chi2_interval(b, alpha / d)
    if not _finite(s):
        return CheckResult(name, math.nan, f"({lo / b:.4f}, {hi / b:.4f})", 0.0, False,
                           "non-finite samples", alpha)
    p_each = [th.chi2_p_value(v, b) for v in s.tolist()]
    worst = min(range(d), key=p_each.__getitem__)
    var = float(s[worst]) / b
    return CheckResult(name, var, f"({lo / b:.4f}, {hi / b:.4f})", min(1.0, d * p_each[worst]),
                       bool(((s > lo) & (s < hi)).all()),
                       f"{d} coordinates x {b} chains: most extreme variance (coordinate {worst}); "
                       f"range {float(s.min()) / b:.4f}..{float(s.max()) / b:.4f}", alpha)


def across_chain_t(name: str, per_chain, expected: float, alpha: float) -> CheckResult:
    """One estimate per chain, chains independent: t = (mean - expected) / (sd / sqrt(B)) against
    Student's t with B - 1 degrees of freedom (``thresholds.t_critical``)."""
    v = _flat64(per_chain)
    b = v.numel()
    mean, sd = float(v.mean()), float(v.std())
    t = (mean - expected) / (sd / math.sqrt(b))
    crit = th.t_critical(alpha, b - 1)
    p = th.t_p_value(t, b - 1) if math.isfinite(t) else 0.0
    return CheckResult(name, t, f"|t| < {crit:.3g}", p, abs(t) < crit,
                       f"{b} chains: mean {mean:.5f} (exact {expected:.6f}, se {sd / math.sqrt(b):.1e})",
                       alpha)


# ---- exact checks ----------------------------------------------------------------------------

_INT_VIEW = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
             torch.float64: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bit patterns (so -0.0 differs from 0.0 and equal NaNs match)."""
    t = t.detach().contiguous()
    return t.view(_INT_VIEW[t.dtype]) if t.dtype in _INT_VIEW else t


def bits_equal(name: str, first: Sequence[torch.Tensor], second: Sequence[torch.Tensor],
               expect_equal: bool) -> CheckResult:
    """Deterministic: every pair of tensors bit-identical (torch.equal), or, when ``expect_equal``
    is False, at least one pair different. The statistic counts differing elements."""
    differing = 0
    for a, b in zip(first, second, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype:
            differing += max(a.numel(), b.numel())
        else:
            differing += int((_bits(a) != _bits(b)).sum())
    passed = (differing == 0) if expect_equal else (differing > 0)
    return CheckResult(name, float(differing), "0 differ" if expect_equal else "> 0 differ",
                       math.nan, passed, f"{len(first)} tensors compared", 0.0)
