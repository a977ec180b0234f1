"""Parameters valid in float64 but out of range of the chains' dtype are refused, naming the
argument and the dtype, instead of silently becoming 0 or inf in the kernel."""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc.targets import DenseGaussian, DiagonalGaussian, StandardGaussian

F64 = dict(dtype=torch.float64)


def _sampler(dtype=torch.float32, **kwargs):
    return fused_hmc.Sampler(torch.zeros(3, 2, dtype=dtype), seed=0, progress=False, **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(inverse_mass=torch.tensor([1.0, 1e-50], **F64)), "inverse_mass = 1e-50 underflows"),
    (dict(inverse_mass=torch.tensor([1e39, 1.0], **F64)), "inverse_mass = 1e.39 overflows"),
    (dict(target=DiagonalGaussian(torch.zeros(2), torch.tensor([1.0, 1e-20], **F64))),
     r"precision 1 / scale\^2 = 1e.40 \(from scale = 1e-20\) overflows"),
    (dict(target=DiagonalGaussian(torch.zeros(2), torch.tensor([1e23, 1.0], **F64))),
     r"precision 1 / scale\^2 = 1e-46 \(from scale = 1e.23\) underflows"),
    (dict(target=StandardGaussian(torch.tensor([1e39, 0.0], **F64))), "mu = 1e.39 overflows"),
    (dict(mu=torch.tensor([0.0, -1e39], **F64)), "mu = -1e.39 overflows"),
    (dict(target=DenseGaussian(torch.zeros(2), torch.tensor([[1e39, 0], [0, 1.0]], **F64))),
     "DenseGaussian precision = 1e.39 overflows"),
    (dict(target=DenseGaussian(torch.zeros(2), torch.tensor([[1.0, 1 - 1e-9], [1 - 1e-9, 1.0]],
                                                            **F64))),
     "not positive definite once rounded to torch.float32"),
    (dict(step_size=1e39), r"step \(1 - jitter\) step_size / 2|step \(1 \+ jitter\) step_size"),
    (dict(step_size=1e-45), r"half step .* underflows"),
    (dict(step_size=3e38, jitter=0.5), r"largest step \(1 \+ jitter\) step_size = 4.5e.38"),
])
def test_float32_chains_refuse_parameters_out_of_float32(kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        _sampler(**kwargs)
    assert "torch.float32" in str(info.value)


def test_the_same_parameters_run_in_float64():
    """They fit float64, so float64 chains accept them (the error is about the rounding)."""
    _sampler(torch.float64, inverse_mass=torch.tensor([1.0, 1e-50], **F64))
    _sampler(torch.float64, target=DiagonalGaussian(torch.zeros(2),
                                                     torch.tensor([1.0, 1e-20], **F64)))
    _sampler(torch.float64, step_size=1e39)


def test_float64_parameters_out_of_float64():
    with pytest.raises(ValueError, match=r"1 / scale\^2 = inf \(from scale = 1e-200\) overflows "
                                         "in torch.float64 "):
        DiagonalGaussian(torch.zeros(1), torch.tensor([1e-200], **F64))
    with pytest.raises(ValueError, match="underflows in torch.float64"):
        DiagonalGaussian(torch.zeros(1), torch.tensor([1e160], **F64))


def test_initial_step_size_too_large_for_dual_averaging():
    q0 = torch.zeros(3, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"mu = log\(10 step_size\)"):
        fused_hmc.Sampler(q0, step_size=1.8e307, num_warmup=10, seed=0, progress=False)
    # without step-size adaptation there is no dual averaging to start
    fused_hmc.Sampler(q0, step_size=1.8e307, num_warmup=10, adapt_step_size=False, seed=0,
                      progress=False)
