// N(mu, Lambda^-1) given the precision Lambda (symmetric positive definite, row-major [d, d]):
// f_j = sum_k Lambda[j, k] x_k at x = q - mu. The row product is the expensive part, d fused
// multiply-adds per coordinate per leapfrog step; the position sits in shared memory on CUDA.
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "../fp/rounding.h"
#include "../limits.h"
#include "../stats/chunk_sum.h"
#include "target.h"

namespace fused_hmc {

// Row j of Lambda times x, in the canonical order: four running sums, lane e taking k = 4c + e for
// chunks c in order (one fused multiply-add each), combined as (s0 + s1) + (s2 + s3). A thread
// reading the row as 16-byte vectors forms exactly these sums. Dims that are not a multiple of 4
// simply skip the missing lanes.
template <typename S>
FHMC_HD S dense_row_force(const S* row, const S* x, int64_t dim) {
  S s[kChunkSize] = {S(0), S(0), S(0), S(0)};
  for (int64_t k0 = 0; k0 < dim; k0 += kChunkSize) {
    for (int e = 0; e < kChunkSize && k0 + e < dim; ++e) {
      s[e] = fma_any(row[k0 + e], x[k0 + e], s[e]);
    }
  }
  return add_rn(add_rn(s[0], s[1]), add_rn(s[2], s[3]));
}

template <typename S>
struct DenseGaussian {
  using Scalar = S;
  static constexpr const char* kName = "dense";
  static constexpr TargetForce kForce = TargetForce::kRow;
  static constexpr bool kQuadratic = true;
  static constexpr bool kShifted = true;
  // x of one chain (8 KiB in float64 at d = 256) sits in shared memory while the matrix is read
  // row by row.
  static constexpr int64_t kMaxDim = kMaxDenseDim;
  static constexpr int64_t kFixedDim = 0;
  static constexpr int kTensorCount = 2;
  static constexpr const char* kTensorNames[] = {"mu", "precision"};
  static constexpr int kTensorRanks[] = {1, 2};

  const S* mu;         // [dim]
  const S* precision;  // [dim, dim]
  int64_t dim;

  static DenseGaussian make(const TargetTensors& t, int64_t dim) {
    return {static_cast<const S*>(t.data[0]), static_cast<const S*>(t.data[1]), dim};
  }
  FHMC_HD const S* shift() const { return mu; }
  FHMC_HD S row_force(int64_t j, const S* x) const {
    return dense_row_force(precision + j * dim, x, dim);
  }
};

}  // namespace fused_hmc
