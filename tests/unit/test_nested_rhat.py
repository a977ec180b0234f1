"""Superchains and nested R-hat (Margossian et al. 2024): ``superchains=K`` starts each group of
chains from one shared point, ``summary()`` reports arviz-stats' ``rhat_nested`` of those groups,
and the setting survives save/load, checkpoints and the CLI. CPU, small sizes."""
from __future__ import annotations

import io
import math
import re

import arviz_stats
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from scipy.stats import chi2

import fused_hmc
from fused_hmc import cli, diagnostics
from fused_hmc.sampling.superchains import superchain_starts

SMALL = dict(seed=11, progress=False)


def _q0(chains, dim, scale=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return scale * torch.randn(chains, dim, dtype=torch.float64, generator=gen)


def _ids(chains, superchains):
    return np.repeat(np.arange(superchains), chains // superchains)


@settings(max_examples=25, deadline=None)
@given(superchains=st.integers(2, 6), size=st.integers(1, 5), dim=st.integers(1, 3))
def test_superchain_starts_repeat_each_groups_first_row(superchains, size, dim):
    q0 = _q0(superchains * size, dim)
    before = q0.clone()
    starts = superchain_starts(q0, superchains)
    assert torch.equal(q0, before)  # a new tensor
    for b in range(superchains * size):
        assert torch.equal(starts[b], q0[(b // size) * size]), b


def test_sampler_starts_every_chain_of_a_superchain_at_one_point():
    q0 = _q0(12, 3)
    sampler = fused_hmc.Sampler(q0, superchains=3, **SMALL)
    start = sampler.result().final_state  # the state before transition 0 (public: no run yet)
    assert torch.equal(start, superchain_starts(q0, 3))
    assert torch.equal(start[0:4], q0[0].expand(4, 3)) and torch.equal(start[8:12],
                                                                       q0[8].expand(4, 3))
    res = sampler.run(5)
    assert res.superchains == 3
    assert not torch.equal(res.samples[0, 0], res.samples[1, 0])  # distinct philox streams
    plain = fused_hmc.Sampler(q0, **SMALL).result()
    assert plain.superchains is None and torch.equal(plain.final_state, q0)


def test_summary_nested_r_hat_is_arviz_stats_rhat_nested():
    q0 = _q0(32, 2, scale=3.0)
    res = fused_hmc.sample(q0, 40, superchains=4, step_size=0.3, num_leapfrog_steps=3, **SMALL)
    draws = res.samples.numpy()
    expected = arviz_stats.rhat_nested(draws, superchain_ids=_ids(32, 4), method="rank",
                                       chain_axis=0, draw_axis=1)
    diag = diagnostics.diagnose(res.samples, superchains=4)
    np.testing.assert_array_equal(diag.nested_r_hat, expected)
    assert (diag.chains, diag.superchains) == (32, 4)
    out = io.StringIO()
    res.summary(file=out)
    found = re.search(r"max nested r_hat (\S+) \(4 superchains x 8 chains\)", out.getvalue())
    assert found, out.getvalue()
    assert found.group(1) == f"{np.max(expected):.4f}"
    # split R-hat is still there, as without superchains
    assert f"max r_hat {np.max(diagnostics.rhat(draws)):.4f}" in out.getvalue()
    assert "nested" not in _summary(fused_hmc.sample(q0, 40, **SMALL))


def _summary(res) -> str:
    out = io.StringIO()
    res.summary(file=out)
    return out.getvalue()


def test_budget_takes_the_first_chains_of_every_superchain():
    draws = np.random.default_rng(3).normal(size=(24, 10, 2))
    # 6 superchains of 4; a budget of 12 chains: the first 2 chains of each superchain
    diag = diagnostics.diagnose(torch.from_numpy(draws), superchains=6, max_values=12 * 10 * 2)
    chosen = draws.reshape(6, 4, 10, 2)[:, :2].reshape(12, 10, 2)
    np.testing.assert_array_equal(diag.nested_r_hat, arviz_stats.rhat_nested(
        chosen, superchain_ids=_ids(12, 6), chain_axis=0, draw_axis=1))
    np.testing.assert_array_equal(diag.r_hat, diagnostics.rhat(chosen))
    assert (diag.chains, diag.superchains) == (12, 6)
    # fewer than one chain per superchain fits: the first chain of the first superchains (>= 2)
    diag = diagnostics.diagnose(draws, superchains=6, max_values=3 * 10 * 2)
    assert (diag.chains, diag.superchains) == (3, 3)
    np.testing.assert_array_equal(diag.nested_r_hat, arviz_stats.rhat_nested(
        draws[[0, 4, 8]], superchain_ids=[0, 1, 2], chain_axis=0, draw_axis=1))


def test_nested_r_hat_near_one_at_stationarity():
    """N(0, I) with trajectory length pi / 2 (eps = pi / 20, L = 10): the exact flow rotates
    (q, p) by pi / 2, so each draw is (up to leapfrog error, ~1e-3) independent of the last and of
    the shared start. The rank-normalised z-values are then about iid N(0, 1), M N = 1600 per
    superchain, so R_nu^2 - 1 = B_nu / W_nu ~ chi2_{K-1} / ((K - 1) M N). Over 2 dims x (bulk,
    folded) = 4 statistics, the union bound puts the 1 - 1e-6 / 4 quantile at R_nu^2 - 1 =
    chi2.isf(2.5e-7, 7) / (7 * 1600) = 0.0037; the bound allows 1.5 times that (the ranks and the
    split are approximations), R_nu < 1.0028."""
    K, M, N = 8, 8, 200
    res = fused_hmc.sample(_q0(K * M, 2), N, superchains=K, step_size=math.pi / 20,
                           num_leapfrog_steps=10, **SMALL)
    nested = diagnostics.diagnose(res.samples, superchains=K).nested_r_hat
    bound = math.sqrt(1 + 1.5 * chi2.isf(1e-6 / 4, K - 1) / ((K - 1) * M * N))
    assert np.all(nested < bound), (nested, bound)


def test_nested_r_hat_flags_superchains_started_apart():
    """4 superchains started at 0, 10, 20, 30 on N(0, I), 8 short transitions (eps 0.05, L = 2:
    trajectory 0.1, each moves by about 0.1 sd per transition): the superchains stay apart, so the
    ranks fall in 4 separated blocks, whose rank-normalised nested R-hat is about 2.8 (2.78 from
    arviz-stats on 4 x 4 chains of 8 draws holding 4 blocks of shuffled ranks); it must exceed 2,
    far above the 1.01 at which chains would pass."""
    K, M = 4, 4
    q0 = 10.0 * (torch.arange(K * M, dtype=torch.float64) // M).reshape(-1, 1).expand(-1, 2)
    res = fused_hmc.sample(q0.contiguous(), 8, superchains=K, step_size=0.05,
                           num_leapfrog_steps=2, **SMALL)
    diag = diagnostics.diagnose(res.samples, superchains=K)
    assert np.all(diag.nested_r_hat > 2), diag.nested_r_hat


@pytest.mark.parametrize("value, error", [
    ("4", TypeError), (4.0, TypeError), (True, TypeError), (1, ValueError), (0, ValueError),
    (-2, ValueError), (5, ValueError), (32, ValueError)])
def test_bad_superchains_raises_naming_it(value, error):
    with pytest.raises(error, match="superchains"):
        fused_hmc.Sampler(_q0(16, 2), superchains=value, **SMALL)
    with pytest.raises(error, match="superchains"):
        fused_hmc.sample(_q0(16, 2), 4, superchains=value, **SMALL)


def test_superchains_go_with_pooled_warmup_and_one_chain_each():
    q0 = _q0(8, 2)
    sampler = fused_hmc.Sampler(q0, superchains=8, num_warmup=100, pooled=True, **SMALL)
    assert torch.equal(sampler.result().final_state, q0)  # one chain per superchain: q0 as given
    res = sampler.run(10)
    assert res.superchains == 8 and res.num_kept == 10 and bool((res.accept_rate > 0).all())
    assert "max nested r_hat" in _summary(res)


def test_save_load_and_checkpoint_keep_superchains(tmp_path):
    res = fused_hmc.sample(_q0(8, 2), 6, superchains=2, **SMALL)
    res.save(tmp_path / "run")
    assert fused_hmc.load(tmp_path / "run").superchains == 2
    fused_hmc.sample(_q0(8, 2), 6, **SMALL).save(tmp_path / "plain")
    assert fused_hmc.load(tmp_path / "plain").superchains is None

    path = tmp_path / "ck"
    first = fused_hmc.Sampler(_q0(8, 2), superchains=2, checkpoint=path, **SMALL)
    mid = first.run(4)
    resumed = fused_hmc.Sampler.from_checkpoint(path)
    assert resumed.superchains == 2
    # the checkpoint's state is the chains' state, not regrouped into shared starts
    assert torch.equal(resumed.result().final_state, mid.final_state)
    a, b = first.run(3), resumed.run(3)
    assert torch.equal(a.samples, b.samples) and b.superchains == 2


def _cli(capsys, *argv):
    code = cli.main(["sample", "--chains", "16", "--dim", "2", "--samples", "20", "--device",
                     "cpu", "--no-progress", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_superchains_reports_nested_r_hat(capsys):
    code, out, err = _cli(capsys, "--superchains", "4")
    assert code == 0, err
    found = re.search(r"nested R-hat +max (\S+) +\(first 4 superchains x 4 chains\)", out)
    assert found, out
    assert 0.9 < float(found.group(1)) < 2
    code, out, _ = _cli(capsys)
    assert code == 0 and "nested" not in out


@pytest.mark.parametrize("value", ["3", "1", "two"])
def test_cli_bad_superchains_is_one_line_naming_it(capsys, value):
    code, out, err = _cli(capsys, "--superchains", value)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--superchains" in lines[0], err
