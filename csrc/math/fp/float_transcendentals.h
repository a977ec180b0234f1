// exp, log and log1p of float32 for the host build of user models (fp/scalar_functions.h), written
// once for a float and for a pack of chains' floats (cpu/simd/pack.h), so that W chains in vector
// lanes get the bits one chain gets alone, and fast: glibc's expf and log1pf, called lane by lane,
// were most of a logistic regression's gradient in packs of 16.
//
// Each computes in float64 from IEEE +, -, *, / and fma, exact bit operations and where(), with no
// branch, and rounds once to float32: the float64 value is within about 1e-15 of the true one
// (2^-26 of a float32 ulp), so the float result is the correctly rounded one but for inputs whose
// true value lies that close to a midpoint between two floats, where it is the other neighbour
// (within an ulp; checked against float64 numpy in tests/unit/test_float_transcendentals.py).
// The specials are C's: exp(+-inf) = inf, 0; log(0) = -inf, log(x < 0) = NaN; log1p(-1) = -inf,
// log1p(-0) = -0;
// NaN in, NaN out. CUDA's device pass keeps CUDA's expf/logf/log1pf.
//
// exp: x = k ln2 + r, |r| <= ln2 / 2 (Cody-Waite, k by the 1.5 * 2^52 rounding shift), e^r by its
// Taylor polynomial of degree 11 (truncation < 7e-15 relative; Estrin's scheme), scaled by 2^k built from its bits
// (x is first clamped to [-104, 89], beyond which float32's e^x is 0 or inf, so 2^k is normal).
// log: x = 2^e m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1) (|s| <=
// 0.172), by its odd series to s^19 (truncation < 1e-17). log1p(x): u = 1 + x rounded, then
// log u + (x - (u - 1)) / u (the first-order correction for u's rounding; exact u - 1).
#pragma once

#include <cmath>
#include <cstdint>

#include "host_device.h"
#include "lanes.h"
#include "rounding.h"

namespace fused_hmc {
namespace float_transcendentals {

// D: float64 lanes, U: uint64 lanes, of F's lanes (a float, or a pack of floats). Integers and
// floats meet only through bit patterns: AVX2 has no int64 <-> float64 conversion, and a compiler
// converts such a pack lane by lane.
template <class F>
using double_lanes_t = typename lane_traits<F>::template with_lane<double>;
template <class F>
using uint64_lanes_t = typename lane_traits<F>::template with_lane<uint64_t>;

constexpr double kLn2Hi = 6.93147180369123816490e-01;  // ln 2's head: 32 trailing zero bits
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kLn2 = 6.93147180559945286227e-01;
constexpr double kLog2E = 1.44269504088896338700e+00;
constexpr double kRoundingShift = 6755399441055744.0;  // 1.5 * 2^52
constexpr uint64_t kRoundingShiftBits = 0x4338000000000000ULL;
constexpr double kTwo52 = 4503599627370496.0;  // 2^52: 2^52 + n has n as its mantissa's bits
constexpr uint64_t kTwo52Bits = 0x4330000000000000ULL;
constexpr uint64_t kMantissaBits = 0x000FFFFFFFFFFFFFULL;
// The bits of sqrt(2) / 2 rounded up (kSqrt2 / 2 plus one ulp, kSqrt2 = sqrt(2) rounded): log's
// mantissa is reduced to (kSqrt2 / 2, kSqrt2].
constexpr uint64_t kHalfSqrt2UpBits = 0x3FE6A09E667F3BCEULL;
constexpr uint64_t kOneBits = 0x3FF0000000000000ULL;

// log u for u a positive, finite, normal double.
template <class D>
FHMC_HD D log_of_normal(D u) {
  using U = uint64_lanes_t<D>;
  // u = 2^e m with m in (kSqrt2 / 2, kSqrt2]: adding 1.0's bits less kHalfSqrt2Up's carries into
  // the exponent exactly when u's mantissa exceeds kSqrt2's (m is then halved, e raised by one)
  const U shifted = bit_cast_lanes<U>(u) + U(kOneBits - kHalfSqrt2UpBits);
  const D m = bit_cast_lanes<D>((shifted & U(kMantissaBits)) + U(kHalfSqrt2UpBits));
  const D e = bit_cast_lanes<D>((shifted >> 52) | U(kTwo52Bits)) - D(kTwo52 + 1023.0);  // exact
  const D s = (m - D(1.0)) / (m + D(1.0));
  const D z = s * s;
  // log m = 2 s + s z (2/3 + z (2/5 + ... + z 2/19)), the bracket by Estrin's scheme in z
  const D z2 = z * z;
  const D z4 = z2 * z2;
  const D z8 = z4 * z4;
  const D s0 = fma_any(z, D(2.0 / 5.0), D(2.0 / 3.0));
  const D s1 = fma_any(z, D(2.0 / 9.0), D(2.0 / 7.0));
  const D s2 = fma_any(z, D(2.0 / 13.0), D(2.0 / 11.0));
  const D s3 = fma_any(z, D(2.0 / 17.0), D(2.0 / 15.0));
  const D p = fma_any(D(2.0 / 19.0), z8,
                      fma_any(fma_any(s3, z2, s2), z4, fma_any(s1, z2, s0)));
  const D log_m = fma_any(s * z, p, s + s);
  return fma_any(e, D(kLn2), log_m);
}

template <class F>
FHMC_HD F exp(F x) {
  using D = double_lanes_t<F>;
  using U = uint64_lanes_t<F>;
  D v(x);
  v = where(v > D(89.0), D(89.0), v);  // a NaN compares false both times and stays
  v = where(v < D(-104.0), D(-104.0), v);
  const D shifted = v * D(kLog2E) + D(kRoundingShift);  // 1.5 * 2^52 + k, k = round(v / ln 2)
  const D k = shifted - D(kRoundingShift);
  D r = fma_any(-k, D(kLn2Hi), v);
  r = fma_any(-k, D(kLn2Lo), r);
  // e^r by its Taylor polynomial, evaluated by Estrin's scheme (a dependency chain of 5
  // operations, not Horner's 11: a float alone waits on each)
  const D r2 = r * r;
  const D r4 = r2 * r2;
  const D r8 = r4 * r4;
  const D q0 = fma_any(r, D(1.0), D(1.0));
  const D q1 = fma_any(r, D(1.0 / 6.0), D(0.5));
  const D q2 = fma_any(r, D(1.0 / 120.0), D(1.0 / 24.0));
  const D q3 = fma_any(r, D(1.0 / 5040.0), D(1.0 / 720.0));
  const D q4 = fma_any(r, D(1.0 / 362880.0), D(1.0 / 40320.0));
  const D q5 = fma_any(r, D(1.0 / 39916800.0), D(1.0 / 3628800.0));
  const D s0 = fma_any(q1, r2, q0);
  const D s1 = fma_any(q3, r2, q2);
  const D s2 = fma_any(q5, r2, q4);
  const D p = fma_any(s2, r8, fma_any(s1, r4, s0));
  // 2^k from k's bits in `shifted` (mod 2^64: only the low 11 bits of k + 1023 reach the exponent)
  const U biased = bit_cast_lanes<U>(shifted) + U(1023 - kRoundingShiftBits);
  const D scale = bit_cast_lanes<D>(biased << 52);
  return F(where(v == v, p * scale, v));  // a NaN's lanes return it (its scale's bits are junk)
}

template <class F>
FHMC_HD F log(F x) {
  using D = double_lanes_t<F>;
  const D v(x);
  const auto normal = v > D(0.0) && v < D(INFINITY);  // float32's subnormals are normal doubles
  D r = log_of_normal(where(normal, v, D(1.0)));
  r = where(v == D(0.0), D(-INFINITY), r);
  r = where(v == D(INFINITY), D(INFINITY), r);
  r = where(v < D(0.0) || v != v, D(NAN), r);
  return F(r);
}

template <class F>
FHMC_HD F log1p(F x) {
  using D = double_lanes_t<F>;
  const D v(x);
  const D u = v + D(1.0);
  const auto normal = u > D(0.0) && u < D(INFINITY);  // u >= 2^-24 when x > -1
  const D w = where(normal, u, D(1.0));
  D r = log_of_normal(w) + (v - (w - D(1.0))) / w;
  r = where(v == D(0.0), v, r);  // log1p(-0) = -0
  r = where(u == D(0.0), D(-INFINITY), r);
  r = where(v == D(INFINITY), D(INFINITY), r);
  r = where(u < D(0.0) || v != v, D(NAN), r);
  return F(r);
}

}  // namespace float_transcendentals
}  // namespace fused_hmc
