"""posteriordb's diamonds: brms linear regression, centred predictors (data, Stan code: data/).

Stan's transformed data, done here once: means_X[k] = mean(X[:, k + 1]) and Xc = X[:, 1:] - means_X
(the intercept column dropped), Kc = K - 1 = 24 predictors, N = 5000 rows. In the coefficients b:

    log p = sum_k N(b_k | 0, 1) + student_t(Intercept | 3, 8, 10) + student_t(sigma | 3, 0, 10)
            + log_sigma + sum_i N(Y_i | Intercept + Xc_i . b, sigma)

up to a constant (brms' half-Student-t normaliser, `- student_t_lccdf(0 | 3, 0, 10)`, is one).

Sampled in the QR form by default (Stan User's Guide, "The QR reparameterization"): with the thin
QR decomposition Xc = Q R scaled as Stan scales it, Q* = Q sqrt(N - 1) and R* = R / sqrt(N - 1),
the chains move theta = R* b, so Xc b = Q* theta and b = R*^-1 theta. The map is linear, so its
Jacobian is a constant and the posterior of b is exactly posteriordb's. It matters: in b the
posterior's covariance has condition number about 3.4e5, and a diagonal mass matrix leaves 2.6e5
of it (the predictors are polynomial terms, b[22] and b[23] correlate at -0.89): HMC then needs
hundreds of leapfrog steps per independent draw. In theta the likelihood's precision is the
identity over sigma^2 and the prior's R*^-T R*^-1 is small beside it: condition number about 1.5.
`diamonds(qr=False)` samples b itself (the hard form, kept as a benchmark of mixing).

Unconstrained x = (theta[1..Kc] or b[1..Kc], Intercept, log_sigma), sigma = exp(log_sigma). The
posteriordb reference summary reports b[1..24], Intercept and sigma (not brms' generated
b_Intercept), so :meth:`Model.constrain` gives exactly those.
"""
from __future__ import annotations

import functools
import math

import torch
from torch.distributions import Normal, StudentT, constraints

from .model import Model, TorchForm, indexed
from .posteriordb_files import load_posterior

POSTERIOR = "diamonds-diamonds"

# One source serves both forms. data.XT [Kc, N] is the design the chains' coefficients multiply
# (Q*^T, or Xc^T), stored by column so that a chain's lanes read neighbouring rows of one column
# together (one memory sector); data.B [Kc, Kc] (row-major, upper triangular: R*^-1, or the
# identity) maps them to b for the prior, b = B x. The source is in the rows form (docs/TARGETS.md):
# a share sums the residuals of its rows, share 0 adds the priors; CppTarget spreads the shares
# over the lanes it chooses (lanes="auto"). K is the compile-time Kc (FUSED_HMC_DIM - 2), so x, a
# row and grad stay in registers. student_t(v | 3, m, s) = -2 log1p(((v - m) / s)^2 / 3) + c.
SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density_rows(const T* x, const Data& data, fused_hmc::Rows rows) {
  constexpr int64_t K = FUSED_HMC_DIM - 2;
  const int64_t N = data.Y_size;
  const T intercept = x[K], log_sigma = x[K + 1], sigma = exp(log_sigma);
  T sq = 0.0;  // this lane's sum of squared residuals
  for (int64_t i = rows.first; i < N; i += rows.step) {
    T r = data.Y[i] - intercept;
    for (int64_t k = 0; k < K; ++k) r = fma(-data.XT[k * N + i], x[k], r);
    sq = fma(r, r, sq);
  }
  T lp = -0.5 * sq / (sigma * sigma);
  if (rows.first == 0) {
    const T u = (intercept - 8.0) / 10.0, s = sigma / 10.0;
    lp += -2.0 * log1p(u * u / 3.0) - 2.0 * log1p(s * s / 3.0) + (1.0 - N) * log_sigma;
    for (int64_t k = 0; k < K; ++k) {
      T b = 0.0;  // b_k = sum_{j >= k} B[k, j] x_j
      for (int64_t j = k; j < K; ++j) b = fma(data.B[k * K + j], x[j], b);
      lp += -0.5 * b * b;
    }
  }
  return lp;
}
"""

# r_i = Y_i - Intercept - XT[:, i] . x, S = sum r_i^2, u = (Intercept - 8) / 10, s = sigma / 10,
# b = B x:
# d/dx_j = sum_i r_i XT[j, i] / sigma^2 - sum_{k <= j} B[k, j] b_k;
# d/dIntercept = -(4 u / 30) / (1 + u^2 / 3) + sum r_i / sigma^2;
# d/dlog_sigma = -(4 s^2 / 3) / (1 + s^2 / 3) + 1 - N + S / sigma^2;
# a share takes the sums over its rows, share 0 the terms of no row besides.
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
    for (int64_t k = 0; k < K; ++k) r = fma(-data.XT[k * N + i], x[k], r);
    sq = fma(r, r, sq);
    r_sum += r;
    for (int64_t k = 0; k < K; ++k) g[k] = fma(data.XT[k * N + i], r, g[k]);
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
      T b = 0.0;
      for (int64_t j = k; j < K; ++j) b = fma(data.B[k * K + j], x[j], b);
      lp += -0.5 * b * b;
      for (int64_t j = k; j < K; ++j) grad[j] = fma(-data.B[k * K + j], b, grad[j]);
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


def scaled_qr(Xc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Stan's scaled thin QR of Xc [N, K]: (Q* [N, K], R*^-1 [K, K] upper triangular) with
    Xc = Q* R*, Q* = Q sqrt(N - 1), R* = R / sqrt(N - 1). The signs are fixed so that R's
    diagonal is positive (the decomposition is then unique)."""
    Q, R = torch.linalg.qr(Xc, mode="reduced")
    signs = torch.sign(torch.diagonal(R))
    Q, R = Q * signs, R * signs[:, None]
    scale = math.sqrt(Xc.shape[0] - 1)
    eye = torch.eye(R.shape[0], dtype=R.dtype)
    R_inv = torch.linalg.solve_triangular(R / scale, eye, upper=True)
    return Q * scale, R_inv


def _log_prob(x: torch.Tensor, data) -> torch.Tensor:
    design, Y, B = data["XT"].to(x.dtype).T, data["Y"].to(x.dtype), data["B"].to(x.dtype)
    K = design.shape[1]
    coef, intercept, log_sigma = x[..., :K], x[..., K], x[..., K + 1]
    b = coef @ B.T
    sigma = torch.exp(log_sigma)
    r = Y - intercept[..., None] - coef @ design.T  # [..., N]
    u, s = (intercept - 8) / 10, sigma / 10
    return (-0.5 * (b * b).sum(-1) - 2 * torch.log1p(u * u / 3) - 2 * torch.log1p(s * s / 3)
            + (1 - Y.shape[0]) * log_sigma - 0.5 * (r * r).sum(-1) / (sigma * sigma))


def _constrain(x: torch.Tensor, B: torch.Tensor) -> dict[str, torch.Tensor]:
    K = B.shape[0]
    b = x[..., :K] @ B.to(x.dtype).T
    out = {name: b[..., k] for k, name in enumerate(indexed("b", K))}
    out["Intercept"], out["sigma"] = x[..., K], torch.exp(x[..., K + 1])
    return out


def _torch_fn(p, data, coef: str):
    """The torch form: the coefficients (theta, or b without QR) as the C++ samples them."""
    b = data["B"] @ p[coef]
    mean = p["Intercept"] + p[coef] @ data["XT"]
    return (Normal(0.0, 1.0).log_prob(b).sum() + StudentT(3.0, 8.0, 10.0).log_prob(p["Intercept"])
            + StudentT(3.0, 0.0, 10.0).log_prob(p["sigma"])
            + Normal(mean, p["sigma"]).log_prob(data["Y"]).sum())


def _torch_form(data: dict, coef: str, K: int) -> TorchForm:
    params = {coef: (K,), "Intercept": (), "sigma": ((), constraints.positive)}
    return TorchForm(functools.partial(_torch_fn, coef=coef), params, data, tuple(range(K + 2)))


def diamonds(qr: bool = True) -> Model:
    """posteriordb's diamonds (brms), x = (theta[1..24], Intercept, log_sigma) with b = R*^-1 theta
    (qr=True, the default) or x = (b[1..24], Intercept, log_sigma) (qr=False); data XT [24, 5000]
    (Q*^T or the centred predictors, by column), B [24, 24] (R*^-1 or the identity), Y [5000];
    in the rows form (CppTarget's lanes="auto")."""
    raw = load_posterior(POSTERIOR)["data"]
    X = torch.tensor(raw["X"], dtype=torch.float64)
    Xc, _ = centred_predictors(X)
    Kc = Xc.shape[1]
    design, B = scaled_qr(Xc) if qr else (Xc, torch.eye(Kc, dtype=torch.float64))
    data = {"XT": design.T.contiguous(), "B": B.contiguous(),
            "Y": torch.tensor(raw["Y"], dtype=torch.float64)}
    return Model(
        name="diamonds", dim=Kc + 2, source=SOURCE, gradient_source=GRADIENT_SOURCE, data=data,
        names=indexed("theta" if qr else "b", Kc) + ("Intercept", "log_sigma"),
        constrained_names=indexed("b", Kc) + ("Intercept", "sigma"),
        log_prob_fn=_log_prob, constrain_fn=functools.partial(_constrain, B=B),
        posteriordb=POSTERIOR,
        torch_form=functools.partial(_torch_form, data, "theta" if qr else "b", Kc))
