// CUDA kernel of run_chains_tuned: run_chains' persistent kernel (state, Welford moments and
// acceptance statistics in registers, kept draws written out) with the tuned transition
// (tuned_group.cuh): the Gaussian target family, a diagonal inverse mass and a jittered step size.
// Chunking and batch splits change no bit; the operations are the CPU build's (tuned_transition.h).
#include "../math/thinning.h"
#include "chain_group.cuh"
#include "keep_draws.cuh"
#include "launch_params.h"
#include "tuned_group.cuh"

namespace fused_hmc {
namespace {

template <typename scalar_t, int GROUP, int CHUNKS>
__global__ void __launch_bounds__(GroupGeometry<GROUP>::kThreads, 1)
    run_chains_tuned_kernel(const RunTunedParams<scalar_t> p) {
  const TunedChainsParams<scalar_t>& c = p.chains;
  const int slot = threadIdx.x / GROUP;
  const int64_t chain =
      static_cast<int64_t>(blockIdx.x) * GroupGeometry<GROUP>::kChainsPerBlock + slot;
  const GroupSeat seat{static_cast<int>(threadIdx.x % GROUP), chain < c.batch};
  const int64_t g = c.groups == 1 ? 0 : (seat.live ? chain : 0);
  scalar_t* x_shared = tuned_shared_memory<scalar_t>() + slot * c.dim;

  scalar_t q[CHUNKS][4];
  load_group_row<scalar_t, GROUP, CHUNKS>(c.q + chain * c.dim, seat, c.dim, c.vectorized,
                                          scalar_t(0), q);
  CoordinateCoefficients<scalar_t, CHUNKS> coefficients;
  coefficients.template load<GROUP>(c.target, c.inv_mass + g * c.dim, seat);
  const double step_size = c.step_size[g];
  // Four-chunk shapes (d > 1024) keep the moments in memory, touched on kept transitions only:
  // in registers they would spill.
  constexpr bool kMomentsInRegisters = CHUNKS == 1;
  double mean[CHUNKS][4], m2[CHUNKS][4];
  if (kMomentsInRegisters && seat.live) {
    transfer_moments<GROUP, CHUNKS, false>(p.out.mean, p.out.m2, chain, seat.lane, c.dim, mean, m2);
  }
  int64_t accept_count = 0;
  double accept_prob_sum = seat.lane == 0 && seat.live ? p.out.accept_prob_sum[chain] : 0.0;
  const int64_t first_kept = kept_before(c.first_transition, p.out.thin);
  const uint64_t stream_chain = static_cast<uint64_t>(c.chain_offset + chain);

  for (int64_t t = c.first_transition; t < c.first_transition + c.num_transitions; ++t) {
    const auto decision = group_tuned_transition<scalar_t, GROUP, CHUNKS>(
        c.stream, stream_chain, static_cast<uint64_t>(t), seat, c.target, q, coefficients, step_size,
        c.jitter, c.num_steps, x_shared);
    if (!seat.live) continue;
    accept_count += decision.accepted ? 1 : 0;
    accept_prob_sum += static_cast<double>(decision.accept_prob);
    if (!kMomentsInRegisters && is_kept(t, p.out.thin)) {
      transfer_moments<GROUP, CHUNKS, false>(p.out.mean, p.out.m2, chain, seat.lane, c.dim, mean, m2);
    }
    keep_group_draw<scalar_t, GROUP, CHUNKS>(p.out, chain, t, first_kept, seat.lane, c.dim, q, mean,
                                             m2);
    if (!kMomentsInRegisters && is_kept(t, p.out.thin)) {
      transfer_moments<GROUP, CHUNKS, true>(p.out.mean, p.out.m2, chain, seat.lane, c.dim, mean, m2);
    }
  }

  if (!seat.live) return;
  store_group_row<scalar_t, GROUP, CHUNKS>(c.q + chain * c.dim, seat, c.dim, c.vectorized, q);
  if (kMomentsInRegisters) {
    transfer_moments<GROUP, CHUNKS, true>(p.out.mean, p.out.m2, chain, seat.lane, c.dim, mean, m2);
  }
  if (seat.lane == 0) {
    p.out.accept_count[chain] += accept_count;
    p.out.accept_prob_sum[chain] = accept_prob_sum;
  }
}

}  // namespace

template <typename scalar_t>
cudaError_t launch_run_chains_tuned(const RunTunedParams<scalar_t>& p, cudaStream_t stream) {
  with_tuned_group_shape(choose_tuned_group_shape(p.chains.dim), [&](auto group, auto chunks) {
    constexpr int G = decltype(group)::value, C = decltype(chunks)::value;
    using Geometry = GroupGeometry<G>;
    const auto blocks = static_cast<unsigned>((p.chains.batch + Geometry::kChainsPerBlock - 1) /
                                              Geometry::kChainsPerBlock);
    run_chains_tuned_kernel<scalar_t, G, C>
        <<<blocks, Geometry::kThreads, dense_shared_bytes(p.chains, Geometry::kChainsPerBlock),
           stream>>>(p);
  });
  return cudaGetLastError();
}

template cudaError_t launch_run_chains_tuned<float>(const RunTunedParams<float>&, cudaStream_t);
template cudaError_t launch_run_chains_tuned<double>(const RunTunedParams<double>&, cudaStream_t);

}  // namespace fused_hmc
