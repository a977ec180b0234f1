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
    default: return wide(std::integral_constant<int, kMaxGroup>{});
  }
}

// with_group_shape for choose_tuned_group_shape's shapes: one chunk per thread for groups of 1 to
// 256 threads, four chunks for groups of 128 and 256.
template <typename Launch>
void with_tuned_group_shape(GroupShape shape, Launch&& launch) {
  using One = std::integral_constant<int, 1>;
  if (shape.chunks != 1) {
    using Four = std::integral_constant<int, kMaxChunksPerThread>;
    if (shape.group == 128) return launch(std::integral_constant<int, 128>{}, Four{});
    return launch(std::integral_constant<int, kMaxGroup>{}, Four{});
  }
  switch (shape.group) {
    case 1: return launch(std::integral_constant<int, 1>{}, One{});
    case 2: return launch(std::integral_constant<int, 2>{}, One{});
    case 4: return launch(std::integral_constant<int, 4>{}, One{});
    case 8: return launch(std::integral_constant<int, 8>{}, One{});
    case 16: return launch(std::integral_constant<int, 16>{}, One{});
    case 32: return launch(std::integral_constant<int, 32>{}, One{});
    case 64: return launch(std::integral_constant<int, 64>{}, One{});
    case 128: return launch(std::integral_constant<int, 128>{}, One{});
    default: return launch(std::integral_constant<int, kMaxGroup>{}, One{});
  }
}

// The chains of the launched block (chain_block's choice, at most GroupGeometry<GROUP>'s).
template <int GROUP>
__device__ __forceinline__ int block_chains() {
  if constexpr (GROUP > kWarp) return 1;  // a larger group is a block alone
  return static_cast<int>(blockDim.x) / GROUP;
}

// The chain's sum of chunk partials in the canonical order of math/chunk_sum.h: part[c] is the
// partial of chunk lane + c * GROUP (zero for chunks past the end). Lane butterflies with rising
// offsets build the tree over the low chunk-index bits, warps (for groups above a warp) the next
// bits, a thread's chunks the highest. Every thread of the group gets the root.
template <int GROUP, int CHUNKS, typename T>
__device__ __forceinline__ T group_chunk_sum(T (&part)[CHUNKS]) {
  constexpr int kLanes = GROUP < kWarp ? GROUP : kWarp;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
    for (int offset = 1; offset < kLanes; offset *= 2) {
      part[c] += __shfl_xor_sync(0xffffffffu, part[c], offset, kLanes);
    }
  }
  if constexpr (GROUP > kWarp) {
    constexpr int kWarps = GROUP / kWarp;
    __shared__ T warp_parts[CHUNKS][kWarps];
    if (threadIdx.x % kWarp == 0) {
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) warp_parts[c][threadIdx.x / kWarp] = part[c];
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      T w[kWarps];
#pragma unroll
      for (int i = 0; i < kWarps; ++i) w[i] = warp_parts[c][i];
#pragma unroll
      for (int stride = 1; stride < kWarps; stride *= 2) {
#pragma unroll
        for (int i = 0; i + stride < kWarps; i += 2 * stride) w[i] += w[i + stride];
      }
      part[c] = w[0];
    }
    __syncthreads();  // the slots may be reused by the next call
  }
#pragma unroll
  for (int stride = 1; stride < CHUNKS; stride *= 2) {
#pragma unroll
    for (int c = 0; c + stride < CHUNKS; c += 2 * stride) part[c] += part[c + stride];
  }
  return part[0];
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
