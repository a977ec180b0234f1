"""bench_lanes.py's JAX densities (jax_models.py) against the torch forms they copy (lanes_models.py):
the same value at 16 of Stan's starts, within 1e-10 relative in float64 and 1e-5 in float32 (both
against torch's own float64 density, no compilation; bench_lanes.py checks the compiled TorchModel
on the device too). Needs JAX (skipped without it); not under tests/, so CI does not run it:

    python -m pytest -q benchmarks/test_lanes_models.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

import lanes_models

from fused_hmc.torch_model import Parameters
from fused_hmc.torch_model.trace import tracing_defaults

TOLERANCE = {np.float64: 1e-10, np.float32: 1e-5}


def torch_density(model, x: torch.Tensor) -> np.ndarray:
    parameters = Parameters(model.params)
    with tracing_defaults():
        return torch.stack([model.fn(parameters.constrain(row), dict(model.data))
                            + parameters.log_abs_det_jacobian(row) for row in x]).numpy()


@pytest.mark.parametrize("dtype", list(TOLERANCE))
@pytest.mark.parametrize("name", lanes_models.MODELS)
def test_jax_density_is_the_torch_form(name, dtype):
    model = lanes_models.make(name)
    dim = Parameters(model.params).dim
    x = 4 * torch.rand(16, dim, generator=torch.Generator().manual_seed(1),
                       dtype=torch.float64) - 2
    x = x.to(torch.float32 if dtype is np.float32 else torch.float64).double()  # one point set
    reference = torch_density(model, x)
    got = np.asarray(jax.jit(jax.vmap(model.jax(model.data, dtype)))(x.numpy().astype(dtype)))
    assert got.dtype == dtype
    worst = np.max(np.abs(got - reference) / np.maximum(np.abs(reference), 1))
    assert worst <= TOLERANCE[dtype], f"{name} {dtype.__name__}: worst relative {worst:.2e}"


def test_every_model_has_its_rows_and_count():
    for name in lanes_models.MODELS:
        model = lanes_models.make(name)
        rows = max(max(t.shape) for t in model.data.values() if isinstance(t, torch.Tensor))
        assert model.rows == rows and model.fma_per_row > 0
    assert lanes_models.make("earnings").rows == 1192
    assert lanes_models.make("gauss_mix").rows == 1000


def test_resizable_models_take_any_rows():
    """bench_lanes.py --rows: the same generators, longer (the data's largest extent is rows)."""
    for name in lanes_models.RESIZABLE:
        model = lanes_models.make(name, 300)
        assert model.rows == 300 == max(max(t.shape) for t in model.data.values()
                                        if isinstance(t, torch.Tensor))
    with pytest.raises(ValueError, match=r"diamonds has fixed data"):
        lanes_models.make("diamonds", 300)
