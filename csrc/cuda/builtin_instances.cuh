// Explicit instantiations of the built-in targets' CUDA launchers (csrc/targets.def) for one
// scalar (FHMC_SCALAR) and one kernel family (FHMC_SAMPLING, FHMC_WARMUP, or FHMC_DENSE: sampling
// and warm-up with a dense mass), chosen by the including builtin_*.cu: the kernels are spread over
// six translation units so that the build compiles them in parallel (as one unit they took 5
// minutes of one core); register_builtin_targets.cpp registers them.
#pragma once

#include "../math/targets/builtin.h"
#include "chain_launchers.cuh"

namespace fused_hmc {

// N(0, I) in float fits 80 registers with no spill at every one-chunk group (72-93 unbounded):
// grids too large for one wave run three blocks per SM instead of two (H200, 1M chains x 64: 7%
// faster; a 2048-chain grid, one wave either way, was 6% slower capped, so it keeps the other).
// Measured in benchmarks/results/chain_kernel/README.md.
template <>
struct chain_kernels::SamplingBlocksPerSm<StandardGaussian<float>> {
  static constexpr int value = 3;
};

// The pooled warm-up's cooperative kernel of the float Gaussians fits 128 registers with no spill
// (140-151 unbounded; the dense target's would spill): two blocks per SM instead of one.
template <>
struct pooled_warmup::PooledBlocksPerSm<StandardGaussian<float>> {
  static constexpr int value = 2;
};
template <>
struct pooled_warmup::PooledBlocksPerSm<DiagonalGaussian<float>> {
  static constexpr int value = 2;
};

#if defined(FHMC_DENSE)
#define FHMC_TARGET(T)                                                                  \
  template int sample_dense_cuda<T<FHMC_SCALAR>>(const TargetTensors&,                  \
                                                 const SamplingParams<FHMC_SCALAR>&, void*); \
  template int warmup_dense_cuda<T<FHMC_SCALAR>>(const TargetTensors&,                  \
                                                 const WarmupParams<FHMC_SCALAR>&, void*);
#elif defined(FHMC_SAMPLING)
#define FHMC_TARGET(T)                                                                  \
  template int sample_cuda<T<FHMC_SCALAR>>(const TargetTensors&,                        \
                                           const SamplingParams<FHMC_SCALAR>&, void*);
#elif defined(FHMC_WARMUP)
#define FHMC_TARGET(T)                                                                  \
  template int warmup_cuda<T<FHMC_SCALAR>>(const TargetTensors&,                        \
                                           const WarmupParams<FHMC_SCALAR>&, void*);    \
  template int64_t cuda_pooled_tile_chains<T<FHMC_SCALAR>>(const ChainBatch<FHMC_SCALAR>&);
#else
#error "define FHMC_SAMPLING, FHMC_WARMUP or FHMC_DENSE before including builtin_instances.cuh"
#endif
#include "../targets.def"
#undef FHMC_TARGET

}  // namespace fused_hmc
