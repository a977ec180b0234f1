"""csrc/math/fp/portable_math.h: exp and log from correctly rounded operations only (so the CPU and
CUDA builds return the same bits), against mpmath at 40 digits.

Bounds, the header's claims: float64 exp within 2 ulp of the true value, log within 3 (2.41 is the
worst seen, just above 1); float32 (rounded from the float64 result) within 1 ulp. Inputs: about 7,000 log-uniform and uniform points over each
function's whole range, plus the edges (0, 1, subnormals, overflow, infinities, NaN) and the neighbourhoods
where the reductions switch (x near 1 for log, x near multiples of ln 2 / 2 for exp).
"""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from fused_hmc import _build

mpmath.mp.dps = 40


@pytest.fixture(scope="module")
def functions():
    _build.load_extension()
    return _build.bindings()


def ulps(got: float, exact, spacing) -> float:
    return float(abs(mpmath.mpf(got) - exact) / mpmath.mpf(spacing))


def exp_points(rng) -> np.ndarray:
    wide = rng.uniform(-745.0, 709.7, 3000)
    small = np.concatenate([rng.uniform(-1, 1, 1000), 10.0 ** rng.uniform(-20, 0, 1000)])
    switches = (np.arange(-1100, 1100, 3) + 0.5) * math.log(2)
    switches = switches[(switches > -745) & (switches < 709.7)]
    return np.concatenate([wide, small, -small, np.nextafter(switches, 0), switches])


def log_points(rng) -> np.ndarray:
    wide = 10.0 ** rng.uniform(-307, 308, 3000)
    subnormal = rng.uniform(5e-324, 2.2e-308, 500)
    near_one = 1 + rng.choice([-1, 1], 3000) * 10.0 ** rng.uniform(-16, -1, 3000)
    switches = math.sqrt(0.5) * 2.0 ** np.arange(-1000, 1000, 5)
    return np.concatenate([wide, subnormal, near_one, switches, np.nextafter(switches, 0),
                           np.nextafter(switches, np.inf)])


def test_exp_within_2_ulp(functions):
    worst = 0.0
    for x in exp_points(np.random.default_rng(1)):
        got = functions.portable_exp(float(x))
        exact = mpmath.exp(mpmath.mpf(float(x)))
        worst = max(worst, ulps(got, exact, math.ulp(float(exact))))
    assert worst <= 2.0, worst


def test_log_within_3_ulp(functions):
    worst = 0.0
    for x in log_points(np.random.default_rng(2)):
        got = functions.portable_log(float(x))
        exact = mpmath.log(mpmath.mpf(float(x)))
        spacing = math.ulp(float(exact)) if float(exact) != 0 else 5e-324
        worst = max(worst, ulps(got, exact, spacing))
    assert worst <= 3.0, worst


def test_float32_within_1_ulp(functions):
    rng = np.random.default_rng(3)
    for x in np.float32(rng.uniform(-100.0, 80.0, 1000)):
        got = functions.portable_exp_f32(float(x))
        exact = mpmath.exp(mpmath.mpf(float(x)))
        assert ulps(got, exact, float(np.spacing(np.float32(float(exact))))) <= 1.0, x
    for x in np.float32(10.0 ** rng.uniform(-37, 38, 1000)):
        got = functions.portable_log_f32(float(x))
        exact = mpmath.log(mpmath.mpf(float(x)))
        assert ulps(got, exact, float(np.spacing(np.float32(float(exact))))) <= 1.0, x


def test_edges(functions):
    assert functions.portable_exp(0.0) == 1.0 and functions.portable_log(1.0) == 0.0
    assert functions.portable_exp(710.0) == math.inf and functions.portable_exp(-746.0) == 0.0
    assert functions.portable_exp(math.inf) == math.inf and functions.portable_exp(-math.inf) == 0
    assert functions.portable_log(0.0) == -math.inf and functions.portable_log(math.inf) == math.inf
    assert math.isnan(functions.portable_log(-1.0)) and math.isnan(functions.portable_exp(math.nan))
    assert math.isnan(functions.portable_log(math.nan))
    assert functions.portable_exp(-745.0) > 0  # subnormal, not flushed
    assert functions.portable_log(5e-324) == pytest.approx(math.log(5e-324), rel=1e-15)
