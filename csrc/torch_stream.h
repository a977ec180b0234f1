// The torch noise mode's host-side decisions, shared by the CPU and CUDA ops: the layout
// torch.randn_like(q) gets, whether the CUDA kernel's copy of torch's draws reproduces them, and
// torch's own draws, in the reference's order, for when it does not.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace fused_hmc {

// The stride, in elements, between consecutive chains and coordinates of torch.randn_like(q), as
// at::empty_like's preserve format lays it out: q's own strides when q is non-overlapping and
// dense, else dense strides in q's stride order (torch's own at::infer_dense_strides).
struct NoiseLayout {
  int64_t chain_stride;
  int64_t dim_stride;
};
NoiseLayout randn_like_layout(const at::Tensor& q);

// How rng="torch" draws for q [B, d]: in the kernel (noise_streams.h), or with torch itself when
// the kernel's one-launch copy cannot reproduce torch: torch.rand(B) would not be float32 (the
// default dtype), or torch would split a draw into several launches (torch_draw_is_split).
enum class TorchStreamPath { kInKernel, kTorchDrawsDefaultDtype, kTorchDrawsSplit };
TorchStreamPath torch_stream_path(const at::Tensor& q);

// The reference's draws from `generator` (default: the device's default generator): first
// torch.randn_like(q) [B, d] in q's dtype and randn_like's layout, then torch.rand(B) in the
// default dtype.
struct ReferenceNoise {
  at::Tensor momentum;
  at::Tensor uniform;
};
ReferenceNoise draw_reference_noise(const at::Tensor& q,
                                    const std::optional<at::Generator>& generator);

}  // namespace fused_hmc
