// Limits and defaults shared by C++ and Python: one FHMC_LIMIT line per constant, the one source of
// each (fused_hmc/_limits.py reads this file with a regex at import, without building anything).
#pragma once

#include <cstdint>

#define FHMC_LIMIT(name, value) constexpr int64_t name = value;

namespace fused_hmc {

// The largest dimension of a dense Gaussian target, in every build (its position vector sits in
// shared memory on CUDA).
FHMC_LIMIT(kMaxDenseDim, 256)
// The largest dimension of a dense mass matrix (math/hmc/dense_mass.h): its factor and a window's
// co-moments are [d, d] per chain (per chain adaptation: B d^2 float64), and each leapfrog step
// costs d^2 multiply-adds; docs/MASS_MATRIX.md.
FHMC_LIMIT(kMaxDenseMassDim, 128)
// The largest dimension of the CUDA kernels: 256 threads per chain, 4 chunks of 4 each.
FHMC_LIMIT(kMaxCudaDim, 4096)
// Warm-up lengths and window sizes stay below this, which keeps the window arithmetic in int64.
FHMC_LIMIT(kMaxWarmupLength, 1099511627776)
// Leapfrog steps per transition (an int in the kernels).
FHMC_LIMIT(kMaxLeapfrogSteps, 2147483647)
// Stan's adaptation windows (adapt init_buffer / window / term_buffer), and the shortest warm-up
// that has slow windows at all.
FHMC_LIMIT(kInitBuffer, 75)
FHMC_LIMIT(kBaseWindow, 25)
FHMC_LIMIT(kTermBuffer, 50)
FHMC_LIMIT(kMinWarmupForWindows, 20)
// The fewest warm-up iterations that may follow a restart of dual averaging (issue 32). A restart
// sets mu = log(10 eps), and its run's first iterates, near 10 eps, weigh most in the final
// exp(x_bar): Stan's scaled windows left 2 terminal iterations of a 20-iteration warm-up, which
// ended at 5-9x the long warm-up's step size, and most of sampling's transitions diverged.
// Measured with windows (75, 25, M), W = 1000, per-chain warm-up, on a Gaussian (d = 10), eight
// schools and logistic regression, median final acceptance for target 0.8: 0.78 / 0.76 / 0.77 at
// M = 20, 0.79 / 0.79 / 0.78 at M = 25 (0.00 / 0.01 at M = 5 on the first two).
// Without the restart the step size stays fitted to the mass before the last window (logistic
// regression's, 10x too small after it), hence the scaled windows' widened terminal interval.
FHMC_LIMIT(kMinDualAveragingRun, 25)
// The fewest draws of the slow window that the scaled windows' widened terminal interval leaves
// (adaptation_windows.h): the regularisation's prior weight (math/hmc/mass_matrix.h), so that the
// window's variance outweighs the 1e-3 it is shrunk towards.
FHMC_LIMIT(kMinScaledWindow, 5)

}  // namespace fused_hmc

#undef FHMC_LIMIT
