"""Chains that never move: sample() warns (StuckChainsWarning) and the CLI prints a warning,
naming how many chains and which; a healthy run warns of nothing.

Stuck chains are forced deterministically: N(0, diag(1e-6)) with a per-chain step size, 0.5 for
some chains (500 standard deviations: the leapfrog map is unstable beyond eps / sd = 2, the
energy error grows like 500^(2L), so every proposal is rejected) and 1e-4 for the others (eps / sd
= 0.1: the energy error is of order 1e-4, every proposal all but surely accepted)."""
from __future__ import annotations

import warnings

import pytest
import torch

import fused_hmc
from fused_hmc import cli
from fused_hmc.sampling import stuck_chains

CHAINS, SAMPLES = 8, 30
STUCK = [2, 5]
TARGET = fused_hmc.DiagonalGaussian(torch.zeros(2), torch.full((2,), 1e-3))


def _q0() -> torch.Tensor:
    return 1e-3 * torch.randn(CHAINS, 2, generator=torch.Generator().manual_seed(3),
                              dtype=torch.float64)


def _steps(stuck=STUCK) -> torch.Tensor:
    step = torch.full((CHAINS,), 1e-4, dtype=torch.float64)
    step[stuck] = 0.5
    return step


def _sample(step, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fused_hmc.sample(_q0(), SAMPLES, step_size=step, num_leapfrog_steps=3,
                               target=TARGET, seed=7, progress=False, **kwargs)
    return res, [w for w in caught if issubclass(w.category, fused_hmc.StuckChainsWarning)]


def test_sample_warns_of_the_chains_that_never_moved():
    res, caught = _sample(_steps())
    assert (res.accept_count == 0).nonzero().flatten().tolist() == STUCK  # the setup holds
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "2 of 8 chains accepted none of their 30 sampling transitions (chains 2, 5)" in message
    assert "num_warmup" in message and caught[0].filename == __file__  # the caller's line


def test_a_healthy_run_warns_of_nothing():
    res, caught = _sample(_steps(stuck=[]))
    assert bool((res.accept_count > 0).all()) and caught == []


def test_chain_ids_are_global_and_few_are_named():
    res, _ = _sample(_steps(stuck=list(range(7))), chain_offset=100)
    ids = stuck_chains.stuck_chain_ids(res)
    assert ids == list(range(100, 107))
    assert "(chains 100, 101, 102, 103, 104, ...)" in stuck_chains.describe(res, ids, "x")


def test_short_runs_are_not_judged():
    """Below MIN_TRANSITIONS a healthy chain rejects every proposal too often to warn."""
    res, _ = _sample(_steps())
    short = res._replace(num_transitions=stuck_chains.MIN_TRANSITIONS - 1)
    assert stuck_chains.stuck_chain_ids(short) == []


def test_cli_warns_of_stuck_chains(capsys):
    code = cli.main(["sample", "--target", "diagonal", "--scale", "0.001", "--step-size", "0.5",
                     "--leapfrog", "3", "--chains", "4", "--dim", "2", "--samples", "30",
                     "--no-progress", "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 0
    assert ("fused-hmc sample: warning: 4 of 4 chains accepted none of their 30 sampling "
            "transitions (chains 0, 1, 2, 3)") in err and "--warmup" in err, err


def test_cli_healthy_run_has_no_stuck_warning(capsys):
    assert cli.main(["sample", "--chains", "4", "--dim", "2", "--samples", "30",
                     "--no-progress", "--device", "cpu"]) == 0
    assert "accepted none" not in capsys.readouterr().err


@pytest.mark.parametrize("pooled, says", [(True, "per-chain warm-up (pooled=False"),
                                          (False, "longer num_warmup")])
def test_the_remedy_follows_the_warmup(pooled, says):
    res, _ = _sample(_steps())
    settings = fused_hmc.sampling.warmup.WarmupSettings(50, None, True, True, pooled)
    assert says in stuck_chains.remedy(res._replace(warmup=settings, num_warmup=50), cli=False)
