// Per-coordinate running mean and sum of squared deviations (Welford 1962), shared by the CPU and
// CUDA samplers. Accumulators are float64 whatever the chain dtype: after 10^6 draws a float32 mean
// would carry ~1e-7 relative error per update and drift.
//
// Every operation is spelled with an explicit rounding (sub_rn, fma_any), so the CPU and CUDA builds
// give bit-identical accumulators from identical draws, and the result does not depend on how the
// draws were split across calls.
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "../fp/rounding.h"

namespace fused_hmc {

// Folds draw `x` into (mean, m2); inv_count = 1 / (number of draws including this one), computed
// once per kept transition by the caller (one division instead of one per coordinate).
// Afterwards mean is the average of the draws and m2 / (count - 1) their unbiased variance.
FHMC_HD void welford_update(double& mean, double& m2, double x, double inv_count) {
  const double delta = sub_rn(x, mean);
  mean = fma_any(delta, inv_count, mean);
  m2 = fma_any(delta, sub_rn(x, mean), m2);
}

}  // namespace fused_hmc
