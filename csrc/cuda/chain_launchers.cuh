// The definitions of chain_launchers.h's launchers, over the chain kernels.
#pragma once

#include <cuda_runtime_api.h>

#include "chain_kernels.cuh"
#include "chain_launchers.h"
#include "pooled_warmup.cuh"

namespace fused_hmc {

template <class Target>
int sample_cuda(const TargetTensors& tensors, const SamplingParams<typename Target::Scalar>& p,
                void* stream) {
  return static_cast<int>(launch_sampling(Target::make(tensors, p.chains.dim), p,
                                          static_cast<cudaStream_t>(stream)));
}

template <class Target>
int warmup_cuda(const TargetTensors& tensors, const WarmupParams<typename Target::Scalar>& p,
                void* stream) {
  const Target target = Target::make(tensors, p.chains.dim);
  const auto s = static_cast<cudaStream_t>(stream);
  return static_cast<int>(pools_chains(p) ? launch_warmup_pooled(target, p, s)
                                          : launch_warmup_per_chain(target, p, s));
}

template <class Target>
int sample_dense_cuda(const TargetTensors& tensors,
                      const SamplingParams<typename Target::Scalar>& p, void* stream) {
  return static_cast<int>(launch_sampling_dense(Target::make(tensors, p.chains.dim), p,
                                                static_cast<cudaStream_t>(stream)));
}

template <class Target>
int warmup_dense_cuda(const TargetTensors& tensors, const WarmupParams<typename Target::Scalar>& p,
                      void* stream) {
  const Target target = Target::make(tensors, p.chains.dim);
  const auto s = static_cast<cudaStream_t>(stream);
  return static_cast<int>(pools_chains(p) ? launch_warmup_pooled<Target, true>(target, p, s)
                                          : launch_warmup_per_chain<Target, true>(target, p, s));
}

template <class Target>
int64_t cuda_pooled_tile_chains(const ChainBatch<typename Target::Scalar>& c) {
  return chain_launch_block<Target>(c).chains;
}

}  // namespace fused_hmc
