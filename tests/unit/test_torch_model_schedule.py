"""The TorchModel compiler's schedule: the generated C++ makes one pass over the data's rows and
keeps row-invariant work out of it (fused_hmc/torch_model/codegen.py, varying.py).

The properties are read off the generated source (loops over the rows, what their bodies
compute) and the values checked against torch autograd through HostEval (g++, no CppTarget).
"""
from __future__ import annotations

import re

import pytest
import torch

import fused_hmc
from fused_hmc.torch_model import TorchModel
from fused_hmc.torch_model.host_eval import HostEval

TRANSCENDENTAL = re.compile(r"\b(exp|log|log1p|expm1|sqrt|pow|lgamma|tanh|sigmoid|softplus)\(")


def library_torch_model(library) -> TorchModel:
    form = library.torch_form()
    return TorchModel(form.fn, form.params, data=form.data, lanes=1)  # one thread's schedule


def function(source: str, name: str) -> str:
    """The text of one generated function (log_density or log_density_and_gradient, in the rows
    form where the source has it)."""
    rows = f" {name}_rows("
    start = source.index(rows if rows in source else f" {name}(")
    end = source.find("\ntemplate", start)
    return source[start:] if end < 0 else source[start:end]


def row_loops(text: str, rows: int) -> list[str]:
    """The bodies of the loops over `rows` iterations in text (to their closing brace)."""
    bodies = []
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if re.search(rf"< {rows};", line) and line.lstrip().startswith("for ("):
            indent = len(line) - len(line.lstrip())
            end = next(j for j in range(k + 1, len(lines))
                       if lines[j] == " " * indent + "}")
            bodies.append("\n".join(lines[k + 1:end]))
    return bodies


def assert_one_lean_row_loop(model: TorchModel, rows: int) -> None:
    for name in ("log_density", "log_density_and_gradient"):
        loops = row_loops(function(model.generated_source, name), rows)
        assert len(loops) == 1, (name, len(loops))
        assert not re.search(r"data\.c\d+", loops[0]), loops[0]  # no derived data arrays


def assert_autograd(model: TorchModel, x: torch.Tensor) -> None:
    value, grad = HostEval(model.generated_source, model.dim, model.data) \
        .log_density_and_gradient(x)
    xr = x.clone().requires_grad_(True)
    ref = model.torch_log_density(xr)
    (ref_grad,) = torch.autograd.grad(ref.sum(), xr)
    assert ((value - ref.detach()).abs() / (1 + ref.detach().abs())).max() < 1e-10
    assert ((grad - ref_grad).abs() / (1 + ref_grad.abs().amax(1, keepdim=True))).max() < 1e-10


def test_logistic_regression_is_one_pass_reading_no_derived_row_array():
    model = library_torch_model(fused_hmc.models.logistic_regression(n=300, k=5))
    assert_one_lean_row_loop(model, 300)
    # 1 - y is formed from data.y where it is read, not stored as another array of 300.
    assert "data.y[" in row_loops(function(model.generated_source, "log_density"), 300)[0]
    assert_autograd(model, model.initial_point(4, generator=torch.Generator().manual_seed(0)))


@pytest.mark.slow
@pytest.mark.parametrize("qr", [True, False])
def test_diamonds_is_one_pass_over_its_rows_with_no_transcendental_inside(qr):
    """The backward X^T r joins the forward's row loop (25 passes before), and sigma's square,
    log and reciprocal are computed once, outside it."""
    model = library_torch_model(fused_hmc.models.diamonds(qr=qr))
    assert_one_lean_row_loop(model, 5000)
    for name in ("log_density", "log_density_and_gradient"):
        (loop,) = row_loops(function(model.generated_source, name), 5000)
        assert not TRANSCENDENTAL.search(loop), loop
        assert "/" not in loop, loop  # the divisor sigma^2 is row-invariant: one reciprocal
    x = model.initial_point(3, generator=torch.Generator().manual_seed(1)) * 0.1
    assert_autograd(model, x)
