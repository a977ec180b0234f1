// Host harness over csrc/math/targets/lane_rows.h (tests/unit/test_block_lanes.py, built by g++
// and loaded with ctypes): log p from P given partials, as a chain on G lanes forms it. Lane l
// sums its partials [l P / G, (l + 1) P / G) by sum_partials; the lanes' sums are then added as
// the CUDA lane group adds them (cuda/lane_group.cuh): a butterfly of rising xor offsets within
// each warp of min(G, 32) lanes (every lane adds its partner's value: a + b, which IEEE addition
// makes b + a), then for G > 32 the warps' sums by adjacent_tree. G = 1 is the CPU's whole tree.
#include <cstdint>

#include "math/targets/lane_rows.h"

namespace {

template <typename S, int P, int G>
S lanes_sum(const S* partials) {
  constexpr int kWarp = 32, kWarpLanes = G < kWarp ? G : kWarp;
  S lane[G];
  for (int l = 0; l < G; ++l) {
    lane[l] = fused_hmc::sum_partials<P / G, P, S>(
        [partials](fused_hmc::Rows rows) {
          // A share must be asked for the rows first, first + P, ...
          return rows.step == P ? partials[rows.first] : S(0) / S(0);
        },
        l * (P / G));
  }
  for (int offset = 1; offset < kWarpLanes; offset *= 2) {
    S next[G];
    for (int l = 0; l < G; ++l) next[l] = fused_hmc::tree_add(lane[l], lane[l ^ offset]);
    for (int l = 0; l < G; ++l) lane[l] = next[l];
  }
  if constexpr (G > kWarp) return fused_hmc::adjacent_tree<G / kWarp>(lane, kWarp);
  return lane[0];
}

template <typename S, int P, int G = 1>
S dispatch(const S* partials, int lanes) {
  if constexpr (G > P) {
    return S(0) / S(0);
  } else {
    if (lanes == G) return lanes_sum<S, P, G>(partials);
    return dispatch<S, P, G * 2>(partials, lanes);
  }
}

template <typename S>
S lanes_sum_of(const S* partials, int partial_count, int lanes) {
  if (partial_count == 32) return dispatch<S, 32>(partials, lanes);
  if (partial_count == 256) return dispatch<S, 256>(partials, lanes);
  return S(0) / S(0);
}

}  // namespace

extern "C" float fhmc_lanes_sum_f32(const float* partials, int partial_count, int lanes) {
  return lanes_sum_of(partials, partial_count, lanes);
}

extern "C" double fhmc_lanes_sum_f64(const double* partials, int partial_count, int lanes) {
  return lanes_sum_of(partials, partial_count, lanes);
}
