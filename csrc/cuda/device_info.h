// The device attributes torch's RNG launch geometry depends on, read once per device.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <array>
#include <mutex>

#include "../transition_request.h"

namespace fused_hmc {

struct DeviceInfo {
  int sm_count;
  int max_threads_per_sm;
};

inline const DeviceInfo& device_info(int device) {
  static std::array<DeviceInfo, 64> infos{};
  static std::array<std::once_flag, 64> once;
  check_device_index(device, 64);
  std::call_once(once[device], [device] {
    DeviceInfo& info = infos[device];
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.max_threads_per_sm,
                                          cudaDevAttrMaxThreadsPerMultiProcessor, device));
  });
  return infos[device];
}

}  // namespace fused_hmc
