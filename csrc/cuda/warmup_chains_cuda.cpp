// Host side of the CUDA warmup_chains op: checks, parameters, the pooled kernel's scratch, and the
// launch of the per-chain (warmup_chains_cuda.cu) or pooled (warmup_pooled_cuda.cu) kernel.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "device_info.h"
#include "graph_capture.h"
#include "group_shape.h"
#include "launch_params.h"
#include "tuned_params.h"

namespace fused_hmc {
namespace {

using at::Tensor;

void warmup_chains_cuda(const Tensor& q, int64_t target_kind, const Tensor& mu,
                        const Tensor& precision, const Tensor& step_size, const Tensor& inv_mass,
                        double jitter, int64_t num_leapfrog_steps, int64_t seed,
                        int64_t chain_offset, int64_t first_transition, int64_t num_transitions,
                        int64_t warmup_start, int64_t num_warmup, int64_t init_buffer,
                        int64_t base_window, int64_t term_buffer, double target_accept,
                        bool adapt_step_size, bool adapt_mass_matrix, const Tensor& dual_averaging,
                        const Tensor& window_mean, const Tensor& window_m2) {
  check_tuned_cuda_inputs(q, target_kind, mu, precision, step_size, inv_mass, jitter,
                          num_leapfrog_steps);
  check_warmup_inputs(q, step_size, chain_offset, first_transition, num_transitions, warmup_start,
                      num_warmup, init_buffer, base_window, term_buffer, target_accept,
                      dual_averaging, window_mean, window_m2);
  if (num_transitions == 0 || q.size(0) == 0) return;
  const c10::cuda::CUDAGuard guard(q.device());
  check_not_capturing_seeded("warmup_chains");
  const bool pooled = step_size.size(0) == 1;
  const int64_t tiles = pooled_warmup_tiles(q.size(0), q.size(1));
  const auto f64 = q.options().dtype(at::kDouble);
  // The pooled kernel's scratch, from the caching allocator (no sync): tile sums of acceptance
  // statistics (two transitions' worth) and of window moments, and the grand mean.
  const Tensor tile_accept = pooled ? at::empty({2 * tiles}, f64) : Tensor();
  const Tensor tile_moments =
      pooled && adapt_mass_matrix ? at::empty({tiles * q.size(1)}, f64) : Tensor();
  const Tensor grand_mean = pooled && adapt_mass_matrix ? at::empty({q.size(1)}, f64) : Tensor();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "warmup_chains_cuda", [&] {
    WarmupParams<scalar_t> p{};
    p.chains = tuned_chains_params<scalar_t>(q, target_kind, mu, precision, step_size, inv_mass,
                                             jitter, num_leapfrog_steps, seed, chain_offset,
                                             first_transition, num_transitions);
    p.windows = warmup_windows(num_warmup, init_buffer, base_window, term_buffer);
    p.warmup_start = warmup_start;
    p.target_accept = target_accept;
    p.adapt_step_size = adapt_step_size;
    p.adapt_mass_matrix = adapt_mass_matrix;
    p.dual_averaging = reinterpret_cast<DualAveraging*>(dual_averaging.data_ptr<double>());
    p.window_mean = window_mean.data_ptr<double>();
    p.window_m2 = window_m2.data_ptr<double>();
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (!pooled) {
      C10_CUDA_CHECK(launch_warmup_per_chain(p, stream));
      return;
    }
    p.tile_accept = tile_accept.data_ptr<double>();
    p.tile_moments = tile_moments.defined() ? tile_moments.data_ptr<double>() : nullptr;
    p.grand_mean = grand_mean.defined() ? grand_mean.data_ptr<double>() : nullptr;
    p.sm_count = device_info(q.get_device()).sm_count;
    C10_CUDA_CHECK(launch_warmup_pooled(p, stream));
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CUDA, m) { m.impl("warmup_chains", &warmup_chains_cuda); }

}  // namespace fused_hmc
