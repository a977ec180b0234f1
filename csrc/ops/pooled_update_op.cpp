// The pooled_update op (schema.cpp): one pooled warm-up update (math/adaptation/warmup_update.h)
// from statistics reduced outside the kernels, on the state's device, with no host sync. A warm-up
// pooled over the chains of several processes runs each transition with the sample op, sums the
// chains' acceptance terms (and, at a slow window's end, the window's moments) over the process
// group, and applies this op's update on every rank alike.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "../check_message.h"
#include "../math/adaptation/warmup_update.h"
#include "../math/hmc/dense_mass.h"
#include "../math/limits.h"
#include "../transition_request.h"
#include "cuda_backend.h"
#include "chain_request.h"

namespace fused_hmc {
namespace {

using OptionalTensor = std::optional<at::Tensor>;

void pooled_update(const at::Tensor& step_size, const at::Tensor& dual_averaging,
                   const at::Tensor& inv_mass, const at::Tensor& acceptance_terms,
                   const OptionalTensor& variance, double variance_draws, int64_t iteration,
                   int64_t num_warmup, at::IntArrayRef windows, double target_accept,
                   bool adapt_step_size, bool adapt_mass_matrix, const OptionalTensor& chees,
                   const OptionalTensor& chees_sums, int64_t max_leapfrog_steps,
                   bool harmonic_acceptance) {
  const bool dense = inv_mass.dim() == 3;  // [1, d, d]: a dense mass's Cholesky factor
  FHMC_CHECK_VALUE((inv_mass.dim() == 2 || dense) && inv_mass.size(0) == 1 &&
                       inv_mass.size(1) >= 1 && (!dense || inv_mass.size(2) == inv_mass.size(1)),
                   "inv_mass must have shape [1, dim] (one pooled inverse mass) or [1, dim, dim] "
                   "(a dense one's Cholesky factor), got ", inv_mass.sizes());
  FHMC_CHECK_VALUE(!dense || !inv_mass.is_cuda(),
                   "a dense inv_mass runs on the CPU only for now, got one on ", inv_mass.device());
  FHMC_CHECK_TYPE(inv_mass.scalar_type() == at::kFloat || inv_mass.scalar_type() == at::kDouble,
                  "inv_mass must be float32 or float64, got ", inv_mass.scalar_type());
  FHMC_CHECK_VALUE(inv_mass.is_contiguous(), "inv_mass (updated in place) must be contiguous");
  const int64_t dim = inv_mass.size(1);
  // check_chain_buffer's device, dtype, shape and layout checks, against inv_mass as the state.
  check_chain_buffer(inv_mass, step_size, "step_size", {1}, at::kDouble);
  check_chain_buffer(inv_mass, dual_averaging, "dual_averaging", {1, 3}, at::kDouble);
  check_chain_buffer(inv_mass, acceptance_terms, "acceptance_terms", {2}, at::kDouble);
  if (variance) {
    check_chain_buffer(inv_mass, *variance, dense ? "variance (dense: the pooled covariance)"
                                                  : "variance", dense ? std::vector<int64_t>{dim, dim}
                                                                      : std::vector<int64_t>{dim},
                       at::kDouble);
  }
  FHMC_CHECK_VALUE(chees.has_value() == chees_sums.has_value(),
                   "chees and chees_sums come together (ChEES's state and its sums), got ",
                   chees ? "chees" : "chees_sums", " alone");
  if (chees) {
    check_chain_buffer(inv_mass, *chees, "chees", {8}, at::kDouble);
    check_chain_buffer(inv_mass, *chees_sums, "chees_sums", {2}, at::kDouble);
    check_not_differentiated(*chees, "chees");
    FHMC_CHECK_VALUE(max_leapfrog_steps >= 1 && max_leapfrog_steps <= kMaxLeapfrogSteps,
                     "max_leapfrog_steps must be in [1, 2^31 - 1], got ", max_leapfrog_steps);
  }
  for (const auto& [t, name] : {std::pair{&step_size, "step_size"}, {&inv_mass, "inv_mass"},
                                {&dual_averaging, "dual_averaging"}}) {
    check_not_differentiated(*t, name);
  }
  const std::vector<int64_t> schedule = windows.vec();
  check_warmup_schedule(num_warmup, schedule, target_accept);
  FHMC_CHECK_VALUE(iteration >= 0 && iteration < num_warmup, "iteration must be in [0, ",
                   num_warmup, ") (a warm-up iteration), got ", iteration);
  FHMC_CHECK_VALUE(!variance || (std::isfinite(variance_draws) && variance_draws >= 2),
                   "variance_draws must be the (>= 2) draws behind variance, got ",
                   variance_draws);
  const c10::OptionalDeviceGuard guard(inv_mass.device());
  AT_DISPATCH_FLOATING_TYPES(inv_mass.scalar_type(), "fused_hmc::pooled_update", [&] {
    PooledUpdateParams<scalar_t> p{};
    p.step_size = step_size.data_ptr<double>();
    p.dual_averaging = reinterpret_cast<DualAveraging*>(dual_averaging.data_ptr<double>());
    p.inv_mass = inv_mass.data_ptr<scalar_t>();
    p.acceptance_terms = acceptance_terms.data_ptr<double>();
    p.harmonic_acceptance = harmonic_acceptance;
    p.variance = variance && !dense ? variance->data_ptr<double>() : nullptr;
    p.variance_draws = variance_draws;
    p.dim = dim;
    p.windows = warmup_windows_of(num_warmup, schedule);
    p.iteration = iteration;
    p.target_accept = target_accept;
    p.adapt_step_size = adapt_step_size;
    p.adapt_mass_matrix = adapt_mass_matrix;
    p.chees = chees ? reinterpret_cast<ChEESState*>(chees->data_ptr<double>()) : nullptr;
    p.chees_sums = chees_sums ? chees_sums->data_ptr<double>() : nullptr;
    p.max_leapfrog_steps = static_cast<int>(max_leapfrog_steps);
    if (!inv_mass.is_cuda()) {
      apply_pooled_update(p, true, 0, 1);
      if (dense && variance) {  // the warmup op's pooled dense update
        std::vector<double> cov(variance->data_ptr<double>(),
                                variance->data_ptr<double>() + dim * dim);
        regularize_covariance(cov.data(), variance_draws, dim);
        adapt_dense_factor(cov.data(), dim, inv_mass.data_ptr<scalar_t>());
      }
      return;
    }
    const CudaBackend* cuda = cuda_backend();
    FHMC_CHECK_VALUE(cuda != nullptr, "fused_hmc was built without its CUDA kernels");
    cuda->check_launch(cuda->launch_pooled_update(p, cuda->current_stream()));
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CPU, m) { m.impl("pooled_update", &pooled_update); }
TORCH_LIBRARY_IMPL(fused_hmc, CUDA, m) { m.impl("pooled_update", &pooled_update); }

}  // namespace fused_hmc
