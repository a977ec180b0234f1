// The Metropolis test of a transition from its summed energy change 2 (H(proposed) - H(current)),
// in the two forms the noise modes promise (math/hmc/transition.h's noise policies pick one):
//   metropolis_*  the reference's test, log(clamp(u, min=1e-10)) < log_alpha with torch's own log
//                 in u's dtype (the torch-stream and given-noise modes: torch's decisions);
//   philox_*      the same comparison with log(u) taken by portable_log, so a CPU and a GPU run of
//                 the native stream decide alike even at near ties.
// Each is split in two so that a kernel may take the log ahead of the trajectory (it depends on the
// uniform alone).
#pragma once

#include <cmath>

#include "../fp/host_device.h"
#include "../fp/portable_math.h"

namespace fused_hmc {

// log_alpha = H(current) - H(proposed) from the chain's summed energy change (twice it).
template <typename scalar_t>
FHMC_HD scalar_t log_accept_ratio(scalar_t energy_change_twice_sum) {
  return scalar_t(-0.5) * energy_change_twice_sum;
}

// The comparison is in the wider of u's and log_alpha's dtypes (torch's type promotion). A NaN u
// propagates through the clamp as in torch, and a NaN on either side rejects.
FHMC_HD float log_rn(float v) { return logf(v); }
FHMC_HD double log_rn(double v) { return log(v); }

template <typename uniform_t>
FHMC_HD uniform_t metropolis_log_uniform(uniform_t u) {
  const uniform_t floor = static_cast<uniform_t>(1e-10);
  const uniform_t clamped = u < floor ? floor : u;
  return log_rn(clamped);
}

template <typename uniform_t, typename scalar_t>
FHMC_HD bool metropolis_accept_by_log(uniform_t log_uniform, scalar_t log_alpha) {
  using wide_t = decltype(uniform_t(0) + scalar_t(0));
  return static_cast<wide_t>(log_uniform) < static_cast<wide_t>(log_alpha);
}

template <typename uniform_t, typename scalar_t>
FHMC_HD bool metropolis_accept(uniform_t u, scalar_t log_alpha) {
  return metropolis_accept_by_log(metropolis_log_uniform(u), log_alpha);
}

FHMC_HD float philox_log_uniform(float uniform) {
  const float floor = 1e-10f;
  const float clamped = uniform < floor ? floor : uniform;
  return portable_log(clamped);
}

template <typename scalar_t>
FHMC_HD bool philox_accept_by_log(float log_uniform, scalar_t log_alpha) {
  return static_cast<scalar_t>(log_uniform) < log_alpha;
}

// min(1, exp(log_alpha)), computed in the chain's dtype with portable_exp (it drives dual
// averaging); a NaN log_alpha (a diverged proposal, always rejected) gives 0.
template <typename scalar_t>
FHMC_HD scalar_t accept_probability(scalar_t log_alpha) {
  if (log_alpha != log_alpha) return scalar_t(0);
  return log_alpha >= scalar_t(0) ? scalar_t(1) : portable_exp(log_alpha);
}

// accept_probability(log_alpha), formed only when value() is asked: a sum of them over a chain's
// transitions may form several at once (the CUDA kernels' lane sums, cuda/lane_group.cuh).
template <typename scalar_t>
struct AcceptProbability {
  scalar_t log_alpha;
  FHMC_HD scalar_t value() const { return accept_probability(log_alpha); }
};

}  // namespace fused_hmc
