// A dense mass's slow-window end, on the host: the one sequence of estimate, regularisation and
// factorisation that the CPU chains (cpu/warmup_chains.h) and the CUDA op's host step
// (ops/dense_window_end.cpp) both run, so the two builds adapt alike.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "dense_mass.h"
#include "gradient_mass.h"

namespace fused_hmc {

// A window's moments over its chains: means [chains, d] and co-moments [chains, d, d], row-major.
struct DenseWindowMoments {
  const double* mean = nullptr;
  const double* m2 = nullptr;
};

// The new factor into factor [d, d] at the end of a window of n draws a chain: the covariance of
// the draws pooled over `chains` windows (pooled_dense_covariance, regularised for the n chains
// draws it counts) or of one chain's window (pooled false, chains 1; regularised for n). With
// gradients.m2 given, nutpie's gradient-based estimate from the draws' and the gradients'
// covariances (gradient_mass.h). The factor stays as it was when the estimate is not finite and
// positive definite; returns whether it changed.
template <typename scalar_t>
bool adapt_dense_window(DenseWindowMoments draws, DenseWindowMoments gradients, int64_t chains,
                        bool pooled, double n, int64_t d, scalar_t* factor) {
  std::vector<double> cov(d * d);
  const auto covariance = [&](DenseWindowMoments w, double* out) {
    if (pooled) {
      pooled_dense_covariance(w.mean, w.m2, chains, n, d, out);
    } else {
      window_covariance(w.m2, n, d, out);
    }
  };
  covariance(draws, cov.data());
  if (gradients.m2 != nullptr) {
    std::vector<double> g(d * d), sigma(d * d);
    covariance(gradients, g.data());
    // A failed estimate is NaN, so that the factor is kept (and the driver counts it).
    if (gradient_dense_covariance(cov.data(), g.data(), d, sigma.data())) {
      cov = sigma;
    } else {
      cov[0] = NAN;
    }
  }
  regularize_covariance(cov.data(), pooled ? n * static_cast<double>(chains) : n, d);
  return adapt_dense_factor(cov.data(), d, factor);
}

}  // namespace fused_hmc
