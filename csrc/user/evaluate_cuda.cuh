// The CUDA side of CppTarget.log_density / .gradient: one thread per row. Included by the
// generated .cu after the generated model header (which defines FHMC_USER_WITH_CUDA there).
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include "user/evaluate.h"

namespace fused_hmc_user_eval {

template <Quantity Q, typename Target, typename S>
__global__ void evaluate_kernel(const Target target, const S* __restrict__ x, int64_t n,
                                S* __restrict__ value, S* __restrict__ grad) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  constexpr int64_t kDim = Target::kDim;
  evaluate_row<Q>(target, x + i * kDim, value + i, grad == nullptr ? nullptr : grad + i * kDim);
}

template <Quantity Q, typename Target, typename S>
void launch(const Target& target, const S* x, int64_t n, S* value, S* grad, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  evaluate_kernel<Q><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(target, x, n, value,
                                                                              grad);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void launch_evaluate_cuda(Quantity quantity, const UserTarget<fused_hmc_user::Scalar>& target,
                          const fused_hmc_user::Scalar* x, int64_t n, fused_hmc_user::Scalar* value,
                          fused_hmc_user::Scalar* grad, cudaStream_t stream) {
  if (n == 0) return;
  switch (quantity) {
    case Quantity::kValue: return launch<Quantity::kValue>(target, x, n, value, grad, stream);
    case Quantity::kGradient: return launch<Quantity::kGradient>(target, x, n, value, grad, stream);
    case Quantity::kDualGradient:
      return launch<Quantity::kDualGradient>(target, x, n, value, grad, stream);
  }
}

}  // namespace fused_hmc_user_eval
