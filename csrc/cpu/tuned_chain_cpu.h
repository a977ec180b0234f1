// CPU plumbing shared by the tuned samplers (run_chains_tuned_cpu.cpp, warmup_chains_cpu.cpp): the
// target view over the op's tensors and a chain's work arrays.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "../math/gaussian_targets.h"
#include "../math/stream_key.h"
#include "../math/tuned_transition.h"

namespace fused_hmc {

// mu [d] and precision (empty, [d] or [d, d]) contiguous, as check_tuned_chain_inputs ensures.
template <typename scalar_t>
GaussianTarget<scalar_t> target_view(int64_t target_kind, const at::Tensor& mu,
                                     const at::Tensor& precision) {
  return {static_cast<TargetKind>(target_kind), mu.size(0), mu.data_ptr<scalar_t>(),
          precision.numel() > 0 ? precision.data_ptr<scalar_t>() : nullptr};
}

// One worker's trajectory arrays (6 x [d]), reused across its chains and transitions.
template <typename scalar_t>
class TrajectoryArrays {
 public:
  explicit TrajectoryArrays(int64_t dim) : storage_(6 * dim), dim_(dim) {}
  TrajectoryScratch<scalar_t> scratch() {
    scalar_t* s = storage_.data();
    return {s, s + dim_, s + 2 * dim_, s + 3 * dim_, s + 4 * dim_, s + 5 * dim_};
  }

 private:
  std::vector<scalar_t> storage_;
  int64_t dim_;
};

}  // namespace fused_hmc
