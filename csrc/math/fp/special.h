// digamma (psi = d/dx log Gamma), the derivative that lgamma's dual needs; float and double, host
// and device (the C and CUDA math libraries have none).
//
// x > 0: psi(x) = psi(x + n) - sum_{k<n} 1/(x + k), recurring up to x + n >= 10, then the
// asymptotic series psi(x) ~ log x - 1/(2x) - sum_{k=1..7} B_2k / (2k x^2k). Its first omitted
// term, B_16 / (16 x^16), is below 5e-17 at x = 10 (relative to psi(10) = 2.25: under an ulp of
// double); so the error is the recurrence's rounding, a few ulp (more in relative terms only near
// psi's zero at x = 1.4616, where the terms cancel). Brief's "x >= 6" would leave 1e-12.
// x < 0: reflection psi(x) = psi(1 - x) - pi cot(pi x), cot taken at r = x - round(x) (exact), so
// large negative x keeps its accuracy. Poles: psi(+0) = -inf, psi(-0) = +inf, a negative integer
// or -inf gives NaN, psi(inf) = inf, NaN propagates (torch.special.digamma's conventions).
#pragma once

#include <cmath>
#include <math.h>

#include "host_device.h"

namespace fused_hmc {

namespace special_detail {

#if defined(__CUDA_ARCH__)
FHMC_HD float round_half_even(float x) { return ::rintf(x); }
FHMC_HD double round_half_even(double x) { return ::rint(x); }
FHMC_HD float log_of(float x) { return ::logf(x); }
FHMC_HD double log_of(double x) { return ::log(x); }
FHMC_HD float tan_of(float x) { return ::tanf(x); }
FHMC_HD double tan_of(double x) { return ::tan(x); }
#else
FHMC_HD float round_half_even(float x) { return std::nearbyint(x); }
FHMC_HD double round_half_even(double x) { return std::nearbyint(x); }
FHMC_HD float log_of(float x) { return std::log(x); }
FHMC_HD double log_of(double x) { return std::log(x); }
FHMC_HD float tan_of(float x) { return std::tan(x); }
FHMC_HD double tan_of(double x) { return std::tan(x); }
#endif

template <class T>
FHMC_HD T digamma(T x) {
  constexpr T kPi = T(3.14159265358979323846);
  if (x != x) return x;
  if (x == T(0)) return T(-1) / x;  // -inf at +0, +inf at -0
  if (x == T(INFINITY)) return x;
  T result = T(0);
  if (x < T(0)) {
    const T r = x - round_half_even(x);  // exact; cot has period 1
    if (r == T(0) || r != r) return T(NAN);
    result = -kPi / tan_of(kPi * r);
    x = T(1) - x;
  }
  for (; x < T(10); x += T(1)) result -= T(1) / x;
  const T inv = T(1) / x, inv2 = inv * inv;
  const T series =
      inv2 * (T(1.0 / 12) -
              inv2 * (T(1.0 / 120) -
                      inv2 * (T(1.0 / 252) -
                              inv2 * (T(1.0 / 240) -
                                      inv2 * (T(1.0 / 132) -
                                              inv2 * (T(691.0 / 32760) - inv2 * T(1.0 / 12)))))));
  return result + log_of(x) - T(0.5) * inv - series;
}

}  // namespace special_detail

FHMC_HD float digamma(float x) { return special_detail::digamma(x); }
FHMC_HD double digamma(double x) { return special_detail::digamma(x); }

}  // namespace fused_hmc
