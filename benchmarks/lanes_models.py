"""The four data models of issue 35's benchmark (bench_lanes.py), each written for
fused_hmc.TorchModel and, over the same unconstrained coordinates with the same Jacobian terms and
constants, in JAX (jax_models.py): the two must give the same log density at any point.

- earnings: a linear regression shaped like posteriordb's earnings-logearn_interaction, 1,192
  rows, log_earn ~ Normal(b0 + b1 height + b2 male + b3 height male, sigma), flat priors as there,
  x = (beta[4], log sigma). Synthetic data (torch's CPU generator, seed 35): height
  ~ N(66.6, 3.8) inches, male ~ Bernoulli(0.37), beta = (8.4, 0.017, -0.08, 0.007), sigma 0.88.
  The height is standardised (the design's columns: z, male, z male, z = (height - mean) / sd), so
  the posterior's scales are about sigma / sqrt(rows), not posteriordb's correlated raw heights.
- logistic_regression: the library's (1,000 x 25, its torch form).
- gauss_mix: a two-component normal mixture over 1,000 rows, as posteriordb's low_dim_gauss_mix:
  y ~ theta N(mu1, sigma1) + (1 - theta) N(mu2, sigma2) through torch.logaddexp, mu ordered
  (fused_hmc.constraints.ordered), mu ~ N(0, 2), sigma ~ half-N(0, 2), theta ~ Beta(5, 5);
  x = (mu1, log(mu2 - mu1), log sigma[2], logit theta). Synthetic data (seed 36): theta 0.4,
  mu (-2, 1.5), sigma (1, 0.75).
- diamonds: the library's (posteriordb's diamonds, QR form, 5,000 x 24 + intercept + sigma).

FMA_PER_ROW: the multiply-adds one gradient evaluation spends on one data row in the model's own
arithmetic (not the generated code's bookkeeping): with k columns, k for the linear predictor, one
for the residual's square (or the row's scalar function) and k for the gradient's X^T r;
transcendental functions count nothing.
- earnings (k = 3): 3 + 1 + 3 + 1 (the intercept's gradient) = 8;
- logistic regression (k = 25): 25 + 25 + 1 = 51;
- gauss_mix: per component the standardised residual, its square and its gradient (3), two
  components, and the mixture weights' two multiply-adds in the backward pass: 8 (the row's work
  is mostly its two exp and one log1p, which the count leaves out);
- diamonds (k = 24): 24 + 1 + 24 = 49.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax_models
import torch
from torch.distributions import Beta, Normal, constraints

EARNINGS_ROWS, MIX_ROWS = 1192, 1000
FMA_PER_ROW = {"earnings": 8, "logistic_regression": 51, "gauss_mix": 8, "diamonds": 49}


@dataclass(frozen=True)
class LanesModel:
    """One benchmark model: fn(p, data), params and data for TorchModel; rows (the data's rows);
    jax(data, dtype) -> log density of x; library: the fused_hmc.models Model behind it (its
    posteriordb reference and constrained values) or None."""

    name: str
    fn: Callable
    params: dict
    data: dict
    rows: int
    jax: Callable
    library: object = None

    @property
    def fma_per_row(self) -> int:
        return FMA_PER_ROW[self.name]


def earnings_data(rows: int = EARNINGS_ROWS, seed: int = 35) -> dict:
    gen = torch.Generator().manual_seed(seed)
    height = 66.6 + 3.8 * torch.randn(rows, generator=gen, dtype=torch.float64)
    male = (torch.rand(rows, generator=gen, dtype=torch.float64) < 0.37).double()
    noise = 0.88 * torch.randn(rows, generator=gen, dtype=torch.float64)
    log_earn = 8.4 + 0.017 * height - 0.08 * male + 0.007 * height * male + noise
    z = (height - height.mean()) / height.std(correction=0)
    return {"X": torch.stack([z, male, z * male], 1).contiguous(), "y": log_earn}


def earnings_fn(p, data):
    beta = p["beta"]
    mean = beta[0] + data["X"] @ beta[1:]
    return Normal(mean, p["sigma"]).log_prob(data["y"]).sum()


def gauss_mix_data(rows: int = MIX_ROWS, seed: int = 36) -> dict:
    gen = torch.Generator().manual_seed(seed)
    first = torch.rand(rows, generator=gen, dtype=torch.float64) < 0.4
    z = torch.randn(rows, generator=gen, dtype=torch.float64)
    return {"y": torch.where(first, -2.0 + 1.0 * z, 1.5 + 0.75 * z)}


def gauss_mix_fn(p, data):
    mu, sigma, theta = p["mu"], p["sigma"], p["theta"]
    prior = (Normal(0.0, 2.0).log_prob(mu).sum() + Normal(0.0, 2.0).log_prob(sigma).sum()
             + Beta(5.0, 5.0).log_prob(theta))
    y = data["y"]
    first = torch.log(theta) + Normal(mu[0], sigma[0]).log_prob(y)
    second = torch.log1p(-theta) + Normal(mu[1], sigma[1]).log_prob(y)
    return prior + torch.logaddexp(first, second).sum()


def _library(name: str, **sizes) -> LanesModel:
    from fused_hmc import models

    model = getattr(models, name)(**sizes)
    form = model.torch_form()
    if list(form.to_cpp) != list(range(model.dim)):  # the reference's constrained values need it
        raise RuntimeError(f"{name}'s torch form no longer has the C++ form's coordinates")
    rows = max(max(t.shape) for t in form.data.values() if isinstance(t, torch.Tensor))
    return LanesModel(name, form.fn, form.params, form.data, rows,
                      getattr(jax_models, f"{name}_torch_form"), model)


def make(name: str, rows: int | None = None) -> LanesModel:
    """The benchmark model `name` (MODELS); rows: that many synthetic data rows (the same
    generators, longer) in place of the model's own, for the models in RESIZABLE."""
    from fused_hmc.constraints import ordered

    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}: one of {list(MODELS)}")
    if rows is not None and name not in RESIZABLE:
        raise ValueError(f"{name} has fixed data: rows= goes with {list(RESIZABLE)}")
    if name == "earnings":
        rows = rows or EARNINGS_ROWS
        return LanesModel(name, earnings_fn,
                          {"beta": (4,), "sigma": ((), constraints.positive)},
                          earnings_data(rows), rows, jax_models.earnings_torch_form)
    if name == "gauss_mix":
        rows = rows or MIX_ROWS
        return LanesModel(name, gauss_mix_fn,
                          {"mu": ((2,), ordered), "sigma": ((2,), constraints.positive),
                           "theta": ((), constraints.unit_interval)},
                          gauss_mix_data(rows), rows, jax_models.gauss_mix_torch_form)
    if name == "logistic_regression" and rows is not None:
        return _library(name, n=rows)
    return _library(name)


def mode_and_scale(model: LanesModel) -> tuple[torch.Tensor, float]:
    """(the posterior mode on the unconstrained scale [dim], the smallest posterior sd there), by
    L-BFGS on torch's own log density (float64, CPU) and the eigenvalues of its Hessian: the
    gradient-rate runs start near the mode with a step size below the leapfrog's stability limit
    (2 x the smallest sd) so that every step stays finite."""
    from fused_hmc.torch_model import Parameters
    from fused_hmc.torch_model.trace import tracing_defaults

    parameters = Parameters(model.params)

    def negative_lp(x):
        with tracing_defaults():
            return -(model.fn(parameters.constrain(x), dict(model.data))
                     + parameters.log_abs_det_jacobian(x))

    x = torch.zeros(parameters.dim, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([x], max_iter=500, tolerance_grad=1e-9,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        value = negative_lp(x)
        value.backward()
        return value

    for _ in range(5):
        optimizer.step(closure)
    mode = x.detach()
    curvature = torch.linalg.eigvalsh(torch.autograd.functional.hessian(negative_lp, mode))
    if not bool(torch.isfinite(mode).all()) or not float(curvature.min()) > 0:
        raise RuntimeError(f"{model.name}: L-BFGS found no mode (curvature {curvature.tolist()})")
    return mode, float(curvature.max()) ** -0.5


MODELS = ("earnings", "logistic_regression", "gauss_mix", "diamonds")
RESIZABLE = ("earnings", "logistic_regression", "gauss_mix")  # synthetic data of any rows
