// Where a chain's kept draws go on the CPU: samples[b, k, :] with any strides, or nowhere.
#pragma once

#include <cstdint>

namespace fused_hmc {

template <typename scalar_t>
struct SampleSink {
  scalar_t* data;  // null when draws are not stored
  int64_t chain_stride, draw_stride, dim_stride;

  void store(int64_t b, int64_t k, const scalar_t* row, int64_t dim) const {
    if (data == nullptr) return;
    scalar_t* out = data + b * chain_stride + k * draw_stride;
    for (int64_t j = 0; j < dim; ++j) out[j * dim_stride] = row[j];
  }
};

}  // namespace fused_hmc
