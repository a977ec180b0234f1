"""ESS / R-hat diagnostics against known answers, and the `fused-hmc sample` command."""
from __future__ import annotations

import numpy as np
import pytest
import torch

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
