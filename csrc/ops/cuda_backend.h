// What the run op needs of CUDA beyond ATen, supplied by the CUDA build (cuda/cuda_backend.cpp)
// at load; absent (null) in a CPU-only build. Keeps ops/run_op.cpp free of CUDA headers.
#pragma once

namespace fused_hmc {

struct CudaBackend {
  void* (*current_stream)();                 // the current cudaStream_t of the current device
  int (*sm_count)(int device);
  void (*check_not_capturing)(const char* op);  // raises while a CUDA graph is captured
  void (*check_launch)(int status);             // raises on a failed launch (a cudaError_t)
};

// Null in a build without the CUDA kernels.
const CudaBackend* cuda_backend();
void set_cuda_backend(const CudaBackend* backend);

}  // namespace fused_hmc
