// CPU warm-up over any Target, per chain or pooled. Per chain, chains run in parallel through all
// of the call's transitions, each adapting its own step size and inverse mass. A shared adaptation
// state (math/chain_params.h's pools_chains) pools every chain: transitions run one at a time over
// all chains in parallel, then the mean acceptance statistic feeds the one dual averaging (and
// ChEES's statistics its trajectory length), and at a slow window's end the chains' window moments
// pool into one inverse mass, all inside the call (no host round trip per transition). ChEES with
// per-chain adaptation (G = B) runs in the same lock step: each chain's statistic feeds its own
// dual averaging and its window its own inverse mass, and every chain's trajectory the one T.
// Pooled sums run over the chain index in chunk_sum.h's pairwise order, so the result depends on
// neither the thread count nor the backend.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "../math/adaptation/adaptation_windows.h"
#include "../math/adaptation/dual_averaging.h"
#include "../math/adaptation/pooled_acceptance.h"
#include "../math/adaptation/trajectory_adaptation.h"
#include "../math/adaptation/warmup_update.h"
#include "../math/chain_params.h"
#include "../math/hmc/dense_mass.h"
#include "../math/hmc/dense_mass_update.h"
#include "../math/hmc/gradient_mass.h"
#include "../math/hmc/mass_matrix.h"
#include "../math/stats/chain_statistics.h"
#include "../math/stats/chunk_sum.h"
#include "../math/stats/welford.h"
#include "chain_loop.h"

namespace fused_hmc {
namespace chains_cpu {

// ChEES's statistics of one pooled warm-up transition (math/adaptation/trajectory_adaptation.h):
// every chain's trajectory record, then the state's update, in the pooled CUDA kernel's order of
// operations.
template <typename scalar_t>
class ChEESStatistics {
 public:
  ChEESStatistics(int64_t batch, int64_t dim)
      : batch_(batch), dim_(dim), width_(trajectory_record_width(dim)), rows_(batch * width_),
        m0_(dim), m1_(dim) {}

  // Where chain b's transition writes its trajectory, and then its acceptance statistic and jitter.
  TrajectoryRecord rows_of(int64_t b) { return record_rows(row(b), dim_); }
  void record(int64_t b, double accept_prob, float jitter) {
    record_outcome(row(b), dim_, accept_prob, jitter);
  }

  void update(ChEESState& state, double next_step_size, int cap) {
    // A non-finite proposal weighs 0 and counts as 0.
    for (int64_t b = 0; b < batch_; ++b) {
      double* x1 = row(b) + dim_;
      bool finite = true;
      for (int64_t j = 0; j < dim_; ++j) finite = finite && is_finite_value(x1[j]);
      if (!finite) {
        std::fill(x1, x1 + dim_, 0.0);
        weight(b) = 0.0;
      }
    }
    PairwiseChunkSum<double> weights;
    for (int64_t b = 0; b < batch_; ++b) weights.add(weight(b));
    const double weight_sum = weights.total();
    for (int64_t j = 0; j < dim_; ++j) {
      PairwiseChunkSum<double> start, proposal;
      for (int64_t b = 0; b < batch_; ++b) {
        start.add(row(b)[j]);
        proposal.add(mul_rn(weight(b), row(b)[dim_ + j]));
      }
      m0_[j] = start.total() / static_cast<double>(batch_);
      m1_[j] = div_rn(proposal.total(), add_rn(weight_sum, kChEESWeightFloor));
    }
    PairwiseChunkSum<double> gradient;
    for (int64_t b = 0; b < batch_; ++b) {
      const double* r = row(b);
      ChEESChainSums sums;
      for (int64_t j = 0; j < dim_; ++j) {
        sums.add(sub_rn(r[j], m0_[j]), sub_rn(r[dim_ + j], m1_[j]), r[2 * dim_ + j]);
      }
      const double jitter = r[3 * dim_ + 1];
      gradient.add(mul_rn(weight(b), sums.term(mul_rn(jitter, state.trajectory_length))));
    }
    chees_update(state, gradient.total(), weight_sum, next_step_size, cap);
  }

 private:
  double* row(int64_t b) { return rows_.data() + b * width_; }
  double& weight(int64_t b) { return row(b)[3 * dim_]; }

  int64_t batch_, dim_, width_;
  std::vector<double> rows_;
  std::vector<double> m0_, m1_;  // the ensemble means, reused across transitions
};

template <class Target>
class Warmup {
 public:
  using scalar_t = typename Target::Scalar;

  Warmup(const Target& target, const WarmupParams<scalar_t>& p) : target_(target), p_(p), c_(p.chains) {}

  // Chain b's transition t with its carried force, and its draw folded into its window moments
  // (and its ChEES statistics into `chees`, when given); returns its acceptance.
  ChainAcceptance transition(int64_t b, int64_t t, TrajectoryArrays<scalar_t>& arrays,
                    ForceCarry<scalar_t>& carry, ChEESStatistics<scalar_t>* chees = nullptr) const {
    const int64_t g = c_.groups == 1 ? 0 : b;
    const TransitionUniforms uniforms = transition_uniforms(
        c_.stream, static_cast<uint64_t>(c_.chain_offset + b), static_cast<uint64_t>(t));
    const TrajectoryRecord record = chees != nullptr ? chees->rows_of(b) : TrajectoryRecord{};
    const auto decision = chain_transition(target_, c_, b, t, c_.inv_mass + g * mass_stride(c_),
                                           c_.step_size[g], trajectory_length(), uniforms,
                                           arrays, carry, record);
    const scalar_t* gradient =
        p_.gradient_estimate ? arrays.new_state_force(decision.accepted) : nullptr;
    return tally(b, t, decision, uniforms, arrays, chees, gradient);
  }

  // After chain b's transition t (alone or in a pack) with this decision and these uniforms: its
  // statistics, its draw (and with the gradient-based estimate the gradient at it, [d]) folded
  // into its window moments, and its ChEES statistics into `chees` when given; returns its
  // acceptance.
  ChainAcceptance tally(int64_t b, int64_t t, const TransitionDecision<scalar_t>& decision,
               const TransitionUniforms& uniforms, TrajectoryArrays<scalar_t>& arrays,
               ChEESStatistics<scalar_t>* chees, const scalar_t* gradient) const {
    add_to_statistics(c_.statistics, b, decision);
    if (chees != nullptr) {
      chees->record(b, static_cast<double>(decision.accept_prob()), uniforms.trajectory_uniform);
    }
    const SlowWindow window = slow_window_of(p_.windows, t - p_.warmup_start);
    if (p_.adapt_mass_matrix && window.start >= 0) {
      const double inv_count = 1.0 / static_cast<double>(t - p_.warmup_start - window.start + 1);
      fold(window_mean(b, 0), window_m2(b, 0), c_.q + b * c_.dim, inv_count, arrays);
      if (p_.gradient_estimate) fold(window_mean(b, 1), window_m2(b, 1), gradient, inv_count, arrays);
    }
    return {static_cast<double>(decision.accept_prob()), decision.divergent()};
  }

  bool gradient_estimate() const { return p_.gradient_estimate; }

  // The pooled acceptance statistic of every chain's acceptance at one transition
  // (pooled_acceptance.h), summed in the chain index's pairwise order.
  double pooled_acceptance(const std::vector<ChainAcceptance>& accept_stats) const {
    PairwiseChunkSum<double> x, w;
    for (const ChainAcceptance& a : accept_stats) {
      const PooledAcceptanceTerms terms =
          pooled_acceptance_terms(a.accept, a.divergent, p_.harmonic_acceptance);
      x.add(terms.x);
      w.add(terms.w);
    }
    return fused_hmc::pooled_acceptance(x.total(), w.total(), p_.harmonic_acceptance);
  }

  double trajectory_length() const {
    return p_.chees != nullptr ? p_.chees->trajectory_length : c_.trajectory_length;
  }

  // Dual averaging of group g after transition t with acceptance statistic `accept_stat`.
  void adapt_step_size(int64_t g, int64_t t, double accept_stat) const {
    if (!p_.adapt_step_size) return;
    const int64_t i = t - p_.warmup_start;
    c_.step_size[g] =
        warmup_step_size_update(p_.dual_averaging[g], p_.windows, i, p_.adapt_mass_matrix,
                                c_.groups != 1 || c_.batch == 1, accept_stat, p_.target_accept,
                                c_.step_size[g]);
  }

  // ChEES's update after transition t of every chain (after the step sizes'). T's clip takes the
  // next step size: the pooled one, or the median of the chains' own.
  void adapt_trajectory_length(ChEESStatistics<scalar_t>& chees) const {
    double next_step_size = c_.step_size[0];
    if (c_.groups != 1) {
      std::vector<double> sizes(c_.step_size, c_.step_size + c_.groups);
      next_step_size = median_of(sizes);
    }
    chees.update(*p_.chees, next_step_size, c_.num_steps);
  }

  bool ends_window(int64_t t) const {
    return p_.adapt_mass_matrix && ends_slow_window(p_.windows, t - p_.warmup_start);
  }

  double window_draws(int64_t t) const {
    const int64_t i = t - p_.warmup_start;
    return static_cast<double>(i - slow_window_of(p_.windows, i).start + 1);
  }

  // Chain b's own inverse mass from its window, and a fresh window. A dense one is kept when the
  // window's regularised covariance is not finite and positive definite (dense_mass.h).
  void update_own_inverse_mass(int64_t b, int64_t t) const {
    const double n = window_draws(t);
    if (c_.dense_mass) {
      adapt_dense_window(window(b, 0), p_.gradient_estimate ? window(b, 1) : DenseWindowMoments{},
                         1, false, n, c_.dim, c_.inv_mass + b * c_.dim * c_.dim);
      reset_window(b);
      return;
    }
    scalar_t* inv_mass = c_.inv_mass + b * c_.dim;
    for (int64_t j = 0; j < c_.dim; ++j) {
      double var = window_m2(b, 0)[j] / (n - 1.0);
      if (p_.gradient_estimate) var = gradient_variance(var, window_m2(b, 1)[j] / (n - 1.0));
      inv_mass[j] = adapted_inverse_mass(var, n, inv_mass[j]);
    }
    reset_window(b);
  }

  // The shared inverse mass from every chain's window (mass_matrix.h's pooled variance), and fresh
  // windows.
  void update_pooled_inverse_mass(int64_t t) const {
    const double n = window_draws(t);
    if (c_.dense_mass) {
      update_pooled_dense_mass(n);
      return;
    }
    for (int64_t j = 0; j < c_.dim; ++j) {
      double variance = pooled_variance(0, j, n);
      if (p_.gradient_estimate) variance = gradient_variance(variance, pooled_variance(1, j, n));
      const double draws = n * static_cast<double>(c_.batch);
      c_.inv_mass[j] = adapted_inverse_mass(variance, draws, c_.inv_mass[j]);
    }
    for (int64_t b = 0; b < c_.batch; ++b) reset_window(b);
  }

 private:
  // Chain b's window moments of its draws (which = 0) or of the gradients at them (1).
  double* window_mean(int64_t b, int which) const {
    return p_.window_mean + (which * c_.batch + b) * c_.dim;
  }
  double* window_m2(int64_t b, int which) const {
    return p_.window_m2 + (which * c_.batch + b) * mass_stride(c_);
  }

  // x [d] folded into a window's moments mean and m2 with weight inv_count.
  void fold(double* mean, double* m2, const scalar_t* x, double inv_count,
            TrajectoryArrays<scalar_t>& arrays) const {
    if (c_.dense_mass) {
      comoment_update(mean, m2, x, c_.dim, inv_count, arrays.comoment_scratch());
    } else {
      for (int64_t j = 0; j < c_.dim; ++j) {
        welford_update(mean[j], m2[j], static_cast<double>(x[j]), inv_count);
      }
    }
  }

  // Coordinate j's pooled window variance of the draws (which = 0) or of the gradients (1).
  double pooled_variance(int which, int64_t j, double n) const {
    PairwiseChunkSum<double> log_sum, counted;
    for (int64_t b = 0; b < c_.batch; ++b) {
      const WindowLogVariance v = window_log_variance(window_m2(b, which)[j], n);
      log_sum.add(v.log_variance);
      counted.add(v.counted);
    }
    return pooled_window_variance(log_sum.total(), counted.total());
  }

  // Chain b's window moments (chain 0's: every chain's), of its draws (which = 0) or gradients (1).
  DenseWindowMoments window(int64_t b, int which) const {
    return {window_mean(b, which), window_m2(b, which)};
  }

  // The shared dense inverse mass from every chain's window (math/hmc/dense_mass_update.h), and
  // fresh windows.
  void update_pooled_dense_mass(double n) const {
    adapt_dense_window(window(0, 0), p_.gradient_estimate ? window(0, 1) : DenseWindowMoments{},
                       c_.batch, true, n, c_.dim, c_.inv_mass);
    for (int64_t b = 0; b < c_.batch; ++b) reset_window(b);
  }

  void reset_window(int64_t b) const {
    for (int which = 0; which < (p_.gradient_estimate ? 2 : 1); ++which) {
      std::fill(window_mean(b, which), window_mean(b, which) + c_.dim, 0.0);
      std::fill(window_m2(b, which), window_m2(b, which) + mass_stride(c_), 0.0);
    }
  }

  const Target& target_;
  const WarmupParams<scalar_t>& p_;
  const ChainBatch<scalar_t>& c_;
};

// Lane l's gradient at its new state after a pack's transition with this lane decision, in the
// arrays' gradient row, where the warm-up estimates the mass from gradients (else null).
template <class Target, class Packed, typename scalar_t = typename Target::Scalar>
const scalar_t* lane_gradient(const Warmup<Target>& warmup, const simd::PackOfChains<Packed>& pack,
                              int l, const TransitionDecision<scalar_t>& lane,
                              TrajectoryArrays<scalar_t>& arrays) {
  if (!warmup.gradient_estimate()) return nullptr;
  pack.new_state_force(l, lane.accepted, arrays.gradient_row());
  return arrays.gradient_row();
}

// Chains b .. b + W - 1, each with its own adaptation state, warmed up as a pack through the
// call's transitions (W chains' steps interleaved: chains adapting alone do not interact).
template <class Target, class Packed, typename scalar_t = typename Target::Scalar>
void warmup_pack(const Warmup<Target>& warmup, const Packed& packed, const ChainBatch<scalar_t>& c,
                 int64_t b, simd::PackOfChains<Packed>& pack, TrajectoryArrays<scalar_t>& arrays) {
  constexpr int W = simd::PackOfChains<Packed>::W;
  double step_size[W];
  const scalar_t* mass[W];
  TransitionUniforms uniforms[W];
  pack.start(c, b);
  for (int64_t t = c.first_transition; t < c.first_transition + c.num_transitions; ++t) {
    for (int l = 0; l < W; ++l) {
      step_size[l] = c.step_size[b + l];
      mass[l] = c.inv_mass + (b + l) * mass_stride(c);
    }
    const auto decision =
        pack.step(packed, c, t, step_size, mass, warmup.trajectory_length(), uniforms);
    for (int l = 0; l < W; ++l) {
      const auto lane = simd::lane_decision(decision, l);
      const ChainAcceptance accept = warmup.tally(b + l, t, lane, uniforms[l], arrays, nullptr,
                                                  lane_gradient(warmup, pack, l, lane, arrays));
      warmup.adapt_step_size(b + l, t, accept.accept);
      if (warmup.ends_window(t)) warmup.update_own_inverse_mass(b + l, t);
    }
  }
}

template <class Target, class Packed = NoPack>
void warmup_per_chain(const Warmup<Target>& warmup, const ChainBatch<typename Target::Scalar>& c,
                      const Packed& packed = Packed{}) {
  const int64_t end_transition = c.first_transition + c.num_transitions;
  using Arrays = TrajectoryArrays<typename Target::Scalar>;
  const auto make_arrays = [&] { return Arrays(c.dim, c.dense_mass); };
  // generic, so that it is instantiated only for a target with packs
  const auto warm_chains = [&](Arrays& arrays, auto& pack, int64_t b) {
    warmup_pack(warmup, packed, c, b, pack, arrays);
  };
  for_packs_and_chains<Packed>(
      c.batch, block_size(c.batch, c.num_transitions), c.dim, c.dense_mass, make_arrays,
      warm_chains, [&](Arrays& arrays, int64_t b) {
        ForceCarry<typename Target::Scalar>& carry = arrays.restart();
        for (int64_t t = c.first_transition; t < end_transition; ++t) {
          warmup.adapt_step_size(b, t, warmup.transition(b, t, arrays, carry).accept);
          if (warmup.ends_window(t)) warmup.update_own_inverse_mass(b, t);
        }
      });
}

// Chains b .. b + W - 1's lock-step warm-up transition t as a pack: each chain from its carried
// force (forces) with its group's step size and inverse mass (the shared ones when pooled),
// tallied as warmup.transition tallies it.
template <class Target, class Packed, typename scalar_t = typename Target::Scalar>
void pooled_pack_transition(const Warmup<Target>& warmup, const Packed& packed,
                            const ChainBatch<scalar_t>& c, int64_t b, int64_t t,
                            CarriedForces<Target>& forces, ChEESStatistics<scalar_t>* chees,
                            simd::PackOfChains<Packed>& pack, TrajectoryArrays<scalar_t>& arrays,
                            ChainAcceptance* accept_stats) {
  constexpr int W = simd::PackOfChains<Packed>::W;
  ForceCarry<scalar_t> carries[W];
  double step_size[W];
  const scalar_t* mass[W];
  TransitionUniforms uniforms[W];
  simd::PackTrajectoryRecord<W> record{};
  for (int l = 0; l < W; ++l) {
    carries[l] = forces.of(b + l, t > c.first_transition);
    const int64_t g = c.groups == 1 ? 0 : b + l;
    step_size[l] = c.step_size[g];
    mass[l] = c.inv_mass + g * mass_stride(c);
    if (chees != nullptr) record.lanes[l] = chees->rows_of(b + l);
  }
  pack.start(c, b);
  pack.carry_in(carries);
  const auto decision =
      pack.step(packed, c, t, step_size, mass, warmup.trajectory_length(), uniforms, record);
  pack.carry_out(carries);
  for (int l = 0; l < W; ++l) {
    const auto lane = simd::lane_decision(decision, l);
    accept_stats[b + l] = warmup.tally(b + l, t, lane, uniforms[l], arrays, chees,
                                       lane_gradient(warmup, pack, l, lane, arrays));
  }
}

// Transitions one at a time over every chain: the pooled warm-up (G = 1), or ChEES with per-chain
// step sizes and inverse masses (G = B).
template <class Target, class Packed = NoPack>
void warmup_in_lock_step(const Warmup<Target>& warmup,
                         const ChainBatch<typename Target::Scalar>& c, bool adapt_trajectory_length,
                         const Packed& packed = Packed{}) {
  using scalar_t = typename Target::Scalar;
  const bool pooled = c.groups == 1;
  std::vector<ChainAcceptance> accept_stats(c.batch);
  std::unique_ptr<ChEESStatistics<scalar_t>> chees;
  if (adapt_trajectory_length) chees = std::make_unique<ChEESStatistics<scalar_t>>(c.batch, c.dim);
  CarriedForces<Target> forces(c.batch, c.dim);
  const auto make_arrays = [&] { return TrajectoryArrays<scalar_t>(c.dim, c.dense_mass); };
  int64_t block = block_size(c.batch, 1);
  for (int64_t t = c.first_transition; t < c.first_transition + c.num_transitions; ++t) {
    const auto began = std::chrono::steady_clock::now();
    // every chain's part in parallel; the reductions below in the chain index's fixed order
    const auto pack_body = [&](TrajectoryArrays<scalar_t>& mine, auto& pack, int64_t b) {
      pooled_pack_transition(warmup, packed, c, b, t, forces, chees.get(), pack, mine,
                             accept_stats.data());
    };
    for_packs_and_chains<Packed>(
        c.batch, block, c.dim, c.dense_mass, make_arrays, pack_body,
        [&](TrajectoryArrays<scalar_t>& mine, int64_t b) {
          ForceCarry<scalar_t> carry = forces.of(b, t > c.first_transition);
          accept_stats[b] = warmup.transition(b, t, mine, carry, chees.get());
        });
    if (t == c.first_transition) {
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - began;
      block = timed_block_size(c.batch, block, took.count());
    }
    if (pooled) {
      warmup.adapt_step_size(0, t, warmup.pooled_acceptance(accept_stats));
    } else {
      for (int64_t b = 0; b < c.batch; ++b) warmup.adapt_step_size(b, t, accept_stats[b].accept);
    }
    if (chees) warmup.adapt_trajectory_length(*chees);
    if (warmup.ends_window(t)) {
      if (pooled) {
        warmup.update_pooled_inverse_mass(t);
      } else {
        for (int64_t b = 0; b < c.batch; ++b) warmup.update_own_inverse_mass(b, t);
      }
    }
  }
}

template <class Target, class Packed = NoPack, typename scalar_t = typename Target::Scalar>
void warmup(const Target& target, const WarmupParams<scalar_t>& p,
            const Packed& packed = Packed{}) {
  const Warmup<Target> w(target, p);
  if (pools_chains(p) || p.chees != nullptr) {
    warmup_in_lock_step(w, p.chains, p.chees != nullptr, packed);
  } else {
    warmup_per_chain(w, p.chains, packed);
  }
}

}  // namespace chains_cpu
}  // namespace fused_hmc
