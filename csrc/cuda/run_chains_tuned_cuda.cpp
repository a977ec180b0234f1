// Host side of the CUDA run_chains_tuned op: checks, parameters and the launch
// (run_chains_tuned_cuda.cu).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "graph_capture.h"
#include "launch_params.h"
#include "run_outputs.h"
#include "tuned_params.h"

namespace fused_hmc {
namespace {

using at::Tensor;

void run_chains_tuned_cuda(const Tensor& q, int64_t target_kind, const Tensor& mu,
                           const Tensor& precision, const Tensor& step_size,
                           const Tensor& inv_mass, double jitter, int64_t num_leapfrog_steps,
                           int64_t seed, int64_t chain_offset, int64_t first_transition,
                           int64_t num_transitions, int64_t thin, const Tensor& samples,
                           const Tensor& mean, const Tensor& m2, const Tensor& accept_count,
                           const Tensor& accept_prob_sum, int64_t kept_before) {
  check_tuned_cuda_inputs(q, target_kind, mu, precision, step_size, inv_mass, jitter,
                          num_leapfrog_steps);
  check_run_chains_inputs(q, mu, 1.0, num_leapfrog_steps, chain_offset, first_transition,
                          num_transitions, thin, samples, mean, m2, accept_count,
                          accept_prob_sum, kept_before);
  if (num_transitions == 0 || q.size(0) == 0) return;
  const c10::cuda::CUDAGuard guard(q.device());
  check_not_capturing_seeded("run_chains_tuned");
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "run_chains_tuned_cuda", [&] {
    const RunTunedParams<scalar_t> p{
        tuned_chains_params<scalar_t>(q, target_kind, mu, precision, step_size, inv_mass, jitter,
                                      num_leapfrog_steps, seed, chain_offset, first_transition,
                                      num_transitions),
        run_outputs<scalar_t>(samples, mean, m2, accept_count, accept_prob_sum, thin,
                              kept_before)};
    C10_CUDA_CHECK(launch_run_chains_tuned(p, c10::cuda::getCurrentCUDAStream()));
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CUDA, m) { m.impl("run_chains_tuned", &run_chains_tuned_cuda); }

}  // namespace fused_hmc
