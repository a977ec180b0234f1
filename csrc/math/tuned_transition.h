// One chain's HMC transition for the tuned samplers (run_chains_tuned, warmup_chains): a Gaussian
// target of gaussian_targets.h, a diagonal inverse mass (mass_matrix.h) and an optionally jittered
// step size, under the native philox stream keyed exactly as run_chains (noise_streams.h).
//
// Canonical operations (every build forms exactly these; x = q - mu, all in the chain's dtype S):
//   stream block  B = block blocks_per_transition - 1 of (chain, transition)
//   u     = torch_uniform_from_word(B.x)          the Metropolis uniform (= stream_uniform)
//   eps_t = jittered_step_size(eps, jitter, torch_uniform_from_word(B.y))        in float64
//   eps   = S(eps_t),  h = S(0.5 eps_t)
//   z     = stream_chunk_momentum (as run_chains);  p0_j = z_j * momentum_scale(m_inv_j)
//   x0_j  = q_j - mu_j;  f0_j = force(x0, j)
//   p = kick(p0, f0, h)
//   L - 1 times:  x = drift(x, p, m_inv, eps) for all j;  f = force(x, j) for all j;
//                 p = kick(p, f, eps)
//   x = drift(x, p, m_inv, eps);  f = force(x);  p = -kick(p, f, h)
//   change = sum_j target_energy_change_twice(x0, f0, p0, x, f, p, m_inv), in chunk_sum.h's order
//   (coordinates added in order within a chunk of 4 starting from 0, chunks combined pairwise)
//   accepted, accept_prob = philox_decide(u, change);  if accepted: q_j = x_j + mu_j
// Forces need the whole x only for a dense target; otherwise the loops may run coordinate by
// coordinate. With kStandard, m_inv = 1 and jitter = 0 this is philox_proposal / run_chains bit for
// bit (the leapfrog is leapfrog_fused's, the energy terms energy_change_twice's).
#pragma once

#include <cstdint>

#include "chunk_sum.h"
#include "gaussian_hmc.h"
#include "gaussian_targets.h"
#include "host_device.h"
#include "mass_matrix.h"
#include "noise_streams.h"
#include "philox_transition.h"
#include "transforms.h"

namespace fused_hmc {

// eps * (1 + jitter (2 u - 1)), u in [0, 1): uniform on [(1 - jitter) eps, (1 + jitter) eps). The
// step size, not the number of steps, is jittered, so every chain does the same work (no divergence
// between the chains of a warp). jitter = 0 returns eps unchanged.
FHMC_HD double jittered_step_size(double step_size, double jitter, float u) {
  if (jitter == 0.0) return step_size;
  const double centred = sub_rn(mul_rn(2.0, static_cast<double>(u)), 1.0);
  return mul_rn(step_size, add_rn(1.0, mul_rn(jitter, centred)));
}

// eps and eps / 2 in the chain's dtype, as step_sizes() forms them from a Python float.
template <typename scalar_t>
FHMC_HD StepSizes<scalar_t> tuned_step_sizes(double eps) {
  return {static_cast<scalar_t>(eps), static_cast<scalar_t>(mul_rn(0.5, eps))};
}

// Per-chain work arrays, each [dim] of the chain's dtype.
template <typename scalar_t>
struct TrajectoryScratch {
  scalar_t *x0, *p0, *f0, *x, *p, *f;
};

template <typename scalar_t>
FHMC_HD void all_forces(const GaussianTarget<scalar_t>& target, const scalar_t* x, scalar_t* f) {
  for (int64_t j = 0; j < target.dim; ++j) f[j] = target.force(x, j);
}

// Runs transition `transition` of chain `chain` from q ([dim], updated in place when accepted) with
// base step size `step_size` and inverse mass m_inv ([dim]); returns the Metropolis decision.
template <typename scalar_t>
FHMC_HD PhiloxDecision<scalar_t> tuned_transition(const PhiloxStream& stream, uint64_t chain,
                                                  uint64_t transition,
                                                  const GaussianTarget<scalar_t>& target,
                                                  scalar_t* q, const scalar_t* inv_mass,
                                                  double step_size, double jitter, int num_steps,
                                                  TrajectoryScratch<scalar_t> s) {
  const int64_t dim = target.dim;
  const PhiloxBlock last =
      stream_block(stream, chain, transition, stream.blocks_per_transition - 1);
  const float uniform = torch_uniform_from_word(last.x);
  const auto steps = tuned_step_sizes<scalar_t>(
      jittered_step_size(step_size, jitter, torch_uniform_from_word(last.y)));

  for (int64_t j0 = 0; j0 < dim; j0 += kChunkSize) {
    scalar_t z[kChunkSize];
    stream_chunk_momentum(stream, chain, transition, j0, dim, z);
    for (int e = 0; e < kChunkSize && j0 + e < dim; ++e) {
      const int64_t j = j0 + e;
      s.x0[j] = q[j] - target.mu[j];
      s.p0[j] = mul_rn(z[e], momentum_scale(inv_mass[j]));
      s.x[j] = s.x0[j];
    }
  }
  all_forces(target, s.x0, s.f0);
  for (int64_t j = 0; j < dim; ++j) s.p[j] = kick(s.p0[j], s.f0[j], steps.half_eps);
  for (int i = 1; i < num_steps; ++i) {
    for (int64_t j = 0; j < dim; ++j) s.x[j] = drift(s.x[j], s.p[j], inv_mass[j], steps.eps);
    all_forces(target, s.x, s.f);
    for (int64_t j = 0; j < dim; ++j) s.p[j] = kick(s.p[j], s.f[j], steps.eps);
  }
  for (int64_t j = 0; j < dim; ++j) s.x[j] = drift(s.x[j], s.p[j], inv_mass[j], steps.eps);
  all_forces(target, s.x, s.f);
  for (int64_t j = 0; j < dim; ++j) s.p[j] = -kick(s.p[j], s.f[j], steps.half_eps);

  PairwiseChunkSum<scalar_t> change;
  for (int64_t j0 = 0; j0 < dim; j0 += kChunkSize) {
    scalar_t partial = 0;
    for (int e = 0; e < kChunkSize && j0 + e < dim; ++e) {
      const int64_t j = j0 + e;
      partial += target_energy_change_twice(s.x0[j], s.f0[j], s.p0[j], s.x[j], s.f[j], s.p[j],
                                            inv_mass[j]);
    }
    change.add(partial);
  }
  const auto decision = philox_decide(uniform, change.total());
  if (decision.accepted) {
    for (int64_t j = 0; j < dim; ++j) q[j] = s.x[j] + target.mu[j];
  }
  return decision;
}

}  // namespace fused_hmc
