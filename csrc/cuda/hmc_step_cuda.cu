// CUDA: one HMC transition of N(mu, I) for every chain in one launch, noise drawn in the kernel.
//
// A group of threads owns a chain (chain_group.cuh). Each thread draws the momentum of its chunks,
// integrates them (leapfrog from math/gaussian_hmc.h), and the group sums the energy change; lane 0
// draws the uniform and decides. Three noise sources share the kernel: caller-supplied tensors, the
// native philox stream, and torch's own stream (the numbers torch.randn_like(q) and torch.rand(B)
// would draw, noise_streams.h). Seed and offset come from the torch generator's
// philox_cuda_state and are unpacked in the kernel, so CUDA graph replays draw fresh numbers.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/PhiloxUtils.cuh>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <mutex>
#include <tuple>

#include "../math/gaussian_hmc.h"
#include "../math/noise_streams.h"
#include "../transition_request.h"
#include "chain_group.cuh"
#include "chunk_io.cuh"
#include "device_info.h"

namespace fused_hmc {
namespace {

using at::Tensor;

enum class NoiseSource { kExternal, kPhilox, kTorchStream };

template <typename scalar_t>
struct TransitionParams {
  const scalar_t* q;    // [B, d] contiguous, read-only
  const scalar_t* mu;   // [d], read-only
  scalar_t* q_new;      // [B, d] contiguous, written
  bool* accepted;       // [B], written
  int64_t batch;
  int64_t dim;
  StepSizes<scalar_t> steps;
  int num_steps;
  bool vectorized;  // every row of q, mu, q_new (and momentum) 16-byte aligned
  // kExternal: momentum [B, d] contiguous and uniform [B] (float32, or scalar_t).
  const scalar_t* momentum;
  const void* uniform;
  bool uniform_is_float;
  // kPhilox / kTorchStream: the generator reservation, or an explicit philox seed.
  at::PhiloxCudaState rng_state;
  bool from_generator;
  uint64_t seed;
  uint64_t transition;
  uint64_t blocks_per_transition;
  // kTorchStream: torch's launch geometry for randn over B*d values and rand over B values, and
  // the layout of torch.randn_like(q) in elements.
  uint64_t randn_threads;
  uint64_t rand_threads;
  uint64_t randn_increment;
  int64_t chain_stride;
  int64_t dim_stride;
  // Optional trace of the noise actually used: momentum [B, d], uniform [B] float32.
  scalar_t* momentum_out;
  float* uniform_out;
};

struct RngKey {
  uint64_t seed;
  uint64_t offset;
};

template <typename scalar_t>
__device__ __forceinline__ RngKey unpack_key(const TransitionParams<scalar_t>& p) {
  if (!p.from_generator) return {p.seed, 0};
  const auto [seed, offset] = at::cuda::philox::unpack(p.rng_state);
  return {seed, offset};
}

// The momentum of coordinates j0 .. j0 + 3 of `chain` (entries past dim are left unset).
template <NoiseSource SOURCE, typename scalar_t>
__device__ __forceinline__ void draw_momentum(const TransitionParams<scalar_t>& p, RngKey key,
                                              int64_t chain, int64_t j0, scalar_t (&out)[4]) {
  if constexpr (SOURCE == NoiseSource::kExternal) {
    load_chunk(p.momentum + chain * p.dim, j0, p.dim, p.vectorized, out);
  } else if constexpr (SOURCE == NoiseSource::kPhilox) {
    const PhiloxStream stream{key.seed, key.offset / 4, p.blocks_per_transition};
    stream_chunk_momentum(stream, chain, p.transition, j0, p.dim, out);
  } else {
    const TorchDrawLayout layout{key.seed, key.offset, p.randn_threads,
                                 sizeof(scalar_t) == 4 ? 4u : 2u};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (j0 + e < p.dim) {
        out[e] = torch_randn_element<scalar_t>(
            layout, static_cast<uint64_t>(chain * p.chain_stride + (j0 + e) * p.dim_stride));
      }
    }
  }
}

template <NoiseSource SOURCE, typename scalar_t>
__device__ __forceinline__ float draw_uniform(const TransitionParams<scalar_t>& p, RngKey key,
                                              int64_t chain) {
  if constexpr (SOURCE == NoiseSource::kPhilox) {
    return stream_uniform(PhiloxStream{key.seed, key.offset / 4, p.blocks_per_transition}, chain,
                          p.transition);
  } else {
    const TorchDrawLayout layout{key.seed, key.offset + p.randn_increment, p.rand_threads, 4u};
    return torch_rand_element(layout, static_cast<uint64_t>(chain));
  }
}

template <typename scalar_t, NoiseSource SOURCE, int GROUP, int CHUNKS>
__global__ void __launch_bounds__(GroupGeometry<GROUP>::kThreads)
    hmc_transition_kernel(const TransitionParams<scalar_t> p) {
  const int lane = threadIdx.x % GROUP;
  const int64_t chain =
      static_cast<int64_t>(blockIdx.x) * GroupGeometry<GROUP>::kChainsPerBlock + threadIdx.x / GROUP;
  const bool live = chain < p.batch;  // dead lanes still join the group's shuffles
  const RngKey key = SOURCE == NoiseSource::kExternal ? RngKey{0, 0} : unpack_key(p);
  const scalar_t* q_row = p.q + chain * p.dim;

  scalar_t current[CHUNKS][4], proposal[CHUNKS][4];
  scalar_t change = 0;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = 4 * static_cast<int64_t>(lane + c * GROUP);
    if (!live || j0 >= p.dim) continue;
    scalar_t mu[4], momentum[4];
    load_chunk(q_row, j0, p.dim, p.vectorized, current[c]);
    load_chunk(p.mu, j0, p.dim, p.vectorized, mu);
    draw_momentum<SOURCE>(p, key, chain, j0, momentum);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (j0 + e >= p.dim) continue;
      scalar_t q = current[c][e], mom = momentum[e];
      const scalar_t x0 = current[c][e] - mu[e];
      if constexpr (SOURCE == NoiseSource::kPhilox) {
        scalar_t x = x0;
        leapfrog_fused(x, mom, p.steps, p.num_steps);
        q = x + mu[e];
        change += energy_change_twice(x0, momentum[e], x, mom);
      } else {
        leapfrog_exact(q, mom, mu[e], p.steps, p.num_steps);
        change += energy_change_twice(x0, momentum[e], q - mu[e], mom);
      }
      proposal[c][e] = q;
    }
    if (p.momentum_out != nullptr) store_chunk(p.momentum_out + chain * p.dim, j0, p.dim, false, momentum);
  }
  change = group_sum<GROUP>(change);

  bool accepted = false;
  if (lane == 0 && live) {
    const scalar_t log_alpha = log_accept_ratio(change);
    if constexpr (SOURCE == NoiseSource::kExternal) {
      accepted = p.uniform_is_float
                     ? metropolis_accept(static_cast<const float*>(p.uniform)[chain], log_alpha)
                     : metropolis_accept(static_cast<const scalar_t*>(p.uniform)[chain], log_alpha);
    } else {
      const float u = draw_uniform<SOURCE>(p, key, chain);
      accepted = metropolis_accept(u, log_alpha);
      if (p.uniform_out != nullptr) p.uniform_out[chain] = u;
    }
    p.accepted[chain] = accepted;
  }
  accepted = group_broadcast<GROUP>(accepted);

#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = 4 * static_cast<int64_t>(lane + c * GROUP);
    if (!live || j0 >= p.dim) continue;
    scalar_t kept[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) kept[e] = accepted ? proposal[c][e] : current[c][e];
    store_chunk(p.q_new + chain * p.dim, j0, p.dim, p.vectorized, kept);
  }
}

template <typename scalar_t, NoiseSource SOURCE, int GROUP, int CHUNKS>
void launch_shape(const TransitionParams<scalar_t>& p, cudaStream_t stream) {
  using G = GroupGeometry<GROUP>;
  const int64_t blocks = (p.batch + G::kChainsPerBlock - 1) / G::kChainsPerBlock;
  check_grid_size(blocks, p.batch);
  hmc_transition_kernel<scalar_t, SOURCE, GROUP, CHUNKS>
      <<<static_cast<unsigned>(blocks), G::kThreads, 0, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t, NoiseSource SOURCE>
void launch_transition(const TransitionParams<scalar_t>& p, int device, cudaStream_t stream) {
  const DeviceInfo& dev = device_info(device);
  const GroupShape shape =
      choose_group_shape(p.dim, p.batch, int64_t{dev.sm_count} * dev.max_threads_per_sm);
  with_group_shape(shape, [&](auto group, auto chunks) {
    launch_shape<scalar_t, SOURCE, decltype(group)::value, decltype(chunks)::value>(p, stream);
  });
}

// ---- host side ----------------------------------------------------------------------------------

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
  p.steps = step_sizes<scalar_t>(step_size);
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

std::tuple<Tensor, Tensor> hmc_step_noise_cuda(const Tensor& q_in, const Tensor& mu_in,
                                               const Tensor& momentum_in, const Tensor& uniform_in,
                                               double step_size, int64_t num_leapfrog_steps) {
  check_transition_inputs(q_in, mu_in, step_size, num_leapfrog_steps);
  check_noise_inputs(q_in, momentum_in, uniform_in);
  check_dim_supported(q_in, kMaxCudaDim, "CUDA");
  const c10::cuda::CUDAGuard guard(q_in.device());
  Outputs out = allocate_outputs(q_in, false);
  if (q_in.size(0) == 0) return {out.q_new, out.accepted};
  const Tensor q = q_in.contiguous(), mu = mu_in.contiguous();
  const Tensor momentum = momentum_in.contiguous(), uniform = uniform_in.contiguous();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "hmc_step_noise_cuda", [&] {
    auto p = base_params<scalar_t>(q, mu, out, step_size, num_leapfrog_steps);
    p.momentum = momentum.data_ptr<scalar_t>();
    p.vectorized = p.vectorized && rows_vectorizable(p.momentum, p.dim, sizeof(scalar_t));
    p.uniform = uniform.data_ptr();
    p.uniform_is_float = uniform.scalar_type() == at::kFloat;
    launch_transition<scalar_t, NoiseSource::kExternal>(p, q.get_device(),
                                                     c10::cuda::getCurrentCUDAStream());
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

Outputs hmc_step_impl(const Tensor& q_in, const Tensor& mu_in, double step_size,
                      int64_t num_leapfrog_steps, c10::string_view rng,
                      const std::optional<at::Generator>& generator, std::optional<int64_t> seed,
                      int64_t transition, bool traced) {
  check_transition_inputs(q_in, mu_in, step_size, num_leapfrog_steps);
  const NoiseMode mode = parse_noise_mode(rng);
  check_stream_selection(mode, seed, transition);
  check_dim_supported(q_in, kMaxCudaDim, "CUDA");
  const c10::cuda::CUDAGuard guard(q_in.device());
  Outputs out = allocate_outputs(q_in, traced);
  if (q_in.size(0) == 0) return out;
  const NoiseLayout layout = randn_like_layout(q_in);
  const Tensor q = q_in.contiguous(), mu = mu_in.contiguous();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "hmc_step_cuda", [&] {
    auto p = base_params<scalar_t>(q, mu, out, step_size, num_leapfrog_steps);
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (mode == NoiseMode::kPhilox) {
      p.blocks_per_transition = momentum_blocks<scalar_t>(p.dim) + 1;
      p.from_generator = !seed.has_value();
      p.seed = seed ? static_cast<uint64_t>(*seed) : 0;
      p.transition = static_cast<uint64_t>(transition);
      if (p.from_generator) p.rng_state = reserve(generator, 4 * p.blocks_per_transition);
      launch_transition<scalar_t, NoiseSource::kPhilox>(p, q.get_device(), stream);
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
    launch_transition<scalar_t, NoiseSource::kTorchStream>(p, q.get_device(), stream);
  });
  return out;
}

std::tuple<Tensor, Tensor> hmc_step_cuda(const Tensor& q, const Tensor& mu, double step_size,
                                         int64_t num_leapfrog_steps, c10::string_view rng,
                                         const std::optional<at::Generator>& generator,
                                         std::optional<int64_t> seed, int64_t transition) {
  Outputs out = hmc_step_impl(q, mu, step_size, num_leapfrog_steps, rng, generator, seed,
                              transition, false);
  return {out.q_new, out.accepted};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> hmc_step_traced_cuda(
    const Tensor& q, const Tensor& mu, double step_size, int64_t num_leapfrog_steps,
    c10::string_view rng, const std::optional<at::Generator>& generator,
    std::optional<int64_t> seed, int64_t transition) {
  Outputs out = hmc_step_impl(q, mu, step_size, num_leapfrog_steps, rng, generator, seed,
                              transition, true);
  return {out.q_new, out.accepted, out.momentum, out.uniform};
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CUDA, m) {
  m.impl("hmc_step_noise", &hmc_step_noise_cuda);
  m.impl("hmc_step", &hmc_step_cuda);
  m.impl("hmc_step_traced", &hmc_step_traced_cuda);
}

}  // namespace fused_hmc
