// A CUDA warm-up's slow window end with a dense mass, on the host: the kernels fold each chain's
// draws into its window's co-moments; the estimate that follows (dense_mass.h: the covariance,
// regularised and factorised; pooled, with its medians over chains to leave strays out) runs here
// on copies, with the functions and in the order of the CPU chains (cpu/warmup_chains.h), so both
// builds give the same factors. A few window ends per warm-up; each copies B d^2 float64 numbers.
#pragma once

#include <ATen/core/Tensor.h>

namespace fused_hmc {

// inv_mass [G, d, d] (each group's factor, updated in place; kept where the estimate is not
// finite and positive definite) from window_mean [B, d] and window_m2 [B, d, d] of `draws` draws
// each, pooled over the chains (G = 1) or each chain's own (G = B); then the windows are zeroed.
void end_dense_window(const at::Tensor& inv_mass, const at::Tensor& window_mean,
                      const at::Tensor& window_m2, double draws, bool pooled);

}  // namespace fused_hmc
