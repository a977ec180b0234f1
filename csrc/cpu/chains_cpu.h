// The CPU chain launchers over any Target (math/targets/target.h), as templates a library
// instantiates for its targets (cpu/builtin_targets.cpp; users' modules): sampling, and warm-up per
// chain or pooled. The per-chain math is math/hmc/transition.h's, as the CUDA kernels compute it.
//
// Sampling and per-chain warm-up run chains in parallel, each through all of the call's
// transitions. A shared adaptation state (G = 1) pools every chain: transitions run one at a time
// over all chains in parallel, then the mean acceptance statistic feeds the one dual averaging, and
// at a slow window's end the chains' window moments pool into one inverse mass, all inside the call
// (no host round trip per transition). Pooled sums run over the chain index in chunk_sum.h's
// pairwise order, so the result depends on neither the thread count nor the backend.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "../math/adaptation/adaptation_windows.h"
#include "../math/adaptation/dual_averaging.h"
#include "../math/adaptation/trajectory_adaptation.h"
#include "../math/adaptation/warmup_update.h"
#include "../math/chain_params.h"
#include "../math/hmc/dense_mass.h"
#include "../math/hmc/gradient_mass.h"
#include "../math/hmc/mass_matrix.h"
#include "../math/hmc/transition.h"
#include "../math/stats/chain_statistics.h"
#include "../math/stats/chunk_sum.h"
#include "../math/stats/thinning.h"
#include "../math/stats/welford.h"
#include "../math/targets/target.h"
#include "chain_blocks.h"
#include "serial_group.h"
#include "simd/pack_of_chains.h"

namespace fused_hmc {
namespace chains_cpu {

// One worker's trajectory arrays (5 x [d]), reused across its chains and transitions, and the
// force it carries from one transition of its chain to the next (restart() for each chain). With
// a dense mass also its rows (math/hmc/dense_mass.h: a velocity row, a float64 row) and the
// warm-up's scratch (a window update's 2 rows, a covariance [d, d]); and a row for a pack's lane's
// gradient (the gradient-based mass estimate).
template <typename scalar_t>
class TrajectoryArrays {
 public:
  explicit TrajectoryArrays(int64_t dim, bool dense = false)
      : storage_((dense ? 7 : 6) * dim + 1), dense_(dense ? 3 * dim + dim * dim : 0), gradient_(dim),
        dim_(dim) {}
  SerialGroup<scalar_t> group() {
    scalar_t* s = storage_.data();
    return {dim_, {s, s + dim_, s + 2 * dim_, s + 3 * dim_, s + 4 * dim_}};
  }
  ForceCarry<scalar_t>& restart() {
    carry_ = {storage_.data() + 5 * dim_, storage_.data() + 6 * dim_, false};
    return carry_;
  }
  // The Mass policy of the dense inverse mass with Cholesky factor `factor` [d, d].
  DenseMass<scalar_t> dense_mass(const scalar_t* factor) {
    return {factor, dim_, storage_.data() + 6 * dim_ + 1, dense_.data()};
  }
  double* comoment_scratch() { return dense_.data() + dim_; }       // [2 d]
  double* covariance_scratch() { return dense_.data() + 3 * dim_; }  // [d, d]
  // After a transition of one chain: the force (the potential's gradient) at its new state, the
  // proposal's when accepted, else the start's.
  const scalar_t* new_state_force(bool accepted) const {
    return storage_.data() + (accepted ? 4 : 1) * dim_;
  }
  scalar_t* gradient_row() { return gradient_.data(); }  // [d]

 private:
  std::vector<scalar_t> storage_;
  std::vector<double> dense_;
  std::vector<scalar_t> gradient_;
  int64_t dim_;
  ForceCarry<scalar_t> carry_{nullptr, nullptr, false};
};

// The length of one group's inv_mass: d (diagonal) or d^2 (a dense mass's factor).
template <typename scalar_t>
int64_t mass_stride(const ChainBatch<scalar_t>& c) {
  return c.dense_mass ? c.dim * c.dim : c.dim;
}

// Every chain's carried force, for a pooled warm-up that runs its transitions one at a time over
// all chains: f [B, d] and u [B], valid after the call's first transition; for a target that does
// not carry it, nothing (a null carry).
template <class Target, typename scalar_t = typename Target::Scalar>
class CarriedForces {
 public:
  CarriedForces(int64_t batch, int64_t dim)
      : f_(carries_force<Target>() ? batch * dim : 0), u_(carries_force<Target>() ? batch : 0),
        dim_(dim) {}
  ForceCarry<scalar_t> of(int64_t b, bool valid) {
    if (u_.empty()) return {nullptr, nullptr, false};
    return {f_.data() + b * dim_, u_.data() + b, valid};
  }

 private:
  std::vector<scalar_t> f_, u_;
  int64_t dim_;
};

// Chains per block (chain_blocks.h): at least a few chains when a call runs few transitions.
inline int64_t block_size(int64_t batch, int64_t num_transitions) {
  return chain_block_size(batch, 16 / std::max<int64_t>(1, num_transitions));
}

// The work a block of one pooled transition should hold: well above what taking a block costs
// (about a microsecond: a parallel_for task, an atomic).
constexpr double kPooledBlockSeconds = 20e-6;

// Chains per block of a pooled warm-up's transitions, from how long the first one took over
// `batch` chains in blocks of `block`: 16 chains of a Gaussian are worth one block, but one chain
// of a model over data rows can be (16 logistic regression chains on 2 threads otherwise ran the
// warm-up on one thread, 27 us a gradient against sampling's 18). Which thread runs a chain
// changes no bit.
inline int64_t timed_block_size(int64_t batch, int64_t block, double seconds) {
  const int64_t blocks = (batch + block - 1) / block;
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(blocks, at::get_num_threads()));
  const double per_chain = seconds * static_cast<double>(threads) / static_cast<double>(batch);
  const double wanted = per_chain > 0.0 ? std::ceil(kPooledBlockSeconds / per_chain) : 16.0;
  return chain_block_size(batch, static_cast<int64_t>(std::min(16.0, std::max(1.0, wanted))));
}

// Stores chain b's state q [dim] as this call's kept draw k (KeepClock::kept_index) and folds it
// into mean/m2 [dim] with count kept_before + k + 1.
template <typename scalar_t>
void keep_draw(const RunOutputs<scalar_t>& out, int64_t b, int64_t k, const scalar_t* q,
               int64_t dim, double* mean, double* m2) {
  const DrawSink<scalar_t>& sink = out.sink;
  if (sink.samples != nullptr) {
    scalar_t* row = sink.samples + b * sink.chain_stride + k * sink.draw_stride;
    for (int64_t j = 0; j < dim; ++j) row[j * sink.dim_stride] = q[j];
  }
  const double inv_count = 1.0 / static_cast<double>(out.kept_before + k + 1);
  for (int64_t j = 0; j < dim; ++j) welford_update(mean[j], m2[j], static_cast<double>(q[j]), inv_count);
}

// A chain's trajectory record row [trajectory_record_width(dim)]
// (math/adaptation/trajectory_adaptation.h): the transition writes its start, proposal and velocity
// rows, the caller its acceptance statistic and trajectory jitter.
inline TrajectoryRecord record_rows(double* row, int64_t dim) {
  return {row, row + dim, row + 2 * dim};
}

inline void record_outcome(double* row, int64_t dim, double accept_prob, float jitter) {
  row[3 * dim] = accept_prob;
  row[3 * dim + 1] = static_cast<double>(jitter);
}

// Transition t of chain b of the batch from its state q [dim], with inverse mass inv_mass [dim] (or
// a dense one's factor [dim, dim]) and base step size `step_size`: math/hmc/transition.h's body on
// the serial group under the philox stream.
template <class Target, typename scalar_t = typename Target::Scalar>
TransitionDecision<scalar_t> chain_transition(const Target& target, const ChainBatch<scalar_t>& c,
                                              int64_t b, int64_t t, const scalar_t* inv_mass,
                                              double step_size, double length,
                                              const TransitionUniforms& uniforms,
                                              TrajectoryArrays<scalar_t>& arrays,
                                              ForceCarry<scalar_t>& carry,
                                              TrajectoryRecord record = {}) {
  const auto chain = static_cast<uint64_t>(c.chain_offset + b);
  const PhiloxNoise<scalar_t> noise{c.stream, chain, static_cast<uint64_t>(t), uniforms};
  scalar_t* q = c.q + b * c.dim;
  const Trajectory trajectory{step_size, c.jitter, c.num_steps, length};
  if (c.dense_mass) {
    return transition(arrays.group(), target, noise, arrays.dense_mass(inv_mass), q, trajectory,
                      carry, record);
  }
  return transition(arrays.group(), target, noise, DiagonalMass<scalar_t>{inv_mass}, q, trajectory,
                    carry, record);
}

// No pack of chains: every chain runs alone (a target whose log density is not written for packs).
struct NoPack {
  static NoPack make(const TargetTensors&, int64_t) { return {}; }
};

// The chains per pack of a Packed target (1: no packs).
template <class Packed>
constexpr int64_t pack_lanes() {
  if constexpr (std::is_same<Packed, NoPack>::value) {
    return 1;
  } else {
    return Packed::Scalar::kLanes;
  }
}

// A thread's pack of Packed's chains (int: none).
template <class Packed>
using PackOf = std::conditional_t<(pack_lanes<Packed>() > 1), simd::PackOfChains<Packed>, int>;

// A CPU chain loop's blocks of `block` chains (for_chain_blocks), where whole packs of Packed's
// lanes (the block rounded up to them) run by pack_body(arrays, pack, b) for chains b .. b + W - 1,
// and every other chain alone by chain_body(arrays, b). Each thread makes its arrays and its pack
// (`dense`: for dense inverse masses) once.
template <class Packed, class MakeArrays, class PackBody, class ChainBody>
void for_packs_and_chains(int64_t batch, int64_t block, int64_t dim, bool dense,
                          const MakeArrays& make_arrays, const PackBody& pack_body,
                          const ChainBody& chain_body) {
  constexpr int64_t lanes = pack_lanes<Packed>();
  if (lanes > 1) block = (block + lanes - 1) / lanes * lanes;
  const auto make_worker = [&] {
    std::unique_ptr<PackOf<Packed>> pack;
    if constexpr (lanes > 1) pack = std::make_unique<PackOf<Packed>>(dim, dense);
    return std::make_pair(make_arrays(), std::move(pack));
  };
  for_chain_blocks(batch, block, make_worker, [&](auto& worker, int64_t begin, int64_t end) {
    int64_t b = begin;
    if constexpr (lanes > 1) {
      for (; b + lanes <= end; b += lanes) pack_body(worker.first, *worker.second, b);
    }
    for (; b < end; ++b) chain_body(worker.first, b);
  });
}

// One sampled chain's tallies over a call: its statistics and kept draws.
template <typename scalar_t>
class SampledChain {
 public:
  SampledChain(const SamplingParams<scalar_t>& p, int64_t b)
      : p_(p), b_(b), statistics_(p.chains.statistics, b, true),
        clock_(p.chains.first_transition, p.out.thin) {}

  // After a transition with this decision: chain b's statistics, and its state if kept.
  template <class Decision>
  void add(const Decision& decision) {
    statistics_.add(decision);
    const int64_t d = p_.chains.dim;
    if (clock_.advance()) {
      keep_draw(p_.out, b_, clock_.kept_index(), p_.chains.q + b_ * d, d, p_.out.mean + b_ * d,
                p_.out.m2 + b_ * d);
    }
  }
  void finish() { statistics_.store(p_.chains.statistics, b_); }

 private:
  const SamplingParams<scalar_t>& p_;
  int64_t b_;
  ChainTally<> statistics_;
  KeepClock clock_;
};

// Chains b .. b + W - 1 sampled as a pack through the call's transitions (the last recorded
// where p.recording asks).
template <class Packed, typename scalar_t>
void sample_pack(const Packed& packed, const SamplingParams<scalar_t>& p, int64_t b,
                 const scalar_t* inv_mass, int64_t mass_rows, double length,
                 simd::PackOfChains<Packed>& pack) {
  constexpr int W = simd::PackOfChains<Packed>::W;
  const ChainBatch<scalar_t>& c = p.chains;
  const int64_t end_transition = c.first_transition + c.num_transitions;
  std::vector<SampledChain<scalar_t>> chains;
  chains.reserve(W);
  double step_size[W];
  const scalar_t* mass[W];
  double* rows[W];
  for (int l = 0; l < W; ++l) {
    chains.emplace_back(p, b + l);
    step_size[l] = c.step_size[c.groups == 1 ? 0 : b + l];
    mass[l] = inv_mass + (mass_rows == 1 ? 0 : b + l) * mass_stride(c);
    rows[l] = p.recording.rows != nullptr
                  ? p.recording.rows + (b + l) * trajectory_record_width(c.dim)
                  : nullptr;
  }
  TransitionUniforms uniforms[W];
  pack.start(c, b);
  for (int64_t t = c.first_transition; t < end_transition; ++t) {
    const bool recorded = rows[0] != nullptr && t + 1 == end_transition;
    simd::PackTrajectoryRecord<W> record{};
    for (int l = 0; l < W && recorded; ++l) record.lanes[l] = record_rows(rows[l], c.dim);
    const auto decision = pack.step(packed, c, t, step_size, mass, length, uniforms, record);
    for (int l = 0; l < W; ++l) {
      const auto lane = simd::lane_decision(decision, l);
      if (recorded) {
        record_outcome(rows[l], c.dim, static_cast<double>(lane.accept_prob()),
                       uniforms[l].trajectory_uniform);
      }
      chains[l].add(lane);
    }
  }
  for (auto& chain : chains) chain.finish();
}

template <class Target, class Packed = NoPack, typename scalar_t = typename Target::Scalar>
void sample(const Target& target, const SamplingParams<scalar_t>& p,
            const Packed& packed = Packed{}) {
  const ChainBatch<scalar_t>& c = p.chains;
  const int64_t end_transition = c.first_transition + c.num_transitions;
  // A unit mass (null inv_mass) as ones: multiplying by 1 changes no bit.
  const std::vector<scalar_t> ones(c.inv_mass == nullptr ? c.dim : 0, scalar_t(1));
  const scalar_t* inv_mass = c.inv_mass == nullptr ? ones.data() : c.inv_mass;
  const int64_t mass_rows = c.inv_mass == nullptr ? 1 : c.groups;
  const double length = p.recording.rows != nullptr ? p.recording.chees->trajectory_length
                                                    : c.trajectory_length;
  const auto make_arrays = [&] { return TrajectoryArrays<scalar_t>(c.dim, c.dense_mass); };
  // generic, so that it is instantiated only for a target with packs
  const auto sample_chains = [&](auto&, auto& pack, int64_t b) {
    sample_pack(packed, p, b, inv_mass, mass_rows, length, pack);
  };
  for_packs_and_chains<Packed>(
      c.batch, block_size(c.batch, c.num_transitions), c.dim, c.dense_mass, make_arrays,
      sample_chains,
      [&](TrajectoryArrays<scalar_t>& arrays, int64_t b) {
        const int64_t g = c.groups == 1 ? 0 : b;
        const scalar_t* mass = inv_mass + (mass_rows == 1 ? 0 : b) * mass_stride(c);
        const uint64_t chain = static_cast<uint64_t>(c.chain_offset + b);
        SampledChain<scalar_t> sampled(p, b);
        ForceCarry<scalar_t>& carry = arrays.restart();
        for (int64_t t = c.first_transition; t < end_transition; ++t) {
          const TransitionUniforms uniforms =
              transition_uniforms(c.stream, chain, static_cast<uint64_t>(t));
          double* row = p.recording.rows != nullptr && t + 1 == end_transition
                            ? p.recording.rows + b * trajectory_record_width(c.dim)
                            : nullptr;
          const TrajectoryRecord record =
              row != nullptr ? record_rows(row, c.dim) : TrajectoryRecord{};
          const auto decision = chain_transition(target, c, b, t, mass, c.step_size[g], length,
                                                 uniforms, arrays, carry, record);
          if (row != nullptr) {
            record_outcome(row, c.dim, static_cast<double>(decision.accept_prob()),
                           uniforms.trajectory_uniform);
          }
          sampled.add(decision);
        }
        sampled.finish();
      });
}

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
  // (and its ChEES statistics into `chees`, when given); returns min(1, alpha).
  double transition(int64_t b, int64_t t, TrajectoryArrays<scalar_t>& arrays,
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
  // into its window moments, and its ChEES statistics into `chees` when given; returns
  // min(1, alpha).
  double tally(int64_t b, int64_t t, const TransitionDecision<scalar_t>& decision,
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
    return static_cast<double>(decision.accept_prob());
  }

  bool gradient_estimate() const { return p_.gradient_estimate; }

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

  // ChEES's update after transition t of every chain (after the step size's).
  void adapt_trajectory_length(ChEESStatistics<scalar_t>& chees) const {
    chees.update(*p_.chees, c_.step_size[0], c_.num_steps);
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
  void update_own_inverse_mass(int64_t b, int64_t t, TrajectoryArrays<scalar_t>& arrays) const {
    const double n = window_draws(t);
    if (c_.dense_mass) {
      const int64_t d = c_.dim;
      double* cov = arrays.covariance_scratch();
      window_covariance(window_m2(b, 0), n, d, cov);
      if (p_.gradient_estimate) {
        std::vector<double> gradients(d * d);
        window_covariance(window_m2(b, 1), n, d, gradients.data());
        from_gradients(cov, gradients.data());
      }
      regularize_covariance(cov, n, d);
      adapt_dense_factor(cov, d, c_.inv_mass + b * d * d);
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

  // cov [d, d] <- the gradient-based estimate from the draws' covariance cov and the gradients' g
  // (gradient_mass.h); NaN where it fails, so that the factor is kept (and counted).
  void from_gradients(double* cov, const double* g) const {
    const int64_t d = c_.dim;
    std::vector<double> sigma(d * d);
    if (gradient_dense_covariance(cov, g, d, sigma.data())) {
      std::copy(sigma.begin(), sigma.end(), cov);
    } else {
      cov[0] = NAN;
    }
  }

  // The shared dense inverse mass from every chain's window (dense_mass.h's pooled covariance,
  // of the gradients too for the gradient-based estimate, regularised for the n B draws, as the
  // diagonal's), and fresh windows.
  void update_pooled_dense_mass(double n) const {
    const int64_t d = c_.dim;
    std::vector<double> cov(d * d);
    pooled_dense_covariance(window_mean(0, 0), window_m2(0, 0), c_.batch, n, d, cov.data());
    if (p_.gradient_estimate) {
      std::vector<double> gradients(d * d);
      pooled_dense_covariance(window_mean(0, 1), window_m2(0, 1), c_.batch, n, d,
                              gradients.data());
      from_gradients(cov.data(), gradients.data());
    }
    regularize_covariance(cov.data(), n * static_cast<double>(c_.batch), d);
    adapt_dense_factor(cov.data(), d, c_.inv_mass);
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
      const double accept = warmup.tally(b + l, t, lane, uniforms[l], arrays, nullptr,
                                         lane_gradient(warmup, pack, l, lane, arrays));
      warmup.adapt_step_size(b + l, t, accept);
      if (warmup.ends_window(t)) warmup.update_own_inverse_mass(b + l, t, arrays);
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
          warmup.adapt_step_size(b, t, warmup.transition(b, t, arrays, carry));
          if (warmup.ends_window(t)) warmup.update_own_inverse_mass(b, t, arrays);
        }
      });
}

// Chains b .. b + W - 1's pooled warm-up transition t as a pack: each chain from its carried force
// (forces) with the shared step size and inverse mass, tallied as warmup.transition tallies it.
template <class Target, class Packed, typename scalar_t = typename Target::Scalar>
void pooled_pack_transition(const Warmup<Target>& warmup, const Packed& packed,
                            const ChainBatch<scalar_t>& c, int64_t b, int64_t t,
                            CarriedForces<Target>& forces, ChEESStatistics<scalar_t>* chees,
                            simd::PackOfChains<Packed>& pack, TrajectoryArrays<scalar_t>& arrays,
                            double* accept_stats) {
  constexpr int W = simd::PackOfChains<Packed>::W;
  ForceCarry<scalar_t> carries[W];
  double step_size[W];
  const scalar_t* mass[W];
  TransitionUniforms uniforms[W];
  simd::PackTrajectoryRecord<W> record{};
  for (int l = 0; l < W; ++l) {
    carries[l] = forces.of(b + l, t > c.first_transition);
    step_size[l] = c.step_size[0];
    mass[l] = c.inv_mass;
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

template <class Target, class Packed = NoPack>
void warmup_pooled(const Warmup<Target>& warmup, const ChainBatch<typename Target::Scalar>& c,
                   bool adapt_trajectory_length, const Packed& packed = Packed{}) {
  using scalar_t = typename Target::Scalar;
  std::vector<double> accept_stats(c.batch);
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
    PairwiseChunkSum<double> sum;
    for (const double a : accept_stats) sum.add(a);
    warmup.adapt_step_size(0, t, sum.total() / static_cast<double>(c.batch));
    if (chees) warmup.adapt_trajectory_length(*chees);
    if (warmup.ends_window(t)) warmup.update_pooled_inverse_mass(t);
  }
}

template <class Target, class Packed = NoPack, typename scalar_t = typename Target::Scalar>
void warmup(const Target& target, const WarmupParams<scalar_t>& p,
            const Packed& packed = Packed{}) {
  const Warmup<Target> w(target, p);
  if (pools_chains(p)) {
    warmup_pooled(w, p.chains, p.chees != nullptr, packed);
  } else {
    warmup_per_chain(w, p.chains, packed);
  }
}

}  // namespace chains_cpu

// The type-erased launchers of a target's registry entry (ops/target_registry.h); Packed, where
// given, is the target on packs of chains (cpu/simd/pack.h), for W chains per thread.
template <class Target, class Packed = chains_cpu::NoPack>
void sample_cpu(const TargetTensors& tensors, const SamplingParams<typename Target::Scalar>& p) {
  chains_cpu::sample(Target::make(tensors, p.chains.dim), p, Packed::make(tensors, p.chains.dim));
}

template <class Target, class Packed = chains_cpu::NoPack>
void warmup_cpu(const TargetTensors& tensors, const WarmupParams<typename Target::Scalar>& p) {
  chains_cpu::warmup(Target::make(tensors, p.chains.dim), p, Packed::make(tensors, p.chains.dim));
}

}  // namespace fused_hmc
