// The CPU build's group of W chains in vector lanes (cpu/simd/pack.h): math/hmc/transition.h's
// Group, Noise and trajectory length for scalar_t = Pack<S, W>, so the one transition body runs W
// chains per thread. Each lane computes what the scalar build computes for its chain: the same
// operations on the same values, in the same order.
//   - The rows are SerialGroup's, of packs: coordinate j of chain l is row[j][l].
//   - Each chain draws its own momentum and uniforms from its own Philox stream (the scalar
//     functions, then transposed into lanes).
//   - A chain whose L is below the pack's most holds still in the middle steps, as a kRow target's
//     chains do on CUDA (transition.h): it makes the same moves as alone, and its lanes' forces at
//     the positions where it waits are computed and discarded.
#pragma once

#include <cstdint>

#include "../../math/adaptation/trajectory_adaptation.h"
#include "../../math/hmc/transition.h"
#include "../serial_group.h"
#include "pack.h"

namespace fused_hmc {
namespace simd {

template <typename S, int W>
class PackGroup : public SerialGroup<Pack<S, W>> {
 public:
  using SerialGroup<Pack<S, W>>::SerialGroup;
  template <class Target>
  static constexpr bool kMayHoldStill = true;
  // The pack loops its chains' most steps.
  template <class Target>
  int loop_steps(const Pack<int, W>& leapfrog_steps, bool) const {
    return max_lane(leapfrog_steps);
  }
};

// trajectory_adaptation.h's trajectory_steps for each chain of a pack.
template <int W>
Pack<int, W> trajectory_steps(double length, int cap, const Pack<double, W>& eps,
                              const Pack<float, W>& w) {
  Pack<int, W> steps;
  for (int l = 0; l < W; ++l) steps.v[l] = ::fused_hmc::trajectory_steps(length, cap, eps[l], w[l]);
  return steps;
}

// The Noise policy of W consecutive stream chains chain0 .. chain0 + W - 1 at one transition
// (transition.h's PhiloxNoise per lane). `row` is scratch of the row's length.
template <typename S, int W>
struct PackPhiloxNoise {
  PhiloxStream stream;
  uint64_t chain0;
  uint64_t transition;
  const TransitionUniforms* uniforms;  // [W]
  S* row;

  void draw_row(int64_t dim, Pack<S, W>* z) const {
    for (int l = 0; l < W; ++l) {
      stream_momentum(stream, chain0 + static_cast<uint64_t>(l), transition, dim, row);
      for (int64_t j = 0; j < dim; ++j) z[j].set(l, row[j]);
    }
  }
  Pack<float, W> jitter_uniform() const {
    Pack<float, W> u;
    for (int l = 0; l < W; ++l) u.set(l, uniforms[l].jitter_uniform);
    return u;
  }
  Pack<float, W> trajectory_uniform() const {
    Pack<float, W> u;
    for (int l = 0; l < W; ++l) u.set(l, uniforms[l].trajectory_uniform);
    return u;
  }
  void await_uniform() const {}
  Mask<W> accepts(const Pack<S, W>& log_alpha) const {
    Mask<W> m;
    for (int l = 0; l < W; ++l) {
      m.v[l] = philox_accept_by_log(uniforms[l].log_uniform, log_alpha[l]) ? -1 : 0;
    }
    return m;
  }
};

// transition.h's TrajectoryRecord for a pack: lane l's values into chain l's rows (inactive when
// lane 0's is: a pack records all of its chains or none).
template <int W>
struct PackTrajectoryRecord {
  TrajectoryRecord lanes[W];
  bool active() const { return lanes[0].active(); }
  void write(int64_t j, const Pack<double, W>& start, const Pack<double, W>& proposal,
             const Pack<double, W>& velocity) const {
    for (int l = 0; l < W; ++l) lanes[l].write(j, start[l], proposal[l], velocity[l]);
  }
};

// Chain l's own decision out of a pack's.
template <typename S, int W>
TransitionDecision<S> lane_decision(const TransitionDecision<Pack<S, W>>& d, int l) {
  return {d.accepted[l], d.log_alpha[l], d.gradient_evaluations[l]};
}

}  // namespace simd
}  // namespace fused_hmc
