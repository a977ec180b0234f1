// Forward-mode automatic differentiation: Dual<T, W> carries a value and W directional
// derivatives, so a log density written once as a template over its scalar type (docs/TARGETS.md)
// also yields its exact gradient, on the CPU and in a CUDA kernel alike.
//
// The model is Stan Math's fvar<T> (stan/math/fwd) and the autodiff library's dual, with W
// tangents at once (autodiff's vector duals): one evaluation over Dual<T, W> gives W partial
// derivatives, so a d-dimensional gradient takes ceil(d / W) passes (value_and_gradient).
// Derivative rules follow Stan's fwd functions; at kinks and edges they match torch autograd:
// abs'(0) = 0; fmax/fmin pass the derivative of the first argument on ties (and of the other one
// when an argument is NaN); pow(x, y) has d/dx = 0 when y = 0 and d/dy = 0 when x = 0 and y >= 0.
// Forward mode's one difference from reverse mode: an infinite slope times a zero tangent is NaN,
// so sqrt(x0) + x1 at x0 = 0 has d/dx1 = NaN in the pass that also seeds x0 (Stan's fvar alike);
// such a point has an infinite gradient anyway.
// Where a formula would lose accuracy the derivative uses another: tanh' = 4e/(1+e)^2 with
// e = exp(-2|x|) (1 - tanh^2 cancels for large |x|), expm1' = exp(x), d pow(x, y)/dx = y pow / x.
//
// Values are computed exactly as the plain float/double functions compute them
// (scalar_functions.h), so a dual's v equals the plain evaluation where both do the same
// arithmetic. Mixed scalars: a double or integer operand of a Dual<float, W> is converted to float
// (x * 0.5 stays float math on the GPU; plain float code would promote to double, so float values
// may differ from the plain ones in the last bits); comparisons use C++'s own promotion, so a
// branch such as `if (x > 0.1)` goes the same way for a Dual as for the plain T.
//
// T may also be the CPU build's pack of chains (cpu/simd/pack.h, CppTarget(vector_chains=True)):
// Dual<Pack<S, L>, W> is L chains' duals, each lane computed as Dual<S, W> computes it, so lane l
// has the bits of chain l's scalar dual. Everything here that chooses on a value therefore chooses
// lane by lane (where, any_lane: math/fp/lanes.h); a comparison gives T's lane mask (a bool for a
// float or double).
#pragma once

#include <stdint.h>

#include <type_traits>

#include "../fp/host_device.h"
#include "../fp/lanes.h"
#include "../fp/scalar_functions.h"

#if defined(__CUDACC__)
#define FHMC_UNROLL _Pragma("unroll")
#else
#define FHMC_UNROLL
#endif

namespace fused_hmc {
namespace target_math {

template <class S>
using if_scalar_t = typename std::enable_if<std::is_arithmetic<S>::value, int>::type;

template <class T, int W>
struct Dual {
  static_assert(std::is_floating_point<T>::value || lane_traits<T>::kLanes > 1,
                "Dual<T, W>: T must be float or double, or a pack of chains of them");
  static_assert(W >= 1, "Dual<T, W>: W must be at least 1");
  T v;     // value
  T d[W];  // directional derivatives

  Dual() = default;  // trivial: uninitialised like a float (so `Dual x[26];` costs nothing)
  // Any arithmetic constant (int, int64_t, float, double): zero derivatives.
  template <class S, if_scalar_t<S> = 0>
  FHMC_HD Dual(S value) : v(static_cast<T>(value)) {
    FHMC_UNROLL
    for (int k = 0; k < W; ++k) d[k] = T(0);
  }
  // A pack of chains' values (for float or double the constructor above): zero derivatives.
  template <class U = T, typename std::enable_if<!std::is_arithmetic<U>::value, int>::type = 0>
  FHMC_HD Dual(const T& value) : v(value) {
    FHMC_UNROLL
    for (int k = 0; k < W; ++k) d[k] = T(0);
  }

  template <class O>
  FHMC_HD Dual& operator+=(const O& o) { return *this = *this + o; }
  template <class O>
  FHMC_HD Dual& operator-=(const O& o) { return *this = *this - o; }
  template <class O>
  FHMC_HD Dual& operator*=(const O& o) { return *this = *this * o; }
  template <class O>
  FHMC_HD Dual& operator/=(const O& o) { return *this = *this / o; }
};

static_assert(std::is_trivially_copyable<Dual<float, 8>>::value, "Dual must be trivially copyable");
static_assert(std::is_trivially_default_constructible<Dual<double, 3>>::value,
              "Dual must be trivially default-constructible");

namespace dual_detail {  // not found by ADL: helpers cannot capture user function names

// (value, slope * a's derivatives)
template <class T, int W>
FHMC_HD Dual<T, W> chain(const Dual<T, W>& a, T value, T slope) {
  Dual<T, W> r;
  r.v = value;
  FHMC_UNROLL
  for (int k = 0; k < W; ++k) r.d[k] = slope * a.d[k];
  return r;
}

// (value, slope_a * a's derivatives + slope_b * b's)
template <class T, int W>
FHMC_HD Dual<T, W> chain2(const Dual<T, W>& a, const Dual<T, W>& b, T value, T slope_a,
                          T slope_b) {
  Dual<T, W> r;
  r.v = value;
  FHMC_UNROLL
  for (int k = 0; k < W; ++k) r.d[k] = slope_a * a.d[k] + slope_b * b.d[k];
  return r;
}

// d pow(x, y) / dx given p = pow(x, y); 0 at y = 0 (torch), y pow(x, y - 1) where x = 0 (the
// second pow only when some chain needs it).
template <class T>
FHMC_HD T pow_base_slope(T x, T y, T p) {
  T slope = y * p / x;
  const auto at_zero = x == T(0);
  if (any_lane(at_zero)) slope = where(at_zero, y * pow(x, y - T(1)), slope);
  return where(y == T(0), T(0), slope);
}
// d pow(x, y) / dy given p; 0 where x = 0 and y >= 0 (torch), where log(0) would give NaN.
template <class T>
FHMC_HD T pow_exponent_slope(T x, T y, T p) {
  return where(x == T(0) && y >= T(0), T(0), p * log(x));
}

}  // namespace dual_detail

// ---- arithmetic ----
template <class T, int W>
FHMC_HD Dual<T, W> operator+(const Dual<T, W>& a) { return a; }
template <class T, int W>
FHMC_HD Dual<T, W> operator-(const Dual<T, W>& a) { return dual_detail::chain(a, -a.v, T(-1)); }

template <class T, int W>
FHMC_HD Dual<T, W> operator+(const Dual<T, W>& a, const Dual<T, W>& b) {
  Dual<T, W> r;
  r.v = a.v + b.v;
  FHMC_UNROLL
  for (int k = 0; k < W; ++k) r.d[k] = a.d[k] + b.d[k];
  return r;
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> operator+(const Dual<T, W>& a, S b) {
  Dual<T, W> r = a;
  r.v = a.v + static_cast<T>(b);
  return r;
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> operator+(S a, const Dual<T, W>& b) {
  Dual<T, W> r = b;
  r.v = static_cast<T>(a) + b.v;
  return r;
}

template <class T, int W>
FHMC_HD Dual<T, W> operator-(const Dual<T, W>& a, const Dual<T, W>& b) {
  Dual<T, W> r;
  r.v = a.v - b.v;
  FHMC_UNROLL
  for (int k = 0; k < W; ++k) r.d[k] = a.d[k] - b.d[k];
  return r;
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> operator-(const Dual<T, W>& a, S b) {
  Dual<T, W> r = a;
  r.v = a.v - static_cast<T>(b);
  return r;
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> operator-(S a, const Dual<T, W>& b) {
  return dual_detail::chain(b, static_cast<T>(a) - b.v, T(-1));
}

template <class T, int W>
FHMC_HD Dual<T, W> operator*(const Dual<T, W>& a, const Dual<T, W>& b) {
  return dual_detail::chain2(a, b, a.v * b.v, b.v, a.v);
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> operator*(const Dual<T, W>& a, S b) {
  const T s = static_cast<T>(b);
  return dual_detail::chain(a, a.v * s, s);
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> operator*(S a, const Dual<T, W>& b) {
  const T s = static_cast<T>(a);
  return dual_detail::chain(b, s * b.v, s);
}

template <class T, int W>
FHMC_HD Dual<T, W> operator/(const Dual<T, W>& a, const Dual<T, W>& b) {
  const T q = a.v / b.v, inv = T(1) / b.v;
  return dual_detail::chain2(a, b, q, inv, -q * inv);  // (a' - q b') / b
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> operator/(const Dual<T, W>& a, S b) {
  const T s = static_cast<T>(b);
  return dual_detail::chain(a, a.v / s, T(1) / s);
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> operator/(S a, const Dual<T, W>& b) {
  const T q = static_cast<T>(a) / b.v, inv = T(1) / b.v;
  return dual_detail::chain(b, q, -q * inv);  // the Dual / Dual slope, bit for bit
}

// ---- comparisons: values only, in C++'s own promotion (the branch the plain T would take); a
// bool, or a pack's lane mask ----
#define FHMC_DUAL_COMPARISON(op)                                                   \
  template <class T, int W>                                                        \
  FHMC_HD auto operator op(const Dual<T, W>& a, const Dual<T, W>& b) {             \
    return a.v op b.v;                                                             \
  }                                                                                \
  template <class T, int W, class S, if_scalar_t<S> = 0>                           \
  FHMC_HD auto operator op(const Dual<T, W>& a, S b) { return a.v op b; }          \
  template <class T, int W, class S, if_scalar_t<S> = 0>                           \
  FHMC_HD auto operator op(S a, const Dual<T, W>& b) { return a op b.v; }
FHMC_DUAL_COMPARISON(<)
FHMC_DUAL_COMPARISON(<=)
FHMC_DUAL_COMPARISON(>)
FHMC_DUAL_COMPARISON(>=)
FHMC_DUAL_COMPARISON(==)
FHMC_DUAL_COMPARISON(!=)
#undef FHMC_DUAL_COMPARISON

// where(m, a, b) of a pack's duals, lane by lane, value and derivatives alike (a bool m takes
// math/fp/lanes.h's where, which the using-declaration keeps visible beside this overload).
using fused_hmc::where;
template <class M, class T, int W,
          typename std::enable_if<!std::is_same<M, bool>::value, int>::type = 0>
FHMC_HD Dual<T, W> where(const M& m, const Dual<T, W>& a, const Dual<T, W>& b) {
  Dual<T, W> r;
  r.v = where(m, a.v, b.v);
  FHMC_UNROLL
  for (int k = 0; k < W; ++k) r.d[k] = where(m, a.d[k], b.d[k]);
  return r;
}

// ---- elementary functions ----
template <class T, int W>
FHMC_HD Dual<T, W> exp(const Dual<T, W>& a) {
  const T e = exp(a.v);
  return dual_detail::chain(a, e, e);
}
template <class T, int W>
FHMC_HD Dual<T, W> log(const Dual<T, W>& a) { return dual_detail::chain(a, log(a.v), T(1) / a.v); }
template <class T, int W>
FHMC_HD Dual<T, W> log1p(const Dual<T, W>& a) {
  return dual_detail::chain(a, log1p(a.v), T(1) / (T(1) + a.v));
}
template <class T, int W>
FHMC_HD Dual<T, W> expm1(const Dual<T, W>& a) {
  return dual_detail::chain(a, expm1(a.v), exp(a.v));  // not expm1 + 1: it cancels for x << 0
}
template <class T, int W>
FHMC_HD Dual<T, W> sqrt(const Dual<T, W>& a) {
  const T s = sqrt(a.v);
  return dual_detail::chain(a, s, T(0.5) / s);
}
template <class T, int W>
FHMC_HD Dual<T, W> abs(const Dual<T, W>& a) {
  // 1, -1, 0 at 0, and NaN for NaN
  const T slope =
      where(a.v > T(0), T(1), where(a.v < T(0), T(-1), where(a.v == T(0), T(0), a.v)));
  return dual_detail::chain(a, abs(a.v), slope);
}
template <class T, int W>
FHMC_HD Dual<T, W> fabs(const Dual<T, W>& a) { return abs(a); }
template <class T, int W>
FHMC_HD Dual<T, W> tanh(const Dual<T, W>& a) {
  const T e = exp(T(-2) * abs(a.v)), one_plus = T(1) + e;
  return dual_detail::chain(a, tanh(a.v), T(4) * e / (one_plus * one_plus));
}
template <class T, int W>
FHMC_HD Dual<T, W> sin(const Dual<T, W>& a) { return dual_detail::chain(a, sin(a.v), cos(a.v)); }
template <class T, int W>
FHMC_HD Dual<T, W> cos(const Dual<T, W>& a) { return dual_detail::chain(a, cos(a.v), -sin(a.v)); }
template <class T, int W>
FHMC_HD Dual<T, W> lgamma(const Dual<T, W>& a) {
  return dual_detail::chain(a, lgamma(a.v), digamma(a.v));
}

// ---- pow ----
template <class T, int W>
FHMC_HD Dual<T, W> pow(const Dual<T, W>& a, const Dual<T, W>& b) {
  const T p = pow(a.v, b.v);
  return dual_detail::chain2(a, b, p, dual_detail::pow_base_slope(a.v, b.v, p),
                             dual_detail::pow_exponent_slope(a.v, b.v, p));
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> pow(const Dual<T, W>& a, S b) {
  const T y = static_cast<T>(b), p = pow(a.v, y);
  return dual_detail::chain(a, p, dual_detail::pow_base_slope(a.v, y, p));
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> pow(S a, const Dual<T, W>& b) {
  const T x = static_cast<T>(a), p = pow(x, b.v);
  return dual_detail::chain(b, p, dual_detail::pow_exponent_slope(x, b.v, p));
}

// ---- fmin / fmax: torch's choice of which argument's derivative passes ----
template <class T, int W>
FHMC_HD Dual<T, W> fmax(const Dual<T, W>& a, const Dual<T, W>& b) {
  return where(a.v >= b.v || b.v != b.v, a, b);
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> fmax(const Dual<T, W>& a, S b) { return fmax(a, Dual<T, W>(b)); }
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> fmax(S a, const Dual<T, W>& b) { return fmax(Dual<T, W>(a), b); }
template <class T, int W>
FHMC_HD Dual<T, W> fmin(const Dual<T, W>& a, const Dual<T, W>& b) {
  return where(a.v <= b.v || b.v != b.v, a, b);
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> fmin(const Dual<T, W>& a, S b) { return fmin(a, Dual<T, W>(b)); }
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> fmin(S a, const Dual<T, W>& b) { return fmin(Dual<T, W>(a), b); }

// ---- fma: the value rounded once, as the plain fma; (ab)' = a'b + ab' ----
template <class T, int W>
FHMC_HD Dual<T, W> fma(const Dual<T, W>& a, const Dual<T, W>& b, const Dual<T, W>& c) {
  Dual<T, W> r = a * b + c;
  r.v = fma_any(a.v, b.v, c.v);
  return r;
}
namespace dual_detail {
template <class X>
struct dual_type {
  using type = void;
};
template <class T, int W>
struct dual_type<Dual<T, W>> {
  using type = Dual<T, W>;
};
// The Dual among a, b, c when the others are scalars (void when none is, or two differ).
template <class A, class B, class C,
          class D = typename std::conditional<
              !std::is_void<typename dual_type<A>::type>::value, typename dual_type<A>::type,
              typename std::conditional<!std::is_void<typename dual_type<B>::type>::value,
                                        typename dual_type<B>::type,
                                        typename dual_type<C>::type>::type>::type>
using mixed_dual_t = typename std::enable_if<
    !std::is_void<D>::value && !(std::is_same<A, D>::value && std::is_same<B, D>::value &&
                                 std::is_same<C, D>::value) &&
        (std::is_same<A, D>::value || std::is_arithmetic<A>::value) &&
        (std::is_same<B, D>::value || std::is_arithmetic<B>::value) &&
        (std::is_same<C, D>::value || std::is_arithmetic<C>::value),
    D>::type;
}  // namespace dual_detail
template <class A, class B, class C, class D = dual_detail::mixed_dual_t<A, B, C>>
FHMC_HD D fma(const A& a, const B& b, const C& c) {
  return fma(D(a), D(b), D(c));
}

// ---- log_sum_exp, softplus, log_sigmoid, sigmoid (stable forms, scalar_functions.h) ----
template <class T, int W>
FHMC_HD Dual<T, W> log_sum_exp(const Dual<T, W>& a, const Dual<T, W>& b) {
  T wa, wb;
  const T value = log_sum_exp_and_weights(a.v, b.v, &wa, &wb);
  return dual_detail::chain2(a, b, value, wa, wb);
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> log_sum_exp(const Dual<T, W>& a, S b) {
  T wa, wb;
  const T value = log_sum_exp_and_weights(a.v, static_cast<T>(b), &wa, &wb);
  return dual_detail::chain(a, value, wa);
}
template <class T, int W, class S, if_scalar_t<S> = 0>
FHMC_HD Dual<T, W> log_sum_exp(S a, const Dual<T, W>& b) {
  T wa, wb;
  const T value = log_sum_exp_and_weights(static_cast<T>(a), b.v, &wa, &wb);
  return dual_detail::chain(b, value, wb);
}
template <class T, int W>
FHMC_HD Dual<T, W> softplus(const Dual<T, W>& a) {
  T slope;
  const T value = softplus_and_slope(a.v, &slope);
  return dual_detail::chain(a, value, slope);
}
template <class T, int W>
FHMC_HD Dual<T, W> log_sigmoid(const Dual<T, W>& a) {  // -softplus(-x); slope sigmoid(-x)
  T slope;
  const T value = -softplus_and_slope(-a.v, &slope);
  return dual_detail::chain(a, value, slope);
}
template <class T, int W>
FHMC_HD Dual<T, W> sigmoid(const Dual<T, W>& a) {
  const T e = exp(-abs(a.v)), r = T(1) / (T(1) + e);
  // slope s (1 - s) = e / (1 + e)^2
  return dual_detail::chain(a, where(a.v >= T(0), r, e * r), e * r * r);
}

}  // namespace target_math

using target_math::Dual;

// Gradient passes: W = dim up to 16 (one pass, dim + 1 values per dual), else 8. A pass costs
// about W + 1 times one plain evaluation and keeps W + 1 registers per live dual: one wide pass
// beats several narrow ones until the duals spill out of the GPU's 255 registers a thread, which
// for a typical model's handful of live duals starts past W = 16; W = 8 then keeps each pass in
// registers at a cost of (d + ceil(d / 8)) / (d + 1), about 12%, more arithmetic.
FHMC_HD constexpr int dual_width(int dim) { return dim <= 16 ? (dim < 1 ? 1 : dim) : 8; }

// Evaluates f (Dual<T, W> f(const Dual<T, W>* x)) at x[0..dim) in ceil(dim / W) passes (at least
// one), pass k seeding coordinates [kW, min((k + 1)W, dim)); writes d f / dx into grad[0..dim) and
// returns f(x). xd: caller's scratch of dim duals (on the GPU a local Dual<T, W> xd[DIM]).
template <int W, class T, class F>
FHMC_HD T value_and_gradient(const F& f, const T* x, int dim, Dual<T, W>* xd, T* grad) {
  for (int i = 0; i < dim; ++i) xd[i] = Dual<T, W>(x[i]);
  T value = T(0);
  int start = 0;
  do {
    // Seeds and reads use compile-time lane indices k, so the result dual stays in registers.
    FHMC_UNROLL
    for (int k = 0; k < W; ++k)
      if (start + k < dim) xd[start + k].d[k] = T(1);
    const Dual<T, W> y = f(static_cast<const Dual<T, W>*>(xd));
    FHMC_UNROLL
    for (int k = 0; k < W; ++k) {
      if (start + k < dim) {
        grad[start + k] = y.d[k];
        xd[start + k].d[k] = T(0);
      }
    }
    value = y.v;
    start += W;
  } while (start < dim);
  return value;
}

}  // namespace fused_hmc
