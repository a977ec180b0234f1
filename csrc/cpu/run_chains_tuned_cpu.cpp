// CPU implementation of run_chains_tuned: run_chains for the Gaussian target family with a per-chain
// (or shared) step size and diagonal inverse mass, and an optionally jittered step size. Chains run
// in parallel, each through all of the call's transitions; the per-chain math is the shared
// headers' (math/tuned_transition.h), as a CUDA kernel would use it.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>

#include "../math/thinning.h"
#include "../math/tuned_transition.h"
#include "../math/welford.h"
#include "../transition_request.h"
#include "../tuned_request.h"
#include "sample_sink.h"
#include "tuned_chain_cpu.h"

namespace fused_hmc {
namespace {

using at::Tensor;

struct TunedRunParams {
  int64_t batch, dim, groups;  // groups: 1 (shared step size and inverse mass) or batch
  double jitter;
  int num_steps;
  int64_t seed, chain_offset, first_transition, num_transitions, thin, kept_before;
};

template <typename scalar_t>
void run_chains_tuned_kernel(const TunedRunParams& p, const GaussianTarget<scalar_t>& target,
                             scalar_t* q_ptr, const double* step_size, const scalar_t* inv_mass,
                             SampleSink<scalar_t> sink, double* mean_ptr, double* m2_ptr,
                             int64_t* accept_count_ptr, double* accept_prob_ptr) {
  const PhiloxStream stream = seeded_stream<scalar_t>(p.seed, p.dim);
  const int64_t first_kept = kept_before(p.first_transition, p.thin);
  const int64_t end_transition = p.first_transition + p.num_transitions;
  const int64_t grain = std::max<int64_t>(1, 16 / std::max<int64_t>(1, p.num_transitions));
  at::parallel_for(0, p.batch, grain, [&](int64_t begin, int64_t end) {
    TrajectoryArrays<scalar_t> arrays(p.dim);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t g = p.groups == 1 ? 0 : b;
      const uint64_t chain = static_cast<uint64_t>(p.chain_offset + b);
      scalar_t* q = q_ptr + b * p.dim;
      double* mean = mean_ptr + b * p.dim;
      double* m2 = m2_ptr + b * p.dim;
      int64_t accept_count = accept_count_ptr[b];
      double accept_prob_sum = accept_prob_ptr[b];
      for (int64_t t = p.first_transition; t < end_transition; ++t) {
        const auto decision = tuned_transition<scalar_t>(
            stream, chain, static_cast<uint64_t>(t), target, q, inv_mass + g * p.dim,
            step_size[g], p.jitter, p.num_steps, arrays.scratch());
        accept_count += decision.accepted ? 1 : 0;
        accept_prob_sum += decision.accept_prob;
        keep_draw(sink, b, t, p.thin, first_kept, p.kept_before, q, p.dim, mean, m2);
      }
      accept_count_ptr[b] = accept_count;
      accept_prob_ptr[b] = accept_prob_sum;
    }
  });
}

void run_chains_tuned_cpu(const Tensor& q, int64_t target_kind, const Tensor& mu,
                          const Tensor& precision, const Tensor& step_size,
                          const Tensor& inv_mass, double jitter, int64_t num_leapfrog_steps,
                          int64_t seed, int64_t chain_offset, int64_t first_transition,
                          int64_t num_transitions, int64_t thin, const Tensor& samples,
                          const Tensor& mean, const Tensor& m2, const Tensor& accept_count,
                          const Tensor& accept_prob_sum, int64_t kept_before) {
  check_tuned_chain_inputs(q, target_kind, mu, precision, step_size, inv_mass, jitter,
                           num_leapfrog_steps);
  check_run_chains_inputs(q, mu, 1.0, num_leapfrog_steps, chain_offset, first_transition,
                          num_transitions, thin, samples, mean, m2, accept_count,
                          accept_prob_sum, kept_before);
  if (num_transitions == 0) return;
  const TunedRunParams params{q.size(0),       q.size(1),      step_size.size(0),
                              jitter,          static_cast<int>(num_leapfrog_steps),
                              seed,            chain_offset,   first_transition,
                              num_transitions, thin,           kept_before};
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "run_chains_tuned_cpu", [&] {
    SampleSink<scalar_t> sink{nullptr, 0, 0, 0};
    if (samples.numel() > 0) {
      sink = {samples.data_ptr<scalar_t>(), samples.stride(0), samples.stride(1),
              samples.stride(2)};
    }
    run_chains_tuned_kernel<scalar_t>(
        params, target_view<scalar_t>(target_kind, mu, precision), q.data_ptr<scalar_t>(),
        step_size.data_ptr<double>(), inv_mass.data_ptr<scalar_t>(), sink,
        mean.data_ptr<double>(), m2.data_ptr<double>(), accept_count.data_ptr<int64_t>(),
        accept_prob_sum.data_ptr<double>());
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CPU, m) { m.impl("run_chains_tuned", &run_chains_tuned_cpu); }

}  // namespace fused_hmc
