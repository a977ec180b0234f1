// CPU implementation of run_chains: many transitions of every chain in one call, with thinning,
// per-chain Welford moments and acceptance statistics. Each chain runs all of the call's
// transitions in turn (its state stays in cache), chains in parallel; the per-chain math is the
// shared headers', exactly as the CUDA kernel uses them.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "../math/gaussian_hmc.h"
#include "../math/noise_streams.h"
#include "../math/philox_transition.h"
#include "../math/stream_key.h"
#include "../math/thinning.h"
#include "../math/welford.h"
#include "../transition_request.h"
#include "sample_sink.h"

namespace fused_hmc {
namespace {

using at::Tensor;

// The scalar arguments of one run_chains call.
struct RunChainsParams {
  int64_t batch, dim;
  double step_size;
  int num_steps;
  int64_t seed;
  int64_t chain_offset, first_transition, num_transitions, thin, kept_before;
};

template <typename scalar_t>
void run_chains_kernel(const RunChainsParams& p, scalar_t* q_ptr, const scalar_t* mu,
                       SampleSink<scalar_t> sink, double* mean_ptr, double* m2_ptr,
                       int64_t* accept_count_ptr, double* accept_prob_ptr) {
  const PhiloxStream stream = seeded_stream<scalar_t>(p.seed, p.dim);
  const auto steps = step_sizes<scalar_t>(p.step_size);
  const int64_t first_kept = kept_before(p.first_transition, p.thin);
  const int64_t end_transition = p.first_transition + p.num_transitions;
  // A chain's work is the whole call, so small grains only matter for very short calls.
  const int64_t grain = std::max<int64_t>(1, 16 / std::max<int64_t>(1, p.num_transitions));
  at::parallel_for(0, p.batch, grain, [&](int64_t begin, int64_t end) {
    std::vector<scalar_t> proposal(p.dim);
    for (int64_t b = begin; b < end; ++b) {
      const uint64_t chain = static_cast<uint64_t>(p.chain_offset + b);
      scalar_t* q = q_ptr + b * p.dim;
      double* mean = mean_ptr + b * p.dim;
      double* m2 = m2_ptr + b * p.dim;
      int64_t accept_count = accept_count_ptr[b];
      double accept_prob_sum = accept_prob_ptr[b];  // summed transition by transition
      for (int64_t t = p.first_transition; t < end_transition; ++t) {
        const uint64_t tu = static_cast<uint64_t>(t);
        const scalar_t change_sum = philox_proposal<scalar_t>(
            stream, chain, tu, p.dim, q, mu, steps, p.num_steps, proposal.data(), nullptr);
        const auto decision = philox_decide(stream_uniform(stream, chain, tu), change_sum);
        if (decision.accepted) std::copy(proposal.begin(), proposal.end(), q);
        accept_count += decision.accepted ? 1 : 0;
        accept_prob_sum += decision.accept_prob;
        keep_draw(sink, b, t, p.thin, first_kept, p.kept_before, q, p.dim, mean, m2);
      }
      accept_count_ptr[b] = accept_count;
      accept_prob_ptr[b] = accept_prob_sum;
    }
  });
}

void run_chains_cpu(const Tensor& q, const Tensor& mu, double step_size,
                    int64_t num_leapfrog_steps, int64_t seed, int64_t chain_offset,
                    int64_t first_transition, int64_t num_transitions, int64_t thin,
                    const Tensor& samples, const Tensor& mean, const Tensor& m2,
                    const Tensor& accept_count, const Tensor& accept_prob_sum,
                    int64_t kept_before) {
  check_run_chains_inputs(q, mu, step_size, num_leapfrog_steps, chain_offset, first_transition,
                          num_transitions, thin, samples, mean, m2, accept_count,
                          accept_prob_sum, kept_before);
  if (num_transitions == 0 || q.size(0) == 0) return;
  const RunChainsParams params{q.size(0),
                               q.size(1),
                               step_size,
                               static_cast<int>(num_leapfrog_steps),
                               seed,
                               chain_offset,
                               first_transition,
                               num_transitions,
                               thin,
                               kept_before};
  const Tensor mu_c = mu.contiguous();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "run_chains_cpu", [&] {
    SampleSink<scalar_t> sink{nullptr, 0, 0, 0};
    if (samples.numel() > 0) {
      sink = {samples.data_ptr<scalar_t>(), samples.stride(0), samples.stride(1),
              samples.stride(2)};
    }
    run_chains_kernel<scalar_t>(params, q.data_ptr<scalar_t>(), mu_c.data_ptr<scalar_t>(), sink,
                                mean.data_ptr<double>(), m2.data_ptr<double>(),
                                accept_count.data_ptr<int64_t>(),
                                accept_prob_sum.data_ptr<double>());
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CPU, m) { m.impl("run_chains", &run_chains_cpu); }

}  // namespace fused_hmc
