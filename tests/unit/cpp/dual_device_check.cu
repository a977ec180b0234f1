// Compile-only check (tests/unit/test_dual.py::test_headers_compile_with_nvcc): every
// target_functions.h name and value_and_gradient instantiated in device code for float, double,
// Dual<float, 8> and Dual<double, 10>, from user-style code (dual_test_ops.h's models).
#include "dual_test_ops.h"

namespace fused_hmc_user {

template <typename T>
__device__ T every_function(T a, T b) {
  T r = exp(a) + log(a) + log1p(a) + expm1(a) + sqrt(a) + abs(a) + fabs(a) + tanh(a) + sin(a) +
        cos(a) + lgamma(a) + sigmoid(a) + log_sigmoid(a) + softplus(a);
  r += pow(a, b) + pow(a, 2) + pow(a, 0.5) + pow(2.0f, b) + pow(3, b) + fmin(a, b) + fmax(a, 1) +
       fmin(0.5, b) + log_sum_exp(a, b) + log_sum_exp(a, 0) + log_sum_exp(1.5f, b);
  r += 2 * a - a * 0.5 + a / 3 - 1.0f / b + int64_t(4) * b;
  if (a < b || a <= 1 || 2.0 > b || a >= b || a == 0 || 1 != b) r = -r;
  r += a;
  r -= 1;
  r *= b;
  r /= 2.0;
  return r;
}

}  // namespace fused_hmc_user

template <class T, int W>
__global__ void dual_device_check(const T* in, T* out, fused_hmc_user::TestData<T> data) {
  using D = fused_hmc::Dual<T, W>;
  D shared_copy[26];  // default-constructible arrays in device code
  shared_copy[0] = D(in[0]);
  out[0] = fused_hmc_user::every_function(in[0], in[1]);
  out[1] = fused_hmc_user::every_function(shared_copy[0], D(in[1])).d[W - 1];
  T grad[10];
  D xd[10];
  out[2] = fused_hmc::value_and_gradient<W>(
      [&](const D* q) { return fused_hmc_user::eight_schools(q, data); }, in, 10, xd, grad);
  out[3] = grad[9] + fused_hmc_user::eight_schools(in, data) + fused_hmc_user::logistic(in, data) +
           fused_hmc_user::all_functions(in, data);
  T row[8];
  fused_hmc_user::unary_at(fused_hmc_user::k_lgamma, in[0], row);
  fused_hmc_user::binary_at(fused_hmc_user::k_pow, in[0], in[1], row + 4);
  out[4] = row[0] + row[5] + fused_hmc::digamma(in[2]);
}

template __global__ void dual_device_check<float, 8>(const float*, float*,
                                                     fused_hmc_user::TestData<float>);
template __global__ void dual_device_check<double, 10>(const double*, double*,
                                                       fused_hmc_user::TestData<double>);
static_assert(fused_hmc::dual_width(10) == 10 && fused_hmc::dual_width(26) == 8, "dual_width");
