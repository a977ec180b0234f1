// A model whose log density is a sum over data rows, written as a share (CppTarget's rows form,
// docs/TARGETS.md, docs/LANES.md): log p is always formed as P strided partial sums, partial p
// being the share of rows p, p + P, p + 2P, ... (partial 0 also has the terms of no row), added by
// ONE fixed balanced pairwise tree over p = 0..P-1 (adjacent first: ((s0 + s1) + (s2 + s3)) +
// ...). P is chosen from the data's rows alone (fused_hmc/lanes.py's row_partials: kRowPartials
// = 32, or kMaxRowPartials = 256 for large data), never from the lanes or the GPU. A chain on G
// lanes (G | P) has lane l evaluate partials [l * P / G, (l + 1) * P / G) and add them by the
// lower levels of that tree (sum_partials here); the lanes' butterfly (cuda/lane_group.cuh, xor
// offsets 1, 2, 4, ..., 16) and, for a block of G > 32 lanes, the warps' sums in shared memory
// (adjacent warps first) form the upper levels. IEEE addition commutes, so every lane ends with
// the bits of the one tree, and one thread (the CPU, G = 1) forms it whole: the draws do not
// depend on the lanes. The tree's additions are tree_add, which
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

// The number of strided partial sums P a rows-form log p is formed from (also rows.step): 32 for
// ordinary data, kMaxRowPartials for large data (so that a block of up to 256 lanes shares them).
constexpr int kRowPartials = 32;
constexpr int kMaxRowPartials = 256;

// The rows of the data a share covers: first, first + step, ... (step = P).
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

// The pairwise tree (adjacent first) over N values v[0], v[stride], .., v[(N - 1) stride], N a
// power of two: the tree's levels above a block's warps, each v a warp's sum
// (cuda/lane_group.cuh's block lanes).
template <int N, typename S>
FHMC_HD S adjacent_tree(const S* v, int stride) {
  static_assert(N >= 1 && (N & (N - 1)) == 0, "a power of two of values");
  S w[N];
  FHMC_ROWS_UNROLLED
  for (int i = 0; i < N; ++i) w[i] = v[i * stride];
  FHMC_ROWS_UNROLLED
  for (int step = 1; step < N; step *= 2) {
    FHMC_ROWS_UNROLLED
    for (int i = 0; i + step < N; i += 2 * step) w[i] = tree_add(w[i], w[i + step]);
  }
  return w[0];
}

// The sum of partials [first, first + N) of P (share(Rows) -> S), by the pairwise tree over them. A
// loop over the partials (one copy of the share's code) with a stack of the finished left
// subtrees: after partial i, the subtrees whose last leaf it is are closed (one per trailing one
// bit of i), each as left + right; stack level k holds a finished subtree of 2^k partials. The
// levels are compile-time indices, so the stack can stay in registers.
template <int N, int P, typename S, class Share>
FHMC_HD S sum_partials(const Share& share, int first) {
  static_assert(P >= 1 && P <= kMaxRowPartials && (P & (P - 1)) == 0,
                "the partials are a power of two, at most kMaxRowPartials");
  static_assert(N >= 1 && N <= P && (N & (N - 1)) == 0,
                "the partials a lane adds are a power of two, at most P");
  if constexpr (N == 1) {
    return share(Rows{first, P});
  } else {
    S stack[log2_of(N)];
    FHMC_ROWS_LOOP_KEPT
    for (int i = 0; i < N; ++i) {
      S current = share(Rows{first + i, P});
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
template <int N, int P, int DIM, typename S, class Share>
FHMC_HD S sum_partials_with_gradient(const Share& share, S* grad, int first) {
  static_assert(P >= 1 && P <= kMaxRowPartials && (P & (P - 1)) == 0,
                "the partials are a power of two, at most kMaxRowPartials");
  static_assert(N >= 1 && N <= P && (N & (N - 1)) == 0,
                "the partials a lane adds are a power of two, at most P");
  if constexpr (N == 1) {
    return share(Rows{first, P}, grad);
  } else {
    constexpr int kLevels = log2_of(N);
    S stack[kLevels];
    S stack_grad[kLevels][DIM];
    FHMC_ROWS_LOOP_KEPT
    for (int i = 0; i < N; ++i) {
      S current = share(Rows{first + i, P}, grad);
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
