// What the host code (g++) hands the CUDA launchers (nvcc): plain parameter structs and the
// launcher entry points. Launchers never throw: they return the launch's cudaError_t, and every
// argument check and error report happens in the g++-compiled callers.
#pragma once

#include <ATen/cuda/PhiloxCudaState.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "../math/gaussian_hmc.h"
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
  // kExternal: momentum [B, d] contiguous and uniform [B] (float32, or scalar_t).
  const scalar_t* momentum;
  const void* uniform;
  bool uniform_is_float;
  // kPhilox / kTorchStream: the generator reservation, or an explicit philox seed.
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

template <typename scalar_t>
struct RunChainsParams {
  scalar_t* q;           // [B, d] chain state, read and written
  const scalar_t* mu;    // [d]
  scalar_t* samples;     // [B, K, d] kept draws of this call (any strides), or null
  int64_t sample_chain_stride, sample_draw_stride, sample_dim_stride;
  bool samples_vectorized;   // unit dim stride and every row 16-byte aligned
  double* mean;              // [B, d] Welford mean, read and written
  double* m2;                // [B, d] Welford sum of squared deviations, read and written
  int64_t* accept_count;     // [B]
  double* accept_prob_sum;   // [B]
  int64_t batch, dim;
  StepSizes<scalar_t> steps;
  int num_steps;
  PhiloxStream stream;
  int64_t chain_offset, first_transition, num_transitions, thin, kept_before;
  bool vectorized;  // rows of q and mu 16-byte aligned
};

// Transitions [first_transition, first_transition + num_transitions) of every chain.
template <typename scalar_t>
cudaError_t launch_run_chains(const RunChainsParams<scalar_t>& p, cudaStream_t stream);

}  // namespace fused_hmc
