// Device side of the chain groups (group_shape.h): the compiled shapes, and the group's reductions.
// Every reduction has a fixed order, so results are deterministic.
#pragma once

#include <cstdint>
#include <type_traits>

#include "group_shape.h"

namespace fused_hmc {

// Calls launch(std::integral_constant<int, GROUP>, std::integral_constant<int, CHUNKS>) for the
// compiled shape matching `shape`.
template <typename Launch>
void with_group_shape(GroupShape shape, Launch&& launch) {
  auto go = [&](auto group) {
    if (shape.chunks == 1) return launch(group, std::integral_constant<int, 1>{});
    return launch(group, std::integral_constant<int, kMaxChunksPerThread>{});
  };
  switch (shape.group) {
    case 1: return go(std::integral_constant<int, 1>{});
    case 2: return go(std::integral_constant<int, 2>{});
    case 4: return go(std::integral_constant<int, 4>{});
    case 8: return go(std::integral_constant<int, 8>{});
    case 16: return go(std::integral_constant<int, 16>{});
    case 32: return go(std::integral_constant<int, 32>{});
  }
  // Groups above a warp only come with the wide shape (dims above 32 chunks).
  auto wide = [&](auto group) {
    return launch(group, std::integral_constant<int, kMaxChunksPerThread>{});
  };
  switch (shape.group) {
    case 64: return wide(std::integral_constant<int, 64>{});
    case 128: return wide(std::integral_constant<int, 128>{});
    case 256: return wide(std::integral_constant<int, 256>{});
    default: return wide(std::integral_constant<int, kMaxGroup>{});
  }
}

// Sum of `v` over the GROUP threads of a chain, returned to every one of them.
template <int GROUP, typename T>
__device__ __forceinline__ T group_sum(T v) {
#pragma unroll
  for (int offset = (GROUP < kWarp ? GROUP : kWarp) / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset, GROUP < kWarp ? GROUP : kWarp);
  }
  if constexpr (GROUP > kWarp) {
    __shared__ T warp_sums[GROUP / kWarp];
    const int warp = threadIdx.x / kWarp;
    if (threadIdx.x % kWarp == 0) warp_sums[warp] = v;
    __syncthreads();
    v = warp_sums[0];
#pragma unroll
    for (int w = 1; w < GROUP / kWarp; ++w) v += warp_sums[w];
    __syncthreads();  // the slots may be reused by the next call
  }
  return v;
}

// Lane 0's value of `v`, handed to every thread of the chain's group.
template <int GROUP, typename T>
__device__ __forceinline__ T group_broadcast(T v) {
  if constexpr (GROUP <= kWarp) {
    return __shfl_sync(0xffffffffu, v, 0, GROUP);
  } else {
    __shared__ T shared;
    if (threadIdx.x == 0) shared = v;
    __syncthreads();
    const T out = shared;
    __syncthreads();  // the slot may be reused by the next call
    return out;
  }
}

}  // namespace fused_hmc
