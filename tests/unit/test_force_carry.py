"""The force carried from one transition to the next (math/hmc/transition.h's ForceCarry, the CUDA
kernels' GroupForceCarry), for a target that carries it: a CppTarget (TARGETS.md's eight schools,
compiled once per dtype and device kind; the same module test_cpp_target builds).

The reference is the same op with every transition in a call of its own: each call evaluates the
force at its start, so it carries nothing. Both must give the same bits (the force is a function
of the position alone, and a carrying target's position is q itself), for sampling, per-chain
warm-up and pooled warm-up with ChEES; and the op's count is then L per transition plus one per
call, exactly. On CUDA this needs the model compiled as written (--fmad=false,
_build.USER_CUDA_FLAGS): with nvcc's contraction the two evaluations of the force differed in
their last bits in the pooled float32 kernel.
"""
from __future__ import annotations

import pytest
import torch

from fused_hmc import CppTarget

from ._helpers import run_op, run_op_state
from .test_cpp_target import DIM, NAMES, SOURCE, data, log_prob, points

CHAINS, TRANSITIONS, STEPS, SEED = 37, 6, 5, 21


@pytest.fixture(scope="module")
def eight_schools() -> CppTarget:
    return CppTarget(SOURCE, DIM, data=data(), names=NAMES, log_prob=log_prob)


def _state(mode: str, device: str, dtype: torch.dtype) -> dict:
    """The op's in-place tensors for `mode`: sampling, per_chain or pooled (ChEES) warm-up."""
    state = dict(q=points(CHAINS, 3).to(device, dtype),
                 **run_op_state(CHAINS, DIM, mode, device, mass_dtype=dtype))
    if mode == "pooled":
        state["chees"] = torch.tensor([0.15 * STEPS, 0, 0, 0, 1, 1, 0, 0], dtype=torch.float64,
                                      device=device)
    return state


def _run(target: CppTarget, mode: str, device: str, dtype: torch.dtype, calls: list[int]) -> dict:
    """TRANSITIONS transitions in calls of the given lengths, from the same start."""
    s = _state(mode, device, dtype)
    q, step_size, inv_mass = s.pop("q"), s.pop("step_size"), s.pop("inv_mass")
    name, tensors = target.op_name(dtype, q.device), target.op_tensors(dtype, q.device)
    options = {} if mode == "sampling" else dict(
        warmup_start=0, num_warmup=TRANSITIONS, windows=[2, 2, 2], target_accept=0.651,
        adapt_step_size=True, adapt_mass_matrix=True)
    cap = 3 * STEPS if mode == "pooled" else STEPS  # ChEES: STEPS is T0 / eps, 3 STEPS the cap
    first = 0
    for n in calls:
        if mode == "sampling":  # Welford's count goes on across calls
            options["kept_before"] = first
        run_op(q, name, tensors, target.op_scalars(), step_size, inv_mass, 0.0, cap, SEED, 0,
                first, n, **s, **options)
        first += n
    return dict(q=q, step_size=step_size, inv_mass=inv_mass, **s)


MODES = ["sampling", "per_chain", "pooled"]


def _check(target, mode, device, dtype):
    together = _run(target, mode, device, dtype, [TRANSITIONS])
    apart = _run(target, mode, device, dtype, [1] * TRANSITIONS)
    for key in together:
        if key != "gradient_evaluations":
            assert torch.equal(together[key], apart[key]), key
    one, many = together["gradient_evaluations"], apart["gradient_evaluations"]
    # The same trajectories: the counts differ by the forces evaluated at the calls' starts only.
    assert torch.equal(many - one, torch.full_like(one, TRANSITIONS - 1))
    if mode != "pooled":  # fixed L: L per transition plus one per call
        assert one.tolist() == [STEPS * TRANSITIONS + 1] * CHAINS
    else:  # jittered ChEES lengths: at least one step each; with one step size and the jitter
        # every chain shares, the same steps for every chain, and not the cap every time
        assert (one >= TRANSITIONS + 1).all() and len(set(one.tolist())) == 1
        assert int(one[0]) < 3 * STEPS * TRANSITIONS + 1
    if mode == "sampling":
        assert 0 < int(together["accept_count"].sum()) < CHAINS * TRANSITIONS  # both decisions


@pytest.mark.parametrize("mode", MODES)
def test_carried_force_changes_no_bit_and_saves_a_gradient_per_transition(eight_schools, mode):
    _check(eight_schools, mode, "cpu", torch.float64)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("mode", MODES)
def test_cuda_carried_force_changes_no_bit_and_saves_a_gradient_per_transition(
        eight_schools, mode, dtype):
    _check(eight_schools, mode, "cuda", dtype)
