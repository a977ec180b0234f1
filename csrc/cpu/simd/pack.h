// Pack<S, W>: W chains' values of one quantity in the lanes of a vector register, the scalar type
// the CPU build instantiates the shared chain math on to run W chains per thread
// (cpu/simd/pack_group.h). Every operation is the scalar one applied to each lane, so lane l of a
// result has the bits the scalar build gives chain l:
//   - arithmetic and comparisons follow C++'s scalar rules: float with double computes in double
//     (Pack<float> * double -> Pack<double>), an integer takes the other side's type, and
//     assigning a wider pack narrows it as assigning a double to a float does;
//   - +, -, *, /, sqrt and fma are the IEEE operations (vector instructions; -ffp-contract=off
//     still forbids contraction);
//   - exp, log and log1p of float lanes are math/fp/float_transcendentals.h's, as a float's are;
//     the other functions call the scalar one per lane (cpu/simd/pack_functions.h).
// A comparison gives a Mask; `where(mask, a, b)` selects per lane, and `?:` or `if` on a mask does
// not compile (a model that branches on its parameters runs one chain per thread).
// Host only (GCC/Clang vector extensions).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../math/fp/lanes.h"

namespace fused_hmc {
namespace simd {

#define FHMC_PACK_INLINE inline __attribute__((always_inline))

// Lanes per pack: W = bytes / sizeof(S) for a pack of 32 bytes (AVX2's register, half of
// AVX-512's), or 16 on SSE2 alone. Not 64 with AVX-512: a logistic regression's gradient was no
// faster per chain in packs of 16 floats than of 8 (8.0 against 8.6 us on Zen 4), and 16 chains
// on 2 threads make 2 packs of 8 but 1 of 16.
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif
template <typename S>
constexpr int kLanesOf = (kVectorBytes < 32 ? kVectorBytes : 32) / static_cast<int>(sizeof(S));

// A lane mask: 0 or -1 per lane. (I is a parameter because GCC drops the vector size of a member
// typedef whose element type does not depend on the template.)
template <int W, typename I = int32_t>
struct Mask {
  typedef I V __attribute__((vector_size(W * sizeof(I))));
  V v;
  bool operator[](int l) const { return v[l] != 0; }
  friend Mask operator&&(Mask a, Mask b) { return {a.v & b.v}; }
  friend Mask operator||(Mask a, Mask b) { return {a.v | b.v}; }
  friend Mask operator!(Mask a) { return {~a.v}; }
};

template <typename S, int W>
struct Pack {
  static_assert(std::is_arithmetic<S>::value, "a pack of arithmetic lanes");
  typedef S V __attribute__((vector_size(W * sizeof(S))));
  using Scalar = S;
  static constexpr int kLanes = W;
  V v;

  Pack() : v{} {}
  // A scalar in every lane, converted as the scalar assignment converts it.
  template <typename U, typename std::enable_if<std::is_arithmetic<U>::value, int>::type = 0>
  Pack(U s) {  // NOLINT: implicit, as float f = 1.0 is
    // s - 0 is s in every lane (-0 and NaN included), and compiles to one broadcast (a loop of
    // lane stores does not)
    v = static_cast<S>(s) - V{};
  }
  // A pack of another lane type, each lane converted (implicit, as scalar assignment narrows).
  template <typename U>
  Pack(const Pack<U, W>& o) : v(__builtin_convertvector(o.v, V)) {}  // NOLINT
  static Pack of(V v) {
    Pack p;
    p.v = v;
    return p;
  }
  S operator[](int l) const { return v[l]; }
  void set(int l, S s) { v[l] = s; }

  template <typename U>
  Pack& operator+=(const U& b);
  template <typename U>
  Pack& operator-=(const U& b);
  template <typename U>
  Pack& operator*=(const U& b);
  template <typename U>
  Pack& operator/=(const U& b);
};

template <class T>
struct is_pack : std::false_type {};
template <typename S, int W>
struct is_pack<Pack<S, W>> : std::true_type {};

// The lane type of a scalar or a pack, and the pack of the result of a binary operation.
template <class T>
struct lane_type {
  using type = T;
};
template <typename S, int W>
struct lane_type<Pack<S, W>> {
  using type = S;
};
template <class A, class B>
using common_lane_t =
    typename std::common_type<typename lane_type<A>::type, typename lane_type<B>::type>::type;

// The lanes of a pack (0 for a scalar), and of whichever operand is a pack.
template <class T>
struct lanes_of : std::integral_constant<int, 0> {};
template <typename S, int W>
struct lanes_of<Pack<S, W>> : std::integral_constant<int, W> {};
template <class A, class B>
constexpr int pack_width() {
  return lanes_of<A>::value > 0 ? lanes_of<A>::value : lanes_of<B>::value;
}

// Either operand as the result's pack (a scalar splatted).
template <typename R, int W, class T>
Pack<R, W> as_pack(const T& a) {
  if constexpr (is_pack<T>::value) {
    if constexpr (std::is_same<typename T::Scalar, R>::value) {
      return a;
    } else {
      return Pack<R, W>::of(__builtin_convertvector(a.v, typename Pack<R, W>::V));
    }
  } else {
    return Pack<R, W>(a);
  }
}

template <class A, class B>
using if_pack_operands_t = typename std::enable_if<
    (is_pack<A>::value || is_pack<B>::value) &&
        (is_pack<A>::value || std::is_arithmetic<A>::value) &&
        (is_pack<B>::value || std::is_arithmetic<B>::value),
    int>::type;

// Bit operations take integer lanes only (a shift count the same in every lane or per lane).
template <class A, class B>
using if_integer_pack_operands_t = typename std::enable_if<
    std::is_integral<common_lane_t<A, B>>::value, if_pack_operands_t<A, B>>::type;

#define FHMC_PACK_BINARY(op, if_operands)                                              \
  template <class A, class B, if_operands<A, B> = 0>                                   \
  Pack<common_lane_t<A, B>, pack_width<A, B>()> operator op(const A& a, const B& b) {  \
    using R = common_lane_t<A, B>;                                                     \
    constexpr int W = pack_width<A, B>();                                              \
    return Pack<R, W>::of(as_pack<R, W>(a).v op as_pack<R, W>(b).v);                   \
  }
FHMC_PACK_BINARY(+, if_pack_operands_t)
FHMC_PACK_BINARY(-, if_pack_operands_t)
FHMC_PACK_BINARY(*, if_pack_operands_t)
FHMC_PACK_BINARY(/, if_pack_operands_t)
FHMC_PACK_BINARY(&, if_integer_pack_operands_t)
FHMC_PACK_BINARY(|, if_integer_pack_operands_t)
FHMC_PACK_BINARY(<<, if_integer_pack_operands_t)
FHMC_PACK_BINARY(>>, if_integer_pack_operands_t)
#undef FHMC_PACK_BINARY

#define FHMC_PACK_COMPARE(op)                                                          \
  template <class A, class B, if_pack_operands_t<A, B> = 0>                            \
  Mask<pack_width<A, B>()> operator op(const A& a, const B& b) {                       \
    using R = common_lane_t<A, B>;                                                     \
    constexpr int W = pack_width<A, B>();                                              \
    return {__builtin_convertvector(as_pack<R, W>(a).v op as_pack<R, W>(b).v,          \
                                    typename Mask<W>::V)};                             \
  }
FHMC_PACK_COMPARE(<)
FHMC_PACK_COMPARE(<=)
FHMC_PACK_COMPARE(>)
FHMC_PACK_COMPARE(>=)
FHMC_PACK_COMPARE(==)
FHMC_PACK_COMPARE(!=)
#undef FHMC_PACK_COMPARE

template <typename S, int W>
Pack<S, W> operator-(const Pack<S, W>& a) {
  return Pack<S, W>::of(-a.v);
}
template <typename S, int W>
Pack<S, W> operator+(const Pack<S, W>& a) {
  return a;
}

// a op= b is a = a op b, narrowed back to a's lane type (as for scalars).
template <typename S, int W>
template <typename U>
Pack<S, W>& Pack<S, W>::operator+=(const U& b) {
  return *this = Pack(*this + b);
}
template <typename S, int W>
template <typename U>
Pack<S, W>& Pack<S, W>::operator-=(const U& b) {
  return *this = Pack(*this - b);
}
template <typename S, int W>
template <typename U>
Pack<S, W>& Pack<S, W>::operator*=(const U& b) {
  return *this = Pack(*this * b);
}
template <typename S, int W>
template <typename U>
Pack<S, W>& Pack<S, W>::operator/=(const U& b) {
  return *this = Pack(*this / b);
}

// Lane selection: lane l of a where mask l is set, else of b.
template <typename S, int W>
Pack<S, W> where(Mask<W> m, const Pack<S, W>& a, const Pack<S, W>& b) {
  typedef std::conditional_t<sizeof(S) == 8, int64_t,
                             std::conditional_t<sizeof(S) == 4, int32_t, int16_t>>
      I;
  typedef I IV __attribute__((vector_size(W * sizeof(S))));
  const IV wide = __builtin_convertvector(m.v, IV);
  return Pack<S, W>::of(wide != 0 ? a.v : b.v);
}
template <int W>
bool any_lane(Mask<W> m) {
  for (int l = 0; l < W; ++l) {
    if (m.v[l] != 0) return true;
  }
  return false;
}

// Each lane's bits as another lane type of their width (a float64 pack as int64 lanes).
template <typename To, typename S, int W>
To bit_cast_lanes(const Pack<S, W>& p) {
  static_assert(sizeof(typename To::V) == sizeof(typename Pack<S, W>::V), "the same width");
  return To::of((typename To::V)p.v);  // a vector cast of the same size keeps the bits
}

// f applied to each lane (the scalar function, the scalar's bits).
template <typename S, int W, class F>
auto per_lane(const Pack<S, W>& a, F&& f) {
  using R = decltype(f(S()));
  Pack<R, W> r;
  for (int l = 0; l < W; ++l) r.v[l] = f(a.v[l]);
  return r;
}
template <typename S, int W, class F>
auto per_lane(const Pack<S, W>& a, const Pack<S, W>& b, F&& f) {
  using R = decltype(f(S(), S()));
  Pack<R, W> r;
  for (int l = 0; l < W; ++l) r.v[l] = f(a.v[l], b.v[l]);
  return r;
}
template <int W>
int max_lane(const Pack<int, W>& a) {
  int m = a.v[0];
  for (int l = 1; l < W; ++l) m = a.v[l] > m ? a.v[l] : m;
  return m;
}

// The correctly rounded operations of math/fp/rounding.h, lane by lane.
template <typename S, int W>
Pack<S, W> add_rn(const Pack<S, W>& a, const Pack<S, W>& b) { return a + b; }
template <typename S, int W>
Pack<S, W> sub_rn(const Pack<S, W>& a, const Pack<S, W>& b) { return a - b; }
template <typename S, int W>
Pack<S, W> mul_rn(const Pack<S, W>& a, const Pack<S, W>& b) { return a * b; }
template <typename S, int W>
Pack<S, W> div_rn(const Pack<S, W>& a, const Pack<S, W>& b) { return a / b; }
template <typename S, int W>
Pack<S, W> mul_rn(S a, const Pack<S, W>& b) { return Pack<S, W>(a) * b; }
template <typename S, int W>
Pack<S, W> add_rn(S a, const Pack<S, W>& b) { return Pack<S, W>(a) + b; }
template <typename S, int W>
Pack<S, W> sub_rn(const Pack<S, W>& a, S b) { return a - Pack<S, W>(b); }
template <typename S, int W>
Pack<S, W> tree_add(const Pack<S, W>& a, const Pack<S, W>& b) { return a + b; }
// sqrt and fma over plain arrays of the lanes: GCC vectorises such a loop into one instruction per
// register (a loop over a vector's elements stays a call per lane). Always inlined: a call passes
// the packs through memory, which cost more than the instructions (perf).
template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> sqrt_rn(const Pack<S, W>& a) {
  S x[W], r[W];
  std::memcpy(x, &a.v, sizeof x);
  for (int l = 0; l < W; ++l) r[l] = std::sqrt(x[l]);
  typename Pack<S, W>::V v;
  std::memcpy(&v, r, sizeof r);
  return Pack<S, W>::of(v);
}
template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> fma_any(const Pack<S, W>& a, const Pack<S, W>& b,
                                    const Pack<S, W>& c) {
  S x[W], y[W], z[W], r[W];
  std::memcpy(x, &a.v, sizeof x);
  std::memcpy(y, &b.v, sizeof y);
  std::memcpy(z, &c.v, sizeof z);
  for (int l = 0; l < W; ++l) r[l] = std::fma(x[l], y[l], z[l]);
  typename Pack<S, W>::V v;
  std::memcpy(&v, r, sizeof r);
  return Pack<S, W>::of(v);
}

}  // namespace simd

// The lane-generic vocabulary of math/fp/lanes.h for packs.
template <typename S, int W>
struct lane_traits<simd::Pack<S, W>> {
  using mask = simd::Mask<W>;
  using integer = simd::Pack<int, W>;
  template <typename U>
  using with_lane = simd::Pack<U, W>;
  static constexpr int kLanes = W;
};

}  // namespace fused_hmc
