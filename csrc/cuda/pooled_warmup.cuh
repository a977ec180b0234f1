// The CUDA warm-up with one pooled adaptation state (G = 1), over any Target: a cooperative launch whose
// blocks run tiles of chains (a block's worth each, a power of two: chain_block's, smaller for a
// small batch) and meet at grid-wide barriers, so no transition waits for the host.
//
// After each transition every tile writes the sum of its chains' acceptance statistics; past one
// grid barrier every block sums the tiles' sums itself and runs the same dual averaging on the same
// numbers, so every block holds the same step size without another barrier (the tile sums are
// double-buffered by transition parity, so the next transition's writes cannot overtake a slow
// block's reads). At the end of a slow window the chains' window variances are pooled in two
// rounds (the sum of their logs, then their count: mass_matrix.h) spread over the blocks, with
// barriers between. Every sum over chains follows chunk_sum.h's pairwise order over the chain
// index: a tile's chains form one subtree, the tiles the levels above, so the sums are the CPU build's
// whatever the tile size (padding adds zero subtrees, which change no value).
//
// The chains' state lives in global memory between transitions (a block may run several tiles);
// the shared inverse mass lives in shared memory, the step size and dual averaging in registers.
#pragma once

#include <cooperative_groups.h>

#include "../math/adaptation/adaptation_windows.h"
#include "../math/adaptation/dual_averaging.h"
#include "../math/adaptation/pooled_acceptance.h"
#include "../math/adaptation/trajectory_adaptation.h"
#include "../math/adaptation/warmup_update.h"
#include "../math/chain_params.h"
#include "../math/hmc/mass_matrix.h"
#include "../math/stats/chunk_sum.h"
#include "../math/stats/welford.h"
#include "chain_shape.cuh"
#include "lane_dense_mass.cuh"
#include "lane_group.cuh"

namespace fused_hmc {
namespace pooled_warmup {

namespace cg = cooperative_groups;

// The sum of values[k * stride] for k in [0, n) in the canonical pairwise order, by the whole
// block (blockDim.x a power of two, at least a warp); every thread gets it. Each thread sums an
// aligned segment of a power-of-two length; lane butterflies combine the threads of a warp
// pairwise (IEEE addition commutes, so every lane holds the same bits), and each thread combines
// the warps' sums pairwise from shared memory; zero padding changes no value. scratch: one double
// per warp of shared memory.
__device__ inline double block_pairwise_sum(const double* values, int64_t n, int64_t stride,
                                     double* scratch) {
  constexpr int kMaxWarps = kMaxGroup / kWarp;
  const int warps = blockDim.x / kWarp;
  int64_t segment = 1;
  while (segment * blockDim.x < n) segment *= 2;
  PairwiseChunkSum<double, 24> part;  // segments of up to 2^23 values
  const int64_t begin = threadIdx.x * segment;
  for (int64_t k = begin; k < begin + segment && k < n; ++k) part.add(values[k * stride]);
  double v = part.total();
#pragma unroll
  for (int offset = 1; offset < kWarp; offset *= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % kWarp == 0) scratch[threadIdx.x / kWarp] = v;
  __syncthreads();
  double w[kMaxWarps];
#pragma unroll
  for (int i = 0; i < kMaxWarps; ++i) w[i] = i < warps ? scratch[i] : 0.0;
#pragma unroll
  for (int width = 1; width < kMaxWarps; width *= 2) {
#pragma unroll
    for (int i = 0; i + width < kMaxWarps; i += 2 * width) {
      if (i + width < warps) w[i] += w[i + width];
    }
  }
  __syncthreads();  // scratch may be reused at once
  return w[0];
}

// One chain of a tile, as seen by one of its threads.
template <int GROUP>
struct TileSeat {
  int64_t chain;
  GroupSeat seat;
  __device__ TileSeat(int64_t tile, int64_t batch) {
    chain = tile * block_chains<GROUP>() + threadIdx.x / GROUP;
    seat = GroupSeat{static_cast<int>(threadIdx.x % GROUP), chain < batch};
  }
};

// DENSE: c_.inv_mass is the pooled dense factor [d, d] (lane_dense_mass.cuh), read from global
// memory, and the windows are the chains' co-moments; the op estimates the new factor after a call
// that ends a slow window (ops/dense_window_end.h), so the kernel leaves the windows to it.
template <class Target, int GROUP, int CHUNKS, bool DENSE>
class PooledWarmup {
 public:
  using scalar_t = typename Target::Scalar;
  static constexpr int kMaxChains = GroupGeometry<GROUP>::kChainsPerBlock;

  __device__ PooledWarmup(const Target& target, const WarmupParams<scalar_t>& p, double* scratch)
      : target_(target), p_(p), c_(p.chains), scratch_(scratch), chains_(block_chains<GROUP>()),
        tiles_((p.chains.batch + chains_ - 1) / chains_) {
    inv_mass_ = chain_shared_memory<scalar_t>();
    x_shared_ = inv_mass_ + aligned_dim() + (threadIdx.x / GROUP) * c_.dim;
    if constexpr (!DENSE) {
      for (int64_t j = threadIdx.x; j < c_.dim; j += blockDim.x) inv_mass_[j] = c_.inv_mass[j];
    }
    __syncthreads();
  }

  // The tiles of chains_ chains (the last one may be partly empty).
  __device__ int64_t tiles() const { return tiles_; }

  // Whole chunks of 4 (a chunk's loads may be issued as one 16-byte read).
  __device__ int64_t aligned_dim() const { return (c_.dim + 3) / 4 * 4; }

  // Transition t of every chain of the block's tiles with trajectory length `length` (0: the fixed
  // steps); writes the tiles' sums of the acceptance terms x and w (pooled_acceptance.h: tile_accept
  // [2, tiles]), and with ChEES each chain's rows, acceptance statistic and trajectory jitter.
  __device__ void run_tiles(int64_t t, double step_size, double length, double* tile_accept) {
    __shared__ double chain_accept[2][kMaxChains];
    const int64_t i = t - p_.warmup_start;
    const SlowWindow window = slow_window_of(p_.windows, i);
    const bool in_window = p_.adapt_mass_matrix && window.start >= 0;
    for (int64_t tile = blockIdx.x; tile < tiles_; tile += gridDim.x) {
      const TileSeat<GROUP> at(tile, c_.batch);
      scalar_t* q_row = c_.q + (at.seat.live ? at.chain : 0) * c_.dim;
      Chunks<scalar_t, CHUNKS> q;
      load_group_row<scalar_t, GROUP, CHUNKS>(q_row, at.seat, c_.dim, c_.vectorized, scalar_t(0),
                                              q.v);
      LaneMass<DENSE, Target, GROUP, CHUNKS> coefficients;
      if constexpr (DENSE) {
        load_chain_mass<GROUP>(coefficients, target_, c_, 0, at.chain, at.seat);
      } else {
        coefficients.template load<GROUP>(target_, c_.dim, inv_mass_, at.seat);
      }
      const auto chain = static_cast<uint64_t>(c_.chain_offset + at.chain);
      // A tile's chains change from one transition to the next: the uniforms are formed in place.
      const TransitionUniforms uniforms =
          transition_uniforms(c_.stream, chain, static_cast<uint64_t>(t));
      TrajectoryRecord record{};
      if (p_.chees != nullptr) {
        const int64_t row = (at.seat.live ? at.chain : 0) * c_.dim, rows = c_.batch * c_.dim;
        record = {p_.chees_rows + row, p_.chees_rows + rows + row,
                  p_.chees_rows + 2 * rows + row};
      }
      GroupForceCarry<Target, CHUNKS> carry;
      if constexpr (GroupForceCarry<Target, CHUNKS>::kCarries) {
        carry.valid = t > c_.first_transition;
        if (carry.valid) load_carry(at, carry);
      }
      const auto decision = transition(
          LaneGroup<scalar_t, GROUP, CHUNKS>(at.seat, c_.dim, x_shared_), target_,
          PhiloxNoise<scalar_t>{c_.stream, chain, static_cast<uint64_t>(t), uniforms},
          coefficients, q, Trajectory{step_size, c_.jitter, c_.num_steps, length}, carry, record);
      if constexpr (GroupForceCarry<Target, CHUNKS>::kCarries) {
        if (at.seat.live && (decision.accepted || t == c_.first_transition)) store_carry(at, carry);
      }
      if (at.seat.lane == 0) {
        const double accept = at.seat.live ? static_cast<double>(decision.accept_prob()) : 0.0;
        const PooledAcceptanceTerms terms =
            at.seat.live
                ? pooled_acceptance_terms(accept, decision.divergent(), p_.harmonic_acceptance)
                : PooledAcceptanceTerms{0.0, 0.0};
        chain_accept[0][threadIdx.x / GROUP] = terms.x;
        chain_accept[1][threadIdx.x / GROUP] = terms.w;
        if (p_.chees != nullptr) {
          const int64_t seat = tile * chains_ + threadIdx.x / GROUP, seats = tiles_ * chains_;
          p_.chees_chains[seat] = accept;
          p_.chees_chains[seats + seat] =
              at.seat.live ? static_cast<double>(uniforms.trajectory_uniform) : 0.0;
        }
        if (at.seat.live) add_to_statistics(c_.statistics, at.chain, decision);
      }
      if (at.seat.live && decision.accepted) {
        store_group_row<scalar_t, GROUP, CHUNKS>(q_row, at.seat, c_.dim, c_.vectorized, q.v);
      }
      if (in_window && at.seat.live) {
        fold_into_window(at, q.v, i - window.start + 1, coefficients);
      }
      __syncthreads();
      const double x = block_pairwise_sum(chain_accept[0], chains_, 1, scratch_);
      const double w = block_pairwise_sum(chain_accept[1], chains_, 1, scratch_);
      if (threadIdx.x == 0) {
        tile_accept[tile] = x;
        tile_accept[tiles_ + tile] = w;
      }
    }
  }

  // ChEES's update of `s` after run_tiles (and a grid barrier), with the next transition's step
  // size: the three passes of math/adaptation/trajectory_adaptation.h's statistics, grid barriers
  // between. Every block ends with the same state (the same sums of the same numbers).
  __device__ void adapt_trajectory_length(cg::grid_group& grid, ChEESState& s,
                                          double next_step_size) {
    const int64_t d = c_.dim, rows = c_.batch * d, seats = tiles_ * chains_, width = 2 * d + 2;
    const double* x0 = p_.chees_rows;
    double* x1 = p_.chees_rows + rows;
    const double* velocity = p_.chees_rows + 2 * rows;
    double* weight = p_.chees_chains;
    const double* jitter = p_.chees_chains + seats;
    double* term = p_.chees_chains + 2 * seats;
    // 1. Weights (a non-finite proposal weighs 0 and counts as 0), then per tile the column sums
    //    of x0 and omega x1 and the sum of the weights.
    for (int64_t tile = blockIdx.x; tile < tiles_; tile += gridDim.x) {
      for (int64_t k = threadIdx.x; k < chains_; k += blockDim.x) {
        const int64_t chain = tile * chains_ + k;
        if (chain >= c_.batch) continue;
        bool finite = true;
        for (int64_t j = 0; j < d; ++j) finite = finite && is_finite_value(x1[chain * d + j]);
        if (!finite) {
          for (int64_t j = 0; j < d; ++j) x1[chain * d + j] = 0.0;
          weight[chain] = 0.0;
        }
      }
    }
    __syncthreads();  // the block's tiles only: every pass below reads its own tiles' chains
    sum_tile_columns([&](int64_t chain, int64_t j) { return x0[chain * d + j]; }, p_.chees_tiles,
                     width);
    sum_tile_columns(
        [&](int64_t chain, int64_t j) { return mul_rn(weight[chain], x1[chain * d + j]); },
        p_.chees_tiles + d, width);
    for (int64_t tile = blockIdx.x; tile < tiles_; tile += gridDim.x) {
      const double w = block_pairwise_sum(weight + tile * chains_, chains_, 1, scratch_);
      if (threadIdx.x == 0) p_.chees_tiles[tile * width + 2 * d] = w;
    }
    grid.sync();
    // 2. The means m0 and m1, spread over the blocks.
    const double weight_sum = block_pairwise_sum(p_.chees_tiles + 2 * d, tiles_, width, scratch_);
    for (int64_t j = blockIdx.x; j < d; j += gridDim.x) {
      const double start = block_pairwise_sum(p_.chees_tiles + j, tiles_, width, scratch_);
      const double proposal = block_pairwise_sum(p_.chees_tiles + d + j, tiles_, width, scratch_);
      if (threadIdx.x == 0) {
        p_.chees_means[j] = start / static_cast<double>(c_.batch);
        p_.chees_means[d + j] = div_rn(proposal, add_rn(weight_sum, kChEESWeightFloor));
      }
    }
    grid.sync();
    // 3. Every chain's weighted gradient term, and per tile their sum.
    for (int64_t tile = blockIdx.x; tile < tiles_; tile += gridDim.x) {
      for (int64_t k = threadIdx.x; k < chains_; k += blockDim.x) {
        const int64_t chain = tile * chains_ + k;
        double out = 0.0;
        if (chain < c_.batch) {
          ChEESChainSums sums;
          for (int64_t j = 0; j < d; ++j) {
            sums.add(sub_rn(x0[chain * d + j], p_.chees_means[j]),
                     sub_rn(x1[chain * d + j], p_.chees_means[d + j]), velocity[chain * d + j]);
          }
          out = mul_rn(weight[chain], sums.term(mul_rn(jitter[chain], s.trajectory_length)));
        }
        term[chain] = out;
      }
      __syncthreads();
      const double sum = block_pairwise_sum(term + tile * chains_, chains_, 1, scratch_);
      if (threadIdx.x == 0) p_.chees_tiles[tile * width + 2 * d + 1] = sum;
    }
    grid.sync();
    // 4. The update, in every block.
    const double gradient = block_pairwise_sum(p_.chees_tiles + 2 * d + 1, tiles_, width, scratch_);
    chees_update(s, gradient, weight_sum, next_step_size, c_.num_steps);
  }

  // The pooled acceptance statistic of all chains (pooled_acceptance.h), once every tile has
  // written its sums.
  __device__ double pooled_accept(const double* tile_accept) const {
    const double x = block_pairwise_sum(tile_accept, tiles_, 1, scratch_);
    const double w = block_pairwise_sum(tile_accept + tiles_, tiles_, 1, scratch_);
    return pooled_acceptance(x, w, p_.harmonic_acceptance);
  }

  // The pooled inverse mass from every chain's window of `draws` draws (mass_matrix.h's geometric
  // mean of the chains' window variances), and fresh windows: the chains' log variances summed,
  // then their counts, each per tile and then over the tiles.
  __device__ void update_inverse_mass(cg::grid_group& grid, double draws) {
    sum_tile_columns([&](int64_t chain, int64_t j) {
      return window_log_variance(p_.window_m2[chain * c_.dim + j], draws).log_variance;
    }, p_.tile_moments, c_.dim);
    grid.sync();
    for (int64_t j = blockIdx.x; j < c_.dim; j += gridDim.x) {
      const double total = block_pairwise_sum(p_.tile_moments + j, tiles_, c_.dim, scratch_);
      if (threadIdx.x == 0) p_.log_variance_sum[j] = total;
    }
    grid.sync();
    sum_tile_columns([&](int64_t chain, int64_t j) {
      const double counted = window_log_variance(p_.window_m2[chain * c_.dim + j], draws).counted;
      p_.window_mean[chain * c_.dim + j] = 0.0;
      p_.window_m2[chain * c_.dim + j] = 0.0;
      return counted;
    }, p_.tile_moments, c_.dim);
    grid.sync();
    const double pooled_draws = draws * static_cast<double>(c_.batch);
    for (int64_t j = blockIdx.x; j < c_.dim; j += gridDim.x) {
      const double counted = block_pairwise_sum(p_.tile_moments + j, tiles_, c_.dim, scratch_);
      if (threadIdx.x == 0) {
        c_.inv_mass[j] =
            adapted_inverse_mass(pooled_window_variance(p_.log_variance_sum[j], counted),
                                 pooled_draws, inv_mass_[j]);
      }
    }
    grid.sync();
    if constexpr (!DENSE) {
      for (int64_t j = threadIdx.x; j < c_.dim; j += blockDim.x) inv_mass_[j] = c_.inv_mass[j];
    }
    __syncthreads();
  }

 private:
  // A chain's carried force lives in p_.carried_force between transitions: f [B, d], then u [B].
  __device__ void load_carry(const TileSeat<GROUP>& at, GroupForceCarry<Target, CHUNKS>& carry) {
    const int64_t row = at.seat.live ? at.chain : 0;
    load_group_row<scalar_t, GROUP, CHUNKS>(p_.carried_force + row * c_.dim, at.seat, c_.dim,
                                            false, scalar_t(0), carry.f.v);
    carry.u = p_.carried_force[c_.batch * c_.dim + row];
  }

  __device__ void store_carry(const TileSeat<GROUP>& at,
                              const GroupForceCarry<Target, CHUNKS>& carry) {
    store_group_row<scalar_t, GROUP, CHUNKS>(p_.carried_force + at.chain * c_.dim, at.seat,
                                             c_.dim, false, carry.f.v);
    if (at.seat.lane == 0) p_.carried_force[c_.batch * c_.dim + at.chain] = carry.u;
  }

  template <class Mass>
  __device__ void fold_into_window(const TileSeat<GROUP>& at, const scalar_t (&q)[CHUNKS][4],
                                   int64_t draws, const Mass& mass) {
    const double inv_count = 1.0 / static_cast<double>(draws);
    if constexpr (DENSE) {
      group_comoment_update<GROUP, CHUNKS>(at.seat, static_cast<int>(c_.dim),
                                           p_.window_mean + at.chain * c_.dim,
                                           p_.window_m2 + at.chain * c_.dim * c_.dim, q, inv_count,
                                           mass.scratch);
    } else {
#pragma unroll
      for (int k = 0; k < CHUNKS; ++k) {
        const int64_t j0 = at.seat.chunk_start(k, GROUP);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (j0 + e >= c_.dim) continue;
          const int64_t at_j = at.chain * c_.dim + j0 + e;
          welford_update(p_.window_mean[at_j], p_.window_m2[at_j], static_cast<double>(q[k][e]),
                         inv_count);
        }
      }
    }
  }

  // out[tile * row_stride + j] = the pairwise sum over the tile's chains of value(chain, j) (zero
  // for chains past the batch), for the block's tiles; value(chain, j) is called once for each.
  // A column is summed by `width` lanes of one warp (min(chains_, 32)), each lane the pairwise sum
  // of SEGMENT consecutive chains in registers, then a butterfly over the lanes: the subtrees of
  // the canonical pairwise order, so the bits of one thread adding the tile's chains in turn, but
  // with every warp of the block at work (a tile of 256 one-thread chains summed by one thread per
  // column took longer than the transition itself). SEGMENT, chains_ / 32 or 1, is a template
  // argument (the block's size is known at run time only) so that the segment stays in registers.
  template <int SEGMENT = (kMaxChains + kWarp - 1) / kWarp, typename Value>
  __device__ void sum_tile_columns(Value value, double* out, int64_t row_stride) {
    if constexpr (SEGMENT > 1) {
      if (chains_ < SEGMENT * kWarp) {
        return sum_tile_columns<SEGMENT / 2>(value, out, row_stride);
      }
    }
    const int width = chains_ < kWarp ? chains_ : kWarp, columns_per_warp = kWarp / width;
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    const int64_t warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
    const int part = lane % width;
    for (int64_t tile = blockIdx.x; tile < tiles_; tile += gridDim.x) {
      for (int64_t base = warp * columns_per_warp; base < c_.dim;
           base += warps * columns_per_warp) {  // the same trip count in every lane of the warp
        const int64_t j = base + lane / width;
        double v[SEGMENT];
#pragma unroll
        for (int k = 0; k < SEGMENT; ++k) {
          const int64_t chain = tile * chains_ + part * SEGMENT + k;
          v[k] = j < c_.dim && chain < c_.batch ? value(chain, j) : 0.0;
        }
#pragma unroll
        for (int w = 1; w < SEGMENT; w *= 2) {
#pragma unroll
          for (int k = 0; k + w < SEGMENT; k += 2 * w) v[k] = v[k] + v[k + w];
        }
        double sum = v[0];
#pragma unroll
        for (int offset = 1; offset < kWarp; offset *= 2) {
          if (offset < width) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
        }
        if (part == 0 && j < c_.dim) out[tile * row_stride + j] = sum;
      }
    }
  }

  const Target& target_;
  const WarmupParams<scalar_t>& p_;
  const ChainBatch<scalar_t>& c_;
  double* scratch_;
  int chains_;  // a tile's: the block's (chain_block's choice)
  int64_t tiles_;
  scalar_t* inv_mass_;  // shared memory [dim]
  scalar_t* x_shared_;  // a dense target's position vector of this thread's chain
};

// Blocks of 256 threads per SM a target's one-chunk cooperative kernel is compiled for (its
// __launch_bounds__ minimum; 2 caps a thread at 128 registers). Its grid is what stays resident,
// each block looping over tiles with the state in memory, so residency is its parallelism. 1: the
// compiler sizes the registers. A target whose kernel fits without spilling specialises this
// where it is instantiated (builtin_instances.cuh).
template <class Target>
struct PooledBlocksPerSm {
  static constexpr int value = 1;
};

// (A dense mass's kernel keeps the compiler's register count: capped, it spilled.)
template <class Target, int GROUP, int CHUNKS, bool DENSE = false>
__global__ void __launch_bounds__(GroupGeometry<GROUP>::kThreads,
                                  CHUNKS == 1 && !DENSE ? PooledBlocksPerSm<Target>::value : 1)
    warmup_pooled_kernel(const Target target, const WarmupParams<typename Target::Scalar> p) {
  __shared__ double scratch[GroupGeometry<GROUP>::kThreads / kWarp];
  cg::grid_group grid = cg::this_grid();
  PooledWarmup<Target, GROUP, CHUNKS, DENSE> warmup(target, p, scratch);
  double step_size = p.chains.step_size[0];
  DualAveraging averaging = p.dual_averaging[0];
  ChEESState chees = p.chees != nullptr ? *p.chees : ChEESState{};
  const int64_t tiles = warmup.tiles();

  for (int64_t t = p.chains.first_transition;
       t < p.chains.first_transition + p.chains.num_transitions; ++t) {
    double* tile_accept = p.tile_accept + (t % 2) * 2 * tiles;
    warmup.run_tiles(t, step_size,
                     p.chees != nullptr ? chees.trajectory_length : p.chains.trajectory_length,
                     tile_accept);
    grid.sync();
    const int64_t i = t - p.warmup_start;
    if (p.adapt_step_size) {
      const double accept_stat = warmup.pooled_accept(tile_accept);
      step_size = warmup_step_size_update(averaging, p.windows, i, p.adapt_mass_matrix,
                                          p.chains.batch == 1, accept_stat, p.target_accept,
                                          step_size);
    }
    if (p.chees != nullptr) warmup.adapt_trajectory_length(grid, chees, step_size);
    if (!DENSE && p.adapt_mass_matrix && ends_slow_window(p.windows, i)) {
      const SlowWindow window = slow_window_of(p.windows, i);
      warmup.update_inverse_mass(grid, static_cast<double>(i - window.start + 1));
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    p.chains.step_size[0] = step_size;
    p.dual_averaging[0] = averaging;
    if (p.chees != nullptr) *p.chees = chees;
  }
}

}  // namespace pooled_warmup

// DENSE: the shapes of dims up to kMaxDenseMassDim only (cudaErrorInvalidValue for another, which
// the op's checks exclude).
template <class Target, bool DENSE = false>
cudaError_t launch_warmup_pooled(const Target& target,
                                 const WarmupParams<typename Target::Scalar>& p,
                                 cudaStream_t stream) {
  using scalar_t = typename Target::Scalar;
  cudaError_t status = cudaErrorInvalidValue;
  with_chain_shape<Target>(p.chains.dim, [&](auto group, auto chunks) {
    constexpr int G = decltype(group)::value, C = decltype(chunks)::value;
    if constexpr (!DENSE || kDenseMassShape<Target, G, C>) {
      const auto kernel = pooled_warmup::warmup_pooled_kernel<Target, G, C, DENSE>;
      // A tile is a block's chains (the host sized the scratch by the same choice).
      const ChainBlock block = chain_launch_block<Target>(p.chains);
      const int64_t tiles = (p.chains.batch + block.chains - 1) / block.chains;
      const size_t shared = ((p.chains.dim + 3) / 4 * 4) * sizeof(scalar_t) +
                            target_shared_bytes<Target>(p.chains.dim, block.chains);
      int per_sm = 0;
      status =
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block.threads, shared);
      if (status != cudaSuccess) return;
      const int64_t resident = static_cast<int64_t>(per_sm) * p.chains.sm_count;
      if (resident == 0) {
        status = cudaErrorCooperativeLaunchTooLarge;
        return;
      }
      const dim3 blocks(static_cast<unsigned>(tiles < resident ? tiles : resident));
      void* args[] = {const_cast<Target*>(&target), const_cast<WarmupParams<scalar_t>*>(&p)};
      status = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), blocks,
                                           dim3(block.threads), args, shared, stream);
    }
  });
  return status;
}

}  // namespace fused_hmc
