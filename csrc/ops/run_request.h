// The run op's arguments (ops/schema.cpp states their semantics), gathered under their schema
// names and checked once for every backend (run_op.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "../math/targets/target.h"
#include "target_registry.h"

namespace fused_hmc {

struct RunRequest {
  at::Tensor q;
  const TargetEntry* target;
  std::vector<at::Tensor> target_tensors;
  std::vector<double> target_scalars;
  at::Tensor step_size, inv_mass;
  double jitter;
  int64_t num_leapfrog_steps, seed, chain_offset, first_transition, num_transitions, thin,
      kept_before;
  // Sampling: mean, m2, accept_count, accept_prob_sum (samples optional). Warm-up: dual_averaging,
  // window_mean, window_m2.
  std::optional<at::Tensor> samples, mean, m2, accept_count, accept_prob_sum;
  std::optional<at::Tensor> dual_averaging, window_mean, window_m2;
  int64_t warmup_start, num_warmup;
  std::vector<int64_t> windows;  // (init_buffer, base_window, term_buffer), or empty: Stan's
  double target_accept;
  bool adapt_step_size, adapt_mass_matrix;
  double trajectory_length;  // 0: num_leapfrog_steps steps; else jittered, capped by them
  std::optional<at::Tensor> chees, gradient_evaluations;
  std::optional<at::Tensor> trajectory_record;  // sampling only: [B, 3 d + 2] float64

  bool warmup() const { return dual_averaging.has_value(); }
  // inv_mass [G, d, d]: the Cholesky factors of a dense inverse mass (math/hmc/dense_mass.h).
  bool dense_mass() const { return inv_mass.dim() == 3; }
};

// Raises ValueError / TypeError naming the argument. Values that would need a device sync to
// inspect (positive step sizes and inverse masses, a positive definite precision) are the caller's
// preconditions; the Python driver checks them once.
void check_run_request(const RunRequest& r);

// The warm-up's length, windows ([] for Stan's, or [init_buffer, base_window, term_buffer]) and
// target acceptance, as the run op and the pooled_update op take them; and the windows they mean.
void check_warmup_schedule(int64_t num_warmup, const std::vector<int64_t>& windows,
                           double target_accept);
WarmupWindows warmup_windows_of(int64_t num_warmup, const std::vector<int64_t>& windows);

// The target's tensors and scalars as plain views (after check_run_request).
TargetTensors target_tensor_views(const RunRequest& r);

}  // namespace fused_hmc
