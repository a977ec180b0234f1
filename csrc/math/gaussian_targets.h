// The Gaussian target family of the tuned samplers (run_chains_tuned, warmup_chains): the force
// f(x) = -grad log pi = Lambda x at x = q - mu, for
//   kStandard  N(mu, I)                  f_j = x_j
//   kDiagonal  N(mu, diag(1 / lambda))   f_j = lambda_j * x_j         (lambda = 1 / scale^2)
//   kDense     N(mu, Lambda^-1)          f_j = sum_k Lambda[j, k] x_k (Lambda symmetric positive
//                                                                      definite, row-major [d, d])
// Every force is a function of one coordinate's row, so a CUDA thread computes the forces of its own
// chunk from x (in shared memory for kDense) and the matrix (in global or shared memory); the dense
// row product is the expensive part, d fused multiply-adds per coordinate per leapfrog step.
#pragma once

#include <cstdint>

#include "chunk_sum.h"
#include "gaussian_hmc.h"
#include "host_device.h"

namespace fused_hmc {

enum class TargetKind : int64_t { kStandard = 0, kDiagonal = 1, kDense = 2 };

// The largest dimension of a kDense target, in every build: x of one chain (8 KiB in float64 at
// d = 256) sits in shared memory while the matrix is read row by row.
constexpr int64_t kMaxDenseDim = 256;

// Row j of Lambda times x, in the canonical order: four running sums, lane e taking k = 4c + e for
// chunks c in order (one fused multiply-add each), combined as (s0 + s1) + (s2 + s3). A thread
// reading the row as 16-byte vectors forms exactly these sums. Dims that are not a multiple of 4
// simply skip the missing lanes.
template <typename scalar_t>
FHMC_HD scalar_t dense_row_force(const scalar_t* row, const scalar_t* x, int64_t dim) {
  scalar_t s[kChunkSize] = {scalar_t(0), scalar_t(0), scalar_t(0), scalar_t(0)};
  for (int64_t k0 = 0; k0 < dim; k0 += kChunkSize) {
    for (int e = 0; e < kChunkSize && k0 + e < dim; ++e) {
      s[e] = fma_any(row[k0 + e], x[k0 + e], s[e]);
    }
  }
  return add_rn(add_rn(s[0], s[1]), add_rn(s[2], s[3]));
}

// One chain's view of its target.
template <typename scalar_t>
struct GaussianTarget {
  TargetKind kind;
  int64_t dim;
  const scalar_t* mu;         // [dim]
  const scalar_t* precision;  // kDiagonal: [dim]; kDense: [dim, dim] row-major; kStandard: unused

  // f_j at x = q - mu ([dim]; only x[j] is read unless the target is dense).
  FHMC_HD scalar_t force(const scalar_t* x, int64_t j) const { return force_at(x[j], j, x); }

  // f_j given x_j, for a kernel holding x_j in a register; `x` ([dim], e.g. shared memory) is read
  // only by a dense target.
  FHMC_HD scalar_t force_at(scalar_t x_j, int64_t j, const scalar_t* x) const {
    switch (kind) {
      case TargetKind::kDiagonal:
        return mul_rn(precision[j], x_j);
      case TargetKind::kDense:
        return dense_row_force(precision + j * dim, x, dim);
      default:
        return x_j;
    }
  }
};

// This coordinate's share of 2 * (H(proposed) - H(current)) with H = 0.5 x^T Lambda x +
// 0.5 p^T M^-1 p: (x1 - x0) (f0 + f1) + m_inv (p1 - p0) (p1 + p0), since for symmetric Lambda
// x1^T Lambda x1 - x0^T Lambda x0 = (x1 - x0)^T (Lambda x1 + Lambda x0). Differences, not energies,
// are summed (no cancellation). For kStandard with m_inv = 1 this is gaussian_hmc.h's
// energy_change_twice bit for bit.
template <typename scalar_t>
FHMC_HD scalar_t target_energy_change_twice(scalar_t x0, scalar_t f0, scalar_t p0, scalar_t x1,
                                            scalar_t f1, scalar_t p1, scalar_t inv_mass) {
  return fma_any(sub_rn(x1, x0), add_rn(f0, f1),
                 mul_rn(inv_mass, mul_rn(sub_rn(p1, p0), add_rn(p1, p0))));
}

}  // namespace fused_hmc
