// The functions docs/TARGETS.md promises to user log densities (math/fp/scalar_functions.h), for
// packs of chains (pack.h), so that a model's value and gradient in lane l are the bits the scalar
// build computes for chain l: exp, log and log1p of floats in vector lanes by the same
// float_transcendentals.h the scalar float calls; softplus, log_sigmoid and sigmoid by the scalar
// functions' branch-free bodies on the pack; the rest through the scalar function lane by lane.
// Found by argument-dependent lookup from the user's namespace, beside the scalar and dual
// overloads.
#pragma once

#include "../../math/fp/scalar_functions.h"
#include "pack.h"

namespace fused_hmc {
namespace simd {

#define FHMC_PACK_UNARY(name)                                                   \
  template <typename S, int W>                                                  \
  Pack<S, W> name(const Pack<S, W>& a) {                                        \
    return per_lane(a, [](S v) { return static_cast<S>(target_math::name(v)); }); \
  }
// A float pack's float64 lanes wider than a register (8 on AVX2) are computed half by half: GCC
// keeps a vector of two registers in memory between operations (3x slower, perf).
#define FHMC_PACK_TRANSCENDENTAL(name)                                                      \
  template <int W>                                                                         \
  Pack<float, W> name(const Pack<float, W>& a) {                                           \
    if constexpr (kSplitInHalves<typename Pack<double, W>::V> && W % 2 == 0) {             \
      const auto h = halves_of(a.v);                                                       \
      return Pack<float, W>::of(joined<typename Pack<float, W>::V>(                        \
          name(Pack<float, W / 2>::of(h.low)).v, name(Pack<float, W / 2>::of(h.high)).v)); \
    } else {                                                                               \
      return float_transcendentals::name(a);                                               \
    }                                                                                      \
  }                                                                                        \
  template <int W>                                                      \
  Pack<double, W> name(const Pack<double, W>& a) {                      \
    return per_lane(a, [](double v) { return target_math::name(v); });  \
  }
FHMC_PACK_TRANSCENDENTAL(exp)
FHMC_PACK_TRANSCENDENTAL(log)
FHMC_PACK_TRANSCENDENTAL(log1p)
#undef FHMC_PACK_TRANSCENDENTAL
FHMC_PACK_UNARY(expm1)
FHMC_PACK_UNARY(tanh)
FHMC_PACK_UNARY(sin)
FHMC_PACK_UNARY(cos)
FHMC_PACK_UNARY(abs)
FHMC_PACK_UNARY(fabs)
FHMC_PACK_UNARY(lgamma)
FHMC_PACK_UNARY(digamma)
#undef FHMC_PACK_UNARY

template <typename S, int W>
Pack<S, W> softplus(const Pack<S, W>& a) {
  Pack<S, W> slope;
  return target_math::softplus_and_slope(a, &slope);
}
template <typename S, int W>
Pack<S, W> log_sigmoid(const Pack<S, W>& a) {
  Pack<S, W> slope;
  return -target_math::softplus_and_slope(-a, &slope);
}
template <typename S, int W>
Pack<S, W> sigmoid(const Pack<S, W>& a) {
  return target_math::sigmoid_of(a);
}

template <typename S, int W>
Pack<S, W> sqrt(const Pack<S, W>& a) {
  return sqrt_rn(a);
}

// Binary functions: two packs, or a pack and a scalar, in the type C++ gives the scalar call.
#define FHMC_PACK_BINARY_FUNCTION(name)                                              \
  template <class A, class B, if_pack_operands_t<A, B> = 0>                          \
  Pack<common_lane_t<A, B>, pack_width<A, B>()> name(const A& a, const B& b) {       \
    using R = common_lane_t<A, B>;                                                   \
    constexpr int W = pack_width<A, B>();                                            \
    return per_lane(as_pack<R, W>(a), as_pack<R, W>(b),                              \
                    [](R u, R v) { return static_cast<R>(target_math::name(u, v)); }); \
  }
FHMC_PACK_BINARY_FUNCTION(pow)
FHMC_PACK_BINARY_FUNCTION(fmin)
FHMC_PACK_BINARY_FUNCTION(fmax)
FHMC_PACK_BINARY_FUNCTION(log_sum_exp)
#undef FHMC_PACK_BINARY_FUNCTION

// log_sum_exp's value and weights (its derivatives, for the duals of packs), lane by lane through
// the scalar function and its branches.
template <typename S, int W>
Pack<S, W> log_sum_exp_and_weights(const Pack<S, W>& a, const Pack<S, W>& b, Pack<S, W>* weight_a,
                                   Pack<S, W>* weight_b) {
  Pack<S, W> r;
  for (int l = 0; l < W; ++l) {
    S wa, wb;
    r.v[l] = target_math::log_sum_exp_and_weights(a.v[l], b.v[l], &wa, &wb);
    weight_a->v[l] = wa;
    weight_b->v[l] = wb;
  }
  return r;
}

// fma(a, b, c) of packs, or of packs and scalars: the IEEE fused multiply-add in every lane.
// Always inlined, as the operators are: in a large generated density GCC's inliner gave up on it,
// and a call per multiply-add (packs passed through memory) took a third of a TorchModel's time.
template <class A, class B, class C,
          typename std::enable_if<
              (is_pack<A>::value || is_pack<B>::value || is_pack<C>::value) &&
                  (is_pack<A>::value || std::is_arithmetic<A>::value) &&
                  (is_pack<B>::value || std::is_arithmetic<B>::value) &&
                  (is_pack<C>::value || std::is_arithmetic<C>::value),
              int>::type = 0>
FHMC_PACK_INLINE Pack<typename std::common_type<common_lane_t<A, B>,
                                                typename lane_type<C>::type>::type,
                      (pack_width<A, B>() > 0 ? pack_width<A, B>() : lanes_of<C>::value)>
fma(const A& a, const B& b, const C& c) {
  using R = typename std::common_type<common_lane_t<A, B>, typename lane_type<C>::type>::type;
  constexpr int W = pack_width<A, B>() > 0 ? pack_width<A, B>() : lanes_of<C>::value;
  return fma_any(as_pack<R, W>(a), as_pack<R, W>(b), as_pack<R, W>(c));
}

}  // namespace simd
}  // namespace fused_hmc
