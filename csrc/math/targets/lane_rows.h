// A model whose log density is a sum over data rows, written as a share (CppTarget's rows form,
// docs/TARGETS.md): log p is always formed as kRowPartials = 32 strided partial sums, partial p
// being the share of rows p, p + 32, p + 64, ... (partial 0 also has the terms of no row), added
// by ONE fixed balanced pairwise tree over p = 0..31 (adjacent first: ((s0 + s1) + (s2 + s3)) +
// ...). A chain on G lanes (G | 32) has lane l evaluate partials [l * 32 / G, (l + 1) * 32 / G)
// and add them by the lower levels of that tree (sum_partials here); the lanes' butterfly
// (cuda/lane_group.cuh, xor offsets 1, 2, 4, ...) forms the upper levels. IEEE addition
// commutes, so every lane ends with the bits of the one tree, and one thread (the CPU, G = 1)
// forms it whole: the draws do not depend on the lanes. The tree's additions are tree_add, which
// nvcc never contracts into an FMA with a product from an inlined share (that would make the bits
// depend on where the partials are added).
#pragma once

#include <stdint.h>

#include "../fp/host_device.h"

// nvcc's loop pragmas (g++ has no "unroll" pragma): the levels unrolled (compile-time stack
// indices), the loop over the partials kept (one copy of the share's code).
#if defined(__CUDACC__)
#define FHMC_ROWS_UNROLLED _Pragma("unroll")
#define FHMC_ROWS_LOOP_KEPT _Pragma("unroll 1")
#else
#define FHMC_ROWS_UNROLLED
#define FHMC_ROWS_LOOP_KEPT
#endif

namespace fused_hmc {

// The number of strided partial sums a rows-form log p is formed from (also rows.step).
constexpr int kRowPartials = 32;

// The rows of the data a share covers: first, first + step, ... (step = kRowPartials).
struct Rows {
  int64_t first;
  int64_t step;
};

// a + b rounded once, never fused with a neighbouring product.
FHMC_HD float tree_add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

FHMC_HD double tree_add(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

FHMC_HD constexpr int log2_of(int n) { return n <= 1 ? 0 : 1 + log2_of(n / 2); }

// The sum of partials [first, first + N) (share(Rows) -> S), by the pairwise tree over them. A
// loop over the partials (one copy of the share's code) with a stack of the finished left
// subtrees: after partial i, the subtrees whose last leaf it is are closed (one per trailing one
// bit of i), each as left + right; stack level k holds a finished subtree of 2^k partials. The
// levels are compile-time indices, so the stack can stay in registers.
template <int N, typename S, class Share>
FHMC_HD S sum_partials(const Share& share, int first) {
  static_assert(N >= 1 && N <= kRowPartials && (N & (N - 1)) == 0,
                "the partials a lane adds are a power of two, at most kRowPartials");
  if constexpr (N == 1) {
    return share(Rows{first, kRowPartials});
  } else {
    S stack[log2_of(N)];
    FHMC_ROWS_LOOP_KEPT
    for (int i = 0; i < N; ++i) {
      S current = share(Rows{first + i, kRowPartials});
      FHMC_ROWS_UNROLLED
      for (int k = 0; k < log2_of(N); ++k) {
        if (!((i >> k) & 1)) {
          stack[k] = current;
          break;
        }
        current = tree_add(stack[k], current);
      }
      if (i == N - 1) return current;  // every level closed: the whole tree
    }
    return S(0);  // not reached: the last partial returns
  }
}

// The same for share(Rows, S* grad) -> S writing its partial of the gradient into grad[0..DIM):
// returns the summed value and leaves the summed gradient in grad. Memory: log2(N) finished
// subtrees' gradients and the current one.
template <int N, int DIM, typename S, class Share>
FHMC_HD S sum_partials_with_gradient(const Share& share, S* grad, int first) {
  static_assert(N >= 1 && N <= kRowPartials && (N & (N - 1)) == 0,
                "the partials a lane adds are a power of two, at most kRowPartials");
  if constexpr (N == 1) {
    return share(Rows{first, kRowPartials}, grad);
  } else {
    constexpr int kLevels = log2_of(N);
    S stack[kLevels];
    S stack_grad[kLevels][DIM];
    FHMC_ROWS_LOOP_KEPT
    for (int i = 0; i < N; ++i) {
      S current = share(Rows{first + i, kRowPartials}, grad);
      FHMC_ROWS_UNROLLED
      for (int k = 0; k < kLevels; ++k) {
        if (!((i >> k) & 1)) {
          stack[k] = current;
          FHMC_ROWS_UNROLLED
          for (int j = 0; j < DIM; ++j) stack_grad[k][j] = grad[j];
          break;
        }
        current = tree_add(stack[k], current);
        FHMC_ROWS_UNROLLED
        for (int j = 0; j < DIM; ++j) grad[j] = tree_add(stack_grad[k][j], grad[j]);
      }
      if (i == N - 1) return current;  // every level closed: the whole tree
    }
    return S(0);  // not reached: the last partial returns
  }
}

}  // namespace fused_hmc
