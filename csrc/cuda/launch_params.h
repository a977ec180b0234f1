// What the host code (g++) hands the CUDA launchers (nvcc): plain parameter structs and the
// launcher entry points. Launchers never throw: they return the launch's cudaError_t, and every
// argument check and error report happens in the g++-compiled callers.
#pragma once

#include <ATen/cuda/PhiloxCudaState.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "../math/adaptation_windows.h"
#include "../math/dual_averaging.h"
#include "../math/gaussian_hmc.h"
#include "../math/gaussian_targets.h"
#include "../math/noise_streams.h"

namespace fused_hmc {

// Rows can be read 16 bytes at a time when every row starts 16-byte aligned.
inline bool rows_vectorizable(const void* base, int64_t dim, int64_t itemsize) {
  return dim % 4 == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0 && (dim * itemsize) % 16 == 0;
}


enum class NoiseSource { kExternal, kPhilox, kTorchStream };

template <typename scalar_t>
struct TransitionParams {
  const scalar_t* q;    // [B, d] contiguous, read-only
  const scalar_t* mu;   // [d], read-only
  scalar_t* q_new;      // [B, d] contiguous, written
  bool* accepted;       // [B], written
  int64_t batch;
  int64_t dim;
  StepSizes<scalar_t> steps;
  int num_steps;
  bool vectorized;  // every row of q, mu, q_new (and momentum) 16-byte aligned
  // kExternal: momentum [B, d] contiguous and uniform [B] (float32, or else float64).
  const scalar_t* momentum;
  const void* uniform;
  bool uniform_is_float;
  // kPhilox / kTorchStream: the generator reservation, or the key of an explicit seed
  // (math/stream_key.h).
  at::PhiloxCudaState rng_state;
  bool from_generator;
  uint64_t seed;
  uint64_t transition;
  uint64_t blocks_per_transition;
  // kTorchStream: torch's launch geometry for randn over B*d values and rand over B values, and
  // the layout of torch.randn_like(q) in elements.
  uint64_t randn_threads;
  uint64_t rand_threads;
  uint64_t randn_increment;
  int64_t chain_stride;
  int64_t dim_stride;
  // Optional trace of the noise actually used: momentum [B, d], uniform [B] float32.
  scalar_t* momentum_out;
  float* uniform_out;
};

// One transition of every chain.
template <typename scalar_t>
cudaError_t launch_transition(const TransitionParams<scalar_t>& p, NoiseSource source,
                              cudaStream_t stream);

// Raw Philox4x32-10 blocks: counters and out are [n, 4] uint32.
cudaError_t launch_philox_blocks(const uint32_t* counters, uint32_t* out, int64_t n, uint64_t key,
                                 cudaStream_t stream);

// Where a long run's kept draws go: samples[b, k, :] (any strides), or nowhere (null).
template <typename scalar_t>
struct DrawSink {
  scalar_t* samples;
  int64_t chain_stride, draw_stride, dim_stride;
  bool vectorized;  // unit dim stride and every row 16-byte aligned
};

// What a long run accumulates besides the state: kept draws, their float64 Welford moments, and
// the acceptance statistics of every transition.
template <typename scalar_t>
struct RunOutputs {
  DrawSink<scalar_t> sink;
  double* mean;              // [B, d] Welford mean, read and written
  double* m2;                // [B, d] Welford sum of squared deviations, read and written
  int64_t* accept_count;     // [B]
  double* accept_prob_sum;   // [B]
  int64_t thin, kept_before;
};

template <typename scalar_t>
struct RunChainsParams {
  scalar_t* q;           // [B, d] chain state, read and written
  const scalar_t* mu;    // [d]
  RunOutputs<scalar_t> out;
  int64_t batch, dim;
  StepSizes<scalar_t> steps;
  int num_steps;
  PhiloxStream stream;
  int64_t chain_offset, first_transition, num_transitions;
  bool vectorized;  // rows of q and mu 16-byte aligned
};

// Transitions [first_transition, first_transition + num_transitions) of every chain.
template <typename scalar_t>
cudaError_t launch_run_chains(const RunChainsParams<scalar_t>& p, cudaStream_t stream);

// The tuned samplers' chains (ops_schema.cpp): the target, step_size [G] float64 and inv_mass
// [G, d] (G = 1 or B), the jitter and the philox stream, and the range of transitions.
template <typename scalar_t>
struct TunedChainsParams {
  scalar_t* q;  // [B, d] contiguous chain state, read and written
  GaussianTarget<scalar_t> target;
  double* step_size;
  scalar_t* inv_mass;
  int64_t groups;
  double jitter;
  int num_steps;
  PhiloxStream stream;
  int64_t batch, dim, chain_offset, first_transition, num_transitions;
  bool vectorized;  // rows of q 16-byte aligned
};

template <typename scalar_t>
struct RunTunedParams {
  TunedChainsParams<scalar_t> chains;
  RunOutputs<scalar_t> out;
};

// warmup_chains' adaptation state; the scratch arrays serve the pooled (G = 1) kernel only.
template <typename scalar_t>
struct WarmupParams {
  TunedChainsParams<scalar_t> chains;
  WarmupWindows windows;
  int64_t warmup_start;
  double target_accept;
  bool adapt_step_size, adapt_mass_matrix;
  DualAveraging* dual_averaging;  // [G]
  double* window_mean;            // [B, d]
  double* window_m2;              // [B, d]
  double* tile_accept;            // [2, tiles]: each tile's sum of acceptance statistics
  double* tile_moments;           // [tiles, d]: each tile's per-coordinate window sums
  double* grand_mean;             // [d]
  int sm_count;
};

// The tuned samplers' shared memory: a dense target's position vector of each chain of a block.
template <typename scalar_t>
inline size_t dense_shared_bytes(const TunedChainsParams<scalar_t>& p, int chains_per_block) {
  if (p.target.kind != TargetKind::kDense) return 0;
  return static_cast<size_t>(chains_per_block) * static_cast<size_t>(p.dim) * sizeof(scalar_t);
}

template <typename scalar_t>
cudaError_t launch_run_chains_tuned(const RunTunedParams<scalar_t>& p, cudaStream_t stream);

// One adaptation state per chain (G = B): an ordinary launch.
template <typename scalar_t>
cudaError_t launch_warmup_per_chain(const WarmupParams<scalar_t>& p, cudaStream_t stream);

// One pooled adaptation state (G = 1): a cooperative launch with grid-wide barriers. Its scratch
// arrays are sized by pooled_warmup_tiles() (group_shape.h).
template <typename scalar_t>
cudaError_t launch_warmup_pooled(const WarmupParams<scalar_t>& p, cudaStream_t stream);

}  // namespace fused_hmc
