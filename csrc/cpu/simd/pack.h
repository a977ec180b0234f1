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

// The signed integer of S's width.
template <typename S>
using same_width_int_t = std::conditional_t<
    sizeof(S) == 8, int64_t,
    std::conditional_t<sizeof(S) == 4, int32_t, std::conditional_t<sizeof(S) == 2, int16_t, int8_t>>>;

// A vector wider than the target's registers (8 doubles on AVX2) has its lanes compared, resized
// and selected half by half: GCC lowers such an operation on the whole vector to a scalar compare
// or move per lane (log's reduction: 8 vcomisd for one compare).
template <class V>
constexpr bool kSplitInHalves = sizeof(V) > static_cast<size_t>(kVectorBytes);
template <class V>
using lane_of_t = std::remove_cv_t<std::remove_reference_t<decltype(V{}[0])>>;

// The two halves of a vector v (low lanes, then high), and the vector V of two halves.
template <class V>
struct Halves {
  typedef lane_of_t<V> Half __attribute__((vector_size(sizeof(V) / 2)));
  Half low, high;
};
template <class V>
FHMC_PACK_INLINE Halves<V> halves_of(const V& v) {
  Halves<V> h;  // each half copied on its own: one copy of the pair compiles to lane moves
  std::memcpy(&h.low, &v, sizeof h.low);
  std::memcpy(&h.high, reinterpret_cast<const char*>(&v) + sizeof h.low, sizeof h.high);
  return h;
}
template <class V, class Half>
FHMC_PACK_INLINE V joined(const Half& low, const Half& high) {
  static_assert(2 * sizeof(Half) == sizeof(V), "two halves");
  V v;
  std::memcpy(&v, &low, sizeof low);
  std::memcpy(reinterpret_cast<char*>(&v) + sizeof low, &high, sizeof high);
  return v;
}

// The W integer lanes of v, each converted to To.
template <typename To, int W, class V>
FHMC_PACK_INLINE auto convert_lanes(const V& v) {
  typedef To R __attribute__((vector_size(W * sizeof(To))));
  if constexpr ((kSplitInHalves<V> || kSplitInHalves<R>) && W % 2 == 0) {
    const auto h = halves_of(v);
    return joined<R>(convert_lanes<To, W / 2>(h.low), convert_lanes<To, W / 2>(h.high));
  } else {
    return __builtin_convertvector(v, R);
  }
}

// A lane mask: 0 or -1 per lane, in integers I of the compared lanes' width, so that a selection
// among those lanes uses it as it is. Masks of other widths convert implicitly (the lane order
// kept). (I is a parameter because GCC drops the vector size of a member typedef whose element
// type does not depend on the template.)
template <int W, typename I = int32_t>
struct Mask {
  typedef I V __attribute__((vector_size(W * sizeof(I))));
  V v;
  Mask() : v{} {}
  explicit Mask(const V& bits) : v(bits) {}
  template <typename J>
  Mask(const Mask<W, J>& o) : v(convert_lanes<I, W>(o.v)) {}  // NOLINT: implicit
  bool operator[](int l) const { return v[l] != 0; }
  template <typename J>
  friend Mask operator&&(const Mask& a, const Mask<W, J>& b) { return Mask(a.v & Mask(b).v); }
  template <typename J>
  friend Mask operator||(const Mask& a, const Mask<W, J>& b) { return Mask(a.v | Mask(b).v); }
  friend Mask operator!(const Mask& a) { return Mask(~a.v); }
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
FHMC_PACK_INLINE Pack<R, W> as_pack(const T& a) {
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
  FHMC_PACK_INLINE Pack<common_lane_t<A, B>, pack_width<A, B>()> operator op(          \
      const A& a, const B& b) {                                                        \
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

// Lane l of the result is -1 where compare(a[l], b[l]), else 0, in integers of the lanes' width.
template <int W, class V, class Compare>
FHMC_PACK_INLINE auto compare_lanes(const V& a, const V& b, Compare compare) {
  typedef same_width_int_t<lane_of_t<V>> I __attribute__((vector_size(sizeof(V))));
  if constexpr (kSplitInHalves<V> && W % 2 == 0) {
    const auto ha = halves_of(a), hb = halves_of(b);
    return joined<I>(compare_lanes<W / 2>(ha.low, hb.low, compare),
                     compare_lanes<W / 2>(ha.high, hb.high, compare));
  } else {
    return (I)compare(a, b);  // a vector compare gives the signed integers of its lanes' width
  }
}

// Lane l of a where m[l] is set, else of b (m: integers of a's lane width).
template <int W, class M, class V>
FHMC_PACK_INLINE V select_lanes(const M& m, const V& a, const V& b) {
  static_assert(sizeof(M) == sizeof(V), "a mask of the selected lanes' width");
  if constexpr (kSplitInHalves<V> && W % 2 == 0) {
    const auto hm = halves_of(m), ha = halves_of(a), hb = halves_of(b);
    return joined<V>(select_lanes<W / 2>(hm.low, ha.low, hb.low),
                     select_lanes<W / 2>(hm.high, ha.high, hb.high));
  } else {
    return m != 0 ? a : b;
  }
}

#define FHMC_PACK_COMPARE(op)                                                          \
  template <class A, class B, if_pack_operands_t<A, B> = 0>                            \
  FHMC_PACK_INLINE auto operator op(const A& a, const B& b) {                          \
    using R = common_lane_t<A, B>;                                                     \
    constexpr int W = pack_width<A, B>();                                              \
    return Mask<W, same_width_int_t<R>>(                                               \
        compare_lanes<W>(as_pack<R, W>(a).v, as_pack<R, W>(b).v,                       \
                         [](const auto& x, const auto& y) { return x op y; }));        \
  }
FHMC_PACK_COMPARE(<)
FHMC_PACK_COMPARE(<=)
FHMC_PACK_COMPARE(>)
FHMC_PACK_COMPARE(>=)
FHMC_PACK_COMPARE(==)
FHMC_PACK_COMPARE(!=)
#undef FHMC_PACK_COMPARE

template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> operator-(const Pack<S, W>& a) {
  return Pack<S, W>::of(-a.v);
}
template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> operator+(const Pack<S, W>& a) {
  return a;
}

// a op= b is a = a op b, narrowed back to a's lane type (as for scalars).
template <typename S, int W>
template <typename U>
FHMC_PACK_INLINE Pack<S, W>& Pack<S, W>::operator+=(const U& b) {
  return *this = Pack(*this + b);
}
template <typename S, int W>
template <typename U>
FHMC_PACK_INLINE Pack<S, W>& Pack<S, W>::operator-=(const U& b) {
  return *this = Pack(*this - b);
}
template <typename S, int W>
template <typename U>
FHMC_PACK_INLINE Pack<S, W>& Pack<S, W>::operator*=(const U& b) {
  return *this = Pack(*this * b);
}
template <typename S, int W>
template <typename U>
FHMC_PACK_INLINE Pack<S, W>& Pack<S, W>::operator/=(const U& b) {
  return *this = Pack(*this / b);
}

// Lane selection: lane l of a where mask l is set, else of b.
template <typename S, int W, typename I>
FHMC_PACK_INLINE Pack<S, W> where(const Mask<W, I>& m, const Pack<S, W>& a, const Pack<S, W>& b) {
  return Pack<S, W>::of(select_lanes<W>(Mask<W, same_width_int_t<S>>(m).v, a.v, b.v));
}
template <int W, typename I>
bool any_lane(const Mask<W, I>& m) {
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
FHMC_PACK_INLINE Pack<S, W> add_rn(const Pack<S, W>& a, const Pack<S, W>& b) { return a + b; }
template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> sub_rn(const Pack<S, W>& a, const Pack<S, W>& b) { return a - b; }
template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> mul_rn(const Pack<S, W>& a, const Pack<S, W>& b) { return a * b; }
template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> div_rn(const Pack<S, W>& a, const Pack<S, W>& b) { return a / b; }
template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> mul_rn(S a, const Pack<S, W>& b) { return Pack<S, W>(a) * b; }
template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> add_rn(S a, const Pack<S, W>& b) { return Pack<S, W>(a) + b; }
template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> sub_rn(const Pack<S, W>& a, S b) { return a - Pack<S, W>(b); }
template <typename S, int W>
FHMC_PACK_INLINE Pack<S, W> tree_add(const Pack<S, W>& a, const Pack<S, W>& b) { return a + b; }
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
  using mask = simd::Mask<W, simd::same_width_int_t<S>>;
  using integer = simd::Pack<int, W>;
  template <typename U>
  using with_lane = simd::Pack<U, W>;
  static constexpr int kLanes = W;
};

}  // namespace fused_hmc
