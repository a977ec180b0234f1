// A summation order for a chain's energy terms that no thread layout can change.
//
// Coordinates come in chunks of 4; a chunk's terms are added in order, and the chunk partials are
// combined by the pairwise tree over the chunk index (padded with zero chunks to a power of two),
// lowest index bit first. The CUDA kernels form exactly this tree whatever their group shape (lane
// butterflies cover the low index bits, a thread's chunks the high ones), and the CPU forms it with
// PairwiseChunkSum, so every build and every launch shape gets the same bits from the same terms.
#pragma once

#include <cstdint>

#include "../fp/host_device.h"

namespace fused_hmc {

constexpr int kChunkSize = 4;

// Streaming pairwise sum of chunk partials added in chunk order; at most 2^LEVELS - 1 of them (a
// kernel summing short runs picks a small LEVELS to keep the array in registers).
template <typename T, int LEVELS = 64>
struct PairwiseChunkSum {
  T level[LEVELS];    // level[i]: a completed subtree of 2^i chunks awaiting its right sibling
  uint64_t count = 0;

  FHMC_HD void add(T v) {
    const uint64_t k = count++;
    int i = 0;
    for (; (k >> i) & 1u; ++i) v = level[i] + v;
    level[i] = v;
  }

  // The tree's root; missing right siblings are zero subtrees, added as the kernels add them.
  FHMC_HD T total() const {
    T acc = T(0);
    bool started = false;
    for (int i = 0; i < LEVELS && (count >> i) != 0; ++i) {
      if ((count >> i) & 1u) {
        acc = started ? level[i] + acc : level[i] + T(0);
        started = true;
      } else if (started) {
        acc = acc + T(0);
      }
    }
    return acc;
  }
};

}  // namespace fused_hmc
