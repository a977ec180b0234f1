// How a batch of chains maps onto CUDA threads (host-side logic, safe for g++ and nvcc).
//
// A group of GROUP threads owns one chain, each thread CHUNKS chunks of 4 consecutive coordinates
// (chunk = lane + c * GROUP). Groups of up to 32 threads live inside a warp and reduce with
// shuffles; larger groups are a whole block and reduce through shared memory.
#pragma once

#include <cstdint>

#include "../math/limits.h"

namespace fused_hmc {

constexpr int kWarp = 32;
constexpr int kThreadsPerSmallGroupBlock = 256;
constexpr int kMaxGroup = 256;
constexpr int kMaxChunksPerThread = 4;
// Each thread keeps its chunks of state (and in run_chains its Welford moments) in registers; above
// 256 threads per chain a block could not hold them without spilling.
static_assert(kMaxCudaDim == int64_t{4} * kMaxGroup * kMaxChunksPerThread, "math/limits.h");

template <int GROUP>
struct GroupGeometry {
  static constexpr int kThreads = GROUP <= kWarp ? kThreadsPerSmallGroupBlock : GROUP;
  static constexpr int kChainsPerBlock = kThreads / GROUP;
};

// The group shape for a dimension: one chunk per thread (the most threads, the shortest path per
// transition) up to 32 chunks, four chunks per thread above. Measured on the H200 at 1,048,576
// chains x 64, four chunks per thread was no faster (0.364 vs 0.38 ms per transition) and in the
// persistent kernel slower (0.69 vs 0.52 ms: its registers halve occupancy), so dim alone decides.
struct GroupShape {
  int group;
  int chunks;
};

inline int next_pow2(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

inline GroupShape choose_group_shape(int64_t dim) {
  const int64_t chunks = (dim + 3) / 4;
  if (chunks <= kWarp) return {next_pow2(chunks), 1};
  return {next_pow2((chunks + kMaxChunksPerThread - 1) / kMaxChunksPerThread), kMaxChunksPerThread};
}

// The tuned samplers keep six values per coordinate through a transition (state, inverse mass,
// position, momentum, initial momentum and force), so they give each thread one chunk for as long
// as a group of up to 256 threads covers the row (d <= 1024), and four chunks above.
inline GroupShape choose_tuned_group_shape(int64_t dim) {
  const int64_t chunks = (dim + 3) / 4;
  if (chunks <= kMaxGroup) return {next_pow2(chunks), 1};
  return {next_pow2((chunks + kMaxChunksPerThread - 1) / kMaxChunksPerThread), kMaxChunksPerThread};
}

}  // namespace fused_hmc
