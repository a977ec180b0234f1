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
// Each thread keeps its chunks of state (and in the sample op its Welford moments) in registers; above
// 256 threads per chain a block could not hold them without spilling.
static_assert(kMaxCudaDim == int64_t{4} * kMaxGroup * kMaxChunksPerThread, "math/limits.h");

// A launch's block: groups of up to a warp share a block of up to kThreadsPerSmallGroupBlock
// threads, a larger group is a block alone.
struct ChainBlock {
  int threads;
  int chains;
};

constexpr ChainBlock largest_chain_block(int group) {
  constexpr int kShared = kThreadsPerSmallGroupBlock;
  return group <= kWarp ? ChainBlock{kShared, kShared / group} : ChainBlock{group, 1};
}

// The largest block of GROUP's kernels: their __launch_bounds__ and static shared arrays.
template <int GROUP>
struct GroupGeometry {
  static constexpr int kThreads = largest_chain_block(GROUP).threads;
  static constexpr int kChainsPerBlock = largest_chain_block(GROUP).chains;
};

// The block for `batch` chains of `group` threads on a device of `sm_count` SMs: the largest,
// halved (down to one warp) while the batch would leave SMs without a block. 4096 one-thread
// chains take 128 blocks of 32, not 16 of 256. Chains never depend on their block: its
// reductions stay within a chain's group, and the pooled warm-up's tiles (a block's chains, a
// power of two) are subtrees of the canonical pairwise sum over chains at any size.
inline ChainBlock chain_block(int group, int64_t batch, int sm_count) {
  ChainBlock block = largest_chain_block(group);
  while (block.chains > 1 && block.threads > kWarp &&
         (batch + block.chains - 1) / block.chains < sm_count) {
    block = {block.threads / 2, block.chains / 2};
  }
  return block;
}

// The shared memory (in scalars) of a kPosition chain on block lanes (lane_group.cuh's
// block_share_forces, lanes > kWarp): its [dim] position, then each warp's log p and [dim]
// gradient. 0 for lanes of one warp (shuffles only).
constexpr int64_t block_lanes_shared_scalars(int64_t dim, int lanes) {
  return lanes <= kWarp ? 0 : dim + (lanes / kWarp) * (dim + 1);
}

// A chain's group: GROUP threads, each holding CHUNKS chunks.
struct GroupShape {
  int group;
  int chunks;
};

inline int next_pow2(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

// The shape of every chain kernel and of the transition op's. A transition keeps six values per
// coordinate (state, inverse mass, position, momentum, initial momentum and force), so a thread
// takes one chunk for as long as a group of up to 256 threads covers the row (d <= 1024), and four
// chunks above. (Users' kPosition targets take their own lanes: chain_shape.cuh.)
inline GroupShape choose_group_shape(int64_t dim) {
  const int64_t chunks = (dim + 3) / 4;
  if (chunks <= kMaxGroup) return {next_pow2(chunks), 1};
  return {next_pow2((chunks + kMaxChunksPerThread - 1) / kMaxChunksPerThread), kMaxChunksPerThread};
}

}  // namespace fused_hmc
