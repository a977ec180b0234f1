// Device side of the chain kernels: one chain's transition (math/transition.h's canonical
// operations, bit for bit) by the chain's group of GROUP threads, each holding CHUNKS chunks of 4
// coordinates in registers (chunk lane + c * GROUP), over any Target (math/target.h):
//   kCoordinate  each thread forms its own coordinates' forces;
//   kRow         (a dense Gaussian) the group writes the position to `x_shared` (this chain's [dim]
//                of shared memory) and synchronises the block around every force evaluation; every
//                thread of a block takes the same branches and reaches the same barriers, including
//                the threads of chains past the batch;
//   kPosition    (users' models) the target's kLanes threads (GROUP): with one, the thread holds
//                the whole chain and hands the target its position as one array; with more, each
//                lane gathers the whole position by shuffles, evaluates its share of the data's rows
//                (math/lane_rows.h) and the lanes add their shares by a butterfly.
#pragma once

#include <cstdint>

#include "../math/chunk_sum.h"
#include "../math/lane_rows.h"
#include "../math/mass_matrix.h"
#include "../math/noise_streams.h"
#include "../math/philox_transition.h"
#include "../math/target.h"
#include "../math/transition.h"
#include "chain_group.cuh"
#include "chunk_io.cuh"

namespace fused_hmc {

// A chain's group as seen by one of its threads.
struct GroupSeat {
  int lane;
  bool live;  // the chain exists (threads of missing chains still take part in barriers)

  __device__ int64_t chunk_start(int c, int group) const {
    return 4 * static_cast<int64_t>(lane + c * group);
  }
};

// The block's dynamic shared memory, which the chain kernels size with target_shared_bytes (plus
// their own arrays).
template <typename scalar_t>
__device__ __forceinline__ scalar_t* tuned_shared_memory() {
  extern __shared__ __align__(16) unsigned char tuned_shared[];
  return reinterpret_cast<scalar_t*>(tuned_shared);
}

// The thread's chunks of a row of `dim` values (`fill` past the row's end).
template <typename scalar_t, int GROUP, int CHUNKS>
__device__ __forceinline__ void load_group_row(const scalar_t* row, GroupSeat seat, int64_t dim,
                                               bool vectorized, scalar_t fill,
                                               scalar_t (&v)[CHUNKS][4]) {
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = seat.chunk_start(c, GROUP);
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
__device__ __forceinline__ void store_group_row(scalar_t* row, GroupSeat seat, int64_t dim,
                                                bool vectorized, const scalar_t (&v)[CHUNKS][4]) {
  if (!seat.live) return;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = seat.chunk_start(c, GROUP);
    if (j0 < dim) store_chunk(row, j0, dim, vectorized, v[c]);
  }
}

// What a chain's transition reads for the thread's coordinates: the inverse mass, kept in
// registers for a whole call, and (for one-chunk shapes, where registers are plentiful) its
// momentum scale, recomputed only when the mass changes, and a coordinate target's coefficient, so
// the leapfrog touches no memory. Shapes of several chunks compute them when needed instead.
// UNIT: the inverse mass is the identity (the run op's empty inv_mass): nothing is loaded, and
// mass() is UnitMass, whose products the compiler drops.
template <class Target, int CHUNKS, bool UNIT = false>
struct CoordinateCoefficients {
  using scalar_t = typename Target::Scalar;
  static constexpr bool kUnit = UNIT;
  static constexpr bool kCached = CHUNKS == 1 && !UNIT;
  static constexpr bool kCoefficients = Target::kForce == TargetForce::kCoordinate;
  scalar_t inv_mass[CHUNKS][4];
  scalar_t cached_scale[kCached ? CHUNKS : 1][4];
  scalar_t cached_coefficient[CHUNKS == 1 && kCoefficients ? CHUNKS : 1][4];
  int64_t dim;

  template <int GROUP>
  __device__ void load(const Target& target, int64_t dim_, const scalar_t* inv_mass_row,
                       GroupSeat seat) {
    dim = dim_;
    if constexpr (!UNIT) {
      load_group_row<scalar_t, GROUP, CHUNKS>(inv_mass_row, seat, dim, false, scalar_t(1),
                                              inv_mass);
    }
    if constexpr (CHUNKS == 1) {
      if constexpr (kCoefficients) {
        const int64_t j0 = seat.chunk_start(0, GROUP);
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

  // The momentum z / sqrt(m_inv) of coordinate (c, e) from its normal z.
  __device__ scalar_t momentum(scalar_t z, int c, int e) const {
    if constexpr (UNIT) return z;
    if constexpr (kCached) return mul_rn(z, cached_scale[0][e]);
    return mul_rn(z, momentum_scale(inv_mass[c][e]));
  }

  __device__ auto mass(int c, int e) const {
    if constexpr (UNIT) {
      return UnitMass{};
    } else {
      return inv_mass[c][e];
    }
  }

  // f_j at x_j (chunk c, element e of the thread's) of a kCoordinate target.
  __device__ scalar_t local_force(const Target& target, int e, int64_t j, scalar_t x) const {
    if constexpr (CHUNKS == 1) return target.force(x, cached_coefficient[0][e]);
    return target.force(x, j < dim ? target.coefficient(j) : scalar_t(1));
  }
};

// A kPosition target over GROUP > 1 lanes (math/lane_rows.h): every lane of the chain gathers the
// whole position (chunk r + c * GROUP of lane r) by shuffles, evaluates its block of log p's
// partials and their gradient (the fixed tree's lower levels), and the butterfly adds the lanes'
// sums (adjacent lanes first: the tree's upper levels, by tree_add, so the bits are the one tree's
// whatever GROUP), so every lane holds U and the whole gradient and keeps its own chunks' forces. The shuffles stay
// inside the chain's lanes (the chains of a warp may run different numbers of leapfrog steps);
// a missing chain's lanes skip it all alike.
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
  const unsigned lanes = (GROUP == kWarp ? 0xffffffffu : (1u << (GROUP % kWarp)) - 1u)
                         << (threadIdx.x % kWarp / GROUP * GROUP);
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
      const int64_t j0 = seat.chunk_start(c, GROUP);
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
    } else {
      return lane_share_forces<Target, GROUP, CHUNKS>(target, seat, x, f);
    }
  } else {
    __syncthreads();  // every thread has read the previous x
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int64_t j0 = seat.chunk_start(c, GROUP);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (seat.live && j0 + e < k.dim) x_shared[j0 + e] = x[c][e];
      }
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int64_t j0 = seat.chunk_start(c, GROUP);
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
__device__ __forceinline__ void load_shift(const Target& target, int64_t j0, int64_t dim,
                                           scalar_t (&out)[4]) {
  if constexpr (Target::kShifted) {
    load_chunk(target.shift(), j0, dim, false, out);
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = scalar_t(0);
  }
}

// A chain's TransitionUniforms (math/transition.h) formed ahead: lane i of every window of
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

// A transition's Metropolis decision, the same in every thread of the group. The acceptance
// probability (a float64 exp, accept_probability) is formed only where it is used.
template <typename scalar_t>
struct GroupDecision {
  bool accepted;
  scalar_t log_alpha;  // -inf in the threads of a missing chain
  int gradient_evaluations;  // L, plus one where the start's force was evaluated, not carried
  __device__ scalar_t accept_prob() const { return accept_probability(log_alpha); }
};

// The thread's chunks of the force, and the potential, at its chain's current state, carried
// from one transition to the next for a target that carries_force (math/target.h; the CPU's
// ForceCarry): in registers across a persistent kernel's transitions, or loaded and stored by a
// kernel whose chains change between transitions (pooled_warmup.cuh). Empty for the others.
template <class Target, int CHUNKS, typename scalar_t = typename Target::Scalar>
struct GroupForceCarry {
  static constexpr bool kCarries = carries_force<Target>();
  scalar_t f[kCarries ? CHUNKS : 1][4] = {};
  scalar_t u = scalar_t(0);
  bool valid = false;
};

// Where a transition writes what ChEES needs of its chain (math/trajectory_adaptation.h): rows of
// [dim] float64 for the start and the proposal (less the target's shift) and the end velocity
// inv_mass * p (the momentum before its final flip); x0 == nullptr writes nothing.
struct TrajectoryRecord {
  double* x0;
  double* x1;
  double* velocity;
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

// sum += accept_probability(log_alpha) over a chain's consecutive transitions, in transition
// order, with the exp formed for kDepth transitions at once: lane i of a window keeps transition
// t0 + i's log_alpha, and once the window is full each lane takes its exp and every lane adds the
// window's in order (the bits of one lane adding each in turn). Call add() and total() from every
// thread; lane 0's total counts `start`.
template <int GROUP, typename scalar_t>
class AcceptProbabilitySum {
 public:
  static constexpr int kDepth = UniformsAhead<GROUP>::kDepth;

  __device__ explicit AcceptProbabilitySum(double start) : sum_(start) {}

  __device__ void add(scalar_t log_alpha) {
    if constexpr (kDepth == 1) {
      sum_ += static_cast<double>(accept_probability(log_alpha));
    } else {
      if (static_cast<int>(threadIdx.x % kDepth) == held_) mine_ = log_alpha;
      if (++held_ == kDepth) flush(kDepth);
    }
  }

  __device__ double total() {
    if (held_ > 0) flush(held_);
    return sum_;
  }

 private:
  __device__ void flush(int count) {
    const double p = static_cast<double>(accept_probability(mine_));
#pragma unroll
    for (int i = 0; i < kDepth; ++i) {
      if (i < count) sum_ += __shfl_sync(0xffffffffu, p, i, kDepth);
    }
    held_ = 0;
  }

  double sum_;
  scalar_t mine_ = scalar_t(0);
  int held_ = 0;
};

// Transition `transition` of stream chain `chain` from the state q (updated when accepted), with
// the coefficients k, base step size `step_size`, the transition's uniforms (the same in every
// thread of the group) and trajectory_steps(trajectory_length, num_steps, ...) leapfrog steps.
// Every thread of the group forms the decision from the group's sum (the same bits in each: the
// butterfly's sums commute), so none is broadcast. Chains of one warp may run different numbers of
// steps (they diverge); a kRow target's chains, which meet at block barriers inside the force,
// all loop the block's most steps and hold still past their own. `carry` takes the force at q in
// (when valid) and hands out the force at the new q; its validity is the same in every thread.
template <class Target, int GROUP, int CHUNKS, class Coefficients,
          typename scalar_t = typename Target::Scalar>
__device__ __forceinline__ GroupDecision<scalar_t> group_tuned_transition(
    const PhiloxStream& stream, uint64_t chain, uint64_t transition, GroupSeat seat,
    const Target& target, scalar_t (&q)[CHUNKS][4], const Coefficients& k,
    TransitionUniforms uniforms, double step_size, double jitter, int num_steps,
    double trajectory_length, scalar_t* x_shared, GroupForceCarry<Target, CHUNKS>& carry,
    TrajectoryRecord record = {}) {
  const int64_t dim = k.dim;
  const double eps_t = jittered_step_size(step_size, jitter, uniforms.jitter_uniform);
  const auto steps = tuned_step_sizes<scalar_t>(eps_t);
  const int leapfrog_steps =
      trajectory_steps(trajectory_length, num_steps, eps_t, uniforms.trajectory_uniform);
  int loop_steps = leapfrog_steps;
  if constexpr (Target::kForce == TargetForce::kRow) {
    if (trajectory_length > 0.0) loop_steps = block_max_steps(seat.live ? leapfrog_steps : 1);
  }

  // Zeros past the row's end and in missing chains keep the unused lanes' arithmetic finite.
  scalar_t mu[CHUNKS][4] = {}, x[CHUNKS][4] = {}, p[CHUNKS][4] = {}, p0[CHUNKS][4] = {};
  scalar_t f0[CHUNKS][4] = {}, f[CHUNKS][4] = {};
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = seat.chunk_start(c, GROUP);
    if (!seat.live || j0 >= dim) continue;
    scalar_t z[4];
    stream_chunk_momentum(stream, chain, transition, j0, dim, z);
    load_shift(target, j0, dim, mu[c]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      x[c][e] = Target::kShifted ? q[c][e] - mu[c][e] : q[c][e];
      p0[c][e] = k.momentum(z[e], c, e);
    }
  }
  constexpr bool kCarries = GroupForceCarry<Target, CHUNKS>::kCarries;
  const bool carried = kCarries && carry.valid;
  scalar_t u0;
  if constexpr (kCarries) {
    if (carried) {
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) f0[c][e] = carry.f[c][e];
      }
      u0 = carry.u;
    } else {
      u0 = group_forces<Target, GROUP, CHUNKS, Coefficients>(target, seat, k, x, f0, x_shared);
    }
  } else {
    u0 = group_forces<Target, GROUP, CHUNKS, Coefficients>(target, seat, k, x, f0, x_shared);
  }
  scalar_t u1 = u0;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
    for (int e = 0; e < 4; ++e) p[c][e] = kick(p0[c][e], f0[c][e], steps.half_eps);
  }
  for (int i = 0; i < loop_steps; ++i) {
    const bool moving = i < leapfrog_steps;  // false only for a kRow target's early finishers
    if (moving) {
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) x[c][e] = drift(x[c][e], p[c][e], k.mass(c, e), steps.eps);
      }
    }
    u1 = group_forces<Target, GROUP, CHUNKS, Coefficients>(target, seat, k, x, f, x_shared);
    const scalar_t h = i + 1 < leapfrog_steps ? steps.eps : steps.half_eps;
    if (moving) {
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) p[c][e] = kick(p[c][e], f[c][e], h);
      }
    }
  }
  if (record.x0 != nullptr && seat.live) {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int64_t j0 = seat.chunk_start(c, GROUP);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (j0 + e >= dim) continue;
        record.x0[j0 + e] =
            static_cast<double>(Target::kShifted ? q[c][e] - mu[c][e] : q[c][e]);
        record.x1[j0 + e] = static_cast<double>(x[c][e]);
        record.velocity[j0 + e] = static_cast<double>(mul_rn(k.mass(c, e), p[c][e]));
      }
    }
  }

  // Coordinate targets on shapes of several chunks recompute the forces at x0 and x here rather
  // than hold them through the trajectory (fewer live registers).
  constexpr bool kRecompute = CHUNKS > 1 && Target::kForce == TargetForce::kCoordinate;
  scalar_t change[CHUNKS] = {};  // per-chunk partials, summed in the canonical order
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = seat.chunk_start(c, GROUP);
    if (!seat.live || j0 >= dim) continue;
    if constexpr (kRecompute && Target::kShifted) load_shift(target, j0, dim, mu[c]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (j0 + e >= dim) continue;
      p[c][e] = -p[c][e];
      if constexpr (Target::kQuadratic) {
        const scalar_t x0 = Target::kShifted ? q[c][e] - mu[c][e] : q[c][e];
        scalar_t force0 = f0[c][e], force1 = f[c][e];
        if constexpr (kRecompute) {
          force0 = k.local_force(target, e, j0 + e, x0);
          force1 = k.local_force(target, e, j0 + e, x[c][e]);
        }
        change[c] += target_energy_change_twice(x0, force0, p0[c][e], x[c][e], force1, p[c][e],
                                                k.mass(c, e));
      } else {
        change[c] += kinetic_change_twice(p0[c][e], p[c][e], k.mass(c, e));
      }
    }
  }
  scalar_t change_sum = group_chunk_sum<GROUP>(change);
  if constexpr (!Target::kQuadratic) change_sum = energy_change_from_potentials(change_sum, u0, u1);
  GroupDecision<scalar_t> decision{false, -INFINITY, leapfrog_steps + (carried ? 0 : 1)};
  if (seat.live) {
    decision.log_alpha = log_accept_ratio(change_sum);
    decision.accepted = philox_accept_by_log(uniforms.log_uniform, decision.log_alpha);
  }
  if (decision.accepted) {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) q[c][e] = Target::kShifted ? x[c][e] + mu[c][e] : x[c][e];
    }
  }
  if constexpr (kCarries) {
    if (decision.accepted || !carried) {
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) carry.f[c][e] = decision.accepted ? f[c][e] : f0[c][e];
      }
      carry.u = decision.accepted ? u1 : u0;
    }
    carry.valid = true;
  }
  return decision;
}

}  // namespace fused_hmc
