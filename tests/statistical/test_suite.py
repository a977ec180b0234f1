"""The statistical validation suite passes on every device (quick sizes on CPU, full on CUDA).

Seeds are fixed, so a run is deterministic on CPU; a correct sampler fails the suite with
probability below 1e-6 for a random seed (see fused_hmc/validation/thresholds.py).
"""
from __future__ import annotations

import pytest

from fused_hmc import cli
from fused_hmc.validation import report, suite
from fused_hmc.validation.checks import CheckResult


def test_suite_passes(device):
    result = suite.run_suite(device, quick=device.type == "cpu")
    table = report.format_table(result.results, details=True)
    print("\n" + table + "\n" + suite.describe_budget(result) + f"\n{result.seconds}")
    assert result.passed, f"{report.format_summary(result.results)}\n{table}"
    assert sum(r.alpha > 0 for r in result.results) == len(suite.STATISTICAL_CHECKS)
    assert all(r.alpha == suite.ALPHA for r in result.results if r.alpha > 0)


def test_bonferroni_budget():
    assert suite.ALPHA * len(suite.STATISTICAL_CHECKS) == pytest.approx(1e-6)
    assert len(set(suite.STATISTICAL_CHECKS)) == len(suite.STATISTICAL_CHECKS)


def _fake_result(passed: bool):
    check = CheckResult("fake check", 1.0, "|z| < 5.5", 0.3 if passed else 1e-9, passed, "d",
                        suite.ALPHA)
    return suite.SuiteResult(None, suite.QUICK, [check], {"noise": 0.1}, suite.ALPHA)


@pytest.mark.parametrize("passed, code", [(True, 0), (False, 1)])
def test_validate_command_exit_code_and_table(monkeypatch, capsys, passed, code):
    seen = {}

    def fake_run_suite(device, config, progress):
        seen.update(device=device, config=config)
        return _fake_result(passed)

    monkeypatch.setattr(suite, "run_suite", fake_run_suite)
    assert cli.main(["validate", "--device", "cpu", "--quick", "--seed", "5"]) == code
    out = capsys.readouterr().out
    assert "fake check" in out and ("PASS" if passed else "FAIL") in out
    assert str(seen["device"]) == "cpu" and seen["config"].seed == 5
    assert seen["config"].noise_transitions == suite.QUICK.noise_transitions
