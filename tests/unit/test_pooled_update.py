"""The pooled_update op (a warm-up pooled over several processes applies it after each transition)
against Stan's adaptation written out (tests/unit/test_warmup.py's StanStepSize, the regularised
variance), and its argument checks. The op shares its update with the chain ops' pooled warm-up
(csrc/math/adaptation/warmup_update.h); test_distributed compares the two end to end."""
from __future__ import annotations

import math

import pytest
import torch

from fused_hmc import _build, ops

from ._windows_reference import MIN_RUN
from .test_warmup import StanStepSize

NUM_WARMUP, WINDOWS, TARGET = 40, [5, 5, 5], 0.8


def _state(device, dtype=torch.float64, dim=3):
    f64 = dict(dtype=torch.float64, device=device)
    return (torch.full((1,), 0.3, **f64), torch.zeros(1, 3, **f64),
            torch.full((1, dim), 0.8, dtype=dtype, device=device))


def _terms(value, device, chains=1.0):
    """The mean's summed terms (x, w) of `chains` chains that each accepted with `value`."""
    return torch.tensor([value * chains, chains], dtype=torch.float64, device=device)


@pytest.mark.parametrize("adapt_mass_matrix", [True, False])
def test_step_size_follows_stan_through_the_windows(device, adapt_mass_matrix):
    """Every iteration's step size is Stan's stepsize_adaptation's (restarted, with mu = log(10
    eps), after each slow window when the mass is adapted and MIN_RUN iterations follow: after 9,
    not after 34; exp(x_bar) after the last)."""
    step, averaging, inv_mass = _state(device)
    windows = []  # the slow windows' ends, from the C++ schedule the Python driver also reads
    for i in range(NUM_WARMUP):
        start, end = _build.bindings().slow_window_of(NUM_WARMUP, WINDOWS, i)
        if start >= 0 and i == end:
            windows.append(i)
    assert windows == [9, 34]  # init 5, a window of 5, then one of 10 stretched to 34 (Stan)
    stan = StanStepSize(TARGET, 0.3)
    stats = [0.5 + 0.45 * math.sin(i) for i in range(NUM_WARMUP)]
    for i, a in enumerate(stats):
        ops.pooled_update(step, averaging, inv_mass, _terms(a, device), None, 0.0, i, NUM_WARMUP,
                          WINDOWS, TARGET, True, adapt_mass_matrix)
        expected = stan.learn(a) if i < NUM_WARMUP - 1 else (stan.learn(a), math.exp(stan.x_bar))[1]
        assert step.item() == pytest.approx(expected, rel=1e-12), i
        if adapt_mass_matrix and i in windows and NUM_WARMUP - i - 1 >= MIN_RUN:
            stan.set_mu(step.item())
    assert torch.equal(inv_mass, torch.full_like(inv_mass, 0.8))  # no variance: mass untouched


@pytest.mark.parametrize("x, w, statistic", [
    (7 / 0.7, 7.0, 0.7),   # seven chains' harmonic mean 0.7 (x = sum of 1 / a)
    (5.0, 0.0, 0.0),       # every chain divergent: no weight
    (float("inf"), 4.0, 0.0),  # a chain that accepted with probability 0
    (2.0, 3.0, 0.0),       # w / x above 1: not a mean of probabilities
])
def test_harmonic_acceptance_takes_w_over_x(device, x, w, statistic):
    """With harmonic_acceptance the statistic is W / X, or 0 where that is not in [0, 1]
    (pooled_acceptance.h); the mean's terms (a, 1) give a."""
    stan = StanStepSize(TARGET, 0.3)
    step, averaging, inv_mass = _state(device)
    terms = torch.tensor([x, w], dtype=torch.float64, device=device)
    ops.pooled_update(step, averaging, inv_mass, terms, None, 0.0, 0, NUM_WARMUP, WINDOWS, TARGET,
                      True, True, harmonic_acceptance=True)
    assert step.item() == pytest.approx(stan.learn(statistic), rel=1e-12)
    mean_step = _state(device)
    ops.pooled_update(*mean_step, _terms(statistic, device, 7.0), None, 0.0, 0, NUM_WARMUP,
                      WINDOWS, TARGET, True, True)
    assert mean_step[0].item() == pytest.approx(step.item(), rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_inverse_mass_is_stans_regularised_variance(device, dtype):
    step, averaging, inv_mass = _state(device, dtype)
    variance = torch.tensor([2.0, 0.0, float("nan")], dtype=torch.float64, device=device)
    n = 35.0
    ops.pooled_update(step, averaging, inv_mass, _terms(0.8, device), variance, n, 9, NUM_WARMUP,
                      WINDOWS, TARGET, False, True)
    regularised = lambda v: (n / (n + 5)) * v + 1e-3 * (5 / (n + 5))  # noqa: E731
    expected = torch.tensor([regularised(2.0), regularised(0.0), 0.8], dtype=dtype)
    torch.testing.assert_close(inv_mass.cpu()[0], expected, rtol=1e-15, atol=0)  # NaN: kept
    assert step.item() == 0.3  # adapt_step_size=False


@pytest.mark.parametrize("change, exc, pattern", [
    (dict(inv_mass=torch.ones(2, 3)), ValueError, r"inv_mass must have shape \[1, dim\]"),
    (dict(step_size=torch.ones(2, dtype=torch.float64)), ValueError,
     r"step_size must have shape \[1\]"),
    (dict(dual_averaging=torch.zeros(1, 3)), TypeError, r"dual_averaging must be Double"),
    (dict(acceptance_terms=torch.ones(1, dtype=torch.float64)), ValueError,
     r"acceptance_terms must have shape \[2\]"),
    (dict(variance=torch.ones(4, dtype=torch.float64)), ValueError,
     r"variance must have shape \[3\]"),
    (dict(variance=torch.ones(3, dtype=torch.float64), variance_draws=1.0), ValueError,
     r"variance_draws must be the \(>= 2\) draws"),
    (dict(iteration=40), ValueError, r"iteration must be in \[0, 40\)"),
    (dict(windows=[5, 5]), ValueError, r"windows must be \[\]"),
    (dict(target_accept=1.0), ValueError, r"target_accept must be in \(0, 1\)"),
    (dict(chees=torch.zeros(8, dtype=torch.float64)), ValueError,
     r"chees and chees_sums come together .*got chees alone"),
    (dict(chees_sums=torch.zeros(2, dtype=torch.float64)), ValueError,
     r"chees and chees_sums come together .*got chees_sums alone"),
    (dict(chees=torch.zeros(7, dtype=torch.float64),
          chees_sums=torch.zeros(2, dtype=torch.float64)),
     ValueError, r"chees must have shape \[8\]"),
    (dict(chees=torch.zeros(8, dtype=torch.float64), chees_sums=torch.zeros(2)), TypeError,
     r"chees_sums must be Double"),
    (dict(chees=torch.zeros(8, dtype=torch.float64), chees_sums=torch.zeros(2, dtype=torch.float64),
          max_leapfrog_steps=0), ValueError, r"max_leapfrog_steps must be in \[1, 2\^31 - 1\]"),
])
def test_bad_arguments_are_named(change, exc, pattern):
    step, averaging, inv_mass = _state("cpu")
    args = dict(step_size=step, dual_averaging=averaging, inv_mass=inv_mass,
                acceptance_terms=_terms(0.7, "cpu"), variance=None, variance_draws=0.0, iteration=3,
                num_warmup=NUM_WARMUP, windows=WINDOWS, target_accept=TARGET,
                adapt_step_size=True, adapt_mass_matrix=True)
    before = [t.clone() for t in (step, averaging, inv_mass)]
    args.update(change)
    with pytest.raises(exc, match=pattern):
        ops.pooled_update(**args)
    assert all(torch.equal(a, b) for a, b in zip(before, (step, averaging, inv_mass)))
