// The CUDA Group policy of math/hmc/transition.h: a chain's group of GROUP threads, each holding
// CHUNKS chunks of 4 coordinates in registers (chunk lane + c * GROUP), over any Target
// (math/targets/target.h):
//   kCoordinate  each thread forms its own coordinates' forces;
//   kRow         (a dense Gaussian) the group writes the position to `x_shared` (this chain's [dim]
//                of shared memory) and synchronises the block around every force evaluation; every
//                thread of a block takes the same branches and reaches the same barriers, including
//                the threads of chains past the batch;
//   kPosition    (users' models) the target's kLanes threads (GROUP): with one, the thread holds
//                the whole chain and hands the target its position as one array; with up to a
//                warp, each lane gathers the whole position by shuffles, evaluates its share of the
//                data's rows (math/targets/lane_rows.h) and the lanes add their shares by a
//                butterfly; with more (block lanes: the chain is a block), the position and the
//                warps' sums pass through shared memory.
// The chain kernels' other per-group pieces live here too: the row loads and stores, the register
// inverse mass (the lane group's Mass policy), uniforms formed ahead, the carried force.
#pragma once

#include <cstdint>

#include "../math/hmc/mass_matrix.h"
#include "../math/hmc/metropolis.h"
#include "../math/hmc/transition.h"
#include "../math/rng/noise_streams.h"
#include "../math/stats/chain_statistics.h"
#include "../math/stats/chunk_sum.h"
#include "../math/targets/lane_rows.h"
#include "../math/targets/target.h"
#include "chunk_io.cuh"
#include "group_shape.h"

namespace fused_hmc {

// The chains of the launched block (chain_block's choice, at most GroupGeometry<GROUP>'s).
template <int GROUP>
__device__ __forceinline__ int block_chains() {
  if constexpr (GROUP > kWarp) return 1;  // a larger group is a block alone
  return static_cast<int>(blockDim.x) / GROUP;
}

// The chain's sum of chunk partials in the canonical order of math/stats/chunk_sum.h: part[c] is
// the partial of chunk lane + c * GROUP (zero for chunks past the end). Lane butterflies with
// rising offsets build the tree over the low chunk-index bits, warps (for groups above a warp) the
// next bits, a thread's chunks the highest. Every thread of the group gets the root.
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

// The lanes of this thread's chain within its warp (GROUP <= 32).
template <int GROUP>
__device__ __forceinline__ unsigned group_lanes() {
  static_assert(GROUP <= kWarp, "a chain's lanes share one warp");
  return (GROUP == kWarp ? 0xffffffffu : (1u << (GROUP % kWarp)) - 1u)
         << (threadIdx.x % kWarp / GROUP * GROUP);
}

// A barrier of the chain's group, which also orders its global-memory writes before its reads.
template <int GROUP>
__device__ __forceinline__ void group_sync() {
  if constexpr (GROUP > kWarp) {
    __syncthreads();
  } else if constexpr (GROUP > 1) {
    __syncwarp(group_lanes<GROUP>());
  }
}

// A chain's group as seen by one of its threads.
struct GroupSeat {
  int lane;
  bool live;  // the chain exists (threads of missing chains still take part in barriers)

  __device__ int chunk_start(int c, int group) const {
    return 4 * (lane + c * group);
  }
};

// The block's dynamic shared memory, which the chain kernels size with target_shared_bytes (plus
// their own arrays).
template <typename scalar_t>
__device__ __forceinline__ scalar_t* chain_shared_memory() {
  extern __shared__ __align__(16) unsigned char chain_shared[];
  return reinterpret_cast<scalar_t*>(chain_shared);
}

// One coordinate a thread holds: element e of its chunk c.
struct ChunkIndex {
  int c, e;
};

// A thread's values of its chunks of a row, in registers (every index compile-time once unrolled).
template <typename T, int CHUNKS>
struct Chunks {
  T v[CHUNKS][4];
  __device__ T& operator[](ChunkIndex i) { return v[i.c][i.e]; }
  __device__ const T& operator[](ChunkIndex i) const { return v[i.c][i.e]; }
};

// The thread's chunks of a row of `dim` values (`fill` past the row's end).
template <typename scalar_t, int GROUP, int CHUNKS>
__device__ __forceinline__ void load_group_row(const scalar_t* row, GroupSeat seat, int dim,
                                               bool vectorized, scalar_t fill,
                                               scalar_t (&v)[CHUNKS][4]) {
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int j0 = seat.chunk_start(c, GROUP);
#pragma unroll
    for (int e = 0; e < 4; ++e) v[c][e] = fill;
    if (seat.live && j0 < dim) load_chunk(row, j0, dim, vectorized && j0 + 4 <= dim, v[c]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (j0 + e >= dim) v[c][e] = fill;
    }
  }
}

template <typename scalar_t, int GROUP, int CHUNKS>
__device__ __forceinline__ void store_group_row(scalar_t* row, GroupSeat seat, int dim,
                                                bool vectorized, const scalar_t (&v)[CHUNKS][4]) {
  if (!seat.live) return;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int j0 = seat.chunk_start(c, GROUP);
    if (j0 < dim) store_chunk(row, j0, dim, vectorized, v[c]);
  }
}

// The lane group's Mass policy (math/hmc/transition.h), with what else a transition reads for the
// thread's coordinates: the inverse mass, kept in registers for a whole call, and (for one-chunk
// shapes, where registers are plentiful) its momentum scale, recomputed only when the mass changes,
// and a coordinate target's coefficient, so the leapfrog touches no memory. Shapes of several
// chunks compute them when needed instead. UNIT: the inverse mass is the identity (the chain ops'
// empty inv_mass; the transition op): nothing is loaded, and inverse() is UnitMass, whose products
// the compiler drops.
template <class Target, int CHUNKS, bool UNIT = false>
struct CoordinateCoefficients {
  using scalar_t = typename Target::Scalar;
  static constexpr bool kUnit = UNIT;
  static constexpr bool kCached = CHUNKS == 1 && !UNIT;
  static constexpr bool kCoefficients = Target::kForce == TargetForce::kCoordinate;
  scalar_t inv_mass[CHUNKS][4];
  scalar_t cached_scale[kCached ? CHUNKS : 1][4];
  scalar_t cached_coefficient[CHUNKS == 1 && kCoefficients ? CHUNKS : 1][4];
  int dim;

  template <int GROUP>
  __device__ void load(const Target& target, int64_t dim_, const scalar_t* inv_mass_row,
                       GroupSeat seat) {
    dim = static_cast<int>(dim_);
    if constexpr (!UNIT) {
      load_group_row<scalar_t, GROUP, CHUNKS>(inv_mass_row, seat, dim, false, scalar_t(1),
                                              inv_mass);
    }
    if constexpr (CHUNKS == 1) {
      if constexpr (kCoefficients) {
        const int j0 = seat.chunk_start(0, GROUP);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          cached_coefficient[0][e] =
              seat.live && j0 + e < dim ? target.coefficient(j0 + e) : scalar_t(1);
        }
      }
    }
    update_scale();
  }

  __device__ void update_scale() {
    if constexpr (kCached) {
#pragma unroll
      for (int e = 0; e < 4; ++e) cached_scale[0][e] = momentum_scale(inv_mass[0][e]);
    }
  }

  // The momentum z / sqrt(m_inv) of coordinate i from its normal z.
  __device__ scalar_t momentum(scalar_t z, ChunkIndex i) const {
    if constexpr (UNIT) return z;
    if constexpr (kCached) return mul_rn(z, cached_scale[0][i.e]);
    return mul_rn(z, momentum_scale(inv_mass[i.c][i.e]));
  }

  __device__ auto inverse(ChunkIndex i) const {
    if constexpr (UNIT) {
      return UnitMass{};
    } else {
      return inv_mass[i.c][i.e];
    }
  }

  // f_j at x_j (chunk c, element e of the thread's) of a kCoordinate target.
  __device__ scalar_t local_force(const Target& target, int e, int64_t j, scalar_t x) const {
    if constexpr (CHUNKS == 1) return target.force(x, cached_coefficient[0][e]);
    return target.force(x, j < dim ? target.coefficient(j) : scalar_t(1));
  }
};

// A kPosition target over GROUP > 1 lanes (math/targets/lane_rows.h): every lane of the chain
// gathers the whole position (chunk r + c * GROUP of lane r) by shuffles, evaluates its block of
// log p's partials and their gradient (the fixed tree's lower levels), and the butterfly adds the
// lanes' sums (adjacent lanes first: the tree's upper levels, by tree_add, so the bits are the one
// tree's whatever GROUP), so every lane holds U and the whole gradient and keeps its own chunks'
// forces. The shuffles stay inside the chain's lanes (the chains of a warp may run different
// numbers of leapfrog steps); a missing chain's lanes skip it all alike.
template <class Target, int GROUP, int CHUNKS, typename scalar_t = typename Target::Scalar>
__device__ __forceinline__ scalar_t lane_share_forces(const Target& target, GroupSeat seat,
                                                      const scalar_t (&x)[CHUNKS][4],
                                                      scalar_t (&f)[CHUNKS][4]) {
  static_assert(GROUP <= kWarp, "a chain's lanes share one warp");
  constexpr int kDim = static_cast<int>(Target::kFixedDim);
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
    for (int e = 0; e < 4; ++e) f[c][e] = scalar_t(0);
  }
  if (!seat.live) return scalar_t(0);
  const unsigned lanes = group_lanes<GROUP>();
  // Coordinate j is element j % 4 of chunk j / 4, which lane (j / 4) % GROUP holds as its chunk
  // (j / 4) / GROUP: all compile-time indices, so the arrays stay in registers.
  scalar_t position[kDim], gradient[kDim];
#pragma unroll
  for (int j = 0; j < kDim; ++j) {
    position[j] = __shfl_sync(lanes, x[j / 4 / GROUP][j % 4], j / 4 % GROUP, GROUP);
  }
  scalar_t log_p = target.lane_log_density_and_gradient(position, gradient, seat.lane);
#pragma unroll
  for (int offset = 1; offset < GROUP; offset *= 2) {
    log_p = tree_add(log_p, __shfl_xor_sync(lanes, log_p, offset, GROUP));
#pragma unroll
    for (int j = 0; j < kDim; ++j) {
      gradient[j] = tree_add(gradient[j], __shfl_xor_sync(lanes, gradient[j], offset, GROUP));
    }
  }
#pragma unroll
  for (int j = 0; j < kDim; ++j) {
    if (j / 4 % GROUP == seat.lane) f[j / 4 / GROUP][j % 4] = -gradient[j];
  }
  return -log_p;
}

// The thread's coordinates of a chain's row (those below dim) written to the shared row `row`.
template <int GROUP, int CHUNKS, typename scalar_t>
__device__ __forceinline__ void write_shared_row(scalar_t* row, GroupSeat seat, int dim,
                                                 const scalar_t (&x)[CHUNKS][4]) {
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int j0 = seat.chunk_start(c, GROUP);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (seat.live && j0 + e < dim) row[j0 + e] = x[c][e];
    }
  }
}

// lane_share_forces for block lanes (GROUP > 32: the block is one chain, so every thread takes
// the same branches and reaches the same barriers). The position passes through `shared`
// (block_lanes_shared_scalars: [kDim] position, then per warp its log p and [kDim] gradient);
// each lane evaluates its block of partials, the butterfly adds a warp's 32 lanes, lane 0 of each
// warp writes the warp's sums and every thread adds the warps' by lane_rows.h's adjacent_tree:
// the lanes' sums by the same tree as the warp path's, so the bits do not depend on GROUP. Two
// barriers per evaluation: the position is read before any warp's sums are written, and the next
// evaluation's position is written after every thread has passed the second barrier, its sums
// after the next first barrier, which every reader of these sums has reached.
template <class Target, int GROUP, int CHUNKS, typename scalar_t = typename Target::Scalar>
__device__ __forceinline__ scalar_t block_share_forces(const Target& target, GroupSeat seat,
                                                       const scalar_t (&x)[CHUNKS][4],
                                                       scalar_t (&f)[CHUNKS][4],
                                                       scalar_t* shared) {
  static_assert(GROUP > kWarp && GROUP % kWarp == 0, "block lanes are whole warps");
  constexpr int kDim = static_cast<int>(Target::kFixedDim);
  constexpr int kWarps = GROUP / kWarp, kWidth = kDim + 1;
  static_assert(block_lanes_shared_scalars(kDim, GROUP) == kDim + kWarps * kWidth,
                "the layout target_shared_bytes sizes");
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
    for (int e = 0; e < 4; ++e) f[c][e] = scalar_t(0);
  }
  if (!seat.live) return scalar_t(0);  // the whole block alike
  scalar_t* const warp_rows = shared + kDim;
  write_shared_row<GROUP, CHUNKS>(shared, seat, kDim, x);
  __syncthreads();
  scalar_t position[kDim], gradient[kDim];
#pragma unroll
  for (int j = 0; j < kDim; ++j) position[j] = shared[j];
  scalar_t log_p = target.lane_log_density_and_gradient(position, gradient, seat.lane);
#pragma unroll
  for (int offset = 1; offset < kWarp; offset *= 2) {
    log_p = tree_add(log_p, __shfl_xor_sync(0xffffffffu, log_p, offset));
#pragma unroll
    for (int j = 0; j < kDim; ++j) {
      gradient[j] = tree_add(gradient[j], __shfl_xor_sync(0xffffffffu, gradient[j], offset));
    }
  }
  if (seat.lane % kWarp == 0) {
    scalar_t* const row = warp_rows + (seat.lane / kWarp) * kWidth;
    row[0] = log_p;
#pragma unroll
    for (int j = 0; j < kDim; ++j) row[1 + j] = gradient[j];
  }
  __syncthreads();
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int j0 = seat.chunk_start(c, GROUP);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (j0 + e < kDim) f[c][e] = -adjacent_tree<kWarps>(warp_rows + 1 + j0 + e, kWidth);
    }
  }
  return -adjacent_tree<kWarps>(warp_rows, kWidth);
}

// f = force(x) for the thread's coordinates; returns U(x) for a kPosition target (0 otherwise).
template <class Target, int GROUP, int CHUNKS, class Coefficients,
          typename scalar_t = typename Target::Scalar>
__device__ __forceinline__ scalar_t group_forces(const Target& target, GroupSeat seat,
                                                 const Coefficients& k,
                                                 const scalar_t (&x)[CHUNKS][4],
                                                 scalar_t (&f)[CHUNKS][4], scalar_t* x_shared) {
  if constexpr (Target::kForce == TargetForce::kCoordinate) {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int j0 = seat.chunk_start(c, GROUP);
#pragma unroll
      for (int e = 0; e < 4; ++e) f[c][e] = k.local_force(target, e, j0 + e, x[c][e]);
    }
    return scalar_t(0);
  } else if constexpr (Target::kForce == TargetForce::kPosition) {
    static_assert(GROUP == Target::kLanes, "a kPosition target's chain lives in its kLanes lanes");
    if constexpr (GROUP == 1) {
      scalar_t position[4 * CHUNKS], gradient[4 * CHUNKS];
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) position[4 * c + e] = x[c][e];
      }
      scalar_t u = scalar_t(0);
      if (seat.live) u = -target.log_density_and_gradient(position, gradient);
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          f[c][e] = seat.live && 4 * c + e < k.dim ? -gradient[4 * c + e] : scalar_t(0);
        }
      }
      return u;
    } else if constexpr (GROUP <= kWarp) {
      return lane_share_forces<Target, GROUP, CHUNKS>(target, seat, x, f);
    } else {
      return block_share_forces<Target, GROUP, CHUNKS>(target, seat, x, f, x_shared);
    }
  } else {
    __syncthreads();  // every thread has read the previous x
    write_shared_row<GROUP, CHUNKS>(x_shared, seat, k.dim, x);
    __syncthreads();
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int j0 = seat.chunk_start(c, GROUP);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (seat.live && j0 + e < k.dim) f[c][e] = target.row_force(j0 + e, x_shared);
      }
    }
    return scalar_t(0);
  }
}

// The thread's chunk of the target's shift (zeros for a target that is not shifted).
template <class Target, typename scalar_t = typename Target::Scalar>
__device__ __forceinline__ void load_shift(const Target& target, int j0, int dim,
                                           scalar_t (&out)[4]) {
  if constexpr (Target::kShifted) {
    // 16 bytes at once where the chunk is whole and aligned (the shift is a [dim] tensor whose
    // storage may start anywhere), else element by element.
    const scalar_t* shift = target.shift();
    const bool aligned = (reinterpret_cast<uintptr_t>(shift + j0) & 15) == 0;
    load_chunk(shift, j0, dim, aligned && j0 + 4 <= dim, out);
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = scalar_t(0);
  }
}

// A chain's TransitionUniforms (math/hmc/transition.h) formed ahead: lane i of every window of
// kDepth = min(GROUP, 32) lanes forms transition t0 + i's, and each transition every lane of the
// group reads its own by a shuffle. So the Philox block and the float64 log that one lane formed
// every transition (while the warp's other lanes waited) are formed once per kDepth transitions;
// the words and operations are the same, and so are the bits. Groups above a warp form them in
// each warp (no cross-warp exchange). Call next() with consecutive transitions, from every thread.
template <int GROUP>
class UniformsAhead {
 public:
  static constexpr int kDepth = GROUP < kWarp ? GROUP : kWarp;

  // `jittered` / `trajectory`: whether the step-size / trajectory jitter is used (else 0).
  __device__ TransitionUniforms next(const PhiloxStream& stream, uint64_t chain,
                                     uint64_t transition, bool jittered, bool trajectory) {
    if constexpr (kDepth == 1) {
      return transition_uniforms(stream, chain, transition);
    } else {
      if (used_ == kDepth) {
        ahead_ = transition_uniforms(stream, chain, transition + threadIdx.x % kDepth);
        used_ = 0;
      }
      const int source = used_++;
      TransitionUniforms out;
      out.log_uniform = __shfl_sync(0xffffffffu, ahead_.log_uniform, source, kDepth);
      out.jitter_uniform =
          jittered ? __shfl_sync(0xffffffffu, ahead_.jitter_uniform, source, kDepth) : 0.0f;
      out.trajectory_uniform =
          trajectory ? __shfl_sync(0xffffffffu, ahead_.trajectory_uniform, source, kDepth) : 0.0f;
      return out;
    }
  }

 private:
  TransitionUniforms ahead_{};
  int used_ = kDepth;
};

// The thread's chunks of the force, and the potential, at its chain's current state, carried
// from one transition to the next for a target that carries_force (math/targets/target.h; the CPU's
// ForceCarry): in registers across a persistent kernel's transitions, or loaded and stored by a
// kernel whose chains change between transitions (pooled_warmup.cuh). Empty for the others.
template <class Target, int CHUNKS, typename scalar_t = typename Target::Scalar>
struct GroupForceCarry {
  static constexpr bool kCarries = carries_force<Target>();
  Chunks<scalar_t, kCarries ? CHUNKS : 1> f = {};
  scalar_t u = scalar_t(0);
  bool valid = false;
  __device__ constexpr bool held() const { return kCarries; }
  __device__ scalar_t& potential() { return u; }
};

// The most of `steps` over the block (every thread calls it).
__device__ __forceinline__ int block_max_steps(int steps) {
  __shared__ int most;
  if (threadIdx.x == 0) most = 0;
  __syncthreads();
  atomicMax(&most, steps);
  __syncthreads();
  const int out = most;
  __syncthreads();  // the slot may be reused by the next call
  return out;
}

// The chain statistics' sums of a group of GROUP threads (math/stats/chain_statistics.h's Sum):
// a statistic's shares added in transition order, and an AcceptProbability's exps formed for kDepth
// transitions at once: lane i of a window keeps transition t0 + i's log_alpha, and once the window
// is full each lane takes its exp and every lane adds the window's in order (the bits of one lane
// adding each in turn). Call add() and flush() from every thread; the holder's total counts its
// start.
template <int GROUP, typename scalar_t>
struct LaneSums {
  template <typename T>
  class Sum {
   public:
    static constexpr int kDepth = UniformsAhead<GROUP>::kDepth;

    __device__ explicit Sum(T start = T(0)) : sum_(start) {}

    template <typename V>
    __device__ void add(const V& v) {
      sum_ += statistic_value(v);
    }
    __device__ void add(const AcceptProbability<scalar_t>& v) {
      if constexpr (kDepth == 1) {
        sum_ += statistic_value(v);
      } else {
        if (static_cast<int>(threadIdx.x % kDepth) == held_) mine_ = v.log_alpha;
        if (++held_ == kDepth) flush_window(kDepth);
      }
    }

    __device__ void flush() {
      if (held_ > 0) flush_window(held_);
    }
    __device__ T total() const { return sum_; }

   private:
    __device__ void flush_window(int count) {
      const T p = static_cast<T>(AcceptProbability<scalar_t>{mine_}.value());
#pragma unroll
      for (int i = 0; i < kDepth; ++i) {
        if (i < count) sum_ += __shfl_sync(0xffffffffu, p, i, kDepth);
      }
      held_ = 0;
    }

    T sum_;
    scalar_t mine_ = scalar_t(0);
    int held_ = 0;
  };
};

// The Group policy: the chain's group as seen by one of its threads (seat), its row's dimension,
// and for a kRow target the chain's position vector in shared memory (for block lanes, the
// block's exchange: block_share_forces).
template <typename scalar_t, int GROUP, int CHUNKS>
class LaneGroup {
 public:
  template <typename T>
  using Row = Chunks<T, CHUNKS>;
  template <class Target>
  using Carry = GroupForceCarry<Target, CHUNKS>;
  // Coordinate targets on shapes of several chunks recompute the forces at x0 and x for the energy
  // rather than hold them through the trajectory (fewer live registers).
  template <class Target>
  static constexpr bool kRecomputesForces =
      CHUNKS > 1 && Target::kForce == TargetForce::kCoordinate;
  // A kRow target's chains loop their block's most steps, the early finishers holding still
  // (loop_steps); no other chain ever does, and telling the compiler so keeps the leapfrog loop
  // free of a per-step branch.
  template <class Target>
  static constexpr bool kMayHoldStill = Target::kForce == TargetForce::kRow;

  struct Work {
    Row<scalar_t> p0, f0, x, p, f;
  };

  // Chunk c of the thread, from coordinate j0 < dim; each() visits its coordinates below dim.
  struct Chunk {
    int c;
    int j0, dim;
    template <class F>
    __device__ void each(F&& f) const {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (j0 + e < dim) f(ChunkIndex{c, e}, j0 + e);
      }
    }
  };

  // The chunks' partials, summed by group_chunk_sum in chunk_sum.h's order (zeros for the chunks
  // past the row's end).
  template <typename T>
  struct ChunkSum {
    T part[CHUNKS] = {};
    __device__ void add(const Chunk& chunk, T partial) { part[chunk.c] = partial; }
    __device__ T total() { return group_chunk_sum<GROUP>(part); }
  };

  __device__ LaneGroup(GroupSeat seat, int64_t dim, scalar_t* x_shared)
      : seat_(seat), dim_(static_cast<int>(dim)), x_shared_(x_shared) {}

  __device__ bool live() const { return seat_.live; }
  // Zeros: past the row's end and in missing chains they keep the unused lanes' arithmetic finite.
  template <typename T>
  __device__ Work work() const {
    return Work{};
  }
  // The thread's chunks of the target's shift (zeros for a target that is not shifted).
  template <class Target>
  __device__ Row<scalar_t> shift(const Target& target) const {
    Row<scalar_t> mu{};
    each_chunk([&](const Chunk& chunk) { load_shift(target, chunk.j0, dim_, mu.v[chunk.c]); });
    return mu;
  }
  // Every coordinate slot of the thread, past the row's end and in missing chains too.
  template <class F>
  __device__ void each(F&& f) const {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) f(ChunkIndex{c, e});
    }
  }
  // The thread's chunks inside the row, of a chain that exists.
  template <class F>
  __device__ void each_chunk(F&& f) const {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int j0 = seat_.chunk_start(c, GROUP);
      if (seat_.live && j0 < dim_) f(Chunk{c, j0, dim_});
    }
  }
  template <class Noise>
  __device__ void draw_momentum(const Noise& noise, Row<scalar_t>& z) const {
    each_chunk([&](const Chunk& chunk) { noise.draw(chunk.j0, dim_, z.v[chunk.c]); });
  }
  template <class Target, class Mass>
  __device__ scalar_t forces(const Target& target, const Mass& mass, const Row<scalar_t>& x,
                             Row<scalar_t>& f) const {
    return group_forces<Target, GROUP, CHUNKS>(target, seat_, mass, x.v, f.v, x_shared_);
  }
  template <class Target, class Mass>
  __device__ scalar_t local_force(const Target& target, const Mass& mass, ChunkIndex i, int64_t j,
                                  scalar_t x) const {
    return mass.local_force(target, i.e, j, x);
  }
  // Chains of one warp may run different numbers of steps (they diverge); a kRow target's chains,
  // which meet at block barriers inside the force, all loop the block's most steps.
  template <class Target>
  __device__ int loop_steps(int leapfrog_steps, bool trajectory) const {
    if constexpr (Target::kForce == TargetForce::kRow) {
      if (trajectory) return block_max_steps(seat_.live ? leapfrog_steps : 1);
    }
    return leapfrog_steps;
  }
  template <typename T>
  __device__ ChunkSum<T> chunk_sum() const {
    return {};
  }

 private:
  GroupSeat seat_;
  int dim_;  // at most kMaxCudaDim: 32-bit coordinate indices
  scalar_t* x_shared_;
};

}  // namespace fused_hmc
