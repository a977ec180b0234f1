"""validation.posteriordb.compare: the README's rule, its Bonferroni z, and its power, each against
a known answer or a probability derived here."""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from fused_hmc.validation.posteriordb import (PosteriorMismatchError, bonferroni_z, compare,
                                              compare_draws, load_reference)

EIGHT = "eight_schools-eight_schools_noncentered"
DIAMONDS = "diamonds-diamonds"


def test_bonferroni_z_known_answers():
    assert bonferroni_z(0.05, 1) == pytest.approx(1.959963984540054, rel=1e-14)
    for alpha, m in ((1e-6, 20), (1e-6, 52), (1e-3, 7)):
        with mpmath.workdps(40):  # 1 - alpha / m needs the digits erfinv amplifies near 1
            exact = float(mpmath.sqrt(2) * mpmath.erfinv(1 - mpmath.mpf(alpha) / m))
        assert bonferroni_z(alpha, m) == pytest.approx(exact, rel=1e-12)
    with pytest.raises(ValueError, match="alpha"):
        bonferroni_z(1.5, 3)


def test_reference_summaries_load():
    eight, dia = load_reference(EIGHT), load_reference(DIAMONDS)
    assert eight.parameters[-2:] == ("mu", "tau") and len(eight.parameters) == 10
    assert dia.parameters[-2:] == ("Intercept", "sigma") and len(dia.parameters) == 26
    assert eight.num_draws == dia.num_draws == 10_000
    assert eight.mean[-1] == pytest.approx(3.6020595236405932)
    # the summary's three columns are one sample's: sq_mean = mean^2 + sd^2 (n - 1) / n
    np.testing.assert_allclose(dia.sq_mean, dia.mean ** 2 + dia.sd ** 2 * 0.9999, rtol=1e-9)


def test_z_scores_follow_the_formula_exactly():
    ref = load_reference(EIGHT)
    ess = 2500.0
    err = np.sqrt(ref.sd ** 2 / ess + ref.sd ** 2 / ref.num_draws)
    means = ref.mean.copy()
    means[8] += 3 * err[8]  # mu, 3 Monte Carlo errors up
    report = compare(means, ref.sd, np.full(10, ess), ref)
    assert len(report.rows) == 20 and report.z_critical == bonferroni_z(1e-6, 20)
    mu_mean = next(r for r in report.rows if r.parameter == "mu" and r.statistic == "mean")
    assert mu_mean.z == pytest.approx(3.0, rel=1e-12)
    assert mu_mean.bound == pytest.approx(report.z_critical * err[8], rel=1e-12)
    assert report.passed and report.worst is mu_mean


def _iid_summary(ref, n, rng, shift=None, scale=None):
    draws = rng.normal(ref.mean, ref.sd, size=(n, len(ref.parameters)))
    if scale is not None:
        draws = ref.mean + (draws - ref.mean) * scale
    if shift is not None:
        draws = draws + shift
    return draws.mean(0), draws.std(0), np.full(len(ref.parameters), float(n)), (draws ** 2).var(0)


@pytest.mark.parametrize("name", [EIGHT, DIAMONDS])
def test_passes_on_draws_from_the_reference_normal(name):
    """iid N(m_ref, sd_ref^2) draws, ESS = n: every z is N(0, v) with v <= 1, so the report fails
    with probability <= alpha = 1e-6 (Bonferroni over its 2 P comparisons)."""
    ref = load_reference(name)
    means, sds, ess, sq_var = _iid_summary(ref, 10_000, np.random.default_rng(14))
    report = compare(means, sds, ess, ref, sq_var=sq_var)
    assert report.passed, report.message()
    report.raise_if_failed()


def test_fails_for_a_mean_shifted_by_ten_monte_carlo_errors():
    """mu shifted by 10 errors err = sd sqrt(1/n + 1/N_ref): z = 10 + e with e ~ N(0, r^2),
    r^2 = (1/n) / (1/n + 1/N_ref) = 1/2 at n = N_ref; it passes only if |z| <= z_c, probability
    Phi(-(10 - z_c) / r) + Phi(-(10 + z_c) / r), derived below (about 6e-11)."""
    ref = load_reference(EIGHT)
    n = 10_000
    z_c = bonferroni_z(1e-6, 20)
    r = math.sqrt(0.5)
    assert stats.norm.cdf(-(10 - z_c) / r) + stats.norm.cdf(-(10 + z_c) / r) < 1e-9
    shift = np.zeros(10)
    shift[8] = 10 * ref.sd[8] * math.sqrt(1 / n + 1 / ref.num_draws)
    means, sds, ess, sq_var = _iid_summary(ref, n, np.random.default_rng(15), shift=shift)
    report = compare(means, sds, ess, ref, sq_var=sq_var)
    assert not report.passed
    assert (report.worst.parameter, report.worst.statistic) == ("mu", "mean")
    with pytest.raises(PosteriorMismatchError, match=r"DISAGREES.*worst: mean of mu"):
        report.raise_if_failed()


def test_fails_for_an_sd_twenty_percent_too_wide():
    """mu's draws with sd 1.2 sd_ref: q_ours = mean(x^2) has mean m^2 + 1.44 sd^2 and sd
    sqrt(V'/n), V' = 4 m^2 s'^2 + 2 s'^4 (s' = 1.2 sd); without sq_var the error bar is the fixed
    err = sqrt(V (1/n + 1/N_ref)), V the Gaussian value at the reference moments. The check passes
    with probability Phi(-(d - z_c) / k) + Phi(-(d + z_c) / k), d = shift / err, k = sd(q)/err."""
    ref = load_reference(EIGHT)
    n, i = 10_000, 8
    m, s = ref.mean[i], ref.sd[i]
    z_c = bonferroni_z(1e-6, 20)
    err = math.sqrt((4 * m ** 2 * s ** 2 + 2 * s ** 4) * (1 / n + 1 / ref.num_draws))
    s2 = 1.2 * s
    d = (1.44 - 1) * s ** 2 / err
    k = math.sqrt((4 * m ** 2 * s2 ** 2 + 2 * s2 ** 4) / n) / err
    assert stats.norm.cdf(-(d - z_c) / k) + stats.norm.cdf(-(d + z_c) / k) < 1e-6
    scale = np.ones(10)
    scale[i] = 1.2
    means, sds, ess, _ = _iid_summary(ref, n, np.random.default_rng(16), scale=scale)
    report = compare(means, sds, ess, ref)
    failed = [(r.parameter, r.statistic) for r in report.rows if not r.passed]
    assert ("mu", "sq_mean") in failed


def test_compare_draws_from_chains_passes_on_reference_normal_draws():
    """Four chains of iid reference-normal draws through diagnostics.ess_mean: false failure
    probability <= 1e-6 as above (the estimated ESS is near 10,000)."""
    ref = load_reference(EIGHT)
    rng = np.random.default_rng(17)
    draws = rng.normal(ref.mean, ref.sd, size=(4, 2500, 10))
    report = compare_draws(draws, EIGHT)
    assert report.passed, report.message()


def test_bad_inputs_name_the_argument():
    ref = load_reference(EIGHT)
    good = dict(zip(ref.parameters, ref.mean))
    sds = dict(zip(ref.parameters, ref.sd))
    ess = dict.fromkeys(ref.parameters, 1000.0)
    compare(good, sds, ess, ref)
    with pytest.raises(ValueError, match=r"means: keys .* missing \['tau'\]"):
        compare({k: v for k, v in good.items() if k != "tau"}, sds, ess, ref)
    with pytest.raises(ValueError, match="ess must be finite and positive; mu"):
        compare(good, sds, {**ess, "mu": 0.0}, ref)
    with pytest.raises(ValueError, match="sds must have one value per reference parameter"):
        compare(ref.mean, ref.sd[:3], ref.mean, ref)
    with pytest.raises(TypeError, match="reference must be"):
        compare(ref.mean, ref.sd, ref.mean, 3)
    with pytest.raises(ValueError, match="unknown posteriordb posterior"):
        compare(ref.mean, ref.sd, ref.mean, "radon")
