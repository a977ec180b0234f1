"""ESS / R-hat diagnostics against known answers, and the `fused-hmc sample` command."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import fused_hmc
from fused_hmc import diagnostics
from fused_hmc.cli import main


def _iid(chains=8, draws=500, dim=3, seed=0):
    return np.random.default_rng(seed).standard_normal((chains, draws, dim))


def test_iid_draws_have_full_ess_and_unit_rhat():
    """8 chains x 500 iid N(0, 1) draws: ESS is about 4000 and R-hat about 1.

    Over 200 replicates the bulk ESS / 4000 had mean 0.996, SD 0.037; the tail ratio mean 0.971,
    SD 0.036; R-hat mean 1.0003, SD 0.0007. The bounds sit more than 6 SD away.
    """
    draws = _iid()
    n = draws.shape[0] * draws.shape[1]
    bulk, tail, r_hat = (diagnostics.ess_bulk(draws), diagnostics.ess_tail(draws),
                         diagnostics.rhat(draws))
    assert bulk.shape == tail.shape == r_hat.shape == (3,)
    assert np.all((bulk > 0.75 * n) & (bulk < 1.25 * n)), bulk
    assert np.all((tail > 0.75 * n) & (tail < 1.25 * n)), tail
    assert np.all(np.abs(r_hat - 1) < 0.006), r_hat


def test_chains_with_different_means_have_large_rhat():
    draws = _iid()
    draws[::2] += 3.0  # half the chains sample N(3, 1)
    assert np.all(diagnostics.rhat(draws) > 1.5)
    stuck = _iid()
    stuck[0] = stuck[0] * 0.05 + 10.0  # one chain stuck far away
    assert np.all(diagnostics.rhat(stuck) > 1.1)


def test_autocorrelated_draws_have_smaller_ess():
    """AR(1) with coefficient 0.9: integrated autocorrelation time 19, so ESS is near n / 19."""
    rng = np.random.default_rng(1)
    chains, draws_per_chain, rho = 8, 2000, 0.9
    x = np.empty((chains, draws_per_chain))
    x[:, 0] = rng.standard_normal(chains)
    noise = rng.standard_normal((chains, draws_per_chain)) * np.sqrt(1 - rho**2)
    for t in range(1, draws_per_chain):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    ess = diagnostics.ess_bulk(x)[0]
    n = chains * draws_per_chain
    assert 0.6 * n / 19 < ess < 1.5 * n / 19, ess


def test_inputs_torch_and_two_dimensional():
    draws = _iid(dim=2)
    as_torch = torch.from_numpy(draws).float()
    np.testing.assert_allclose(diagnostics.ess_bulk(as_torch), diagnostics.ess_bulk(
        draws.astype(np.float32)), rtol=1e-12)
    np.testing.assert_allclose(diagnostics.rhat(draws[:, :, 0]), diagnostics.rhat(draws)[:1])
    with pytest.raises(ValueError, match="chain, draw"):
        diagnostics.ess_bulk(np.zeros(5))


def test_diagnose_limits_chains_and_dims():
    draws = _iid(chains=10, draws=40, dim=6)
    diag = diagnostics.diagnose(torch.from_numpy(draws), max_chains=4, max_dims=2)
    assert (diag.chains, diag.draws) == (4, 40) and diag.r_hat.shape == (2,)
    np.testing.assert_allclose(diag.ess_bulk, diagnostics.ess_bulk(draws[:4, :, :2]))
    assert diag.max_r_hat == diag.r_hat.max() and diag.min_ess_tail == diag.ess_tail.min()


def test_diagnose_equals_arviz_stats_on_the_values_it_examines():
    """With a budget of values, diagnose takes the first chains (at least 2) and gives exactly
    arviz-stats' own bulk/tail ESS and rank R-hat of them."""
    import arviz_stats

    draws = _iid(chains=10, draws=40, dim=6)
    draws[:, :, 1] = np.round(draws[:, :, 1], 1)  # ties
    diag = diagnostics.diagnose(torch.from_numpy(draws), max_dims=4, max_values=4 * 40 * 4)
    assert (diag.chains, diag.draws, diag.r_hat.shape) == (4, 40, (4,))
    seen = draws[:4, :, :4]
    axes = dict(chain_axis=0, draw_axis=1)
    np.testing.assert_array_equal(diag.ess_bulk, arviz_stats.ess(seen, method="bulk", **axes))
    np.testing.assert_array_equal(diag.ess_tail, arviz_stats.ess(seen, method="tail", prob=0.05,
                                                                 **axes))
    np.testing.assert_array_equal(diag.r_hat, arviz_stats.rhat(seen, method="rank", **axes))
    assert diagnostics.diagnose(draws, max_values=1).chains == 2  # R-hat needs two chains


def test_summary_at_the_readme_size_examines_a_bounded_number_of_values(monkeypatch, capsys):
    """2048 chains x 1000 draws x 64 dims (the README's run) took 145 s: arviz-stats costs about 2
    s per million values. summary() now hands arviz-stats at most SUMMARY_VALUES values per
    estimator (arviz's calls are replaced by recorders, so the test itself stays cheap)."""
    import arviz_stats

    chains, draws, dim = 2048, 1000, 64
    base = torch.randn(1, draws, dim, generator=torch.Generator().manual_seed(0))
    zeros = torch.zeros(chains, dim, dtype=torch.float64)
    res = fused_hmc.SampleResult(
        samples=base.expand(chains, draws, dim), mean=zeros, var=zeros + 1,
        accept_count=torch.zeros(chains, dtype=torch.int64), accept_rate=zeros[:, 0] + 1,
        mean_accept_prob=zeros[:, 0] + 1, num_transitions=draws, num_kept=draws,
        final_state=zeros.float(), seed=0, next_transition=draws, interrupted=False, thin=1,
        chain_offset=0)
    examined = []

    def recorder(values, **kwargs):
        examined.append(values.size)
        return np.ones(values.shape[2])

    monkeypatch.setattr(arviz_stats, "ess", recorder)
    monkeypatch.setattr(arviz_stats, "rhat", recorder)
    res.summary()
    assert len(examined) == 3 and max(examined) <= diagnostics.SUMMARY_VALUES, examined
    assert "first 40 of 64 dims (25 of 2048 chains x 1000 draws)" in capsys.readouterr().out


def test_pooled_moments_match_all_draws():
    draws = _iid(chains=5, draws=30, dim=2) + np.arange(5)[:, None, None] * 0.1
    mean, sd = diagnostics.pooled_moments(draws.mean(axis=1), draws.var(axis=1, ddof=1), 30)
    flat = draws.reshape(-1, 2)
    np.testing.assert_allclose(mean, flat.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(sd, flat.std(axis=0, ddof=1), rtol=1e-12)


def test_cli_sample_reports(capsys):
    code = main(["sample", "--chains", "64", "--dim", "8", "--samples", "40", "--warmup", "5",
                 "--thin", "2", "--device", "cpu", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    assert "5 warm-up (discarded) + 40 sampling, thin 2: 20 draws kept per chain" in out
    assert "acceptance rate" in out and "exact at stationarity" in out
    for word in ("mean", "variance", "ESS bulk / tail", "R-hat max", "transitions/s"):
        assert word in out, word


def test_cli_default_config_prints_the_exact_acceptance(capsys):
    assert main(["sample", "--chains", "16", "--samples", "4", "--device", "cpu",
                 "--no-progress"]) == 0
    assert "exact at stationarity 0.9933" in capsys.readouterr().out
