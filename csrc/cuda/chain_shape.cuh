// How a Target's chains map onto CUDA threads (group_shape.h's groups), its shared memory, and the
// dispatch onto the compiled shapes: one place for every chain kernel (sampling, per-chain and
// pooled warm-up).
#pragma once

#include <cstdint>
#include <type_traits>

#include "../math/chain_params.h"
#include "../math/targets/target.h"
#include "group_shape.h"

namespace fused_hmc {

// Calls launch(std::integral_constant<int, GROUP>, std::integral_constant<int, CHUNKS>) for the
// compiled shape matching `shape` (choose_group_shape's: one chunk per thread for groups of 1 to
// 256 threads, four chunks for groups of 128 and 256).
template <typename Launch>
void with_group_shape(GroupShape shape, Launch&& launch) {
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

// A kPosition target's chain lives in its kLanes lanes (one thread each; their chunks cover the
// compiled dimension; above a warp the chain is a block: group_shape.h's chain_block); the others
// take choose_group_shape's groups.
template <class Target>
constexpr GroupShape position_group_shape() {
  static_assert(Target::kFixedDim > 0, "a kPosition target is compiled for one dimension");
  constexpr int kChunks = int((Target::kFixedDim + 3) / 4);
  return {Target::kLanes, (kChunks + Target::kLanes - 1) / Target::kLanes};
}

template <class Target>
inline GroupShape chain_group_shape(int64_t dim) {
  if constexpr (Target::kForce == TargetForce::kPosition) return position_group_shape<Target>();
  return choose_group_shape(dim);
}

template <class Target, typename Launch>
void with_chain_shape(int64_t dim, Launch&& launch) {
  if constexpr (Target::kForce == TargetForce::kPosition) {
    constexpr GroupShape kShape = position_group_shape<Target>();
    launch(std::integral_constant<int, kShape.group>{},
           std::integral_constant<int, kShape.chunks>{});
  } else if constexpr (Target::kMaxDim > 0 && Target::kMaxDim <= 4 * kMaxGroup) {
    // Its dims fit one chunk per thread: only those shapes are compiled.
    with_group_shape(choose_group_shape(dim), [&](auto group, auto chunks) {
      if constexpr (decltype(chunks)::value == 1) launch(group, chunks);
    });
  } else {
    with_group_shape(choose_group_shape(dim), launch);
  }
}

// The block of a launch over the batch's chains (group_shape.h's chain_block).
template <class Target, typename scalar_t>
inline ChainBlock chain_launch_block(const ChainBatch<scalar_t>& c) {
  return chain_block(chain_group_shape<Target>(c.dim).group, c.batch, c.sm_count);
}

// The chains' shared memory: a kRow target's position vector of each chain of a block; a
// kPosition target on block lanes (one chain a block) its exchange of the position and the warps'
// sums (block_lanes_shared_scalars).
template <class Target>
inline size_t target_shared_bytes(int64_t dim, int chains) {
  constexpr size_t kScalar = sizeof(typename Target::Scalar);
  if constexpr (Target::kForce == TargetForce::kPosition) {
    return static_cast<size_t>(block_lanes_shared_scalars(Target::kFixedDim, Target::kLanes)) *
           kScalar;
  } else if constexpr (Target::kForce == TargetForce::kRow) {
    return static_cast<size_t>(chains) * static_cast<size_t>(dim) * kScalar;
  } else {
    return 0;
  }
}

}  // namespace fused_hmc
