// The user's C++ model (docs/TARGETS.md) as a target the kernels call: the whole position at once.
// Torch-free, so g++ and nvcc compile it alike.
//
// Included by the TU that fused_hmc/cpp_target.py generates, after it has defined
//   FHMC_USER_DIM                 the number of unconstrained parameters (an int literal),
//   FHMC_USER_ROWS                (only for a rows-form source) the source defines the share
//                                 log_density_rows (and log_density_and_gradient_rows),
//   FHMC_USER_ROW_PARTIALS        (with FHMC_USER_ROWS) the partial count P, chosen from the
//                                 data's rows (fused_hmc/lanes.py's row_partials: 32 or 256),
//   FHMC_USER_LANES               the lanes a chain takes on CUDA (1, 2, 4, .. P; 1 unless
//                                 FHMC_USER_ROWS; above 32 a chain is a block),
//   namespace fused_hmc_user { using Scalar; struct Data; the user's log_density templates },
//   FHMC_USER_HAS_GRADIENT        (only with gradient=True) the source defines
//                                 log_density_and_gradient, used instead of the duals.
// A rows-form log p is the fixed tree over P strided partials
// (math/targets/lane_rows.h), whatever the lanes: the CUDA kernels call
// lane_log_density_and_gradient in each of a chain's lanes (its block of partials) and add the
// lanes' sums by the butterfly; everything else evaluates the whole tree in one thread.
#pragma once

#include "math/autodiff/dual.h"
#include "math/fp/host_device.h"
#include "math/targets/lane_rows.h"

#ifdef FHMC_USER_ROWS
#ifdef FHMC_USER_ROW_PARTIALS
#define FHMC_USER_PARTIALS FHMC_USER_ROW_PARTIALS
#else
#define FHMC_USER_PARTIALS fused_hmc::kRowPartials
#endif
#else
#define FHMC_USER_PARTIALS 1
#endif

template <typename S>
struct UserTarget {
  static constexpr int kDim = FHMC_USER_DIM;
  static constexpr int kLanes = FHMC_USER_LANES;
  // The partials log p is formed from (1: a plain log_density, one call), and a lane's share.
  static constexpr int kPartials = FHMC_USER_PARTIALS;
  static constexpr int kLanePartials = kPartials / kLanes;
  static_assert(kDim >= 1, "FHMC_USER_DIM must be at least 1");
  static_assert(kPartials >= 1 && kPartials <= fused_hmc::kMaxRowPartials &&
                    (kPartials & (kPartials - 1)) == 0,
                "FHMC_USER_ROW_PARTIALS must be a power of two from 1 to 256");
  static_assert(kLanes >= 1 && kLanes <= fused_hmc::kMaxRowPartials &&
                    (kLanes & (kLanes - 1)) == 0,
                "FHMC_USER_LANES must be a power of two from 1 to 256");
  static_assert(kLanes <= kPartials,
                "lanes above 1 need a rows-form source (FHMC_USER_ROWS), and at most "
                "FHMC_USER_ROW_PARTIALS of them");

  fused_hmc_user::Data data;  // POD of device (or host) pointers, shapes and scalars

  // log p(x) up to a constant; x: the chain's own [kDim] position.
  FHMC_HD S log_density(const S* x) const {
    return fused_hmc::sum_partials<kPartials, kPartials, S>(
        [this, x](fused_hmc::Rows rows) { return share(x, data, rows); }, 0);
  }

  // log p(x), and d log p / dx written to grad[0..kDim).
  FHMC_HD S log_density_and_gradient(const S* x, S* grad) const {
    return fused_hmc::sum_partials_with_gradient<kPartials, kPartials, kDim, S>(
        [this, x](fused_hmc::Rows rows, S* g) { return partial_and_gradient(x, g, rows); }, grad,
        0);
  }

  // Lane `lane` of kLanes: the sum of its block of partials, [lane, lane + 1) * kLanePartials, by
  // the tree's lower levels (the butterfly over the lanes forms the upper ones).
  FHMC_HD S lane_log_density_and_gradient(const S* x, S* grad, int lane) const {
    return fused_hmc::sum_partials_with_gradient<kLanePartials, kPartials, kDim, S>(
        [this, x](fused_hmc::Rows rows, S* g) { return partial_and_gradient(x, g, rows); }, grad,
        lane * kLanePartials);
  }

  // The forward-mode gradient of log_density, whatever the source defines: what check() compares
  // a hand-written gradient against.
  FHMC_HD S dual_log_density_and_gradient(const S* x, S* grad) const {
    return fused_hmc::sum_partials_with_gradient<kPartials, kPartials, kDim, S>(
        [this, x](fused_hmc::Rows rows, S* g) { return dual_partial(x, g, rows); }, grad, 0);
  }

 private:
  // One partial (all of log p for a plain source) and its gradient.
  FHMC_HD S partial_and_gradient(const S* x, S* grad, fused_hmc::Rows rows) const {
#ifdef FHMC_USER_HAS_GRADIENT
#ifdef FHMC_USER_ROWS
    return fused_hmc_user::log_density_and_gradient_rows(x, grad, data, rows);
#else
    (void)rows;
    return fused_hmc_user::log_density_and_gradient(x, grad, data);
#endif
#else
    return dual_partial(x, grad, rows);
#endif
  }

  template <typename T>
  FHMC_HD static T share(const T* x, const fused_hmc_user::Data& d, fused_hmc::Rows rows) {
#ifdef FHMC_USER_ROWS
    return fused_hmc_user::log_density_rows(x, d, rows);
#else
    (void)rows;
    return fused_hmc_user::log_density(x, d);
#endif
  }

  FHMC_HD S dual_partial(const S* x, S* grad, fused_hmc::Rows rows) const {
    constexpr int kWidth = fused_hmc::dual_width(kDim);
    fused_hmc::Dual<S, kWidth> xd[kDim];
    const fused_hmc_user::Data& d = data;
    return fused_hmc::value_and_gradient<kWidth>(
        [&d, rows](const fused_hmc::Dual<S, kWidth>* q) { return share(q, d, rows); }, x, kDim,
        xd, grad);
  }
};
