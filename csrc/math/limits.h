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

}  // namespace fused_hmc

#undef FHMC_LIMIT
