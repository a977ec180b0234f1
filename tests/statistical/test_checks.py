"""The checks, thresholds and exact expectations behind the suite, against independent derivations."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from fused_hmc.validation import checks as ck
from fused_hmc.validation import thresholds as th
from fused_hmc.validation.gaussian_exact import gaussian_hmc_exact, leapfrog_matrix


# ---- exact expectations ----------------------------------------------------------------------

def test_exact_values_of_the_seed_configuration():
    exact = gaussian_hmc_exact(64, 0.1, 10)
    assert exact.acceptance == pytest.approx(0.9933021193, abs=1e-10)
    assert exact.lag1_autocorrelation == pytest.approx(0.542199, abs=1e-6)
    assert exact.mean_exp_minus_dh == pytest.approx(1.0, abs=1e-12)  # volume preservation


def test_leapfrog_matrix_is_the_rotation_closed_form():
    eps, steps = 0.1, 10
    theta, s = math.acos(1 - eps ** 2 / 2), math.sqrt(1 - eps ** 2 / 4)
    c, sn = math.cos(steps * theta), math.sin(steps * theta)
    np.testing.assert_allclose(leapfrog_matrix(eps, steps), [[c, sn / s], [-s * sn, c]],
                               atol=1e-13)


def test_exact_values_against_monte_carlo():
    """Float64 Monte Carlo over 400k chains x d=64 through the leapfrog map (control variates: the
    exact E[x0 . xL] = d M00, and E[exp(-dH)] = 1)."""
    d, eps, steps, n = 64, 0.1, 10, 400_000
    m = leapfrog_matrix(eps, steps)
    rng = np.random.default_rng(12345)
    accept, correction = [], []
    for _ in range(8):
        x0 = rng.standard_normal((n // 8, d))
        p0 = rng.standard_normal((n // 8, d))
        x1, p1 = m[0, 0] * x0 + m[0, 1] * p0, m[1, 0] * x0 + m[1, 1] * p0
        dh = 0.5 * ((x1 ** 2 + p1 ** 2) - (x0 ** 2 + p0 ** 2)).sum(1)
        alpha = np.minimum(1.0, np.exp(-dh))
        accept.append(alpha)
        correction.append((1 - alpha) * ((x0 ** 2).sum(1) - (x0 * x1).sum(1)) / d)
    accept, correction = np.concatenate(accept), np.concatenate(correction)
    exact = gaussian_hmc_exact(d, eps, steps)
    se_a = accept.std() / math.sqrt(n)
    assert abs(accept.mean() - exact.acceptance) < 6 * se_a
    se_c = correction.std() / math.sqrt(n)
    assert abs(m[0, 0] + correction.mean() - exact.lag1_autocorrelation) < 6 * se_c


# ---- thresholds ------------------------------------------------------------------------------

def test_thresholds_match_values_derived_by_hand():
    """z: the normal quantile at 1 - alpha / 2; KS: Kolmogorov's limit sqrt(ln(2 / alpha) / (2 n))
    (1.048e-3 at n = 8388608, 0.0671 at n = 2048), which the exact finite-n values meet within the
    tolerances; acceptance: the alpha / 2 quantiles of Binomial(2048 * 256, 1 - 0.9933021193)
    rejections, the exact rate from validation.gaussian_exact."""
    alpha = 2e-8  # ~50 statistics at 1e-6 in total
    assert th.z_critical(alpha) == pytest.approx(5.61, abs=0.005)
    assert th.ks_critical(8_388_608, alpha) == pytest.approx(1.05e-3, abs=5e-6)
    assert th.ks_critical(2_097_152, alpha) == pytest.approx(2.10e-3, abs=1e-5)
    assert th.ks_critical(131_072, alpha) == pytest.approx(8.38e-3, abs=3e-5)
    assert th.ks_critical(2048, alpha) == pytest.approx(0.067, abs=5e-4)
    lo, hi = th.binomial_interval(2048 * 256, 1 - 0.9933021193, alpha)
    assert abs(lo - 3185) <= 2 and abs(hi - 3848) <= 2


def test_binomial_interval_tails():
    n, p, alpha = 100_000, 0.01, 1e-6
    lo, hi = th.binomial_interval(n, p, alpha)
    assert stats.binom.cdf(lo - 1, n, p) <= alpha / 2 < stats.binom.cdf(lo, n, p)
    assert stats.binom.sf(hi, n, p) <= alpha / 2 < stats.binom.sf(hi - 1, n, p)


def test_per_check_alpha():
    assert th.per_check_alpha(50) == pytest.approx(2e-8)
    with pytest.raises(ValueError):
        th.per_check_alpha(0)


# ---- checks against scipy --------------------------------------------------------------------

@pytest.fixture(scope="module")
def normals():
    return torch.randn(200_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def test_ks_statistic_matches_scipy(normals):
    result = ck.ks_normal("ks", normals, 1e-6)
    ref = stats.kstest(normals.numpy(), "norm")
    assert result.statistic == pytest.approx(ref.statistic, rel=1e-9)
    assert result.p_value == pytest.approx(ref.pvalue, rel=1e-6)
    u = torch.special.ndtr(normals)
    assert ck.ks_uniform("u", u, 1e-6).statistic == pytest.approx(ref.statistic, rel=1e-9)
    r2 = normals.reshape(-1, 8).square().sum(1)
    assert ck.ks_chi2("c", r2, 8, 1e-6).statistic == pytest.approx(
        stats.kstest(r2.numpy(), stats.chi2(8).cdf).statistic, rel=1e-9)


def test_kurtosis_z_is_anscombe_glynn(normals):
    result = ck.kurtosis_z("k", normals, 1e-6)
    assert result.statistic == pytest.approx(stats.kurtosistest(normals.numpy()).statistic, rel=1e-9)


def test_skewness_and_correlation_match_definitions(normals):
    x = normals.numpy()
    g1 = stats.skew(x)
    n = x.size
    assert ck.skewness_z("s", normals, 1e-6).statistic == pytest.approx(
        g1 / math.sqrt(6 * (n - 2) / ((n + 1) * (n + 3))), rel=1e-9)
    a, b = normals[:100_000], normals[100_000:]
    r = stats.pearsonr(a.numpy(), b.numpy()).statistic
    assert ck.correlation_z("r", a, b, 1e-6).statistic == pytest.approx(r * math.sqrt(1e5), rel=1e-9)


def test_checks_see_what_they_should(normals):
    alpha = 3e-8
    assert ck.mean_z("m", normals, alpha).passed
    assert not ck.mean_z("m", normals + 0.02, alpha).passed
    assert ck.variance_chi2("v", normals, alpha).passed
    assert not ck.variance_chi2("v", normals * 1.02, alpha).passed
    assert not ck.correlation_z("r", normals[1:], normals[1:] + 0.1 * normals[:-1], alpha).passed
    x = normals.reshape(-1, 16)
    assert ck.per_coordinate_means("pm", x, torch.zeros(16), alpha).passed
    assert not ck.per_coordinate_means("pm", x + torch.eye(16)[3] * 0.1, torch.zeros(16), alpha).passed
    assert ck.per_coordinate_variances("pv", x, torch.zeros(16), alpha).passed
    assert not ck.per_coordinate_variances("pv", x * (1 + torch.eye(16)[5] * 0.1), torch.zeros(16),
                                           alpha).passed
    assert ck.across_chain_t("t", normals[:1000] * 0.1 + 0.5, 0.5, alpha).passed
    assert not ck.across_chain_t("t", normals[:1000] * 0.1 + 0.52, 0.5, alpha).passed


def test_non_finite_samples_fail(normals):
    bad = normals.clone()
    bad[7] = float("nan")
    for result in (ck.ks_normal("k", bad, 1e-6), ck.mean_z("m", bad, 1e-6),
                   ck.variance_chi2("v", bad, 1e-6), ck.kurtosis_z("q", bad, 1e-6),
                   ck.correlation_z("r", bad, normals, 1e-6),
                   ck.per_coordinate_means("pm", bad.reshape(-1, 8), torch.zeros(8), 1e-6),
                   ck.per_coordinate_variances("pv", bad.reshape(-1, 8), torch.zeros(8), 1e-6),
                   ck.across_chain_t("t", bad, 0.0, 1e-6)):
        assert not result.passed, result.name


def test_bits_equal_compares_bits():
    a = torch.tensor([0.0, 1.0])
    assert ck.bits_equal("eq", [a], [a.clone()], True).passed
    assert not ck.bits_equal("eq", [a], [torch.tensor([-0.0, 1.0])], True).passed
    assert ck.bits_equal("ne", [a], [torch.tensor([-0.0, 1.0])], False).passed
    assert not ck.bits_equal("ne", [a], [a.clone()], False).passed
