// The CUDA build's half of ops/cuda_backend.h, set at load.
#include "../ops/cuda_backend.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "device_info.h"
#include "graph_capture.h"

namespace fused_hmc {

// cuda/pooled_update.cu.
int launch_pooled_update(const PooledUpdateParams<float>& p, void* stream);
int launch_pooled_update(const PooledUpdateParams<double>& p, void* stream);

namespace {

const CudaBackend kBackend{
    [] { return static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream()); },
    [](int device) { return device_info(device).sm_count; },
    [](const char* op) { check_not_capturing_seeded(op); },
    [](int status) { C10_CUDA_CHECK(static_cast<cudaError_t>(status)); },
    [](const PooledUpdateParams<float>& p, void* stream) { return launch_pooled_update(p, stream); },
    [](const PooledUpdateParams<double>& p, void* stream) { return launch_pooled_update(p, stream); },
};

const bool installed = (set_cuda_backend(&kBackend), true);

}  // namespace
}  // namespace fused_hmc
