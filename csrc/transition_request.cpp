#include "transition_request.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "check_message.h"

namespace fused_hmc {

NoiseMode parse_noise_mode(c10::string_view noise) {
  if (noise == "philox") return NoiseMode::kPhilox;
  if (noise == "torch") return NoiseMode::kTorch;
  if (noise == "given") return NoiseMode::kGiven;
  throw c10::ValueError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                        message::join("noise must be \"philox\", \"torch\" or \"given\", got \"",
                                      std::string(noise), "\""));
}

void check_transition_noise(const at::Tensor& q, NoiseMode mode,
                            const std::optional<at::Tensor>& momentum,
                            const std::optional<at::Tensor>& uniform, std::optional<int64_t> seed,
                            int64_t transition, bool has_generator) {
  if (mode != NoiseMode::kGiven) {
    FHMC_CHECK_VALUE(!momentum && !uniform, "momentum and uniform are the noise of noise=\"given\"; "
                     "with noise=\"philox\" or \"torch\" the kernel draws its own");
    check_stream_selection(mode, seed, transition, has_generator);
    return;
  }
  FHMC_CHECK_VALUE(momentum && uniform, "noise=\"given\" needs momentum and uniform");
  FHMC_CHECK_VALUE(!seed && !has_generator && transition == 0,
                   "noise=\"given\" draws nothing: generator, seed and transition do not apply");
  check_noise_inputs(q, *momentum, *uniform);
}

void check_not_differentiated(const at::Tensor& t, const char* name) {
  FHMC_CHECK_VALUE(!(t.requires_grad() && at::GradMode::is_enabled()), name,
                   " requires grad, but fused_hmc's transitions are not differentiable (the "
                   "outputs would carry no gradient); pass ", name, ".detach()");
}

void check_transition_inputs(const at::Tensor& q, const at::Tensor& mu, double step_size,
                             int64_t num_leapfrog_steps) {
  FHMC_CHECK_VALUE(q.dim() == 2, "q must be a 2-D tensor [batch, dim], got shape ", q.sizes());
  FHMC_CHECK_TYPE(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble,
                   "q must be float32 or float64, got ", q.scalar_type());
  FHMC_CHECK_VALUE(q.size(1) >= 1, "q must have dim >= 1, got shape ", q.sizes());
  FHMC_CHECK_VALUE(mu.dim() == 1 && mu.size(0) == q.size(1), "mu must have shape [", q.size(1),
                    "] to match q's dim, got ", mu.sizes());
  FHMC_CHECK_TYPE(mu.scalar_type() == q.scalar_type(), "mu must have q's dtype ",
                   q.scalar_type(), ", got ", mu.scalar_type());
  FHMC_CHECK_VALUE(mu.device() == q.device(), "mu must be on q's device ", q.device(), ", got ",
                    mu.device());
  FHMC_CHECK_VALUE(std::isfinite(step_size) && step_size > 0,
                    "step_size must be finite and > 0, got ", step_size);
  FHMC_CHECK_VALUE(num_leapfrog_steps >= 1 &&
                        num_leapfrog_steps <= std::numeric_limits<int32_t>::max(),
                    "num_leapfrog_steps must be in [1, 2^31 - 1], got ", num_leapfrog_steps);
  check_not_differentiated(q, "q");
  check_not_differentiated(mu, "mu");
}

void check_noise_inputs(const at::Tensor& q, const at::Tensor& momentum, const at::Tensor& uniform) {
  FHMC_CHECK_VALUE(momentum.sizes() == q.sizes(), "momentum must have q's shape ", q.sizes(),
                    ", got ", momentum.sizes());
  FHMC_CHECK_TYPE(momentum.scalar_type() == q.scalar_type(), "momentum must have q's dtype ",
                   q.scalar_type(), ", got ", momentum.scalar_type());
  FHMC_CHECK_VALUE(momentum.device() == q.device(), "momentum must be on q's device ",
                    q.device(), ", got ", momentum.device());
  FHMC_CHECK_VALUE(uniform.dim() == 1 && uniform.size(0) == q.size(0),
                    "uniform must have shape [", q.size(0), "] (one per chain), got ",
                    uniform.sizes());
  FHMC_CHECK_TYPE(uniform.scalar_type() == at::kFloat || uniform.scalar_type() == at::kDouble,
                   "uniform must be float32 or float64, got ", uniform.scalar_type());
  FHMC_CHECK_VALUE(uniform.device() == q.device(), "uniform must be on q's device ", q.device(),
                    ", got ", uniform.device());
  check_not_differentiated(momentum, "momentum");
  check_not_differentiated(uniform, "uniform");
}

void check_stream_selection(NoiseMode mode, std::optional<int64_t> seed, int64_t transition,
                            bool has_generator) {
  FHMC_CHECK_VALUE(!seed.has_value() || mode == NoiseMode::kPhilox,
                    "seed= keys the native stream and needs noise=\"philox\"");
  FHMC_CHECK_VALUE(!(seed.has_value() && has_generator),
                    "pass seed= (an explicit stream) or generator= (a stream drawn from it), not "
                    "both: with seed= the generator would be ignored");
  FHMC_CHECK_VALUE(transition >= 0, "transition must be >= 0, got ", transition);
  FHMC_CHECK_VALUE(transition == 0 || seed.has_value(),
                    "transition= selects a transition of an explicitly seeded stream; pass seed= too");
}

at::Tensor untraced_momentum(const at::Tensor& q) { return at::empty({0}, q.options()); }
at::Tensor untraced_uniform(const at::Tensor& q) {
  return at::empty({0}, q.options().dtype(at::kFloat));
}

void check_dim_supported(const at::Tensor& q, int64_t max_dim, const char* backend) {
  FHMC_CHECK_VALUE(q.size(1) <= max_dim, "dim ", q.size(1), " is above the largest supported on ",
                    backend, " (", max_dim, ")");
}

void check_philox_counters(const at::Tensor& counters) {
  FHMC_CHECK_VALUE(counters.dim() == 2 && counters.size(1) == 4,
                    "counters must have shape [N, 4], got ", counters.sizes());
  FHMC_CHECK_TYPE(counters.scalar_type() == at::kInt, "counters must be int32, got ",
                   counters.scalar_type());
}

void check_device_index(int device, int limit) {
  FHMC_CHECK_VALUE(device >= 0 && device < limit, "device index ", device, " is out of range [0, ",
                   limit, ")");
}

void check_batch_launchable(const at::Tensor& q) {
  FHMC_CHECK_VALUE(q.size(0) <= std::numeric_limits<int32_t>::max(), "batch ", q.size(0),
                    " is too large for one launch (at most 2^31 - 1 chains)");
}

void check_chain_buffer(const at::Tensor& q, const at::Tensor& t, const char* name,
                        at::IntArrayRef shape, at::ScalarType dtype, bool vector_rows) {
  FHMC_CHECK_VALUE(t.sizes() == shape, name, " must have shape ", shape, ", got ", t.sizes());
  FHMC_CHECK_TYPE(t.scalar_type() == dtype, name, " must be ", dtype, ", got ", t.scalar_type());
  FHMC_CHECK_VALUE(t.device() == q.device(), name, " must be on q's device ", q.device(),
                    ", got ", t.device());
  FHMC_CHECK_VALUE(t.is_contiguous(), name, " must be contiguous");
  FHMC_CHECK_VALUE(!vector_rows || reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, name,
                   " must be 16-byte aligned (the CUDA kernels move its rows in 16-byte vectors); "
                   "pass a tensor of its own, e.g. ", name, ".clone(), not an offset view");
}

}  // namespace fused_hmc
