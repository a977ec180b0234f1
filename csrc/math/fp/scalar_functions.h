// The functions docs/TARGETS.md promises to user log densities, for plain float and double
// (host and device). dual.h adds the same names for Dual; target_functions.h gathers both for user code.
//
// Why wrappers and not `using std::exp`: under nvcc the device side has the CUDA library's global
// overloads (::expf, ::exp(float)), the host side std::'s; each wrapper picks one per compiler
// pass, so exp(float) stays float everywhere (no silent double math on the GPU) and one overload set
// serves both. They live in fused_hmc::target_math, apart from the rest of fused_hmc, so that
// kernel code calling exp/log unqualified in namespace fused_hmc resolves exactly as before.
//
// Argument types: float and double map to the library function of that type; an integer argument
// alone is taken as double (as std:: does); in a binary function an integer does not promote the
// other argument (pow(float, 2) is float), while float with double is double (C++ promotion).
// Numerically stable forms: log_sum_exp(a, b) = max + log1p(exp(-|a - b|)), softplus(x) =
// max(x, 0) + log1p(exp(-|x|)), log_sigmoid(x) = -softplus(-x), sigmoid from exp(-|x|); none
// overflows for large |x|. log_sum_exp(-inf, b) = b; log_sum_exp(a, a) = a + log 2 (also for
// a = +-inf, with weights 1/2 where torch's logaddexp gradient is NaN).
#pragma once

#include <cmath>
#include <math.h>
#include <type_traits>

#include "float_transcendentals.h"
#include "host_device.h"
#include "lanes.h"
#include "special.h"

namespace fused_hmc {
namespace target_math {

template <class S>
using floating_t = typename std::conditional<std::is_integral<S>::value, double, S>::type;

// float with double -> double; an integer takes the other argument's type; two integers -> double.
template <class A, class B>
using binary_result_t = typename std::conditional<
    std::is_integral<A>::value, floating_t<B>,
    typename std::conditional<std::is_integral<B>::value, A,
                              typename std::common_type<A, B>::type>::type>::type;

template <class S>
using if_integral_t = typename std::enable_if<std::is_integral<S>::value, int>::type;
template <class A, class B>
using if_arithmetic2_t = typename std::enable_if<
    std::is_arithmetic<A>::value && std::is_arithmetic<B>::value, int>::type;

#if defined(__CUDA_ARCH__)
#define FHMC_LIBM(name) ::name
#else
#define FHMC_LIBM(name) std::name
#endif

#define FHMC_PLAIN_UNARY(name)                                               \
  FHMC_HD float name(float x) { return FHMC_LIBM(name)(x); }                 \
  FHMC_HD double name(double x) { return FHMC_LIBM(name)(x); }               \
  template <class I, if_integral_t<I> = 0>                                    \
  FHMC_HD double name(I x) {                                                 \
    return FHMC_LIBM(name)(static_cast<double>(x));                          \
  }

// exp, log and log1p of a float: CUDA's on the device; on the host libm's, or in a module of
// chains in vector lanes (FHMC_PORTABLE_FLOAT_MATH: CppTarget(vector_chains=True))
// float_transcendentals.h's, which a pack of chains' floats computes lane by lane with the same
// bits (cpu/simd/). Those sit in an inline namespace of their own, so the two definitions have
// different symbols in the different modules. libm stays the default: its scalar expf and log1pf
// are twice as fast as float_transcendentals.h's one float at a time.
#if defined(__CUDA_ARCH__)
#define FHMC_FLOAT_TRANSCENDENTAL(name)                                      \
  FHMC_HD float name(float x) { return ::name(x); }
#elif defined(FHMC_PORTABLE_FLOAT_MATH)
#define FHMC_FLOAT_TRANSCENDENTAL(name)                                      \
  inline namespace portable_float {                                          \
  FHMC_HD float name(float x) { return float_transcendentals::name(x); }     \
  }
#else
#define FHMC_FLOAT_TRANSCENDENTAL(name)                                      \
  FHMC_HD float name(float x) { return std::name(x); }
#endif
#define FHMC_DOUBLE_UNARY(name)                                              \
  FHMC_HD double name(double x) { return FHMC_LIBM(name)(x); }               \
  template <class I, if_integral_t<I> = 0>                                    \
  FHMC_HD double name(I x) {                                                 \
    return FHMC_LIBM(name)(static_cast<double>(x));                          \
  }
#define FHMC_FLOAT_TRANSCENDENTAL_UNARY(name) \
  FHMC_FLOAT_TRANSCENDENTAL(name)             \
  FHMC_DOUBLE_UNARY(name)
FHMC_FLOAT_TRANSCENDENTAL_UNARY(exp)
FHMC_FLOAT_TRANSCENDENTAL_UNARY(log)
FHMC_FLOAT_TRANSCENDENTAL_UNARY(log1p)
#undef FHMC_FLOAT_TRANSCENDENTAL_UNARY
#undef FHMC_DOUBLE_UNARY
#undef FHMC_FLOAT_TRANSCENDENTAL
FHMC_PLAIN_UNARY(expm1)
FHMC_PLAIN_UNARY(sqrt)
FHMC_PLAIN_UNARY(tanh)
FHMC_PLAIN_UNARY(sin)
FHMC_PLAIN_UNARY(cos)
#undef FHMC_PLAIN_UNARY

FHMC_HD float abs(float x) { return FHMC_LIBM(fabs)(x); }
FHMC_HD double abs(double x) { return FHMC_LIBM(fabs)(x); }
template <class I, if_integral_t<I> = 0>
FHMC_HD I abs(I x) { return x < 0 ? -x : x; }  // integers stay integers, as std::abs
FHMC_HD float fabs(float x) { return FHMC_LIBM(fabs)(x); }
FHMC_HD double fabs(double x) { return FHMC_LIBM(fabs)(x); }
template <class I, if_integral_t<I> = 0>
FHMC_HD double fabs(I x) { return FHMC_LIBM(fabs)(static_cast<double>(x)); }

// glibc's lgamma writes the global signgam (a data race between the CPU build's threads);
// lgamma_r returns the sign through an argument instead.
#if defined(__CUDA_ARCH__)
FHMC_HD float lgamma(float x) { return ::lgammaf(x); }
FHMC_HD double lgamma(double x) { return ::lgamma(x); }
#elif defined(__GLIBC__)
FHMC_HD float lgamma(float x) { int sign; return ::lgammaf_r(x, &sign); }
FHMC_HD double lgamma(double x) { int sign; return ::lgamma_r(x, &sign); }
#else
FHMC_HD float lgamma(float x) { return std::lgamma(x); }
FHMC_HD double lgamma(double x) { return std::lgamma(x); }
#endif
template <class I, if_integral_t<I> = 0>
FHMC_HD double lgamma(I x) { return lgamma(static_cast<double>(x)); }

using ::fused_hmc::digamma;
template <class I, if_integral_t<I> = 0>
FHMC_HD double digamma(I x) { return ::fused_hmc::digamma(static_cast<double>(x)); }

template <class A, class B, if_arithmetic2_t<A, B> = 0>
FHMC_HD binary_result_t<A, B> pow(A a, B b) {
  using R = binary_result_t<A, B>;
  return FHMC_LIBM(pow)(static_cast<R>(a), static_cast<R>(b));
}
template <class A, class B, if_arithmetic2_t<A, B> = 0>
FHMC_HD binary_result_t<A, B> fmin(A a, B b) {
  using R = binary_result_t<A, B>;
  return FHMC_LIBM(fmin)(static_cast<R>(a), static_cast<R>(b));
}
template <class A, class B, if_arithmetic2_t<A, B> = 0>
FHMC_HD binary_result_t<A, B> fmax(A a, B b) {
  using R = binary_result_t<A, B>;
  return FHMC_LIBM(fmax)(static_cast<R>(a), static_cast<R>(b));
}
// fma(a, b, c): a * b + c rounded once, the IEEE fused multiply-add, on the host and the device
// alike. Users' models are compiled without contraction (docs/TARGETS.md), so this is how their
// multiply-adds (a dot product's, a residual's) reach the FMA units.
template <class A, class B, class C, if_arithmetic2_t<A, B> = 0,
          if_arithmetic2_t<binary_result_t<A, B>, C> = 0>
FHMC_HD binary_result_t<binary_result_t<A, B>, C> fma(A a, B b, C c) {
  using R = binary_result_t<binary_result_t<A, B>, C>;
  return fma_any(static_cast<R>(a), static_cast<R>(b), static_cast<R>(c));
}

// log(e^a + e^b), and the weights e^(a - value), e^(b - value) (its partial derivatives), which
// the dual reuses so that its value is this very number.
template <class T>
FHMC_HD T log_sum_exp_and_weights(T a, T b, T* weight_a, T* weight_b) {
  if (a == b) {  // also a = b = +-inf, where a - b is NaN
    *weight_a = *weight_b = T(0.5);
    return a + T(0.69314718055994530942);
  }
  const bool a_larger = a > b;
  if (a_larger || b > a) {
    const T e = exp(a_larger ? b - a : a - b);  // exp(-|a - b|) <= 1
    const T r = T(1) / (T(1) + e);
    *weight_a = a_larger ? r : e * r;
    *weight_b = a_larger ? e * r : r;
    return (a_larger ? a : b) + log1p(e);
  }
  *weight_a = *weight_b = T(NAN);  // a or b is NaN
  return a + b;
}

// softplus(x) = log(1 + e^x), and its derivative sigmoid(x) through *slope; and sigmoid alone.
// Branch-free (where, math/fp/lanes.h), so a pack of chains computes them lane by lane.
template <class T>
FHMC_HD T softplus_and_slope(T x, T* slope) {
  const T e = exp(-abs(x));
  const T r = T(1) / (T(1) + e);
  *slope = where(x >= T(0), r, e * r);
  return where(x > T(0), x, T(0)) + log1p(e);
}
template <class T>
FHMC_HD T sigmoid_of(T x) {
  const T e = exp(-abs(x));
  const T r = T(1) / (T(1) + e);
  return where(x >= T(0), r, e * r);
}

template <class A, class B, if_arithmetic2_t<A, B> = 0>
FHMC_HD binary_result_t<A, B> log_sum_exp(A a, B b) {
  using R = binary_result_t<A, B>;
  R wa, wb;
  return log_sum_exp_and_weights(static_cast<R>(a), static_cast<R>(b), &wa, &wb);
}
template <class S, typename std::enable_if<std::is_arithmetic<S>::value, int>::type = 0>
FHMC_HD floating_t<S> softplus(S x) {
  floating_t<S> slope;
  return softplus_and_slope(static_cast<floating_t<S>>(x), &slope);
}
template <class S, typename std::enable_if<std::is_arithmetic<S>::value, int>::type = 0>
FHMC_HD floating_t<S> log_sigmoid(S x) {
  floating_t<S> slope;
  return -softplus_and_slope(-static_cast<floating_t<S>>(x), &slope);
}
template <class S, typename std::enable_if<std::is_arithmetic<S>::value, int>::type = 0>
FHMC_HD floating_t<S> sigmoid(S x) {
  return sigmoid_of(static_cast<floating_t<S>>(x));
}

}  // namespace target_math
}  // namespace fused_hmc

#undef FHMC_LIBM
