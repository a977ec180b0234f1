// exp and log from correctly rounded +, *, fma, a division and exact scalings only, so the CPU
// (libm) and CUDA (libdevice) builds return the same bits. libm's and CUDA's exp/log are each
// within an ulp of the truth but not of each other. Where a result feeds state that later
// transitions depend on (acceptance probabilities driving dual averaging, the step size itself,
// the philox-mode Metropolis test) these keep the two builds from adding disagreements of their
// own to the one they cannot avoid (the Box-Muller normals' sincos, transforms.h): given the same
// normals, a CPU and a GPU warm-up take the same steps.
//
// exp: x = k ln2 + r with |r| <= ln2 / 2 (Cody-Waite, ln2 split so k ln2_hi is exact), then the
// Taylor polynomial of degree 13 (truncation < 3e-18 relative) and an exact scaling by 2^k.
// log: x = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1),
// |s| <= 0.172, by its odd series to s^25 (truncation < 1e-20). exp is within 2 ulp of the true
// value, log within 3 (2.4 at worst, just above 1, where s's rounding is not damped); checked
// against mpmath in tests/unit/test_portable_math.py. (fdlibm's f - (f^2/2 - s (f^2/2 + R)) would
// bring log under 1 ulp; not done, as the kernels' bits would change without a GPU run to verify.)
#pragma once

#include <cmath>

#include "host_device.h"
#include "rounding.h"

namespace fused_hmc {

constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 0x3fe62e42fee00000: 32 trailing zeros
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kLog2E = 1.44269504088896338700e+00;
constexpr double kSqrtHalf = 0.70710678118654752440;

// Exact in every build: rounding to the nearest integer (ties to even), and scalings by 2^k.
FHMC_HD double nearest_integer(double v) {
#if defined(__CUDA_ARCH__)
  return rint(v);
#else
  return std::nearbyint(v);
#endif
}
FHMC_HD double scale_by_power_of_two(double v, int k) {
#if defined(__CUDA_ARCH__)
  return ldexp(v, k);
#else
  return std::ldexp(v, k);
#endif
}
FHMC_HD double split_power_of_two(double v, int* exponent) {
#if defined(__CUDA_ARCH__)
  return frexp(v, exponent);
#else
  return std::frexp(v, exponent);
#endif
}

FHMC_HD double portable_exp(double x) {
  if (x != x) return x;
  if (x > 709.79) return INFINITY;
  if (x < -745.14) return 0.0;
  const double k = nearest_integer(mul_rn(x, kLog2E));
  const double r = fma_any(-k, kLn2Lo, fma_any(-k, kLn2Hi, x));
  // 1/n! for n = 13 .. 0, Horner from the highest degree.
  constexpr double kInvFactorial[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                                        1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                                        1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                                        1.0 / 24.0,         1.0 / 6.0,         0.5,
                                        1.0,                1.0};
  double poly = kInvFactorial[0];
  for (int n = 1; n < 14; ++n) poly = fma_any(poly, r, kInvFactorial[n]);
  // 2^k in two exact halves, so that 2^1024 * 0.7 does not overflow before it is scaled.
  const int half = static_cast<int>(k) / 2;
  return scale_by_power_of_two(scale_by_power_of_two(poly, half), static_cast<int>(k) - half);
}

FHMC_HD double portable_log(double x) {
  if (x != x || x < 0.0) return NAN;
  if (x == 0.0) return -INFINITY;
  if (x == INFINITY) return x;
  int e = 0;
  double m = split_power_of_two(x, &e);  // x = m 2^e, m in [0.5, 1)
  if (m < kSqrtHalf) {
    m = mul_rn(m, 2.0);
    e -= 1;
  }
  const double f = sub_rn(m, 1.0);  // exact (Sterbenz)
  const double s = div_rn(f, add_rn(2.0, f));
  const double s2 = mul_rn(s, s);
  double poly = 1.0 / 25.0;  // sum_{n>=0} s^2n / (2n + 1), Horner from 1/25
  for (int n = 11; n >= 0; --n) poly = fma_any(poly, s2, 1.0 / static_cast<double>(2 * n + 1));
  const double log_m = mul_rn(mul_rn(2.0, s), poly);
  const double de = static_cast<double>(e);
  return fma_any(de, kLn2Hi, fma_any(de, kLn2Lo, log_m));
}

FHMC_HD float portable_exp(float x) { return static_cast<float>(portable_exp(static_cast<double>(x))); }
FHMC_HD float portable_log(float x) { return static_cast<float>(portable_log(static_cast<double>(x))); }

}  // namespace fused_hmc
