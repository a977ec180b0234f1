// The CPU's Group policy of math/hmc/transition.h: one thread runs a chain's whole row, which lives
// in memory ([dim] arrays; a worker's scratch reused across its chains), coordinate by coordinate
// in loops the compiler runs in vector lanes. Nothing to synchronise; the chunk sum is
// chunk_sum.h's PairwiseChunkSum over the chunks in order.
#pragma once

#include <cstdint>

#include "../math/hmc/transition.h"
#include "../math/stats/chunk_sum.h"
#include "../math/targets/target.h"

namespace fused_hmc {

// f = -grad log p at x ([dim] each); returns U(x) = -log p(x) for a kPosition target (0 for the
// others, whose energy change needs no potential).
template <class Target, typename scalar_t = typename Target::Scalar>
inline scalar_t target_forces(const Target& target, const scalar_t* x, scalar_t* f, int64_t dim) {
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

// A transition's work rows, each [dim] of the chain's dtype: the start momentum, the forces at the
// start and at the current position, the position and the momentum.
template <typename scalar_t>
struct TrajectoryScratch {
  scalar_t *p0, *f0, *x, *p, *f;
};

// The force f [dim] and potential *u at a chain's current state, handed from one transition to the
// next (math/hmc/transition.h's Carry). `valid` is false until a transition of the call has run;
// f == nullptr carries nothing.
template <typename scalar_t>
struct ForceCarry {
  scalar_t* f;
  scalar_t* u;
  bool valid;
  bool held() const { return f != nullptr; }
  scalar_t& potential() const { return *u; }
};

template <typename scalar_t>
class SerialGroup {
 public:
  template <typename T>
  using Row = T*;
  template <class Target>
  using Carry = ForceCarry<scalar_t>;
  template <class Target>
  static constexpr bool kRecomputesForces = false;
  template <class Target>
  static constexpr bool kMayHoldStill = false;  // loop_steps is always the chain's own

  // Coordinates j0 .. j0 + 3 (those below dim).
  struct Chunk {
    int64_t j0, dim;
    template <class F>
    void each(F&& f) const {
      for (int64_t j = j0; j < j0 + kChunkSize && j < dim; ++j) f(j, j);
    }
  };

  // The chunks' partials, summed pairwise as they come (in chunk order).
  template <typename T>
  struct ChunkSum {
    PairwiseChunkSum<T> sum;
    void add(const Chunk&, T partial) { sum.add(partial); }
    T total() const { return sum.total(); }
  };

  SerialGroup(int64_t dim, TrajectoryScratch<scalar_t> scratch) : dim_(dim), scratch_(scratch) {}

  bool live() const { return true; }
  template <typename T>
  TrajectoryScratch<scalar_t> work() const {
    return scratch_;
  }
  template <class Target>
  const scalar_t* shift(const Target& target) const {
    if constexpr (Target::kShifted) {
      return target.shift();
    } else {
      return nullptr;
    }
  }
  template <class F>
  void each(F&& f) const {
    for (int64_t j = 0; j < dim_; ++j) f(j);
  }
  template <class F>
  void each_chunk(F&& f) const {
    for (int64_t j0 = 0; j0 < dim_; j0 += kChunkSize) f(Chunk{j0, dim_});
  }
  template <class Noise>
  void draw_momentum(const Noise& noise, scalar_t* z) const {
    noise.draw_row(dim_, z);
  }
  template <class Target, class Mass>
  scalar_t forces(const Target& target, const Mass&, const scalar_t* x, scalar_t* f) const {
    return target_forces(target, x, f, dim_);
  }
  template <class Target>
  int loop_steps(int leapfrog_steps, bool) const {
    return leapfrog_steps;
  }
  template <typename T>
  ChunkSum<T> chunk_sum() const {
    return {};
  }

 private:
  int64_t dim_;
  TrajectoryScratch<scalar_t> scratch_;
};

}  // namespace fused_hmc
