#include "torch_stream.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <c10/core/DefaultDtype.h>

#include "math/rng/noise_streams.h"

namespace fused_hmc {

NoiseLayout randn_like_layout(const at::Tensor& q) {
  if (q.is_non_overlapping_and_dense()) return {q.stride(0), q.stride(1)};
  const std::vector<int64_t> strides = at::infer_dense_strides(q.sizes(), q.strides());
  return {strides[0], strides[1]};
}

TorchStreamPath torch_stream_path(const at::Tensor& q) {
  if (c10::get_default_dtype_as_scalartype() != at::kFloat) {
    return TorchStreamPath::kTorchDrawsDefaultDtype;
  }
  const auto batch = static_cast<uint64_t>(q.size(0));
  if (torch_draw_is_split(static_cast<uint64_t>(q.numel()), q.element_size()) ||
      torch_draw_is_split(batch, sizeof(float))) {
    return TorchStreamPath::kTorchDrawsSplit;
  }
  return TorchStreamPath::kInKernel;
}

ReferenceNoise draw_reference_noise(const at::Tensor& q,
                                    const std::optional<at::Generator>& generator) {
  at::Tensor momentum = at::empty_like(q).normal_(0.0, 1.0, generator);
  at::Tensor uniform = at::empty({q.size(0)}, q.options().dtype(c10::get_default_dtype()))
                           .uniform_(0.0, 1.0, generator);
  return {momentum, uniform};
}

}  // namespace fused_hmc
