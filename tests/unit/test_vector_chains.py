"""CppTarget(vector_chains=True): the CPU build runs W chains per thread in vector lanes
(csrc/cpu/simd/), instantiating the one transition body on a pack of chains. The property: the
draws, step sizes, inverse masses and per-chain statistics are bit for bit those of the same
source compiled with vector_chains=False (one chain per loop iteration), for any batch (whole packs
plus a scalar remainder), per-chain warm-up, jittered step sizes, per-chain trajectory lengths
(a different L in each lane) and thinning.

Two library models, each compiled both ways: logistic regression in float32 (16 chains a pack with
AVX-512; softplus and sigmoid per lane) and eight schools in float64 (8 a pack; exp and log1p).
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fused_hmc
from fused_hmc import CppTarget, models

MODELS = {"logistic_regression": (models.logistic_regression, torch.float32),
          "eight_schools": (models.eight_schools, torch.float64)}


def _targets(name: str) -> tuple[CppTarget, CppTarget, torch.dtype, int]:
    """(vector_chains=True, vector_chains=False, dtype, dim) for a library model."""
    make, dtype = MODELS[name]
    model = make()
    vector = model.target(gradient=True)
    assert vector.vector_chains
    scalar = CppTarget(model.source + "\n" + model.gradient_source, model.dim,
                       data=dict(model.data), gradient=True, vector_chains=False)
    return vector, scalar, dtype, model.dim


@pytest.fixture(scope="module", params=list(MODELS))
def pair(request):
    return _targets(request.param)


def _start(batch: int, dim: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    return 0.3 * torch.randn(batch, dim, generator=torch.Generator().manual_seed(seed),
                             dtype=torch.float64).to(dtype)


def _assert_same(a, b) -> None:
    assert torch.equal(a.samples, b.samples)
    assert torch.equal(a.final_state, b.final_state)
    assert torch.equal(a.step_size, b.step_size)
    assert torch.equal(a.inverse_mass, b.inverse_mass)
    for name, value in a.chain_statistics.items():
        assert torch.equal(value, b.chain_statistics[name]), name
    assert a.sampling_gradient_evaluations == b.sampling_gradient_evaluations


def _both(pair, q0: torch.Tensor, num_samples: int, **options):
    vector, scalar = pair[0], pair[1]
    # chunk_size fixed: the carried gradient is evaluated afresh once per call, and the calls
    # otherwise follow the clock
    return [fused_hmc.sample(q0, num_samples, target=t, progress=False, chunk_size=8, **options)
            for t in (vector, scalar)]


def test_per_chain_warmup_and_sampling(pair):
    """37 or 21 chains: two whole packs and a remainder, per-chain warm-up with jitter, thin 2."""
    dtype, dim = pair[2], pair[3]
    q0 = _start(37 if dtype == torch.float32 else 21, dim, dtype)
    a, b = _both(pair, q0, 30, num_warmup=60, pooled=False, jitter=0.3, thin=2, seed=11,
                 step_size=0.05, num_leapfrog_steps=6)
    assert a.accept_rate.mean() > 0.2  # the chains moved, so equality is not vacuous
    _assert_same(a, b)


def test_per_lane_trajectory_lengths(pair):
    """A trajectory length with a different step size per chain: each lane of a pack runs its own
    number of leapfrog steps, holding still past it."""
    dtype, dim = pair[2], pair[3]
    batch = 40
    q0 = _start(batch, dim, dtype, seed=1)
    step = 0.01 + 0.04 * torch.rand(batch, generator=torch.Generator().manual_seed(2),
                                    dtype=torch.float64)
    a, b = _both(pair, q0, 25, step_size=step, trajectory_length=0.3, jitter=0.2, seed=5)
    steps = a.chain_statistics["gradient_evaluations"]
    assert steps.unique().numel() > 5  # lanes of one pack ran different lengths
    _assert_same(a, b)


def test_threads_split_whole_packs(pair):
    """The draws do not depend on how many threads share the chains."""
    dtype, dim = pair[2], pair[3]
    q0 = _start(50, dim, dtype, seed=3)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = fused_hmc.sample(q0, 10, target=pair[0], step_size=0.03, seed=2, progress=False,
                               chunk_size=10)
        torch.set_num_threads(2)
        two = fused_hmc.sample(q0, 10, target=pair[0], step_size=0.03, seed=2, progress=False,
                               chunk_size=10)
    finally:
        torch.set_num_threads(threads)
    _assert_same(one, two)


@settings(max_examples=12)
@given(batch=st.integers(1, 45), steps=st.integers(1, 5), thin=st.integers(1, 3),
       first=st.integers(0, 7), offset=st.integers(0, 20))
def test_any_batch(batch, steps, thin, first, offset):
    """Batches of any size (below, at and past whole packs), chain offsets and first transitions."""
    pair = _any_batch_pair()
    dtype, dim = pair[2], pair[3]
    q0 = _start(batch, dim, dtype, seed=batch)
    a, b = _both(pair, q0, 6, step_size=0.04, num_leapfrog_steps=steps, thin=thin, seed=9,
                 first_transition=first, chain_offset=offset)
    _assert_same(a, b)


_PAIR = {}


def _any_batch_pair():
    if "pair" not in _PAIR:  # float32: 16 chains a pack, the widest
        _PAIR["pair"] = _targets("logistic_regression")
    return _PAIR["pair"]


def test_vector_chains_needs_the_hand_written_gradient():
    model = models.eight_schools()
    with pytest.raises(ValueError, match="vector_chains=True needs gradient=True"):
        CppTarget(model.source, model.dim, data=dict(model.data), vector_chains=True)
    with pytest.raises(TypeError, match="vector_chains must be True or False"):
        CppTarget(model.source, model.dim, data=dict(model.data), gradient=True,
                  vector_chains=1)
