// What the host code (g++) hands the CUDA transition launchers (nvcc): plain parameter structs and
// the launcher entry points (the chain kernels' are math/chain_params.h). Launchers never throw:
// they return the launch's cudaError_t, and every argument check and error report happens in the
// g++-compiled callers.
#pragma once

#include <ATen/cuda/PhiloxCudaState.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "../math/chain_params.h"
#include "../math/rng/noise_streams.h"

namespace fused_hmc {

enum class NoiseSource { kExternal, kPhilox, kTorchStream };

template <typename scalar_t>
struct TransitionParams {
  const scalar_t* q;    // [B, d] contiguous, read-only
  const scalar_t* mu;   // [d], read-only
  scalar_t* q_new;      // [B, d] contiguous, written
  bool* accepted;       // [B], written
  int64_t batch;
  int64_t dim;
  double step_size;
  int num_steps;
  bool vectorized;  // every row of q, mu, q_new (and momentum) 16-byte aligned
  // kExternal: momentum [B, d] contiguous and uniform [B] (float32, or else float64).
  const scalar_t* momentum;
  const void* uniform;
  bool uniform_is_float;
  // kPhilox / kTorchStream: the generator reservation, or the key of an explicit seed
  // (math/rng/stream_key.h).
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

}  // namespace fused_hmc
