// The type-erased CUDA launchers of a target's registry entry (ops/target_registry.h), declared
// torch- and CUDA-free so that a host file can register them; chain_launchers.cuh defines them
// over the chain kernels, and a library instantiates them for its targets (builtin_*.cu; users'
// modules).
#pragma once

#include <cstdint>

#include "../math/chain_params.h"
#include "../math/targets/target.h"
#include "../ops/target_registry.h"

namespace fused_hmc {

// Each returns the launch's cudaError_t as an int; `stream` is the cudaStream_t.
template <class Target>
int sample_cuda(const TargetTensors& tensors, const SamplingParams<typename Target::Scalar>& p,
                void* stream);
// Per chain (groups = B) or pooled (groups = 1).
template <class Target>
int warmup_cuda(const TargetTensors& tensors, const WarmupParams<typename Target::Scalar>& p,
                void* stream);
// The pooled warm-up's chains per tile (its scratch's layout).
template <class Target>
int64_t cuda_pooled_tile_chains(const ChainBatch<typename Target::Scalar>& c);

// With a dense mass (cuda/lane_dense_mass.cuh; dim <= kMaxDenseMassDim).
template <class Target>
int sample_dense_cuda(const TargetTensors& tensors,
                      const SamplingParams<typename Target::Scalar>& p, void* stream);
template <class Target>
int warmup_dense_cuda(const TargetTensors& tensors, const WarmupParams<typename Target::Scalar>& p,
                      void* stream);

template <class Target>
void set_cuda_launchers(ChainLaunchers<typename Target::Scalar>& l) {
  l.sample_cuda = &sample_cuda<Target>;
  l.warmup_cuda = &warmup_cuda<Target>;
  l.cuda_pooled_tile_chains = &cuda_pooled_tile_chains<Target>;
}

template <class Target>
void set_cuda_dense_launchers(ChainLaunchers<typename Target::Scalar>& l) {
  l.sample_dense_cuda = &sample_dense_cuda<Target>;
  l.warmup_dense_cuda = &warmup_dense_cuda<Target>;
}

}  // namespace fused_hmc
