// Host-side argument checking and parsing shared by the CPU and CUDA implementations.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <optional>

namespace fused_hmc {

enum class NoiseMode { kPhilox, kTorch };

// "philox" or "torch"; anything else raises ValueError naming `rng`.
NoiseMode parse_noise_mode(c10::string_view rng);

// q [B, d] float32/float64 (any strides), mu [d] of q's dtype and device, step_size finite > 0,
// 1 <= num_leapfrog_steps <= INT32_MAX. Raises a ValueError/TypeError naming the argument.
void check_transition_inputs(const at::Tensor& q, const at::Tensor& mu, double step_size,
                             int64_t num_leapfrog_steps);

// momentum [B, d] of q's dtype, uniform [B] of float32 or q's dtype, both on q's device.
void check_noise_inputs(const at::Tensor& q, const at::Tensor& momentum, const at::Tensor& uniform);

// An explicit seed keys the philox stream; a generator reservation only covers transition 0.
void check_stream_selection(NoiseMode mode, std::optional<int64_t> seed, int64_t transition);

// The stride, in elements, between consecutive chains and coordinates of torch.randn_like(q):
// q's own layout when q is non-overlapping and dense, row-major otherwise.
struct NoiseLayout {
  int64_t chain_stride;
  int64_t dim_stride;
};
NoiseLayout randn_like_layout(const at::Tensor& q);

}  // namespace fused_hmc
