// Where a chain's kept draws go on the CPU: samples[b, k, :] with any strides, or nowhere; and the
// per-chain Welford moments they are folded into.
#pragma once

#include <cstdint>

#include "../math/thinning.h"
#include "../math/welford.h"

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

// After transition t of chain b: when t is kept, stores the state q [dim] as this call's kept draw
// k = kept_before(t) - first_kept and folds it into mean/m2 [dim] with count kept_before_call + k + 1.
template <typename scalar_t>
void keep_draw(const SampleSink<scalar_t>& sink, int64_t b, int64_t t, int64_t thin,
               int64_t first_kept, int64_t kept_before_call, const scalar_t* q, int64_t dim,
               double* mean, double* m2) {
  if (!is_kept(t, thin)) return;
  const int64_t k = kept_before(t, thin) - first_kept;
  sink.store(b, k, q, dim);
  const double inv_count = 1.0 / static_cast<double>(kept_before_call + k + 1);
  for (int64_t j = 0; j < dim; ++j) {
    welford_update(mean[j], m2[j], static_cast<double>(q[j]), inv_count);
  }
}

}  // namespace fused_hmc
