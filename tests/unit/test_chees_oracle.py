"""The chain ops' jittered trajectories and one ChEES update against an independent numpy oracle
(csrc/math/adaptation/trajectory_adaptation.h states the rules): the trajectory jitter w is word z
of each transition's last philox block (fused_hmc.philox_numpy recomputes it), a transition runs
min(cap, max(1, ceil(w T / eps))) leapfrog steps, and the ChEES update is formed from every
chain's start, proposal, end momentum, acceptance probability and w.

The oracle takes the momentum from the transition op's trace (the sample op with the standard
target, unit mass and no jitter draws the same, schema.cpp) and integrates in numpy float64, so it
agrees with the C++ to rounding (1e-12 relative), not bit for bit."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fused_hmc import ops, philox_numpy

from ._helpers import cuda_cpu_tolerance, run_op

SEED, DIM, CHAINS = 314, 3, 64


def _trajectory_jitter(transitions: int) -> np.ndarray:
    """w [chains, transitions], shared by the chains: van der Corput's base-2 sequence at t (its
    32 bits reversed) plus word z of stream chain 0's last block at transition 0, mod 2^32, as
    torch_uniform_from_word makes it, in float32 (fma(w, 2^-32, 2^-33), 1 mapped to 0)."""
    rotation = int(philox_numpy.stream_blocks(SEED, np.zeros(1, dtype=np.int64), 0, DIM,
                                              "float64")[0, -1, 2])
    out = np.empty((CHAINS, transitions))
    for t in range(transitions):
        word = (int(f"{t:032b}"[::-1], 2) + rotation) % 2 ** 32
        u = np.float32(np.float64(np.float32(word)) * 2.0 ** -32 + 2.0 ** -33)
        out[:, t] = np.float32(0.0) if u == np.float32(1.0) else u
    return out


def _sampling_buffers(chains, dim):
    f64 = dict(dtype=torch.float64)
    return dict(mean=torch.zeros(chains, dim, **f64), m2=torch.zeros(chains, dim, **f64),
                accept_count=torch.zeros(chains, dtype=torch.int64),
                accept_prob_sum=torch.zeros(chains, **f64))


def test_each_transition_runs_the_jittered_number_of_steps():
    """Sampling with trajectory_length T: chain b's gradient evaluations are sum_t (min(cap,
    max(1, ceil(w_bt T / eps))) + 1) exactly (the standard target evaluates the force at each
    start), with T long enough that the cap binds for some transitions."""
    eps, length, cap, transitions = 0.125, 2.3, 12, 7
    q = torch.randn(CHAINS, DIM, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    steps = torch.zeros(CHAINS, dtype=torch.int64)
    run_op(q, "standard", [torch.zeros(DIM, dtype=torch.float64)], [],
            torch.tensor([eps], dtype=torch.float64), q.new_empty(0), 0.0, cap, SEED, 0, 0,
            transitions, trajectory_length=length, gradient_evaluations=steps, **_sampling_buffers(
                CHAINS, DIM))
    w = _trajectory_jitter(transitions)
    expected = (np.clip(np.ceil(w * length / eps), 1, cap) + 1).sum(1)
    assert (np.ceil(w * length / eps) > cap).any()  # the cap is exercised
    assert steps.tolist() == expected.astype(np.int64).tolist()


@pytest.mark.parametrize("inv_mass", [(1.0, 1.0, 1.0), (0.5, 1.0, 3.0)])
def test_one_chees_update_matches_the_oracle(inv_mass):
    """One pooled warm-up transition with T0 = 0.9 eps (so every chain runs one leapfrog step),
    step size and mass held: Adam's first moment after one update is (1 - beta1) g, so the state
    exposes the gradient estimate g itself; and log T moves by the clipped Adam step from log T0.
    A non-unit inverse mass checks that the estimate dots with the velocity m_inv p."""
    eps, cap = 0.7, 50
    length = 0.9 * eps
    gen = torch.Generator().manual_seed(5)
    q0 = 1.5 * torch.randn(CHAINS, DIM, generator=gen, dtype=torch.float64)
    mu = torch.zeros(DIM, dtype=torch.float64)
    z = ops.transition(q0, mu, eps, 1, "philox", seed=SEED, transition=0, trace=True).momentum

    q = q0.clone()
    m_inv = torch.tensor([inv_mass], dtype=torch.float64)
    chees = torch.tensor([length, 0, 0, 0, 1, 1, 0, 0], dtype=torch.float64)
    f64 = dict(dtype=torch.float64)
    run_op(q, "standard", [mu], [], torch.tensor([eps], **f64), m_inv.clone(), 0.0, cap, SEED, 0,
            0, 1, dual_averaging=torch.zeros(1, 3, **f64),
            window_mean=torch.zeros(CHAINS, DIM, **f64), window_m2=torch.zeros(CHAINS, DIM, **f64),
            warmup_start=0, num_warmup=1, chees=chees)

    m = m_inv.numpy()
    x0, p0 = q0.numpy(), z.numpy() / np.sqrt(m)  # p = z sqrt(M)
    half = p0 - 0.5 * eps * x0  # the standard target's force is x
    x1 = x0 + eps * m * half
    p1 = half - 0.5 * eps * x1
    energy_change = 0.5 * ((x1 ** 2 - x0 ** 2) + m * (p1 ** 2 - p0 ** 2)).sum(1)
    accept = np.minimum(1.0, np.exp(-energy_change))
    moved = q.numpy() != x0
    np.testing.assert_allclose(q.numpy()[moved], x1[moved], rtol=1e-12)  # accepted: x1
    w = _trajectory_jitter(1)[:, 0]
    m0 = x0.mean(0)
    m1 = (accept[:, None] * x1).sum(0) / (accept.sum() + 1e-20)
    d0, d1 = x0 - m0, x1 - m1
    g_chain = w * length * ((d1 ** 2).sum(1) - (d0 ** 2).sum(1)) * (d1 * m * p1).sum(1)
    g = (accept * g_chain).sum() / (accept.sum() + 1e-20)

    state = chees.numpy()
    assert state[6] == 1 and state[4] == 0.9 and state[5] == 0.999
    assert math.isclose(state[2], 0.1 * g, rel_tol=1e-11)            # Adam's m = (1 - b1) g
    assert math.isclose(state[3], 0.001 * g * g, rel_tol=1e-11)      # Adam's v = (1 - b2) g^2
    step = np.clip(0.025 * g / (abs(g) + 1e-8), -0.35, 0.35)
    assert math.isclose(state[1], math.log(length) + step, rel_tol=1e-12)  # the k = 1 average
    assert state[0] == max(eps, min(cap * eps, math.exp(state[1])))  # clipped to [eps, cap eps]


class _OneRank:
    """The ChainGroup interface RankPooledWarmup's ChEES sums use, for this process's chains."""
    chains = CHAINS

    @staticmethod
    def gather_on_device(values):
        return values[None]


def _one_step_oracle(q0, z, m, eps, length):
    """(x1, end velocity m p1, acceptance probability) of one leapfrog step of the standard
    target from q0 with momentum z sqrt(1 / m), in numpy float64."""
    x0, p0 = q0.numpy(), z.numpy() / np.sqrt(m)
    half = p0 - 0.5 * eps * x0
    x1 = x0 + eps * m * half
    p1 = half - 0.5 * eps * x1
    energy_change = 0.5 * ((x1 ** 2 - x0 ** 2) + m * (p1 ** 2 - p0 ** 2)).sum(1)
    return x1, m * p1, np.minimum(1.0, np.exp(-energy_change))


@pytest.mark.parametrize("inv_mass", [(1.0, 1.0, 1.0), (0.5, 1.0, 3.0)])
def test_the_trajectory_record_matches_the_oracle_and_feeds_the_same_update(inv_mass):
    """Sampling with chees (T read from chees[0]) records each chain's start, proposal, end
    velocity, acceptance probability and jitter (the oracle's, to rounding; the start and the
    jitter exactly) and leaves chees as it was; the cross-process path's sums of that record
    (fused_hmc.sampling.pooled_ranks over one rank) through pooled_update then give the ChEES
    state and step size the chain ops' pooled warm-up forms itself, to rounding (other sum orders)."""
    from fused_hmc.sampling.pooled_ranks import ChEESRecord

    eps, cap = 0.7, 50
    length = 0.9 * eps  # one leapfrog step for every chain
    gen = torch.Generator().manual_seed(5)
    q0 = 1.5 * torch.randn(CHAINS, DIM, generator=gen, dtype=torch.float64)
    mu = torch.zeros(DIM, dtype=torch.float64)
    z = ops.transition(q0, mu, eps, 1, "philox", seed=SEED, transition=0, trace=True).momentum
    m_inv = torch.tensor([inv_mass], dtype=torch.float64)
    f64 = dict(dtype=torch.float64)
    start = torch.tensor([length, 0, 0, 0, 1, 1, 0, 0], **f64)

    record = ChEESRecord(CHAINS, DIM, torch.device("cpu"))
    record.rows.fill_(float("nan"))
    chees, q = start.clone(), q0.clone()
    buffers = _sampling_buffers(CHAINS, DIM)
    run_op(q, "standard", [mu], [], torch.tensor([eps], **f64), m_inv.clone(), 0.0, cap, SEED,
            0, 0, 1, chees=chees, trajectory_record=record.rows, **buffers)
    assert torch.equal(chees, start)
    x1, velocity, accept = _one_step_oracle(q0, z, m_inv.numpy(), eps, length)
    rows = record.rows.numpy()
    assert np.array_equal(rows[:, :DIM], q0.numpy())
    np.testing.assert_allclose(rows[:, DIM:2 * DIM], x1, rtol=1e-12)
    np.testing.assert_allclose(rows[:, 2 * DIM:3 * DIM], velocity, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(rows[:, 3 * DIM], accept, rtol=1e-12)
    assert np.array_equal(rows[:, 3 * DIM + 1], _trajectory_jitter(1)[:, 0])
    np.testing.assert_allclose(buffers["accept_prob_sum"].numpy(), accept, rtol=1e-12)

    step, averaging = torch.tensor([eps], **f64), torch.zeros(1, 3, **f64)
    sums = record.sums(record.column_sums(), _OneRank, chees[0])
    a = buffers["accept_prob_sum"]
    ops.pooled_update(step, averaging, m_inv.clone(), torch.stack([a.sum(), a.new_tensor(a.numel())]),
                      None, 0.0, 0, 1, [], 0.651, True, False, chees=chees, chees_sums=sums,
                      max_leapfrog_steps=cap)

    kernel_chees, kernel_step = start.clone(), torch.tensor([eps], **f64)
    run_op(q0.clone(), "standard", [mu], [], kernel_step, m_inv.clone(), 0.0, cap, SEED, 0, 0, 1,
            dual_averaging=torch.zeros(1, 3, **f64), window_mean=torch.zeros(CHAINS, DIM, **f64),
            window_m2=torch.zeros(CHAINS, DIM, **f64), warmup_start=0, num_warmup=1,
            target_accept=0.651, adapt_step_size=True, chees=kernel_chees)
    torch.testing.assert_close(step, kernel_step, rtol=1e-13, atol=0)
    torch.testing.assert_close(chees, kernel_chees, rtol=1e-11, atol=0)
    assert chees[6] == 1  # one update happened


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("dim", [3, 64, 300])  # one chunk per lane, several, several per lane
@pytest.mark.parametrize("unit_mass", [False, True], ids=["mass", "unit"])
def test_cuda_records_what_the_cpu_records(dtype, dim, unit_mass):
    """The CUDA sampling kernel's trajectory record (math/hmc/transition.h's TrajectoryRecord
    and lane 0's acceptance and jitter) is the CPU build's, to the rounding by which CUDA and CPU
    momenta differ (cuda_cpu_tolerance; the jitter, a function of the stream alone, exactly),
    over three transitions
    whose trajectory length is read from chees on the device; the diagonal target is shifted;
    the mass is a non-unit one, or the empty unit mass (which the op hands the recording kernel
    as ones)."""
    chains, f64 = 37, dict(dtype=torch.float64)
    gen = torch.Generator().manual_seed(dim)
    q0 = torch.randn(chains, dim, generator=gen, dtype=dtype)
    mu = torch.randn(dim, generator=gen, dtype=dtype)
    precision = torch.rand(dim, generator=gen, dtype=dtype) + 0.5
    inv_mass = (torch.empty(0, dtype=dtype) if unit_mass
                else torch.rand(1, dim, generator=gen, dtype=dtype) + 0.5)
    out = {}
    for device in ("cpu", "cuda"):
        q = q0.to(device, copy=True)  # the op moves q in place: each device starts from q0
        record = torch.full((chains, 3 * dim + 2), float("nan"), device=device, **f64)
        buffers = {k: v.to(device) for k, v in _sampling_buffers(chains, dim).items()}
        run_op(q, "diagonal", [mu.to(device), precision.to(device)], [],
                torch.tensor([0.3], device=device, **f64), inv_mass.to(device), 0.1, 30, SEED, 5,
                2, 3, chees=torch.tensor([1.1, 0, 0, 0, 1, 1, 0, 0], device=device, **f64),
                trajectory_record=record, **buffers)
        out[device] = (q.cpu(), record.cpu(), buffers["accept_prob_sum"].cpu())
    for cpu, cuda in zip(out["cpu"], out["cuda"]):
        torch.testing.assert_close(cuda, cpu, **cuda_cpu_tolerance(dtype))
    jitter = 3 * dim + 1
    assert torch.equal(out["cuda"][1][:, jitter], out["cpu"][1][:, jitter])
    assert not torch.isnan(out["cpu"][1]).any()


def test_a_recording_call_with_the_unit_mass_is_one_with_ones():
    """The empty inv_mass (the unit mass) records as an inverse mass of ones, bit for bit."""
    f64 = dict(dtype=torch.float64)
    q0 = torch.randn(CHAINS, DIM, generator=torch.Generator().manual_seed(9), **f64)
    out = []
    for inv_mass in (torch.empty(0, **f64), torch.ones(1, DIM, **f64)):
        q, record = q0.clone(), torch.zeros(CHAINS, 3 * DIM + 2, **f64)
        run_op(q, "standard", [torch.zeros(DIM, **f64)], [], torch.tensor([0.4], **f64),
                inv_mass, 0.0, 20, SEED, 0, 0, 2,
                chees=torch.tensor([1.3, 0, 0, 0, 1, 1, 0, 0], **f64), trajectory_record=record,
                **_sampling_buffers(CHAINS, DIM))
        out.append((q, record))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])
