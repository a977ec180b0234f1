"""The CPU build splits chains over torch's intra-op threads (issue 33), and no bit depends on how
many there are.

The chain loops (csrc/cpu/chains_cpu.h, the transition op, users' CppTarget modules) hand chains
to at::parallel_for; each chain's arithmetic is its own, and the pooled warm-up's reductions run
over the chain index in one fixed order after every chain's part is done. So 1, 2 and 3 threads
must give the same draws, final states, moments, acceptance statistics and adapted step sizes,
inverse masses and trajectory lengths, bit for bit. The chain counts are odd and large enough that
every thread count splits them unevenly into several tasks (the loops take 16 chains a task at
least when a call runs one transition), and fixed chunk sizes make several op calls.
"""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc import CppTarget, ops
from fused_hmc._build import bindings

from .test_cpp_target import DIM, NAMES, SOURCE, data, log_prob, points

THREADS = (1, 2, 3)


@pytest.fixture(autouse=True)
def _restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _under_each_thread_count(run) -> list:
    out = []
    for n in THREADS:
        torch.set_num_threads(n)
        out.append(run())
    return out


def _assert_same_bits(results: list[dict]) -> None:
    first = results[0]
    for n, other in zip(THREADS[1:], results[1:]):
        assert other.keys() == first.keys()
        for key, value in first.items():
            if isinstance(value, torch.Tensor):
                # equal bits: NaN-aware and sign-of-zero-aware through the raw bytes
                assert value.dtype == other[key].dtype and value.shape == other[key].shape, key
                assert torch.equal(value.contiguous().view(torch.uint8),
                                   other[key].contiguous().view(torch.uint8)), (key, n)
            else:
                assert value == other[key], (key, n)


def _result_fields(res) -> dict:
    fields = dict(samples=res.samples, final_state=res.final_state, mean=res.mean,
                  accept_count=res.accept_count, mean_accept_prob=res.mean_accept_prob,
                  step_size=res.step_size, inverse_mass=res.inverse_mass,
                  gradients=(res.warmup_gradient_evaluations, res.sampling_gradient_evaluations))
    fields.update({f"{part}_{name}": t for part in ("chain_statistics", "warmup_chain_statistics")
                   for name, t in getattr(res, part).items()})
    if res.trajectory_length is not None:
        fields["trajectory_length"] = res.trajectory_length
    return fields


def test_parallel_for_runs_on_several_threads():
    """The extension's at::parallel_for is a real parallel region (it was a plain loop when the
    extension was compiled without OpenMP, and every chain ran on one core)."""
    torch.set_num_threads(2)
    assert set(bindings().parallel_thread_ids(64)) == {0, 1}


@pytest.mark.parametrize("batch, block", [(0, 1), (1, 1), (97, 4), (97, 200), (64, 16)])
@pytest.mark.parametrize("threads", THREADS)
def test_chain_blocks_run_every_chain_once(batch, block, threads):
    torch.set_num_threads(threads)
    assert bindings().chain_block_visits(batch, block) == [1] * batch


@pytest.mark.parametrize("mass_matrix", ["diagonal", "dense"])
@pytest.mark.parametrize("pooled, chees", [(False, False), (True, True), (False, True)],
                         ids=["per_chain", "pooled_chees", "per_chain_chees"])
def test_gaussian_chain_ops_are_bitwise_the_same_on_1_2_3_threads(pooled, chees, mass_matrix):
    g = torch.Generator().manual_seed(33)
    q0 = 3.0 * torch.randn(97, 6, generator=g, dtype=torch.float32)
    mu = torch.linspace(-1.0, 1.0, 6)
    # ChEES adds its per-chain records and their fixed-order reduction (with per-chain step sizes
    # and masses, each chain's own adaptation in lock step)
    extra = dict(adapt_trajectory_length=True) if chees else {}

    def run():
        res = fused_hmc.sample(q0, 25, mu=mu, num_warmup=40, pooled=pooled, jitter=0.3,
                               seed=5, num_leapfrog_steps=4, step_size=0.3, chunk_size=7,
                               mass_matrix=mass_matrix, progress=False, **extra)
        return _result_fields(res)

    results = _under_each_thread_count(run)
    assert results[0]["accept_count"].sum() > 0  # the chains moved
    _assert_same_bits(results)


@pytest.mark.parametrize("noise", ["philox", "given"])
def test_transition_op_is_bitwise_the_same_on_1_2_3_threads(noise):
    g = torch.Generator().manual_seed(7)
    q = torch.randn(203, 64, generator=g, dtype=torch.float64)
    mu = torch.randn(64, generator=g, dtype=torch.float64)
    noise_args = (dict(seed=11, transition=4) if noise == "philox" else
                  dict(momentum=torch.randn(203, 64, generator=g, dtype=torch.float64),
                       uniform=torch.rand(203, generator=g)))

    def run():
        out = ops.transition(q, mu, 1.5, 7, noise, trace=True, **noise_args)
        return dict(out._asdict())

    results = _under_each_thread_count(run)
    assert 0 < int(results[0]["accepted"].sum()) < 203
    _assert_same_bits(results)


@pytest.fixture(scope="module")
def eight_schools() -> CppTarget:
    # the module test_cpp_target and test_force_carry compile: one build for all three
    return CppTarget(SOURCE, DIM, data=data(), names=NAMES, log_prob=log_prob)


# A few of eight schools' dispersed starts stay stuck in 30 warm-up transitions; only bits matter.
@pytest.mark.filterwarnings("ignore::fused_hmc.StuckChainsWarning")
@pytest.mark.parametrize("pooled", [False, True], ids=["per_chain", "pooled"])
def test_cpp_target_is_bitwise_the_same_on_1_2_3_threads(eight_schools, pooled):
    q0 = points(53, 9)

    def run():
        res = fused_hmc.sample(q0, 20, target=eight_schools, num_warmup=30, pooled=pooled,
                               jitter=0.2, seed=3, num_leapfrog_steps=5, step_size=0.2,
                               chunk_size=6, progress=False)
        return _result_fields(res)

    results = _under_each_thread_count(run)
    assert results[0]["accept_count"].sum() > 0
    _assert_same_bits(results)


@pytest.mark.parametrize("mass_matrix", ["diagonal", "dense"])
def test_a_costly_model_pooled_is_bitwise_the_same_on_1_2_3_threads(mass_matrix):
    """The library's logistic regression (1,000 rows a gradient) costs tens of microseconds a
    chain and transition, so after the pooled warm-up's timed first transition its blocks hold 1
    or 2 chains, where a Gaussian's hold 16 (chain_loop.h's timed_block_size): a block size that
    depends on the clock and the thread count, and no bit that does. With ChEES and chunks."""
    from fused_hmc import models

    model = models.logistic_regression()
    target = model.target(gradient=True)
    q0 = model.initial_point(37, generator=torch.Generator().manual_seed(4))

    def run():
        res = fused_hmc.sample(q0, 10, target=target, num_warmup=40, jitter=0.2, seed=6,
                               adapt_trajectory_length=True, mass_matrix=mass_matrix,
                               chunk_size=15, progress=False)
        return _result_fields(res)

    results = _under_each_thread_count(run)
    assert results[0]["accept_count"].sum() > 0
    _assert_same_bits(results)
