// CPU sampling over any Target: every chain through all of the call's transitions, in parallel
// blocks of chains (packs of vector lanes where the target has them), its statistics and kept draws
// tallied as it goes.
#pragma once

#include <cstdint>
#include <vector>

#include "../math/chain_params.h"
#include "../math/stats/chain_statistics.h"
#include "../math/stats/thinning.h"
#include "../math/stats/welford.h"
#include "chain_loop.h"

namespace fused_hmc {
namespace chains_cpu {

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

}  // namespace chains_cpu
}  // namespace fused_hmc
