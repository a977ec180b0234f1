"""posteriordb's eight_schools_noncentered (Rubin 1981; data and Stan code in data/).

Unconstrained x = (theta_trans[1..8], mu, log_tau); tau = exp(log_tau) > 0 as Stan samples it:

    log p = sum_j N(theta_trans_j | 0, 1) + sum_j N(y_j | mu + tau theta_trans_j, sigma_j)
            + N(mu | 0, 5) + Cauchy(tau | 0, 5) + log_tau     (the last: log |d tau / d log_tau|)

up to a constant (half-Cauchy: the truncation at 0 is a constant). Reported (posteriordb's names):
theta[j] = mu + tau theta_trans[j], mu, tau.
"""
from __future__ import annotations

import functools

import torch
from torch.distributions import HalfCauchy, Normal, constraints

from .model import Model, TorchForm, indexed
from .posteriordb_files import load_posterior

POSTERIOR = "eight_schools-eight_schools_noncentered"

SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) {
  const int64_t J = data.y_size;
  const T mu = x[J], log_tau = x[J + 1], tau = exp(log_tau);
  T lp = -0.5 * (mu / 5.0) * (mu / 5.0) - log1p((tau / 5.0) * (tau / 5.0)) + log_tau;
  for (int64_t j = 0; j < J; ++j) {
    const T z = (data.y[j] - (mu + tau * x[j])) / data.sigma[j];
    lp += -0.5 * x[j] * x[j] - 0.5 * z * z;
  }
  return lp;
}
"""

# d/d theta_trans_j = -t_j + z_j tau / sigma_j;  d/d mu = -mu / 25 + sum_j z_j / sigma_j;
# d/d log_tau = tau (sum_j z_j t_j / sigma_j - (2 tau / 25) / (1 + (tau / 5)^2)) + 1.
GRADIENT_SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density_and_gradient(const T* x, T* grad, const Data& data) {
  const int64_t J = data.y_size;
  const T mu = x[J], log_tau = x[J + 1], tau = exp(log_tau);
  const T r = tau / 5.0;
  T lp = -0.5 * (mu / 5.0) * (mu / 5.0) - log1p(r * r) + log_tau;
  T d_mu = -mu / 25.0, d_tau = -(2.0 * tau / 25.0) / (1.0 + r * r);
  for (int64_t j = 0; j < J; ++j) {
    const T t = x[j];
    const T z = (data.y[j] - (mu + tau * t)) / data.sigma[j];
    const T z_over_sigma = z / data.sigma[j];
    lp += -0.5 * t * t - 0.5 * z * z;
    grad[j] = -t + tau * z_over_sigma;
    d_mu += z_over_sigma;
    d_tau += t * z_over_sigma;
  }
  grad[J] = d_mu;
  grad[J + 1] = tau * d_tau + 1.0;
  return lp;
}
"""


def _log_prob(x: torch.Tensor, data) -> torch.Tensor:
    y, sigma = data["y"].to(x.dtype), data["sigma"].to(x.dtype)
    J = y.shape[0]
    t, mu, log_tau = x[..., :J], x[..., J], x[..., J + 1]
    tau = torch.exp(log_tau)
    z = (y - (mu[..., None] + tau[..., None] * t)) / sigma
    return (-0.5 * (t * t + z * z).sum(-1) - 0.5 * (mu / 5) ** 2 - torch.log1p((tau / 5) ** 2)
            + log_tau)


def _constrain(x: torch.Tensor, J: int) -> dict[str, torch.Tensor]:
    mu, tau = x[..., J], torch.exp(x[..., J + 1])
    theta = mu[..., None] + tau[..., None] * x[..., :J]
    out = {name: theta[..., j] for j, name in enumerate(indexed("theta", J))}
    out["mu"], out["tau"] = mu, tau
    return out


def _torch_fn(p, data):
    """The torch form (issue 29's example); HalfCauchy's scale in tau's dtype: with a Python
    float, torch casts the value to the default dtype (float32) before its log_prob."""
    theta = p["mu"] + p["tau"] * p["theta_trans"]
    return (Normal(0.0, 5.0).log_prob(p["mu"])
            + HalfCauchy(p["tau"].new_tensor(5.0)).log_prob(p["tau"])
            + Normal(0.0, 1.0).log_prob(p["theta_trans"]).sum()
            + Normal(theta, data["sigma"]).log_prob(data["y"]).sum())


def _torch_form(data: dict, J: int) -> TorchForm:
    params = {"mu": (), "tau": ((), constraints.positive), "theta_trans": (J,)}
    # torch x = (mu, log tau, theta_trans[0..J)); the C++ x = (theta_trans, mu, log_tau)
    return TorchForm(_torch_fn, params, data, tuple(range(2, J + 2)) + (0, 1))


def eight_schools() -> Model:
    """posteriordb's eight_schools_noncentered, x = (theta_trans[1..8], mu, log_tau)."""
    raw = load_posterior(POSTERIOR)["data"]
    J = int(raw["J"])
    data = {"y": torch.tensor(raw["y"], dtype=torch.float64),
            "sigma": torch.tensor(raw["sigma"], dtype=torch.float64)}
    return Model(
        name="eight_schools", dim=J + 2, source=SOURCE, gradient_source=GRADIENT_SOURCE,
        data=data, names=indexed("theta_trans", J) + ("mu", "log_tau"),
        constrained_names=indexed("theta", J) + ("mu", "tau"),
        log_prob_fn=_log_prob, constrain_fn=functools.partial(_constrain, J=J),
        posteriordb=POSTERIOR, torch_form=functools.partial(_torch_form, data, J),
        vector_chains=True)
