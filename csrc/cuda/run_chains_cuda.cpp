// Host side of the CUDA run_chains op: checks, parameters and the launch (run_chains_cuda.cu).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "../math/stream_key.h"
#include "../math/thinning.h"
#include "../transition_request.h"
#include "graph_capture.h"
#include "group_shape.h"
#include "launch_params.h"
#include "run_outputs.h"

namespace fused_hmc {
namespace {

using at::Tensor;

void run_chains_cuda(const Tensor& q, const Tensor& mu, double step_size,
                     int64_t num_leapfrog_steps, int64_t seed, int64_t chain_offset,
                     int64_t first_transition, int64_t num_transitions, int64_t thin,
                     const Tensor& samples, const Tensor& mean, const Tensor& m2,
                     const Tensor& accept_count, const Tensor& accept_prob_sum,
                     int64_t kept_before) {
  check_run_chains_inputs(q, mu, step_size, num_leapfrog_steps, chain_offset, first_transition,
                          num_transitions, thin, samples, mean, m2, accept_count, accept_prob_sum,
                          kept_before);
  check_dim_supported(q, kMaxCudaDim, "CUDA");
  check_batch_launchable(q);
  if (num_transitions == 0 || q.size(0) == 0) return;
  const c10::cuda::CUDAGuard guard(q.device());
  check_not_capturing_seeded("run_chains");
  const Tensor mu_c = mu.contiguous();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "run_chains_cuda", [&] {
    RunChainsParams<scalar_t> p{};
    p.q = q.data_ptr<scalar_t>();
    p.mu = mu_c.data_ptr<scalar_t>();
    p.out = run_outputs<scalar_t>(samples, mean, m2, accept_count, accept_prob_sum, thin,
                                  kept_before);
    p.batch = q.size(0);
    p.dim = q.size(1);
    p.steps = step_sizes<scalar_t>(step_size);
    p.num_steps = static_cast<int>(num_leapfrog_steps);
    p.stream = seeded_stream<scalar_t>(seed, p.dim);
    p.chain_offset = chain_offset;
    p.first_transition = first_transition;
    p.num_transitions = num_transitions;
    p.vectorized = rows_vectorizable(p.q, p.dim, sizeof(scalar_t)) &&
                   rows_vectorizable(p.mu, p.dim, sizeof(scalar_t));
    C10_CUDA_CHECK(launch_run_chains(p, c10::cuda::getCurrentCUDAStream()));
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CUDA, m) { m.impl("run_chains", &run_chains_cuda); }

}  // namespace fused_hmc
