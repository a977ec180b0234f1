"""Philox4x32-10 and the native noise stream, against Random123's known answers and numpy.

The C++ block function (csrc/math/rng/philox.h, through the test-only op
torch.ops.fused_hmc_testing.philox4x32) and the independent numpy implementation
(fused_hmc.philox_numpy) must both give the Random123 known answers and agree bit for bit on random
counters. The philox noise mode's momenta and uniforms must be curand's transforms of the documented
stream layout.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import fused_hmc
from fused_hmc import philox_numpy

from ._helpers import as_int64, randn, seeded_generator

# Random123 kat_vectors, philox4x32 with 10 rounds: (counter words, key words, output words).
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def _key(words) -> int:
    """Key words (k0, k1) -> the 64-bit key, k0 in the low half (curand: lo32(seed), hi32(seed))."""
    return words[0] | (words[1] << 32)


def _cpp_philox(counters_u32: np.ndarray, key: int, device) -> np.ndarray:
    counters = torch.from_numpy(np.ascontiguousarray(counters_u32, dtype=np.uint32).view(np.int32))
    out = fused_hmc.ops.philox4x32(counters.to(device), as_int64(key))
    assert out.dtype == torch.int32 and out.shape == counters.shape
    return out.cpu().numpy().view(np.uint32)


@pytest.mark.parametrize("kat", KNOWN_ANSWERS, ids=["zeros", "ones", "pi"])
def test_known_answers_cpp(device, kat):
    counter, key, expected = kat
    out = _cpp_philox(np.array([counter], dtype=np.uint32), _key(key), device)
    assert out[0].tolist() == list(expected)


@pytest.mark.parametrize("kat", KNOWN_ANSWERS, ids=["zeros", "ones", "pi"])
def test_known_answers_numpy(kat):
    counter, key, expected = kat
    out = philox_numpy.philox4x32_10(np.array([counter], dtype=np.uint32), _key(key))
    assert out.dtype == np.uint32 and out[0].tolist() == list(expected)


def test_cpp_and_numpy_agree_on_random_counters(device):
    rng = np.random.default_rng(20240611)
    counters = rng.integers(0, 2**32, size=(4096, 4), dtype=np.uint64).astype(np.uint32)
    keys = [0, 1, 2**32 - 1, 2**32, 2**63, 2**64 - 1] + rng.integers(0, 2**64, 6, np.uint64).tolist()
    for key in keys:
        np.testing.assert_array_equal(_cpp_philox(counters, int(key), device),
                                      philox_numpy.philox4x32_10(counters, int(key)))


def test_numpy_layout_helper_matches_curand_counter_layout():
    """Block n of subsequence s is counter (lo n, hi n, lo s, hi s)."""
    c = philox_numpy.curand_counters(np.array([0x0123456789ABCDEF]), np.array([0xFEDCBA9876543210]))
    assert c.tolist() == [[0x76543210, 0xFEDCBA98, 0x89ABCDEF, 0x01234567]]


# ---- curand's transforms, in numpy ---------------------------------------------------------------
_TWO_POW_32_INV = np.float32(2.3283064e-10)      # CURAND_2POW32_INV; exactly 2^-32
_TWO_POW_32_INV_2PI = np.float32(_TWO_POW_32_INV * np.float32(6.2831855))
assert float(_TWO_POW_32_INV) == 2.0 ** -32


def curand_uniform_f32(words: np.ndarray) -> np.ndarray:
    """fmaf(float(w), 2^-32, 2^-33) bit-exactly, with torch's 1.0 -> 0.0.

    float(w) has at most 24 significant bits, so float(w) * 2^-32 + 2^-33 = (2 m 2^k + 1) 2^-33 with
    2 m 2^k + 1 < 2^33: exact in float64. Rounding that exact value once to float32 is the FMA.
    """
    w = words.astype(np.float32).astype(np.float64)
    u = (w * 2.0 ** -32 + 2.0 ** -33).astype(np.float32)
    return np.where(u == np.float32(1.0), np.float32(0.0), u)


def curand_box_muller_f32(a: np.ndarray, b: np.ndarray):
    """curand's float32 Box-Muller of words (a, b) -> (a * s, b * s) in float64 arithmetic."""
    # u as in curand_uniform_f32 but without torch's 1.0 -> 0.0 (curand's log(1.0) = 0 stays)
    u = (a.astype(np.float32).astype(np.float64) * 2.0 ** -32 + 2.0 ** -33).astype(np.float32)
    c = np.float64(_TWO_POW_32_INV_2PI)
    v = (b.astype(np.float32).astype(np.float64) * c + c / 2).astype(np.float32)
    s = np.sqrt(-2.0 * np.log(u.astype(np.float64)))
    v = v.astype(np.float64)
    return np.sin(v) * s, np.cos(v) * s, s


def curand_box_muller_f64(block: np.ndarray):
    """curand's _curand_box_muller_double of one block (x, y, z, w) -> two float64 normals.

    zx = x ^ (y << 21) < 2^53 is exact; zx * 2^-53 is exact and adding 2^-54 rounds once, as the FMA.
    """
    x, y, z, w = (block[..., i].astype(np.uint64) for i in range(4))
    zx = x ^ (y << np.uint64(21))
    zy = z ^ (w << np.uint64(21))
    u = zx.astype(np.float64) * 2.0 ** -53 + 2.0 ** -54
    v = zy.astype(np.float64) * 2.0 ** -52 + 2.0 ** -53
    s = np.sqrt(-2.0 * np.log(u))
    return np.sin(np.pi * v) * s, np.cos(np.pi * v) * s, s


def expected_noise(seed: int, batch: int, transition: int, dim: int, dtype: torch.dtype):
    """(momentum [B, d] float64, uniform [B] float32, Box-Muller radius [B, d]) from numpy."""
    name = "float32" if dtype == torch.float32 else "float64"
    blocks = philox_numpy.stream_blocks(seed, np.arange(batch), transition, dim, name)
    momentum_blocks = blocks[:, :-1]
    if dtype == torch.float32:
        n0, n1, s01 = curand_box_muller_f32(momentum_blocks[..., 0], momentum_blocks[..., 1])
        n2, n3, s23 = curand_box_muller_f32(momentum_blocks[..., 2], momentum_blocks[..., 3])
        normals = np.stack([n0, n1, n2, n3], axis=-1)
        radius = np.stack([s01, s01, s23, s23], axis=-1)
    else:
        n0, n1, s = curand_box_muller_f64(momentum_blocks)
        normals, radius = np.stack([n0, n1], axis=-1), np.stack([s, s], axis=-1)
    momentum = normals.reshape(batch, -1)[:, :dim]
    radius = radius.reshape(batch, -1)[:, :dim]
    uniform = curand_uniform_f32(blocks[:, -1, 0])
    return momentum, uniform, radius


def momentum_tolerance(radius: np.ndarray, dtype: torch.dtype, device: torch.device) -> np.ndarray:
    """How far the kernel's normals may sit from the float64 numpy values, per element.

    float32, CPU: n = s sin(v). u and v are float32 (u bit-exact; v may differ by one ulp <= 2^-21
    because float64 + rounding to float32 can double-round where the kernel's FMA does not); logf,
    sqrtf, sinf/cosf and the product each add <= 1 ulp. So |dn| <= s (2^-21 + 2^-23) + |n| 2^-21,
    inside s * 2^-19. float32 on CUDA: __sincosf has absolute error 2^-21.41 on [-pi, pi] and is
    larger beyond (v reaches 2 pi): allow s * 2^-17. float64: u, v exact; sin(pi v) vs sincospi and
    log/sqrt/product within a few ulp of 1 times s <= 8.7: s * 2^-47.
    """
    if dtype == torch.float64:
        return radius * 2.0 ** -47
    return radius * (2.0 ** -17 if device.type == "cuda" else 2.0 ** -19)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("dim", [1, 3, 4, 5, 64, 129])
def test_native_stream_layout(device, dtype, dim):
    batch, seed, transition = 37, 0x5EED_0000_1234, 5
    q = randn(seeded_generator("layout", dim), batch, dim, dtype=dtype, device=device)
    mu = torch.zeros(dim, dtype=dtype, device=device)
    _, _, momentum, uniform = fused_hmc.ops.transition(
        q, mu, 0.1, 3, "philox", None, seed, transition, trace=True)
    assert momentum.dtype == dtype and momentum.shape == (batch, dim)
    assert uniform.dtype == torch.float32 and uniform.shape == (batch,)
    want_momentum, want_uniform, radius = expected_noise(seed, batch, transition, dim, dtype)
    got = momentum.cpu().double().numpy()
    err = np.abs(got - want_momentum)
    tol = momentum_tolerance(radius, dtype, device)
    worst = np.unravel_index(np.argmax(err - tol), err.shape)
    assert (err <= tol).all(), f"momentum {worst}: {got[worst]} vs {want_momentum[worst]}"
    np.testing.assert_array_equal(uniform.cpu().numpy(), want_uniform)


def test_uniform_upper_bound_maps_to_zero(device):
    """A last-block word >= 0xFFFFFF80 makes curand's uniform 1.0f; torch (and we) map it to 0.0.

    Transition 26764342 of chain 0 under seed 0 (key philox_key_from_seed(0); d = 1, so block 2 t + 1
    holds the uniform in both dtypes) is such a draw, found by search; the uniform 0 then clamps to
    1e-10 and accepts.
    """
    transition = 26764342
    word = philox_numpy.stream_blocks(0, np.arange(1), transition, 1, "float32")[0, -1, 0]
    assert word >= 0xFFFFFF80
    assert curand_uniform_f32(np.array([word]))[0] == 0.0
    for dtype in (torch.float32, torch.float64):
        q = torch.full((1, 1), 30.0, dtype=dtype, device=device)  # huge energy: rejects unless u tiny
        mu = torch.zeros(1, dtype=dtype, device=device)
        _, accepted, _, uniform = fused_hmc.ops.transition(
            q, mu, 0.9, 1, "philox", None, 0, transition, trace=True)
        assert uniform.item() == 0.0
        assert accepted.item()


def test_same_seed_and_transition_same_outputs(device):
    q = randn(seeded_generator("repro"), 64, 10, device=device)
    mu = torch.zeros(10, device=device)
    first = fused_hmc.ops.transition(q, mu, 0.37, 4, "philox", None, 11, 3, trace=True)
    second = fused_hmc.ops.transition(q, mu, 0.37, 4, "philox", None, 11, 3, trace=True)
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    plain = fused_hmc.hmc_step(q, mu, step_size=0.37, num_leapfrog_steps=4, rng="philox", seed=11,
                               transition=3)
    assert torch.equal(plain[0], first[0]) and torch.equal(plain[1], first[1])


def test_different_transition_or_seed_different_noise(device):
    q = torch.zeros(64, 10, device=device)
    mu = torch.zeros(10, device=device)
    _, _, p0, u0 = fused_hmc.ops.transition(q, mu, 0.1, 1, "philox", None, 11, 0, trace=True)
    for seed, transition in ((11, 1), (11, 2**40), (12, 0)):
        _, _, p, u = fused_hmc.ops.transition(q, mu, 0.1, 1, "philox", None, seed,
                                                     transition, trace=True)
        assert (p != p0).all() and (u != u0).all()
    # no two chains share momenta either
    rows = p0.cpu()
    assert torch.unique(rows, dim=0).shape[0] == rows.shape[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_noise_does_not_depend_on_batch_size(device, dtype):
    gen = seeded_generator("batch-independence", dtype)
    q50 = randn(gen, 50, 7, dtype=dtype, device=device)
    mu = randn(gen, 7, dtype=dtype, device=device)
    big = fused_hmc.ops.transition(q50, mu, 0.37, 5, "philox", None, 2024, 9, trace=True)
    small = fused_hmc.ops.transition(q50[:5].clone(), mu, 0.37, 5, "philox", None, 2024,
                                           9, trace=True)
    for a, b in zip(big, small):
        assert torch.equal(a[:5], b)
