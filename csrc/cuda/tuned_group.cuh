// Device side of the tuned samplers: one chain's transition (math/tuned_transition.h's canonical
// operations, bit for bit) by the chain's group of GROUP threads, each holding CHUNKS chunks of 4
// coordinates in registers (chunk lane + c * GROUP, as in the other kernels).
//
// A dense target's force needs the whole position vector: the group writes it to `x_shared` (this
// chain's [dim] of shared memory) and synchronises the block around every force evaluation. The
// target kind is uniform over the launch, so every thread of a block takes the same branches and
// reaches the same barriers, including the threads of chains past the batch.
#pragma once

#include <cstdint>

#include "../math/chunk_sum.h"
#include "../math/gaussian_targets.h"
#include "../math/mass_matrix.h"
#include "../math/noise_streams.h"
#include "../math/philox_transition.h"
#include "../math/tuned_transition.h"
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

// The block's dynamic shared memory, which the tuned kernels size with dense_shared_bytes (plus
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
// momentum scale, recomputed only when the mass changes, and a diagonal target's precision, so the
// leapfrog touches no memory. Four-chunk shapes (d > 1024) compute them when needed instead.
template <typename scalar_t, int CHUNKS>
struct CoordinateCoefficients {
  static constexpr bool kCached = CHUNKS == 1;
  scalar_t inv_mass[CHUNKS][4];
  scalar_t cached_scale[kCached ? CHUNKS : 1][4];
  scalar_t cached_precision[kCached ? CHUNKS : 1][4];  // kDiagonal only
  const scalar_t* precision_row;
  int64_t dim;

  template <int GROUP>
  __device__ void load(const GaussianTarget<scalar_t>& target, const scalar_t* inv_mass_row,
                       GroupSeat seat) {
    precision_row = target.precision;
    dim = target.dim;
    load_group_row<scalar_t, GROUP, CHUNKS>(inv_mass_row, seat, dim, false, scalar_t(1), inv_mass);
    if constexpr (kCached) {
      if (target.kind == TargetKind::kDiagonal) {
        load_group_row<scalar_t, GROUP, CHUNKS>(precision_row, seat, dim, false, scalar_t(1),
                                                cached_precision);
      }
      update_scale();
    }
  }

  __device__ void update_scale() {
    if constexpr (kCached) {
#pragma unroll
      for (int e = 0; e < 4; ++e) cached_scale[0][e] = momentum_scale(inv_mass[0][e]);
    }
  }

  __device__ scalar_t scale(int c, int e) const {
    if constexpr (kCached) return cached_scale[0][e];
    return momentum_scale(inv_mass[c][e]);
  }

  // f_j at x_j (chunk c, element e of the thread's) of a target that is not dense:
  // GaussianTarget::force_at's operations, reading a diagonal target's precision only.
  __device__ scalar_t local_force(TargetKind kind, int c, int e, int64_t j, scalar_t x) const {
    if (kind != TargetKind::kDiagonal) return x;
    if constexpr (kCached) return mul_rn(cached_precision[0][e], x);
    return mul_rn(j < dim ? precision_row[j] : scalar_t(1), x);
  }
};

// f = force(x) for the thread's coordinates.
template <typename scalar_t, int GROUP, int CHUNKS>
__device__ __forceinline__ void group_forces(const GaussianTarget<scalar_t>& target, GroupSeat seat,
                                             const CoordinateCoefficients<scalar_t, CHUNKS>& k,
                                             const scalar_t (&x)[CHUNKS][4], scalar_t (&f)[CHUNKS][4],
                                             scalar_t* x_shared) {
  if (target.kind != TargetKind::kDense) {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int64_t j0 = seat.chunk_start(c, GROUP);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        f[c][e] = k.local_force(target.kind, c, e, j0 + e, x[c][e]);
      }
    }
    return;
  }
  __syncthreads();  // every thread has read the previous x
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = seat.chunk_start(c, GROUP);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (seat.live && j0 + e < target.dim) x_shared[j0 + e] = x[c][e];
    }
  }
  __syncthreads();
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = seat.chunk_start(c, GROUP);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (seat.live && j0 + e < target.dim) f[c][e] = target.force_at(x[c][e], j0 + e, x_shared);
    }
  }
}

// Transition `transition` of stream chain `chain` from the state q (updated when accepted), with
// the coefficients k and base step size `step_size` (the same in every thread of the group).
// Every thread of the group gets the decision.
template <typename scalar_t, int GROUP, int CHUNKS>
__device__ __forceinline__ PhiloxDecision<scalar_t> group_tuned_transition(
    const PhiloxStream& stream, uint64_t chain, uint64_t transition, GroupSeat seat,
    const GaussianTarget<scalar_t>& target, scalar_t (&q)[CHUNKS][4],
    const CoordinateCoefficients<scalar_t, CHUNKS>& k, double step_size, double jitter,
    int num_steps, scalar_t* x_shared) {
  const int64_t dim = target.dim;
  float uniform = 0.0f;
  double eps_t = step_size;
  if (seat.lane == 0 && seat.live) {
    const PhiloxBlock last =
        stream_block(stream, chain, transition, stream.blocks_per_transition - 1);
    uniform = torch_uniform_from_word(last.x);
    eps_t = jittered_step_size(step_size, jitter, torch_uniform_from_word(last.y));
  }
  if (jitter != 0.0) eps_t = group_broadcast<GROUP>(eps_t);
  const auto steps = tuned_step_sizes<scalar_t>(eps_t);

  // Zeros past the row's end and in missing chains keep the unused lanes' arithmetic finite.
  scalar_t mu[CHUNKS][4] = {}, x[CHUNKS][4] = {}, p[CHUNKS][4] = {}, p0[CHUNKS][4] = {};
  scalar_t f0[CHUNKS][4] = {}, f[CHUNKS][4] = {};
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = seat.chunk_start(c, GROUP);
    if (!seat.live || j0 >= dim) continue;
    scalar_t z[4];
    stream_chunk_momentum(stream, chain, transition, j0, dim, z);
    load_chunk(target.mu, j0, dim, false, mu[c]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      x[c][e] = q[c][e] - mu[c][e];
      p0[c][e] = mul_rn(z[e], k.scale(c, e));
    }
  }
  group_forces<scalar_t, GROUP, CHUNKS>(target, seat, k, x, f0, x_shared);
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
    for (int e = 0; e < 4; ++e) p[c][e] = kick(p0[c][e], f0[c][e], steps.half_eps);
  }
  for (int i = 0; i < num_steps; ++i) {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) x[c][e] = drift(x[c][e], p[c][e], k.inv_mass[c][e], steps.eps);
    }
    group_forces<scalar_t, GROUP, CHUNKS>(target, seat, k, x, f, x_shared);
    const scalar_t h = i + 1 < num_steps ? steps.eps : steps.half_eps;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) p[c][e] = kick(p[c][e], f[c][e], h);
    }
  }

  // Only one-chunk shapes serve dense targets (d <= 256); the others recompute the diagonal forces
  // at x0 and x here rather than hold them through the trajectory (fewer live registers).
  constexpr bool kMayBeDense = CHUNKS == 1;
  scalar_t change[CHUNKS] = {};  // per-chunk partials, summed in the canonical order
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = seat.chunk_start(c, GROUP);
    if (!seat.live || j0 >= dim) continue;
    if constexpr (!kMayBeDense) load_chunk(target.mu, j0, dim, false, mu[c]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (j0 + e >= dim) continue;
      const scalar_t x0 = q[c][e] - mu[c][e];
      const scalar_t force0 = kMayBeDense ? f0[c][e] : k.local_force(target.kind, c, e, j0 + e, x0);
      const scalar_t force1 =
          kMayBeDense ? f[c][e] : k.local_force(target.kind, c, e, j0 + e, x[c][e]);
      p[c][e] = -p[c][e];
      change[c] += target_energy_change_twice(x0, force0, p0[c][e], x[c][e], force1, p[c][e],
                                              k.inv_mass[c][e]);
    }
  }
  const scalar_t change_sum = group_chunk_sum<GROUP>(change);
  PhiloxDecision<scalar_t> decision{false, scalar_t(0)};
  if (seat.lane == 0 && seat.live) decision = philox_decide(uniform, change_sum);
  decision.accepted = group_broadcast<GROUP>(decision.accepted);
  if (decision.accepted) {
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) q[c][e] = x[c][e] + mu[c][e];
    }
  }
  return decision;
}

}  // namespace fused_hmc
