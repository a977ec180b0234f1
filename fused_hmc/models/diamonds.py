"""posteriordb's diamonds: brms linear regression, centred predictors (data, Stan code: data/).

Stan's transformed data, done here once: means_X[k] = mean(X[:, k + 1]) and Xc = X[:, 1:] - means_X
(the intercept column dropped), Kc = K - 1 = 24 predictors, N = 5000 rows. Unconstrained
x = (b[1..Kc], Intercept, log_sigma), sigma = exp(log_sigma):

    log p = sum_k N(b_k | 0, 1) + student_t(Intercept | 3, 8, 10) + student_t(sigma | 3, 0, 10)
            + log_sigma + sum_i N(Y_i | Intercept + Xc_i . b, sigma)

up to a constant (brms' half-Student-t normaliser, `- student_t_lccdf(0 | 3, 0, 10)`, is one). The
posteriordb reference summary reports b[1..24], Intercept and sigma (not brms' generated
b_Intercept), so :meth:`Model.constrain` gives exactly those.
"""
from __future__ import annotations

import functools

import torch

from .model import Model, indexed
from .posteriordb_files import load_posterior

POSTERIOR = "diamonds-diamonds"

# The rows are spread over a chain's LANES lanes (CppTarget(lanes=...)): each lane sums the
# residuals of its rows, lane 0 adds the priors. The predictors are stored by column, data.XcT
# [Kc, N], so a chain's lanes read neighbouring rows of one column together (one memory sector);
# K is the compile-time Kc (FUSED_HMC_DIM - 2), so x, a row and grad stay in registers.
# student_t(v | 3, m, s) = -2 log1p(((v - m) / s)^2 / 3) + c.
LANES = 8
SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density_rows(const T* x, const Data& data, fused_hmc::Rows rows) {
  constexpr int64_t K = FUSED_HMC_DIM - 2;
  const int64_t N = data.Y_size;
  const T intercept = x[K], log_sigma = x[K + 1], sigma = exp(log_sigma);
  T sq = 0.0;  // this lane's sum of squared residuals
  for (int64_t i = rows.first; i < N; i += rows.step) {
    T r = data.Y[i] - intercept;
    for (int64_t k = 0; k < K; ++k) r += -data.XcT[k * N + i] * x[k];
    sq += r * r;
  }
  T lp = -0.5 * sq / (sigma * sigma);
  if (rows.first == 0) {
    const T u = (intercept - 8.0) / 10.0, s = sigma / 10.0;
    lp += -2.0 * log1p(u * u / 3.0) - 2.0 * log1p(s * s / 3.0) + (1.0 - N) * log_sigma;
    for (int64_t k = 0; k < K; ++k) lp += -0.5 * x[k] * x[k];
  }
  return lp;
}
"""

# r_i = Y_i - Intercept - Xc_i . b, S = sum r_i^2, u = (Intercept - 8) / 10, s = sigma / 10:
# d/db_k = -b_k + sum_i r_i Xc_ik / sigma^2;
# d/dIntercept = -(4 u / 30) / (1 + u^2 / 3) + sum r_i / sigma^2;
# d/dlog_sigma = -(4 s^2 / 3) / (1 + s^2 / 3) + 1 - N + S / sigma^2;
# a lane's share takes the sums over its rows, lane 0's the terms of no row besides.
GRADIENT_SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density_and_gradient_rows(const T* x, T* grad, const Data& data,
                                             fused_hmc::Rows rows) {
  constexpr int64_t K = FUSED_HMC_DIM - 2;
  const int64_t N = data.Y_size;
  const T intercept = x[K], log_sigma = x[K + 1], sigma = exp(log_sigma);
  T g[K];
  for (int64_t k = 0; k < K; ++k) g[k] = 0.0;
  T sq = 0.0, r_sum = 0.0;
  for (int64_t i = rows.first; i < N; i += rows.step) {
    // The row is read twice (the second time from the cache) rather than held: in float64 the
    // held row, x and g would not fit the registers.
    T r = data.Y[i] - intercept;
    for (int64_t k = 0; k < K; ++k) r += -data.XcT[k * N + i] * x[k];
    sq += r * r;
    r_sum += r;
    for (int64_t k = 0; k < K; ++k) g[k] += data.XcT[k * N + i] * r;
  }
  const T inv_var = 1.0 / (sigma * sigma);
  for (int64_t k = 0; k < K; ++k) grad[k] = g[k] * inv_var;
  grad[K] = r_sum * inv_var;
  grad[K + 1] = sq * inv_var;
  T lp = -0.5 * sq * inv_var;
  if (rows.first == 0) {
    const T u = (intercept - 8.0) / 10.0, s = sigma / 10.0;
    lp += -2.0 * log1p(u * u / 3.0) - 2.0 * log1p(s * s / 3.0) + (1.0 - N) * log_sigma;
    for (int64_t k = 0; k < K; ++k) {
      lp += -0.5 * x[k] * x[k];
      grad[k] += -x[k];
    }
    grad[K] += -(4.0 * u / 30.0) / (1.0 + u * u / 3.0);
    grad[K + 1] += -(4.0 * s * s / 3.0) / (1.0 + s * s / 3.0) + (1.0 - N);
  }
  return lp;
}
"""


def centred_predictors(X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """brms' transformed data: (Xc [N, K-1], means_X [K-1]) from the design matrix X [N, K] whose
    first column is the intercept."""
    means = X[:, 1:].mean(dim=0)
    return X[:, 1:] - means, means


def _log_prob(x: torch.Tensor, data) -> torch.Tensor:
    Xc, Y = data["XcT"].to(x.dtype).T, data["Y"].to(x.dtype)
    K = Xc.shape[1]
    b, intercept, log_sigma = x[..., :K], x[..., K], x[..., K + 1]
    sigma = torch.exp(log_sigma)
    r = Y - intercept[..., None] - b @ Xc.T  # [..., N]
    u, s = (intercept - 8) / 10, sigma / 10
    return (-0.5 * (b * b).sum(-1) - 2 * torch.log1p(u * u / 3) - 2 * torch.log1p(s * s / 3)
            + (1 - Y.shape[0]) * log_sigma - 0.5 * (r * r).sum(-1) / (sigma * sigma))


def _constrain(x: torch.Tensor, K: int) -> dict[str, torch.Tensor]:
    out = {name: x[..., k] for k, name in enumerate(indexed("b", K))}
    out["Intercept"], out["sigma"] = x[..., K], torch.exp(x[..., K + 1])
    return out


def diamonds() -> Model:
    """posteriordb's diamonds (brms), x = (b[1..24], Intercept, log_sigma); data XcT [24, 5000]
    (the centred predictors by column), Y [5000]; its rows over LANES lanes a chain."""
    raw = load_posterior(POSTERIOR)["data"]
    X = torch.tensor(raw["X"], dtype=torch.float64)
    Xc, _ = centred_predictors(X)
    Kc = Xc.shape[1]
    data = {"XcT": Xc.T.contiguous(), "Y": torch.tensor(raw["Y"], dtype=torch.float64)}
    return Model(
        name="diamonds", dim=Kc + 2, source=SOURCE, gradient_source=GRADIENT_SOURCE, data=data,
        names=indexed("b", Kc) + ("Intercept", "log_sigma"),
        constrained_names=indexed("b", Kc) + ("Intercept", "sigma"),
        log_prob_fn=_log_prob, constrain_fn=functools.partial(_constrain, K=Kc),
        posteriordb=POSTERIOR, lanes=LANES)
