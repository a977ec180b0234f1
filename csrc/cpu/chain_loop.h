// What every CPU chain loop shares (cpu/sample_chains.h, cpu/warmup_chains.h): a worker's
// trajectory arrays, the chains' carried forces, how chains are cut into blocks for threads and into
// packs of vector lanes (for_packs_and_chains), and one chain's transition on the serial group.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "../math/adaptation/trajectory_adaptation.h"
#include "../math/chain_params.h"
#include "../math/hmc/dense_mass.h"
#include "../math/hmc/mass_matrix.h"
#include "../math/hmc/transition.h"
#include "../math/targets/target.h"
#include "chain_blocks.h"
#include "serial_group.h"
#include "simd/pack_of_chains.h"

namespace fused_hmc {
namespace chains_cpu {

// One worker's trajectory arrays (5 x [d]), reused across its chains and transitions, and the
// force it carries from one transition of its chain to the next (restart() for each chain). With
// a dense mass also its rows (math/hmc/dense_mass.h: a velocity row, a float64 row) and the
// warm-up's scratch (a window update's 2 rows); and a row for a pack's lane's
// gradient (the gradient-based mass estimate).
template <typename scalar_t>
class TrajectoryArrays {
 public:
  explicit TrajectoryArrays(int64_t dim, bool dense = false)
      : storage_((dense ? 7 : 6) * dim + 1), dense_(dense ? 3 * dim : 0), gradient_(dim),
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
  double* comoment_scratch() { return dense_.data() + dim_; }  // [2 d]
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

}  // namespace chains_cpu
}  // namespace fused_hmc
