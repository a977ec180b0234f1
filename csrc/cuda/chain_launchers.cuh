// The type-erased CUDA launchers of a target's registry entry (ops/target_registry.h), over the
// chain kernels: a library instantiates them for its targets (builtin_targets.cu; users' modules).
#pragma once

#include <cuda_runtime_api.h>

#include "../math/chain_params.h"
#include "../math/target.h"
#include "../ops/target_registry.h"
#include "chain_kernels.cuh"
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
  return static_cast<int>(p.chains.groups == 1 ? launch_warmup_pooled(target, p, s)
                                               : launch_warmup_per_chain(target, p, s));
}

template <class Target>
int64_t cuda_pooled_tiles(int64_t batch, int64_t dim) {
  return pooled_warmup_tiles<Target>(batch, dim);
}

template <class Target>
void set_cuda_launchers(ChainLaunchers<typename Target::Scalar>& l) {
  l.sample_cuda = &sample_cuda<Target>;
  l.warmup_cuda = &warmup_cuda<Target>;
  l.cuda_pooled_tiles = &cuda_pooled_tiles<Target>;
}

}  // namespace fused_hmc
