// CUDA test extension over csrc/math/autodiff/dual.h: the same element-wise checks as
// dual_test_cpu.cpp, one thread per element (tests/unit/test_dual.py, cuda-marked tests).
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

#include "dual_test_bindings.h"

namespace {

template <class T>
__global__ void unary_kernel(int op, const T* x, T* out, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  T row[4];
  fused_hmc_user::unary_at(op, x[i], row);
  for (int r = 0; r < 4; ++r) out[r * n + i] = row[r];
}

template <class T>
__global__ void binary_kernel(int op, const T* a, const T* b, T* out, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  T row[8];
  fused_hmc_user::binary_at(op, a[i], b[i], row);
  for (int r = 0; r < 8; ++r) out[r * n + i] = row[r];
}

template <class T>
__global__ void gradient_kernel(int width, int model, const T* x, int dim,
                                fused_hmc_user::TestData<T> data, T* out, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  fused_hmc_user::gradient_at_width(width, model, x + i * dim, dim, data, out + i * (2 + dim));
}

unsigned blocks(int64_t n) { return static_cast<unsigned>((n + 127) / 128); }

struct CudaBackend {
  template <class T>
  static void run_unary(int op, const T* x, T* out, int64_t n) {
    if (n == 0) return;
    unary_kernel<T><<<blocks(n), 128, 0, c10::cuda::getCurrentCUDAStream()>>>(op, x, out, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  template <class T>
  static void run_binary(int op, const T* a, const T* b, T* out, int64_t n) {
    if (n == 0) return;
    binary_kernel<T><<<blocks(n), 128, 0, c10::cuda::getCurrentCUDAStream()>>>(op, a, b, out, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  template <class T>
  static void run_gradient(int width, int model, const T* x, int dim,
                           const fused_hmc_user::TestData<T>& data, T* out, int64_t n) {
    if (n == 0) return;
    gradient_kernel<T><<<blocks(n), 128, 0, c10::cuda::getCurrentCUDAStream()>>>(
        width, model, x, dim, data, out, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
};

}  // namespace

FHMC_DUAL_TEST_MODULE(CudaBackend, [](pybind11::module_&) {})
