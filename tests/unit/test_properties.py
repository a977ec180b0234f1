"""Property tests: hypothesis draws shapes (B and d among 1, primes and powers of two and their
neighbours), dtypes, memory layouts of q and of the noise (tests/unit/_layouts.py: permuted,
sliced, transposed, expanded, expanded-then-contiguous, offset), noise modes, step sizes, L and
mu, and every result is compared with the pure-torch reference (fused_hmc/reference.py).

What each mode promises, and is held to:
- external noise and rng="torch": q_new bit-identical to the reference wherever the accept
  decisions agree; decisions differ only at near ties (_helpers.assert_accepted_agree); with
  rng="torch" the generator ends in the reference's state.
- rng="philox" (checked through its traced noise): hmc_step equals the traced transition op bit for
  bit and does not depend on q's layout; the reference fed the traced noise decides alike except at near
  ties, and its proposal is within the rounding of the philox mode's fused-FMA leapfrog.
The cuda-marked variant runs more examples, larger shapes, and compares the CUDA kernels with the
CPU build as well. Run with -s to see how many cases each test ran, per mode.
"""
from __future__ import annotations

import collections
import dataclasses
import math

import pytest
import torch
from hypothesis import event, given, settings
from hypothesis import strategies as st

import fused_hmc
from fused_hmc import ops
from fused_hmc.reference import reference_hmc_step

from ._helpers import assert_accepted_agree, assert_bitwise_where_agree, rng_state
from ._layouts import LAYOUTS, make_layout

CPU_BATCHES = [1, 2, 3, 5, 7, 31, 32, 33, 64, 127, 128, 257]
CPU_DIMS = [1, 2, 3, 4, 5, 7, 8, 31, 32, 33, 64, 127, 128]
CUDA_BATCHES = CPU_BATCHES + [1023, 4099, 65537]
CUDA_DIMS = CPU_DIMS + [255, 256, 257, 1024, 4096]
MODES = ("external", "torch", "philox")
CASES_RUN: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


@dataclasses.dataclass(frozen=True)
class Case:
    batch: int
    dim: int
    dtype: torch.dtype
    layout: str          # q's
    mode: str
    step_size: float
    steps: int
    mu_kind: str         # "zero", "random", or "none" (hmc_step's default, zeros)
    seed: int
    noise_layout: str    # external momentum's
    uniform_dtype: torch.dtype
    default_generator: bool


@st.composite
def cases(draw, batches, dims, max_elements):
    dim = draw(st.sampled_from(dims))
    batch = draw(st.sampled_from([b for b in batches if b * dim <= max_elements]))
    return Case(batch=batch, dim=dim, dtype=draw(st.sampled_from([torch.float32, torch.float64])),
                layout=draw(st.sampled_from(LAYOUTS)), mode=draw(st.sampled_from(MODES)),
                step_size=draw(st.sampled_from([0.01, 0.1, 0.37, 0.9, 1.3])),
                steps=draw(st.sampled_from([1, 2, 3, 10, 17])),
                mu_kind=draw(st.sampled_from(["zero", "random", "none"])),
                seed=draw(st.integers(0, 2**31 - 1)), noise_layout=draw(st.sampled_from(LAYOUTS)),
                uniform_dtype=draw(st.sampled_from([torch.float32, torch.float64])),
                default_generator=draw(st.booleans()))


@pytest.fixture(scope="module", autouse=True)
def report_cases():
    yield
    for test, counts in sorted(CASES_RUN.items()):
        print(f"\n{test}: {sum(counts.values())} cases ({dict(sorted(counts.items()))})")


def _inputs(case: Case, device):
    """q in the case's layout, and (mu for fused_hmc, mu for the reference)."""
    gen = torch.Generator().manual_seed(case.seed)
    q = make_layout(gen, case.batch, case.dim, dtype=case.dtype, device=device, layout=case.layout)
    if case.mu_kind == "random":
        mu = torch.randn(case.dim, generator=gen, dtype=case.dtype).to(device)
        return q, mu, mu
    zeros = torch.zeros(case.dim, dtype=case.dtype, device=device)
    return q, (None if case.mu_kind == "none" else zeros), zeros


def _external(case: Case, device):
    q, mu, mu_ref = _inputs(case, device)
    gen = torch.Generator().manual_seed(case.seed + 1)
    momentum = make_layout(gen, case.batch, case.dim, dtype=case.dtype, device=device,
                           layout=case.noise_layout)
    uniform = torch.rand(2 * case.batch, generator=gen, dtype=case.uniform_dtype)[::2].to(device)
    before = [t.clone() for t in (q, momentum, uniform)]
    q_new, accepted = fused_hmc.hmc_step(q, mu, momentum=momentum, uniform=uniform,
                                         step_size=case.step_size,
                                         num_leapfrog_steps=case.steps)
    assert all(torch.equal(a, b) for a, b in zip((q, momentum, uniform), before))
    q_ref, acc_ref = reference_hmc_step(q, mu_ref, case.step_size, case.steps, momentum=momentum,
                                        uniform=uniform)
    agree = assert_accepted_agree(accepted, acc_ref, q, mu_ref, momentum, uniform, case.step_size,
                                  case.steps)
    assert_bitwise_where_agree(q_new, q_ref, agree)
    return q_new, accepted


def _torch_mode(case: Case, device):
    device = torch.device(device)
    q, mu, mu_ref = _inputs(case, device)
    kwargs = dict(step_size=case.step_size, num_leapfrog_steps=case.steps)

    def seeded():
        if case.default_generator:
            torch.manual_seed(case.seed)
            return None
        return torch.Generator(device=device).manual_seed(case.seed)

    gen = seeded()
    q_new, accepted = fused_hmc.hmc_step(q, mu, rng="torch", generator=gen, **kwargs)
    state = rng_state(device) if gen is None else gen.get_state()
    gen = seeded()
    q_ref, acc_ref = reference_hmc_step(q, mu_ref, case.step_size, case.steps, generator=gen)
    assert torch.equal(state, rng_state(device) if gen is None else gen.get_state())
    gen = seeded()
    momentum = torch.empty_like(q).normal_(generator=gen)
    uniform = torch.rand(case.batch, device=device, generator=gen)
    agree = assert_accepted_agree(accepted, acc_ref, q, mu_ref, momentum, uniform, case.step_size,
                                  case.steps)
    assert_bitwise_where_agree(q_new, q_ref, agree)
    return q_new, accepted


def _philox_position_tolerance(case: Case, q, mu, momentum):
    """The fused-FMA leapfrog rounds each of its L + 1 stages differently from the reference's
    unfused one: a few unit roundoffs of the stage's magnitudes each, carried along a rotation that
    amplifies errors in q by at most 1 / s, s = sqrt(1 - eps^2 / 4) (Neal 2011, sec. 5.2.3.3).
    2 u (L + 1) (|x0| + |p0| + |mu| + 1) / s per chain covers it (the largest error measured over
    1000 CPU cases was 0.32 of this bound)."""
    u = torch.finfo(case.dtype).eps / 2
    s = math.sqrt(1 - case.step_size ** 2 / 4)
    x0 = (q - mu).abs().amax(-1, keepdim=True).double()
    p0 = momentum.abs().amax(-1, keepdim=True).double()
    return 2 * u * (case.steps + 1) * (x0 + p0 + 1 + mu.abs().amax().double()) / s


def _philox(case: Case, device):
    q, mu, mu_ref = _inputs(case, device)
    transition = case.seed % 5
    traced = ops.transition(q, mu_ref, case.step_size, case.steps, "philox", None, case.seed,
                            transition, trace=True)
    q_new, accepted, momentum, uniform = traced
    plain = fused_hmc.hmc_step(q, mu, rng="philox", seed=case.seed, transition=transition,
                               step_size=case.step_size, num_leapfrog_steps=case.steps)
    assert torch.equal(plain[0], q_new) and torch.equal(plain[1], accepted)
    dense = fused_hmc.hmc_step(q.contiguous(), mu, rng="philox", seed=case.seed,
                               transition=transition, step_size=case.step_size,
                               num_leapfrog_steps=case.steps)
    assert torch.equal(dense[0], q_new) and torch.equal(dense[1], accepted)
    q_ref, acc_ref = reference_hmc_step(q, mu_ref, case.step_size, case.steps, momentum=momentum,
                                        uniform=uniform)
    agree = assert_accepted_agree(accepted, acc_ref, q, mu_ref, momentum, uniform, case.step_size,
                                  case.steps).to(q.device)
    rejected = agree & ~accepted
    assert torch.equal(q_new[rejected], q[rejected])
    err = (q_new.double() - q_ref.double()).abs()[agree & accepted]
    tol = _philox_position_tolerance(case, q, mu_ref, momentum)[agree & accepted]
    assert (err <= tol).all(), float((err / tol).max())
    return traced


CHECKS = {"external": _external, "torch": _torch_mode, "philox": _philox}


def _count(test: str, case: Case):
    CASES_RUN[test][case.mode] += 1
    event(f"mode={case.mode}")
    event(f"layout={case.layout}")


@settings(max_examples=600)
@given(cases(CPU_BATCHES, CPU_DIMS, max_elements=1 << 14))
def test_cpu_matches_reference(case):
    _count("test_cpu_matches_reference", case)
    CHECKS[case.mode](case, "cpu")


def _cpu_copy(t):
    return t.cpu() if isinstance(t, torch.Tensor) else t


@pytest.mark.cuda
@settings(max_examples=2000)
@given(cases(CUDA_BATCHES, CUDA_DIMS, max_elements=1 << 21))
def test_cuda_matches_reference_and_cpu_build(case):
    _count("test_cuda_matches_reference_and_cpu_build", case)
    out = CHECKS[case.mode](case, "cuda")
    if case.mode == "torch":
        return  # torch's CUDA and CPU generators draw different numbers: nothing to compare
    cpu = CHECKS[case.mode](case, "cpu")
    gpu = [_cpu_copy(t) for t in out]
    agree = cpu[1] == gpu[1]
    assert int((~agree).sum()) <= 2 + case.batch // 512
    if case.mode == "external":
        assert torch.equal(cpu[0][agree], gpu[0][agree])
        return
    # philox: the same words; normals within __sincosf's error times the radius
    # sqrt(-2 log u) <= 6.7 in float32, a few ulp (sincospi) in float64 (test_cuda_kernel.py)
    assert torch.equal(cpu[3], gpu[3])
    tol = 6.7 * 2 ** -21.4 + 1e-6 if case.dtype == torch.float32 else 1e-13
    assert (cpu[2] - gpu[2]).abs().max() <= tol
    # a momentum error moves the proposal by at most itself / s along the rotation (see
    # _philox_position_tolerance), on top of the rounding both builds share
    q, _, mu_ref = _inputs(case, "cpu")
    s = math.sqrt(1 - case.step_size ** 2 / 4)
    bound = 2 * tol / s + _philox_position_tolerance(case, q, mu_ref, cpu[2])
    assert ((cpu[0] - gpu[0]).abs().double() <= bound)[agree].all()
