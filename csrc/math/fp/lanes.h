// The lane-generic vocabulary of the chain math: math/hmc/transition.h runs one chain per
// instantiation on a scalar type, or several chains at once on the CPU build's Pack
// (cpu/simd/pack.h), whose comparisons give a lane mask. A choice on a chain's value is written
//   where(mask, a, b)   lane by lane (for a scalar, mask ? a : b),
//   any_lane(mask)      whether any chain needs a piece of work at all (for a scalar, mask),
//   bit_cast_lanes<To>(v) each lane's bits as another type of their width,
// and lane_traits<T> names T's mask, its integer of the same lanes, and its lane count (1).
#pragma once

#include <cstring>

#include "host_device.h"

namespace fused_hmc {

template <typename T>
struct lane_traits {
  using mask = bool;
  using integer = int;
  template <typename U>
  using with_lane = U;
  static constexpr int kLanes = 1;
};

template <typename T>
using lane_mask_t = typename lane_traits<T>::mask;
template <typename T>
using lane_int_t = typename lane_traits<T>::integer;
// T's lanes as float64 (a chain's float64 accumulators beside its float32 or float64 values).
template <typename T>
using lane_double_t = typename lane_traits<T>::template with_lane<double>;

template <typename T>
FHMC_HD T where(bool m, T a, T b) {
  return m ? a : b;
}
FHMC_HD bool any_lane(bool m) { return m; }
template <typename To, typename From>
FHMC_HD To bit_cast_lanes(From v) {
  static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the width");
  To r;
  std::memcpy(&r, &v, sizeof r);
  return r;
}

}  // namespace fused_hmc
