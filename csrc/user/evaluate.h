// One row of CppTarget.log_density / .gradient: shared by the CPU loop (evaluate_module.h) and the
// CUDA kernel (evaluate_cuda.cuh). Torch-free. Included after user/user_target.h.
#pragma once

#include <cstdint>

#include "math/fp/host_device.h"

namespace fused_hmc_user_eval {

enum class Quantity : int {
  kValue,         // log p only
  kGradient,      // log p and the target's gradient (hand-written with gradient=True, else duals)
  kDualGradient,  // log p and the forward-mode gradient, whatever the source defines
};

// value: [1], grad: [dim] (unused for kValue); x: the row's [dim] position.
template <Quantity Q, typename Target, typename S>
FHMC_HD void evaluate_row(const Target& target, const S* x, S* value, S* grad) {
  if constexpr (Q == Quantity::kValue) {
    *value = target.log_density(x);
  } else if constexpr (Q == Quantity::kGradient) {
    *value = target.log_density_and_gradient(x, grad);
  } else {
    *value = target.dual_log_density_and_gradient(x, grad);
  }
}

}  // namespace fused_hmc_user_eval

#ifdef FHMC_USER_WITH_CUDA
#include <cuda_runtime_api.h>

namespace fused_hmc_user_eval {
// Defined in evaluate_cuda.cuh (the generated .cu): one thread per row of x [n, dim] (device,
// contiguous); value [n], grad [n, dim] (nullptr for kValue); launched on `stream`.
void launch_evaluate_cuda(Quantity quantity, const UserTarget<fused_hmc_user::Scalar>& target,
                          const fused_hmc_user::Scalar* x, int64_t n, fused_hmc_user::Scalar* value,
                          fused_hmc_user::Scalar* grad, cudaStream_t stream);
}  // namespace fused_hmc_user_eval
#endif
