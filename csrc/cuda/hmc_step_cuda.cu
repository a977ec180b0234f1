// CUDA kernels: one HMC transition of N(mu, I) for every chain in one launch, noise drawn inside.
//
// A group of threads owns a chain (group_shape.h). Each thread draws the momentum of its chunks,
// integrates them (leapfrog from math/gaussian_hmc.h), and the group sums the energy change; lane 0
// draws the uniform and decides. Three noise sources share the kernel: caller-supplied tensors, the
// native philox stream, and torch's own stream (the numbers torch.randn_like(q) and torch.rand(B)
// would draw, noise_streams.h). Seed and offset come from the torch generator's
// philox_cuda_state and are unpacked in the kernel, so CUDA graph replays draw fresh numbers.
// The host side (checks, outputs, generator) is hmc_step_cuda.cpp.
#include <tuple>  // before PhiloxUtils.cuh, whose unpack() returns std::tuple without including it

#include <ATen/cuda/PhiloxUtils.cuh>

#include "../math/gaussian_hmc.h"
#include "../math/noise_streams.h"
#include "../math/philox_transition.h"
#include "chain_group.cuh"
#include "chunk_io.cuh"
#include "launch_params.h"

namespace fused_hmc {
namespace {

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
__global__ void __launch_bounds__(GroupGeometry<GROUP>::kThreads, 1)
    hmc_transition_kernel(const TransitionParams<scalar_t> p) {
  const int lane = threadIdx.x % GROUP;
  const int64_t chain =
      static_cast<int64_t>(blockIdx.x) * GroupGeometry<GROUP>::kChainsPerBlock + threadIdx.x / GROUP;
  const bool live = chain < p.batch;  // dead lanes still join the group's shuffles
  const RngKey key = SOURCE == NoiseSource::kExternal ? RngKey{0, 0} : unpack_key(p);
  const scalar_t* q_row = p.q + chain * p.dim;

  scalar_t current[CHUNKS][4], proposal[CHUNKS][4];
  scalar_t change[CHUNKS] = {};  // per-chunk partials, summed in the canonical order
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
        change[c] += energy_change_twice(x0, momentum[e], x, mom);
      } else {
        leapfrog_exact(q, mom, mu[e], p.steps, p.num_steps);
        change[c] += energy_change_twice(x0, momentum[e], q - mu[e], mom);
      }
      proposal[c][e] = q;
    }
    if (p.momentum_out != nullptr) store_chunk(p.momentum_out + chain * p.dim, j0, p.dim, false, momentum);
  }
  const scalar_t change_sum = group_chunk_sum<GROUP>(change);

  bool accepted = false;
  if (lane == 0 && live) {
    const scalar_t log_alpha = log_accept_ratio(change_sum);
    if constexpr (SOURCE == NoiseSource::kExternal) {
      accepted = p.uniform_is_float
                     ? metropolis_accept(static_cast<const float*>(p.uniform)[chain], log_alpha)
                     : metropolis_accept(static_cast<const double*>(p.uniform)[chain], log_alpha);
    } else {
      const float u = draw_uniform<SOURCE>(p, key, chain);
      if constexpr (SOURCE == NoiseSource::kPhilox) {
        accepted = philox_accept(u, log_alpha);
      } else {
        accepted = metropolis_accept(u, log_alpha);
      }
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

__global__ void philox_blocks_kernel(const PhiloxBlock* counters, PhiloxBlock* out, int64_t n,
                                     uint64_t key) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = philox4x32_10(counters[i], static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
  }
}

}  // namespace

cudaError_t launch_philox_blocks(const uint32_t* counters, uint32_t* out, int64_t n, uint64_t key,
                                 cudaStream_t stream) {
  constexpr int kThreads = 256;
  if (n == 0) return cudaSuccess;
  philox_blocks_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      reinterpret_cast<const PhiloxBlock*>(counters), reinterpret_cast<PhiloxBlock*>(out), n, key);
  return cudaGetLastError();
}

template <typename scalar_t>
cudaError_t launch_transition(const TransitionParams<scalar_t>& p, NoiseSource source,
                              cudaStream_t stream) {
  with_group_shape(choose_group_shape(p.dim), [&](auto group, auto chunks) {
    constexpr int G = decltype(group)::value, C = decltype(chunks)::value;
    using Geometry = GroupGeometry<G>;
    const auto blocks = static_cast<unsigned>((p.batch + Geometry::kChainsPerBlock - 1) /
                                              Geometry::kChainsPerBlock);
    switch (source) {
      case NoiseSource::kExternal:
        hmc_transition_kernel<scalar_t, NoiseSource::kExternal, G, C>
            <<<blocks, Geometry::kThreads, 0, stream>>>(p);
        break;
      case NoiseSource::kPhilox:
        hmc_transition_kernel<scalar_t, NoiseSource::kPhilox, G, C>
            <<<blocks, Geometry::kThreads, 0, stream>>>(p);
        break;
      case NoiseSource::kTorchStream:
        hmc_transition_kernel<scalar_t, NoiseSource::kTorchStream, G, C>
            <<<blocks, Geometry::kThreads, 0, stream>>>(p);
        break;
    }
  });
  return cudaGetLastError();
}

template cudaError_t launch_transition<float>(const TransitionParams<float>&, NoiseSource,
                                              cudaStream_t);
template cudaError_t launch_transition<double>(const TransitionParams<double>&, NoiseSource,
                                               cudaStream_t);

}  // namespace fused_hmc
