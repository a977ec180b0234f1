// The sampler's half of a CppTarget module: the chain launchers of ChainTarget for the module's
// dtype (CPU here; CUDA from the generated .cu, chains_cuda.cuh) in a registry entry that
// fused_hmc.CppTarget hands the main library (ops/target_registry.h), which then runs the target
// through its chain ops like a built-in one. Included by the generated module TU; its
// PYBIND11_MODULE calls register_chains(m).
#pragma once

#include <torch/extension.h>

#include "cpu/chains_cpu.h"
#ifdef FHMC_USER_VECTOR_CHAINS
#include "cpu/simd/pack_functions.h"
#endif
#include "ops/target_registry.h"
#include "user/chain_target.h"

#ifdef FHMC_USER_WITH_CUDA
// Defined in the generated .cu (chains_cuda.cuh).
void fused_hmc_user_cuda_launchers(fused_hmc::ChainLaunchers<fused_hmc_user::Scalar>& launchers);
#endif

namespace fused_hmc_user_chains {

using Scalar = fused_hmc_user::Scalar;
using Target = ChainTarget<Scalar>;
#ifdef FHMC_USER_VECTOR_CHAINS
// The model on packs of chains (CppTarget(vector_chains=True)): W chains per CPU thread.
using Packed = ChainTarget<fused_hmc::simd::Pack<Scalar, fused_hmc::simd::kLanesOf<Scalar>>>;
#else
using Packed = fused_hmc::chains_cpu::NoPack;
#endif

inline const fused_hmc::TargetEntry& entry() {
  static const fused_hmc::TargetEntry e = [] {
    fused_hmc::TargetEntry made = fused_hmc::target_entry<ChainTarget>();
    fused_hmc::ChainLaunchers<Scalar>& l = fused_hmc::launchers_of<Scalar>(made);
    l.sample_cpu = &fused_hmc::sample_cpu<Target, Packed>;
    l.warmup_cpu = &fused_hmc::warmup_cpu<Target, Packed>;
#ifdef FHMC_USER_WITH_CUDA
    fused_hmc_user_cuda_launchers(l);
#endif
    return made;
  }();
  return e;
}

inline void register_chains(pybind11::module_& m) {
  m.def("target_name", [] { return std::string(Target::kName); });
  m.def("chain_params_version", [] { return fused_hmc::kChainParamsVersion; });
  // The entry lives in this module, which stays loaded: the capsule owns nothing.
  m.def("target_entry", [] {
    return pybind11::capsule(static_cast<const void*>(&entry()), "fused_hmc.TargetEntry");
  });
}

}  // namespace fused_hmc_user_chains
