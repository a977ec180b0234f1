// CUDA kernel: many HMC transitions of every chain in one launch (a persistent kernel), with chain
// state, Welford moments and acceptance statistics held in registers, writing only the kept draws.
//
// Transition t of chain c uses the native philox stream exactly as hmc_step(seed=, transition=t)
// does and the same shared math, so splitting a run into calls, chunks or batches changes no bit
// (the energy terms are summed in the canonical chunk order, whatever the group shape).
// The host side is run_chains_cuda.cpp.
#include "../math/gaussian_hmc.h"
#include "../math/noise_streams.h"
#include "../math/philox_transition.h"
#include "../math/thinning.h"
#include "chain_group.cuh"
#include "chunk_io.cuh"
#include "keep_draws.cuh"
#include "launch_params.h"

namespace fused_hmc {
namespace {

template <typename scalar_t, int GROUP, int CHUNKS>
__global__ void __launch_bounds__(GroupGeometry<GROUP>::kThreads, 1)
    run_chains_kernel(const RunChainsParams<scalar_t> p) {
  const int lane = threadIdx.x % GROUP;
  const int64_t chain =
      static_cast<int64_t>(blockIdx.x) * GroupGeometry<GROUP>::kChainsPerBlock + threadIdx.x / GROUP;
  const bool live = chain < p.batch;
  const uint64_t stream_chain = static_cast<uint64_t>(p.chain_offset + chain);

  scalar_t q[CHUNKS][4], mu[CHUNKS][4];
  double mean[CHUNKS][4], m2[CHUNKS][4];
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = 4 * static_cast<int64_t>(lane + c * GROUP);
    if (!live || j0 >= p.dim) continue;
    load_chunk(p.q + chain * p.dim, j0, p.dim, p.vectorized, q[c]);
    load_chunk(p.mu, j0, p.dim, p.vectorized, mu[c]);
  }
  if (live) transfer_moments<GROUP, CHUNKS, false>(p.out.mean, p.out.m2, chain, lane, p.dim, mean, m2);
  // The stored sum is carried in and added to one transition at a time, as on the CPU, so the
  // float64 total does not depend on how a run is split into calls.
  int64_t accept_count = 0;
  double accept_prob_sum = lane == 0 && live ? p.out.accept_prob_sum[chain] : 0.0;
  const int64_t first_kept = kept_before(p.first_transition, p.out.thin);

  for (int64_t t = p.first_transition; t < p.first_transition + p.num_transitions; ++t) {
    const uint64_t tu = static_cast<uint64_t>(t);
    // Drawn first: independent of the momentum, so its latency overlaps the integration.
    const float uniform = lane == 0 && live ? stream_uniform(p.stream, stream_chain, tu) : 0.0f;
    scalar_t proposal[CHUNKS][4];
    scalar_t change[CHUNKS] = {};  // per-chunk partials, summed in the canonical order
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int64_t j0 = 4 * static_cast<int64_t>(lane + c * GROUP);
      if (!live || j0 >= p.dim) continue;
      scalar_t momentum[4];
      stream_chunk_momentum(p.stream, stream_chain, tu, j0, p.dim, momentum);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (j0 + e >= p.dim) continue;
        const scalar_t x0 = q[c][e] - mu[c][e];
        scalar_t x = x0, mom = momentum[e];
        leapfrog_fused(x, mom, p.steps, p.num_steps);
        change[c] += energy_change_twice(x0, momentum[e], x, mom);
        proposal[c][e] = x + mu[c][e];
      }
    }
    const scalar_t change_sum = group_chunk_sum<GROUP>(change);
    bool accepted = false;
    if (lane == 0 && live) {
      const auto decision = philox_decide(uniform, change_sum);
      accepted = decision.accepted;
      accept_count += accepted ? 1 : 0;
      accept_prob_sum += static_cast<double>(decision.accept_prob);
    }
    accepted = group_broadcast<GROUP>(accepted);
    if (!live) continue;
    if (accepted) {
#pragma unroll
      for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) q[c][e] = proposal[c][e];
      }
    }
    keep_group_draw<scalar_t, GROUP, CHUNKS>(p.out, chain, t, first_kept, lane, p.dim, q, mean, m2);
  }

  if (!live) return;
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int64_t j0 = 4 * static_cast<int64_t>(lane + c * GROUP);
    if (j0 < p.dim) store_chunk(p.q + chain * p.dim, j0, p.dim, p.vectorized, q[c]);
  }
  transfer_moments<GROUP, CHUNKS, true>(p.out.mean, p.out.m2, chain, lane, p.dim, mean, m2);
  if (lane == 0) {
    p.out.accept_count[chain] += accept_count;
    p.out.accept_prob_sum[chain] = accept_prob_sum;
  }
}

}  // namespace

template <typename scalar_t>
cudaError_t launch_run_chains(const RunChainsParams<scalar_t>& p, cudaStream_t stream) {
  with_group_shape(choose_group_shape(p.dim), [&](auto group, auto chunks) {
    constexpr int G = decltype(group)::value, C = decltype(chunks)::value;
    using Geometry = GroupGeometry<G>;
    const auto blocks = static_cast<unsigned>((p.batch + Geometry::kChainsPerBlock - 1) /
                                              Geometry::kChainsPerBlock);
    run_chains_kernel<scalar_t, G, C><<<blocks, Geometry::kThreads, 0, stream>>>(p);
  });
  return cudaGetLastError();
}

template cudaError_t launch_run_chains<float>(const RunChainsParams<float>&, cudaStream_t);
template cudaError_t launch_run_chains<double>(const RunChainsParams<double>&, cudaStream_t);

}  // namespace fused_hmc
