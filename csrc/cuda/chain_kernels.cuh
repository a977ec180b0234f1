// The persistent chain kernels over any Target (math/targets/target.h), as templates a library
// instantiates for its targets (cuda/builtin_*.cu; users' modules):
//   sampling_kernel       transitions with kept draws, Welford moments and the chain statistics
//                         (state, moments and statistics in registers for the whole call);
//   warmup_per_chain_kernel  one adaptation state per chain (G = B): the transition, then the
//                         chain's own window moments, dual averaging and inverse-mass updates, all
//                         in registers for the whole call;
// and their launchers. Chunking, batch splits and the block size (chain_block's, which shrinks for
// a small batch; __launch_bounds__ names the largest) change no bit; the operations are the CPU
// build's (math/hmc/transition.h, cpu/chains_cpu.h). The pooled warm-up is pooled_warmup.cuh.
#pragma once

#include <type_traits>

#include "../math/adaptation/adaptation_windows.h"
#include "../math/adaptation/dual_averaging.h"
#include "../math/adaptation/warmup_update.h"
#include "../math/chain_params.h"
#include "../math/hmc/mass_matrix.h"
#include "../math/stats/thinning.h"
#include "../math/stats/welford.h"
#include "chain_shape.cuh"
#include "keep_draws.cuh"
#include "lane_dense_mass.cuh"
#include "lane_group.cuh"

namespace fused_hmc {
namespace chain_kernels {

// Blocks of 256 threads per SM that a target's one-chunk sampling kernel may also be compiled
// for (the minimum of its __launch_bounds__; 3 caps a thread at 80 registers). 1: only the
// kernel the compiler sizes. A target whose kernel fits without spilling specialises this where
// it is instantiated (builtin_instances.cuh); launch_sampling takes that kernel only for grids
// larger than the other keeps resident, since the cap costs instructions.
template <class Target>
struct SamplingBlocksPerSm {
  static constexpr int value = 1;
};

// UNIT_MASS: inv_mass is the identity (null), compiled away. RECORD: the call serves a ChEES
// warm-up pooled outside the kernel (p.recording: T read from chees, the last transition
// recorded); compiled in only there, since its registers would slow every other call.
// MIN_BLOCKS: the __launch_bounds__ minimum (SamplingBlocksPerSm). No choice changes a bit.
// DENSE: inv_mass holds dense factors (lane_dense_mass.cuh).
template <class Target, int GROUP, int CHUNKS, bool UNIT_MASS, bool RECORD, int MIN_BLOCKS = 1,
          bool DENSE = false>
__global__ void __launch_bounds__(GroupGeometry<GROUP>::kThreads, MIN_BLOCKS)
    sampling_kernel(const Target target, const SamplingParams<typename Target::Scalar> p) {
  using scalar_t = typename Target::Scalar;
  const ChainBatch<scalar_t>& c = p.chains;
  const int slot = threadIdx.x / GROUP;
  const int64_t chain = static_cast<int64_t>(blockIdx.x) * block_chains<GROUP>() + slot;
  const GroupSeat seat{static_cast<int>(threadIdx.x % GROUP), chain < c.batch};
  const int64_t g = c.groups == 1 ? 0 : (seat.live ? chain : 0);
  const LaneGroup<scalar_t, GROUP, CHUNKS> group(
      seat, c.dim, chain_shared_memory<scalar_t>() + slot * c.dim);

  Chunks<scalar_t, CHUNKS> q;
  load_group_row<scalar_t, GROUP, CHUNKS>(c.q + chain * c.dim, seat, c.dim, c.vectorized,
                                          scalar_t(0), q.v);
  LaneMass<DENSE, Target, GROUP, CHUNKS, UNIT_MASS> coefficients;
  load_chain_mass<GROUP>(coefficients, target, c, g, chain, seat);
  const double step_size = c.step_size[g];
  // Shapes of several chunks keep the moments in memory, touched on kept transitions only: in
  // registers they would spill.
  constexpr bool kMomentsInRegisters = CHUNKS == 1;
  double mean[CHUNKS][4], m2[CHUNKS][4];
  if (kMomentsInRegisters && seat.live) {
    transfer_moments<GROUP, CHUNKS, false>(p.out.mean, p.out.m2, chain, seat.lane, c.dim, mean, m2);
  }
  ChainTally<LaneSums<GROUP, scalar_t>::template Sum> statistics(c.statistics, chain,
                                                                 seat.lane == 0 && seat.live);
  const uint64_t stream_chain = static_cast<uint64_t>(c.chain_offset + chain);
  UniformsAhead<GROUP> uniforms;
  KeepClock clock(c.first_transition, p.out.thin);
  const double length = RECORD ? p.recording.chees->trajectory_length : c.trajectory_length;
  const bool jittered = c.jitter != 0.0, trajectory = length > 0.0;
  GroupForceCarry<Target, CHUNKS> carry;
  const int64_t last = c.first_transition + c.num_transitions - 1;

  for (int64_t t = c.first_transition; t <= last; ++t) {
    const TransitionUniforms drawn =
        uniforms.next(c.stream, stream_chain, static_cast<uint64_t>(t), jittered, trajectory);
    TrajectoryRecord record{};
    double* row = nullptr;
    if constexpr (RECORD) {
      if (t == last && seat.live) {
        row = p.recording.rows + chain * trajectory_record_width(c.dim);
        record = {row, row + c.dim, row + 2 * c.dim};
      }
    }
    const PhiloxNoise<scalar_t> noise{c.stream, stream_chain, static_cast<uint64_t>(t), drawn};
    const auto decision =
        transition(group, target, noise, coefficients, q,
                   Trajectory{step_size, c.jitter, c.num_steps, length}, carry, record);
    if constexpr (RECORD) {
      if (row != nullptr && seat.lane == 0) {
        row[3 * c.dim] = static_cast<double>(decision.accept_prob());
        row[3 * c.dim + 1] = static_cast<double>(drawn.trajectory_uniform);
      }
    }
    const bool kept = clock.advance();
    statistics.add(decision);
    if (!seat.live || !kept) continue;
    if (!kMomentsInRegisters) {
      transfer_moments<GROUP, CHUNKS, false>(p.out.mean, p.out.m2, chain, seat.lane, c.dim, mean, m2);
    }
    keep_group_draw<scalar_t, GROUP, CHUNKS>(p.out, chain, clock.kept_index(), seat.lane, c.dim,
                                             q.v, mean, m2);
    if (!kMomentsInRegisters) {
      transfer_moments<GROUP, CHUNKS, true>(p.out.mean, p.out.m2, chain, seat.lane, c.dim, mean, m2);
    }
  }

  statistics.flush();
  if (!seat.live) return;
  store_group_row<scalar_t, GROUP, CHUNKS>(c.q + chain * c.dim, seat, c.dim, c.vectorized, q.v);
  if (kMomentsInRegisters) {
    transfer_moments<GROUP, CHUNKS, true>(p.out.mean, p.out.m2, chain, seat.lane, c.dim, mean, m2);
  }
  if (seat.lane == 0) statistics.store(c.statistics, chain);
}

// DENSE: inv_mass holds each chain's dense factor (lane_dense_mass.cuh), the windows its
// co-moments [B, d, d] in global memory; the op estimates the new factors after a call that ends a
// slow window (ops/dense_window_end.h), so the kernel leaves the windows to it.
template <class Target, int GROUP, int CHUNKS, bool DENSE = false>
__global__ void __launch_bounds__(GroupGeometry<GROUP>::kThreads, 1)
    warmup_per_chain_kernel(const Target target, const WarmupParams<typename Target::Scalar> p) {
  using scalar_t = typename Target::Scalar;
  const ChainBatch<scalar_t>& c = p.chains;
  const int slot = threadIdx.x / GROUP;
  const int64_t chain = static_cast<int64_t>(blockIdx.x) * block_chains<GROUP>() + slot;
  const GroupSeat seat{static_cast<int>(threadIdx.x % GROUP), chain < c.batch};
  const int64_t row = seat.live ? chain : 0;
  const LaneGroup<scalar_t, GROUP, CHUNKS> group(
      seat, c.dim, chain_shared_memory<scalar_t>() + slot * c.dim);

  Chunks<scalar_t, CHUNKS> q;
  load_group_row<scalar_t, GROUP, CHUNKS>(c.q + row * c.dim, seat, c.dim, c.vectorized,
                                          scalar_t(0), q.v);
  LaneMass<DENSE, Target, GROUP, CHUNKS> coefficients;
  load_chain_mass<GROUP>(coefficients, target, c, row, chain, seat);
  double mean[CHUNKS][4], m2[CHUNKS][4];
  if (!DENSE && seat.live) {
    transfer_moments<GROUP, CHUNKS, false>(p.window_mean, p.window_m2, chain, seat.lane, c.dim,
                                           mean, m2);
  }
  const bool owner = seat.lane == 0 && seat.live;
  double step_size = c.step_size[row];
  DualAveraging averaging = owner ? p.dual_averaging[chain] : DualAveraging{0.0, 0.0, 0.0};
  const uint64_t stream_chain = static_cast<uint64_t>(c.chain_offset + chain);
  UniformsAhead<GROUP> uniforms;
  const bool jittered = c.jitter != 0.0, trajectory = c.trajectory_length > 0.0;
  ChainTally<LaneSums<GROUP, scalar_t>::template Sum> statistics(c.statistics, row, owner);
  GroupForceCarry<Target, CHUNKS> carry;

  for (int64_t t = c.first_transition; t < c.first_transition + c.num_transitions; ++t) {
    step_size = group_broadcast<GROUP>(step_size);
    const PhiloxNoise<scalar_t> noise{
        c.stream, stream_chain, static_cast<uint64_t>(t),
        uniforms.next(c.stream, stream_chain, static_cast<uint64_t>(t), jittered, trajectory)};
    const auto decision =
        transition(group, target, noise, coefficients, q,
                   Trajectory{step_size, c.jitter, c.num_steps, c.trajectory_length}, carry);
    statistics.add(decision);
    if (!seat.live) continue;
    const int64_t i = t - p.warmup_start;
    const SlowWindow window = slow_window_of(p.windows, i);
    const bool in_window = p.adapt_mass_matrix && window.start >= 0;
    const double draws = static_cast<double>(i - window.start + 1);
    if (in_window) {
      const double inv_count = 1.0 / draws;
      if constexpr (DENSE) {
        group_comoment_update<GROUP, CHUNKS>(seat, static_cast<int>(c.dim),
                                             p.window_mean + chain * c.dim,
                                             p.window_m2 + chain * c.dim * c.dim, q.v, inv_count,
                                             coefficients.scratch);
      } else {
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            welford_update(mean[k][e], m2[k][e], static_cast<double>(q.v[k][e]), inv_count);
          }
        }
      }
    }
    if (p.adapt_step_size && owner) {
      step_size = warmup_step_size_update(averaging, p.windows, i, p.adapt_mass_matrix, true,
                                          static_cast<double>(decision.accept_prob()),
                                          p.target_accept, step_size);
    }
    if constexpr (!DENSE) {
      if (in_window && window.end == i) {
        auto& inv_mass = coefficients.inv_mass;
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            inv_mass[k][e] = adapted_inverse_mass(m2[k][e] / (draws - 1.0), draws, inv_mass[k][e]);
            mean[k][e] = 0.0;
            m2[k][e] = 0.0;
          }
        }
        coefficients.update_scale();
      }
    }
  }

  statistics.flush();
  if (!seat.live) return;
  store_group_row<scalar_t, GROUP, CHUNKS>(c.q + chain * c.dim, seat, c.dim, c.vectorized, q.v);
  if constexpr (!DENSE) {
    store_group_row<scalar_t, GROUP, CHUNKS>(c.inv_mass + chain * c.dim, seat, c.dim, false,
                                             coefficients.inv_mass);
    transfer_moments<GROUP, CHUNKS, true>(p.window_mean, p.window_m2, chain, seat.lane, c.dim,
                                          mean, m2);
  }
  if (owner) {
    c.step_size[chain] = step_size;
    p.dual_averaging[chain] = averaging;
    statistics.store(c.statistics, chain);
  }
}

// An ordinary launch of `kernel` over the batch's chains, in chain_launch_block's blocks; of
// `dense_kernel` instead (the same chains, compiled for more blocks per SM) when given and the
// grid is larger than `kernel` keeps resident.
template <class Target, typename Kernel, typename Params>
cudaError_t launch_over_chains(Kernel kernel, const Target& target, const Params& p,
                               cudaStream_t stream, Kernel dense_kernel = nullptr) {
  const ChainBlock block = chain_launch_block<Target>(p.chains);
  const auto blocks = static_cast<unsigned>((p.chains.batch + block.chains - 1) / block.chains);
  const size_t shared = target_shared_bytes<Target>(p.chains.dim, block.chains);
  if (dense_kernel != nullptr && blocks > static_cast<unsigned>(p.chains.sm_count)) {
    int resident = 0;
    const cudaError_t status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &resident, kernel, block.threads, shared);
    if (status != cudaSuccess) return status;
    if (blocks > static_cast<unsigned>(resident * p.chains.sm_count)) kernel = dense_kernel;
  }
  if (shared > 48 * 1024) {
    const cudaError_t status = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    if (status != cudaSuccess) return status;
  }
  kernel<<<blocks, block.threads, shared, stream>>>(target, p);
  return cudaGetLastError();
}

}  // namespace chain_kernels

template <class Target>
cudaError_t launch_sampling(const Target& target, const SamplingParams<typename Target::Scalar>& p,
                            cudaStream_t stream) {
  cudaError_t status = cudaSuccess;
  with_chain_shape<Target>(p.chains.dim, [&](auto group, auto chunks) {
    constexpr int G = decltype(group)::value, C = decltype(chunks)::value;
    constexpr int kDense =
        C == 1 && G <= kWarp ? chain_kernels::SamplingBlocksPerSm<Target>::value : 1;
    // The kernel of UNIT_MASS, and its dense twin where the target has one.
    auto launch = [&](auto unit_mass) {
      constexpr bool U = decltype(unit_mass)::value;
      auto* kernel = chain_kernels::sampling_kernel<Target, G, C, U, false>;
      decltype(kernel) dense = nullptr;
      if constexpr (kDense > 1) {
        dense = chain_kernels::sampling_kernel<Target, G, C, U, false, kDense>;
      }
      return chain_kernels::launch_over_chains(kernel, target, p, stream, dense);
    };
    // The sample op hands a recording call an inverse mass (ones for the unit mass).
    if (p.recording.rows != nullptr) {
      status = chain_kernels::launch_over_chains(
          chain_kernels::sampling_kernel<Target, G, C, false, true>, target, p, stream);
    } else if (p.chains.inv_mass == nullptr) {
      status = launch(std::true_type{});
    } else {
      status = launch(std::false_type{});
    }
  });
  return status;
}

// With a dense mass: the shapes of dims up to kMaxDenseMassDim only (cudaErrorInvalidValue for
// another, which the op's checks exclude).
template <class Target>
cudaError_t launch_sampling_dense(const Target& target,
                                  const SamplingParams<typename Target::Scalar>& p,
                                  cudaStream_t stream) {
  cudaError_t status = cudaErrorInvalidValue;
  with_chain_shape<Target>(p.chains.dim, [&](auto group, auto chunks) {
    constexpr int G = decltype(group)::value, C = decltype(chunks)::value;
    if constexpr (kDenseMassShape<Target, G, C>) {
      status = chain_kernels::launch_over_chains(
          chain_kernels::sampling_kernel<Target, G, C, false, false, 1, true>, target, p, stream);
    }
  });
  return status;
}

template <class Target, bool DENSE = false>
cudaError_t launch_warmup_per_chain(const Target& target,
                                    const WarmupParams<typename Target::Scalar>& p,
                                    cudaStream_t stream) {
  cudaError_t status = cudaErrorInvalidValue;
  with_chain_shape<Target>(p.chains.dim, [&](auto group, auto chunks) {
    constexpr int G = decltype(group)::value, C = decltype(chunks)::value;
    if constexpr (!DENSE || kDenseMassShape<Target, G, C>) {
      status = chain_kernels::launch_over_chains(
          chain_kernels::warmup_per_chain_kernel<Target, G, C, DENSE>, target, p, stream);
    }
  });
  return status;
}

}  // namespace fused_hmc
