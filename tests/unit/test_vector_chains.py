"""CppTarget(vector_chains=True): the CPU build runs W chains per thread in vector lanes
(csrc/cpu/simd/), instantiating the one transition body on a pack of chains. The property: a
chain's draws, step size, inverse mass and statistics do not depend on whether it ran in a pack or
alone (a batch's remainder, or a batch smaller than a pack), for per-chain and pooled warm-up
(ChEES's recorded trajectories too), diagonal and dense masses, jittered step sizes, per-chain
trajectory lengths (a different L in each lane), thinning, chain offsets and threads.

Two library models: logistic regression in float32 (8 chains a pack; softplus and sigmoid on
float_transcendentals.h's exp and log1p, which a vector_chains module computes alone and in packs)
and eight schools in float64 (4 a pack; libm's exp and log1p lane by lane), each with its
hand-written gradient and with the dual numbers' (gradient=False: Dual<Pack, W>). In float64 a
vector_chains module computes every function as a module without packs does, so there the draws are
also compared bit for bit with vector_chains=False.
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


def _targets(name: str, gradient: bool = True) -> tuple[CppTarget, CppTarget, torch.dtype, int]:
    """(vector_chains=True, vector_chains=False, dtype, dim) for a library model, with its
    hand-written gradient or the duals'."""
    make, dtype = MODELS[name]
    model = make()
    vector = model.target(gradient=gradient)
    assert vector.vector_chains
    source = model.source + ("\n" + model.gradient_source if gradient else "")
    scalar = CppTarget(source, model.dim, data=dict(model.data), gradient=gradient,
                       vector_chains=False)
    return vector, scalar, dtype, model.dim


GRADIENTS = {"hand": True, "duals": False}


@pytest.fixture(scope="module", params=[(m, g) for g in GRADIENTS for m in MODELS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def pair(request):
    return _targets(request.param[0], GRADIENTS[request.param[1]])


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


WARMUP = dict(num_warmup=60, pooled=False, jitter=0.3, thin=2, seed=11, step_size=0.05,
              num_leapfrog_steps=6, progress=False, chunk_size=8)


def _chain(result, b: int):
    """Chain b of a result, as a batch of one."""
    return (result.samples[b:b + 1], result.final_state[b:b + 1], result.step_size[b:b + 1],
            result.inverse_mass[b:b + 1],
            {k: v[b:b + 1] for k, v in result.chain_statistics.items()})


def test_a_chain_in_a_pack_is_the_chain_alone(pair):
    """19 chains (two whole packs of 8 and a remainder of 3, or four of 4 and 3), per-chain warm-up
    with jitter, thin 2: chains from a pack and from the remainder, each run again alone."""
    vector, dtype, dim = pair[0], pair[2], pair[3]
    q0 = _start(19, dim, dtype)
    together = fused_hmc.sample(q0, 30, target=vector, **WARMUP)
    assert together.accept_rate.mean() > 0.2  # the chains moved, so equality is not vacuous
    for b in (0, 5, 9, 17):
        # chain b alone, a batch of one (math/chain_params.h's pools_chains: its own per-chain
        # warm-up, as in any batch)
        alone = fused_hmc.sample(q0[b:b + 1], 30, target=vector, chain_offset=b, **WARMUP)
        want = _chain(together, b)
        got = _chain(alone, 0)
        for x, y in zip(got[:4], want[:4]):
            assert torch.equal(x, y), b
        for name, value in got[4].items():
            assert torch.equal(value, want[4][name]), (b, name)


@pytest.mark.parametrize("gradient", list(GRADIENTS))
def test_float64_draws_are_those_of_vector_chains_false(gradient):
    """eight schools in float64: the module with packs against the module without."""
    vector, scalar, dtype, dim = _targets("eight_schools", GRADIENTS[gradient])
    q0 = _start(21, dim, dtype)
    a, b = _both((vector, scalar), q0, 30, **{k: v for k, v in WARMUP.items()
                                              if k not in ("progress", "chunk_size")})
    _assert_same(a, b)


# Warm-ups whose packs hold every chain's part of a pooled statistic, or a dense mass: each against
# the module without packs, bit for bit (float64), with a remainder chain beside the packs.
POOLED = {"pooled": dict(pooled=True),
          "chees": dict(adapt_trajectory_length=True, max_leapfrog_steps=20),
          "chees_dense": dict(adapt_trajectory_length=True, max_leapfrog_steps=20,
                              mass_matrix="dense"),
          "per_chain_dense": dict(pooled=False, mass_matrix="dense"),
          "pooled_gradients": dict(pooled=True, mass_estimator="gradients"),
          "per_chain_dense_gradients": dict(pooled=False, mass_matrix="dense",
                                            mass_estimator="gradients")}


@pytest.mark.parametrize("warmup", list(POOLED))
def test_float64_pooled_and_dense_warmups_are_those_of_vector_chains_false(warmup):
    vector, scalar, dtype, dim = _targets("eight_schools")
    q0 = _start(21, dim, dtype, seed=4)
    options = {k: v for k, v in WARMUP.items() if k not in ("progress", "chunk_size", "pooled")}
    options.update(num_warmup=120, **POOLED[warmup])
    a, b = _both((vector, scalar), q0, 30, **options)
    assert a.accept_rate.mean() > 0.2
    if "dense" in warmup:  # the dense mass moved off its start
        assert not torch.equal(a.inverse_mass[0], torch.eye(dim, dtype=dtype))
    _assert_same(a, b)


@pytest.mark.parametrize("pooled", [False, True])
def test_a_dense_chain_in_a_pack_is_the_chain_alone(pooled):
    """float32 logistic regression with a dense mass: a chain sampled in a pack (its own dense
    factor from a per-chain warm-up, or the pooled one) draws what it draws alone."""
    vector, _, dtype, dim = _any_batch_pair()
    q0 = _start(19, dim, dtype, seed=6)
    warm = fused_hmc.sample(q0, 1, target=vector, num_warmup=80, pooled=pooled,
                            mass_matrix="dense", seed=3, progress=False)
    options = dict(jitter=0.2, seed=8, num_leapfrog_steps=5, mass_matrix="dense",
                   progress=False, chunk_size=8)
    # pooled: one step size and factor for the batch (alone: the same, as each chain's own)
    shared = (dict(step_size=float(warm.step_size[0]), inverse_mass=warm.inverse_mass[0])
              if pooled else dict(step_size=warm.step_size, inverse_mass=warm.inverse_mass))
    together = fused_hmc.sample(warm.final_state, 12, target=vector, **shared, **options)
    assert together.accept_rate.mean() > 0.2
    for b in (2, 10, 17):
        alone = fused_hmc.sample(warm.final_state[b:b + 2], 12, target=vector, chain_offset=b,
                                 step_size=warm.step_size[b:b + 2],
                                 inverse_mass=warm.inverse_mass[b:b + 2], **options)
        assert torch.equal(alone.samples[0], together.samples[b]), b
        assert torch.equal(alone.final_state[0], together.final_state[b]), b


def test_float32_pooled_chees_does_not_depend_on_threads():
    """ChEES's pooled warm-up in float32 packs (the trajectory record of every lane): the same
    adapted trajectory length, step size, mass and draws on 1 and 2 threads."""
    vector, _, dtype, dim = _any_batch_pair()
    q0 = _start(27, dim, dtype, seed=7)
    threads = torch.get_num_threads()
    runs = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            runs.append(fused_hmc.sample(q0, 10, target=vector, num_warmup=60,
                                         adapt_trajectory_length=True, max_leapfrog_steps=20,
                                         seed=4, progress=False, chunk_size=10))
    finally:
        torch.set_num_threads(threads)
    _assert_same(*runs)
    assert runs[0].trajectory_length == runs[1].trajectory_length


def test_per_lane_trajectory_lengths(pair):
    """A trajectory length with a different step size per chain: each lane of a pack runs its own
    number of leapfrog steps, holding still past it."""
    dtype, dim = pair[2], pair[3]
    batch = 40
    q0 = _start(batch, dim, dtype, seed=1)
    step = 0.01 + 0.04 * torch.rand(batch, generator=torch.Generator().manual_seed(2),
                                    dtype=torch.float64)
    options = dict(trajectory_length=0.3, jitter=0.2, seed=5, progress=False, chunk_size=8)
    together = fused_hmc.sample(q0, 25, target=pair[0], step_size=step, **options)
    steps = together.chain_statistics["gradient_evaluations"]
    assert steps.unique().numel() > 5  # lanes of one pack ran different lengths
    for b in (1, 12, 38):
        alone = fused_hmc.sample(q0[b:b + 2], 25, target=pair[0], step_size=step[b:b + 2],
                                 chain_offset=b, **options)
        assert torch.equal(alone.samples[0], together.samples[b]), b
        assert torch.equal(alone.chain_statistics["gradient_evaluations"][0], steps[b]), b


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
    """Batches of any size (below, at and past whole packs), split in two at another place,
    chain offsets and first transitions."""
    pair = _any_batch_pair()
    dtype, dim = pair[2], pair[3]
    q0 = _start(batch, dim, dtype, seed=batch)
    options = dict(step_size=0.04, num_leapfrog_steps=steps, thin=thin, seed=9,
                   first_transition=first, progress=False, chunk_size=8)
    whole = fused_hmc.sample(q0, 6, target=pair[0], chain_offset=offset, **options)
    # the same chains as two batches: other chains fall in packs and in the remainder
    cut = batch // 2
    parts = [fused_hmc.sample(q0[lo:hi], 6, target=pair[0], chain_offset=offset + lo, **options)
             for lo, hi in ((0, cut), (cut, batch)) if hi > lo]
    assert torch.equal(whole.samples, torch.cat([p.samples for p in parts]))
    assert torch.equal(whole.final_state, torch.cat([p.final_state for p in parts]))


_PAIR = {}


def _any_batch_pair():
    if "pair" not in _PAIR:  # float32: 16 chains a pack, the widest
        _PAIR["pair"] = _targets("logistic_regression")
    return _PAIR["pair"]


def test_vector_chains_must_be_a_bool():
    model = models.eight_schools()
    with pytest.raises(TypeError, match="vector_chains must be True or False"):
        CppTarget(model.source, model.dim, data=dict(model.data), gradient=True,
                  vector_chains=1)
