// N(mu, I): f_j = x_j at x = q - mu.
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "target.h"

namespace fused_hmc {

template <typename S>
struct StandardGaussian {
  using Scalar = S;
  static constexpr const char* kName = "standard";
  static constexpr TargetForce kForce = TargetForce::kCoordinate;
  static constexpr bool kQuadratic = true;
  static constexpr bool kShifted = true;
  static constexpr int64_t kMaxDim = 0;
  static constexpr int64_t kFixedDim = 0;
  static constexpr int kTensorCount = 1;
  static constexpr const char* kTensorNames[] = {"mu"};
  static constexpr int kTensorRanks[] = {1};

  const S* mu;  // [dim]
  int64_t dim;

  static StandardGaussian make(const TargetTensors& t, int64_t dim) {
    return {static_cast<const S*>(t.data[0]), dim};
  }
  FHMC_HD const S* shift() const { return mu; }
  FHMC_HD S coefficient(int64_t) const { return S(1); }
  FHMC_HD S force(S x, S) const { return x; }
};

}  // namespace fused_hmc
