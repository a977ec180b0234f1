"""torch.library.opcheck on every operator the extension registers: schema (mutation annotations,
aliasing), autograd registration, the fake impls against the real kernels (shapes, dtypes,
strides), and AOT dispatch, on CPU and (marked cuda) CUDA, float32 and float64: the transition op
in each noise mode, traced and not, and for a non-contiguous q; the sample and warmup ops for each
target, with shared (G = 1, pooled) and per-chain (G = B) step sizes. The list of
operators comes from the dispatcher (both libraries, fused_hmc and fused_hmc_testing), so an
operator added without samples here fails test_every_registered_op_has_samples.
"""
from __future__ import annotations

import pytest
import torch

from fused_hmc import _build
from fused_hmc.sampling import chain_statistics

from ._helpers import randn, seeded_generator

B, D = 5, 3
_F64 = dict(dtype=torch.float64)
LIBRARIES = ("fused_hmc", "fused_hmc_testing")


def _state(device, dtype, transposed=False):
    gen = seeded_generator("opcheck", dtype, transposed)
    q = randn(gen, D, B, dtype=dtype, device=device).t() if transposed else \
        randn(gen, B, D, dtype=dtype, device=device)
    return q, randn(gen, D, dtype=dtype, device=device)


def _statistics(device):
    """The chain statistics (zeros, in the def's order and dtypes)."""
    return chain_statistics.as_list(chain_statistics.zeros(B, device))


def _moments(device):
    """mean, m2 [B, d] float64."""
    return dict(mean=torch.zeros(B, D, device=device, **_F64),
                m2=torch.zeros(B, D, device=device, **_F64))


def _chees_state(device):
    """ChEES's initial state [T0, 0, 0, 0, 1, 1, 0, 0] with T0 = 1.2."""
    return torch.tensor([1.2, 0, 0, 0, 1, 1, 0, 0], device=device, **_F64)


def _targets(device, dtype, mu):
    """(name, target_tensors) of each Gaussian target: standard, diagonal, dense SPD."""
    a = randn(seeded_generator("opcheck-precision"), D, D, dtype=dtype, device=device)
    return [("standard", [mu]),
            ("diagonal", [mu, torch.full((D,), 2.0, dtype=dtype, device=device)]),
            ("dense", [mu, a @ a.t() + D * torch.eye(D, dtype=dtype, device=device)])]


def _transition(device, dtype):
    q, mu = _state(device, dtype)
    q_t, _ = _state(device, dtype, transposed=True)
    p = randn(seeded_generator("opcheck-p"), B, D, dtype=dtype, device=device)
    samples = []
    for trace in (False, True):
        samples += [((q, mu, 0.3, 4, "torch"), dict(trace=trace)),
                    ((q_t, mu, 0.3, 4, "torch"), dict(trace=trace)),
                    ((q, mu, 0.3, 4, "philox"), dict(trace=trace)),
                    ((q_t, mu, 0.3, 4, "philox", None, 7, 2), dict(trace=trace))]
        samples += [((q, mu, 0.3, 4, "given"),
                     dict(momentum=p, uniform=torch.rand(B, dtype=u, device=device), trace=trace))
                    for u in (torch.float32, torch.float64)]
    return samples


def _philox4x32(device, dtype):
    counters = torch.randint(-2**31, 2**31 - 1, (6, 4), dtype=torch.int32,
                             generator=seeded_generator("opcheck-counters")).to(device)
    return [((counters, 0x1234_5678_9ABC_DEF0), {})]


def _chain_ops(device, dtype):
    """{op: samples} of the sample op (draws kept and thinned, none kept as None and as an empty
    tensor; once with an empty inv_mass, the unit mass) and the warmup op (given windows and
    Stan's; both adaptations or the step size only), each target with G = 1 and G = B; for
    each target ChEES's pooled warm-up and a sampling call recording for it; and on the CPU a
    dense mass (its factors [G, d, d]) for both ops."""
    q, mu = _state(device, dtype)
    sample, warmup = [], []
    pairs = zip(_targets(device, dtype, mu) * 2, (1, B, 1, B, 1, B))
    for i, ((name, tensors), groups) in enumerate(pairs):
        step = torch.full((groups,), 0.3, device=device, **_F64)
        inv_mass = torch.full((groups, D), 0.8, dtype=dtype, device=device)
        unit = torch.empty(0, dtype=dtype, device=device)  # sampling: the unit mass
        head = (name, tensors, [], step, unit if i == 3 else inv_mass, 0.2, 4, 7, 0)
        warm_head = (name, tensors, [], step, inv_mass, 0.2, 4, 7, 0)
        kept = [torch.zeros(B, 2, D, dtype=dtype, device=device), None,
                torch.empty(0, dtype=dtype, device=device)][i % 3]
        thin = 2 if i % 3 == 0 else 1  # transitions 3..6, thin 2: two kept
        sample.append(((q.clone(), *head, 3, 4, _statistics(device)),
                       dict(thin=thin, kept_before=1, samples=kept, **_moments(device))))
        adaptation = dict(dual_averaging=torch.zeros(groups, 3, device=device, **_F64),
                          window_mean=torch.zeros(B, D, device=device, **_F64),
                          window_m2=torch.zeros(B, D, device=device, **_F64), warmup_start=0,
                          num_warmup=40, windows=[5, 5, 5] if i % 2 else [],
                          target_accept=0.8, adapt_step_size=True,
                          adapt_mass_matrix=i != 4)
        warmup.append(((q.clone(), *warm_head, 0, 20, _statistics(device)), adaptation))
        if groups == 1 and i < 3:  # ChEES: its pooled warm-up, and sampling that records for it
            warmup.append(((q.clone(), *warm_head, 0, 20, _statistics(device)),
                           dict(adaptation, chees=_chees_state(device),
                                harmonic_acceptance=i == 1)))
            record = torch.zeros(B, 3 * D + 2, device=device, **_F64)
            sample.append(((q.clone(), *head, 3, 1, _statistics(device)),
                           dict(chees=_chees_state(device), trajectory_record=record,
                                **_moments(device))))
        if i < 3:  # a dense mass: its factors [G, d, d]
            factor = (torch.eye(D, dtype=dtype, device=device) * 0.9).expand(
                groups, D, D).contiguous()
            dense_head = (name, tensors, [], step, factor, 0.2, 4, 7, 0)
            sample.append(((q.clone(), *dense_head, 3, 4, _statistics(device)),
                           dict(thin=thin, kept_before=1, samples=kept, **_moments(device))))
            warmup.append(((q.clone(), *dense_head, 0, 20, _statistics(device)),
                           dict(adaptation,
                                window_m2=torch.zeros(B, D, D, device=device, **_F64))))
            if device != "cpu":  # the estimate from the gradients is the CPU's only
                continue
            # the inverse mass from the draws and the gradients: windows [2, B, ...]
            warmup.append(((q.clone(), *dense_head, 0, 20, _statistics(device)),
                           dict(adaptation, gradient_mass_estimate=True,
                                window_mean=torch.zeros(2, B, D, device=device, **_F64),
                                window_m2=torch.zeros(2, B, D, D, device=device, **_F64))))
    return {"sample": sample, "warmup": warmup}


def _sample(device, dtype):
    return _chain_ops(device, dtype)["sample"]


def _warmup(device, dtype):
    return _chain_ops(device, dtype)["warmup"]


def _pooled_update(device, dtype):
    """A step-size update mid-warm-up, one at a slow window's end with the variance, one with
    ChEES's on the harmonic mean, and on the CPU one of a dense mass's factor from a pooled covariance."""
    f64 = dict(device=device, **_F64)
    state = lambda: (torch.full((1,), 0.3, **f64), torch.zeros(1, 3, **f64),  # noqa: E731
                     torch.full((1, D), 0.8, dtype=dtype, device=device))
    terms = lambda: torch.tensor([0.7, 1.0], **f64)  # noqa: E731 - one chain's (x, w)
    return [((*state(), terms(), None, 0.0, 0, 40, [5, 5, 5], 0.8, True, True), {}),
            ((*state(), terms(), torch.full((D,), 2.0, **f64), 35.0, 9, 40, [5, 5, 5], 0.8, True,
              True), {}),
            ((*state(), torch.tensor([1.5, 1.0], **f64), None, 0.0, 3, 40, [5, 5, 5], 0.651, True,
              True), dict(chees=_chees_state(device), chees_sums=torch.tensor([0.4, 3.5], **f64),
                          max_leapfrog_steps=20, harmonic_acceptance=True)),
            *([((torch.full((1,), 0.3, **f64), torch.zeros(1, 3, **f64),
                 torch.eye(D, dtype=dtype, device=device)[None].contiguous(),
                 terms(), 2.0 * torch.eye(D, **f64), 35.0, 9, 40,
                 [5, 5, 5], 0.8, True, True), {})] if device == "cpu" else [])]


SAMPLES = {
    "fused_hmc::transition": _transition,
    "fused_hmc::sample": _sample,
    "fused_hmc::warmup": _warmup,
    "fused_hmc::pooled_update": _pooled_update,
    "fused_hmc_testing::philox4x32": _philox4x32,
}


def _registered_ops() -> set[str]:
    _build.load_extension()
    return {name for name in torch._C._dispatch_get_all_op_names()
            if name.split("::")[0] in LIBRARIES}


def test_every_registered_op_has_samples():
    assert _registered_ops() == set(SAMPLES)


def _op(name):
    library, op = name.split("::")
    return getattr(getattr(torch.ops, library), op).default


def _opcheck(name, device, dtype):
    _build.load_extension()
    for args, kwargs in SAMPLES[name](device, dtype):
        torch.library.opcheck(_op(name), args, kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_opcheck(device, name, dtype):
    _opcheck(name, device, dtype)


def test_chain_op_samples_cover_each_target_and_grouping():
    """The sample and warmup ops' samples: every target, each with G = 1 and G = B."""
    seen = set()
    for mode, samples in _chain_ops("cpu", torch.float32).items():
        for args, _ in samples:
            seen.add((mode, args[1], "pooled" if args[4].shape[0] == 1 else "per-chain"))
    assert seen == {(m, t, g) for m in ("sample", "warmup")
                    for t in ("standard", "diagonal", "dense") for g in ("pooled", "per-chain")}


def test_opcheck_under_float64_default_dtype(device):
    """torch.rand(B) is float64 then: the transition op and its fake impl must agree on it too."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _opcheck("fused_hmc::transition", device, torch.float32)
    finally:
        torch.set_default_dtype(before)
