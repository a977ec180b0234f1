#include "tuned_request.h"

#include <cmath>
#include <limits>

#include "check_message.h"
#include "math/gaussian_targets.h"
#include "transition_request.h"

namespace fused_hmc {

void check_tuned_chain_inputs(const at::Tensor& q, int64_t target_kind, const at::Tensor& mu,
                              const at::Tensor& precision, const at::Tensor& step_size,
                              const at::Tensor& inv_mass, double jitter,
                              int64_t num_leapfrog_steps) {
  check_transition_inputs(q, mu, 1.0, num_leapfrog_steps);  // step sizes are per chain, below
  FHMC_CHECK_VALUE(q.is_contiguous(), "q (the chain state, updated in place) must be contiguous");
  const int64_t batch = q.size(0), dim = q.size(1);
  FHMC_CHECK_VALUE(mu.is_contiguous(), "mu must be contiguous");
  FHMC_CHECK_VALUE(target_kind >= 0 && target_kind <= 2,
                   "target_kind must be 0 (standard), 1 (diagonal) or 2 (dense), got ",
                   target_kind);
  const auto kind = static_cast<TargetKind>(target_kind);
  if (kind == TargetKind::kStandard) {
    FHMC_CHECK_VALUE(precision.numel() == 0,
                     "precision must be empty for the standard target, got shape ",
                     precision.sizes());
  } else {
    FHMC_CHECK_TYPE(precision.scalar_type() == q.scalar_type(), "precision must have q's dtype ",
                    q.scalar_type(), ", got ", precision.scalar_type());
    FHMC_CHECK_VALUE(precision.device() == q.device(), "precision must be on q's device ",
                     q.device(), ", got ", precision.device());
    FHMC_CHECK_VALUE(precision.is_contiguous(), "precision must be contiguous");
  }
  if (kind == TargetKind::kDiagonal) {
    FHMC_CHECK_VALUE(precision.dim() == 1 && precision.size(0) == dim,
                     "precision of a diagonal target must have shape [", dim, "], got ",
                     precision.sizes());
  }
  if (kind == TargetKind::kDense) {
    FHMC_CHECK_VALUE(dim <= kMaxDenseDim, "a dense Gaussian target supports dim <= ",
                     kMaxDenseDim, ", got dim ", dim,
                     "; use a diagonal target or reduce the dimension");
    FHMC_CHECK_VALUE(precision.dim() == 2 && precision.size(0) == dim && precision.size(1) == dim,
                     "precision of a dense target must have shape [", dim, ", ", dim, "], got ",
                     precision.sizes());
  }
  FHMC_CHECK_VALUE(step_size.dim() == 1 && (step_size.size(0) == 1 || step_size.size(0) == batch),
                   "step_size must have shape [1] (shared) or [", batch, "] (one per chain), got ",
                   step_size.sizes());
  const int64_t groups = step_size.size(0);
  check_chain_buffer(q, step_size, "step_size", {groups}, at::kDouble);
  check_chain_buffer(q, inv_mass, "inv_mass", {groups, dim}, q.scalar_type());
  FHMC_CHECK_VALUE(std::isfinite(jitter) && jitter >= 0 && jitter < 1,
                   "jitter must be in [0, 1), got ", jitter);
}

void check_warmup_inputs(const at::Tensor& q, const at::Tensor& step_size, int64_t chain_offset,
                         int64_t first_transition, int64_t num_transitions, int64_t warmup_start,
                         int64_t num_warmup, int64_t init_buffer, int64_t base_window,
                         int64_t term_buffer, double target_accept,
                         const at::Tensor& dual_averaging, const at::Tensor& window_mean,
                         const at::Tensor& window_m2) {
  FHMC_CHECK_VALUE(chain_offset >= 0, "chain_offset must be >= 0, got ", chain_offset);
  FHMC_CHECK_VALUE(warmup_start >= 0, "warmup_start must be >= 0, got ", warmup_start);
  FHMC_CHECK_VALUE(num_warmup >= 0 &&
                       num_warmup <= std::numeric_limits<int64_t>::max() - warmup_start,
                   "num_warmup must be >= 0 with warmup_start + num_warmup in int64, got ",
                   num_warmup);
  FHMC_CHECK_VALUE(num_transitions >= 0, "num_transitions must be >= 0, got ", num_transitions);
  FHMC_CHECK_VALUE(first_transition >= warmup_start &&
                       first_transition - warmup_start <= num_warmup - num_transitions,
                   "warm-up transitions [", first_transition, ", ", first_transition,
                   " + ", num_transitions, ") must lie in the warm-up [", warmup_start, ", ",
                   warmup_start, " + ", num_warmup, ")");
  constexpr int64_t kMaxWindow = int64_t{1} << 40;  // keeps the window arithmetic in int64
  FHMC_CHECK_VALUE(init_buffer >= 0 && term_buffer >= 0 && base_window >= 1 &&
                       init_buffer <= kMaxWindow && term_buffer <= kMaxWindow &&
                       base_window <= kMaxWindow && num_warmup <= kMaxWindow,
                   "warm-up windows need init_buffer, term_buffer >= 0 and base_window >= 1 (and "
                   "all, with num_warmup, <= 2^40), got init_buffer ", init_buffer,
                   ", base_window ", base_window, ", term_buffer ", term_buffer);
  FHMC_CHECK_VALUE(std::isfinite(target_accept) && target_accept > 0 && target_accept < 1,
                   "target_accept must be in (0, 1), got ", target_accept);
  const int64_t batch = q.size(0), dim = q.size(1);
  check_chain_buffer(q, dual_averaging, "dual_averaging", {step_size.size(0), 3}, at::kDouble);
  check_chain_buffer(q, window_mean, "window_mean", {batch, dim}, at::kDouble, true);
  check_chain_buffer(q, window_m2, "window_m2", {batch, dim}, at::kDouble, true);
}

}  // namespace fused_hmc
