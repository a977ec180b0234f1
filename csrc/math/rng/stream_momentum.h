// A chain's whole momentum draw of one transition, for the CPU chains: noise_streams.h's
// stream_chunk_momentum for every chunk, the same numbers in the same places, but with the Philox
// blocks formed in batches first, in a loop over independent blocks that the compiler runs in
// vector lanes (Philox is integer arithmetic: any lane layout gives the same words), then
// Box-Muller's transforms over the batch, also in lanes for float32 (transforms.h: every lane
// applies the same IEEE operations, so the numbers are those of one block at a time).
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "noise_streams.h"
#include "transforms.h"

namespace fused_hmc {

constexpr int kMomentumBlockBatch = 16;

// z [dim] <- the standard normals of (chain, transition): momentum_blocks<scalar_t>(dim) blocks
// in block order, each giving NormalsPerBlock<scalar_t> coordinates (the last ones past dim
// dropped).
template <typename scalar_t>
FHMC_HD void stream_momentum(const PhiloxStream& s, uint64_t chain, uint64_t transition,
                            int64_t dim, scalar_t* z) {
  constexpr int kPerBlock = NormalsPerBlock<scalar_t>::value;
  const int64_t blocks = static_cast<int64_t>(momentum_blocks<scalar_t>(dim));
  const uint64_t first = s.base_block + transition * s.blocks_per_transition;
  const uint32_t k0 = static_cast<uint32_t>(s.seed), k1 = static_cast<uint32_t>(s.seed >> 32);
  const uint32_t sub_lo = static_cast<uint32_t>(chain), sub_hi = static_cast<uint32_t>(chain >> 32);
  for (int64_t b0 = 0; b0 < blocks; b0 += kMomentumBlockBatch) {
    const int n = static_cast<int>(blocks - b0 < kMomentumBlockBatch ? blocks - b0
                                                                     : kMomentumBlockBatch);
    uint32_t x[kMomentumBlockBatch], y[kMomentumBlockBatch], zw[kMomentumBlockBatch],
        w[kMomentumBlockBatch];
    // philox_block's counter (block index, subsequence) under the stream's key, lane by lane
    for (int i = 0; i < n; ++i) {
      const uint64_t index = first + static_cast<uint64_t>(b0 + i);
      const PhiloxBlock r = philox4x32_10(
          {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), sub_lo, sub_hi}, k0,
          k1);
      x[i] = r.x, y[i] = r.y, zw[i] = r.z, w[i] = r.w;
    }
    // Box-Muller over the batch: branch-free on the host (fp/host_transcendentals.h), so this loop
    // too runs in vector lanes; the normals land in place after.
    scalar_t normals[kMomentumBlockBatch][kPerBlock];
#if !defined(__CUDACC__)
#pragma omp simd
#endif
    for (int i = 0; i < n; ++i) block_normals(PhiloxBlock{x[i], y[i], zw[i], w[i]}, normals[i]);
    for (int i = 0; i < n; ++i) {
      const int64_t j0 = (b0 + i) * kPerBlock;
      for (int e = 0; e < kPerBlock && j0 + e < dim; ++e) z[j0 + e] = normals[i][e];
    }
  }
}

}  // namespace fused_hmc
