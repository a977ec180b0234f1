"""The chain ops' CUDA kernels against the CPU build and against the transition op.

The chain ops' sampling and warm-up kernels share every operation with the CPU build (csrc/math/), sum
in the same pairwise orders and take exp / log from portable_math.h. Their one difference is the
momentum: the philox stream's Box-Muller uses CUDA's sincos intrinsics on the device (as curand
does, which torch-stream parity needs) and libm on the host, so the normals differ in the last bits
(float64) or by up to ~2^-21 (float32, transforms.h). CUDA and CPU runs therefore agree to that
rounding, not bit for bit: states, draws, moments, step sizes, inverse masses and dual-averaging
state within rtol 1e-9 (float64) / 2e-4 (float32), acceptance counts exactly (these seeded cases
have no near ties). Step-size dual averaging is a high-gain feedback loop early in a warm-up (one
transition's acceptance statistic moves log eps by up to 1.8 / (1 + n / 10)^(1/2), and acceptance
falls steeply with eps near the stability limit), so it amplifies even float64 rounding differences
to different paths within ~100 transitions; whole warm-ups are therefore compared with the mass
adaptation alone, and step-size adaptation over its first few transitions. Exact checks on the
device: the sample op with the standard target, unit mass and no jitter is the transition op's philox
transitions bit for bit, per chain (G = B) or shared (G = 1) alike (a different group shape for d >
128, the same canonical sums); repeated pooled runs are bitwise reproducible (CUDA graph capture of
these seeded ops is refused: test_cuda_graph_capture.py). The per-coordinate semantics are checked
on CUDA against the pure-torch reference (test_targets.py) and the warm-up against the Stan oracle
(test_warmup.py), both parametrized over devices. Shapes cover every compiled group shape (one chunk
per thread for groups of 1 to 256, four chunks above d = 1024), partial blocks, dense targets up to
the limit, and pooled warm-ups with more tiles than resident blocks.
"""
from __future__ import annotations

import pytest
import torch

from ._helpers import cuda_cpu_tolerance, run_op
from .test_targets import STATISTICS, make_target, stat_buffers, transition_loop

pytestmark = pytest.mark.cuda

DTYPES = [torch.float32, torch.float64]


def _state(chains, dim, dtype, groups, key):
    gen = torch.Generator().manual_seed(key)
    q = 2 * torch.randn(chains, dim, generator=gen, dtype=dtype)
    step = 0.05 + 0.3 * torch.rand(groups, generator=gen, dtype=torch.float64)
    inv_mass = (0.5 + torch.rand(groups, dim, generator=gen, dtype=torch.float64)).to(dtype)
    return q, step, inv_mass


def _run_sample_op(device, q, target, step, inv_mass, jitter, steps, seed, first, n, thin):
    q, step, inv_mass = [t.to(device, copy=True) for t in (q, step, inv_mass)]
    kept = (first + n) // thin - first // thin
    samples = q.new_zeros(q.shape[0], kept, q.shape[1])
    buffers = stat_buffers(*q.shape, device=q.device)
    run_op(q, target.op_target, target.op_tensors(q.dtype, q.device), target.op_scalars(), step,
            inv_mass, jitter, steps, seed, 3, first, n, thin=thin, samples=samples,
            **dict(zip(STATISTICS, buffers)))
    return [t.cpu() for t in (q, samples, *buffers)]


SHAPES = [("standard", 37, 1), ("diagonal", 37, 3), ("diagonal", 300, 64), ("standard", 5, 130),
          ("diagonal", 3, 1024), ("diagonal", 3, 1030), ("standard", 2, 4096), ("dense", 37, 1),
          ("dense", 37, 5), ("dense", 9, 64), ("dense", 4, 130), ("dense", 3, 256)]


def assert_agree(cpu, cuda, names, dtype):
    for name, a, b in zip(names, cpu, cuda):
        if a.is_floating_point():
            torch.testing.assert_close(b, a, **cuda_cpu_tolerance(dtype), msg=name)
        else:
            assert torch.equal(a, b), name


@pytest.mark.parametrize("kind, chains, dim", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("per_chain", [False, True])
def test_run_agrees_with_cpu(kind, chains, dim, dtype, per_chain):
    target = make_target(kind, dim)
    q, step, inv_mass = _state(chains, dim, dtype, chains if per_chain else 1, key=dim)
    args = (target, step, inv_mass, 0.25 if per_chain else 0.0, 4, 1234, 5, 6, 2)
    cpu = _run_sample_op("cpu", q, *args)
    cuda = _run_sample_op("cuda", q, *args)
    assert_agree(cpu, cuda, ["q", "samples", "mean", "m2", "accept_count", "accept_prob_sum"],
                 dtype)
    assert int(cpu[4].sum()) > 0


@pytest.mark.parametrize("dim", [1, 3, 64, 130, 1030, 4096])
@pytest.mark.parametrize("dtype", DTYPES)
def test_standard_unit_mass_is_the_transition_op_on_cuda(dim, dtype):
    """Per chain (G = B), shared (G = 1) and an empty inv_mass (the unit mass compiled away): the
    same bits, and the transition op's transitions (chain_offset 3, transitions 5..10, every
    second kept)."""
    chains = 37 if dim < 1000 else 3
    target = make_target("standard", dim)
    q0 = 2 * torch.randn(chains, dim, generator=torch.Generator().manual_seed(dim), dtype=dtype)
    per_chain = _run_sample_op("cuda", q0, target, torch.full((chains,), 0.2, dtype=torch.float64),
                           torch.ones(chains, dim, dtype=dtype), 0.0, 4, 99, 5, 6, 2)
    shared = _run_sample_op("cuda", q0, target, torch.full((1,), 0.2, dtype=torch.float64),
                        torch.ones(1, dim, dtype=dtype), 0.0, 4, 99, 5, 6, 2)
    unit = _run_sample_op("cuda", q0, target, torch.full((1,), 0.2, dtype=torch.float64),
                      torch.empty(0, dtype=dtype), 0.0, 4, 99, 5, 6, 2)  # the unit mass
    for a, b, c in zip(per_chain, shared, unit):
        assert torch.equal(a, b) and torch.equal(a, c)
    q, draws, count, _ = transition_loop(q0.cuda(), target.mean.to("cuda", dtype), 0.2, 4, 99, 3,
                                         5, 6)
    assert torch.equal(per_chain[0], q.cpu())
    assert torch.equal(per_chain[1], draws[:, ::2].cpu())  # (t + 1) % 2 == 0: t = 5, 7, 9
    assert torch.equal(per_chain[4], count.cpu())


def _warmup(device, q, target, step, inv_mass, calls, num_warmup, windows, jitter=0.2,
            adapt=(True, True)):
    q, step, inv_mass = [t.to(device, copy=True) for t in (q, step, inv_mass)]
    chains, dim = q.shape
    f64 = dict(dtype=torch.float64, device=device)
    da = torch.zeros(step.shape[0], 3, **f64)
    wm, wm2 = torch.zeros(chains, dim, **f64), torch.zeros(chains, dim, **f64)
    tensors = target.op_tensors(q.dtype, q.device)
    first = 0
    for n in calls:
        run_op(q, target.op_target, tensors, target.op_scalars(), step, inv_mass, jitter, 3, 77,
                0, first, n, dual_averaging=da, window_mean=wm, window_m2=wm2, warmup_start=0,
                num_warmup=num_warmup, windows=list(windows), target_accept=0.8,
                adapt_step_size=adapt[0], adapt_mass_matrix=adapt[1])
        first += n
    return [t.cpu() for t in (q, step, inv_mass, da, wm, wm2)]


WARMUPS = [("diagonal", 6, 3, 200, (75, 25, 50)), ("dense", 40, 5, 200, (75, 25, 50)),
           ("standard", 300, 64, 120, (20, 10, 20)), ("diagonal", 3, 1030, 60, (75, 25, 50)),
           ("dense", 5, 130, 60, (75, 25, 50))]


@pytest.mark.parametrize("kind, chains, dim, num_warmup, windows", WARMUPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pooled", [False, True])
def test_warmup_agrees_with_cpu(kind, chains, dim, num_warmup, windows, dtype, pooled):
    """A whole warm-up of the inverse mass in three calls (one ends inside a slow window): every
    state tensor; then both adaptations over the first 3 transitions."""
    target = make_target(kind, dim)
    q, step, inv_mass = _state(chains, dim, dtype, 1 if pooled else chains, key=7)
    names = ["q", "step_size", "inv_mass", "dual_averaging", "window_mean", "window_m2"]
    both = [_warmup(device, q, target, step, inv_mass, [1, 2], num_warmup, windows)
            for device in ("cpu", "cuda")]
    assert_agree(*both, names, dtype)
    calls = [num_warmup // 3, num_warmup // 3, num_warmup - 2 * (num_warmup // 3)]
    cpu, cuda = [_warmup(device, q, target, step, inv_mass, calls, num_warmup, windows,
                         adapt=(False, True)) for device in ("cpu", "cuda")]
    assert_agree(cpu, cuda, names, dtype)
    assert not torch.equal(cpu[2], inv_mass.to(cpu[2].dtype))  # the mass was adapted


@pytest.mark.parametrize("adapt, n", [((True, False), 4), ((False, True), 100)])
def test_warmup_parts_agree_with_cpu(adapt, n):
    target = make_target("diagonal", 4)
    q, step, inv_mass = _state(10, 4, torch.float64, 1, key=1)
    cpu = _warmup("cpu", q, target, step, inv_mass, [n], 100, (10, 10, 10), adapt=adapt)
    cuda = _warmup("cuda", q, target, step, inv_mass, [n], 100, (10, 10, 10), adapt=adapt)
    assert_agree(cpu, cuda, ["q", "step_size", "inv_mass", "da", "wm", "wm2"], torch.float64)


def test_pooled_warmup_with_more_tiles_than_resident_blocks():
    """20000 chains x 64 (16 chains a block: 1250 tiles) loop over tiles inside the cooperative
    grid: the same mass adaptation as the CPU's, and bitwise reproducible."""
    target = make_target("diagonal", 64)
    q, step, inv_mass = _state(20000, 64, torch.float64, 1, key=3)
    cpu, cuda, again = [_warmup(device, q, target, step, inv_mass, [40], 40, (75, 25, 50),
                                adapt=(False, True)) for device in ("cpu", "cuda", "cuda")]
    assert_agree(cpu, cuda, ["q", "step_size", "inv_mass", "da", "wm", "wm2"], torch.float64)
    assert all(torch.equal(a, b) for a, b in zip(cuda, again))


def test_dense_above_the_limit_is_refused_on_cuda():
    q = torch.zeros(2, 257, device="cuda")
    precision = torch.eye(257, device="cuda")
    buffers = stat_buffers(2, 257, device="cuda")
    with pytest.raises(ValueError, match='target "dense" supports dim <= 256'):
        run_op(q, "dense", [q[0], precision], [], torch.ones(1, dtype=torch.float64,
                device="cuda"), torch.ones(1, 257, device="cuda"), 0.0, 1, 0, 0, 0, 1,
                **dict(zip(STATISTICS, buffers)))


# Jittered trajectories and ChEES (math/adaptation/trajectory_adaptation.h). A transition's leapfrog
# steps L = min(cap, max(1, ceil(w T / eps_t))) come from exactly computed quantities (the stream's
# word z, the float64 step size), so both builds run the same L: the gradient counts agree exactly.
# ChEES's update feeds T back into L's ceil, which turns a rounding difference into a different L
# once w T / eps_t lands near an integer; so whole ChEES warm-ups are compared over a few
# transitions, and checked for bitwise reproducibility on the device.
TRAJECTORY_SHAPES = [("standard", 37, 3), ("diagonal", 300, 64), ("diagonal", 5, 130),
                     ("dense", 37, 5), ("dense", 4, 130)]


@pytest.mark.parametrize("kind, chains, dim", TRAJECTORY_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_jittered_trajectories_agree_with_cpu(kind, chains, dim, dtype):
    """Sampling with trajectory_length T = 1.3 and each chain's own step size: chains of one warp
    (and of one block, for the dense target's barriers) run different numbers of steps."""
    target = make_target(kind, dim)
    q, step, inv_mass = _state(chains, dim, dtype, chains, key=5)
    out = []
    for device in ("cpu", "cuda"):
        qd, sd, md = [t.to(device, copy=True) for t in (q, step, inv_mass)]
        steps = torch.zeros(chains, dtype=torch.int64, device=device)
        buffers = stat_buffers(chains, dim, device=device)
        run_op(qd, target.op_target, target.op_tensors(dtype, qd.device), target.op_scalars(),
                sd, md, 0.1, 40, 11, 0, 0, 6, mean=buffers[0], m2=buffers[1],
                accept_count=buffers[2], accept_prob_sum=buffers[3], trajectory_length=1.3,
                gradient_evaluations=steps)
        out.append([t.cpu() for t in (qd, *buffers, steps)])
    assert_agree(*out, ["q", "mean", "m2", "accept_count", "accept_prob_sum", "steps"], dtype)
    per_transition = out[1][-1].double() / 6 - 1  # L + 1 gradients per transition
    assert per_transition.min() >= 1 and per_transition.max() <= 40
    assert len(set(out[1][-1].tolist())) > 1  # the step sizes vary the steps between chains


def _chees_warmup(device, q, target, step, inv_mass, calls, num_warmup, adapt=(True, True)):
    q, step, inv_mass = [t.to(device, copy=True) for t in (q, step, inv_mass)]
    chains, dim = q.shape
    f64 = dict(dtype=torch.float64, device=device)
    da = torch.zeros(1, 3, **f64)
    wm, wm2 = torch.zeros(chains, dim, **f64), torch.zeros(chains, dim, **f64)
    chees = torch.tensor([8 * step.item(), 0, 0, 0, 1, 1, 0, 0], **f64)
    steps = torch.zeros(chains, dtype=torch.int64, device=device)
    tensors = target.op_tensors(q.dtype, q.device)
    first = 0
    for n in calls:
        run_op(q, target.op_target, tensors, target.op_scalars(), step, inv_mass, 0.0, 100, 5,
                0, first, n, dual_averaging=da, window_mean=wm, window_m2=wm2, warmup_start=0,
                num_warmup=num_warmup, windows=[10, 10, 10], target_accept=0.651,
                adapt_step_size=adapt[0], adapt_mass_matrix=adapt[1], chees=chees,
                gradient_evaluations=steps)
        first += n
    return [t.cpu() for t in (q, step, inv_mass, da, wm, wm2, chees, steps)]


CHEES_NAMES = ["q", "step_size", "inv_mass", "dual_averaging", "window_mean", "window_m2",
               "chees", "gradient_evaluations"]


@pytest.mark.parametrize("kind, chains, dim", TRAJECTORY_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_chees_warmup_agrees_with_cpu(kind, chains, dim, dtype):
    """Four pooled ChEES transitions in two calls, step size and mass adapted too: the ChEES state
    (T, its average, Adam's moments, the update count) as the CPU's."""
    target = make_target(kind, dim)
    q, step, inv_mass = _state(chains, dim, dtype, 1, key=9)
    cpu, cuda = [_chees_warmup(device, q, target, step, inv_mass, [1, 3], 60)
                 for device in ("cpu", "cuda")]
    assert_agree(cpu, cuda, CHEES_NAMES, dtype)
    assert cuda[6][6].item() == 4 and cuda[6][0].item() != 8 * step.item()  # 4 updates moved T


def test_chees_warmup_is_reproducible_with_more_tiles_than_resident_blocks():
    """20000 chains x 64 (1250 tiles over the resident blocks), 30 ChEES transitions: bitwise the
    same twice, and the trajectory length moved."""
    target = make_target("diagonal", 64)
    q, step, inv_mass = _state(20000, 64, torch.float64, 1, key=3)
    first, again = [_chees_warmup("cuda", q, target, step, inv_mass, [30], 30) for _ in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert first[6][6].item() == 30
