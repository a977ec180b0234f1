// One chain's HMC transition, written once for every build and op: the CPU chains, the CUDA chain
// kernels and the transition op all run `transition` below, which is generic over four policies
// (CUB/CUTLASS style: plain structs, inlined, no virtual calls):
//
//   Group   where the chain's coordinates live and how its threads cooperate. cpu/serial_group.h's
//           SerialGroup (one thread, rows in memory) or cuda/lane_group.cuh's LaneGroup (GROUP
//           threads, CHUNKS chunks of 4 coordinates each in registers). It supplies the coordinate
//           loops (each, each_chunk), the rows (Row, Work), the force evaluation (which for a kRow
//           target meets at block barriers: the sync), the chunk sum in chunk_sum.h's order, and
//           loop_steps (a kRow target's chains all loop their block's most steps; kMayHoldStill
//           says at compile time whether a chain can ever hold still in them).
//   Target  the log density (target.h): its force kind, shift, and optionally its own rounding of
//           the leapfrog (Target::Leapfrog; FusedLeapfrog below by default).
//   Noise   where the transition's randomness comes from: the momentum normals of a chunk
//           (draw) or of a row (draw_row), the step-size and trajectory jitter uniforms, and the
//           Metropolis test against its uniform (accepts; await_uniform first, from every thread).
//           PhiloxNoise below (the native stream); the transition op adds given noise and torch's
//           stream (cpu/transition_cpu.cpp, cuda/transition_kernel.cu).
//   Mass    the kinetic energy 0.5 p^T M^-1 p: momentum(z, i) = the momentum of coordinate i from
//           its standard normal z, and inverse(i) = its M^-1 entry, the velocity's factor (a type
//           UnitMass for the identity). mass_matrix.h's DiagonalMass / IdentityMass, or the lane
//           group's register copy (CoordinateCoefficients). A dense mass (dense_mass.h's
//           DenseMass, kDenseMass) forms the row's momentum, velocity M^-1 p and kinetic
//           coefficients C (p1 + p0) over the whole row instead (momentum_row, velocity_row,
//           kinetic_row): the drift moves x by eps times the velocity, the energy terms take the
//           kinetic coefficients; the loop is the same.
//
// The operations, in order (every build forms the same bits from the same noise):
//   eps_t = jittered_step_size(eps, jitter, noise.jitter_uniform())        in float64
//   eps   = S(eps_t),  h = S(0.5 eps_t)
//   L     = trajectory_steps(T, num_steps, eps_t, noise.trajectory_uniform())  (num_steps if T = 0)
//   z     = the noise's normals;  p0_i = mass.momentum(z_i, i)  (dense: p0 = L^-T z)
//   x0_i  = q_i - shift_i (x0 = q for a target that is not shifted);  f0 = force(x0), or the force
//           carried from the chain's previous transition (Carry)
//   p = kick(p0, f0, h);  L times: x = drift(x, p, M^-1, eps); f = force(x); p = kick(p, f, eps),
//           the last kick by h;  p = -p
//   change = sum_i Leapfrog::energy_change_twice(x0, f0, p0, x, f, p, M^-1)   (quadratic targets)
//          = sum_i kinetic_change_twice(p0, p, M^-1) + 2 (U(x) - U(x0))          (the others)
//     each sum in chunk_sum.h's order (coordinates in order within a chunk of 4, chunks pairwise)
//   accepted = noise.accepts(log_alpha = -change / 2);  if accepted: q_i = x_i + shift_i
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "../adaptation/trajectory_adaptation.h"
#include "../fp/host_device.h"
#include "../fp/lanes.h"
#include "../fp/rounding.h"
#include "../rng/noise_streams.h"
#include "../rng/stream_momentum.h"
#include "../stats/chunk_sum.h"
#include "../targets/target.h"
#include "dense_mass.h"
#include "mass_matrix.h"
#include "metropolis.h"

namespace fused_hmc {

// eps * (1 + jitter (2 u - 1)), u in [0, 1): uniform on [(1 - jitter) eps, (1 + jitter) eps). The
// step size, not the number of steps, is jittered, so every chain does the same work (no divergence
// between the chains of a warp). jitter = 0 returns eps unchanged. Double is a double, or a pack
// of chains' doubles with U their uniforms (math/fp/lanes.h).
template <typename Double, typename U>
FHMC_HD Double jittered_step_size(Double step_size, double jitter, U u) {
  if (jitter == 0.0) return step_size;
  const Double centred = sub_rn(mul_rn(2.0, static_cast<Double>(u)), 1.0);
  return mul_rn(step_size, add_rn(1.0, mul_rn(Double(jitter), centred)));
}

// Step sizes as the reference's Python floats reach float32/float64 kernels: eps rounded once,
// and 0.5 * eps formed in double before rounding.
template <typename scalar_t>
struct StepSizes {
  scalar_t eps;
  scalar_t half_eps;
};

template <typename scalar_t, typename Double>
FHMC_HD StepSizes<scalar_t> step_sizes(Double eps) {
  return {static_cast<scalar_t>(eps), static_cast<scalar_t>(mul_rn(0.5, eps))};
}

// The kinetic part of a coordinate's share of 2 (H(proposed) - H(current)):
// m_inv (p1 - p0)(p1 + p0).
template <typename scalar_t, typename Mass>
FHMC_HD scalar_t kinetic_change_twice(scalar_t p0, scalar_t p1, Mass inv_mass) {
  return mul_rn(inv_mass, mul_rn(sub_rn(p1, p0), add_rn(p1, p0)));
}

// The leapfrog's moves on one coordinate and its energy term, as every target but the reference's
// rounds them: the kick p - h f (h = eps or eps / 2) and the drift x + eps m_inv p, one FMA each,
// and the quadratic target's share of the energy change, (x1 - x0)(f0 + f1) + the kinetic part:
// for symmetric Lambda, x1^T Lambda x1 - x0^T Lambda x0 = (x1 - x0)^T (Lambda x1 + Lambda x0).
// Differences, not energies, are summed (no cancellation).
struct FusedLeapfrog {
  template <typename scalar_t>
  static FHMC_HD scalar_t kick(scalar_t p, scalar_t force, scalar_t h) {
    return fma_any(-h, force, p);
  }
  template <typename scalar_t, typename Mass>
  static FHMC_HD scalar_t drift(scalar_t x, scalar_t p, Mass inv_mass, scalar_t eps) {
    return fma_any(eps, mul_rn(inv_mass, p), x);
  }
  template <typename scalar_t, typename Mass>
  static FHMC_HD scalar_t energy_change_twice(scalar_t x0, scalar_t f0, scalar_t p0, scalar_t x1,
                                              scalar_t f1, scalar_t p1, Mass inv_mass) {
    return fma_any(sub_rn(x1, x0), add_rn(f0, f1), kinetic_change_twice(p0, p1, inv_mass));
  }
};

// Target::Leapfrog where the target names one, else FusedLeapfrog.
template <class Target, class = void>
struct LeapfrogOf {
  using type = FusedLeapfrog;
};
template <class Target>
struct LeapfrogOf<Target, std::void_t<typename Target::Leapfrog>> {
  using type = typename Target::Leapfrog;
};

// The whole change from the kinetic sum and the potentials U = -log p at both ends.
template <typename scalar_t>
FHMC_HD scalar_t energy_change_from_potentials(scalar_t kinetic_sum, scalar_t u0, scalar_t u1) {
  return add_rn(kinetic_sum, mul_rn(scalar_t(2), sub_rn(u1, u0)));
}

// The trajectory jitter's word of transition t: van der Corput's base-2 sequence at t (t's low 32
// bits reversed), rotated by a word r of the stream (r + reverse(t) mod 2^32: a Cranley-Patterson
// rotation on the 2^-32 grid). Every chain shares it, as BlackJAX shares its Halton jitter: a
// transition's L = ceil(w T / eps) then differs between chains only through their (jittered) step
// sizes, so the chains of a CPU pack or a CUDA warp run nearly the same number of steps, where a w
// drawn per chain made them all wait for the longest. Low discrepancy matters once w is shared:
// ChEES's gradient is w T times a chain sum, and with one independent w per transition its
// variance across transitions slowed Adam's climb (logistic regression from Stan's starts ended
// its warm-up at T 1.5 to 1.65 against 1.9); consecutive transitions of this sequence cover
// [0, 1) evenly, as the chains' own w did within one transition. r is word z of stream chain 0's
// last block at transition 0: a function of the seed alone, the same for every chunk, rank and
// resume.
FHMC_HD uint32_t trajectory_jitter_word(const PhiloxStream& stream, uint64_t transition) {
  uint32_t v = static_cast<uint32_t>(transition);
  v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
  v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
  v = ((v >> 4) & 0x0F0F0F0Fu) | ((v & 0x0F0F0F0Fu) << 4);
  v = ((v >> 8) & 0x00FF00FFu) | ((v & 0x00FF00FFu) << 8);
  v = (v >> 16) | (v << 16);
  return v + stream_block(stream, 0, 0, stream.blocks_per_transition - 1).z;
}

// What a transition takes from its chain's last stream block B of the transition: the Metropolis
// uniform as the log the philox test compares (philox_log_uniform(torch_uniform_from_word(B.x)))
// and the step-size jitter's uniform (torch_uniform_from_word(B.y)); and the trajectory jitter's
// (torch_uniform_from_word(trajectory_jitter_word)), shared by the chains. The step-size jitter
// stays each chain's own: shared, a pooled warm-up's mean acceptance would be that of one jittered
// step size per transition, whose noise biases dual averaging's averaged step size (measured:
// final acceptance 0.87 for 0.8, 0.80 for 0.65). They depend on the stream alone, so the CUDA
// kernels may form them ahead of the trajectory, several transitions at a time.
struct TransitionUniforms {
  float log_uniform;
  float jitter_uniform;
  float trajectory_uniform;  // the trajectory jitter w (trajectory_adaptation.h)
};

FHMC_HD TransitionUniforms transition_uniforms(const PhiloxStream& stream, uint64_t chain,
                                               uint64_t transition) {
  const PhiloxBlock own =
      stream_block(stream, chain, transition, stream.blocks_per_transition - 1);
  return {philox_log_uniform(torch_uniform_from_word(own.x)), torch_uniform_from_word(own.y),
          torch_uniform_from_word(trajectory_jitter_word(stream, transition))};
}

// The Noise policy of the native philox stream (noise_streams.h): transition `transition` of stream
// chain `chain`, with its uniforms (transition_uniforms, which the caller may form ahead).
template <typename scalar_t>
struct PhiloxNoise {
  PhiloxStream stream;
  uint64_t chain;
  uint64_t transition;
  TransitionUniforms uniforms;

  FHMC_HD void draw(int64_t j0, int64_t dim, scalar_t (&z)[4]) const {
    stream_chunk_momentum(stream, chain, transition, j0, dim, z);
  }
  // The whole row at once (stream_momentum.h: the same numbers, the Philox blocks in batches).
  FHMC_HD void draw_row(int64_t dim, scalar_t* z) const {
    stream_momentum(stream, chain, transition, dim, z);
  }
  FHMC_HD float jitter_uniform() const { return uniforms.jitter_uniform; }
  FHMC_HD float trajectory_uniform() const { return uniforms.trajectory_uniform; }
  FHMC_HD void await_uniform() const {}
  FHMC_HD bool accepts(scalar_t log_alpha) const {
    return philox_accept_by_log(uniforms.log_uniform, log_alpha);
  }
};

// Whether a chain still moves at leapfrog step `step` of its `leapfrog_steps` (an int, or a pack's
// lanes): always, in a group whose chains never hold still.
template <bool kMayHoldStill, typename Steps>
FHMC_HD auto still_moving(int step, const Steps& leapfrog_steps) {
  if constexpr (kMayHoldStill) {
    return step < leapfrog_steps;
  } else {
    return true;
  }
}

// How long the trajectory is: the base step size (jittered by `jitter`), and num_steps leapfrog
// steps, or trajectory_steps of trajectory_length (> 0) capped by num_steps. A pack of chains
// (math/fp/lanes.h) has a step size per chain.
template <typename Double>
struct TrajectoryOf {
  Double step_size;
  double jitter;
  int num_steps;
  double trajectory_length;
};
using Trajectory = TrajectoryOf<double>;

// A transition is divergent when its energy error H(proposed) - H(current) = -log_alpha exceeds
// this or is not finite (Stan's max_deltaH).
constexpr double kDivergentEnergyError = 1000.0;

// A transition's Metropolis decision, the same in every thread of a group, with the gradient
// evaluations it spent (its L leapfrog steps, plus one where the force at its start was evaluated,
// not carried); math/stats/chain_statistics.def's per-chain statistics are read from it. The
// acceptance probability (accept_probability's exp) is formed only where used. For a pack of chains
// each field is the chains' lanes.
template <typename scalar_t>
struct TransitionDecision {
  lane_mask_t<scalar_t> accepted;
  scalar_t log_alpha;  // -inf in the threads of a missing chain
  lane_int_t<scalar_t> gradient_evaluations;
  FHMC_HD scalar_t accept_prob() const { return accept_probability(log_alpha); }
  FHMC_HD AcceptProbability<scalar_t> acceptance() const { return {log_alpha}; }
  FHMC_HD bool divergent() const {
    return !(log_alpha >= scalar_t(-kDivergentEnergyError) && log_alpha < scalar_t(INFINITY));
  }
};

// Where a transition writes what ChEES needs of its chain (trajectory_adaptation.h): rows of [dim]
// float64 for the start and the proposal (less the target's shift) and the end velocity
// inv_mass * p (the momentum before its final flip); x0 == nullptr writes nothing. (A pack of
// chains writes each lane's through cpu/simd/pack_group.h's PackTrajectoryRecord.)
struct TrajectoryRecord {
  double* x0;
  double* x1;
  double* velocity;
  FHMC_HD bool active() const { return x0 != nullptr; }
  FHMC_HD void write(int64_t j, double start, double proposal, double v) const {
    x0[j] = start;
    x1[j] = proposal;
    velocity[j] = v;
  }
};

// The drift x += eps M^-1 p over the group's rows, in the chains that are `moving`: coordinate by
// coordinate with the mass's M^-1_ii, or for a dense mass from its velocity row C p, each
// coordinate moved with the unit mass's rounding (FusedLeapfrog: one FMA).
template <class Leapfrog, class Group, class Mass, class Row, typename scalar_t, typename Moving>
FHMC_HD void drift_row(const Group& group, const Mass& mass, Row& x, const Row& p,
                       scalar_t eps, Moving moving) {
  if constexpr (kDenseMass<Mass>) {
    const auto v = mass.velocity_row(p);  // a pointer to a row (CPU), or the group's row (CUDA)
    group.each([&](auto i) {
      x[i] = where(moving, Leapfrog::drift(x[i], v[i], UnitMass{}, eps), x[i]);
    });
  } else {
    group.each([&](auto i) {
      x[i] = where(moving, Leapfrog::drift(x[i], p[i], mass.inverse(i), eps), x[i]);
    });
  }
}

// A dense mass's row of the kinetic change's coefficients C (p1 + p0) (kinetic_row), or nothing.
template <class Mass, class Row>
FHMC_HD auto dense_kinetic_row(const Mass& mass, const Row& p0, const Row& p_end) {
  if constexpr (kDenseMass<Mass>) {
    return mass.kinetic_row(p0, p_end);
  } else {
    return nullptr;
  }
}

// The kinetic change's coefficient of coordinate i: the mass's M^-1_ii, or a dense mass's
// (C (p1 + p0))_i from its kinetic row (dense_mass.h).
template <typename scalar_t, class Mass, typename Index, class DenseRow>
FHMC_HD auto kinetic_coefficient(const Mass& mass, Index i, const DenseRow& dense_row) {
  if constexpr (kDenseMass<Mass>) {
    return DenseKineticCoefficient<scalar_t>{dense_row[i]};
  } else {
    return mass.inverse(i);
  }
}

// Transition of one chain from its state q (the group's row of it, updated when accepted). `carry`
// (the group's Carry: the force f and potential at q, handed from one transition to the next for a
// target that carries_force, as BlackJAX's HMCState keeps logdensity_grad) takes the force at q in
// when valid and hands out the force at the new q. `record` receives the trajectory (ChEES).
template <class Group, class Target, class Noise, class Mass, typename Double,
          class Record = TrajectoryRecord, typename scalar_t = typename Target::Scalar>
FHMC_HD TransitionDecision<scalar_t> transition(
    const Group& group, const Target& target, const Noise& noise, const Mass& mass,
    typename Group::template Row<scalar_t>& q, const TrajectoryOf<Double>& trajectory,
    typename Group::template Carry<Target>& carry, Record record = {}) {
  using Leapfrog = typename LeapfrogOf<Target>::type;
  const Double eps_t =
      jittered_step_size(trajectory.step_size, trajectory.jitter, noise.jitter_uniform());
  const auto steps = step_sizes<scalar_t>(eps_t);
  const auto leapfrog_steps = trajectory_steps(trajectory.trajectory_length, trajectory.num_steps,
                                              eps_t, noise.trajectory_uniform());
  const int loop_steps =
      group.template loop_steps<Target>(leapfrog_steps, trajectory.trajectory_length > 0.0);

  // Zeros past the row's end and in missing chains keep the unused lanes' arithmetic finite.
  auto w = group.template work<scalar_t>();
  auto mu = group.shift(target);
  group.draw_momentum(noise, w.p0);
  group.each([&](auto i) {
    if constexpr (Target::kShifted) {
      w.x[i] = q[i] - mu[i];
    } else {
      w.x[i] = q[i];
    }
    w.p0[i] = mass.momentum(w.p0[i], i);
  });
  // A dense mass forms the row's momentum L^-T z here, and each drift from its velocity row.
  constexpr bool kDense = kDenseMass<Mass>;
  if constexpr (kDense) mass.momentum_row(w.p0);
  constexpr bool kCarries = carries_force<Target>();
  bool carried = false;
  scalar_t u0;
  if constexpr (kCarries) carried = carry.held() && carry.valid;
  if (carried) {
    if constexpr (kCarries) group.each([&](auto i) { w.f0[i] = carry.f[i]; });
    u0 = carry.potential();
  } else {
    u0 = group.forces(target, mass, w.x, w.f0);
  }
  // kick, (drift, force, kick) x (L - 1), drift, force, kick, the first and last kicks by h. A
  // kRow target's early finishers (L below loop_steps) hold still in the middle steps, evaluating
  // the force only for its barriers, and make their last moves with the others.
  group.each([&](auto i) { w.p[i] = Leapfrog::kick(w.p0[i], w.f0[i], steps.half_eps); });
  // (A pack's chains each hold still past their own L, `moving` being its lanes.)
  for (int step = 1; step < loop_steps; ++step) {
    const auto moving = still_moving<Group::template kMayHoldStill<Target>>(step, leapfrog_steps);
    if (any_lane(moving)) drift_row<Leapfrog>(group, mass, w.x, w.p, steps.eps, moving);
    group.forces(target, mass, w.x, w.f);
    if (any_lane(moving)) {
      group.each([&](auto i) {
        w.p[i] = where(moving, Leapfrog::kick(w.p[i], w.f[i], steps.eps), w.p[i]);
      });
    }
  }
  drift_row<Leapfrog>(group, mass, w.x, w.p, steps.eps, true);
  const scalar_t u1 = group.forces(target, mass, w.x, w.f);
  group.each([&](auto i) { w.p[i] = Leapfrog::kick(w.p[i], w.f[i], steps.half_eps); });
  if (record.active() && group.live()) {
    using Wide = lane_double_t<scalar_t>;
    const auto write = [&](const auto& velocity) {
      group.each_chunk([&](const auto& chunk) {
        chunk.each([&](auto i, int64_t j) {
          const scalar_t start = Target::kShifted ? q[i] - mu[i] : q[i];
          scalar_t v;
          if constexpr (kDense) {
            v = velocity[i];
          } else {
            v = mul_rn(mass.inverse(i), w.p[i]);
          }
          record.write(j, static_cast<Wide>(start), static_cast<Wide>(w.x[i]),
                       static_cast<Wide>(v));
        });
      });
    };
    if constexpr (kDense) {
      write(mass.velocity_row(w.p));
    } else {
      write(nullptr);
    }
  }
  // The kinetic change's coefficient of coordinate i: M^-1_ii, or a dense mass's (C (p1 + p0))_i
  // (dense_mass.h's DenseKineticCoefficient), formed before p's flip below.
  const auto dense_kinetic = dense_kinetic_row(mass, w.p0, w.p);

  // A group may recompute a coordinate target's forces at x0 and x here rather than hold them
  // through the trajectory (fewer live registers).
  constexpr bool kRecompute = Group::template kRecomputesForces<Target>;
  if constexpr (kRecompute && Target::kShifted) mu = group.shift(target);
  auto change = group.template chunk_sum<scalar_t>();
  group.each_chunk([&](const auto& chunk) {
    scalar_t partial = scalar_t(0);
    chunk.each([&](auto i, int64_t j) {
      w.p[i] = -w.p[i];
      const auto kinetic = kinetic_coefficient<scalar_t>(mass, i, dense_kinetic);
      if constexpr (Target::kQuadratic) {
        const scalar_t x0 = Target::kShifted ? q[i] - mu[i] : q[i];
        scalar_t force0 = w.f0[i], force1 = w.f[i];
        if constexpr (kRecompute) {
          force0 = group.local_force(target, mass, i, j, x0);
          force1 = group.local_force(target, mass, i, j, w.x[i]);
        }
        partial += Leapfrog::energy_change_twice(x0, force0, w.p0[i], w.x[i], force1, w.p[i],
                                                 kinetic);
      } else {
        partial += kinetic_change_twice(w.p0[i], w.p[i], kinetic);
      }
    });
    change.add(chunk, partial);
  });
  scalar_t change_sum = change.total();
  if constexpr (!Target::kQuadratic) change_sum = energy_change_from_potentials(change_sum, u0, u1);
  noise.await_uniform();
  TransitionDecision<scalar_t> decision{{}, scalar_t(-INFINITY),
                                        leapfrog_steps + (carried ? 0 : 1)};
  if (group.live()) {
    decision.log_alpha = log_accept_ratio(change_sum);
    decision.accepted = noise.accepts(decision.log_alpha);
  }
  if (any_lane(decision.accepted)) {
    group.each([&](auto i) {
      if constexpr (Target::kShifted) {
        q[i] = where(decision.accepted, w.x[i] + mu[i], q[i]);
      } else {
        q[i] = where(decision.accepted, w.x[i], q[i]);
      }
    });
  }
  if constexpr (kCarries) {
    if (carry.held()) {
      if (any_lane(decision.accepted) || !carried) {
        group.each([&](auto i) { carry.f[i] = where(decision.accepted, w.f[i], w.f0[i]); });
        carry.potential() = where(decision.accepted, u1, u0);
      }
      carry.valid = true;
    }
  }
  return decision;
}

}  // namespace fused_hmc
