"""`fused-hmc sample|validate`: bad flags end in one line naming the flag (exit 2), every option the
API has is a documented flag, draws need not be kept, and degenerate runs warn. Run in-process on
CPU with small sizes."""
from __future__ import annotations

import argparse
import re

import pytest
import torch

from fused_hmc import cli
from fused_hmc.cli import diagnosed_draws

SMALL = ["--chains", "16", "--dim", "4", "--samples", "20", "--device", "cpu", "--no-progress"]


def _run(capsys, *argv):
    code = cli.main(["sample", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _figure(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, (pattern, text)
    return float(found.group(1))


@pytest.mark.parametrize("argv, flag", [
    (["--samples", "-1"], "--samples"),
    (["--samples", "many"], "--samples"),
    (["--dim", "-1"], "--dim"),
    (["--chains", "0"], "--chains"),
    (["--warmup", "-5"], "--warmup"),
    (["--thin", "0"], "--thin"),
    (["--leapfrog", "0"], "--leapfrog"),
    (["--step-size", "0"], "--step-size"),
    (["--step-size", "nan"], "--step-size"),
    (["--jitter", "1"], "--jitter"),
    (["--target-accept", "1"], "--target-accept"),
    (["--seed", "-1"], "--seed"),
    (["--scale", "0"], "--scale"),
    (["--scale", "2"], "--scale"),  # the standard target has no scale
    (["--target", "diagonal", "--scale", "1", "2", "3"], "--scale"),
    (["--correlation", "0.5"], "--correlation"),  # only a dense target has one
    (["--target", "dense", "--correlation", "-0.5"], "--correlation"),  # not positive definite
    (["--target", "dense", "--dim", "300"], "--dim"),
    (["--warmup", "10", "--adapt-windows", "5", "0", "5"], "--adapt-windows"),
    (["--dtype", "float16"], "--dtype"),
    (["--pooled-acceptance", "median"], "--pooled-acceptance"),
])
def test_bad_flag_is_one_line_naming_it_and_exit_2(capsys, argv, flag):
    code, out, err = _run(capsys, *SMALL, *argv)  # the last of a repeated flag counts
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fused-hmc sample: error: "), err
    assert flag in lines[0] and "Traceback" not in err, err
    assert "num_" not in lines[0] and "_size" not in lines[0], "API names, not flags: " + err


def test_cuda_without_a_gpu_is_a_flag_error(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for command in (["sample", *SMALL[:6], "--device", "cuda"], ["validate", "--device", "cuda"]):
        assert cli.main(command) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "argument --device: cuda requested" in err, err


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


@pytest.mark.parametrize("command", ["sample", "validate"])
def test_help_documents_every_flag_with_its_default(capsys, command):
    assert cli.main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for action in _subparsers()[command]._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{action.option_strings} has no help text"
        assert action.help.split("(")[0].strip()[:20] in text
        if action.default is not None:
            assert f"(default: {action.default})" in text, action.option_strings
        else:
            assert "default" in action.help, action.option_strings


def test_help_exposes_the_api_options_and_says_warmup_adapts(capsys):
    flags = {s for a in _subparsers()["sample"]._actions for s in a.option_strings}
    for flag in ("--target", "--mean", "--scale", "--correlation", "--target-accept", "--pooled",
                 "--jitter", "--step-size", "--leapfrog", "--thin", "--dtype",
                 "--adapt-step-size", "--no-adapt-mass-matrix", "--adapt-windows",
                 "--keep-samples", "--no-keep-samples", "--pooled-acceptance"):
        assert flag in flags, flag
    warmup = next(a for a in _subparsers()["sample"]._actions if "--warmup" in a.option_strings)
    assert "adapt" in warmup.help and "no adaptation" not in warmup.help


def test_warmup_adapts_toward_target_accept(capsys):
    """Pooled dual averaging on N(0, I_8) from eps0 = 0.1: aiming at acceptance 0.6 ends with a
    much larger step size than aiming at 0.99. For d = 8, L = 10 the exact stationary acceptance
    (validation.gaussian_exact) is 0.99 at eps 0.2 - 0.3, 0.93 at 0.5 and 0.73 at 1.0, so 0.6 needs
    eps > 1 and 0.99 eps < 0.4 (seeded run: 1.08 and 0.31)."""
    steps = {}
    for accept in ("0.6", "0.99"):
        code, out, _ = _run(capsys, *SMALL[:2], "--dim", "8", "--samples", "20", "--warmup",
                            "200", "--pooled", "--target-accept", accept, *SMALL[6:])
        assert code == 0 and "pooled adaptation toward acceptance" in out, out
        steps[accept] = _figure(r"step size ([\d.]+) \(range", out)
    assert steps["0.6"] > 2 * steps["0.99"] > 0.2, steps


def test_pooled_acceptance_harmonic_is_the_apis(capsys):
    """--pooled-acceptance harmonic is sample(pooled_acceptance="harmonic"), and says so."""
    argv = (*SMALL[:2], "--dim", "8", "--samples", "20", "--warmup", "200", "--pooled",
            "--pooled-acceptance", "harmonic", *SMALL[6:])
    code, out, _ = _run(capsys, *argv)
    assert code == 0 and "pooled adaptation toward harmonic mean acceptance 0.8" in out, out
    harmonic = _figure(r"step size ([\d.]+) \(range", out)
    code, out, _ = _run(capsys, *(a for a in argv if a not in ("--pooled-acceptance", "harmonic")))
    assert code == 0 and harmonic != _figure(r"step size ([\d.]+) \(range", out)


@pytest.mark.parametrize("target", [
    ["--target", "diagonal", "--scale", "0.5", "2", "--mean", "3"],
    ["--target", "dense", "--scale", "0.5", "2", "--correlation", "0.5", "--dtype", "float64"],
])
def test_other_targets_start_and_stay_at_the_target(capsys, target):
    """4096 chains x 100 draws started from the target: per-dimension mean error / sd and
    variance / truth. Along a principal direction of sd sigma one transition is close to an AR(1)
    with rho = cos(eps L / sigma) (the leapfrog rotation); the widest direction (sigma 2.2 for the
    dense target, 2 for the diagonal one) gives rho = 0.90, integrated autocorrelation time
    tau = (1 + rho) / (1 - rho) = 19 for x and (1 + rho^2) / (1 - rho^2) = 9.4 for x^2. So over
    409600 draws the mean error has SE <= sqrt(20 / 409600) = 0.007 sd and the variance ratio
    SE <= sqrt(2 * 10 / 409600) = 0.007; the bounds 0.05 and 0.06 are 7 and 8.6 SE (two-sided
    p < 2e-12 per dimension)."""
    code, out, err = _run(capsys, "--chains", "4096", "--dim", "4", "--samples", "100",
                          "--device", "cpu", "--no-progress", "--no-keep-samples", *target)
    assert code == 0, err
    assert _figure(r"largest \|\.\| over dims ([\d.]+)", out) < 0.05, out
    low = _figure(r"range over dims ([\d.]+) \.\.", out)
    high = _figure(r"range over dims [\d.]+ \.\. ([\d.]+)", out)
    assert 0.94 < low <= high < 1.06, out


def test_no_keep_samples_reports_the_same_diagnostics_from_the_same_chains(capsys):
    """Without kept draws, ESS / R-hat come from a re-run of the first chains with draws kept:
    chain b is the same philox chain, so with per-chain warm-up the figures equal those computed
    from the kept draws."""
    argv = ["--chains", "32", "--dim", "6", "--samples", "30", "--warmup", "40", "--thin", "2",
            "--jitter", "0.1", "--device", "cpu", "--no-progress"]
    reports = {}
    for keep in ("--keep-samples", "--no-keep-samples"):
        code, out, _ = _run(capsys, *argv, keep)
        assert code == 0
        reports[keep] = out
    ess = [re.search(r"ESS bulk / tail .*R-hat max [\d.]+", r).group(0) for r in reports.values()]
    assert ess[0] == ess[1], reports
    moments = [[line for line in r.splitlines() if line.startswith(("mean", "variance", "accept"))]
               for r in reports.values()]
    assert moments[0] == moments[1]
    assert "run again with draws kept" in reports["--no-keep-samples"]


def test_no_keep_samples_runs_where_keeping_every_draw_does_not_fit(capsys, monkeypatch):
    """With 20 kB free, keeping 64 x 40 x 8 float32 draws (80 kB) fails as a one-line error that
    points at --no-keep-samples; with it, the run keeps only the 2 diagnostic chains' draws."""
    from fused_hmc.sampling import resources

    monkeypatch.setattr(resources, "available_memory", lambda device: 20_000)
    monkeypatch.setattr(diagnosed_draws, "_DIAGNOSTIC_VALUES", 2 * 40 * 8)
    argv = ["--chains", "64", "--dim", "8", "--samples", "40", "--device", "cpu", "--no-progress"]
    code, _, err = _run(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--no-keep-samples" in err and "keep_samples" not in err, err
    code, out, err = _run(capsys, *argv, "--no-keep-samples")
    assert code == 0, err
    assert "first 2 chains x 40 draws" in out, out


def test_a_step_size_that_freezes_the_chains_warns(capsys):
    """eps = 3 > 2 makes the leapfrog unstable on N(0, I): every proposal is rejected."""
    code, out, err = _run(capsys, *SMALL, "--step-size", "3")
    assert code == 0
    assert "acceptance rate   0.0000" in out
    assert "warning: acceptance rate 0.0000" in err and "--step-size" in err, err
    assert "warning: R-hat max" in err, err


def test_thin_above_the_samples_warns_and_reports_no_nan(capsys):
    code, out, err = _run(capsys, *SMALL[:4], "--samples", "5", *SMALL[6:], "--thin", "10")
    assert code == 0
    assert "0 draws kept per chain" in out and "nan" not in out.lower(), out
    assert "warning: --thin 10 keeps none of the 5 sampling transitions" in err, err


def test_a_healthy_run_does_not_warn(capsys):
    code, out, err = _run(capsys, "--chains", "256", "--dim", "8", "--samples", "200",
                          "--device", "cpu", "--no-progress")
    assert code == 0 and err == "", err
    assert "exact at stationarity" in out


@pytest.mark.parametrize("step, divergent", [("0.1", 0), ("100", 16 * 20)])
def test_sample_reports_divergences(capsys, step, divergent):
    """The divergent sampling transitions of all chains: none at a small step on N(0, I); every
    one at a step of 100 (eps > 2 makes the leapfrog unstable: the energy error grows by about
    eps^2 = 1e4 per step over L steps, far past 1000)."""
    code, out, _ = _run(capsys, *SMALL, "--step-size", step)
    assert code == 0
    assert f"divergences {divergent} of {16 * 20} sampling transitions" in out
