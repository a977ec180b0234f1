// The warm-up's adaptation updates after one transition, in one place for every kernel (the CPU
// chains, the CUDA per-chain and pooled kernels) and for the pooled_update op, which applies them
// from statistics reduced outside the kernels (the chains of several processes).
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "../hmc/mass_matrix.h"
#include "adaptation_windows.h"
#include "dual_averaging.h"
#include "pooled_acceptance.h"
#include "trajectory_adaptation.h"

namespace fused_hmc {

// Whether the dual-averaging run that started at warm-up iteration `start` is the terminal fast
// interval's own (the run that restarts after the last slow window and sets the final step size;
// none when the interval is too short for a restart: adaptation_windows.h).
FHMC_HD bool is_terminal_run(const WarmupWindows& windows, int64_t start) {
  return windows.term_buffer > 0 && start == windows.num_warmup - windows.term_buffer;
}

// The step size after warm-up iteration i (counted from the warm-up's start) with acceptance
// statistic `accept_stat`: dual averaging toward target_accept, restarted after each slow window
// when the inverse mass is adapted, and exp(x_bar) after the last iteration.
//
// A step size driven by one chain's statistic (per_chain: a per-chain warm-up, or a batch of one
// chain) runs the terminal interval with gamma = 0.25 instead of Stan's 0.05. One chain's
// statistic is noisy (sd about 0.3 per static-HMC transition), so with Stan's gain of about
// 1 / (gamma sqrt(n)) the iterates x scatter widely over the 50 terminal iterations; their mean
// acceptance is driven to the target, and since acceptance is concave in log eps there, exp(x_bar)
// accepts more (Jensen): 0.93-0.96 for target 0.8 (issue 32). A larger gamma damps the scatter,
// leaving the pull of the restart's mu = log(10 eps) above the root to balance the rest; measured
// on Gaussians of dim 2 .. 50 and the library models (benchmarks/probes/final_acceptance.py). A
// pooled statistic (the mean over chains) has no such scatter and keeps Stan's gamma (the
// pooled_update op's too: it pools several processes).
FHMC_HD double warmup_step_size_update(DualAveraging& averaging, const WarmupWindows& windows,
                                       int64_t i, bool adapt_mass_matrix, bool per_chain,
                                       double accept_stat, double target_accept,
                                       double step_size) {
  const int64_t start = dual_averaging_start(windows, i, adapt_mass_matrix);
  const double gamma = per_chain && is_terminal_run(windows, start) ? kTerminalDualAveragingGamma
                                                                    : kDualAveragingGamma;
  const int64_t n = i - start + 1;
  step_size = dual_averaging_update(averaging, n, accept_stat, target_accept, step_size, gamma);
  if (i == windows.num_warmup - 1) step_size = dual_averaging_final(averaging);
  return step_size;
}

// One pooled update from statistics of every chain (the pooled_update op): the sums of the
// chains' acceptance terms at iteration i (pooled_acceptance.h), ChEES's weighted gradient and
// weight sums, and at the end of a slow window the pooled variance of its draws.
template <typename scalar_t>
struct PooledUpdateParams {
  double* step_size;                // [1]
  DualAveraging* dual_averaging;    // [1]
  scalar_t* inv_mass;               // [dim]
  const double* acceptance_terms;   // [2]: the chains' summed terms (x, w) (pooled_acceptance.h)
  bool harmonic_acceptance;         // the statistic the terms form: the harmonic mean, or the mean
  const double* variance;           // [dim], or null: no inverse-mass update
  double variance_draws;            // the draws behind `variance` (Stan's regularisation)
  ChEESState* chees;                // or null: no trajectory-length update
  const double* chees_sums;         // [2]: sum of omega g, sum of omega (trajectory_adaptation.h)
  int max_leapfrog_steps;           // ChEES's cap
  int64_t dim;
  WarmupWindows windows;
  int64_t iteration;
  double target_accept;
  bool adapt_step_size, adapt_mass_matrix;
};

// The update as the pooled kernels order it (the step size, then ChEES's with the new step size,
// then the inverse mass), coordinates j0, j0 + stride, ... of the inverse mass by this thread, the
// step size and ChEES by the owner.
template <typename scalar_t>
FHMC_HD void apply_pooled_update(const PooledUpdateParams<scalar_t>& p, bool owner, int64_t j0,
                                 int64_t stride) {
  if (owner && p.adapt_step_size) {
    const double statistic = pooled_acceptance(p.acceptance_terms[0], p.acceptance_terms[1],
                                               p.harmonic_acceptance);
    *p.step_size = warmup_step_size_update(*p.dual_averaging, p.windows, p.iteration,
                                           p.adapt_mass_matrix, false, statistic, p.target_accept,
                                           *p.step_size);
  }
  if (owner && p.chees != nullptr) {
    chees_update(*p.chees, p.chees_sums[0], p.chees_sums[1], *p.step_size, p.max_leapfrog_steps);
  }
  if (p.variance == nullptr) return;
  for (int64_t j = j0; j < p.dim; j += stride) {
    p.inv_mass[j] = adapted_inverse_mass(p.variance[j], p.variance_draws, p.inv_mass[j]);
  }
}

}  // namespace fused_hmc
