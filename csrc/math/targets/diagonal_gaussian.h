// N(mu, diag(1 / lambda)): f_j = lambda_j x_j at x = q - mu (lambda: the precisions, 1 / scale^2).
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "../fp/rounding.h"
#include "target.h"

namespace fused_hmc {

template <typename S>
struct DiagonalGaussian {
  using Scalar = S;
  static constexpr const char* kName = "diagonal";
  static constexpr TargetForce kForce = TargetForce::kCoordinate;
  static constexpr bool kQuadratic = true;
  static constexpr bool kShifted = true;
  static constexpr int64_t kMaxDim = 0;
  static constexpr int64_t kFixedDim = 0;
  static constexpr int kTensorCount = 2;
  static constexpr const char* kTensorNames[] = {"mu", "precision"};
  static constexpr int kTensorRanks[] = {1, 1};

  const S* mu;         // [dim]
  const S* precision;  // [dim]
  int64_t dim;

  static DiagonalGaussian make(const TargetTensors& t, int64_t dim) {
    return {static_cast<const S*>(t.data[0]), static_cast<const S*>(t.data[1]), dim};
  }
  FHMC_HD const S* shift() const { return mu; }
  FHMC_HD S coefficient(int64_t j) const { return precision[j]; }
  FHMC_HD S force(S x, S lambda) const { return mul_rn(lambda, x); }
};

}  // namespace fused_hmc
