"""The CUDA chain kernels' block (cuda/group_shape.h's chain_block): chains of up to a warp's
threads share a block of up to 256 threads, halved down to one warp while a batch would leave SMs
without a block (4096 one-thread chains: 128 blocks of 32 on an H200, not 16 of 256).

A chain's draws must not depend on its block. On CUDA, a small batch (small blocks) must equal
the same chains at the head of a batch big enough for the largest block, bit for bit, when
sampling and in the per-chain warm-up. The pooled warm-up's tiles are its blocks, and its sums
follow the canonical pairwise order at any tile size, so a small batch must agree with the CPU
build. Targets: a one-thread CppTarget (eight schools, as test_force_carry builds it) and a
lanes=4 one (test_lane_rows's), whose builds the disk cache shares with those files.
"""
from __future__ import annotations

import pytest
import torch

from fused_hmc import CppTarget, _build

from . import test_cpp_target as one_thread
from . import test_lane_rows as lanes
from ._helpers import cuda_cpu_tolerance, run_op, run_op_state

TRANSITIONS, STEPS, SEED = 6, 5, 33
LARGEST = 256  # threads of the largest block


def _chain_block(group: int, batch: int, sm_count: int) -> tuple[int, int]:
    return _build.bindings().chain_block(group, batch, sm_count)


def test_a_small_batch_takes_smaller_blocks_so_that_every_sm_gets_one():
    assert _chain_block(1, 4096, 132) == (32, 32)  # 128 blocks, not 16 of 256
    assert _chain_block(1, 8192, 132) == (32, 32)  # 64 chains a block would make 128 blocks
    assert _chain_block(1, 132 * 64, 132) == (64, 64)
    assert _chain_block(1, 132 * 256, 132) == (256, 256)
    assert _chain_block(1, 131 * 256, 132) == (128, 128)  # 131 blocks of 256
    assert _chain_block(1, 10**6, 132) == (256, 256)
    assert _chain_block(4, 70, 132) == (32, 8)
    assert _chain_block(4, 4096, 132) == (64, 16)
    assert _chain_block(32, 100, 132) == (32, 1)
    assert _chain_block(32, 10**5, 132) == (256, 8)
    for group in (64, 128, 256):  # a group above a warp is a block alone
        assert _chain_block(group, 10, 132) == (group, 1)


@pytest.mark.parametrize("group", [1, 2, 4, 8, 16, 32])
@pytest.mark.parametrize("sm_count", [1, 46, 132, 170])
def test_the_block_is_the_largest_that_gives_every_sm_a_block(group, sm_count):
    for batch in (1, 31, 70, 1000, 4096, 8191, 33792, 10**6):
        threads, chains = _chain_block(group, batch, sm_count)
        assert chains * group == threads and threads & (threads - 1) == 0
        assert 32 <= threads <= LARGEST

        def blocks(n):
            return -(-batch // n)
        assert blocks(chains) >= sm_count or threads == 32
        assert threads == LARGEST or blocks(2 * chains) < sm_count


@pytest.fixture(scope="module")
def targets() -> dict:
    """kind -> (target, dim, lanes)."""
    return {
        "one_thread": (CppTarget(one_thread.SOURCE, one_thread.DIM, data=one_thread.data(),
                                 names=one_thread.NAMES, log_prob=one_thread.log_prob),
                       one_thread.DIM, 1),
        "lanes4": (CppTarget(lanes.SHARE + lanes.GRADIENT, lanes.DIM, data=lanes._data(),
                             log_prob=lanes._log_prob, gradient=True, lanes=4), lanes.DIM, 4),
    }


def _start(chains: int, dim: int) -> torch.Tensor:
    return 0.5 * torch.randn(chains, dim, generator=torch.Generator().manual_seed(7),
                             dtype=torch.float64)


def _run(target: CppTarget, q0: torch.Tensor, mode: str, device: str) -> dict:
    """TRANSITIONS transitions of the chains q0 in one call: sampling, per_chain or pooled (ChEES,
    with a slow window's end) warm-up. Returns every tensor the op wrote."""
    chains, dim = q0.shape
    q = q0.to(device, copy=True)
    # jittered, and the chains' step sizes differ: the chains take different step counts
    state = run_op_state(chains, dim, mode, device, varied_steps=mode == "sampling")
    options = dict(trajectory_length=0.6)
    if mode != "sampling":
        # the first slow window is [1, 3]: its end pools the chains' window moments
        options.update(warmup_start=0, num_warmup=20, windows=[1, 3, 2],
                       target_accept=0.651, adapt_step_size=True, adapt_mass_matrix=True)
    if mode == "pooled":
        options = dict(options, trajectory_length=0.0,
                       chees=torch.tensor([0.15 * STEPS, 0, 0, 0, 1, 1, 0, 0],
                                          dtype=torch.float64, device=device))
    step_size, inv_mass = state.pop("step_size"), state.pop("inv_mass")
    run_op(q, target.op_name(q.dtype, q.device), target.op_tensors(q.dtype, q.device),
            target.op_scalars(), step_size, inv_mass, 0.1, 3 * STEPS, SEED, 0, 0, TRANSITIONS,
            **state, **options)
    return dict(q=q, step_size=step_size, inv_mass=inv_mass, **state, **options)


KINDS = ["one_thread", "lanes4"]


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["sampling", "per_chain"])
@pytest.mark.parametrize("chains", [70, 4096])
@pytest.mark.parametrize("kind", KINDS)
def test_cuda_chains_in_small_blocks_equal_them_in_the_largest(targets, kind, chains, mode):
    target, dim, group = targets[kind]
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    big = sm_count * (LARGEST // group)  # just enough chains for the largest block
    assert _chain_block(group, big, sm_count)[0] == LARGEST
    assert _chain_block(group, chains, sm_count)[0] < LARGEST
    q0 = _start(big, dim)
    alone = _run(target, q0[:chains], mode, "cuda")
    among = _run(target, q0, mode, "cuda")
    for key, value in alone.items():
        if not isinstance(value, torch.Tensor):
            continue
        head = among[key] if value.shape[0] != chains else among[key][:chains]
        assert torch.equal(value, head), key
    assert len(set(alone["gradient_evaluations"].tolist())) > 1  # the step counts vary


@pytest.mark.cuda
@pytest.mark.parametrize("chains", [70, 4096])
@pytest.mark.parametrize("kind", KINDS)
def test_cuda_pooled_warmup_in_small_tiles_agrees_with_the_cpu(targets, kind, chains):
    target, dim, group = targets[kind]
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    assert _chain_block(group, chains, sm_count)[0] < LARGEST
    q0 = _start(chains, dim)
    cpu, cuda = [_run(target, q0, "pooled", device) for device in ("cpu", "cuda")]
    assert torch.equal(cuda["gradient_evaluations"].cpu(), cpu["gradient_evaluations"])
    for key, value in cpu.items():
        if not isinstance(value, torch.Tensor):  # the run's options, handed back as given
            continue
        torch.testing.assert_close(cuda[key].cpu(), value, **cuda_cpu_tolerance(torch.float64),
                                   msg=key)
    assert cuda["chees"][6].item() == TRANSITIONS  # ChEES updated T at every transition


def _run_standard(q0: torch.Tensor, inv_mass: torch.Tensor) -> dict:
    """TRANSITIONS sampling transitions of N(0, I) in float, draws kept, in one call."""
    chains, dim = q0.shape
    q = q0.cuda()
    state = run_op_state(chains, dim, "sampling", "cuda")
    del state["inv_mass"]
    samples = torch.empty(chains, TRANSITIONS, dim, dtype=q.dtype, device="cuda")
    run_op(q, "standard", [torch.zeros(dim, device="cuda")], [], state.pop("step_size"),
            inv_mass.cuda(), 0.2, STEPS, SEED, 0, 0, TRANSITIONS, samples=samples, **state)
    return dict(q=q, samples=samples, **state)


@pytest.mark.cuda
@pytest.mark.parametrize("unit_mass", [True, False])
def test_cuda_a_grid_beyond_one_wave_changes_no_bit(unit_mass):
    """N(0, I) in float has a second one-chunk sampling kernel capped at 80 registers (three
    blocks per SM), launched for grids larger than the other keeps resident (chain_kernels.cuh):
    the head of such a batch must be bit for bit the same chains run alone, one wave of the
    other kernel. d = 64: groups of 16 threads, 16 chains a block."""
    dim, per_block = 64, LARGEST // 16
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    head, big = sm_count * per_block, 4 * sm_count * per_block  # 1 and 4 blocks per SM
    q0 = torch.randn(big, dim, generator=torch.Generator().manual_seed(5))
    inv_mass = (torch.empty(0) if unit_mass
                else 0.5 + torch.rand(1, dim, generator=torch.Generator().manual_seed(6)))
    alone, among = _run_standard(q0[:head], inv_mass), _run_standard(q0, inv_mass)
    for key, value in alone.items():
        assert torch.equal(value, among[key][:head]), key
    assert 0 < alone["accept_count"].sum() < head * TRANSITIONS  # some rejections too
