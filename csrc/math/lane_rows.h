// A model whose data rows are spread over a chain's lanes (CppTarget(..., lanes=G)): lane l of G
// evaluates the share of log p from rows l, l + G, l + 2G, ... (and, lane 0 alone, the terms of no
// row), and the chain's log p is the sum of the G shares. The CUDA kernels run the G lanes in G
// threads and add their shares by a butterfly over the lanes (cuda/tuned_group.cuh), which pairs
// adjacent lanes first; the CPU, and every one-thread evaluation, adds them in that very order
// here, so the sums have the same bits wherever they are formed (IEEE addition commutes, so the
// butterfly's lanes all hold these bits).
#pragma once

#include <stdint.h>

#include "host_device.h"

namespace fused_hmc {

// The rows of the data a lane's share covers: first, first + step, ... (step = the lanes).
struct Rows {
  int64_t first;
  int64_t step;
};

// The sum over lanes [first, first + N) of G of share(Rows) -> S, pairwise (halves, recursively).
template <int N, typename S, class Share>
FHMC_HD S sum_over_lanes(const Share& share, int first, int lanes) {
  static_assert(N >= 1 && (N & (N - 1)) == 0, "the lanes are a power of two");
  if constexpr (N == 1) {
    return share(Rows{first, lanes});
  } else {
    const S left = sum_over_lanes<N / 2, S>(share, first, lanes);
    return left + sum_over_lanes<N / 2, S>(share, first + N / 2, lanes);
  }
}

// The same for share(Rows, S* grad) -> S writing its share of the gradient into grad[0..DIM):
// returns the summed value and leaves the summed gradient in grad.
template <int N, int DIM, typename S, class Share>
FHMC_HD S sum_over_lanes_with_gradient(const Share& share, S* grad, int first, int lanes) {
  if constexpr (N == 1) {
    return share(Rows{first, lanes}, grad);
  } else {
    const S left = sum_over_lanes_with_gradient<N / 2, DIM, S>(share, grad, first, lanes);
    S right_grad[DIM];
    const S right =
        sum_over_lanes_with_gradient<N / 2, DIM, S>(share, right_grad, first + N / 2, lanes);
    for (int j = 0; j < DIM; ++j) grad[j] = grad[j] + right_grad[j];
    return left + right;
  }
}

}  // namespace fused_hmc
