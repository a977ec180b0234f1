// CPU implementation of warmup_chains: warm-up transitions of the tuned sampler with step-size dual
// averaging (math/dual_averaging.h) and diagonal inverse-mass estimation in Stan's windows
// (math/adaptation_windows.h, math/mass_matrix.h).
//
// One adaptation state per chain (G = B) runs chain by chain, each chain through all of the call's
// transitions. A shared state (G = 1) pools every chain: transitions run one at a time over all
// chains in parallel, then the mean acceptance statistic feeds the one dual averaging, and at a slow
// window's end the chains' window moments pool into one inverse mass, all inside this call (no host
// round trip per transition). Pooled sums run over the chain index in chunk_sum.h's pairwise order,
// so the result does not depend on the thread count.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "../math/adaptation_windows.h"
#include "../math/chunk_sum.h"
#include "../math/dual_averaging.h"
#include "../math/mass_matrix.h"
#include "../math/tuned_transition.h"
#include "../math/welford.h"
#include "../tuned_request.h"
#include "tuned_chain_cpu.h"

namespace fused_hmc {
namespace {

using at::Tensor;

struct WarmupParams {
  int64_t batch, dim, groups;
  double jitter;
  int num_steps;
  int64_t seed, chain_offset, first_transition, num_transitions, warmup_start;
  double target_accept;
  bool adapt_step_size, adapt_mass_matrix;
  WarmupWindows windows;
};

// The op's state tensors, as pointers ([B, d] rows for q and the window moments, [G] / [G, d] /
// [G, 3] for the adaptation state).
template <typename scalar_t>
struct WarmupState {
  scalar_t* q;
  double* step_size;
  scalar_t* inv_mass;
  DualAveraging* dual_averaging;  // [G, 3] float64 viewed as structs of three doubles
  double* window_mean;
  double* window_m2;
};

template <typename scalar_t>
class Warmup {
 public:
  Warmup(const WarmupParams& p, const GaussianTarget<scalar_t>& target, WarmupState<scalar_t> s)
      : p_(p), target_(target), s_(s), stream_(seeded_stream<scalar_t>(p.seed, p.dim)) {}

  // Chain b's transition t, and its draw folded into its window moments; returns min(1, alpha).
  double transition(int64_t b, int64_t t, TrajectoryArrays<scalar_t>& arrays) const {
    const int64_t g = p_.groups == 1 ? 0 : b;
    scalar_t* q = s_.q + b * p_.dim;
    const auto decision = tuned_transition<scalar_t>(
        stream_, static_cast<uint64_t>(p_.chain_offset + b), static_cast<uint64_t>(t), target_, q,
        s_.inv_mass + g * p_.dim, s_.step_size[g], p_.jitter, p_.num_steps, arrays.scratch());
    const SlowWindow window = slow_window_of(p_.windows, t - p_.warmup_start);
    if (p_.adapt_mass_matrix && window.start >= 0) {
      const double inv_count = 1.0 / static_cast<double>(t - p_.warmup_start - window.start + 1);
      double* mean = s_.window_mean + b * p_.dim;
      double* m2 = s_.window_m2 + b * p_.dim;
      for (int64_t j = 0; j < p_.dim; ++j) {
        welford_update(mean[j], m2[j], static_cast<double>(q[j]), inv_count);
      }
    }
    return static_cast<double>(decision.accept_prob);
  }

  // Dual averaging of group g after transition t with acceptance statistic `accept_stat`.
  void adapt_step_size(int64_t g, int64_t t, double accept_stat) const {
    if (!p_.adapt_step_size) return;
    const int64_t i = t - p_.warmup_start;
    const int64_t n = i - dual_averaging_start(p_.windows, i, p_.adapt_mass_matrix) + 1;
    s_.step_size[g] = dual_averaging_update(s_.dual_averaging[g], n, accept_stat,
                                            p_.target_accept, s_.step_size[g]);
    if (i == p_.windows.num_warmup - 1) s_.step_size[g] = dual_averaging_final(s_.dual_averaging[g]);
  }

  bool ends_window(int64_t t) const {
    return p_.adapt_mass_matrix && ends_slow_window(p_.windows, t - p_.warmup_start);
  }

  double window_draws(int64_t t) const {
    const int64_t i = t - p_.warmup_start;
    return static_cast<double>(i - slow_window_of(p_.windows, i).start + 1);
  }

  // Chain b's own inverse mass from its window, and a fresh window.
  void update_own_inverse_mass(int64_t b, int64_t t) const {
    const double n = window_draws(t);
    scalar_t* inv_mass = s_.inv_mass + b * p_.dim;
    for (int64_t j = 0; j < p_.dim; ++j) {
      const double var = s_.window_m2[b * p_.dim + j] / (n - 1.0);
      inv_mass[j] = adapted_inverse_mass(var, n, inv_mass[j]);
    }
    reset_window(b);
  }

  // The shared inverse mass from every chain's window, and fresh windows.
  void update_pooled_inverse_mass(int64_t t) const {
    const double n = window_draws(t);
    const double chains = static_cast<double>(p_.batch);
    for (int64_t j = 0; j < p_.dim; ++j) {
      PairwiseChunkSum<double> mean_sum;
      for (int64_t b = 0; b < p_.batch; ++b) mean_sum.add(s_.window_mean[b * p_.dim + j]);
      const double grand = mean_sum.total() / chains;
      PairwiseChunkSum<double> m2_sum;
      for (int64_t b = 0; b < p_.batch; ++b) {
        m2_sum.add(pooled_m2_term(s_.window_m2[b * p_.dim + j], s_.window_mean[b * p_.dim + j],
                                  grand, n));
      }
      const double draws = n * chains;
      s_.inv_mass[j] = adapted_inverse_mass(m2_sum.total() / (draws - 1.0), draws, s_.inv_mass[j]);
    }
    for (int64_t b = 0; b < p_.batch; ++b) reset_window(b);
  }

 private:
  void reset_window(int64_t b) const {
    std::fill(s_.window_mean + b * p_.dim, s_.window_mean + (b + 1) * p_.dim, 0.0);
    std::fill(s_.window_m2 + b * p_.dim, s_.window_m2 + (b + 1) * p_.dim, 0.0);
  }

  WarmupParams p_;
  GaussianTarget<scalar_t> target_;
  WarmupState<scalar_t> s_;
  PhiloxStream stream_;
};

template <typename scalar_t>
void warmup_per_chain(const WarmupParams& p, const Warmup<scalar_t>& warmup) {
  const int64_t end_transition = p.first_transition + p.num_transitions;
  const int64_t grain = std::max<int64_t>(1, 16 / std::max<int64_t>(1, p.num_transitions));
  at::parallel_for(0, p.batch, grain, [&](int64_t begin, int64_t end) {
    TrajectoryArrays<scalar_t> arrays(p.dim);
    for (int64_t b = begin; b < end; ++b) {
      for (int64_t t = p.first_transition; t < end_transition; ++t) {
        warmup.adapt_step_size(b, t, warmup.transition(b, t, arrays));
        if (warmup.ends_window(t)) warmup.update_own_inverse_mass(b, t);
      }
    }
  });
}

template <typename scalar_t>
void warmup_pooled(const WarmupParams& p, const Warmup<scalar_t>& warmup) {
  std::vector<double> accept_stats(p.batch);
  std::vector<TrajectoryArrays<scalar_t>> arrays(at::get_num_threads(),
                                                 TrajectoryArrays<scalar_t>(p.dim));
  const int64_t grain = std::max<int64_t>(1, p.batch / (4 * at::get_num_threads()));
  for (int64_t t = p.first_transition; t < p.first_transition + p.num_transitions; ++t) {
    at::parallel_for(0, p.batch, grain, [&](int64_t begin, int64_t end) {
      auto& mine = arrays[at::get_thread_num()];
      for (int64_t b = begin; b < end; ++b) accept_stats[b] = warmup.transition(b, t, mine);
    });
    PairwiseChunkSum<double> sum;
    for (const double a : accept_stats) sum.add(a);
    warmup.adapt_step_size(0, t, sum.total() / static_cast<double>(p.batch));
    if (warmup.ends_window(t)) warmup.update_pooled_inverse_mass(t);
  }
}

void warmup_chains_cpu(const Tensor& q, int64_t target_kind, const Tensor& mu,
                       const Tensor& precision, const Tensor& step_size, const Tensor& inv_mass,
                       double jitter, int64_t num_leapfrog_steps, int64_t seed,
                       int64_t chain_offset, int64_t first_transition, int64_t num_transitions,
                       int64_t warmup_start, int64_t num_warmup, int64_t init_buffer,
                       int64_t base_window, int64_t term_buffer, double target_accept,
                       bool adapt_step_size, bool adapt_mass_matrix, const Tensor& dual_averaging,
                       const Tensor& window_mean, const Tensor& window_m2) {
  check_tuned_chain_inputs(q, target_kind, mu, precision, step_size, inv_mass, jitter,
                           num_leapfrog_steps);
  check_warmup_inputs(q, step_size, chain_offset, first_transition, num_transitions, warmup_start,
                      num_warmup, init_buffer, base_window, term_buffer, target_accept,
                      dual_averaging, window_mean, window_m2);
  if (num_transitions == 0 || q.size(0) == 0) return;
  const WarmupParams params{q.size(0),
                            q.size(1),
                            step_size.size(0),
                            jitter,
                            static_cast<int>(num_leapfrog_steps),
                            seed,
                            chain_offset,
                            first_transition,
                            num_transitions,
                            warmup_start,
                            target_accept,
                            adapt_step_size,
                            adapt_mass_matrix,
                            warmup_windows(num_warmup, init_buffer, base_window, term_buffer)};
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "warmup_chains_cpu", [&] {
    const WarmupState<scalar_t> state{
        q.data_ptr<scalar_t>(),
        step_size.data_ptr<double>(),
        inv_mass.data_ptr<scalar_t>(),
        reinterpret_cast<DualAveraging*>(dual_averaging.data_ptr<double>()),
        window_mean.data_ptr<double>(),
        window_m2.data_ptr<double>()};
    const Warmup<scalar_t> warmup(params, target_view<scalar_t>(target_kind, mu, precision),
                                  state);
    if (params.groups == 1) {
      warmup_pooled(params, warmup);
    } else {
      warmup_per_chain(params, warmup);
    }
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CPU, m) { m.impl("warmup_chains", &warmup_chains_cpu); }

}  // namespace fused_hmc
