// Device side of a long run's outputs (math/chain_params.h's RunOutputs): a group's kept draw, stored
// and folded into the Welford moments its threads hold in registers, and the per-chain moments'
// loads and stores (chain_kernels.cuh).
#pragma once

#include <cstdint>

#include "../math/chain_params.h"
#include "../math/stats/thinning.h"
#include "../math/stats/welford.h"
#include "chunk_io.cuh"

namespace fused_hmc {

// Loads (or stores) chain `chain`'s moments of the thread's chunks.
template <int GROUP, int CHUNKS, bool STORE, typename Moments>
__device__ __forceinline__ void transfer_moments(double* mean_rows, double* m2_rows, int64_t chain,
                                                 int lane, int64_t dim, Moments& mean,
                                                 Moments& m2) {
  const bool vectorized = dim % 4 == 0;  // float64 rows of 4k doubles stay 16-byte aligned
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = 4 * static_cast<int64_t>(lane + c * GROUP);
    if (j0 >= dim) continue;
    if constexpr (STORE) {
      store_chunk(mean_rows + chain * dim, j0, dim, vectorized, mean[c]);
      store_chunk(m2_rows + chain * dim, j0, dim, vectorized, m2[c]);
    } else {
      load_chunk(mean_rows + chain * dim, j0, dim, vectorized, mean[c]);
      load_chunk(m2_rows + chain * dim, j0, dim, vectorized, m2[c]);
    }
  }
}

// Stores a live chain's state q as this call's kept draw k (KeepClock::kept_index) and folds it
// into (mean, m2) with count kept_before + k + 1.
template <typename scalar_t, int GROUP, int CHUNKS>
__device__ __forceinline__ void keep_group_draw(const RunOutputs<scalar_t>& out, int64_t chain,
                                                int64_t k, int lane, int64_t dim,
                                                const scalar_t (&q)[CHUNKS][4],
                                                double (&mean)[CHUNKS][4],
                                                double (&m2)[CHUNKS][4]) {
  const double inv_count = 1.0 / static_cast<double>(out.kept_before + k + 1);
  const DrawSink<scalar_t>& sink = out.sink;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = 4 * static_cast<int64_t>(lane + c * GROUP);
    if (j0 >= dim) continue;
    if (sink.samples != nullptr) {
      scalar_t* row = sink.samples + chain * sink.chain_stride + k * sink.draw_stride;
      if (sink.dim_stride == 1) {
        store_chunk(row, j0, dim, sink.vectorized, q[c]);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (j0 + e < dim) row[(j0 + e) * sink.dim_stride] = q[c][e];
        }
      }
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (j0 + e < dim) welford_update(mean[c][e], m2[c][e], static_cast<double>(q[c][e]), inv_count);
    }
  }
}

}  // namespace fused_hmc
