// W consecutive chains of a CPU call run as one pack (pack_group.h): their states gathered into
// lanes at the start, one transition.h transition for all of them per call of step(), and the
// states scattered back to the chains' rows after it, so the per-chain bookkeeping
// (cpu/chains_cpu.h: statistics, kept draws, warm-up windows and step sizes) reads each chain's
// row as after a scalar transition. The chains' step sizes and diagonal inverse masses are read
// from their own rows at every step, so a per-chain warm-up may change them between steps.
#pragma once

#include <cstdint>
#include <vector>

#include "../../math/chain_params.h"
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
  static constexpr int W = P::kLanes;

  explicit PackOfChains(int64_t dim)
      : rows_(8 * dim + 1), row_(dim), dim_(dim) {}

  // Chains b0 .. b0 + W - 1 of c, from their rows of c.q; no force carried yet.
  void start(const ChainBatch<S>& c, int64_t b0) {
    b0_ = b0;
    for (int64_t j = 0; j < dim_; ++j) {
      for (int l = 0; l < W; ++l) q()[j].set(l, c.q[(b0 + l) * dim_ + j]);
    }
    carry_ = {rows_.data() + 5 * dim_, rows_.data() + 8 * dim_, false};
  }

  // Transition t of the pack: chain l with step size step_size[l] and inverse mass row
  // inv_mass[l] ([dim]); its uniforms are left in uniforms[l]. The new states are in c.q after.
  TransitionDecision<P> step(const Packed& target, const ChainBatch<S>& c, int64_t t,
                             const double* step_size, const S* const* inv_mass, double length,
                             TransitionUniforms* uniforms) {
    const uint64_t chain0 = static_cast<uint64_t>(c.chain_offset + b0_);
    Pack<double, W> eps;
    for (int l = 0; l < W; ++l) {
      uniforms[l] = transition_uniforms(c.stream, chain0 + l, static_cast<uint64_t>(t));
      eps.set(l, step_size[l]);
    }
    P* mass = rows_.data() + 6 * dim_;
    for (int64_t j = 0; j < dim_; ++j) {
      for (int l = 0; l < W; ++l) mass[j].set(l, inv_mass[l][j]);
    }
    const PackPhiloxNoise<S, W> noise{c.stream, chain0, static_cast<uint64_t>(t), uniforms,
                                      row_.data()};
    P* x = rows_.data();
    const PackGroup<S, W> group(dim_, {x + dim_, x + 2 * dim_, x + 3 * dim_, x + 4 * dim_,
                                       x + 7 * dim_});
    P* state = q();
    const auto decision =
        transition(group, target, noise, DiagonalMass<P>{mass}, state,
                   TrajectoryOf<Pack<double, W>>{eps, c.jitter, c.num_steps, length}, carry_);
    for (int64_t j = 0; j < dim_; ++j) {
      for (int l = 0; l < W; ++l) c.q[(b0_ + l) * dim_ + j] = state[j][l];
    }
    return decision;
  }

 private:
  P* q() { return rows_.data(); }

  // rows: q, 4 trajectory rows, the carried force, the inverse mass, a fifth trajectory row, and
  // the carried potential
  std::vector<P> rows_;
  std::vector<S> row_;  // one chain's momentum normals
  int64_t dim_;
  int64_t b0_ = 0;
  ForceCarry<P> carry_{nullptr, nullptr, false};
};

}  // namespace simd
}  // namespace fused_hmc
