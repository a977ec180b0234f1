// What the chain ops need of CUDA beyond ATen, supplied by the CUDA build (cuda/cuda_backend.cpp)
// at load; absent (null) in a CPU-only build. Keeps ops/chain_ops.cpp free of CUDA headers.
#pragma once

#include "../math/adaptation/warmup_update.h"

namespace fused_hmc {

struct CudaBackend {
  void* (*current_stream)();                 // the current cudaStream_t of the current device
  int (*sm_count)(int device);
  void (*check_not_capturing)(const char* op);  // raises while a CUDA graph is captured
  void (*check_launch)(int status);             // raises on a failed launch (a cudaError_t)
  // The pooled_update op's launch on `stream` (cuda/pooled_update.cu); returns a cudaError_t.
  int (*launch_pooled_update_f32)(const PooledUpdateParams<float>&, void* stream);
  int (*launch_pooled_update_f64)(const PooledUpdateParams<double>&, void* stream);
  int launch_pooled_update(const PooledUpdateParams<float>& p, void* stream) const {
    return launch_pooled_update_f32(p, stream);
  }
  int launch_pooled_update(const PooledUpdateParams<double>& p, void* stream) const {
    return launch_pooled_update_f64(p, stream);
  }
};

// Null in a build without the CUDA kernels.
const CudaBackend* cuda_backend();
void set_cuda_backend(const CudaBackend* backend);

}  // namespace fused_hmc
