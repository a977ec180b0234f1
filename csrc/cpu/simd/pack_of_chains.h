// W consecutive chains of a CPU call run as one pack (pack_group.h): their states gathered into
// lanes at the start, one transition.h transition for all of them per call of step(), and the
// states scattered back to the chains' rows after it, so the per-chain bookkeeping
// (cpu/sample_chains.h, cpu/warmup_chains.h: statistics, kept draws, warm-up windows and step sizes) reads each chain's
// row as after a scalar transition. The chains' step sizes and inverse masses (diagonal, or dense
// factors) are read from their own rows at every step, so a per-chain warm-up may change them
// between steps.
#pragma once

#include <cstdint>
#include <vector>

#include "../../math/chain_params.h"
#include "../../math/hmc/dense_mass.h"
#include "../../math/hmc/mass_matrix.h"
#include "../../math/hmc/transition.h"
#include "pack_group.h"

namespace fused_hmc {
namespace simd {

template <class Packed>
class PackOfChains {
 public:
  using P = typename Packed::Scalar;
  using S = typename P::Scalar;
  using Wide = Pack<double, P::kLanes>;
  static constexpr int W = P::kLanes;

  // dense: the chains' inverse masses are dense factors [dim, dim] (math/hmc/dense_mass.h).
  PackOfChains(int64_t dim, bool dense)
      : rows_(8 * dim + 1), factor_(dense ? dim * dim + dim : 0), work_(dense ? dim : 0),
        row_(dim), dim_(dim), dense_(dense) {}

  // Chains b0 .. b0 + W - 1 of c, from their rows of c.q; no force carried yet.
  void start(const ChainBatch<S>& c, int64_t b0) {
    b0_ = b0;
    for (int64_t j = 0; j < dim_; ++j) {
      for (int l = 0; l < W; ++l) q()[j].set(l, c.q[(b0 + l) * dim_ + j]);
    }
    carry_ = {rows_.data() + 5 * dim_, rows_.data() + 8 * dim_, false};
  }

  // The force each chain carries from an earlier transition, carries[l] chain l's (a pooled
  // warm-up runs a pack one transition at a time; a null carry holds none), and back after step().
  void carry_in(const ForceCarry<S>* carries) {
    carry_.valid = carries[0].held() && carries[0].valid;
    if (!carry_.valid) return;
    for (int l = 0; l < W; ++l) {
      for (int64_t j = 0; j < dim_; ++j) carry_.f[j].set(l, carries[l].f[j]);
      carry_.u->set(l, *carries[l].u);
    }
  }
  void carry_out(const ForceCarry<S>* carries) const {
    if (!carries[0].held()) return;
    for (int l = 0; l < W; ++l) {
      for (int64_t j = 0; j < dim_; ++j) carries[l].f[j] = carry_.f[j][l];
      *carries[l].u = (*carry_.u)[l];
    }
  }

  // After step(): chain l's force (the potential's gradient) at its new state into row [dim], the
  // proposal's when it accepted, else the start's.
  void new_state_force(int l, bool accepted, S* row) const {
    const P* f = rows_.data() + (accepted ? 7 : 2) * dim_;
    for (int64_t j = 0; j < dim_; ++j) row[j] = f[j][l];
  }

  // Transition t of the pack: chain l with step size step_size[l] and inverse mass inv_mass[l]
  // (a diagonal [dim] or a dense factor [dim, dim]); its uniforms are left in uniforms[l], its
  // trajectory in record's lane l when given. The new states are in c.q after.
  TransitionDecision<P> step(const Packed& target, const ChainBatch<S>& c, int64_t t,
                             const double* step_size, const S* const* inv_mass, double length,
                             TransitionUniforms* uniforms,
                             const PackTrajectoryRecord<W>& record = {}) {
    const uint64_t chain0 = static_cast<uint64_t>(c.chain_offset + b0_);
    Pack<double, W> eps;
    for (int l = 0; l < W; ++l) {
      uniforms[l] = transition_uniforms(c.stream, chain0 + l, static_cast<uint64_t>(t));
      eps.set(l, step_size[l]);
    }
    const PackPhiloxNoise<S, W> noise{c.stream, chain0, static_cast<uint64_t>(t), uniforms,
                                      row_.data()};
    P* x = rows_.data();
    const PackGroup<S, W> group(dim_, {x + dim_, x + 2 * dim_, x + 3 * dim_, x + 4 * dim_,
                                       x + 7 * dim_});
    const TrajectoryOf<Pack<double, W>> trajectory{eps, c.jitter, c.num_steps, length};
    P* state = q();
    TransitionDecision<P> decision;
    if (dense_) {
      P* factor = factor_.data();
      gather(inv_mass, dim_ * dim_, factor);
      const DenseMass<P> mass{factor, dim_, factor + dim_ * dim_, work_.data()};
      decision = transition(group, target, noise, mass, state, trajectory, carry_, record);
    } else {
      P* mass = rows_.data() + 6 * dim_;
      gather(inv_mass, dim_, mass);
      decision = transition(group, target, noise, DiagonalMass<P>{mass}, state, trajectory,
                            carry_, record);
    }
    for (int64_t j = 0; j < dim_; ++j) {
      for (int l = 0; l < W; ++l) c.q[(b0_ + l) * dim_ + j] = state[j][l];
    }
    return decision;
  }

 private:
  P* q() { return rows_.data(); }

  // rows[i] <- lane l's rows_of[l][i], i < n
  static void gather(const S* const* rows_of, int64_t n, P* rows) {
    for (int64_t i = 0; i < n; ++i) {
      for (int l = 0; l < W; ++l) rows[i].set(l, rows_of[l][i]);
    }
  }

  // rows: q, 4 trajectory rows, the carried force, the inverse mass, a fifth trajectory row, and
  // the carried potential
  std::vector<P> rows_;
  std::vector<P> factor_;  // a dense mass's factors [dim, dim], then its velocity row [dim]
  std::vector<Wide> work_;  // a dense mass's float64 row
  std::vector<S> row_;  // one chain's momentum normals
  int64_t dim_;
  bool dense_;
  int64_t b0_ = 0;
  ForceCarry<P> carry_{nullptr, nullptr, false};
};

}  // namespace simd
}  // namespace fused_hmc
