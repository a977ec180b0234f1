// Test-only: which of torch's intra-op threads at::parallel_for hands each index to, as compiled
// into this extension. Built without the OpenMP flag (fused_hmc/_cpu_flags.py) the header's
// parallel region is a plain loop and every index reports thread 0, which is how the CPU chains
// came to run on one core.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

namespace fused_hmc {
namespace {

at::Tensor parallel_thread_ids(int64_t n) {
  TORCH_CHECK(n >= 0, "parallel_thread_ids: n must be >= 0, got ", n);
  at::Tensor ids = at::empty({n}, at::kLong);
  int64_t* out = ids.data_ptr<int64_t>();
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = at::get_thread_num();
  });
  return ids;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fused_hmc_testing, m) {
  // n -> [n] int64: the intra-op thread that ran index i of at::parallel_for(0, n, grain 1).
  m.def("parallel_thread_ids(int n) -> Tensor", &parallel_thread_ids);
}

}  // namespace fused_hmc
