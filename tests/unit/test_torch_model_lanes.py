"""TorchModel(..., lanes=G): the generated rows form (log_density_rows and
log_density_and_gradient_rows, docs/TARGETS.md "Data rows over lanes").

The shares are evaluated through HostEval (g++, no CppTarget build) for every lane's rows
(first = 0 .. step - 1) and summed: the sum must equal torch autograd of the whole density (1e-10
relative, float64), with step = G and step = 32 (the contract may run several strided partials
per lane: the code must not assume step == G). A density that is not a sum over the rows is
refused at construction, naming why.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.distributions import Normal, constraints

import fused_hmc
from fused_hmc.constraints import ordered
from fused_hmc.torch_model import TorchModel, TorchModelError
from fused_hmc.torch_model.host_eval import HostEval

from .test_torch_model import BINARY, COMPOSE_DATA, UNARY, composed_fn

RTOL = 1e-10


def autograd(model: TorchModel, x: torch.Tensor):
    xr = x.clone().requires_grad_(True)
    value = model.torch_log_density(xr)
    (grad,) = torch.autograd.grad(value.sum(), xr)
    return value.detach(), grad


def assert_close(value, grad, ref_value, ref_grad):
    assert ((value - ref_value).abs() / (1 + ref_value.abs())).max() < RTOL, (value, ref_value)
    scale = 1 + ref_grad.abs().amax(dim=1, keepdim=True)
    assert ((grad - ref_grad).abs() / scale).max() < RTOL, (grad, ref_grad)


def assert_shares_sum_to_autograd(model: TorchModel, x: torch.Tensor) -> None:
    host = HostEval(model.generated_source, model.dim, model.data, rows=True)
    ref_value, ref_grad = autograd(model, x)
    for step in sorted({32} | ({model.lanes} if model.lanes != "auto" else {1, 8})):
        shares = [host.log_density_and_gradient(x, rows=(first, step)) for first in range(step)]
        value = sum(v for v, _ in shares)
        grad = sum(g for _, g in shares)
        assert_close(value, grad, ref_value, ref_grad)
        value_only = sum(host.log_density(x, rows=(first, step)) for first in range(step))
        assert ((value_only - ref_value).abs() / (1 + ref_value.abs())).max() < RTOL


def library_model(library, lanes: int) -> TorchModel:
    form = library.torch_form()
    return TorchModel(form.fn, form.params, data=form.data, lanes=lanes)


def points(model, n=3, seed=0, scale=1.0):
    return model.initial_point(n, generator=torch.Generator().manual_seed(seed)) * scale


def test_logistic_regression_shares_sum_to_the_density_and_gradient():
    model = library_model(fused_hmc.models.logistic_regression(n=300, k=5), lanes=4)
    assert "log_density_and_gradient_rows(" in model.generated_source
    assert "rows.step) {" in model.generated_source
    assert_shares_sum_to_autograd(model, points(model))


@pytest.mark.slow
def test_diamonds_shares_sum_to_the_density_and_gradient():
    model = library_model(fused_hmc.models.diamonds(), lanes=8)
    assert_shares_sum_to_autograd(model, points(model, scale=0.1))


def mixture_fn(p, data):
    """A two-component normal mixture: per row a logsumexp over the components (not over the
    rows), summed over the rows: a sum over the rows, so it splits."""
    components = torch.log(p["w"]) + Normal(p["mu"], p["sigma"]).log_prob(data["y"][:, None])
    return (Normal(0.0, 5.0).log_prob(p["mu"]).sum() + Normal(0.0, 1.0).log_prob(p["sigma"])
            + torch.logsumexp(components, -1).sum())


MIXTURE_PARAMS = {"w": ((2,), constraints.simplex), "mu": ((2,), ordered),
                  "sigma": ((), constraints.positive)}


def mixture_data(n=200):
    g = torch.Generator().manual_seed(2)
    return {"y": torch.cat([torch.randn(n // 2, generator=g) - 2,
                            torch.randn(n // 2, generator=g) + 2])}


def test_mixture_shares_sum_to_the_density_and_gradient():
    model = TorchModel(mixture_fn, MIXTURE_PARAMS, data=mixture_data(), lanes=8)
    assert_shares_sum_to_autograd(model, points(model))


def test_logsumexp_over_the_rows_is_refused_naming_why():
    def fn(p, data):
        return torch.logsumexp(Normal(p["mu"], 1.0).log_prob(data["y"]), 0)
    with pytest.raises(TorchModelError, match=r"lanes=4 .* sum over the data's rows.*aten\.amax "
                                              r"takes a max over the rows.*test_torch_model_lanes"):
        TorchModel(fn, {"mu": ()}, data=mixture_data(), lanes=4)
    TorchModel(fn, {"mu": ()}, data=mixture_data())  # lanes=1: compiled as before


def test_log_of_a_row_sum_is_refused_naming_the_op():
    def fn(p, data):
        return torch.log(torch.exp(Normal(p["mu"], 1.0).log_prob(data["y"])).sum())
    with pytest.raises(TorchModelError, match=r"lanes=2 .*aten\.log is not affine in a sum over "
                                              r"the rows.*test_torch_model_lanes\.py"):
        TorchModel(fn, {"mu": ()}, data=mixture_data(), lanes=2)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(sorted(UNARY) + sorted(BINARY)),
                          st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=6))
def test_random_compositions_are_split_exactly_or_refused(program):
    """test_torch_model's random compositions (data-indexed values of 90 rows, reduced by sums,
    means, logsumexp, amax...) with lanes=4: either refused as not a sum over the rows, or the
    shares sum to autograd of the whole density."""
    try:
        model = TorchModel(composed_fn(program), {"a": (5,), "b": ((5,), constraints.positive)},
                           data=COMPOSE_DATA, lanes=4)
    except TorchModelError as error:
        assert "lanes=4 cannot split this density" in str(error)
        return
    assert_shares_sum_to_autograd(model, points(model))


def test_auto_lanes_take_the_rows_form_only_where_a_row_loop_splits():
    """lanes="auto" (the default): the rows form, its lanes chosen per run, for a density with a
    loop over data rows (its shares still sum to autograd's density); one thread a chain, the
    plain form, for a density whose data are all stored (eight schools: 8 values, no row
    loop)."""
    logistic = library_model(fused_hmc.models.logistic_regression(n=300, k=5), lanes="auto")
    assert logistic.rows_form and logistic.lanes == "auto"
    assert logistic.lanes_for(4096, torch.device("cpu")) == 1  # the CPU sums shares in order
    assert_shares_sum_to_autograd(logistic, points(logistic))
    schools = library_model(fused_hmc.models.eight_schools(), lanes="auto")
    assert schools.lanes == 1 and not schools.rows_form
    assert "log_density_rows" not in schools.generated_source


def test_lanes_must_be_a_power_of_two_up_to_the_row_partials():
    for bad in (3, 512, 2.0, True):
        with pytest.raises(ValueError, match='lanes must be "auto" or one of'):
            TorchModel(mixture_fn, MIXTURE_PARAMS, data=mixture_data(), lanes=bad)
    # Block lanes need P = 256 partials: data of 65,536 rows or more (test_block_lanes.py).
    with pytest.raises(ValueError, match="lanes=64 is more than the data's row partials P = 32"):
        TorchModel(mixture_fn, MIXTURE_PARAMS, data=mixture_data(), lanes=64)


@pytest.mark.slow
def test_compiled_lanes_model_matches_autograd_and_samples():
    """CppTarget with lanes=4 on the CPU sums the four shares (csrc/math/targets/lane_rows.h)."""
    model = library_model(fused_hmc.models.logistic_regression(n=300, k=5), lanes=4)
    assert model.lanes == 4
    x = points(model, 4)
    value, grad = model.log_density_and_gradient(x)
    assert_close(value, grad, *autograd(model, x))
    res = fused_hmc.sample(points(model, 8, seed=1, scale=0.1), 20, target=model, num_warmup=50,
                           seed=3)
    assert res.samples.shape[-1] == model.dim and bool(torch.isfinite(res.samples).all())


def test_outputs_not_depending_on_the_rows_are_the_first_lanes_alone():
    """8 rows (unrolled, no row loop): every lane but the first returns 0 and a zero gradient,
    also where the density is -inf (not -inf - -inf = NaN on the other lanes)."""
    def fn(p, data):
        return (Normal(0.0, 1.0).log_prob(p["mu"]) + torch.log(torch.clamp(p["u"] - 0.5, 0.0))
                + Normal(p["mu"], 1.0).log_prob(data["y"]).sum())
    model = TorchModel(fn, {"mu": (), "u": ((), constraints.unit_interval)},
                       data={"y": torch.linspace(-1, 1, 8)}, lanes=2)
    host = HostEval(model.generated_source, model.dim, model.data, rows=True)
    x = torch.tensor([[0.3, 1.0], [0.3, -1.0]], dtype=torch.float64)  # u < 0.5: log 0
    value, grad = host.log_density_and_gradient(x, rows=(1, 2))
    assert torch.equal(value, torch.zeros(2)) and torch.equal(grad, torch.zeros(2, 2))
    total = host.log_density(x, rows=(0, 2)) + host.log_density(x, rows=(1, 2))
    ref = model.torch_log_density(x)
    assert (total[0] - ref[0]).abs() < 1e-10 and total[1] == ref[1] == -float("inf")
