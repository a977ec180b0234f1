// The CUDA chain launchers of a CppTarget (ChainTarget, one thread per chain), compiled in the
// generated .cu after the model header; chains_module.h puts them in the module's registry entry.
// Those with a dense mass only in a module built for one (FHMC_USER_DENSE_MASS).
#pragma once

#include "cuda/chain_launchers.cuh"
#include "user/chain_target.h"

void fused_hmc_user_cuda_launchers(fused_hmc::ChainLaunchers<fused_hmc_user::Scalar>& launchers) {
  fused_hmc::set_cuda_launchers<ChainTarget<fused_hmc_user::Scalar>>(launchers);
#ifdef FHMC_USER_DENSE_MASS
  fused_hmc::set_cuda_dense_launchers<ChainTarget<fused_hmc_user::Scalar>>(launchers);
#endif
}
