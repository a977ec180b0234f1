"""Explicit seeds key streams disjoint from torch's generator streams (csrc/math/rng/stream_key.h).

torch's CUDA generator seeded with s keys Philox with s and gives element i of a fresh
``torch.randn`` (i below its thread count, >= 2048 on any GPU) lane 0 of block 0 of subsequence i.
The native stream's chain c, transition 0 is block 0 of subsequence c: keyed with the raw seed,
``hmc_step(seed=s)`` drew ``momentum[c, 0] == torch.randn(...).flatten()[c]`` after
``torch.cuda.manual_seed(s)``, and ``fused-hmc sample`` (which seeds its start and its sampler with
the same --seed) started every chain at its own first momentum. The seed is now mixed into the key.

Statistical thresholds (fixed seeds; a correct implementation fails each check with probability
below 1e-7):
- close pairs: for independent X, Y ~ N(0, 1), P(|X - Y| < t) <= 2 t / (2 sqrt(pi)) = 0.565 t. With
  t = 1e-4 and n <= 8192 pairs the count is Poisson-like with mean <= 0.47; P(count >= 8) < 1e-7.
  A stream keyed with the raw seed puts every pair within 6.8 * 2^-17 = 5.2e-5 (the largest
  Box-Muller radius times the CUDA normals' error bound, test_philox.momentum_tolerance).
- correlation: for independent pairs sqrt(n) r is asymptotically N(0, 1); |sqrt(n) r| < 5.5 fails
  with probability 3.8e-8.
- bit-equal float32 normals: P(X == Y) = sum_x p(x)^2 <= max density * largest spacing near the
  bulk, below 1e-7 per pair; among 2048 pairs P(3 or more) < 1e-12.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import fused_hmc
from fused_hmc import _build, cli, ops, philox_numpy

from ._helpers import as_int64

GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment
# The first outputs of Vigna's splitmix64.c from state 0: finalizer(k * GOLDEN), k = 1, 2, 3.
SPLITMIX64_FROM_ZERO = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
CLOSE = 1e-4
MAX_CLOSE = 7
MAX_ABS_Z = 5.5


def seeds_for_finalizer_inputs(words):
    """Seeds whose mixer input seed ^ domain is each word: the finalizer's known answers."""
    return [w ^ philox_numpy.EXPLICIT_SEED_DOMAIN for w in words]


def torch_cuda_randn_head(seed: int, n: int) -> np.ndarray:
    """Elements 0..n-1 of torch.randn(...) (float32) on CUDA right after manual_seed(seed), n <= the
    launch's thread count: Box-Muller lane 0 of block 0 of subsequence i under the raw key."""
    counters = philox_numpy.curand_counters(np.arange(n), np.zeros(n, dtype=np.uint64))
    block = philox_numpy.philox4x32_10(counters, seed)
    return philox_numpy.box_muller_float32(block[:, 0], block[:, 1])[0]


def first_blocks_normals(key: int, chains: int) -> tuple[np.ndarray, np.ndarray]:
    """(normals [chains, 4], Box-Muller radii [chains, 4]) of block 0 of subsequences 0..chains-1
    under `key` (float32 transforms): a chain's first four momenta at transition 0."""
    counters = philox_numpy.curand_counters(np.arange(chains), np.zeros(chains, dtype=np.uint64))
    block = philox_numpy.philox4x32_10(counters, key)
    n0, n1 = philox_numpy.box_muller_float32(block[:, 0], block[:, 1])
    n2, n3 = philox_numpy.box_muller_float32(block[:, 2], block[:, 3])
    normals = np.stack([n0, n1, n2, n3], axis=1)
    r01, r23 = np.hypot(n0, n1), np.hypot(n2, n3)
    return normals, np.stack([r01, r01, r23, r23], axis=1)


def first_momenta(q: torch.Tensor, seed: int) -> torch.Tensor:
    """The momenta of transition 0 of stream `seed` for q's chains (the chain ops and the sampler
    draw these for the same seed, chain and transition)."""
    mu = torch.zeros(q.shape[1], dtype=q.dtype, device=q.device)
    return ops.transition(q, mu, 0.1, 1, "philox", None, as_int64(seed), 0, trace=True)[2]


def close_count(a: np.ndarray, b: np.ndarray) -> int:
    return int((np.abs(a - b) < CLOSE).sum())


def correlation_z(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(np.corrcoef(a, b)[0, 1] * np.sqrt(a.size))


# ---- the mixer -----------------------------------------------------------------------------------

def test_mixer_gives_splitmix64_known_answers_in_cpp_and_python():
    words = [(k * GOLDEN) % 2**64 for k in (1, 2, 3)]
    seeds = seeds_for_finalizer_inputs(words)
    assert [philox_numpy.philox_key_from_seed(s) for s in seeds] == SPLITMIX64_FROM_ZERO
    bindings = _build.bindings()
    assert [bindings.philox_key_from_seed(s) for s in seeds] == SPLITMIX64_FROM_ZERO
    assert philox_numpy.EXPLICIT_SEED_DOMAIN == 0x6675736564686D63


def test_mixer_cpp_and_python_agree_and_keep_seeds_apart():
    rng = np.random.default_rng(20261201)
    seeds = [0, 1, 2, 2**32, 2**63 - 1, 2**63, 2**64 - 1] + rng.integers(0, 2**64, 200,
                                                                        np.uint64).tolist()
    bindings = _build.bindings()
    keys = [philox_numpy.philox_key_from_seed(int(s)) for s in seeds]
    assert [bindings.philox_key_from_seed(int(s)) for s in seeds] == keys
    assert len(set(keys)) == len(set(int(s) for s in seeds))
    small = [philox_numpy.philox_key_from_seed(s) for s in range(4096)]
    assert len(set(small)) == 4096 and not set(small) & set(range(2**20))
    # negative int64 seeds (the schema's int) are their 64 bits
    assert philox_numpy.philox_key_from_seed(-1) == philox_numpy.philox_key_from_seed(2**64 - 1)


# ---- the streams ---------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_explicit_seed_momenta_are_mixed_key_not_raw_seed(device, seed):
    """Transition 0's first block of every chain is philox under philox_key_from_seed(seed), not
    under seed itself (the block torch's generator seeded with `seed` hands out first)."""
    chains = 2048
    momentum = first_momenta(torch.zeros(chains, 4, device=device), seed).cpu().double().numpy()
    raw, _ = first_blocks_normals(seed, chains)
    assert close_count(momentum, raw) <= MAX_CLOSE
    assert abs(correlation_z(momentum, raw)) < MAX_ABS_Z
    mixed, radius = first_blocks_normals(philox_numpy.philox_key_from_seed(seed), chains)
    assert (np.abs(momentum - mixed) <= radius * 2.0**-17).all()


def test_explicit_seed_momenta_are_not_a_cuda_start_seeded_alike(device):
    """The issue's reproduction, modelled on any device: the start torch.randn(2048, 64) draws on
    CUDA after manual_seed(0) against hmc_step(seed=0)'s first momenta."""
    start_head = torch_cuda_randn_head(0, 2048)
    momentum = first_momenta(torch.zeros(2048, 64, device=device), 0)[:, 0].cpu().numpy()
    assert close_count(momentum, start_head) <= MAX_CLOSE
    assert abs(correlation_z(momentum, start_head)) < MAX_ABS_Z


@pytest.mark.cuda
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_cuda_momenta_independent_of_torch_randn_under_the_same_seed(seed):
    """On the GPU: torch.cuda.manual_seed(s); q0 = torch.randn(2048, 64) against
    hmc_step(q0, seed=s, transition=0)'s momenta (the issue saw momentum[c, 0] == q0.flatten()[c]).
    """
    torch.cuda.manual_seed(seed)
    q0 = torch.randn(2048, 64, device="cuda")
    momentum = first_momenta(q0, seed)
    head = q0.flatten()[:2048]
    assert int((momentum[:, 0] == head).sum()) <= 2
    m, q = momentum.cpu().numpy(), q0.cpu().numpy()
    assert close_count(m[:, 0], head.cpu().numpy()) <= MAX_CLOSE
    assert abs(correlation_z(m[:, 0], head.cpu().numpy())) < MAX_ABS_Z
    assert abs(correlation_z(m, q)) < MAX_ABS_Z  # element for element, the whole [2048, 64]


def test_cli_first_momenta_are_not_its_starting_points(device, monkeypatch):
    """`fused-hmc sample` seeds its start and its sampler with the same --seed: the sampler's first
    momenta must be independent of the start it draws (on this device), and of the start it would
    draw on CUDA (modelled, so the CPU run checks the GPU's case too). The raw-seed keying tied
    chain c's first momentum to the start's flat element c: momentum[c, 0] == q0.flatten()[c]."""
    import fused_hmc.sampling

    recorded = []

    class RecordingSampler(fused_hmc.sampling.Sampler):
        def __init__(self, q0, **kwargs):
            recorded.append((q0.clone(), kwargs["seed"]))
            super().__init__(q0, **kwargs)

    monkeypatch.setattr(fused_hmc.sampling, "Sampler", RecordingSampler)
    status = cli.main(["sample", "--chains", "2048", "--dim", "4", "--samples", "2", "--seed", "0",
                       "--device", device.type, "--no-progress"])  # 2 draws: no ESS needed
    assert status == 0
    q0, seed = recorded[0]
    assert seed == 0 and q0.device.type == device.type
    chains = q0.shape[0]
    momentum = first_momenta(q0, seed)
    assert int((momentum[:, 0] == q0.flatten()[:chains]).sum()) <= 2
    m, start = momentum.cpu().numpy(), q0.cpu().numpy()
    assert abs(correlation_z(m[:, 0], start.ravel()[:chains])) < MAX_ABS_Z
    assert abs(correlation_z(m, start)) < MAX_ABS_Z
    cuda_start = torch_cuda_randn_head(seed, q0.numel())
    assert close_count(m[:, 0], cuda_start[:chains]) <= MAX_CLOSE
    assert abs(correlation_z(m[:, 0], cuda_start[:chains])) < MAX_ABS_Z
    assert abs(correlation_z(m, cuda_start.reshape(m.shape))) < MAX_ABS_Z


# ---- seed= and generator= exclude each other --------------------------------------------------

def test_seed_with_generator_is_refused(device):
    q = torch.zeros(4, 3, device=device)
    gen = torch.Generator(device=device).manual_seed(1)
    with pytest.raises(ValueError, match="seed=.*generator=.*not both"):
        fused_hmc.hmc_step(q, rng="philox", seed=1, generator=gen)
    with pytest.raises(ValueError, match="seed=.*generator=.*not both"):
        ops.transition(q, q[0], 0.1, 1, "philox", gen, 1)
    with pytest.raises(ValueError, match="seed=.*generator=.*not both"):
        ops.transition(q, q[0], 0.1, 1, "philox", gen, 1, trace=True)
    with pytest.raises(ValueError, match="seed=.*generator=.*not both"):
        fused_hmc.Sampler(q, seed=1, generator=gen, progress=False)
    with pytest.raises(ValueError, match="seed=.*generator=.*not both"):
        fused_hmc.sample(q, 2, seed=1, generator=gen, progress=False)
    # either one alone is fine
    fused_hmc.hmc_step(q, rng="philox", seed=1)
    fused_hmc.hmc_step(q, rng="philox", generator=gen)
    fused_hmc.Sampler(q, generator=gen, progress=False)


@pytest.mark.cuda
def test_stream_arguments_are_checked_on_the_torch_fallback_path(monkeypatch):
    """hmc_step's own torch-draws path (taken when the run-time probe finds the in-kernel torch
    stream inexact) must not skip the op's stream checks."""
    from fused_hmc import transition

    monkeypatch.setattr(transition, "_torch_stream_in_kernel", lambda q: False)
    q = torch.zeros(4, 3, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(1)
    for generator in (None, gen):
        with pytest.raises(ValueError, match='seed= keys the native stream and needs noise="philox"'):
            fused_hmc.hmc_step(q, rng="torch", seed=1, generator=generator)
    with pytest.raises(ValueError, match="pass seed= too"):
        fused_hmc.hmc_step(q, rng="torch", transition=2)
    fused_hmc.hmc_step(q, rng="torch", generator=gen)  # the fallback itself still runs
