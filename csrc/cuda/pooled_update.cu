// The pooled_update op's CUDA launch (ops/pooled_update_op.cpp): math/adaptation/warmup_update.h's
// update in one block, so that a warm-up pooled over several processes needs no host sync per
// transition.
#include <cuda_runtime.h>

#include "../math/adaptation/warmup_update.h"

namespace fused_hmc {
namespace {

template <typename scalar_t>
__global__ void pooled_update_kernel(const PooledUpdateParams<scalar_t> p) {
  apply_pooled_update(p, threadIdx.x == 0, threadIdx.x, blockDim.x);
}

template <typename scalar_t>
int launch(const PooledUpdateParams<scalar_t>& p, void* stream) {
  pooled_update_kernel<scalar_t><<<1, 256, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_pooled_update(const PooledUpdateParams<float>& p, void* stream) {
  return launch(p, stream);
}
int launch_pooled_update(const PooledUpdateParams<double>& p, void* stream) {
  return launch(p, stream);
}

}  // namespace fused_hmc
