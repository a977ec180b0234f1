// The user's C++ model (docs/TARGETS.md) as a target the kernels call: the whole position at once.
// Torch-free, so g++ and nvcc compile it alike.
//
// Included by the TU that fused_hmc/cpp_target.py generates, after it has defined
//   FHMC_USER_DIM                 the number of unconstrained parameters (an int literal),
//   FHMC_USER_LANES               the lanes a chain's data rows are spread over (1, 2, 4, .. 32),
//   namespace fused_hmc_user { using Scalar; struct Data; the user's log_density templates },
//   FHMC_USER_HAS_GRADIENT        (only with gradient=True) the source defines
//                                 log_density_and_gradient, used instead of the duals.
// With FHMC_USER_LANES = G > 1 the source defines the lane shares log_density_rows (and
// log_density_and_gradient_rows) instead (math/lane_rows.h): the CUDA kernels call one share per
// lane (lane_log_density_and_gradient), everything else their sum in the kernels' order.
#pragma once

#include "math/dual.h"
#include "math/host_device.h"
#include "math/lane_rows.h"

template <typename S>
struct UserTarget {
  static constexpr int kDim = FHMC_USER_DIM;
  static constexpr int kLanes = FHMC_USER_LANES;
  static_assert(kDim >= 1, "FHMC_USER_DIM must be at least 1");
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0,
                "FHMC_USER_LANES must be a power of two from 1 to 32");

  fused_hmc_user::Data data;  // POD of device (or host) pointers, shapes and scalars

  // log p(x) up to a constant; x: the chain's own [kDim] position.
  FHMC_HD S log_density(const S* x) const {
    return fused_hmc::sum_over_lanes<kLanes, S>(
        [this, x](fused_hmc::Rows rows) { return lane_log_density(x, rows); }, 0, kLanes);
  }

  // log p(x), and d log p / dx written to grad[0..kDim).
  FHMC_HD S log_density_and_gradient(const S* x, S* grad) const {
    return fused_hmc::sum_over_lanes_with_gradient<kLanes, kDim, S>(
        [this, x](fused_hmc::Rows rows, S* g) { return lane_log_density_and_gradient(x, g, rows); },
        grad, 0, kLanes);
  }

  // The forward-mode gradient of log_density, whatever the source defines: what check() compares
  // a hand-written gradient against.
  FHMC_HD S dual_log_density_and_gradient(const S* x, S* grad) const {
    return fused_hmc::sum_over_lanes_with_gradient<kLanes, kDim, S>(
        [this, x](fused_hmc::Rows rows, S* g) { return lane_dual_gradient(x, g, rows); }, grad, 0,
        kLanes);
  }

  // One lane's share (all of log p with one lane).
  FHMC_HD S lane_log_density(const S* x, fused_hmc::Rows rows) const {
    return share(x, data, rows);
  }

  FHMC_HD S lane_log_density_and_gradient(const S* x, S* grad, fused_hmc::Rows rows) const {
#ifdef FHMC_USER_HAS_GRADIENT
#if FHMC_USER_LANES > 1
    return fused_hmc_user::log_density_and_gradient_rows(x, grad, data, rows);
#else
    (void)rows;
    return fused_hmc_user::log_density_and_gradient(x, grad, data);
#endif
#else
    return lane_dual_gradient(x, grad, rows);
#endif
  }

 private:
  template <typename T>
  FHMC_HD static T share(const T* x, const fused_hmc_user::Data& d, fused_hmc::Rows rows) {
#if FHMC_USER_LANES > 1
    return fused_hmc_user::log_density_rows(x, d, rows);
#else
    (void)rows;
    return fused_hmc_user::log_density(x, d);
#endif
  }

  FHMC_HD S lane_dual_gradient(const S* x, S* grad, fused_hmc::Rows rows) const {
    constexpr int kWidth = fused_hmc::dual_width(kDim);
    fused_hmc::Dual<S, kWidth> xd[kDim];
    const fused_hmc_user::Data& d = data;
    return fused_hmc::value_and_gradient<kWidth>(
        [&d, rows](const fused_hmc::Dual<S, kWidth>* q) { return share(q, d, rows); }, x, kDim,
        xd, grad);
  }
};
