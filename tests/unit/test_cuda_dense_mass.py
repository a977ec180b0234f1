"""The dense mass on CUDA (cuda/lane_dense_mass.cuh) against the CPU build.

The CUDA chain kernels form the dense momentum, velocity and kinetic terms, and the window's
co-moments, with dense_mass.h's operations in its order, spread over the chain's lanes; the window
ends' estimates run on the host with the CPU chains' functions (ops/dense_window_end.h). So the
two builds agree as the diagonal kernels do (test_cuda_chain_kernels.py's docstring: the momenta's
normals differ in the last bits, float64, or by up to ~2^-21, float32): states, draws, moments,
factors and window co-moments within cuda_cpu_tolerance, acceptance counts exactly. The shapes
cover one thread a chain, groups of 4, 16 and 32 lanes (a partial last chunk), the dense target's
block barriers, shared and per-chain factors, and trajectories whose chains of one warp run
different numbers of steps. Warm-ups cross slow window ends inside a call, which the op splits
there for the host's estimate.
"""
from __future__ import annotations

import math

import pytest
import torch

import fused_hmc
from fused_hmc.sampling.kernel import dense_factor
from fused_hmc.targets import DenseGaussian

from ._helpers import run_op
from .test_cuda_chain_kernels import assert_agree
from .test_targets import make_target, stat_buffers

pytestmark = pytest.mark.cuda

DTYPES = [torch.float32, torch.float64]
# (kind, chains, dim): group 1 (d <= 4), 4 (d 13), 16 (d 64), 32 (d 125 and 128), the dense target
SHAPES = [("standard", 37, 3), ("diagonal", 40, 13), ("diagonal", 9, 64), ("standard", 5, 125),
          ("diagonal", 3, 128), ("dense", 37, 5), ("dense", 6, 33)]


def _spd(d: int, seed: int, condition: float = 30.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return (q * torch.logspace(0, math.log10(condition), d, dtype=torch.float64)) @ q.T


def _state(chains, dim, dtype, groups, key):
    gen = torch.Generator().manual_seed(key)
    q = 2 * torch.randn(chains, dim, generator=gen, dtype=dtype)
    step = 0.05 + 0.2 * torch.rand(groups, generator=gen, dtype=torch.float64)
    factor = dense_factor(torch.stack([_spd(dim, key + g) for g in range(groups)]), dtype)
    return q, step, factor


def _sample(device, q, target, step, factor, jitter, length):
    q, step, factor = [t.to(device, copy=True) for t in (q, step, factor)]
    chains, dim = q.shape
    samples = q.new_zeros(chains, 3, dim)
    buffers = stat_buffers(chains, dim, device=q.device)
    steps = torch.zeros(chains, dtype=torch.int64, device=device)
    run_op(q, target.op_target, target.op_tensors(q.dtype, q.device), target.op_scalars(), step,
           factor, jitter, 12, 1234, 3, 5, 6, thin=2, samples=samples, mean=buffers[0],
           m2=buffers[1], accept_count=buffers[2], accept_prob_sum=buffers[3],
           trajectory_length=length, gradient_evaluations=steps)
    return [t.cpu() for t in (q, samples, *buffers, steps)]


@pytest.mark.parametrize("kind, chains, dim", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("per_chain", [False, True])
def test_dense_sampling_agrees_with_cpu(kind, chains, dim, dtype, per_chain):
    """Shared factor, 4 steps; per-chain factors and step sizes with trajectory length 1.3 and
    jitter, so that chains of one warp run different numbers of steps."""
    target = make_target(kind, dim)
    q, step, factor = _state(chains, dim, dtype, chains if per_chain else 1, key=dim)
    args = (target, step, factor, 0.25 if per_chain else 0.0, 1.3 if per_chain else 0.0)
    cpu, cuda = [_sample(device, q, *args) for device in ("cpu", "cuda")]
    assert_agree(cpu, cuda, ["q", "samples", "mean", "m2", "accept_count", "accept_prob_sum", "steps"],
           dtype)
    assert int(cpu[4].sum()) > 0
    if per_chain and chains > 3:
        assert len(set(cuda[-1].tolist())) > 1  # the chains ran different numbers of steps


def _warmup(device, q, target, step, factor, calls, adapt, chees=None, num_warmup=80):
    q, step, factor = [t.to(device, copy=True) for t in (q, step, factor)]
    chains, dim = q.shape
    f64 = dict(dtype=torch.float64, device=device)
    da = torch.zeros(step.shape[0], 3, **f64)
    wm, wm2 = torch.zeros(chains, dim, **f64), torch.zeros(chains, dim, dim, **f64)
    chees = None if chees is None else chees.to(device, copy=True)
    first = 0
    for n in calls:
        run_op(q, target.op_target, target.op_tensors(q.dtype, q.device), target.op_scalars(),
               step, factor, 0.2, 4 if chees is None else 100, 77, 0, first, n,
               dual_averaging=da, window_mean=wm, window_m2=wm2, warmup_start=0,
               num_warmup=num_warmup, windows=[10, 20, 20], target_accept=0.8,
               adapt_step_size=adapt[0], adapt_mass_matrix=adapt[1], chees=chees)
        first += n
    out = [q, step, factor, da, wm, wm2] + ([] if chees is None else [chees])
    return [t.cpu() for t in out]


NAMES = ["q", "step_size", "factor", "dual_averaging", "window_mean", "window_m2", "chees"]
WARMUP_SHAPES = [("standard", 37, 3), ("diagonal", 40, 13), ("standard", 5, 125),
                 ("dense", 37, 5)]


@pytest.mark.parametrize("kind, chains, dim", WARMUP_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pooled", [False, True])
def test_dense_warmup_agrees_with_cpu(kind, chains, dim, dtype, pooled):
    """80 warm-up iterations of windows (10, 20, 20): slow windows end at 29 and 59 inside the
    calls [25, 30, 25]; the mass adapted alone (step-size adaptation amplifies rounding,
    test_cuda_chain_kernels.py), then both over the first 3 transitions."""
    target = make_target(kind, dim)
    q, step, factor = _state(chains, dim, dtype, 1 if pooled else chains, key=7)
    cpu, cuda = [_warmup(device, q, target, step, factor, [25, 30, 25], (False, True))
                 for device in ("cpu", "cuda")]
    assert_agree(cpu, cuda, NAMES, dtype)
    assert not torch.equal(cuda[2], factor)  # the factors were estimated
    both = [_warmup(device, q, target, step, factor, [1, 2], (True, True))
            for device in ("cpu", "cuda")]
    assert_agree(*both, NAMES, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_chees_warmup_agrees_with_cpu(dtype):
    """Four pooled ChEES transitions in two calls (the velocity records from the dense rows)."""
    target = make_target("diagonal", 13)
    q, step, factor = _state(40, 13, dtype, 1, key=9)
    chees = torch.tensor([8 * step.item(), 0, 0, 0, 1, 1, 0, 0], dtype=torch.float64)
    cpu, cuda = [_warmup(device, q, target, step, factor, [1, 3], (True, True), chees)
                 for device in ("cpu", "cuda")]
    assert_agree(cpu, cuda, NAMES, dtype)
    assert cuda[6][6].item() == 4 and cuda[6][0].item() != chees[0].item()


def test_the_sampler_warms_up_a_dense_mass_on_cuda():
    """fused_hmc.sample with mass_matrix="dense" on CUDA, pooled and per chain: the CPU's run to
    rounding over a warm-up of the mass alone (the step size fixed)."""
    d = 5
    cov = _spd(d, 3, condition=1e3)
    target = DenseGaussian(torch.zeros(d, dtype=torch.float64), torch.linalg.inv(cov))
    q0 = torch.randn(64, d, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    for pooled in (True, False):
        runs = [fused_hmc.sample(q0.to(device), 30, target=target, mass_matrix="dense",
                                 num_warmup=150, adapt_step_size=False, step_size=0.2,
                                 pooled=pooled, seed=5, progress=False)
                for device in ("cpu", "cuda")]
        names = ("samples", "inverse_mass", "mass_factorization_failures")
        assert_agree(*[[getattr(r, name).cpu() for name in names] for r in runs], names,
                     torch.float64)


def test_a_dense_mass_over_process_groups_on_cuda_is_refused():
    """The pooled warm-up over ranks folds dense windows on the host only (pooled_ranks.py)."""
    from fused_hmc.sampling import pooled_ranks

    class Kernel:
        dense = True
        chains = 2
        state = type("S", (), {"inverse_mass": torch.zeros(1, 3, 3, device="cuda"),
                               "step_size": torch.zeros(1, device="cuda"), "chees": None})()

    with pytest.raises(ValueError, match="process_group runs on the CPU only"):
        pooled_ranks.RankPooledWarmup(Kernel(), None)
