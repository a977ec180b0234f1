"""The rows form of a logistic regression in C++ (docs/TARGETS.md), shared by the lanes tests:
y_i ~ Bernoulli(sigmoid(X_i . x[:K] + x[K])), x ~ N(0, 2^2), the predictors column-major in
data.XT [K, N]."""

SHARE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density_rows(const T* x, const Data& data, fused_hmc::Rows rows) {
  constexpr int64_t K = FUSED_HMC_DIM - 1;
  const int64_t N = data.y_size;
  T lp = 0.0;
  for (int64_t i = rows.first; i < N; i += rows.step) {
    T eta = x[K];
    for (int64_t k = 0; k < K; ++k) eta += data.XT[k * N + i] * x[k];
    lp += data.y[i] * eta - softplus(eta);
  }
  if (rows.first == 0) {
    for (int64_t k = 0; k <= K; ++k) lp += -0.125 * x[k] * x[k];
  }
  return lp;
}
"""

# d/dx_k of the share: sum_i (y_i - sigmoid(eta_i)) X_ik, and -x_k / 4 in partial 0.
GRADIENT = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density_and_gradient_rows(const T* x, T* grad, const Data& data,
                                             fused_hmc::Rows rows) {
  constexpr int64_t K = FUSED_HMC_DIM - 1;
  const int64_t N = data.y_size;
  T lp = 0.0;
  for (int64_t k = 0; k <= K; ++k) grad[k] = 0.0;
  for (int64_t i = rows.first; i < N; i += rows.step) {
    T eta = x[K];
    for (int64_t k = 0; k < K; ++k) eta += data.XT[k * N + i] * x[k];
    lp += data.y[i] * eta - softplus(eta);
    const T residual = data.y[i] - sigmoid(eta);
    for (int64_t k = 0; k < K; ++k) grad[k] += residual * data.XT[k * N + i];
    grad[K] += residual;
  }
  if (rows.first == 0) {
    for (int64_t k = 0; k <= K; ++k) {
      lp += -0.125 * x[k] * x[k];
      grad[k] += -0.25 * x[k];
    }
  }
  return lp;
}
"""
