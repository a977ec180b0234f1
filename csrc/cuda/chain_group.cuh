// How a batch of chains maps onto CUDA threads: a group of GROUP threads owns one chain, each thread
// CHUNKS chunks of 4 consecutive coordinates (chunk = lane + c * GROUP). Groups of up to 32 threads
// live inside a warp and reduce with shuffles; larger groups are a whole block and reduce through
// shared memory. Every reduction has a fixed order, so results are deterministic.
#pragma once

#include <cstdint>
#include <type_traits>

namespace fused_hmc {

constexpr int kWarp = 32;
constexpr int kThreadsPerSmallGroupBlock = 256;
constexpr int kMaxGroup = 512;
constexpr int kMaxChunksPerThread = 4;
constexpr int64_t kMaxCudaDim = int64_t{4} * kMaxGroup * kMaxChunksPerThread;  // 8192

template <int GROUP>
struct GroupGeometry {
  static constexpr int kThreads = GROUP <= kWarp ? kThreadsPerSmallGroupBlock : GROUP;
  static constexpr int kChainsPerBlock = kThreads / GROUP;
};

// The group shape for a batch: one chunk per thread (most threads, least latency) while the batch
// fits in a few waves of resident threads; four chunks per thread (more independent work per
// thread, fewer reductions) once it does not, and always for dims above 32 chunks.
struct GroupShape {
  int group;
  int chunks;
};

inline int next_pow2(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

inline GroupShape choose_group_shape(int64_t dim, int64_t batch, int64_t resident_threads) {
  constexpr int64_t kWavesBeforeWideThreads = 4;
  const int64_t chunks = (dim + 3) / 4;
  const int narrow = next_pow2(chunks);
  if (chunks <= kWarp && batch * narrow <= kWavesBeforeWideThreads * resident_threads) {
    return {narrow, 1};
  }
  return {next_pow2((chunks + kMaxChunksPerThread - 1) / kMaxChunksPerThread), kMaxChunksPerThread};
}

// The shape for a dimension alone, for kernels whose results must not depend on the batch size.
inline GroupShape group_shape_for_dim(int64_t dim) { return choose_group_shape(dim, 0, 0); }

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
