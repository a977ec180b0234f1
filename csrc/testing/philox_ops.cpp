// The test-only op library fused_hmc_testing: raw Philox4x32-10 blocks, so the tests check the
// CPU and CUDA generators against the published known answers and each other (the CUDA kernel is
// registered by cuda/transition_cuda.cpp).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "../math/rng/philox.h"
#include "../transition_request.h"

namespace fused_hmc {
namespace {

using at::Tensor;

Tensor philox4x32_cpu(const Tensor& counters, int64_t key) {
  check_philox_counters(counters);
  const Tensor in = counters.contiguous();
  Tensor out = at::empty_like(in);
  const auto* c = reinterpret_cast<const uint32_t*>(in.data_ptr<int32_t>());
  auto* o = reinterpret_cast<uint32_t*>(out.data_ptr<int32_t>());
  const auto k = static_cast<uint64_t>(key);
  for (int64_t i = 0; i < in.size(0); ++i) {
    const PhiloxBlock r = philox4x32_10({c[4 * i], c[4 * i + 1], c[4 * i + 2], c[4 * i + 3]},
                                        static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32));
    o[4 * i] = r.x, o[4 * i + 1] = r.y, o[4 * i + 2] = r.z, o[4 * i + 3] = r.w;
  }
  return out;
}

}  // namespace

TORCH_LIBRARY(fused_hmc_testing, m) {
  // counters [N, 4] int32 (read as uint32) under a 64-bit key -> Philox4x32-10 blocks [N, 4].
  m.def("philox4x32(Tensor counters, int key) -> Tensor");
}

TORCH_LIBRARY_IMPL(fused_hmc_testing, CPU, m) { m.impl("philox4x32", &philox4x32_cpu); }

}  // namespace fused_hmc
