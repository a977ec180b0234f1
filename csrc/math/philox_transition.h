// One chain's HMC transition on N(mu, I) under the native philox stream, shared by every
// implementation that draws its own philox noise (hmc_step on CPU, the CPU and CUDA run_chains).
//
// Momentum block k of (chain, transition) holds coordinates [k * lanes, (k + 1) * lanes); the
// energy change is summed in coordinate order, so every caller gets the same bits.
// (A kernel that splits a chain across threads and reduces in another order may differ from these
// bits at near-tie accept decisions.)
#pragma once

#include <cmath>
#include <cstdint>

#include "gaussian_hmc.h"
#include "host_device.h"
#include "noise_streams.h"
#include "transforms.h"

namespace fused_hmc {

// Draws the chain's momentum and runs the leapfrog from q. Writes the proposal to `proposal` and,
// if `momentum_out` is not null, the momentum drawn. Returns the summed energy_change_twice, i.e.
// 2 * (H(proposed) - H(current)).
//   q, proposal, momentum_out: [dim] of scalar_t (proposal must not alias q); mu: [dim].
template <typename scalar_t>
FHMC_HD scalar_t philox_proposal(const PhiloxStream& stream, uint64_t chain, uint64_t transition,
                                 int64_t dim, const scalar_t* q, const scalar_t* mu,
                                 StepSizes<scalar_t> steps, int num_steps, scalar_t* proposal,
                                 scalar_t* momentum_out) {
  constexpr int kLanes = NormalsPerBlock<scalar_t>::value;
  const int64_t blocks = static_cast<int64_t>(momentum_blocks<scalar_t>(dim));
  scalar_t change_sum = 0;
  for (int64_t k = 0; k < blocks; ++k) {
    scalar_t normals[kLanes];
    block_normals(stream_block(stream, chain, transition, static_cast<uint64_t>(k)), normals);
    for (int lane = 0; lane < kLanes && k * kLanes + lane < dim; ++lane) {
      const int64_t j = k * kLanes + lane;
      const scalar_t x0 = q[j] - mu[j], p0 = normals[lane];
      scalar_t x = x0, p = p0;
      leapfrog_fused(x, p, steps, num_steps);
      change_sum += energy_change_twice(x0, p0, x, p);
      proposal[j] = x + mu[j];
      if (momentum_out) momentum_out[j] = p0;
    }
  }
  return change_sum;
}

// min(1, exp(log_alpha)) in float64; a NaN log_alpha (a diverged proposal, always rejected)
// gives 0.
template <typename scalar_t>
FHMC_HD double accept_probability(scalar_t log_alpha) {
  const double a = static_cast<double>(log_alpha);
  if (a != a) return 0.0;
  return a >= 0.0 ? 1.0 : exp(a);
}

// The Metropolis decision of (chain, transition) from its summed energy change.
struct PhiloxDecision {
  bool accepted;
  float uniform;       // the uniform drawn: word 0 of the transition's last block
  double accept_prob;  // min(1, exp(log_alpha)), float64
};

template <typename scalar_t>
FHMC_HD PhiloxDecision philox_decide(const PhiloxStream& stream, uint64_t chain,
                                     uint64_t transition, scalar_t change_sum) {
  const scalar_t log_alpha = log_accept_ratio(change_sum);
  const float u = stream_uniform(stream, chain, transition);
  return {metropolis_accept(u, log_alpha), u, accept_probability(log_alpha)};
}

}  // namespace fused_hmc
