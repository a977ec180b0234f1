"""csrc/math/fp/host_transcendentals.h: the host build's float32 Box-Muller functions.

- libdevice_logf is CUDA's logf rewritten from IEEE operations: within 1 ulp of the true log
  (CUDA's documented bound for logf) on every input class, the specials as C's logf, and on a GPU
  bit for bit torch.log's (float32 log on CUDA is libdevice's logf).
- angle_sincos: sin and cos of an angle in [0, 2 pi] within 1 ulp of the true values.

The reference is float64 numpy (its log/sin/cos are within an ulp of float64, 2^-29 of a float32
ulp), so a 1-ulp bound on float32 results is checked with a margin of 1e-6 ulp for it.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fused_hmc import _build


@pytest.fixture(scope="module")
def functions():
    _build.load_extension()
    return _build.bindings()


def float32_ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the float32 spacing at exact (float64 arithmetic)."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing


def log_inputs() -> np.ndarray:
    rng = np.random.default_rng(1)
    # every 61st float32 of Box-Muller's domain (2^-33, 1], random floats over the whole positive
    # range, subnormals, and the neighbourhoods where the reduction switches (m = 2/3, 4/3)
    domain = np.arange(np.float32(2.0**-33).view(np.int32), np.float32(1.0).view(np.int32) + 1, 61,
                       dtype=np.int32).view(np.float32)
    wide = rng.integers(1, 0x7F800000, 300_000, dtype=np.int32).view(np.float32)
    switches = (np.float32(2 / 3) * np.float32(2.0) ** np.arange(-149, 128, dtype=np.float64)
                ).astype(np.float32)
    switches = switches[switches > 0]
    near = np.concatenate([switches, np.nextafter(switches, 0), np.nextafter(switches, np.inf)])
    near = near[near > 0]  # the step below the smallest subnormal is 0, a special (tested below)
    return np.concatenate([domain, wide, near]).astype(np.float32)


def test_libdevice_logf_within_one_ulp(functions):
    x = log_inputs()
    got = functions.libdevice_logf(torch.from_numpy(x)).numpy()
    exact = np.log(x.astype(np.float64))
    assert np.isfinite(got).all()
    worst = float32_ulps(got, exact).max()
    assert worst <= 1 + 1e-6, worst


def test_libdevice_logf_specials(functions):
    x = torch.tensor([0.0, -0.0, float("inf"), float("nan"), -1.0, -float("inf"), 1.0, 1e-45])
    got = functions.libdevice_logf(x)
    assert got[0] == -float("inf") and got[1] == -float("inf") and got[2] == float("inf")
    assert torch.isnan(got[3:6]).all()
    assert got[6] == 0.0
    assert float(got[7]) == pytest.approx(np.log(np.float64(np.float32(1e-45))), rel=1e-7)


def test_angle_sincos_within_one_ulp(functions):
    rng = np.random.default_rng(2)
    # Box-Muller's angles: the float32 grid of [0, 2 pi] sampled densely, plus the points where
    # the reduction's quadrant changes and the zeros of sin and cos, where errors are relative to
    # tiny values
    grid = rng.uniform(0, 2 * np.pi, 1_000_000).astype(np.float32)
    quarter = (np.arange(5) * (np.pi / 2)).astype(np.float32)
    eighth = (np.arange(1, 16, 2) * (np.pi / 4)).astype(np.float32)
    edges = np.concatenate([quarter, eighth])
    near = np.concatenate([edges + k * np.spacing(edges) for k in range(-64, 65)])
    v = np.concatenate([grid, near[(near >= 0) & (near <= np.float32(2 * np.pi))],
                        [np.float32(0.0), np.float32(2 * np.pi)]]).astype(np.float32)
    got = functions.angle_sincos(torch.from_numpy(v)).numpy()
    wide = v.astype(np.float64)
    for column, exact in ((0, np.sin(wide)), (1, np.cos(wide))):
        worst = float32_ulps(got[:, column], exact).max()
        assert worst <= 1 + 1e-6, (column, worst)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_libdevice_logf_is_cuda_logf(functions):
    x = log_inputs()
    host = functions.libdevice_logf(torch.from_numpy(x))
    device = torch.log(torch.from_numpy(x).cuda()).cpu()
    same = host.view(torch.int32) == device.view(torch.int32)
    assert same.all(), x[~same.numpy()][:10]
