"""Bayesian logistic regression in the German-credit shape (1,000 rows, 24 features + intercept).

The data are generated, deterministically, by :func:`logistic_regression_data` (nothing is
downloaded): features Z [n, k-1] standard normal from torch's CPU generator seeded with ``seed``,
standardised column-wise (mean 0, sd 1 with the 1/n convention), X = [1, Z] [n, k]; a known
coefficient vector beta_true [k] (N(0, 0.5^2) draws from the same generator) and labels
y_i ~ Bernoulli(sigmoid(X_i . beta_true)), y a float64 0/1 vector. The model, beta = x [k]:

    log p = sum_i (y_i eta_i - softplus(eta_i)) + sum_j N(beta_j | 0, prior_scale^2),  eta = X beta

up to a constant; prior_scale = 1 by default (the standard normal prior of the usual German-credit
benchmarks). Reported parameters: beta[1..k] themselves (no constraint).
"""
from __future__ import annotations

import functools

import torch
from torch.distributions import Bernoulli, Normal

from .model import Model, TorchForm, indexed

BETA_TRUE_SCALE = 0.5

# data.X [n, k] row-major, data.y [n] (0 or 1, the chains' dtype), data.prior_scale.
SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) {
  const int64_t n = data.X_shape[0], k = data.X_shape[1];
  const double inv_var = 1.0 / (data.prior_scale * data.prior_scale);
  T lp = -0.5 * inv_var * x[0] * x[0];
  for (int64_t j = 1; j < k; ++j) lp += -0.5 * inv_var * x[j] * x[j];
  for (int64_t i = 0; i < n; ++i) {
    const auto* row = data.X + i * k;
    T eta = row[0] * x[0];
    for (int64_t j = 1; j < k; ++j) eta = fma(row[j], x[j], eta);
    lp += data.y[i] * eta - softplus(eta);
  }
  return lp;
}
"""

# d/dbeta_j = sum_i (y_i - sigmoid(eta_i)) X_ij - beta_j / prior_scale^2.
GRADIENT_SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density_and_gradient(const T* x, T* grad, const Data& data) {
  const int64_t n = data.X_shape[0], k = data.X_shape[1];
  const double inv_var = 1.0 / (data.prior_scale * data.prior_scale);
  T lp = -0.5 * inv_var * x[0] * x[0];
  grad[0] = -inv_var * x[0];
  for (int64_t j = 1; j < k; ++j) {
    lp += -0.5 * inv_var * x[j] * x[j];
    grad[j] = -inv_var * x[j];
  }
  for (int64_t i = 0; i < n; ++i) {
    const auto* row = data.X + i * k;
    T eta = row[0] * x[0];
    for (int64_t j = 1; j < k; ++j) eta = fma(row[j], x[j], eta);
    lp += data.y[i] * eta - softplus(eta);
    const T residual = data.y[i] - sigmoid(eta);
    for (int64_t j = 0; j < k; ++j) grad[j] = fma(residual, row[j], grad[j]);
  }
  return lp;
}
"""


def logistic_regression_data(n: int = 1000, k: int = 25, seed: int = 0
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(X [n, k], y [n], beta_true [k]), float64, from torch's CPU generator seeded with seed."""
    for arg, value, least in (("n", n, 2), ("k", k, 2)):
        if not isinstance(value, int) or value < least:
            raise ValueError(f"{arg} must be an int >= {least}, got {value!r}")
    if not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    gen = torch.Generator().manual_seed(seed)
    Z = torch.randn(n, k - 1, generator=gen, dtype=torch.float64)
    Z = (Z - Z.mean(0)) / Z.std(0, correction=0)
    X = torch.cat([torch.ones(n, 1, dtype=torch.float64), Z], dim=1)
    beta_true = BETA_TRUE_SCALE * torch.randn(k, generator=gen, dtype=torch.float64)
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    y = (u < torch.sigmoid(X @ beta_true)).to(torch.float64)
    return X, y, beta_true


def _log_prob(x: torch.Tensor, data) -> torch.Tensor:
    X, y = data["X"].to(x.dtype), data["y"].to(x.dtype)
    eta = x @ X.T  # [..., n]
    prior = -0.5 * (x * x).sum(-1) / data["prior_scale"] ** 2
    return (y * eta - torch.logaddexp(eta, torch.zeros_like(eta))).sum(-1) + prior


def _constrain(x: torch.Tensor, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    return {name: x[..., j] for j, name in enumerate(names)}


def _torch_fn(p, data):
    """The torch form: beta ~ N(0, prior_scale^2), y ~ Bernoulli(logits = X beta)."""
    return (Normal(0.0, data["prior_scale"]).log_prob(p["beta"]).sum()
            + Bernoulli(logits=data["X"] @ p["beta"]).log_prob(data["y"]).sum())


def _torch_form(data: dict, k: int) -> TorchForm:
    return TorchForm(_torch_fn, {"beta": (k,)}, data, tuple(range(k)))


def logistic_regression(n: int = 1000, k: int = 25, seed: int = 0,
                        prior_scale: float = 1.0) -> Model:
    """Logistic regression on generated German-credit-shaped data, x = beta [k] (beta[1] the
    intercept's coefficient)."""
    if not isinstance(prior_scale, (int, float)) or not prior_scale > 0:
        raise ValueError(f"prior_scale must be a positive number, got {prior_scale!r}")
    X, y, _ = logistic_regression_data(n, k, seed)
    names = indexed("beta", k)
    data = {"X": X, "y": y, "prior_scale": float(prior_scale)}
    return Model(
        name="logistic_regression", dim=k, source=SOURCE, gradient_source=GRADIENT_SOURCE,
        data=data, names=names, constrained_names=names, log_prob_fn=_log_prob,
        constrain_fn=functools.partial(_constrain, names=names),
        torch_form=functools.partial(_torch_form, data, k), vector_chains=True)
