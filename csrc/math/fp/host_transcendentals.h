// Box-Muller's float32 logf and sincosf for the host build (math/rng/transforms.h), from IEEE +, *,
// fma, conversions and exact bit operations only, without branches: the same bits with any libm,
// compiler or vector ISA, scalar or in vector lanes, so a loop over a batch of Philox blocks runs in
// the vector unit (glibc's scalar logf and sincosf were a third of a CPU transition).
//
// libdevice_logf is CUDA's logf (libdevice's __nv_logf, as its SASS on sm_90 reads: the same
// operations in the same order), so the host's Box-Muller radius sqrt(-2 log u) has the device's
// bits. The device's angle goes through the __sincosf intrinsic (the SFU's approximation, which
// no host arithmetic reproduces); the host's angle_sincos is within an ulp of the true sine and
// cosine instead.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "host_device.h"

namespace fused_hmc {

FHMC_HD uint32_t float_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

FHMC_HD float bits_float(uint32_t u) {
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// log(a) as libdevice computes it: a = 2^e m with m in [2/3, 4/3) (subnormals scaled by 2^23
// first), f = m - 1, log a = e ln2 + f - f^2/2 + f^3 P(f). Every float32 input, specials included.
FHMC_HD float libdevice_logf(float a) {
  // The choices are made on the bits, between values computed unconditionally: selects that a
  // vector loop makes in lanes (a float comparison or a branch stops GCC's vectoriser under its
  // default -ftrapping-math).
  const uint32_t ia = float_bits(a);
  const bool subnormal = static_cast<int32_t>(ia) < 0x00800000;  // below FLT_MIN, not NaN
  const uint32_t ix = subnormal ? float_bits(a * 8388608.0f) : ia;
  const float x = bits_float(ix);
  const float e_adjust = subnormal ? -23.0f : 0.0f;
  const uint32_t e_bits = (ix - 0x3f2aaaabu) & 0xff800000u;  // the exponent, in place
  const float f = bits_float(ix - e_bits) - 1.0f;
  const float e = std::fma(static_cast<float>(static_cast<int32_t>(e_bits)), 0x1p-23f,
                           e_adjust);
  // the polynomial's coefficients, as the SASS's immediates
  float p = std::fma(f, -0x1.0aa04ep-3f, 0x1.2073ecp-3f);
  p = std::fma(f, p, -0x1.f19b98p-4f);
  p = std::fma(f, p, 0x1.1e52aap-3f);
  p = std::fma(f, p, -0x1.55b172p-3f);
  p = std::fma(f, p, 0x1.99da16p-3f);
  p = std::fma(f, p, -0x1.fffe44p-3f);
  p = std::fma(f, p, 0x1.5554f0p-2f);
  float q = std::fma(f, p, -0.5f);
  q = f * q;
  q = std::fma(f, q, f);
  const float r = std::fma(e, 0x1.62e430p-1f, q);  // ln 2 in float
  // +inf -> +inf; NaN and negatives (ix >= 0x80000000) -> NaN; zero -> -inf
  const uint32_t special = float_bits(std::fma(x, INFINITY, INFINITY));
  const uint32_t finite = ix >= 0x7f800000u ? special : float_bits(r);
  return bits_float((ix & 0x7fffffffu) == 0 ? 0xff800000u : finite);
}

// sin v and cos v for v in [0, 2 pi] (Box-Muller's angle), within an ulp: in float64,
// v = k pi/2 + r with |r| <= pi/4 (k <= 4, so k times the 33-bit head of pi/2 is exact), Taylor
// polynomials to r^11 and r^12 (truncation below 2e-9 of an ulp's 6e-8), rounded once to float.
FHMC_HD void angle_sincos(float v, float& sin_v, float& cos_v) {
  constexpr double kTwoOverPi = 0.63661977236758134;
  constexpr double kPiOver2Head = 1.5707963267341256;  // 33 significant bits
  constexpr double kPiOver2Tail = 6.0771005065061922e-11;
  const double x = static_cast<double>(v);
  // k = x 2/pi rounded to the nearest integer by the 1.5 * 2^52 shift (exact: 0 <= x 2/pi <= 4),
  // where nearbyint would be a libm call or a branch in a vector loop
  constexpr double kRoundShift = 6755399441055744.0;
  const double k = (x * kTwoOverPi + kRoundShift) - kRoundShift;
  double r = std::fma(-k, kPiOver2Head, x);
  r = std::fma(-k, kPiOver2Tail, r);
  const double r2 = r * r;
  double sp = std::fma(r2, -2.5052108385441720e-08, 2.7557319223985893e-06);  // -1/11!, 1/9!
  sp = std::fma(r2, sp, -1.9841269841269841e-04);                              // -1/7!
  sp = std::fma(r2, sp, 8.3333333333333333e-03);                               // 1/5!
  sp = std::fma(r2, sp, -1.6666666666666667e-01);                              // -1/3!
  const double s = std::fma(r * r2, sp, r);
  double cp = std::fma(r2, 2.0876756987868099e-09, -2.7557319223985888e-07);  // 1/12!, -1/10!
  cp = std::fma(r2, cp, 2.4801587301587302e-05);                               // 1/8!
  cp = std::fma(r2, cp, -1.3888888888888889e-03);                              // -1/6!
  cp = std::fma(r2, cp, 4.1666666666666667e-02);                               // 1/4!
  cp = std::fma(r2, cp, -0.5);
  const double c = std::fma(r2, cp, 1.0);
  const int quadrant = static_cast<int>(k) & 3;
  const double sin_r = (quadrant & 1) ? c : s;
  const double cos_r = (quadrant & 1) ? s : c;
  sin_v = static_cast<float>((quadrant & 2) ? -sin_r : sin_r);
  cos_v = static_cast<float>(((quadrant + 1) & 2) ? -cos_r : cos_r);
}

}  // namespace fused_hmc
