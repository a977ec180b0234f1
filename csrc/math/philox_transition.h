// One chain's HMC transition on N(mu, I) under the native philox stream. philox_proposal (one
// thread integrates the whole chain) serves the CPU transition op and run op; the CUDA kernels
// (the transition op, the run op's chain groups) split a chain across a thread group and integrate in
// their own loops, but share the decision (philox_accept / philox_decide_by_log) and sum the same
// energy terms in the same canonical chunk order (chunk_sum.h; chain_group.cuh's group_chunk_sum).
// So no launch shape or chunking changes a bit, and the CPU and CUDA builds differ only by the
// rounding of the momentum normals (transforms.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "chunk_sum.h"
#include "gaussian_hmc.h"
#include "host_device.h"
#include "noise_streams.h"
#include "portable_math.h"
#include "transforms.h"

namespace fused_hmc {

// Draws the chain's momentum and runs the leapfrog from q. Writes the proposal to `proposal` and, if
// `momentum_out` is not null, the momentum drawn. Returns the summed energy_change_twice, i.e.
// 2 * (H(proposed) - H(current)), in the canonical chunk order of chunk_sum.h (the CUDA kernels'
// order whatever their thread layout).
//   q, proposal, momentum_out: [dim] of scalar_t (proposal must not alias q); mu: [dim].
template <typename scalar_t>
FHMC_HD scalar_t philox_proposal(const PhiloxStream& stream, uint64_t chain, uint64_t transition,
                                 int64_t dim, const scalar_t* q, const scalar_t* mu,
                                 StepSizes<scalar_t> steps, int num_steps, scalar_t* proposal,
                                 scalar_t* momentum_out) {
  PairwiseChunkSum<scalar_t> change;
  for (int64_t j0 = 0; j0 < dim; j0 += kChunkSize) {
    scalar_t momentum[kChunkSize];
    stream_chunk_momentum(stream, chain, transition, j0, dim, momentum);
    scalar_t partial = 0;
    for (int e = 0; e < kChunkSize && j0 + e < dim; ++e) {
      const int64_t j = j0 + e;
      const scalar_t x0 = q[j] - mu[j], p0 = momentum[e];
      scalar_t x = x0, p = p0;
      leapfrog_fused(x, p, steps, num_steps);
      partial += energy_change_twice(x0, p0, x, p);
      proposal[j] = x + mu[j];
      if (momentum_out) momentum_out[j] = p0;
    }
    change.add(partial);
  }
  return change.total();
}

// The native philox mode's Metropolis test: metropolis_accept's comparison with log(u) taken by
// portable_log, so a CPU and a GPU run of the same stream decide alike even at near ties (the
// torch-stream and external-noise modes keep metropolis_accept: they match torch's own log).
// Split in two so that a kernel may take the log ahead of the trajectory (it depends on the
// uniform alone).
FHMC_HD float philox_log_uniform(float uniform) {
  const float floor = 1e-10f;
  const float clamped = uniform < floor ? floor : uniform;
  return portable_log(clamped);
}

template <typename scalar_t>
FHMC_HD bool philox_accept_by_log(float log_uniform, scalar_t log_alpha) {
  return static_cast<scalar_t>(log_uniform) < log_alpha;
}

template <typename scalar_t>
FHMC_HD bool philox_accept(float uniform, scalar_t log_alpha) {
  return philox_accept_by_log(philox_log_uniform(uniform), log_alpha);
}

// min(1, exp(log_alpha)), computed in the chain's dtype with portable_exp (it drives dual
// averaging); a NaN log_alpha (a diverged proposal, always rejected) gives 0.
template <typename scalar_t>
FHMC_HD scalar_t accept_probability(scalar_t log_alpha) {
  if (log_alpha != log_alpha) return scalar_t(0);
  return log_alpha >= scalar_t(0) ? scalar_t(1) : portable_exp(log_alpha);
}

// The Metropolis decision of a transition from its uniform (stream_uniform, which callers may draw
// early to overlap its latency) and its summed energy change.
template <typename scalar_t>
struct PhiloxDecision {
  bool accepted;
  scalar_t accept_prob;  // min(1, exp(log_alpha))
};

template <typename scalar_t>
FHMC_HD PhiloxDecision<scalar_t> philox_decide_by_log(float log_uniform, scalar_t change_sum) {
  const scalar_t log_alpha = log_accept_ratio(change_sum);
  return {philox_accept_by_log(log_uniform, log_alpha), accept_probability(log_alpha)};
}

}  // namespace fused_hmc
