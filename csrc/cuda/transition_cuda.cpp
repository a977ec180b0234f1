// Host side of the CUDA transition ops: argument checks, outputs, the generator reservation, and
// the launch (transition_kernel.cu). Compiled by g++, so every error is raised from ordinary host
// code.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <mutex>
#include <tuple>

#include "../check_message.h"
#include "../math/rng/stream_key.h"
#include "../torch_stream.h"
#include "../transition_request.h"
#include "device_info.h"
#include "graph_capture.h"
#include "group_shape.h"
#include "launch_params.h"

namespace fused_hmc {
namespace {

using at::Tensor;


struct Outputs {
  Tensor q_new, accepted, momentum, uniform;
};

Outputs allocate_outputs(const Tensor& q, bool traced) {
  const auto contiguous = q.options().memory_format(at::MemoryFormat::Contiguous);
  Outputs out{at::empty(q.sizes(), contiguous), at::empty({q.size(0)}, q.options().dtype(at::kBool)),
              Tensor(), Tensor()};
  if (traced) {
    out.momentum = at::empty(q.sizes(), contiguous);
    out.uniform = at::empty({q.size(0)}, q.options().dtype(at::kFloat));
  }
  return out;
}

template <typename scalar_t>
TransitionParams<scalar_t> base_params(const Tensor& q, const Tensor& mu, Outputs& out,
                                       double step_size, int64_t num_steps) {
  TransitionParams<scalar_t> p{};
  p.q = q.data_ptr<scalar_t>();
  p.mu = mu.data_ptr<scalar_t>();
  p.q_new = out.q_new.data_ptr<scalar_t>();
  p.accepted = out.accepted.data_ptr<bool>();
  p.batch = q.size(0);
  p.dim = q.size(1);
  p.step_size = step_size;
  p.num_steps = static_cast<int>(num_steps);
  p.vectorized = rows_vectorizable(p.q, p.dim, sizeof(scalar_t)) &&
                 rows_vectorizable(p.mu, p.dim, sizeof(scalar_t)) &&
                 rows_vectorizable(p.q_new, p.dim, sizeof(scalar_t));
  if (out.momentum.defined()) {
    p.momentum_out = out.momentum.data_ptr<scalar_t>();
    p.uniform_out = out.uniform.data_ptr<float>();
  }
  return p;
}

std::tuple<Tensor, Tensor> transition_given_cuda(const Tensor& q_in, const Tensor& mu_in,
                                                 const Tensor& momentum_in,
                                                 const Tensor& uniform_in, double step_size,
                                                 int64_t num_leapfrog_steps) {
  check_dim_supported(q_in, kMaxCudaDim, "CUDA");
  check_batch_launchable(q_in);
  const c10::cuda::CUDAGuard guard(q_in.device());
  Outputs out = allocate_outputs(q_in, false);
  if (q_in.size(0) == 0) return {out.q_new, out.accepted};
  const Tensor q = q_in.contiguous(), mu = mu_in.contiguous();
  const Tensor momentum = momentum_in.contiguous(), uniform = uniform_in.contiguous();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "transition_given_cuda", [&] {
    auto p = base_params<scalar_t>(q, mu, out, step_size, num_leapfrog_steps);
    p.momentum = momentum.data_ptr<scalar_t>();
    p.vectorized = p.vectorized && rows_vectorizable(p.momentum, p.dim, sizeof(scalar_t));
    p.uniform = uniform.data_ptr();
    p.uniform_is_float = uniform.scalar_type() == at::kFloat;
    C10_CUDA_CHECK(
        launch_transition(p, NoiseSource::kExternal, c10::cuda::getCurrentCUDAStream()));
  });
  return {out.q_new, out.accepted};
}

// Reserves `increment` words of every subsequence from the generator, as torch's RNG ops do.
at::PhiloxCudaState reserve(const std::optional<at::Generator>& generator, uint64_t increment) {
  auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      generator, at::cuda::detail::getDefaultCUDAGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return gen->philox_cuda_state(increment);
}

// noise="torch" where the kernel's one-launch copy of torch's stream does not reproduce torch
// (torch_stream.h): torch's own draws, in the reference's order, then the external-noise kernel.
Outputs transition_with_torch_draws(const Tensor& q, const Tensor& mu, double step_size,
                                    int64_t num_leapfrog_steps,
                                    const std::optional<at::Generator>& generator, bool traced,
                                    TorchStreamPath path) {
  if (path == TorchStreamPath::kTorchDrawsSplit) {
    // one std::string argument: no ostream formatting (check_message.h says why)
    TORCH_WARN_ONCE(message::join(
        "fused_hmc: noise=\"torch\" for q of shape ", q.sizes(), " (", q.scalar_type(),
        "): torch splits a draw beyond 32-bit indexing into several launches, each with its own "
        "generator reservation, which the in-kernel copy of its stream does not model; drawing "
        "with torch itself instead (exact, three launches instead of one)"));
  }
  const ReferenceNoise noise = draw_reference_noise(q, generator);
  auto [q_new, accepted] =
      transition_given_cuda(q, mu, noise.momentum, noise.uniform, step_size, num_leapfrog_steps);
  if (!traced) return {q_new, accepted, Tensor(), Tensor()};
  return {q_new, accepted, noise.momentum.contiguous(), noise.uniform};
}

// A drawn transition (arguments checked by transition_op).
Outputs transition_drawn_cuda(const Tensor& q_in, const Tensor& mu_in, double step_size,
                              int64_t num_leapfrog_steps, NoiseMode mode,
                              const std::optional<at::Generator>& generator,
                              std::optional<int64_t> seed, int64_t transition, bool traced) {
  check_dim_supported(q_in, kMaxCudaDim, "CUDA");
  check_batch_launchable(q_in);
  const c10::cuda::CUDAGuard guard(q_in.device());
  if (seed) check_not_capturing_seeded("transition");
  if (mode == NoiseMode::kTorch) {
    const TorchStreamPath path = torch_stream_path(q_in);
    if (path != TorchStreamPath::kInKernel) {
      return transition_with_torch_draws(q_in, mu_in, step_size, num_leapfrog_steps, generator,
                                         traced, path);
    }
  }
  Outputs out = allocate_outputs(q_in, traced);
  if (q_in.size(0) == 0) return out;
  const NoiseLayout layout = randn_like_layout(q_in);
  const Tensor q = q_in.contiguous(), mu = mu_in.contiguous();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "transition_cuda", [&] {
    auto p = base_params<scalar_t>(q, mu, out, step_size, num_leapfrog_steps);
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (mode == NoiseMode::kPhilox) {
      p.blocks_per_transition = momentum_blocks<scalar_t>(p.dim) + 1;
      p.from_generator = !seed.has_value();
      p.seed = seed ? seeded_stream<scalar_t>(*seed, p.dim).seed : 0;
      p.transition = static_cast<uint64_t>(transition);
      if (p.from_generator) p.rng_state = reserve(generator, 4 * p.blocks_per_transition);
      C10_CUDA_CHECK(launch_transition(p, NoiseSource::kPhilox, stream));
      return;
    }
    const DeviceInfo& dev = device_info(q.get_device());
    const auto randn = torch_draw_geometry(static_cast<uint64_t>(q.numel()),
                                           sizeof(scalar_t) == 4 ? 4 : 2, dev.sm_count,
                                           dev.max_threads_per_sm);
    const auto rand = torch_draw_geometry(static_cast<uint64_t>(p.batch), 4, dev.sm_count,
                                          dev.max_threads_per_sm);
    p.from_generator = true;
    p.randn_threads = randn.threads;
    p.rand_threads = rand.threads;
    p.randn_increment = randn.increment;
    p.chain_stride = layout.chain_stride;
    p.dim_stride = layout.dim_stride;
    p.rng_state = reserve(generator, randn.increment + rand.increment);
    C10_CUDA_CHECK(launch_transition(p, NoiseSource::kTorchStream, stream));
  });
  return out;
}

// The drawn path as transition_op takes it.
TransitionOutputs transition_drawn_outputs(const Tensor& q, const Tensor& mu, double step_size,
                                           int64_t num_leapfrog_steps, NoiseMode mode,
                                           const std::optional<at::Generator>& generator,
                                           std::optional<int64_t> seed, int64_t transition,
                                           bool traced) {
  Outputs out = transition_drawn_cuda(q, mu, step_size, num_leapfrog_steps, mode, generator, seed,
                                      transition, traced);
  return {out.q_new, out.accepted, out.momentum, out.uniform};
}

Tensor philox4x32_cuda(const Tensor& counters, int64_t key) {
  check_philox_counters(counters);
  const c10::cuda::CUDAGuard guard(counters.device());
  const Tensor in = counters.contiguous();
  Tensor out = at::empty_like(in);
  C10_CUDA_CHECK(launch_philox_blocks(reinterpret_cast<const uint32_t*>(in.data_ptr<int32_t>()),
                                      reinterpret_cast<uint32_t*>(out.data_ptr<int32_t>()),
                                      in.size(0), static_cast<uint64_t>(key),
                                      c10::cuda::getCurrentCUDAStream()));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CUDA, m) {
  m.impl("transition", &transition_op<&transition_given_cuda, &transition_drawn_outputs>);
}
TORCH_LIBRARY_IMPL(fused_hmc_testing, CUDA, m) { m.impl("philox4x32", &philox4x32_cuda); }

}  // namespace fused_hmc
