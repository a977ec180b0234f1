// The CPU chain launchers over any Target (math/targets/target.h), as templates a library
// instantiates for its targets (cpu/builtin_targets.cpp; users' modules): sampling
// (cpu/sample_chains.h) and warm-up per chain or pooled (cpu/warmup_chains.h), on the loop of
// cpu/chain_loop.h. The per-chain math is math/hmc/transition.h's, as the CUDA kernels compute it.
#pragma once

#include "../math/chain_params.h"
#include "../math/targets/target.h"
#include "sample_chains.h"
#include "warmup_chains.h"

namespace fused_hmc {

// The type-erased launchers of a target's registry entry (ops/target_registry.h); Packed, where
// given, is the target on packs of chains (cpu/simd/pack.h), for W chains per thread.
template <class Target, class Packed = chains_cpu::NoPack>
void sample_cpu(const TargetTensors& tensors, const SamplingParams<typename Target::Scalar>& p) {
  chains_cpu::sample(Target::make(tensors, p.chains.dim), p, Packed::make(tensors, p.chains.dim));
}

template <class Target, class Packed = chains_cpu::NoPack>
void warmup_cpu(const TargetTensors& tensors, const WarmupParams<typename Target::Scalar>& p) {
  chains_cpu::warmup(Target::make(tensors, p.chains.dim), p, Packed::make(tensors, p.chains.dim));
}

}  // namespace fused_hmc
