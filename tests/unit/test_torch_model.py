"""fused_hmc.TorchModel: generated C++ against torch autograd of the same unconstrained density.

Two paths run the generated code: the CppTarget module (the sampler's, compiled once here for
eight schools: tens of seconds) and HostEval (the same source through a plain g++ build, a
second or two), which carries the op, constraint and property tests. Tolerance: 1e-10 relative
to the largest |value| / |gradient entry| at each point, float64 throughout (the generated code
and torch do the same arithmetic in different orders: errors are ~1e-15).
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.distributions import (Bernoulli, Beta, Binomial, Categorical, Cauchy, Dirichlet,
                                 Exponential, Gamma, HalfCauchy, HalfNormal, Laplace, LogNormal,
                                 Normal, Poisson, StudentT, constraints)

import fused_hmc
from fused_hmc.constraints import ordered
from fused_hmc.torch_model import TorchModel, TorchModelError
from fused_hmc.torch_model.host_eval import HostEval

RTOL = 1e-10


def autograd(model: TorchModel, x: torch.Tensor):
    xr = x.double().clone().requires_grad_(True)
    value = model.torch_log_density(xr)
    (grad,) = torch.autograd.grad(value.sum(), xr)
    return value.detach(), grad


def assert_matches(model: TorchModel, value, grad, x):
    ref_value, ref_grad = autograd(model, x)
    scale = 1 + ref_value.abs()
    assert ((value - ref_value).abs() / scale).max() < RTOL, (value, ref_value)
    gscale = 1 + ref_grad.abs().amax(dim=1, keepdim=True)
    assert ((grad - ref_grad).abs() / gscale).max() < RTOL, (grad, ref_grad)


def host(model: TorchModel) -> HostEval:
    return HostEval(model.generated_source, model.dim, model.data)


def points(model, n=6, seed=1):
    return model.initial_point(n, generator=torch.Generator().manual_seed(seed))


# -- eight schools, compiled as the sampler compiles it --------------------------------------------

def eight_schools_fn(p, data):
    theta = p["mu"] + p["tau"] * p["theta_trans"]
    return (Normal(0.0, 5.0).log_prob(p["mu"]) + HalfCauchy(5.0).log_prob(p["tau"])
            + Normal(0.0, 1.0).log_prob(p["theta_trans"]).sum()
            + Normal(theta, data["sigma"]).log_prob(data["y"]).sum())


EIGHT_SCHOOLS_PARAMS = {"mu": (), "tau": ((), constraints.positive), "theta_trans": (8,)}


@pytest.fixture(scope="module")
def eight_schools():
    library = fused_hmc.models.eight_schools()
    model = TorchModel(eight_schools_fn, EIGHT_SCHOOLS_PARAMS, data=dict(library.data))
    return model, library


@pytest.mark.slow
def test_eight_schools_compiled_matches_autograd_and_the_library_model(eight_schools):
    model, library = eight_schools
    assert isinstance(model, fused_hmc.CppTarget) and model.dim == 10
    x = points(model, 8)
    value, grad = model.log_density_and_gradient(x)
    assert_matches(model, value, grad, x)
    assert torch.equal(model.log_density(x), value) or \
        (model.log_density(x) - value).abs().max() < 1e-12
    # The library's C++ model: x_lib = (theta_trans, mu, log_tau); equal up to a constant.
    perm = list(range(2, 10)) + [0, 1]
    lib_value, lib_grad = library.target(gradient=True).log_density_and_gradient(x[:, perm])
    offset = value - lib_value
    assert (offset - offset[0]).abs().max() < 1e-10
    assert (grad[:, perm] - lib_grad).abs().max() < 1e-10
    report = model.check()
    assert report.worst_value < 1 and report.worst_gradient < 1


@pytest.mark.slow
def test_eight_schools_samples_end_to_end(eight_schools):
    model, _ = eight_schools
    q0 = model.initial_point(64, generator=torch.Generator().manual_seed(3))
    res = fused_hmc.sample(q0, 200, target=model, num_warmup=200, seed=5)
    tau = res.to_arviz().posterior["tau"]
    assert tau.shape[-1:] == (200,) or tau.shape[:2] == (64, 200)
    assert bool((tau > 0).all())
    # posteriordb's reference mean of mu is 4.4 (sd 3.3); 64 x 200 draws put it within 2.
    mu = model.constrain(res.samples.double())["mu"]
    assert abs(float(mu.mean()) - 4.4) < 2.0


def test_initial_point_and_constrain(eight_schools):
    model, _ = eight_schools
    x = model.initial_point(5, generator=torch.Generator().manual_seed(0))
    assert x.shape == (5, 10) and x.dtype == torch.float64 and x.abs().max() <= 2
    values = model.constrain(x)
    assert values["tau"].shape == (5,) and values["theta_trans"].shape == (5, 8)
    assert torch.allclose(values["tau"], x[:, 1].exp())
    assert model.initial_point(3, dtype=torch.float32).dtype == torch.float32


# -- every covered distribution, op and constraint (HostEval) ---------------------------------------

def kitchen_sink_fn(p, d):
    eta = d["X"] @ p["beta"] + p["a"][d["g"]]
    lp = Bernoulli(logits=eta).log_prob(d["y"]).sum()
    lp = lp + Normal(eta, p["sigma"]).log_prob(d["z"]).sum()
    lp = lp + StudentT(p["nu"], 0., 1.).log_prob(p["beta"]).sum()
    lp = lp + Cauchy(0., 2.).log_prob(p["a"]).sum() + HalfCauchy(1.).log_prob(p["sigma"])
    lp = lp + HalfNormal(2.).log_prob(p["sigma"]) + LogNormal(0., 1.).log_prob(p["sigma"])
    lp = lp + Exponential(2.).log_prob(p["nu"]) + Gamma(2., 3.).log_prob(p["sigma"])
    lp = lp + Beta(2., 3.).log_prob(p["u"]) + Laplace(0., 1.).log_prob(p["iv"])
    lp = lp + Poisson(p["sigma"] * torch.exp(0.1 * d["z"])).log_prob(d["cnt"]).sum()
    lp = lp + Binomial(5, logits=eta).log_prob(d["cnt"]).sum()
    logits = torch.stack([eta, 0.5 * eta, torch.zeros_like(eta)], -1)
    lp = lp + Categorical(logits=logits).log_prob(d["cat"]).sum()
    lp = lp + Dirichlet(torch.ones(3) * 2).log_prob(p["w"]) + Normal(0., 3.).log_prob(p["c"]).sum()
    lp = lp + torch.logsumexp(eta, 0) + torch.logaddexp(p["c"], p["beta"]).sum()
    lp = lp + torch.cumsum(p["c"], 0).sum() + torch.where(p["beta"] > 0, p["beta"], 2 * p["beta"]).sum()
    lp = lp - 0.1 * torch.cat([p["lo"], p["c"]]).pow(2).sum() + p["c"][1:].sum()
    lp = lp + p["u"] * d["s"] + d["T"] * p["iv"] + (d["M"] @ p["beta"][:2]).sum()
    # a max and a min over per-chain integers (they start at INT64_MIN / INT64_MAX)
    lp = lp + 0.1 * (p["c"] > 0).long().amax() - 0.1 * (p["beta"] > 0).long().amin()
    h = p["lo"][0]
    for _ in range(d["T"]):  # a Python loop over time unrolls at trace time
        h = 0.5 * h + torch.tanh(p["lo"][1])
    return lp + Normal(0., 1.).log_prob(h)


KITCHEN_SINK_PARAMS = {
    "beta": (3,), "a": (4,), "sigma": ((), constraints.positive),
    "nu": ((), constraints.greater_than(1.0)), "u": ((), constraints.unit_interval),
    "w": ((3,), constraints.simplex), "c": ((3,), ordered),
    "lo": ((2,), constraints.less_than(3.0)), "iv": ((), constraints.interval(-1.0, 2.0))}


def kitchen_sink_data(n=150):
    g = torch.Generator().manual_seed(0)
    return {"X": torch.randn(n, 3, generator=g), "M": torch.randn(4, 2, generator=g),
            "y": (torch.rand(n, generator=g) < 0.5).double(),
            "cnt": torch.randint(0, 6, (n,), generator=g).double(),
            "g": torch.randint(0, 4, (n,), generator=g), "z": torch.randn(n, generator=g),
            "cat": torch.randint(0, 3, (n,), generator=g), "s": 2.5, "T": 7}


@pytest.fixture(scope="module")
def kitchen_sink():
    return TorchModel(kitchen_sink_fn, KITCHEN_SINK_PARAMS, data=kitchen_sink_data(), lanes=1)


def test_every_distribution_op_and_constraint_matches_autograd(kitchen_sink):
    x = points(kitchen_sink, 6)
    value, grad = host(kitchen_sink).log_density_and_gradient(x)
    assert_matches(kitchen_sink, value, grad, x)
    assert torch.allclose(host(kitchen_sink).log_density(x), value, rtol=1e-13, atol=0)


def test_data_length_values_are_never_stored_and_share_one_loop():
    """Logistic regression: one loop over the rows computes the density and the gradient (eta_i
    once per row), and no per-chain array has the data's length."""
    library = fused_hmc.models.logistic_regression(n=300, k=5)
    form = library.torch_form()
    model = TorchModel(form.fn, form.params, data=form.data, lanes=1)  # the plain form
    gradient_fn = model.generated_source.split("log_density_and_gradient")[1]
    assert gradient_fn.count("< 300;") == 1  # one pass over the rows
    assert "[300]" not in model.generated_source
    x = points(model, 4)
    value, grad = host(model).log_density_and_gradient(x)
    assert_matches(model, value, grad, x)
    offset = value - library.log_prob(x)
    assert (offset - offset[0]).abs().max() < 1e-9


def test_the_row_loops_dot_products_are_fused_multiply_adds():
    """Logistic regression's eta_i = X_i . beta and gradient X^T r: each term of the row loop's
    dot products is one fma (docs/TORCH_MODEL_COMPILER.md: users' modules are compiled without
    contraction), and the host build still matches autograd."""
    library = fused_hmc.models.logistic_regression(n=300, k=5)
    form = library.torch_form()
    model = TorchModel(form.fn, form.params, data=form.data, lanes=1)
    gradient_fn = model.generated_source.split("log_density_and_gradient")[1]
    row_loop = gradient_fn.split("< 300;")[1]
    fused = [line for line in row_loop.splitlines() if "= fma(" in line]
    assert len(fused) >= 2 * (5 - 1), fused  # eta's products and the gradient's, at least
    assert not any("+= " in line and " * " in line for line in row_loop.splitlines())
    x = points(model, 4)
    assert_matches(model, *host(model).log_density_and_gradient(x), x)


def test_add_to_fuses_products_of_numbers_only():
    from fused_hmc.torch_model.cexpr import Expr, add_to
    from fused_hmc.torch_model.ops import _mul

    x, w = Expr("x[0]", "T"), Expr("data.w[i]", "S")
    assert add_to("a", _mul(x, w, "T"), "T") == "a = fma(x[0], T(data.w[i]), a);"
    assert add_to("a", Expr("x[0] + x[1]", "T"), "T") == "a += x[0] + x[1];"
    assert add_to("n", _mul(Expr("i", "i"), Expr("j", "i"), "i"), "i") == "n += i * j;"


# -- random compositions (hypothesis) ---------------------------------------------------------------

UNARY = {
    "exp": lambda t: torch.exp(0.3 * t), "log1p_sq": lambda t: torch.log1p(t * t),
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "softplus": torch.nn.functional.softplus,
    "abs": lambda t: torch.abs(t) + 1.0, "sin": torch.sin, "square": lambda t: t ** 2,
    "sqrt": lambda t: torch.sqrt(t * t + 1.0), "lgamma": lambda t: torch.lgamma(t * t + 1.0),
    "clamp": lambda t: torch.clamp(t, -1.0, 1.0), "cumsum": lambda t: torch.cumsum(t[..., :5], -1),
    "flip": lambda t: torch.flip(t, (-1,)), "where": lambda t: torch.where(t > 0.1, t, -t),
}
BINARY = {
    "add": torch.add, "mul": torch.mul, "sub": torch.sub,
    "div": lambda a, b: a / (1.5 + b * b), "logaddexp": torch.logaddexp,
    "maximum": torch.maximum, "pow": lambda a, b: (a * a + 1.0) ** (0.5 + 0.1 * torch.tanh(b)),
}
REDUCE = {
    "sum": lambda t: t.sum(), "logsumexp": lambda t: torch.logsumexp(t, -1).sum(),
    "mean": lambda t: t.mean(), "amax": lambda t: t.amax(), "dot": lambda t: t @ torch.linspace(
        -1, 1, t.shape[-1]),
}


def composed_fn(program):
    def fn(p, data):
        values = [p["a"], p["b"] * data["v"], p["a"][data["idx"]] * data["w"]]
        for op, i, j in program:
            a, b = values[i % len(values)], values[j % len(values)]
            if op in UNARY:
                values.append(UNARY[op](a))
            else:
                n = min(a.shape[-1], b.shape[-1])
                values.append(BINARY[op](a[..., :n], b[..., :n]))
        total = Normal(0.0, 2.0).log_prob(p["a"]).sum() + Normal(0.0, 2.0).log_prob(p["b"]).sum()
        reducers = list(REDUCE.values())
        for k, v in enumerate(values[3:]):
            total = total + 0.1 * reducers[k % len(reducers)](v)
        return total
    return fn


COMPOSE_DATA = {"v": torch.linspace(-1, 2, 5), "w": torch.linspace(0.5, 1.5, 90),
                "idx": torch.arange(90) % 5}


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(sorted(UNARY) + sorted(BINARY)),
                          st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=6))
def test_random_compositions_match_autograd(program):
    """Random chains of unary and binary ops over parameters, data-broadcast and data-indexed
    (data-length) values, each reduced: one g++ build per example (HostEval, about a second)."""
    model = TorchModel(composed_fn(program), {"a": (5,), "b": ((5,), constraints.positive)},
                       data=COMPOSE_DATA, lanes=1)  # the plain form (test_torch_model_lanes: rows)
    x = points(model, 3)
    value, grad = host(model).log_density_and_gradient(x)
    assert_matches(model, value, grad, x)


# -- errors --------------------------------------------------------------------------------------------

def test_unsupported_op_names_the_op_and_the_line():
    def fn(p, data):
        return torch.special.erf(p["a"]).sum()  # erf: not a function the C++ targets have
    with pytest.raises(TorchModelError, match=r"aten\.erf.*test_torch_model\.py:\d+.*erf"):
        TorchModel(fn, {"a": (3,)})


def test_data_dependent_branch_is_refused_with_its_line():
    def fn(p, data):
        if p["a"].sum() > 0:
            return -p["a"].pow(2).sum()
        return -p["a"].abs().sum()
    with pytest.raises(TorchModelError, match=r"control flow depends on a parameter.*"
                                              r"test_torch_model\.py:\d+.*if p\[.a.\]"):
        TorchModel(fn, {"a": (3,)})


def test_shape_mismatch_with_params_is_a_clear_error():
    def fn(p, data):
        return Normal(p["theta"], 1.0).log_prob(data["y"]).sum()
    with pytest.raises(TorchModelError, match=r"tracing fn failed at .*test_torch_model\.py"):
        TorchModel(fn, {"theta": (8,)}, data={"y": torch.zeros(9)})

    def not_summed(p, data):
        return Normal(p["theta"], 1.0).log_prob(data["y"])
    with pytest.raises(TorchModelError, match=r"0-d tensor.*got shape \[8\].*'theta': \(8,\)"):
        TorchModel(not_summed, {"theta": (8,)}, data={"y": torch.zeros(8)})


@pytest.mark.slow
def test_non_finite_density_at_the_starts_is_a_clear_error(eight_schools):
    model, _ = eight_schools
    q0 = model.initial_point(4, generator=torch.Generator().manual_seed(0))
    q0[2, 1] = 800.0  # tau = exp(800) overflows: theta = mu + inf * theta_trans
    q0[2, 2:] = 0.0
    with pytest.raises(ValueError, match=r"log_density is NaN at 1 of 4 starting points \(chains "
                                         r"\[2\]\)"):
        fused_hmc.sample(q0, 10, target=model, seed=0)
