// N(mu, I) as the pure-torch reference computes it (fused_hmc/reference.py): the transition op's
// torch-stream and given-noise modes promise its q_new bit for bit, so this target integrates q
// itself (not x = q - mu), with force f = q - mu, and rounds every leapfrog operation alone, as
// torch's separate elementwise kernels do (no FMA): p - h f, q + eps p. Its energy term is the
// standard target's on the displacement d = q - mu, which is f: (d1 - d0)(d1 + d0) + the kinetic
// part. Not a registered target of the chain ops (that one is StandardGaussian, fused).
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "../fp/rounding.h"
#include "../hmc/transition.h"
#include "target.h"

namespace fused_hmc {

struct ReferenceLeapfrog {
  template <typename scalar_t>
  static FHMC_HD scalar_t kick(scalar_t p, scalar_t force, scalar_t h) {
    return sub_rn(p, mul_rn(h, force));
  }
  template <typename scalar_t, typename Mass>
  static FHMC_HD scalar_t drift(scalar_t q, scalar_t p, Mass inv_mass, scalar_t eps) {
    return add_rn(q, mul_rn(eps, mul_rn(inv_mass, p)));
  }
  // f = q - mu is the displacement, so the terms are formed from the forces, not from q.
  template <typename scalar_t, typename Mass>
  static FHMC_HD scalar_t energy_change_twice(scalar_t, scalar_t f0, scalar_t p0, scalar_t,
                                              scalar_t f1, scalar_t p1, Mass inv_mass) {
    return fma_any(sub_rn(f1, f0), add_rn(f1, f0), kinetic_change_twice(p0, p1, inv_mass));
  }
};

template <typename S>
struct ReferenceGaussian {
  using Scalar = S;
  using Leapfrog = ReferenceLeapfrog;
  static constexpr TargetForce kForce = TargetForce::kCoordinate;
  static constexpr bool kQuadratic = true;
  static constexpr bool kShifted = false;  // q itself is integrated; the mean enters the force
  static constexpr int64_t kMaxDim = 0;
  static constexpr int64_t kFixedDim = 0;

  const S* mu;  // [dim]
  int64_t dim;

  FHMC_HD const S* shift() const { return nullptr; }
  FHMC_HD S coefficient(int64_t j) const { return mu[j]; }
  FHMC_HD S force(S q, S mu_j) const { return sub_rn(q, mu_j); }
};

}  // namespace fused_hmc
