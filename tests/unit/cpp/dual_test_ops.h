// Test-only code over csrc/math/targets/target_functions.h, shared by the CPU extension
// (dual_test_cpu.cpp), the CUDA extension (dual_test_cuda.cu) and the nvcc compile check
// (dual_device_check.cu). The models are written exactly as a user writes one (TARGETS.md): inside
// namespace fused_hmc_user, unqualified function names, int/double literals mixed with T.
#pragma once

#include <stdint.h>

#include "math/targets/target_functions.h"

namespace fused_hmc_user {

// What the test models read (a CppTarget would generate one such POD per target).
template <class T>
struct TestData {
  const T* y;
  const T* sigma;
  int64_t y_size;
  const T* X;  // [X_shape[0], X_shape[1]] row-major
  int64_t X_shape[2];
  const int64_t* labels;  // [X_shape[0]] in {0, 1}
  int64_t dim;
};

// posteriordb's eight_schools_noncentered, TARGETS.md's example verbatim.
template <typename T, typename Data>
FUSED_HMC_HD T eight_schools(const T* x, const Data& data) {
  const T mu = x[8], log_tau = x[9], tau = exp(log_tau);
  T lp = -0.5 * (mu / 5.0) * (mu / 5.0) - log1p((tau / 5.0) * (tau / 5.0)) + log_tau;
  for (int64_t j = 0; j < data.y_size; ++j) {
    const T z = (data.y[j] - (mu + tau * x[j])) / data.sigma[j];
    lp += -0.5 * x[j] * x[j] - 0.5 * z * z;
  }
  return lp;
}

// Logistic regression, x = (alpha, beta[P]), N(0, 2.5^2) prior on alpha, N(0, 1) on beta.
template <typename T, typename Data>
FUSED_HMC_HD T logistic(const T* x, const Data& data) {
  const int64_t n_rows = data.X_shape[0], p_cols = data.X_shape[1];
  T lp = -0.5 * (x[0] / 2.5) * (x[0] / 2.5);
  for (int64_t p = 0; p < p_cols; ++p) lp -= 0.5 * x[1 + p] * x[1 + p];
  for (int64_t n = 0; n < n_rows; ++n) {
    T eta = x[0];
    for (int64_t p = 0; p < p_cols; ++p) eta += data.X[n * p_cols + p] * x[1 + p];
    lp += data.labels[n] == 1 ? log_sigmoid(eta) : log_sigmoid(-eta);
  }
  return lp;
}

// Every listed function once (dim >= 11; each coordinate past 10 adds a softplus term).
template <typename T, typename Data>
FUSED_HMC_HD T all_functions(const T* x, const Data& data) {
  T lp = softplus(x[0]) + log_sum_exp(x[1], x[2]) + lgamma(exp(x[3]) + 0.5) + pow(exp(x[4]), x[5]);
  lp += sqrt(1 + x[6] * x[6]) + tanh(x[7]) * sin(x[8]) + cos(x[9]) + expm1(x[10] / 3);
  lp += log1p(exp(x[0])) + sigmoid(x[1]) * log_sigmoid(x[2]) + abs(x[3] - x[4]);
  lp += fmax(x[5], x[6]) + fmin(x[7], 0.5) + pow(x[8], 2) + pow(2.0, x[9]);
  lp += log(1 + x[10] * x[10]) + fabs(x[0]) / 4 - x[1] / (2 + x[2] * x[2]);
  lp += log_sum_exp(x[3], 0.0) + fmax(1, x[4]) + 2.0f * fmin(0.25, x[5]);
  lp += fma(x[7], x[8], x[9]) + fma(x[0], 0.5, 1) + fma(2, x[1], x[2]);
  if (x[6] > 0.5) lp *= 1.5;
  for (int64_t i = 11; i < data.dim; ++i) {
    lp += softplus(x[i]) * x[i - 1] - 0.25 * x[i] * x[i];
    lp /= 1.0625;
  }
  return lp;
}

// ---- element-wise checks: each function on plain T and on Dual<T, 2> ----
template <class T>
FUSED_HMC_HD T value_of(T x) { return x; }
// a comparison's result: a bool, or a pack of chains' lane mask (1 where it holds)
template <class T, class M,
          typename std::enable_if<std::is_same<M, fused_hmc::lane_mask_t<T>>::value, int>::type = 0>
FUSED_HMC_HD T value_of(const M& x) { return where(x, T(1), T(0)); }
template <class T, int W>
FUSED_HMC_HD T value_of(const fused_hmc::Dual<T, W>& x) { return x.v; }
template <class T>
FUSED_HMC_HD T slope_of(T, int) { return T(0); }  // a constant result
template <class T, class M,
          typename std::enable_if<std::is_same<M, fused_hmc::lane_mask_t<T>>::value, int>::type = 0>
FUSED_HMC_HD T slope_of(const M&, int) { return T(0); }
template <class T, int W>
FUSED_HMC_HD T slope_of(const fused_hmc::Dual<T, W>& x, int k) { return x.d[k]; }

template <class T>
FUSED_HMC_HD int as_int(T x) { return static_cast<int>(x); }
template <class T, int W>
FUSED_HMC_HD int as_int(const fused_hmc::Dual<T, W>& x) { return static_cast<int>(x.v); }

#define FHMC_TEST_UNARY_OPS(X)                                                         \
  X(neg, -a) X(exp, exp(a)) X(log, log(a)) X(log1p, log1p(a)) X(expm1, expm1(a))       \
  X(sqrt, sqrt(a)) X(abs, abs(a)) X(fabs, fabs(a)) X(tanh, tanh(a)) X(sin, sin(a))     \
  X(cos, cos(a)) X(lgamma, lgamma(a)) X(sigmoid, sigmoid(a))                           \
  X(log_sigmoid, log_sigmoid(a)) X(softplus, softplus(a))

// The binary operations of two values that may differ chain by chain (in a pack of chains, every
// lane its own), then pow_int, whose integer exponent a pack's chains share.
#define FHMC_TEST_LANEWISE_BINARY_OPS(X)                                               \
  X(add, a + b) X(sub, a - b) X(mul, a * b) X(div, a / b) X(pow, pow(a, b))            \
  X(fmin, fmin(a, b)) X(fmax, fmax(a, b)) X(log_sum_exp, log_sum_exp(a, b))            \
  X(fma, fma(a, b, a)) X(lt, a < b) X(le, a <= b) X(gt, a > b) X(ge, a >= b)           \
  X(eq, a == b) X(ne, a != b) X(where, where(a < b, a * b, b - a))
#define FHMC_TEST_BINARY_OPS(X) FHMC_TEST_LANEWISE_BINARY_OPS(X) X(pow_int, pow(a, as_int(b)))

#define FHMC_TEST_ENUM(name, expr) k_##name,
enum UnaryOp { FHMC_TEST_UNARY_OPS(FHMC_TEST_ENUM) kUnaryCount };
enum BinaryOp { FHMC_TEST_BINARY_OPS(FHMC_TEST_ENUM) kBinaryCount };
#undef FHMC_TEST_ENUM

// out[0..4): plain f(x); the dual's value and its two lanes, seeded (1, -0.5).
template <class T, class F>
FUSED_HMC_HD void unary_all(const F& f, T x, T* out) {
  fused_hmc::Dual<T, 2> xd(x);
  xd.d[0] = T(1);
  xd.d[1] = T(-0.5);
  const auto plain = f(x);
  const auto dual = f(xd);
  out[0] = value_of<T>(plain);
  out[1] = value_of<T>(dual);
  out[2] = slope_of<T>(dual, 0);
  out[3] = slope_of<T>(dual, 1);
}

// out[0..8): plain f(a, b); f(Dual a, Dual b): value, d/da, d/db; f(Dual a, b): value, d/da;
// f(a, Dual b): value, d/db.
template <class T, class F>
FUSED_HMC_HD void binary_all(const F& f, T a, T b, T* out) {
  fused_hmc::Dual<T, 2> ad(a), bd(b);
  ad.d[0] = T(1);
  bd.d[1] = T(1);
  const auto plain = f(a, b);
  const auto dd = f(ad, bd);
  const auto ds = f(ad, b);
  const auto sd = f(a, bd);
  out[0] = value_of<T>(plain);
  out[1] = value_of<T>(dd);
  out[2] = slope_of<T>(dd, 0);
  out[3] = slope_of<T>(dd, 1);
  out[4] = value_of<T>(ds);
  out[5] = slope_of<T>(ds, 0);
  out[6] = value_of<T>(sd);
  out[7] = slope_of<T>(sd, 1);
}

template <class T>
FUSED_HMC_HD void unary_at(int op, T x, T* out) {
  switch (op) {
#define FHMC_TEST_CASE(name, expr) \
  case k_##name: unary_all([](const auto& a) { return expr; }, x, out); break;
    FHMC_TEST_UNARY_OPS(FHMC_TEST_CASE)
#undef FHMC_TEST_CASE
    default: break;
  }
}

template <class T>
FUSED_HMC_HD void binary_at(int op, T a, T b, T* out) {
  switch (op) {
#define FHMC_TEST_CASE(name, expr) \
  case k_##name: binary_all([](const auto& a, const auto& b) { return expr; }, a, b, out); break;
    FHMC_TEST_BINARY_OPS(FHMC_TEST_CASE)
#undef FHMC_TEST_CASE
    default: break;
  }
}

enum Model { k_eight_schools, k_logistic, k_all_functions, kModelCount };
constexpr int kMaxTestDim = 32;

// One point: out[0] plain value, out[1] the duals' value, out[2..2+dim) the gradient, with W
// tangents per pass over a local scratch array, as a kernel's thread does it.
template <int W, class T>
FUSED_HMC_HD void gradient_at(int model, const T* x, int dim, const TestData<T>& data, T* out) {
  fused_hmc::Dual<T, W> xd[kMaxTestDim];
  switch (model) {
#define FHMC_TEST_MODEL(name)                                                              \
  case k_##name:                                                                           \
    out[0] = name(x, data);                                                                \
    out[1] = fused_hmc::value_and_gradient<W>(                                             \
        [&](const fused_hmc::Dual<T, W>* q) { return name(q, data); }, x, dim, xd, out + 2); \
    break;
    FHMC_TEST_MODEL(eight_schools)
    FHMC_TEST_MODEL(logistic)
    FHMC_TEST_MODEL(all_functions)
#undef FHMC_TEST_MODEL
    default: break;
  }
}

// The W values the tests ask for (a template argument needs a constant).
#define FHMC_TEST_WIDTHS(X) X(1) X(3) X(8) X(10) X(16)

template <class T>
FUSED_HMC_HD void gradient_at_width(int width, int model, const T* x, int dim,
                                    const TestData<T>& data, T* out) {
  switch (width) {
#define FHMC_TEST_WIDTH(w) \
  case w: gradient_at<w>(model, x, dim, data, out); break;
    FHMC_TEST_WIDTHS(FHMC_TEST_WIDTH)
#undef FHMC_TEST_WIDTH
    default: break;
  }
}

}  // namespace fused_hmc_user
