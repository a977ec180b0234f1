// The functions docs/TARGETS.md promises to user log densities (math/fp/scalar_functions.h), for
// packs of chains (pack.h): each lane through the scalar function, so a model's value and gradient
// in lane l are the bits the scalar build computes for chain l. Found by argument-dependent lookup
// from the user's namespace, beside the scalar and dual overloads.
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
FHMC_PACK_UNARY(exp)
FHMC_PACK_UNARY(log)
FHMC_PACK_UNARY(log1p)
FHMC_PACK_UNARY(expm1)
FHMC_PACK_UNARY(tanh)
FHMC_PACK_UNARY(sin)
FHMC_PACK_UNARY(cos)
FHMC_PACK_UNARY(abs)
FHMC_PACK_UNARY(fabs)
FHMC_PACK_UNARY(lgamma)
FHMC_PACK_UNARY(digamma)
FHMC_PACK_UNARY(softplus)
FHMC_PACK_UNARY(log_sigmoid)
FHMC_PACK_UNARY(sigmoid)
#undef FHMC_PACK_UNARY

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

}  // namespace simd
}  // namespace fused_hmc
