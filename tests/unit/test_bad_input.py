"""Bad arguments raise ValueError/TypeError naming the argument, and leave every input untouched."""
from __future__ import annotations

import math

import pytest
import torch

import fused_hmc
from fused_hmc.sampling import chain_statistics

from ._helpers import rng_state


def _inputs(device, batch=6, dim=4, dtype=torch.float32):
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(batch, dim, generator=gen, dtype=dtype).to(device)
    mu = torch.randn(dim, generator=gen, dtype=dtype).to(device)
    p = torch.randn(batch, dim, generator=gen, dtype=dtype).to(device)
    u = torch.rand(batch, generator=gen).to(device)
    return q, mu, p, u


def _step(q, mu=None, **kw):
    return fused_hmc.hmc_step(q, mu, **kw)


# (id, call(q, mu, p, u, device), exception, message pattern naming the argument)
CASES = [
    ("q-rank-1", lambda q, mu, p, u, dev: _step(q[0], mu), ValueError, r"\bq must be a 2-D"),
    ("q-rank-3", lambda q, mu, p, u, dev: _step(q[None], mu), ValueError, r"\bq must be a 2-D"),
    ("q-rank-1-noise", lambda q, mu, p, u, dev: _step(q[0], mu, momentum=p[0], uniform=u[:1]),
     ValueError, r"\bq must be a 2-D"),
    ("q-int", lambda q, mu, p, u, dev: _step(q.to(torch.int64)), TypeError, r"\bq must be float"),
    ("q-int-with-mu", lambda q, mu, p, u, dev: _step(q.to(torch.int32), mu), TypeError,
     r"\bq must be float"),
    ("q-bool", lambda q, mu, p, u, dev: _step(q > 0), TypeError, r"\bq must be float"),
    ("q-half", lambda q, mu, p, u, dev: _step(q.half()), TypeError, r"\bq must be float"),
    ("q-empty-dim", lambda q, mu, p, u, dev: _step(q[:, :0]), ValueError, r"\bq must have dim"),
    ("mu-dtype", lambda q, mu, p, u, dev: _step(q, mu.double()), TypeError, r"\bmu must have q's"),
    ("mu-shape", lambda q, mu, p, u, dev: _step(q, mu[:-1]), ValueError, r"\bmu must have shape"),
    ("mu-rank", lambda q, mu, p, u, dev: _step(q, mu[None]), ValueError, r"\bmu must have shape"),
    ("momentum-dtype", lambda q, mu, p, u, dev: _step(q, mu, momentum=p.double(), uniform=u),
     TypeError, r"\bmomentum must have q's dtype"),
    ("momentum-shape", lambda q, mu, p, u, dev: _step(q, mu, momentum=p[:, :-1], uniform=u),
     ValueError, r"\bmomentum must have q's shape"),
    ("momentum-rank", lambda q, mu, p, u, dev: _step(q, mu, momentum=p[:, 0], uniform=u),
     ValueError, r"\bmomentum must have q's shape"),
    ("uniform-dtype-half", lambda q, mu, p, u, dev: _step(q, mu, momentum=p, uniform=u.half()),
     TypeError, r"\buniform must be float32 or float64"),
    ("uniform-dtype-int", lambda q, mu, p, u, dev: _step(q, mu, momentum=p, uniform=u.long()),
     TypeError, r"\buniform must be float32 or float64"),
    ("uniform-shape", lambda q, mu, p, u, dev: _step(q, mu, momentum=p, uniform=u[:-1]),
     ValueError, r"\buniform must have shape"),
    ("uniform-rank", lambda q, mu, p, u, dev: _step(q, mu, momentum=p, uniform=u[:, None]),
     ValueError, r"\buniform must have shape"),
    ("only-momentum", lambda q, mu, p, u, dev: _step(q, mu, momentum=p), ValueError,
     r"momentum and uniform"),
    ("only-uniform", lambda q, mu, p, u, dev: _step(q, mu, uniform=u), ValueError,
     r"momentum and uniform"),
    ("rng-foo", lambda q, mu, p, u, dev: _step(q, mu, rng="foo"), ValueError, r"\brng must be"),
    ("noise-foo-op", lambda q, mu, p, u, dev: fused_hmc.ops.transition(q, mu, 0.1, 10, "foo"),
     ValueError, r'\bnoise must be "philox", "torch" or "given", got "foo"'),
    ("given-without-momentum", lambda q, mu, p, u, dev: fused_hmc.ops.transition(
        q, mu, 0.1, 10, "given"), ValueError, r'noise="given" needs momentum and uniform'),
    ("given-without-uniform", lambda q, mu, p, u, dev: fused_hmc.ops.transition(
        q, mu, 0.1, 10, "given", momentum=p), ValueError,
     r'noise="given" needs momentum and uniform'),
    ("momentum-with-philox", lambda q, mu, p, u, dev: fused_hmc.ops.transition(
        q, mu, 0.1, 10, "philox", momentum=p, uniform=u), ValueError,
     r'momentum and uniform are the noise of noise="given"'),
    ("uniform-with-torch", lambda q, mu, p, u, dev: fused_hmc.ops.transition(
        q, mu, 0.1, 10, "torch", uniform=u), ValueError,
     r'momentum and uniform are the noise of noise="given"'),
    ("generator-with-given", lambda q, mu, p, u, dev: fused_hmc.ops.transition(
        q, mu, 0.1, 10, "given", torch.Generator(dev), momentum=p, uniform=u), ValueError,
     r'noise="given" draws nothing: generator, seed and transition do not apply'),
    ("seed-with-given", lambda q, mu, p, u, dev: fused_hmc.ops.transition(
        q, mu, 0.1, 10, "given", seed=1, momentum=p, uniform=u), ValueError,
     r'noise="given" draws nothing'),
    ("transition-with-given", lambda q, mu, p, u, dev: fused_hmc.ops.transition(
        q, mu, 0.1, 10, "given", transition=2, momentum=p, uniform=u), ValueError,
     r'noise="given" draws nothing'),
    ("seed-with-torch-op", lambda q, mu, p, u, dev: fused_hmc.ops.transition(
        q, mu, 0.1, 10, "torch", seed=1), ValueError,
     r'seed= keys the native stream and needs noise="philox"'),
    ("seed-with-torch-rng", lambda q, mu, p, u, dev: _step(q, mu, rng="torch", seed=1), ValueError,
     r"\bseed="),
    ("transition-without-seed", lambda q, mu, p, u, dev: _step(q, mu, rng="philox", transition=3),
     ValueError, r"\btransition="),
    ("transition-negative", lambda q, mu, p, u, dev: _step(q, mu, rng="philox", seed=1,
                                                          transition=-1),
     ValueError, r"\btransition must be"),
    ("module-dim-mismatch", lambda q, mu, p, u, dev: fused_hmc.HMC(q.shape[1] + 1).to(dev)(q),
     ValueError, r"\bq must have shape \[batch, 5\]"),
    ("module-dim-64-given-63", lambda q, mu, p, u, dev: fused_hmc.HMC(64).to(dev)(
        torch.zeros(q.shape[0], 63, device=dev)), ValueError, r"\bq must have shape \[batch, 64\]"),
    ("module-rank", lambda q, mu, p, u, dev: fused_hmc.HMC(q.shape[1]).to(dev)(q[0]), ValueError,
     r"\bq must have shape"),
    ("module-int-q", lambda q, mu, p, u, dev: fused_hmc.HMC(q.shape[1]).to(dev)(q.long()),
     TypeError, r"\bq must be float"),
]
for _steps in (0, -1):
    CASES.append((f"L={_steps}", lambda q, mu, p, u, dev, s=_steps: _step(q, mu,
                                                                         num_leapfrog_steps=s),
                  ValueError, r"\bnum_leapfrog_steps must be"))
    CASES.append((f"L={_steps}-noise", lambda q, mu, p, u, dev, s=_steps: _step(
        q, mu, momentum=p, uniform=u, num_leapfrog_steps=s), ValueError,
        r"\bnum_leapfrog_steps must be"))
for _eps in (0.0, -0.1, math.inf, -math.inf, math.nan):
    CASES.append((f"eps={_eps}", lambda q, mu, p, u, dev, e=_eps: _step(q, mu, step_size=e),
                  ValueError, r"\bstep_size must be finite"))
    CASES.append((f"eps={_eps}-philox", lambda q, mu, p, u, dev, e=_eps: _step(
        q, mu, step_size=e, rng="philox", seed=1), ValueError, r"\bstep_size must be finite"))
    CASES.append((f"eps={_eps}-noise", lambda q, mu, p, u, dev, e=_eps: _step(
        q, mu, momentum=p, uniform=u, step_size=e), ValueError, r"\bstep_size must be finite"))


# Plain numbers of the wrong type or beyond 64 bits: a short error naming the argument (they were
# pybind's "incompatible function arguments" listing every overload).
CASES += [
    ("L=2.5", lambda q, mu, p, u, dev: _step(q, mu, num_leapfrog_steps=2.5), TypeError,
     r"^num_leapfrog_steps must be an integer, got 2.5$"),
    ("L=True", lambda q, mu, p, u, dev: _step(q, mu, num_leapfrog_steps=True), TypeError,
     r"^num_leapfrog_steps must be an integer, got True$"),
    ("L=2**40", lambda q, mu, p, u, dev: _step(q, mu, num_leapfrog_steps=2**40), ValueError,
     r"^num_leapfrog_steps must be in \[1, 2\^31 - 1\]"),
    ("seed=2**64", lambda q, mu, p, u, dev: _step(q, mu, seed=2**64), ValueError,
     r"^seed must be in \[0, 2\*\*64\), got 18446744073709551616$"),
    ("seed=1.0", lambda q, mu, p, u, dev: _step(q, mu, seed=1.0), TypeError,
     r"^seed must be an integer, got 1.0$"),
    ("transition=1.5", lambda q, mu, p, u, dev: _step(q, mu, seed=1, transition=1.5), TypeError,
     r"^transition must be an integer"),
    ("transition=2**64", lambda q, mu, p, u, dev: _step(q, mu, seed=1, transition=2**64),
     ValueError, r"^transition must be in \[0, 2\*\*63\)"),
    ("eps='a'", lambda q, mu, p, u, dev: _step(q, mu, step_size="0.1"), TypeError,
     r"^step_size must be a number, got '0.1'$"),
    ("eps-noise-L=2.5", lambda q, mu, p, u, dev: _step(q, mu, momentum=p, uniform=u,
                                                        num_leapfrog_steps=2.5), TypeError,
     r"^num_leapfrog_steps must be an integer"),
]


def test_seeds_up_to_2_64_are_the_ops_int64_seeds(device):
    """seed s >= 2**63 is the stream the op keys with s - 2**64 (the same 64 bits)."""
    q = _inputs(device)[0]
    for seed in (2**63, 2**64 - 1):
        assert torch.equal(_step(q, seed=seed)[0], _step(q, seed=seed - 2**64)[0])
    assert not torch.equal(_step(q, seed=2**64 - 1)[0], _step(q, seed=2**63)[0])


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_call_raises_naming_the_argument(device, case):
    _, call, exc, pattern = case
    q, mu, p, u = _inputs(device)
    originals = [t.clone() for t in (q, mu, p, u)]
    state = rng_state(device)
    with pytest.raises(exc, match=pattern):
        call(q, mu, p, u, device)
    for after, before in zip((q, mu, p, u), originals):
        assert torch.equal(after, before), "a failed call modified an input"
    assert torch.equal(rng_state(device), state), "a failed call consumed random numbers"


@pytest.mark.parametrize("kwargs,pattern", [
    ({"dim": 0}, r"\bdim must be"),
    ({"dim": 2.0}, r"\bdim must be"),
    ({"dim": True}, r"\bdim must be"),
    ({"dim": 4, "num_leapfrog_steps": 0}, r"\bnum_leapfrog_steps must be"),
    ({"dim": 4, "num_leapfrog_steps": -3}, r"\bnum_leapfrog_steps must be"),
    ({"dim": 4, "num_leapfrog_steps": 2.0}, r"\bnum_leapfrog_steps must be"),
    ({"dim": 4, "step_size": 0.0}, r"\bstep_size must be"),
    ({"dim": 4, "step_size": -0.1}, r"\bstep_size must be"),
    ({"dim": 4, "step_size": math.inf}, r"\bstep_size must be"),
    ({"dim": 4, "step_size": math.nan}, r"\bstep_size must be"),
    ({"dim": 4, "rng": "foo"}, r"\brng must be"),
])
def test_module_constructor_rejects(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        fused_hmc.HMC(**kwargs)


@pytest.mark.cuda
@pytest.mark.parametrize("which", ["mu", "momentum", "uniform"])
def test_device_mismatch_names_the_argument(which):
    q, mu, p, u = _inputs("cuda")
    parts = {"mu": mu, "momentum": p, "uniform": u}
    parts[which] = parts[which].cpu()
    with pytest.raises(ValueError, match=rf"\b{which} must be on q's device"):
        fused_hmc.hmc_step(q, parts["mu"], momentum=parts["momentum"], uniform=parts["uniform"])
    q_cpu = q.cpu()
    with pytest.raises((ValueError, RuntimeError), match=r"\b(mu|q)\b"):
        fused_hmc.hmc_step(q_cpu, mu)  # CPU q, CUDA mu


def _run_arguments(device, mode, batch=6, dim=4, dtype=torch.float32):
    """A valid call of the sample op ("sampling") or the warmup op ("warmup") on the diagonal
    target (keywords)."""
    q, mu, _, _ = _inputs(device, batch, dim, dtype)
    f64 = dict(dtype=torch.float64, device=device)
    args = dict(q=q, target="diagonal", target_tensors=[mu, torch.full((dim,), 2.0, dtype=dtype,
                                                                        device=device)],
                target_scalars=[], step_size=torch.full((1,), 0.1, **f64),
                inv_mass=torch.ones(1, dim, dtype=dtype, device=device), jitter=0.0,
                num_leapfrog_steps=3, seed=0, chain_offset=0, first_transition=0,
                num_transitions=2,
                statistics=chain_statistics.as_list(chain_statistics.zeros(batch, device)))
    if mode == "sampling":
        args.update(samples=torch.zeros(batch, 2, dim, dtype=dtype, device=device),
                    mean=torch.zeros(batch, dim, **f64), m2=torch.zeros(batch, dim, **f64))
    else:
        args.update(dual_averaging=torch.zeros(1, 3, **f64),
                    window_mean=torch.zeros(batch, dim, **f64),
                    window_m2=torch.zeros(batch, dim, **f64), warmup_start=0, num_warmup=10,
                    windows=[2, 3, 1], target_accept=0.8, adapt_step_size=True,
                    adapt_mass_matrix=True)
    return args


def _call(mode, args):
    (fused_hmc.ops.sample if mode == "sampling" else fused_hmc.ops.warmup)(**args)


def _statistic(a, i, tensor):
    """The statistics list with entry i replaced."""
    statistics = list(a["statistics"])
    statistics[i] = tensor
    return statistics


def _tensors(a):
    return [x for x in a if isinstance(x, torch.Tensor)]


def _mu(a):
    return a["target_tensors"][0]


def _chees_state(a):
    return torch.tensor([0.3, 0, 0, 0, 1, 1, 0, 0], dtype=torch.float64, device=a["q"].device)


def _record(a):
    """A trajectory record [6, 3 * 4 + 2] for _run_arguments' chains."""
    return torch.zeros(6, 14, dtype=torch.float64, device=a["q"].device)


# (id, mode, changes(arguments) -> the arguments to change, exception, message pattern)
RUN_CASES = [
    ("unknown-target", "sampling", lambda a: dict(target="nope"), ValueError,
     r'unknown target "nope"; the known targets are (?=.*"dense")(?=.*"diagonal")'
     r'(?=.*"standard")'),
    ("standard-given-two-tensors", "sampling", lambda a: dict(target="standard"), ValueError,
     r'target "standard" takes 1 target_tensors, got 2'),
    ("dense-given-one-tensor", "sampling",
     lambda a: dict(target="dense", target_tensors=[_mu(a)]), ValueError,
     r'target "dense" takes 2 target_tensors, got 1'),
    ("diagonal-given-none", "warmup", lambda a: dict(target_tensors=[]), ValueError,
     r'target "diagonal" takes 2 target_tensors, got 0'),
    ("mu-shape", "sampling", lambda a: dict(target_tensors=[_mu(a)[:-1], a["target_tensors"][1]]),
     ValueError, r"\bmu of the diagonal target must have shape \[4\], got \[3\]"),
    ("precision-shape", "warmup", lambda a: dict(target_tensors=[_mu(a), _mu(a)[None]]),
     ValueError, r"\bprecision of the diagonal target must have shape \[4\], got \[1, 4\]"),
    ("dense-precision-vector", "sampling",
     lambda a: dict(target="dense", target_tensors=a["target_tensors"]), ValueError,
     r"\bprecision of the dense target must have shape \[4, 4\], got \[4\]"),
    ("precision-dtype", "sampling",
     lambda a: dict(target_tensors=[_mu(a), a["target_tensors"][1].double()]), TypeError,
     r"\bprecision must have q's dtype Float, got Double"),
    ("mu-dtype", "warmup", lambda a: dict(target_tensors=[_mu(a).double(),
                                                          a["target_tensors"][1]]),
     TypeError, r"\bmu must have q's dtype"),
    ("precision-not-contiguous", "sampling",
     lambda a: dict(target="dense", target_tensors=[_mu(a), _mu(a).new_ones(4, 8)[:, ::2]]),
     ValueError,
     r"\bprecision must be contiguous"),
    ("too-many-scalars", "sampling", lambda a: dict(target_scalars=[0.0] * 33), ValueError,
     r"a target takes at most 32 tensors and 32 scalars"),
    ("sampling-with-window-mean", "sampling", lambda a: dict(window_mean=a["mean"].clone()),
     TypeError, r"fused_hmc::sample has no argument 'window_mean'"),
    ("statistics-short", "sampling", lambda a: dict(statistics=a["statistics"][:-1]), ValueError,
     (r"\bstatistics must hold 4 tensors of shape \[6\], the chain statistics accept_count, "
      r"accept_prob_sum, gradient_evaluations, divergences in that order; got 3")),
    ("statistics-empty", "warmup", lambda a: dict(statistics=[]), ValueError,
     r"\bstatistics must hold 4 tensors"),
    ("statistics-dtype", "sampling", lambda a: dict(
        statistics=_statistic(a, 0, a["statistics"][0].int())), TypeError,
     r"\bstatistics\[0\] \(accept_count\) must be Long, got Int"),
    ("statistics-float-dtype", "warmup", lambda a: dict(
        statistics=_statistic(a, 1, a["statistics"][1].float())), TypeError,
     r"\bstatistics\[1\] \(accept_prob_sum\) must be Double"),
    ("statistics-shape", "sampling", lambda a: dict(
        statistics=_statistic(a, 3, a["statistics"][3][:5])), ValueError,
     r"\bstatistics\[3\] \(divergences\) must have shape \[6\], got \[5\]"),
    ("samples-shape", "sampling", lambda a: dict(samples=a["samples"][:, :1]), ValueError,
     r"\bsamples must be None, empty, or have shape \[6, 2, 4\]"),
    ("samples-dtype", "sampling", lambda a: dict(samples=a["samples"].double()), TypeError,
     r"\bsamples must have q's dtype"),
    ("mean-dtype", "sampling", lambda a: dict(mean=a["mean"].float()), TypeError,
     r"\bmean must be Double"),
    ("thin-zero", "sampling", lambda a: dict(thin=0), ValueError, r"\bthin must be >= 1"),
    ("kept-before-negative", "sampling", lambda a: dict(kept_before=-1), ValueError,
     r"\bkept_before must be >= 0"),
    ("warmup-with-samples", "warmup",
     lambda a: dict(samples=torch.zeros(6, 2, 4, dtype=a["q"].dtype, device=a["q"].device)),
     TypeError, r"fused_hmc::warmup has no argument 'samples'"),
    ("windows-two", "warmup", lambda a: dict(windows=[75, 25]), ValueError,
     r"windows must be \[\] \(Stan's\) or \[init_buffer, base_window, term_buffer\], got 2 values"),
    ("windows-four", "warmup", lambda a: dict(windows=[75, 25, 50, 1]), ValueError,
     r"windows must be \[\] \(Stan's\) or .*, got 4 values"),
    ("windows-base-zero", "warmup", lambda a: dict(windows=[1, 0, 1]), ValueError,
     r"base_window >= 1"),
    ("warmup-outside", "warmup", lambda a: dict(first_transition=9), ValueError,
     r"must lie in the warm-up"),
    ("num-warmup-negative", "warmup", lambda a: dict(num_warmup=-1), ValueError,
     r"\bnum_warmup must be in \[0, 2\^40\]"),
    ("target-accept-one", "warmup", lambda a: dict(target_accept=1.0), ValueError,
     r"\btarget_accept must be in \(0, 1\)"),
    ("dual-averaging-shape", "warmup",
     lambda a: dict(dual_averaging=a["dual_averaging"].new_zeros(6, 3)), ValueError,
     r"\bdual_averaging must have shape \[1, 3\]"),
    ("window-mean-dtype", "warmup", lambda a: dict(window_mean=a["window_mean"].float()),
     TypeError, r"\bwindow_mean must be Double"),
    ("step-size-shape", "sampling", lambda a: dict(step_size=a["step_size"].repeat(2)),
     ValueError, r"\bstep_size must have shape \[1\] \(shared\) or \[6\] \(one per chain\)"),
    ("step-size-dtype", "warmup", lambda a: dict(step_size=a["step_size"].float()), TypeError,
     r"\bstep_size must be Double"),
    ("inv-mass-shape", "sampling", lambda a: dict(inv_mass=a["inv_mass"].repeat(6, 1)),
     ValueError, r"\binv_mass must have shape \[1, 4\]"),
    ("warmup-empty-inv-mass", "warmup", lambda a: dict(inv_mass=a["inv_mass"].new_empty(0)),
     ValueError, r"warm-up adapts inv_mass in place: pass it as \[1, 4\]"),
    ("empty-inv-mass-dtype", "sampling", lambda a: dict(inv_mass=a["inv_mass"].new_empty(0,
                                                        dtype=torch.float64)),
     TypeError, r"\binv_mass must have q's dtype"),
    ("jitter-one", "sampling", lambda a: dict(jitter=1.0), ValueError, r"\bjitter must be in"),
    ("leapfrog-zero", "warmup", lambda a: dict(num_leapfrog_steps=0), ValueError,
     r"\bnum_leapfrog_steps must be in \[1, 2\^31 - 1\]"),
    ("chain-offset-negative", "sampling", lambda a: dict(chain_offset=-1), ValueError,
     r"\bchain_offset must be >= 0"),
    ("first-transition-negative", "sampling", lambda a: dict(first_transition=-1), ValueError,
     r"\bfirst_transition must be >= 0"),
    ("num-transitions-negative", "sampling", lambda a: dict(num_transitions=-1), ValueError,
     r"\bnum_transitions must be >= 0"),
    ("q-not-contiguous", "sampling", lambda a: dict(q=a["q"].t().contiguous().t()), ValueError,
     r"\bq \(the chain state, updated in place\) must be contiguous"),
    ("q-int", "warmup", lambda a: dict(q=a["q"].long()), TypeError, r"\bq must be float"),
    ("trajectory-length-negative", "sampling", lambda a: dict(trajectory_length=-1.0), ValueError,
     r"\btrajectory_length must be finite and >= 0"),
    ("trajectory-length-nan", "warmup", lambda a: dict(trajectory_length=math.nan), ValueError,
     r"\btrajectory_length must be finite and >= 0"),
    ("chees-while-sampling-alone", "sampling", lambda a: dict(chees=_chees_state(a)), ValueError,
     r"\bpass chees and trajectory_record together, got chees alone"),
    ("trajectory-record-alone", "sampling", lambda a: dict(trajectory_record=_record(a)),
     ValueError, r"\bpass chees and trajectory_record together, got trajectory_record alone"),
    ("chees-and-length-while-sampling", "sampling", lambda a: dict(
        chees=_chees_state(a), trajectory_record=_record(a), trajectory_length=0.5), ValueError,
     r"\bsampling with chees runs with its trajectory length chees\[0\]: trajectory_length must "
     r"be 0, got 0.5"),
    ("chees-shape-while-sampling", "sampling", lambda a: dict(
        chees=_chees_state(a)[:7], trajectory_record=_record(a)),
     ValueError, r"\bchees must have shape \[8\]"),
    ("trajectory-record-in-warmup", "warmup", lambda a: dict(trajectory_record=_record(a)),
     TypeError, r"fused_hmc::warmup has no argument 'trajectory_record'"),
    ("trajectory-record-shape", "sampling", lambda a: dict(
        chees=_chees_state(a), trajectory_record=_record(a)[:, :12].contiguous()),
     ValueError, r"\btrajectory_record must have shape \[6, 14\]"),
    ("trajectory-record-dtype", "sampling", lambda a: dict(
        chees=_chees_state(a), trajectory_record=_record(a).float()), TypeError,
     r"\btrajectory_record must be Double"),
    ("chees-shape", "warmup", lambda a: dict(chees=_chees_state(a)[:7]), ValueError,
     r"\bchees must have shape \[8\]"),
    ("chees-dtype", "warmup", lambda a: dict(chees=_chees_state(a).float()), TypeError,
     r"\bchees must be Double"),
]


@pytest.mark.parametrize("case", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_bad_run_call_raises_naming_the_argument(device, case):
    _, mode, changes, exc, pattern = case
    args = _run_arguments(device, mode)
    args.update(changes(args))
    given = (_tensors(args.values()) + _tensors(args["target_tensors"])
             + _tensors(args["statistics"]))
    originals = [t.clone() for t in given]
    with pytest.raises(exc, match=pattern):
        _call(mode, args)
    for after, before in zip(given, originals):
        assert torch.equal(after, before), "a failed call modified an input"


def test_per_chain_chees_runs_on_the_cpu_and_is_refused_on_cuda(device):
    """chees with step_size [B] is the CPU's lock-step per-chain warm-up; CUDA refuses it by name."""
    args = _run_arguments(device, "warmup")
    args.update(chees=_chees_state(args), step_size=args["step_size"].repeat(6),
                inv_mass=args["inv_mass"].repeat(6, 1),
                dual_averaging=args["dual_averaging"].repeat(6, 1))
    if device.type == "cuda":
        with pytest.raises(ValueError, match=r"\bchees with per-chain step sizes \(step_size "
                                             r"\[B\]\) runs on the CPU only"):
            _call("warmup", args)
        return
    before = args["step_size"].clone()
    _call("warmup", args)
    assert torch.isfinite(args["step_size"]).all()
    assert not torch.equal(args["step_size"], before), "the per-chain step sizes did not adapt"


@pytest.mark.parametrize("mode", ["sampling", "warmup"])
def test_run_arguments_are_valid(device, mode):
    """The base of RUN_CASES runs (so each case fails for its own change only)."""
    args = _run_arguments(device, mode)
    q0 = args["q"].clone()
    _call(mode, args)
    assert not torch.equal(args["q"], q0)


@pytest.mark.parametrize("mode", ["sampling", "warmup"])
def test_missing_argument_names_it(device, mode):
    """An argument the op needs, left out: the dispatcher names it."""
    args = _run_arguments(device, mode)
    del args["statistics"]
    with pytest.raises((TypeError, RuntimeError), match=r"\bstatistics\b"):
        _call(mode, args)


@pytest.mark.cuda
@pytest.mark.parametrize("which", ["mu", "precision"])
def test_run_target_tensor_device_mismatch_names_it(which):
    args = _run_arguments("cuda", "sampling")
    mu, precision = args["target_tensors"]
    args["target_tensors"] = [mu.cpu(), precision] if which == "mu" else [mu, precision.cpu()]
    with pytest.raises(ValueError, match=rf"\b{which} must be on q's device"):
        _call("sampling", args)


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["sampling", "warmup"])
def test_statistics_on_another_device_are_named(mode):
    args = _run_arguments("cuda", mode)
    args["statistics"] = _statistic(args, 2, args["statistics"][2].cpu())
    with pytest.raises(ValueError, match=r"\bstatistics\[2\] \(gradient_evaluations\) must be on "
                                         r"q's device"):
        _call(mode, args)

