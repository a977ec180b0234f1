// CUDA kernels: one HMC transition of N(mu, I) for every chain in one launch, noise drawn inside.
//
// math/hmc/transition.h's body on the lane group (lane_group.cuh), as the chain kernels run it: the
// native philox stream on the standard target (StandardGaussian), caller-supplied tensors and
// torch's own stream (the numbers torch.randn_like(q) and torch.rand(B) would draw,
// noise_streams.h) on the reference's rounding of it (ReferenceGaussian), bit for bit the
// reference's q_new. The block's Metropolis uniforms are formed by its first threads, one per
// chain, ahead of the trajectory. Seed and offset come from the torch generator's
// philox_cuda_state and are unpacked in the kernel, so CUDA graph replays draw fresh numbers.
// The host side (checks, outputs, generator) is transition_cuda.cpp.
#include <tuple>  // before PhiloxUtils.cuh, whose unpack() returns std::tuple without including it
#include <type_traits>

#include <ATen/cuda/PhiloxUtils.cuh>

#include "../math/hmc/metropolis.h"
#include "../math/hmc/transition.h"
#include "../math/rng/noise_streams.h"
#include "../math/targets/reference_gaussian.h"
#include "../math/targets/standard_gaussian.h"
#include "chain_shape.cuh"
#include "chunk_io.cuh"
#include "lane_group.cuh"
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
                                              int64_t chain, int j0, int dim, scalar_t (&out)[4]) {
  if constexpr (SOURCE == NoiseSource::kExternal) {
    load_chunk(p.momentum + chain * dim, j0, dim, p.vectorized, out);
  } else if constexpr (SOURCE == NoiseSource::kPhilox) {
    const PhiloxStream stream{key.seed, key.offset / 4, p.blocks_per_transition};
    stream_chunk_momentum(stream, chain, p.transition, j0, dim, out);
  } else {
    const TorchDrawLayout layout{key.seed, key.offset, p.randn_threads,
                                 sizeof(scalar_t) == 4 ? 4u : 2u};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (j0 + e < dim) {
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

// What the Metropolis test compares with log_alpha: the log of the chain's clamped uniform, in
// the uniform's type (float, or double for a given float64 uniform; a float survives the double
// slot exactly). Drawn uniforms go to uniform_out when traced.
template <NoiseSource SOURCE>
using LogUniform = std::conditional_t<SOURCE == NoiseSource::kExternal, double, float>;

template <NoiseSource SOURCE, typename scalar_t>
__device__ __forceinline__ LogUniform<SOURCE> chain_log_uniform(const TransitionParams<scalar_t>& p,
                                                                RngKey key, int64_t chain) {
  if constexpr (SOURCE == NoiseSource::kExternal) {
    return p.uniform_is_float
               ? metropolis_log_uniform(static_cast<const float*>(p.uniform)[chain])
               : metropolis_log_uniform(static_cast<const double*>(p.uniform)[chain]);
  } else {
    const float u = draw_uniform<SOURCE>(p, key, chain);
    if (p.uniform_out != nullptr) p.uniform_out[chain] = u;
    if constexpr (SOURCE == NoiseSource::kPhilox) {
      return philox_log_uniform(u);
    } else {
      return metropolis_log_uniform(u);
    }
  }
}

template <NoiseSource SOURCE, typename scalar_t>
__device__ __forceinline__ bool chain_accepts(const TransitionParams<scalar_t>& p,
                                              LogUniform<SOURCE> log_uniform, scalar_t log_alpha) {
  if constexpr (SOURCE == NoiseSource::kPhilox) {
    return philox_accept_by_log(log_uniform, log_alpha);
  } else if constexpr (SOURCE == NoiseSource::kTorchStream) {
    return metropolis_accept_by_log(log_uniform, log_alpha);
  } else {
    return p.uniform_is_float
               ? metropolis_accept_by_log(static_cast<float>(log_uniform), log_alpha)
               : metropolis_accept_by_log(log_uniform, log_alpha);
  }
}

// The kernel's noise policy (math/hmc/transition.h): the chain's momentum from SOURCE (traced to
// momentum_out when asked), and the test against its uniform's log, which the block's first threads
// form in log_uniform (shared memory) while the trajectory runs: await_uniform is their barrier.
template <NoiseSource SOURCE, typename scalar_t>
struct KernelNoise {
  const TransitionParams<scalar_t>& p;
  RngKey key;
  int64_t chain;
  const LogUniform<SOURCE>* log_uniform;

  __device__ void draw(int64_t j0, int64_t dim, scalar_t (&z)[4]) const {
    draw_momentum<SOURCE>(p, key, chain, static_cast<int>(j0), static_cast<int>(dim), z);
    if (p.momentum_out != nullptr) store_chunk(p.momentum_out + chain * dim, j0, dim, false, z);
  }
  __device__ float jitter_uniform() const { return 0.0f; }
  __device__ float trajectory_uniform() const { return 0.0f; }
  __device__ void await_uniform() const { __syncthreads(); }
  __device__ bool accepts(scalar_t log_alpha) const {
    return chain_accepts<SOURCE>(p, *log_uniform, log_alpha);
  }
};

// The philox mode's target is the chain ops' standard one (fused leapfrog); the others promise the
// reference's bits and take its rounding.
template <NoiseSource SOURCE, typename scalar_t>
using KernelTarget = std::conditional_t<SOURCE == NoiseSource::kPhilox, StandardGaussian<scalar_t>,
                                        ReferenceGaussian<scalar_t>>;

// Blocks of 256 threads per SM that the one-chunk shapes must fit: the kernel is instruction-bound
// at 1M chains and wants the warps. These bounds (40 registers a thread in float32, 48 for the
// torch stream's draws, 64 in float64) keep the occupancy the coordinate-at-a-time loop had,
// except float64 given noise (5 blocks before; 4 now, as 48 registers would spill).
template <typename scalar_t, NoiseSource SOURCE, int CHUNKS>
constexpr int kMinBlocksPerSm = CHUNKS != 1             ? 1
                                : sizeof(scalar_t) == 8 ? 4
                                : SOURCE == NoiseSource::kTorchStream ? 5
                                                                      : 6;

template <typename scalar_t, NoiseSource SOURCE, int GROUP, int CHUNKS>
__global__ void __launch_bounds__(GroupGeometry<GROUP>::kThreads,
                                  kMinBlocksPerSm<scalar_t, SOURCE, CHUNKS>)
    hmc_transition_kernel(const TransitionParams<scalar_t> p) {
  constexpr int kChains = GroupGeometry<GROUP>::kChainsPerBlock;
  const int slot = threadIdx.x / GROUP;  // the chain's place in the block
  const int64_t first_chain = static_cast<int64_t>(blockIdx.x) * kChains;
  const int64_t chain = first_chain + slot;
  // dead lanes still join the group's shuffles and the barriers
  const GroupSeat seat{static_cast<int>(threadIdx.x % GROUP), chain < p.batch};
  const RngKey key = SOURCE == NoiseSource::kExternal ? RngKey{0, 0} : unpack_key(p);

  // The uniform's Philox block and log cost a warp the same whether one lane or all form them, so
  // the first threads form one chain's each (one warp for up to 32 chains), not every group.
  __shared__ LogUniform<SOURCE> log_uniforms[kChains];
  if (threadIdx.x < kChains && first_chain + threadIdx.x < p.batch) {
    log_uniforms[threadIdx.x] = chain_log_uniform<SOURCE>(p, key, first_chain + threadIdx.x);
  }

  using Target = KernelTarget<SOURCE, scalar_t>;
  const Target target{p.mu, p.dim};
  Chunks<scalar_t, CHUNKS> q;
  load_group_row<scalar_t, GROUP, CHUNKS>(p.q + chain * p.dim, seat, p.dim, p.vectorized,
                                          scalar_t(0), q.v);
  CoordinateCoefficients<Target, CHUNKS, true> mass;
  mass.template load<GROUP>(target, p.dim, nullptr, seat);
  typename LaneGroup<scalar_t, GROUP, CHUNKS>::template Carry<Target> carry;
  const auto decision = transition(
      LaneGroup<scalar_t, GROUP, CHUNKS>(seat, p.dim, nullptr), target,
      KernelNoise<SOURCE, scalar_t>{p, key, chain, log_uniforms + slot}, mass, q,
      Trajectory{p.step_size, 0.0, p.num_steps, 0.0}, carry);
  if (!seat.live) return;
  if (seat.lane == 0) p.accepted[chain] = decision.accepted;
  store_group_row<scalar_t, GROUP, CHUNKS>(p.q_new + chain * p.dim, seat, p.dim, p.vectorized,
                                           q.v);
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
