// Host-side argument checks of the tuned samplers (run_chains_tuned, warmup_chains), shared by every
// backend that implements them. Values that would need a device sync to inspect (positive step sizes
// and inverse masses, a positive definite precision) are the caller's preconditions; the Python
// driver checks them once.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace fused_hmc {

// q [B, d] contiguous float32/float64 (the state, updated in place); target_kind 0 (standard),
// 1 (diagonal) or 2 (dense, d <= kMaxDenseDim); mu [d] of q's dtype; precision empty (kind 0), [d]
// (kind 1) or [d, d] (kind 2) contiguous of q's dtype; step_size [G] float64 and inv_mass [G, d] of
// q's dtype, contiguous, with G = 1 (shared by all chains) or G = B (one per chain); jitter in
// [0, 1); 1 <= num_leapfrog_steps <= 2^31 - 1; all on q's device. Raises ValueError / TypeError
// naming the argument.
void check_tuned_chain_inputs(const at::Tensor& q, int64_t target_kind, const at::Tensor& mu,
                              const at::Tensor& precision, const at::Tensor& step_size,
                              const at::Tensor& inv_mass, double jitter,
                              int64_t num_leapfrog_steps);

// warmup_chains' own arguments, after check_tuned_chain_inputs: chain_offset, warmup_start >= 0;
// warmup_start <= first_transition and first_transition + num_transitions <= warmup_start +
// num_warmup (a call covers warm-up iterations only); init_buffer, term_buffer >= 0 and
// base_window >= 1 (all <= 2^40); target_accept in (0, 1); dual_averaging
// [G, 3] float64; window_mean, window_m2 [B, d] float64; contiguous, on q's device.
void check_warmup_inputs(const at::Tensor& q, const at::Tensor& step_size, int64_t chain_offset,
                         int64_t first_transition, int64_t num_transitions, int64_t warmup_start,
                         int64_t num_warmup, int64_t init_buffer, int64_t base_window,
                         int64_t term_buffer, double target_accept,
                         const at::Tensor& dual_averaging, const at::Tensor& window_mean,
                         const at::Tensor& window_m2);

}  // namespace fused_hmc
