// A dense mass matrix and its estimation in warm-up (Stan's dense_e), shared by every build.
//
// The inverse mass M^-1 = C (in warm-up: the estimated covariance of the target) is carried as its
// Cholesky factor L, C = L L^T, lower triangular, row-major [d, d] in the chains' dtype: the run
// op's inv_mass [G, d, d] holds L, never C, so the kernels factorise only when warm-up estimates a
// new C, and the momentum, the velocity and the kinetic energy all come from the same L (the
// dynamics are exactly Hamiltonian for the C that L represents, whatever L's rounding):
//   momentum   p = L^-T z, z ~ N(0, I), so p ~ N(0, (L L^T)^-1) = N(0, M)
//   velocity   v = M^-1 p = C p = L (L^T p)
//   kinetic    K(p) = 0.5 p^T C p;  2 (K(p1) - K(p0)) = (p1 - p0)^T C (p1 + p0)  (C symmetric)
// (Neal 2011, "MCMC using Hamiltonian dynamics", sec. 5.4.1.) Products and solves run in float64
// in a fixed order and are rounded once to the chains' dtype; with L = I each is exact, so a dense
// identity mass gives the diagonal unit mass's bits (tests/unit/test_dense_mass.py).
//
// Estimation (Stan Reference Manual, "HMC algorithm parameters: automatic parameter tuning"): the
// covariance S of a slow window's draws from Welford co-moments, regularised as
// (n / (n + 5)) S + 1e-3 (5 / (n + 5)) I, then factorised in float64. Pooled over chains (G = 1)
// S is the covariance of every chain's window draws about their grand mean, strays left out
// (pooled_dense_covariance). A new C that is not finite and positive definite leaves L as it was
// (the driver counts these window ends).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../fp/host_device.h"
#include "../fp/lanes.h"
#include "../fp/rounding.h"
#include "../stats/chunk_sum.h"
#include "mass_matrix.h"

namespace fused_hmc {

// Whether a Mass policy of math/hmc/transition.h is dense: its momentum and velocity need the
// whole row (momentum_row, velocity_row, kinetic_row below), not one coordinate at a time.
template <class Mass, class = void>
constexpr bool kDenseMass = false;
template <class Mass>
constexpr bool kDenseMass<Mass, std::void_t<decltype(Mass::kDense)>> = Mass::kDense;

// A dense mass's coefficient of coordinate i in the kinetic change: (C (p1 + p0))_i, with the
// coordinate's term (p1 - p0)_i (C (p1 + p0))_i. The diagonal's coefficient is m_inv_i with the
// term m_inv_i (p1 - p0)_i (p1 + p0)_i (transition.h); both are the kinetic change summed over i.
template <typename scalar_t>
struct DenseKineticCoefficient {
  scalar_t value;
};
template <typename scalar_t>
FHMC_HD scalar_t kinetic_change_twice(scalar_t p0, scalar_t p1, DenseKineticCoefficient<scalar_t> c) {
  return mul_rn(sub_rn(p1, p0), c.value);
}

// z [d] <- L^-T z: back substitution by rows of L, from the last (row i of L is contiguous).
// Lane-generic: for a pack of chains (cpu/simd/pack.h) each lane solves with its own factor.
template <typename scalar_t>
FHMC_HD void solve_upper_transposed(const scalar_t* factor, int64_t dim, scalar_t* z,
                                    lane_double_t<scalar_t>* work) {
  using Wide = lane_double_t<scalar_t>;
  for (int64_t j = 0; j < dim; ++j) work[j] = static_cast<Wide>(z[j]);
  for (int64_t i = dim - 1; i >= 0; --i) {
    const scalar_t* row = factor + i * dim;
    const Wide p = div_rn(work[i], static_cast<Wide>(row[i]));
    work[i] = p;
    for (int64_t k = 0; k < i; ++k) work[k] = fma_any(-static_cast<Wide>(row[k]), p, work[k]);
  }
  for (int64_t j = 0; j < dim; ++j) z[j] = static_cast<scalar_t>(work[j]);
}

// out [d] <- L (L^T p), each sum in float64 in index order; out may be p.
template <typename scalar_t>
FHMC_HD void factor_product(const scalar_t* factor, int64_t dim, const scalar_t* p, scalar_t* out,
                            lane_double_t<scalar_t>* work) {
  using Wide = lane_double_t<scalar_t>;
  for (int64_t k = 0; k < dim; ++k) work[k] = Wide(0.0);
  for (int64_t i = 0; i < dim; ++i) {  // work = L^T p, row i of L times p_i added in order of i
    const scalar_t* row = factor + i * dim;
    const Wide pi = static_cast<Wide>(p[i]);
    for (int64_t k = 0; k <= i; ++k) work[k] = fma_any(static_cast<Wide>(row[k]), pi, work[k]);
  }
  for (int64_t i = 0; i < dim; ++i) {  // out = L work
    const scalar_t* row = factor + i * dim;
    Wide sum(0.0);
    for (int64_t k = 0; k <= i; ++k) sum = fma_any(static_cast<Wide>(row[k]), work[k], sum);
    out[i] = static_cast<scalar_t>(sum);
  }
}

// The Mass policy of a dense inverse mass over one chain's rows in memory (the CPU's serial group),
// or a pack's (scalar_t a pack: each lane's factor in its lanes): factor L [d, d] and scratch rows,
// a velocity row [d] in the chains' dtype and a float64 row [d].
template <typename scalar_t>
struct DenseMass {
  static constexpr bool kDense = true;
  const scalar_t* factor;           // [dim, dim], lower triangle read
  int64_t dim;
  scalar_t* velocity;               // [dim] scratch
  lane_double_t<scalar_t>* work;    // [dim] scratch

  // Coordinate by coordinate the momentum is z itself; momentum_row then solves for the row.
  FHMC_HD scalar_t momentum(scalar_t z, int64_t) const { return z; }
  FHMC_HD void momentum_row(scalar_t* p) const { solve_upper_transposed(factor, dim, p, work); }
  // C p into the velocity row, which it returns.
  FHMC_HD const scalar_t* velocity_row(const scalar_t* p) const {
    factor_product(factor, dim, p, velocity, work);
    return velocity;
  }
  // The kinetic change's coefficients C (p1 + p0) from the start momentum p0 and the end momentum
  // p_end before its flip (p1 = -p_end; the sum rounded in the chains' dtype as the diagonal's is).
  FHMC_HD const scalar_t* kinetic_row(const scalar_t* p0, const scalar_t* p_end) const {
    for (int64_t j = 0; j < dim; ++j) velocity[j] = add_rn(-p_end[j], p0[j]);
    return velocity_row(velocity);
  }
};

// ---- estimation ---------------------------------------------------------------------------------

// Folds draw x [d] into a window's mean [d] and co-moments m2 [d, d] (row-major, kept symmetric):
// Welford's update m2_jk += (x_j - mean_j) (x_k - mean'_k), mean' the updated mean, formed for
// k <= j and mirrored. Its diagonal is welford.h's update bit for bit. scratch: [2 d] float64.
template <typename scalar_t>
FHMC_HD void comoment_update(double* mean, double* m2, const scalar_t* x, int64_t dim,
                             double inv_count, double* scratch) {
  double* before = scratch;       // x - mean
  double* after = scratch + dim;  // x - mean'
  for (int64_t j = 0; j < dim; ++j) {
    const double xj = static_cast<double>(x[j]);
    before[j] = sub_rn(xj, mean[j]);
    mean[j] = fma_any(before[j], inv_count, mean[j]);
    after[j] = sub_rn(xj, mean[j]);
  }
  for (int64_t j = 0; j < dim; ++j) {
    double* row = m2 + j * dim;
    for (int64_t k = 0; k <= j; ++k) row[k] = fma_any(before[j], after[k], row[k]);
    for (int64_t k = 0; k < j; ++k) m2[k * dim + j] = row[k];
  }
}

// Stan's dense_e regularisation of the covariance s [d, d] of n draws, in place:
// (n / (n + 5)) s + 1e-3 (5 / (n + 5)) I. Its diagonal is regularized_variance's.
FHMC_HD void regularize_covariance(double* s, double n, int64_t dim) {
  const double shrink = div_rn(n, add_rn(n, 5.0));
  for (int64_t j = 0; j < dim; ++j) {
    for (int64_t k = 0; k < dim; ++k) {
      s[j * dim + k] = j == k ? regularized_variance(s[j * dim + k], n) : mul_rn(shrink, s[j * dim + k]);
    }
  }
}

// In-place Cholesky factorisation (Cholesky-Banachiewicz, row by row, float64) of the symmetric
// a [d, d], whose lower triangle it reads: a = L L^T, L in the lower triangle and zeros above.
// False when a is not finite or not positive definite (a pivot not a finite positive number);
// then a is partly overwritten.
FHMC_HD bool cholesky_in_place(double* a, int64_t dim) {
  for (int64_t i = 0; i < dim; ++i) {
    double* row_i = a + i * dim;
    for (int64_t j = 0; j <= i; ++j) {
      const double* row_j = a + j * dim;
      double s = row_i[j];
      for (int64_t k = 0; k < j; ++k) s = fma_any(-row_i[k], row_j[k], s);
      if (j == i) {
        if (!(s > 0.0 && s < INFINITY)) return false;
        row_i[i] = sqrt_rn(s);
      } else {
        row_i[j] = div_rn(s, row_j[j]);
      }
    }
    for (int64_t k = i + 1; k < dim; ++k) row_i[k] = 0.0;
  }
  return true;
}

// The new factor from the regularised covariance cov [d, d] (overwritten): cov's Cholesky factor
// rounded to the chains' dtype into factor [d, d]; or, when cov is not finite and positive definite
// (or its factor's diagonal does not round to finite positive numbers), factor left as it was.
// Returns whether factor changed.
template <typename scalar_t>
FHMC_HD bool adapt_dense_factor(double* cov, int64_t dim, scalar_t* factor) {
  if (!cholesky_in_place(cov, dim)) return false;
  for (int64_t i = 0; i < dim * dim; ++i) {
    const scalar_t v = static_cast<scalar_t>(cov[i]);
    if (!(v < scalar_t(INFINITY) && v > -scalar_t(INFINITY))) return false;
    if (i % (dim + 1) == 0 && !(v > scalar_t(0))) return false;
  }
  for (int64_t i = 0; i < dim * dim; ++i) factor[i] = static_cast<scalar_t>(cov[i]);
  return true;
}

// One chain's window covariance m2 / (n - 1) into s [d, d].
FHMC_HD void window_covariance(const double* m2, double n, int64_t dim, double* s) {
  const double denominator = sub_rn(n, 1.0);
  for (int64_t i = 0; i < dim * dim; ++i) s[i] = div_rn(m2[i], denominator);
}

// Which chains' windows pooled_dense_covariance counts: each chain whose moments are finite, whose
// window moved in every coordinate, and whose window mean lies within kStrayScale robust standard
// deviations of the chains' median in every coordinate. The scale is coordinate j's total spread
// as the median chain sees it: the median of the chains' own window variances plus the squared
// median absolute deviation of their means (times 1.4826, normal consistency). A chain still far
// from the rest (a far start that has not arrived) would enter the pooled covariance with the
// square of its distance; by ranks, it moves neither the median nor the MAD. For B chains in the
// posterior a chain's mean lies within 8 sd in all d <= 128 coordinates but with probability
// 128 x 1.2e-15: no chain that belongs is left out.
constexpr double kStrayScale = 8.0;

inline double median_of(std::vector<double>& v) {
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + h, v.end());
  const double upper = v[h];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + h);
  return mul_rn(0.5, add_rn(lower, upper));
}

inline std::vector<char> pooled_inliers(const double* mean, const double* m2, int64_t batch,
                                        double n, int64_t dim) {
  std::vector<char> inlier(batch, 1);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < dim && inlier[b]; ++j) {
      const double v = m2[(b * dim + j) * dim + j], m = mean[b * dim + j];
      inlier[b] = v > 0.0 && v < INFINITY && m - m == 0.0;
    }
  }
  std::vector<double> values;
  for (int64_t j = 0; j < dim; ++j) {
    values.clear();
    for (int64_t b = 0; b < batch; ++b) if (inlier[b]) values.push_back(mean[b * dim + j]);
    if (values.empty()) break;
    const double centre = median_of(values);
    for (double& x : values) x = fabs(x - centre);
    const double mad = mul_rn(1.4826, median_of(values));
    values.clear();
    for (int64_t b = 0; b < batch; ++b) {
      if (inlier[b]) values.push_back(div_rn(m2[(b * dim + j) * dim + j], sub_rn(n, 1.0)));
    }
    const double limit = mul_rn(kStrayScale, sqrt_rn(add_rn(median_of(values), mul_rn(mad, mad))));
    for (int64_t b = 0; b < batch; ++b) {
      if (inlier[b] && !(fabs(mean[b * dim + j] - centre) <= limit)) inlier[b] = 0;
    }
  }
  return inlier;
}

// The pooled covariance s [d, d] (before regularisation) of B chains' windows of n draws each
// from their means mean [B, d] and co-moments m2 [B, d, d]: the covariance of all the chains'
// draws about their grand mean, (sum_b m2_b + n sum_b (mean_b - g)(mean_b - g)^T) / (n B' - 1),
// over the B' chains that are not strays (pooled_inliers). The chains' spread between each other
// is part of it on purpose: in one window a chain crosses a narrow direction many times but a long
// one hardly at all, so its own window covariance misses the long directions. Thousands of
// chains at different places along them carry them instead. On diamonds in its direct form
// (correlations near 1), the mean of the chains' own correlations left the whitened posterior
// with eigenvalues from 0.03 to 1600, and ESS 20 of 6,400 draws; this estimate gave 1,075 to
// 1,411, the QR form's (benchmarks/probes/diamonds_dense.py). Every sum runs over the chain index
// in chunk_sum.h's pairwise order. Fewer than two inliers give NaN (the factor is then kept).
// Host only: the CUDA build has no dense mass yet.
inline void pooled_dense_covariance(const double* mean, const double* m2, int64_t batch, double n,
                                    int64_t dim, double* s) {
  const std::vector<char> inlier = pooled_inliers(mean, m2, batch, n, dim);
  PairwiseChunkSum<double> count;
  for (int64_t b = 0; b < batch; ++b) count.add(inlier[b] ? 1.0 : 0.0);
  const double chains = count.total();
  std::vector<double> grand(dim);
  for (int64_t j = 0; j < dim; ++j) {
    PairwiseChunkSum<double> sum;
    for (int64_t b = 0; b < batch; ++b) sum.add(inlier[b] ? mean[b * dim + j] : 0.0);
    grand[j] = div_rn(sum.total(), chains);
  }
  const double denominator = sub_rn(mul_rn(n, chains), 1.0);
  for (int64_t j = 0; j < dim; ++j) {
    for (int64_t k = 0; k <= j; ++k) {
      PairwiseChunkSum<double> sum;
      for (int64_t b = 0; b < batch; ++b) {
        if (!inlier[b]) {
          sum.add(0.0);
          continue;
        }
        const double between = mul_rn(sub_rn(mean[b * dim + j], grand[j]),
                                      sub_rn(mean[b * dim + k], grand[k]));
        sum.add(add_rn(m2[(b * dim + j) * dim + k], mul_rn(n, between)));
      }
      const double c = chains >= 2.0 ? div_rn(sum.total(), denominator) : NAN;
      s[j * dim + k] = c;
      s[k * dim + j] = c;
    }
  }
}

}  // namespace fused_hmc
