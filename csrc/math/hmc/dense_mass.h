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
// the estimate extends mass_matrix.h's diagonal one: its diagonal is the same geometric mean of the
// chains' own window variances, and its correlations are the mean of the chains' own window
// correlation matrices, C_jk = Rbar_jk sqrt(v_j v_k). A mean of correlation matrices is positive
// semi-definite and bounded entry by entry, so a fraction f of chains far from the rest moves it by
// at most 2 f per entry (their covariances would move a mean of covariances by f r). A new C that is
// not finite and positive definite leaves L as it was (the driver counts these window ends).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../fp/host_device.h"
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
template <typename scalar_t>
FHMC_HD void solve_upper_transposed(const scalar_t* factor, int64_t dim, scalar_t* z, double* work) {
  for (int64_t j = 0; j < dim; ++j) work[j] = static_cast<double>(z[j]);
  for (int64_t i = dim - 1; i >= 0; --i) {
    const scalar_t* row = factor + i * dim;
    const double p = div_rn(work[i], static_cast<double>(row[i]));
    work[i] = p;
    for (int64_t k = 0; k < i; ++k) work[k] = fma_any(-static_cast<double>(row[k]), p, work[k]);
  }
  for (int64_t j = 0; j < dim; ++j) z[j] = static_cast<scalar_t>(work[j]);
}

// out [d] <- L (L^T p), each sum in float64 in index order; out may be p.
template <typename scalar_t>
FHMC_HD void factor_product(const scalar_t* factor, int64_t dim, const scalar_t* p, scalar_t* out,
                            double* work) {
  for (int64_t k = 0; k < dim; ++k) work[k] = 0.0;
  for (int64_t i = 0; i < dim; ++i) {  // work = L^T p, row i of L times p_i added in order of i
    const scalar_t* row = factor + i * dim;
    const double pi = static_cast<double>(p[i]);
    for (int64_t k = 0; k <= i; ++k) work[k] = fma_any(static_cast<double>(row[k]), pi, work[k]);
  }
  for (int64_t i = 0; i < dim; ++i) {  // out = L work
    const scalar_t* row = factor + i * dim;
    double sum = 0.0;
    for (int64_t k = 0; k <= i; ++k) sum = fma_any(static_cast<double>(row[k]), work[k], sum);
    out[i] = static_cast<scalar_t>(sum);
  }
}

// The Mass policy of a dense inverse mass over one chain's rows in memory (the CPU's serial group):
// factor L [d, d] and scratch rows, a velocity row [d] in the chains' dtype and a float64 row [d].
template <typename scalar_t>
struct DenseMass {
  static constexpr bool kDense = true;
  const scalar_t* factor;  // [dim, dim], lower triangle read
  int64_t dim;
  scalar_t* velocity;      // [dim] scratch
  double* work;            // [dim] scratch

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

// One chain's window correlations m2_jk / sqrt(m2_jj m2_kk) for k < j, in row-major order of the
// strict lower triangle (d (d - 1) / 2 of them) into r, for the pooled mean; false (r unwritten)
// when a variance is not a finite positive number or a correlation not finite: that chain has no
// correlation to give (it did not move in a coordinate, or overflowed). scale: [d] scratch.
FHMC_HD bool window_correlations(const double* m2, int64_t dim, double* r, double* scale) {
  for (int64_t j = 0; j < dim; ++j) {
    const double v = m2[j * dim + j];
    if (!(v > 0.0 && v < INFINITY)) return false;
    scale[j] = div_rn(1.0, sqrt_rn(v));
  }
  int64_t e = 0;
  for (int64_t j = 0; j < dim; ++j) {
    for (int64_t k = 0; k < j; ++k, ++e) {
      const double c = mul_rn(mul_rn(m2[j * dim + k], scale[j]), scale[k]);
      if (!(c < INFINITY && c > -INFINITY)) return false;
      r[e] = c;
    }
  }
  return true;
}

// The pooled covariance s [d, d] from the geometric-mean variances v [d] (mass_matrix.h's
// pooled_window_variance; NaN where no chain counted) and the chains' summed correlations
// r_sum [d (d - 1) / 2] over `counted` chains: s_jk = (r_sum_jk / counted) sqrt(v_j v_k). No
// counted chain gives NaN (the factor is then kept).
FHMC_HD void pooled_covariance(const double* v, const double* r_sum, double counted, int64_t dim,
                               double* s) {
  int64_t e = 0;
  for (int64_t j = 0; j < dim; ++j) {
    s[j * dim + j] = v[j];
    for (int64_t k = 0; k < j; ++k, ++e) {
      const double r = counted > 0.0 ? div_rn(r_sum[e], counted) : NAN;
      const double c = mul_rn(r, sqrt_rn(mul_rn(v[j], v[k])));
      s[j * dim + k] = c;
      s[k * dim + j] = c;
    }
  }
}

// Scratch of pooled_dense_covariance for dimension d: pooled_sums(d) pairwise sums and
// pooled_scratch(d) float64 numbers.
constexpr int64_t pooled_sums(int64_t dim) { return dim * (dim - 1) / 2 + 2 * dim + 1; }
constexpr int64_t pooled_scratch(int64_t dim) { return dim * (dim - 1) / 2 + 2 * dim; }

// The pooled covariance s [d, d] (before regularisation) of B chains' windows of n draws each from
// their co-moments m2 [B, d, d]: the geometric-mean variances and the mean correlation over the
// chains that have one (pooled_covariance). Every sum runs over the chain index in chunk_sum.h's
// pairwise order, a chain without a variance or correlations adding zeros, as the diagonal's do.
FHMC_HD void pooled_dense_covariance(const double* m2, int64_t batch, double n, int64_t dim,
                                     double* s, PairwiseChunkSum<double>* sums, double* scratch) {
  const int64_t pairs = dim * (dim - 1) / 2;
  PairwiseChunkSum<double>* log_variance = sums;
  PairwiseChunkSum<double>* counted = sums + dim;
  PairwiseChunkSum<double>* correlation = sums + 2 * dim;
  PairwiseChunkSum<double>& correlated = sums[2 * dim + pairs];
  for (int64_t i = 0; i < pooled_sums(dim); ++i) sums[i] = PairwiseChunkSum<double>{};
  double* r = scratch;
  double* v = scratch + pairs;  // the chain's scales, then the pooled variances
  for (int64_t b = 0; b < batch; ++b) {
    const double* chain = m2 + b * dim * dim;
    for (int64_t j = 0; j < dim; ++j) {
      const WindowLogVariance w = window_log_variance(chain[j * dim + j], n);
      log_variance[j].add(w.log_variance);
      counted[j].add(w.counted);
    }
    const bool has = window_correlations(chain, dim, r, v);
    for (int64_t e = 0; e < pairs; ++e) correlation[e].add(has ? r[e] : 0.0);
    correlated.add(has ? 1.0 : 0.0);
  }
  for (int64_t e = 0; e < pairs; ++e) r[e] = correlation[e].total();
  for (int64_t j = 0; j < dim; ++j) {
    v[j] = pooled_window_variance(log_variance[j].total(), counted[j].total());
  }
  pooled_covariance(v, r, correlated.total(), dim, s);
}

}  // namespace fused_hmc
