// The acceptance statistic of a pooled warm-up's dual averaging: one number for all chains, from
// each chain's acceptance probability a = min(1, exp(log_alpha)) at the transition, in one place
// for the CPU chains, the CUDA pooled kernel and the pooled_update op (the pooled warm-up over
// processes, whose ranks sum the terms in Python: sampling/pooled_ranks.acceptance_terms).
//
// Each chain adds two terms (x, w); the statistic is a function of their sums over the chains,
// taken in chunk_sum.h's pairwise order over the chain index:
//  - mean (the op's default; the sampler's for pooled=True): x = a, w = 1; statistic X / W, the
//    chains' mean acceptance.
//  - harmonic: x = 1 / a, w = 1, or (0, 0) for a divergent transition (TransitionDecision::
//    divergent); statistic W / X, the harmonic mean of the non-divergent chains' probabilities, or
//    0 when it is not a number in [0, 1] (a chain with a = 0, or every chain divergent). This is
//    the ChEES paper's statistic as BlackJAX's chees_adaptation forms it (Hoffman, Radul & Sountsov
//    2021), and the sampler's for ChEES: a chain that a step size strands (a near 0) pulls the
//    harmonic mean, and so the step size, down, where the mean lets the other chains outvote it.
#pragma once

#include "../fp/host_device.h"

namespace fused_hmc {

// A chain's acceptance at one transition: its probability min(1, exp(log_alpha)) and whether the
// transition diverged.
struct ChainAcceptance {
  double accept;
  bool divergent;
};

struct PooledAcceptanceTerms {
  double x, w;
};

FHMC_HD PooledAcceptanceTerms pooled_acceptance_terms(double accept, bool divergent,
                                                      bool harmonic) {
  if (!harmonic) return {accept, 1.0};
  if (divergent) return {0.0, 0.0};
  return {1.0 / accept, 1.0};
}

// The statistic from the sums of every chain's terms.
FHMC_HD double pooled_acceptance(double x_sum, double w_sum, bool harmonic) {
  if (!harmonic) return x_sum / w_sum;
  const double h = w_sum / x_sum;
  return h >= 0.0 && h <= 1.0 ? h : 0.0;
}

}  // namespace fused_hmc
