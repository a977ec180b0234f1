// One HMC transition of the Gaussian target N(mu, I), per coordinate (Neal 2011, sec. 5.2.3.3).
//
// leapfrog_exact() rounds every operation as torch's separate elementwise kernels do in the
// reference (no FMA contraction), so q_new is bit-identical to it. leapfrog_fused() is the same
// integrator in x = q - mu coordinates with two FMAs per step, for the native philox mode where no
// bit parity with the reference is promised; CPU and GPU still agree bit for bit given equal noise.
#pragma once

#include <cmath>

#include "host_device.h"

namespace fused_hmc {

// Round-to-nearest arithmetic the compiler may not contract into FMAs. The host build compiles
// with -ffp-contract=off, the device uses the _rn intrinsics, which nvcc never fuses.
FHMC_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
FHMC_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
FHMC_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FHMC_HD double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
FHMC_HD double sub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
FHMC_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

FHMC_HD float fma_any(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}
FHMC_HD double fma_any(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// Correctly rounded square root and division (the device defaults may be approximate).
FHMC_HD float sqrt_rn(float v) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(v);
#else
  return std::sqrt(v);
#endif
}
FHMC_HD double sqrt_rn(double v) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(v);
#else
  return std::sqrt(v);
#endif
}
FHMC_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
FHMC_HD double div_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// Step sizes as the reference's Python floats reach float32/float64 kernels: eps rounded once,
// and 0.5 * eps formed in double before rounding.
template <typename scalar_t>
struct StepSizes {
  scalar_t eps;
  scalar_t half_eps;
};

template <typename scalar_t>
inline StepSizes<scalar_t> step_sizes(double step_size) {
  return {static_cast<scalar_t>(step_size), static_cast<scalar_t>(0.5 * step_size)};
}

// The reference's integrator on N coordinates, each rounded exactly as alone. p + h * (-(q - mu))
// equals p - h * (q - mu) exactly in IEEE arithmetic, so the negations are folded. On return p holds
// the negated final momentum. The step loop is outermost so that a GPU thread's coordinates are N
// independent dependency chains under one loop's overhead; the first drift is peeled (the steps run
// kick, drift, (kick, drift) x (num_steps - 1), kick) so that no loop entry copies the start.
template <typename scalar_t, int N>
FHMC_HD void leapfrog_exact(scalar_t (&q)[N], scalar_t (&p)[N], const scalar_t (&mu)[N],
                            StepSizes<scalar_t> s, int num_steps) {
  for (int e = 0; e < N; ++e) {
    p[e] = sub_rn(p[e], mul_rn(s.half_eps, sub_rn(q[e], mu[e])));
    q[e] = add_rn(q[e], mul_rn(s.eps, p[e]));
  }
#pragma unroll 2
  for (int i = 1; i < num_steps; ++i) {
    for (int e = 0; e < N; ++e) {
      p[e] = sub_rn(p[e], mul_rn(s.eps, sub_rn(q[e], mu[e])));
      q[e] = add_rn(q[e], mul_rn(s.eps, p[e]));
    }
  }
  for (int e = 0; e < N; ++e) p[e] = -sub_rn(p[e], mul_rn(s.half_eps, sub_rn(q[e], mu[e])));
}

template <typename scalar_t>
FHMC_HD void leapfrog_exact(scalar_t& q, scalar_t& p, scalar_t mu, StepSizes<scalar_t> s,
                            int num_steps) {
  scalar_t qs[1] = {q}, ps[1] = {p};
  const scalar_t mus[1] = {mu};
  leapfrog_exact(qs, ps, mus, s, num_steps);
  q = qs[0], p = ps[0];
}

// The same integrator on x = q - mu with fused steps; x and p are updated in place.
template <typename scalar_t, int N>
FHMC_HD void leapfrog_fused(scalar_t (&x)[N], scalar_t (&p)[N], StepSizes<scalar_t> s,
                            int num_steps) {
  for (int e = 0; e < N; ++e) {
    p[e] = fma_any(-s.half_eps, x[e], p[e]);
    x[e] = fma_any(s.eps, p[e], x[e]);
  }
#pragma unroll 2
  for (int i = 1; i < num_steps; ++i) {
    for (int e = 0; e < N; ++e) {
      p[e] = fma_any(-s.eps, x[e], p[e]);
      x[e] = fma_any(s.eps, p[e], x[e]);
    }
  }
  for (int e = 0; e < N; ++e) p[e] = -fma_any(-s.half_eps, x[e], p[e]);
}

template <typename scalar_t>
FHMC_HD void leapfrog_fused(scalar_t& x, scalar_t& p, StepSizes<scalar_t> s, int num_steps) {
  scalar_t xs[1] = {x}, ps[1] = {p};
  leapfrog_fused(xs, ps, s, num_steps);
  x = xs[0], p = ps[0];
}

// This coordinate's share of 2 * (H(proposed) - H(current)), as (x1 - x0)(x1 + x0) + (p1 - p0)(p1 + p0)
// with x = q - mu. Summing differences avoids the cancellation of H1 - H0 in the reference, so our
// log_alpha is at least as accurate as the reference's; the two can disagree only by the
// reference's own rounding.
template <typename scalar_t>
FHMC_HD scalar_t energy_change_twice(scalar_t x0, scalar_t p0, scalar_t x1, scalar_t p1) {
  return fma_any(x1 - x0, x1 + x0, (p1 - p0) * (p1 + p0));
}

// log_alpha = H(current) - H(proposed) from the chain's summed energy_change_twice.
template <typename scalar_t>
FHMC_HD scalar_t log_accept_ratio(scalar_t energy_change_twice_sum) {
  return scalar_t(-0.5) * energy_change_twice_sum;
}

// The reference's test: log(clamp(u, min=1e-10)) < log_alpha, the log taken in u's dtype and the
// comparison in the wider of u's and log_alpha's (torch's type promotion). NaN u propagates through
// clamp as in torch, and a NaN on either side rejects.
FHMC_HD float log_rn(float v) { return logf(v); }
FHMC_HD double log_rn(double v) { return log(v); }

// Split in two so that a kernel may take the log apart from the decision (it depends on u alone).
template <typename uniform_t>
FHMC_HD uniform_t metropolis_log_uniform(uniform_t u) {
  const uniform_t floor = static_cast<uniform_t>(1e-10);
  const uniform_t clamped = u < floor ? floor : u;
  return log_rn(clamped);
}

template <typename uniform_t, typename scalar_t>
FHMC_HD bool metropolis_accept_by_log(uniform_t log_uniform, scalar_t log_alpha) {
  using wide_t = decltype(uniform_t(0) + scalar_t(0));
  return static_cast<wide_t>(log_uniform) < static_cast<wide_t>(log_alpha);
}

template <typename uniform_t, typename scalar_t>
FHMC_HD bool metropolis_accept(uniform_t u, scalar_t log_alpha) {
  return metropolis_accept_by_log(metropolis_log_uniform(u), log_alpha);
}

}  // namespace fused_hmc
