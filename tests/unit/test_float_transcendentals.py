"""csrc/math/fp/float_transcendentals.h: user models' float32 exp, log and log1p on the host, alone
(math/fp/scalar_functions.h) and in packs of chains (cpu/simd/pack_functions.h).

- Within an ulp of the true value everywhere, and correctly rounded on every input checked here
  (the float64 computation's error, about 1e-15 relative, is 2^-26 of a float32 ulp, so only an
  input whose true value lies that close to a midpoint could round the other way: none of these
  does). The reference is float64 numpy, within an ulp of float64 (2^-29 of a float32 ulp),
  rounded to float32; the 1-ulp bound is checked with a margin of 1e-6 ulp for it.
- C's specials: exp(inf) = inf, exp(-inf) = 0, overflow to inf and underflow to 0 at float32's
  limits; log(0) = -inf, log(x < 0) = NaN; log1p(-1) = -inf, log1p(x < -1) = NaN; NaN gives NaN.
- A pack of chains' lanes hold the scalar function's bits (NaN for NaN), so a model's draws do not
  depend on whether its chains ran in packs (tests/unit/test_vector_chains.py runs them).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fused_hmc import _build

NAMES = ("exp", "log", "log1p")
REFERENCE = {"exp": np.exp, "log": np.log, "log1p": np.log1p}


@pytest.fixture(scope="module")
def functions():
    _build.load_extension()
    return _build.bindings().target_float_functions


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    every_float = rng.integers(-2**31, 2**31 - 1, 1_000_000, dtype=np.int64).astype(np.int32)
    return np.concatenate([
        every_float.view(np.float32),  # random bit patterns: every sign, exponent and subnormals
        np.linspace(-110, 95, 100_001, dtype=np.float32),  # exp's range, past both limits
        np.linspace(-1, 4, 100_001, dtype=np.float32),  # log1p near -1 and log near 1
        (np.float32(2.0) ** np.arange(-149, 128, dtype=np.float64)).astype(np.float32),
        np.float32([np.sqrt(2), np.sqrt(0.5), 88.72, 88.73, -103.97, -103.98, 2**-30, -2**-30]),
    ]).astype(np.float32)


def _evaluate(functions, x: np.ndarray) -> np.ndarray:
    return functions(torch.from_numpy(x)).numpy()  # [6, N]: scalar exp log log1p, then packs


@pytest.mark.parametrize("f", range(3), ids=NAMES)
def test_within_an_ulp_and_correctly_rounded(functions, f):
    x = _inputs()
    got = _evaluate(functions, x)[f]
    with np.errstate(all="ignore"):
        exact = REFERENCE[NAMES[f]](x.astype(np.float64))
        rounded = exact.astype(np.float32)
    finite = np.isfinite(rounded)
    assert finite.sum() > 500_000
    spacing = np.spacing(np.abs(rounded[finite])).astype(np.float64)
    ulps = np.abs(got[finite].astype(np.float64) - exact[finite]) / spacing
    assert ulps.max() <= 1 + 1e-6
    assert np.array_equal(got[finite], rounded[finite])
    # everything else is a special: inf, -inf, or NaN, as float32 rounds the true value
    assert np.array_equal(got[~finite], rounded[~finite], equal_nan=True)


def test_specials(functions):
    inf, nan = np.inf, np.nan
    x = np.float32([0.0, -0.0, 1.0, -1.0, -2.0, inf, -inf, nan, 89.0, -104.5, 1e-45])
    got = _evaluate(functions, x)
    expect = {
        "exp": [1, 1, np.e, 1 / np.e, np.exp(-2.0), inf, 0, nan, inf, 0, 1],
        "log": [-inf, -inf, 0, nan, nan, inf, nan, nan, np.log(89.0), nan, np.log(1e-45)],
        "log1p": [0, -0.0, np.log(2.0), -inf, nan, inf, nan, nan, np.log(90.0), nan, 1e-45],
    }
    for f, name in enumerate(NAMES):
        want = np.float32(np.array(expect[name], dtype=np.float64)).astype(np.float32)
        want[-1] = np.float32(REFERENCE[name](np.float64(x[-1])))  # the subnormal input
        assert np.array_equal(got[f], want, equal_nan=True), name
    assert np.signbit(got[2][1])  # log1p(-0) = -0


@pytest.mark.parametrize("f", range(3), ids=NAMES)
def test_packs_hold_the_scalar_bits(functions, f):
    x = _inputs()
    got = _evaluate(functions, x)
    scalar, packed = got[f], got[3 + f]
    nan = np.isnan(scalar)
    assert np.array_equal(np.isnan(packed), nan)
    assert np.array_equal(scalar[~nan].view(np.int32), packed[~nan].view(np.int32))
