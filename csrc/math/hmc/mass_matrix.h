// A diagonal mass matrix M = diag(1 / m_inv) and its estimation in warm-up.
//
// With mass matrix M the kinetic energy is 0.5 p^T M^-1 p and p ~ N(0, M) (Neal 2011, "MCMC using
// Hamiltonian dynamics", sec. 5.4.1: HMC with M is HMC with M = I on the linearly transformed
// q' = M^(1/2) q). For a diagonal inverse mass m_inv: p_j = z_j / sqrt(m_inv_j) with z_j ~ N(0, 1),
// and the position update moves q_j by eps * m_inv_j * p_j. Setting m_inv to the target's variances
// makes every coordinate's scale 1, so one step size suits them all.
//
// Estimation follows Stan's diag_e adaptation (Stan Reference Manual, "HMC algorithm parameters:
// automatic parameter tuning"): the variance of the draws of a slow window, shrunk towards 1e-3 as
// (n / (n + 5)) var + 1e-3 (5 / (n + 5)). One adaptation state for many chains (pooled) takes the
// geometric mean of the chains' window variances instead (pooled_window_variance, below).
#pragma once

#include <cmath>
#include <cstdint>

#include "../fp/host_device.h"
#include "../fp/portable_math.h"
#include "../fp/rounding.h"

namespace fused_hmc {

// sqrt(M_jj) = 1 / sqrt(m_inv_j), correctly rounded twice: the momentum is z * momentum_scale. A
// kernel may compute it once per chain and keep it; m_inv = 1 gives exactly 1.
template <typename scalar_t>
FHMC_HD scalar_t momentum_scale(scalar_t inv_mass) {
  return div_rn(scalar_t(1), sqrt_rn(inv_mass));
}

// The unit inverse mass as a type, for kernels that know at compile time that the mass is the
// identity: multiplying by it is the identity (as multiplying by 1 is, bit for bit), so the
// operations below lose a multiply and keep their results.
struct UnitMass {};
template <typename scalar_t>
FHMC_HD scalar_t mul_rn(UnitMass, scalar_t v) {
  return v;
}

// The Mass policies of a transition (transition.h) over a row in memory, indexed by coordinate:
// the momentum z * momentum_scale(m_inv_j) of coordinate j from its standard normal z, and the
// inverse mass m_inv_j that the drift multiplies the momentum by.
template <typename scalar_t>
struct DiagonalMass {
  const scalar_t* inv_mass;  // [dim]
  FHMC_HD scalar_t momentum(scalar_t z, int64_t j) const {
    return mul_rn(z, momentum_scale(inv_mass[j]));
  }
  FHMC_HD scalar_t inverse(int64_t j) const { return inv_mass[j]; }
};

struct IdentityMass {
  template <typename scalar_t, typename Index>
  FHMC_HD scalar_t momentum(scalar_t z, Index) const {
    return z;
  }
  template <typename Index>
  FHMC_HD UnitMass inverse(Index) const {
    return {};
  }
};

// Stan's regularised variance estimate from `n` draws with sample variance `var`.
FHMC_HD double regularized_variance(double var, double n) {
  const double denom = add_rn(n, 5.0);
  return add_rn(mul_rn(div_rn(n, denom), var), mul_rn(1e-3, div_rn(5.0, denom)));
}

// The new inverse mass of one coordinate, or `previous` when the estimate is not a finite positive
// number (the chains never moved or overflowed): a kernel cannot raise, so it keeps the old value.
template <typename scalar_t>
FHMC_HD scalar_t adapted_inverse_mass(double var, double n, scalar_t previous) {
  const double v = regularized_variance(var, n);
  const scalar_t out = static_cast<scalar_t>(v);
  return (out > scalar_t(0) && out < scalar_t(INFINITY)) ? out : previous;
}

// The pooled variance of one coordinate from B chains' windows of n draws each: the geometric
// mean of the chains' own window variances, exp(mean_b log v_b), over the chains whose v_b is a
// finite positive number. The variance of all chains' draws together (the law of total variance)
// would add the spread between the chains' means, and in warm-up from dispersed starts a few chains
// still far from the posterior make that spread dominate: a fraction f of chains whose variance is
// r times the rest moves the pooled variance by about f r, and the shared step size collapses for
// every chain (diamonds from Stan's starts: benchmarks/results/time_to_answer). In logs they move
// it by the factor r^f (1.0034 for one chain of 4096 at r = 1e6). Each chain's v_b is what Stan's
// per-chain warm-up would use; the geometric mean sits below the arithmetic one by about a factor
// exp(-1/ESS_b) of a window's effective size, immaterial for a mass matrix. Both sums run over the
// chain index in chunk_sum.h's pairwise order.
struct WindowLogVariance {
  double log_variance;  // log v_b, or 0
  double counted;       // 1, or 0 for a chain that did not move in the coordinate (v_b = 0: every
                        // proposal rejected) or overflowed: it has no scale to give
};
FHMC_HD WindowLogVariance window_log_variance(double m2, double draws) {
  const double v = div_rn(m2, sub_rn(draws, 1.0));
  if (v > 0.0 && v < INFINITY) return {portable_log(v), 1.0};
  return {0.0, 0.0};
}

// The pooled variance from the chains' sums of log v_b and of their counts; NaN when no chain
// counted, which adapted_inverse_mass answers by keeping the previous inverse mass.
FHMC_HD double pooled_window_variance(double log_variance_sum, double counted) {
  return counted > 0.0 ? portable_exp(div_rn(log_variance_sum, counted)) : NAN;
}

}  // namespace fused_hmc
