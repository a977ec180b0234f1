"""The library models' torch forms (for fused_hmc.TorchModel) against their C++ forms' torch
references: the same unconstrained log density up to a constant, and the same gradient, at random
unconstrained points after the forms' coordinate permutation.

The torch form's unconstrained density is fn(spec.constrain(x), data) + spec.log_abs_det_jacobian(x)
(Parameters: what TorchModel compiles); the C++ form's reference is Model.log_prob_fn, which
tests/unit/test_models.py checks against the compiled C++.
"""
import pytest
import torch

from fused_hmc.models import MODELS
from fused_hmc.torch_model import Parameters

POINTS = 6


def unconstrained_density(form, x: torch.Tensor) -> torch.Tensor:
    spec = Parameters(form.params)
    values = [form.fn({n: v[i] for n, v in spec.constrain(x).items()}, form.data)
              for i in range(x.shape[0])]
    return torch.stack(values) + spec.log_abs_det_jacobian(x)


@pytest.mark.parametrize("name, kwargs", [
    ("eight_schools", {}), ("diamonds", {}), ("diamonds", {"qr": False}),
    ("logistic_regression", {"n": 200, "k": 6}), ("funnel", {"dim": 5}),
    ("rosenbrock", {"n1": 3, "n2": 2}),
])
def test_torch_form_agrees_with_cpp_form(name, kwargs):
    model = MODELS[name](**kwargs)
    form = model.torch_form()
    spec = Parameters(form.params)
    assert spec.dim == model.dim and sorted(form.to_cpp) == list(range(model.dim))
    generator = torch.Generator().manual_seed(29)
    x = ((torch.rand(POINTS, model.dim, dtype=torch.float64, generator=generator) - 0.5) * 3
         ).requires_grad_()
    torch_lp = unconstrained_density(form, x)
    x_cpp = x[:, list(form.to_cpp)]
    cpp_lp = model.log_prob(x_cpp)
    assert torch_lp.dtype == torch.float64
    offset = torch_lp - cpp_lp  # a constant: the same at every point
    scale = cpp_lp.abs().max().item() + 1
    assert (offset - offset[0]).abs().max().item() < 1e-11 * scale, offset
    torch_grad, = torch.autograd.grad(torch_lp.sum(), x)
    cpp_grad, = torch.autograd.grad(cpp_lp.sum(), x)
    torch.testing.assert_close(torch_grad, cpp_grad, rtol=1e-10, atol=1e-10 * scale)


def test_eight_schools_torch_form_names_its_parameters():
    form = MODELS["eight_schools"]().torch_form()
    spec = Parameters(form.params)
    assert spec.constrained_names()[:3] == ["mu", "tau", "theta_trans[0]"]
    x = torch.zeros(1, spec.dim, dtype=torch.float64)
    x[0, 1] = 0.7
    assert spec.constrain(x)["tau"].item() == pytest.approx(torch.exp(torch.tensor(0.7)).item())
