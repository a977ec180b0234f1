// The user's C++ model (TARGETS.md) as a target the kernels call: one thread per chain, the whole
// position at once. Torch-free, so g++ and nvcc compile it alike.
//
// Included by the TU that fused_hmc/cpp_target.py generates, after it has defined
//   FHMC_USER_DIM                 the number of unconstrained parameters (an int literal),
//   namespace fused_hmc_user { using Scalar; struct Data; the user's log_density templates },
//   FHMC_USER_HAS_GRADIENT        (only with gradient=True) the source defines
//                                 log_density_and_gradient, used instead of the duals.
#pragma once

#include "math/dual.h"
#include "math/host_device.h"

template <typename S>
struct UserTarget {
  static constexpr int kDim = FHMC_USER_DIM;
  static_assert(kDim >= 1, "FHMC_USER_DIM must be at least 1");

  fused_hmc_user::Data data;  // POD of device (or host) pointers, shapes and scalars

  // log p(x) up to a constant; x: the chain's own [kDim] position.
  FHMC_HD S log_density(const S* x) const { return fused_hmc_user::log_density(x, data); }

  // log p(x), and d log p / dx written to grad[0..kDim).
  FHMC_HD S log_density_and_gradient(const S* x, S* grad) const {
#ifdef FHMC_USER_HAS_GRADIENT
    return fused_hmc_user::log_density_and_gradient(x, grad, data);
#else
    return dual_log_density_and_gradient(x, grad);
#endif
  }

  // The forward-mode gradient of log_density, whatever the source defines: what check() compares
  // a hand-written gradient against.
  FHMC_HD S dual_log_density_and_gradient(const S* x, S* grad) const {
    constexpr int kWidth = fused_hmc::dual_width(kDim);
    fused_hmc::Dual<S, kWidth> xd[kDim];
    const fused_hmc_user::Data& d = data;
    return fused_hmc::value_and_gradient<kWidth>(
        [&d](const fused_hmc::Dual<S, kWidth>* q) { return fused_hmc_user::log_density(q, d); }, x,
        kDim, xd, grad);
  }
};
