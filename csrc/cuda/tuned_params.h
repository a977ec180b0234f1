// Host side (g++): the checks and launch view shared by the tuned samplers' CUDA ops
// (run_chains_tuned_cuda.cpp, warmup_chains_cuda.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "../math/stream_key.h"
#include "../transition_request.h"
#include "../tuned_request.h"
#include "group_shape.h"
#include "launch_params.h"

namespace fused_hmc {

// The checks every backend makes (tuned_request.h) plus the CUDA kernels' own limits.
inline void check_tuned_cuda_inputs(const at::Tensor& q, int64_t target_kind, const at::Tensor& mu,
                                    const at::Tensor& precision, const at::Tensor& step_size,
                                    const at::Tensor& inv_mass, double jitter,
                                    int64_t num_leapfrog_steps) {
  check_tuned_chain_inputs(q, target_kind, mu, precision, step_size, inv_mass, jitter,
                           num_leapfrog_steps);
  check_dim_supported(q, kMaxCudaDim, "CUDA");
  check_batch_launchable(q);
}

template <typename scalar_t>
TunedChainsParams<scalar_t> tuned_chains_params(const at::Tensor& q, int64_t target_kind,
                                                const at::Tensor& mu, const at::Tensor& precision,
                                                const at::Tensor& step_size,
                                                const at::Tensor& inv_mass, double jitter,
                                                int64_t num_leapfrog_steps, int64_t seed,
                                                int64_t chain_offset, int64_t first_transition,
                                                int64_t num_transitions) {
  TunedChainsParams<scalar_t> p{};
  p.q = q.data_ptr<scalar_t>();
  p.batch = q.size(0);
  p.dim = q.size(1);
  p.target = {static_cast<TargetKind>(target_kind), p.dim, mu.data_ptr<scalar_t>(),
              precision.numel() > 0 ? precision.data_ptr<scalar_t>() : nullptr};
  p.step_size = step_size.data_ptr<double>();
  p.inv_mass = inv_mass.data_ptr<scalar_t>();
  p.groups = step_size.size(0);
  p.jitter = jitter;
  p.num_steps = static_cast<int>(num_leapfrog_steps);
  p.stream = seeded_stream<scalar_t>(seed, p.dim);
  p.chain_offset = chain_offset;
  p.first_transition = first_transition;
  p.num_transitions = num_transitions;
  p.vectorized = rows_vectorizable(p.q, p.dim, sizeof(scalar_t));
  return p;
}

}  // namespace fused_hmc
