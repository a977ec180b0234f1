// The Python entry points of a CppTarget module: log p and its gradient for rows of positions, on
// the CPU (a parallel loop) and on CUDA (evaluate_cuda.cuh). Included by the generated module TU
// after the model header (its data through data_tensors.h's make_data); its PYBIND11_MODULE calls
// register_evaluate(m).
#pragma once

// Only the ATen and pybind11 headers it uses: a CppTarget compiles in half the time it takes with
// <torch/extension.h>.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/utils/pybind.h>

#include <tuple>
#include <vector>

#include "user/evaluate.h"

#ifdef FHMC_USER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace fused_hmc_user_eval {

using Scalar = fused_hmc_user::Scalar;
using Target = UserTarget<Scalar>;

// x: [n, dim] contiguous, the module's dtype, on the CPU or (CUDA builds) a GPU.
inline void check_positions(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2 && x.size(1) == Target::kDim, "CppTarget: x must have shape [n, ",
              Target::kDim, "], got ", x.sizes());
  TORCH_CHECK(x.scalar_type() == c10::CppTypeToScalarType<Scalar>::value,
              "CppTarget: this module was compiled for ", c10::CppTypeToScalarType<Scalar>::value,
              ", x is ", x.scalar_type());
  TORCH_CHECK(x.is_contiguous(), "CppTarget: x must be contiguous");
#ifdef FHMC_USER_WITH_CUDA
  TORCH_CHECK(x.is_cpu() || x.is_cuda(), "CppTarget: x must be on the CPU or a GPU, got ",
              x.device());
#else
  TORCH_CHECK(x.is_cpu(), "CppTarget: this module was compiled for the CPU only, x is on ",
              x.device());
#endif
}

template <Quantity Q>
void evaluate_cpu(const Target& target, const Scalar* x, int64_t n, Scalar* value, Scalar* grad) {
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      evaluate_row<Q>(target, x + i * Target::kDim, value + i,
                      grad == nullptr ? nullptr : grad + i * Target::kDim);
    }
  });
}

// value [n]; grad [n, dim], or undefined for kValue.
template <Quantity Q>
std::tuple<at::Tensor, at::Tensor> evaluate(const at::Tensor& x,
                                            const std::vector<at::Tensor>& tensors,
                                            const std::vector<double>& floats,
                                            const std::vector<int64_t>& ints) {
  check_positions(x);
  const Target target{make_data(tensors, floats, ints, x.device())};
  const int64_t n = x.size(0);
  at::Tensor value = at::empty({n}, x.options());
  at::Tensor grad = Q == Quantity::kValue ? at::Tensor() : at::empty_like(x);
  Scalar* grad_ptr = grad.defined() ? grad.data_ptr<Scalar>() : nullptr;
#ifdef FHMC_USER_WITH_CUDA
  if (x.is_cuda()) {
    const c10::cuda::CUDAGuard guard(x.device());
    launch_evaluate_cuda(Q, target, x.data_ptr<Scalar>(), n, value.data_ptr<Scalar>(), grad_ptr,
                         at::cuda::getCurrentCUDAStream());
    return {value, grad};
  }
#endif
  evaluate_cpu<Q>(target, x.data_ptr<Scalar>(), n, value.data_ptr<Scalar>(), grad_ptr);
  return {value, grad};
}

inline void register_evaluate(pybind11::module_& m) {
  m.def(
      "log_density",
      [](const at::Tensor& x, const std::vector<at::Tensor>& tensors,
         const std::vector<double>& floats, const std::vector<int64_t>& ints) {
        return std::get<0>(evaluate<Quantity::kValue>(x, tensors, floats, ints));
      },
      "log p at each row of x [n, dim] -> [n]");
  m.def("log_density_and_gradient", &evaluate<Quantity::kGradient>,
        "(log p [n], d log p / dx [n, dim]): the hand-written gradient where the source has one");
  m.def("dual_log_density_and_gradient", &evaluate<Quantity::kDualGradient>,
        "(log p [n], d log p / dx [n, dim]) by forward-mode dual numbers");
  m.attr("dim") = Target::kDim;
  m.attr("scalar_type") = sizeof(Scalar) == 8 ? "float64" : "float32";
#ifdef FHMC_USER_HAS_GRADIENT
  m.attr("has_gradient") = true;
#else
  m.attr("has_gradient") = false;
#endif
#ifdef FHMC_USER_WITH_CUDA
  m.attr("with_cuda") = true;
#else
  m.attr("with_cuda") = false;
#endif
}

}  // namespace fused_hmc_user_eval
