// A CppTarget as a Target of math/targets/target.h, for the chain kernels (CPU chains_cpu.h, CUDA
// chain_kernels.cuh): kPosition (the chain's whole position in each of its kLanes threads), not
// quadratic (the energy change adds 2 (U1 - U0)), not shifted, compiled for one dimension. Its
// data comes in the chain ops' target_tensors (the data tensors, in the generated order) and
// target_scalars (the floats, then the ints), which the generated fused_hmc_user::data_from_views
// unpacks. Torch-free.
#pragma once

#include <cstdint>

#include "math/fp/host_device.h"
#include "math/targets/target.h"
#include "user/user_target.h"

#ifndef FHMC_USER_TARGET_NAME
#error "the generated module defines FHMC_USER_TARGET_NAME (the registry name) first"
#endif

template <typename S>
struct ChainTarget : UserTarget<S> {
  using Scalar = S;
  static constexpr const char* kName = FHMC_USER_TARGET_NAME;
  static constexpr fused_hmc::TargetForce kForce = fused_hmc::TargetForce::kPosition;
  static constexpr bool kQuadratic = false;
  static constexpr bool kShifted = false;
  static constexpr int64_t kMaxDim = 0;
  static constexpr int64_t kFixedDim = FHMC_USER_DIM;
  using UserTarget<S>::kLanes;  // the threads of a chain (math/targets/lane_rows.h)
  static constexpr int kTensorCount = -1;  // the data: any tensors, checked by CppTarget
  static constexpr const char* const* kTensorNames = nullptr;
  static constexpr const int* kTensorRanks = nullptr;

  static ChainTarget make(const fused_hmc::TargetTensors& views, int64_t) {
    ChainTarget target{};
    target.data = fused_hmc_user::data_from_views(views);
    return target;
  }
};
