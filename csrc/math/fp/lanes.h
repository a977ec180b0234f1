// The lane-generic vocabulary of the chain math: math/hmc/transition.h runs one chain per
// instantiation on a scalar type, or several chains at once on the CPU build's Pack
// (cpu/simd/pack.h), whose comparisons give a lane mask. A choice on a chain's value is written
//   where(mask, a, b)   lane by lane (for a scalar, mask ? a : b),
//   any_lane(mask)      whether any chain needs a piece of work at all (for a scalar, mask),
// and lane_traits<T> names T's mask, its integer of the same lanes, and its lane count (1).
#pragma once

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

template <typename T>
FHMC_HD T where(bool m, T a, T b) {
  return m ? a : b;
}
FHMC_HD bool any_lane(bool m) { return m; }

}  // namespace fused_hmc
