// Torch glue shared by the CPU and CUDA test extensions: names to op ids, tensors to the
// element-wise checks of dual_test_ops.h. Backend supplies run_unary / run_binary / run_gradient
// over raw pointers (a loop on the CPU, a kernel on the GPU).
#pragma once

#include <torch/extension.h>

#include <string>
#include <vector>

#include "dual_test_ops.h"

namespace dual_test {

using namespace fused_hmc_user;

inline std::vector<std::string> unary_names() {
#define FHMC_TEST_NAME(name, expr) #name,
  return {FHMC_TEST_UNARY_OPS(FHMC_TEST_NAME)};
}
inline std::vector<std::string> binary_names() { return {FHMC_TEST_BINARY_OPS(FHMC_TEST_NAME)}; }
inline std::vector<std::string> model_names() {
  return {"eight_schools", "logistic", "all_functions"};
}
#undef FHMC_TEST_NAME

inline int find(const std::vector<std::string>& names, const std::string& name, const char* what) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int>(i);
  TORCH_CHECK_VALUE(false, what, ": unknown name '", name, "'");
}

inline void check_floating(const torch::Tensor& t, const char* what) {
  TORCH_CHECK_TYPE(t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kDouble, what,
                   " must be float32 or float64");
}

// x [n] -> [4, n]: plain f(x), the dual's value, lane 0 (seed 1), lane 1 (seed -0.5).
template <class Backend>
torch::Tensor unary(const std::string& name, torch::Tensor x) {
  const int op = find(unary_names(), name, "unary");
  check_floating(x, "x");
  x = x.contiguous();
  auto out = torch::empty({4, x.numel()}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "unary", [&] {
    Backend::template run_unary<scalar_t>(op, x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                                          x.numel());
  });
  return out;
}

// a, b [n] -> [8, n] (binary_all's rows).
template <class Backend>
torch::Tensor binary(const std::string& name, torch::Tensor a, torch::Tensor b) {
  const int op = find(binary_names(), name, "binary");
  check_floating(a, "a");
  TORCH_CHECK_VALUE(b.sizes() == a.sizes() && b.scalar_type() == a.scalar_type(),
                    "b must match a's shape and dtype");
  a = a.contiguous();
  b = b.contiguous();
  auto out = torch::empty({8, a.numel()}, a.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "binary", [&] {
    Backend::template run_binary<scalar_t>(op, a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                                           out.data_ptr<scalar_t>(), a.numel());
  });
  return out;
}

// x [n, dim] -> [n, 2 + dim]: plain value, the duals' value, the gradient (W tangents a pass).
// y, sigma [8]; X [N, P]; labels int64 [N]; all on x's device, y/sigma/X in x's dtype.
template <class Backend>
torch::Tensor gradient(const std::string& name, torch::Tensor x, int64_t width, torch::Tensor y,
                       torch::Tensor sigma, torch::Tensor X, torch::Tensor labels) {
  const int model = find(model_names(), name, "gradient");
  check_floating(x, "x");
  TORCH_CHECK_VALUE(x.dim() == 2 && x.size(1) <= kMaxTestDim, "x must be [n, dim <= 32]");
  x = x.contiguous();
  y = y.contiguous();
  sigma = sigma.contiguous();
  X = X.contiguous();
  labels = labels.contiguous();
  TORCH_CHECK_VALUE(X.dim() == 2 && labels.scalar_type() == torch::kLong, "X [N, P], labels int64");
  auto out = torch::empty({x.size(0), 2 + x.size(1)}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "gradient", [&] {
    TestData<scalar_t> data{};
    data.y = y.data_ptr<scalar_t>();
    data.sigma = sigma.data_ptr<scalar_t>();
    data.y_size = y.numel();
    data.X = X.data_ptr<scalar_t>();
    data.X_shape[0] = X.size(0);
    data.X_shape[1] = X.size(1);
    data.labels = labels.data_ptr<int64_t>();
    data.dim = x.size(1);
    Backend::template run_gradient<scalar_t>(static_cast<int>(width), model,
                                             x.data_ptr<scalar_t>(), static_cast<int>(x.size(1)),
                                             data, out.data_ptr<scalar_t>(), x.size(0));
  });
  return out;
}

}  // namespace dual_test

// add_more(m) defines a backend's own functions beside the shared ones.
#define FHMC_DUAL_TEST_MODULE(Backend, add_more)                                           \
  PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {                                               \
    add_more(m);                                                                           \
    m.def("unary", &dual_test::unary<Backend>);                                            \
    m.def("binary", &dual_test::binary<Backend>);                                          \
    m.def("gradient", &dual_test::gradient<Backend>);                                      \
    m.def("unary_names", &dual_test::unary_names);                                         \
    m.def("binary_names", &dual_test::binary_names);                                       \
    m.def("dual_width", [](int dim) { return fused_hmc::dual_width(dim); });              \
    m.def("digamma", [](double x) { return fused_hmc::digamma(x); });                      \
    m.def("digamma_f32", [](float x) { return fused_hmc::digamma(x); });                   \
  }
