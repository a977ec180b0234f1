"""SampleResult.summary()'s table: every parameter up to max_rows (eight schools' mu and tau
included), var_names= by name or index, how many were left out, and arviz's ESS cap named.

The results are built by hand from seeded numpy draws (no kernel runs), the statistics of the
table checked against the draws themselves and arviz-stats' own estimators."""
from __future__ import annotations

import io
import math
import re

import numpy as np
import pytest
import torch

import fused_hmc
from fused_hmc import diagnostics

# Eight schools (non-centred): the 8 standardised effects, then mu and tau, as the library names
# them; a source that is never compiled (only its names are read).
NAMES = [f"theta_tilde[{j}]" for j in range(8)] + ["mu", "log_tau"]
SOURCE = ("template <typename T, typename Data> FUSED_HMC_HD T log_density(const T* x, "
          "const Data& data) { return -0.5 * x[0] * x[0]; }")
ROW = re.compile(r"^\s*(\S+)\s+([+-]\d+\.\d{4})\s+(\d+\.\d{4})\s+(\d+)(\*?)\s+(\d+)(\*?)\s+"
                 r"(\d+\.\d{4})$", re.M)


def _result(draws: np.ndarray, target=None) -> fused_hmc.SampleResult:
    """A result holding `draws` [chains, kept, dim] with their own Welford statistics."""
    samples = torch.from_numpy(draws)
    chains, kept, dim = samples.shape
    zeros = torch.zeros(chains, dtype=torch.float64)
    return fused_hmc.SampleResult(
        samples=samples, mean=samples.mean(1), var=samples.var(1), accept_count=
        torch.full((chains,), kept), accept_rate=zeros + 1, mean_accept_prob=zeros + 1,
        num_transitions=kept, num_kept=kept, final_state=samples[:, -1], seed=0,
        next_transition=kept, interrupted=False, thin=1, chain_offset=0, target=target)


def _summary(res, **kwargs) -> str:
    out = io.StringIO()
    res.summary(file=out, **kwargs)
    return out.getvalue()


def _rows(text: str) -> dict[str, tuple]:
    return {m[0]: m[1:] for m in ROW.findall(text)}


def _iid(chains=4, draws=100, dim=10, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(chains, draws, dim))


def test_every_parameter_of_eight_schools_is_shown_by_name():
    draws = _iid()
    res = _result(draws, fused_hmc.CppTarget(SOURCE, 10, names=NAMES))
    text = _summary(res)
    rows = _rows(text)
    assert list(rows) == NAMES, text
    flat = draws.reshape(-1, 10)
    for j, name in enumerate(NAMES):  # the pooled moments of the draws themselves
        assert float(rows[name][0]) == pytest.approx(flat[:, j].mean(), abs=6e-5)
        assert float(rows[name][1]) == pytest.approx(flat[:, j].std(ddof=1), abs=6e-5)
    assert int(rows["mu"][2]) == round(diagnostics.ess_bulk(draws[:, :, 8:9])[0])
    assert "not shown" not in text and "all 10 parameters (4 chains x 100 draws)" in text


def test_var_names_chooses_rows_by_name_or_index_in_that_order():
    draws = _iid()
    res = _result(draws, fused_hmc.CppTarget(SOURCE, 10, names=NAMES))
    text = _summary(res, var_names=["mu", 9, "theta_tilde[0]"])
    rows = _rows(text)
    assert list(rows) == ["mu", "log_tau", "theta_tilde[0]"], text
    assert "(7 more parameters not shown)" in text and "3 of 10 parameters" in text
    # The ESS / R-hat of each row is its own dimension's (not the first three dims').
    assert float(rows["log_tau"][6]) == pytest.approx(diagnostics.rhat(draws[:, :, 9])[0],
                                                      abs=6e-5)
    for bad, says in ((["sigma"], "'sigma' is not"), ([10], "10 is not"),
                      (["mu", 8], "distinct"), ([], "at least one")):
        with pytest.raises(ValueError, match=says):
            _summary(res, var_names=bad)


def test_max_rows_bounds_the_table_and_says_how_many_were_left_out():
    res = _result(_iid(dim=50))
    assert len(_rows(_summary(res))) == diagnostics.SUMMARY_ROWS == 40
    text = _summary(res, max_rows=3)
    assert list(_rows(text)) == ["0", "1", "2"]
    assert "(47 more dims not shown)" in text and "first 3 of 50 dims" in text
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="max_rows"):
            _summary(res, max_rows=bad)


def _antithetic(chains=4, draws=200, dim=2, phi=-0.9, seed=1) -> np.ndarray:
    """AR(1) chains with coefficient phi < 0: autocorrelation time (1 + phi) / (1 - phi) = 0.05,
    below arviz's floor 1 / log10 N (0.34 for N = 800), so every ESS is at the cap N log10 N."""
    rng = np.random.default_rng(seed)
    x = np.empty((chains, draws, dim))
    x[:, 0] = rng.normal(size=(chains, dim))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + math.sqrt(1 - phi ** 2) * rng.normal(size=(chains, dim))
    return x


def test_an_ess_at_arviz_cap_is_marked_and_the_cap_named():
    draws = _antithetic()
    n = draws.shape[0] * draws.shape[1]
    cap = n * math.log10(n)
    assert diagnostics.ess_bulk(draws) == pytest.approx(cap, rel=1e-9)  # arviz's own figure
    text = _summary(_result(draws))
    rows = _rows(text)
    assert all(row[3] == "*" for row in rows.values()), text  # ess_bulk marked
    assert f"* ESS at arviz-stats' cap N log10 N = {cap:,.0f} (N = {n:,} draws" in text
    plain = _summary(_result(_iid(dim=2)))  # iid: ESS near N, far below N log10 N
    assert "*" not in plain and "cap" not in plain


@pytest.mark.slow  # builds the library's eight schools on first use (shared with test_cli_models)
def test_model_run_in_superchains_prints_the_nested_r_hat(capsys):
    from fused_hmc import cli

    code = cli.main(["sample", "--model", "eight_schools", "--chains", "8", "--superchains", "2",
                     "--samples", "20", "--warmup", "20", "--device", "cpu", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    line = re.search(r"^nested R-hat\s+max (\d+\.\d{4})  \(first 2 superchains x 4 chains\)$",
                     out, re.M)
    assert line is not None, out
    assert "    tau " in out  # the constrained parameters' table comes first


def test_cli_names_the_cap_when_the_minimum_ess_is_at_it(capsys):
    """eps = 1.1, L = 3 on N(0, I): trajectories of length 3.3, about half a period, so draws
    alternate in sign and every bulk ESS is at the cap."""
    from fused_hmc import cli

    assert cli.main(["sample", "--chains", "8", "--dim", "2", "--samples", "200", "--step-size",
                     "1.1", "--leapfrog", "3", "--no-progress", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    n = 8 * 200
    assert re.search(rf"^ESS bulk / tail\s+min {n * math.log10(n):.0f} /", out, re.M), out
    assert f"ESS at arviz-stats' cap N log10 N = {n * math.log10(n):,.0f} (N = 1,600" in out
