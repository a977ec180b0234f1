// One chain's HMC transition, the canonical operations every build forms (the CPU chains run it
// as written; the CUDA group kernels, cuda/tuned_group.cuh, split the same operations over a
// chain's threads, bit for bit). A Target of target.h, a diagonal inverse mass (mass_matrix.h) and
// an optionally jittered step size, under the native philox stream (noise_streams.h):
//
//   stream block  B = block blocks_per_transition - 1 of (chain, transition)
//   u     = torch_uniform_from_word(B.x)          the Metropolis uniform (= stream_uniform)
//   eps_t = jittered_step_size(eps, jitter, torch_uniform_from_word(B.y))        in float64
//   eps   = S(eps_t),  h = S(0.5 eps_t)
//   z     = stream_chunk_momentum (stream_momentum.h);  p0_j = z_j * momentum_scale(m_inv_j)
//   x0_j  = q_j - shift_j (x0 = q for a target that is not shifted);  f0 = force(x0), or the
//           force carried from the chain's previous transition (ForceCarry)
//   p = kick(p0, f0, h)
//   L = trajectory_steps(T, num_steps, eps_t, torch_uniform_from_word(B.z))   (num_steps if T = 0)
//   L - 1 times:  x = drift(x, p, m_inv, eps) for all j;  f = force(x);  p = kick(p, f, eps)
//   x = drift(x, p, m_inv, eps);  f = force(x);  p = -kick(p, f, h)
//   change = sum_j target_energy_change_twice(x0, f0, p0, x, f, p, m_inv)   (quadratic targets)
//          = sum_j kinetic_change_twice(p0, p, m_inv) + 2 (U(x) - U(x0))   (the others)
//     each sum in chunk_sum.h's order (coordinates in order within a chunk of 4, chunks pairwise)
//   accepted, accept_prob = philox_decide_by_log(philox_log_uniform(u), change)
//     (the log taken first, with B's other words: transition_uniforms)
//   if accepted: q_j = x_j + shift_j
// With the standard target, m_inv = 1 and jitter = 0 this is philox_proposal / hmc_step bit for
// bit (the leapfrog is leapfrog_fused's, the energy terms energy_change_twice's).
#pragma once

#include <cstdint>

#include "chunk_sum.h"
#include "gaussian_hmc.h"
#include "host_device.h"
#include "mass_matrix.h"
#include "noise_streams.h"
#include "philox_transition.h"
#include "stream_momentum.h"
#include "target.h"
#include "trajectory_adaptation.h"
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

// This coordinate's share of 2 * (H(proposed) - H(current)) with H = 0.5 x^T Lambda x +
// 0.5 p^T M^-1 p: (x1 - x0) (f0 + f1) + m_inv (p1 - p0) (p1 + p0), since for symmetric Lambda
// x1^T Lambda x1 - x0^T Lambda x0 = (x1 - x0)^T (Lambda x1 + Lambda x0). Differences, not energies,
// are summed (no cancellation). For the standard target with m_inv = 1 this is gaussian_hmc.h's
// energy_change_twice bit for bit.
template <typename scalar_t, typename Mass>
FHMC_HD scalar_t target_energy_change_twice(scalar_t x0, scalar_t f0, scalar_t p0, scalar_t x1,
                                            scalar_t f1, scalar_t p1, Mass inv_mass) {
  return fma_any(sub_rn(x1, x0), add_rn(f0, f1),
                 mul_rn(inv_mass, mul_rn(sub_rn(p1, p0), add_rn(p1, p0))));
}

// The kinetic part alone, m_inv (p1 - p0) (p1 + p0), for targets whose potential is not quadratic.
template <typename scalar_t, typename Mass>
FHMC_HD scalar_t kinetic_change_twice(scalar_t p0, scalar_t p1, Mass inv_mass) {
  return mul_rn(inv_mass, mul_rn(sub_rn(p1, p0), add_rn(p1, p0)));
}

// The whole change from the kinetic sum and the potentials U = -log p at both ends.
template <typename scalar_t>
FHMC_HD scalar_t energy_change_from_potentials(scalar_t kinetic_sum, scalar_t u0, scalar_t u1) {
  return add_rn(kinetic_sum, mul_rn(scalar_t(2), sub_rn(u1, u0)));
}

// f = -grad log p at x ([dim] each); returns U(x) = -log p(x) for a kPosition target (0 for the
// others, whose energy change needs no potential).
template <class Target, typename scalar_t = typename Target::Scalar>
FHMC_HD scalar_t target_forces(const Target& target, const scalar_t* x, scalar_t* f,
                               int64_t dim) {
  if constexpr (Target::kForce == TargetForce::kPosition) {
    const scalar_t log_p = target.log_density_and_gradient(x, f);
    for (int64_t j = 0; j < dim; ++j) f[j] = -f[j];
    return -log_p;
  } else if constexpr (Target::kForce == TargetForce::kRow) {
    for (int64_t j = 0; j < dim; ++j) f[j] = target.row_force(j, x);
    return scalar_t(0);
  } else {
    for (int64_t j = 0; j < dim; ++j) f[j] = target.force(x[j], target.coefficient(j));
    return scalar_t(0);
  }
}

// What a transition takes from its last stream block B: the Metropolis uniform as the log the
// philox test compares (philox_log_uniform(torch_uniform_from_word(B.x))), the step-size jitter's
// uniform (torch_uniform_from_word(B.y)) and the trajectory jitter's (word z). They depend on the
// stream alone, so the CUDA kernels may form them ahead of the trajectory, several transitions at
// a time.
struct TransitionUniforms {
  float log_uniform;
  float jitter_uniform;
  float trajectory_uniform;  // word z: the trajectory jitter (trajectory_adaptation.h)
};

FHMC_HD TransitionUniforms transition_uniforms(const PhiloxStream& stream, uint64_t chain,
                                               uint64_t transition) {
  const PhiloxBlock last =
      stream_block(stream, chain, transition, stream.blocks_per_transition - 1);
  return {philox_log_uniform(torch_uniform_from_word(last.x)), torch_uniform_from_word(last.y),
          torch_uniform_from_word(last.z)};
}

// A transition's decision, with the gradient evaluations it spent (its L leapfrog steps, plus one
// where the force at its start was evaluated, not carried) and its trajectory jitter w.
template <typename scalar_t>
struct TransitionOutcome : PhiloxDecision<scalar_t> {
  int gradient_evaluations;
  float trajectory_uniform;
};

// The force f [dim] and potential *u at a chain's current state, handed from one transition to the
// next (BlackJAX's HMCState keeps logdensity_grad the same way): a target that is not shifted
// integrates x = q bitwise, so the force at the next start is the accepted proposal's, or after a
// rejection the one kept, and a transition evaluates the gradient L times, not L + 1 (target.h's
// carries_force). `valid` is false until a transition of the call has run; f == nullptr carries
// nothing.
template <typename scalar_t>
struct ForceCarry {
  scalar_t* f;
  scalar_t* u;
  bool valid;
};

// Per-chain work arrays, each [dim] of the chain's dtype.
template <typename scalar_t>
struct TrajectoryScratch {
  scalar_t *x0, *p0, *f0, *x, *p, *f;
};

// Runs transition `transition` of chain `chain` from q ([dim], updated in place when accepted) with
// base step size `step_size`, inverse mass m_inv ([dim]) and trajectory_steps(trajectory_length,
// num_steps, eps_t, w) leapfrog steps; returns the Metropolis decision. Afterwards s.x0 and s.x
// hold the start and the proposal (less the shift) and s.p the flipped end momentum. `carry` takes
// the force at q in, when valid, and hands out the force at the new q (carries_force targets).
template <class Target, typename scalar_t = typename Target::Scalar>
FHMC_HD TransitionOutcome<scalar_t> chain_transition(
    const PhiloxStream& stream, uint64_t chain, uint64_t transition, const Target& target,
    int64_t dim, scalar_t* q, const scalar_t* inv_mass, double step_size, double jitter,
    int num_steps, double trajectory_length, TrajectoryScratch<scalar_t> s,
    ForceCarry<scalar_t>& carry) {
  const TransitionUniforms uniforms = transition_uniforms(stream, chain, transition);
  const double eps_t = jittered_step_size(step_size, jitter, uniforms.jitter_uniform);
  const auto steps = tuned_step_sizes<scalar_t>(eps_t);
  const int leapfrog_steps =
      trajectory_steps(trajectory_length, num_steps, eps_t, uniforms.trajectory_uniform);

  // z into p0 first (stream_momentum.h), then one loop over the coordinates that the compiler
  // runs in vector lanes (momentum_scale's square root and division among them).
  stream_momentum(stream, chain, transition, dim, s.p0);
  for (int64_t j = 0; j < dim; ++j) {
    if constexpr (Target::kShifted) {
      s.x0[j] = q[j] - target.shift()[j];
    } else {
      s.x0[j] = q[j];
    }
    s.p0[j] = mul_rn(s.p0[j], momentum_scale(inv_mass[j]));
    s.x[j] = s.x0[j];
  }
  constexpr bool kCarries = carries_force<Target>();
  const bool carried = kCarries && carry.f != nullptr && carry.valid;
  scalar_t u0;
  if (carried) {
    for (int64_t j = 0; j < dim; ++j) s.f0[j] = carry.f[j];
    u0 = *carry.u;
  } else {
    u0 = target_forces(target, s.x0, s.f0, dim);
  }
  for (int64_t j = 0; j < dim; ++j) s.p[j] = kick(s.p0[j], s.f0[j], steps.half_eps);
  for (int i = 1; i < leapfrog_steps; ++i) {
    for (int64_t j = 0; j < dim; ++j) s.x[j] = drift(s.x[j], s.p[j], inv_mass[j], steps.eps);
    target_forces(target, s.x, s.f, dim);
    for (int64_t j = 0; j < dim; ++j) s.p[j] = kick(s.p[j], s.f[j], steps.eps);
  }
  for (int64_t j = 0; j < dim; ++j) s.x[j] = drift(s.x[j], s.p[j], inv_mass[j], steps.eps);
  const scalar_t u1 = target_forces(target, s.x, s.f, dim);
  for (int64_t j = 0; j < dim; ++j) s.p[j] = -kick(s.p[j], s.f[j], steps.half_eps);

  PairwiseChunkSum<scalar_t> change;
  for (int64_t j0 = 0; j0 < dim; j0 += kChunkSize) {
    scalar_t partial = 0;
    for (int e = 0; e < kChunkSize && j0 + e < dim; ++e) {
      const int64_t j = j0 + e;
      if constexpr (Target::kQuadratic) {
        partial += target_energy_change_twice(s.x0[j], s.f0[j], s.p0[j], s.x[j], s.f[j], s.p[j],
                                              inv_mass[j]);
      } else {
        partial += kinetic_change_twice(s.p0[j], s.p[j], inv_mass[j]);
      }
    }
    change.add(partial);
  }
  scalar_t change_sum = change.total();
  if constexpr (!Target::kQuadratic) change_sum = energy_change_from_potentials(change_sum, u0, u1);
  TransitionOutcome<scalar_t> decision;
  static_cast<PhiloxDecision<scalar_t>&>(decision) =
      philox_decide_by_log(uniforms.log_uniform, change_sum);
  decision.gradient_evaluations = leapfrog_steps + (carried ? 0 : 1);
  decision.trajectory_uniform = uniforms.trajectory_uniform;
  if (decision.accepted) {
    for (int64_t j = 0; j < dim; ++j) {
      if constexpr (Target::kShifted) {
        q[j] = s.x[j] + target.shift()[j];
      } else {
        q[j] = s.x[j];
      }
    }
  }
  if (kCarries && carry.f != nullptr) {
    if (decision.accepted || !carry.valid) {
      const scalar_t* from = decision.accepted ? s.f : s.f0;
      for (int64_t j = 0; j < dim; ++j) carry.f[j] = from[j];
      *carry.u = decision.accepted ? u1 : u0;
    }
    carry.valid = true;
  }
  return decision;
}

}  // namespace fused_hmc
