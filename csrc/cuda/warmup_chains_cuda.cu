// CUDA kernel of warmup_chains with one adaptation state per chain (G = B): the tuned transition
// (tuned_group.cuh) followed by the chain's own window Welford moments, dual averaging and
// inverse-mass updates (math/adaptation_windows.h, dual_averaging.h, mass_matrix.h), all in
// registers for the whole call. Lane 0 of a chain's group owns its dual averaging; each thread owns
// its coordinates' inverse mass and window moments. The CPU build's warm-up, operation for operation.
#include "../math/adaptation_windows.h"
#include "../math/dual_averaging.h"
#include "../math/mass_matrix.h"
#include "../math/welford.h"
#include "chain_group.cuh"
#include "keep_draws.cuh"
#include "launch_params.h"
#include "tuned_group.cuh"

namespace fused_hmc {
namespace {

template <typename scalar_t, int GROUP, int CHUNKS>
__global__ void __launch_bounds__(GroupGeometry<GROUP>::kThreads, 1)
    warmup_per_chain_kernel(const WarmupParams<scalar_t> p) {
  const TunedChainsParams<scalar_t>& c = p.chains;
  const int slot = threadIdx.x / GROUP;
  const int64_t chain =
      static_cast<int64_t>(blockIdx.x) * GroupGeometry<GROUP>::kChainsPerBlock + slot;
  const GroupSeat seat{static_cast<int>(threadIdx.x % GROUP), chain < c.batch};
  const int64_t row = seat.live ? chain : 0;
  scalar_t* x_shared = tuned_shared_memory<scalar_t>() + slot * c.dim;

  scalar_t q[CHUNKS][4];
  load_group_row<scalar_t, GROUP, CHUNKS>(c.q + row * c.dim, seat, c.dim, c.vectorized,
                                          scalar_t(0), q);
  CoordinateCoefficients<scalar_t, CHUNKS> coefficients;
  coefficients.template load<GROUP>(c.target, c.inv_mass + row * c.dim, seat);
  auto& inv_mass = coefficients.inv_mass;
  double mean[CHUNKS][4], m2[CHUNKS][4];
  if (seat.live) {
    transfer_moments<GROUP, CHUNKS, false>(p.window_mean, p.window_m2, chain, seat.lane, c.dim,
                                           mean, m2);
  }
  const bool owner = seat.lane == 0 && seat.live;
  double step_size = c.step_size[row];
  DualAveraging averaging = owner ? p.dual_averaging[chain] : DualAveraging{0.0, 0.0, 0.0};
  const uint64_t stream_chain = static_cast<uint64_t>(c.chain_offset + chain);

  for (int64_t t = c.first_transition; t < c.first_transition + c.num_transitions; ++t) {
    step_size = group_broadcast<GROUP>(step_size);
    const auto decision = group_tuned_transition<scalar_t, GROUP, CHUNKS>(
        c.stream, stream_chain, static_cast<uint64_t>(t), seat, c.target, q, coefficients, step_size,
        c.jitter, c.num_steps, x_shared);
    if (!seat.live) continue;
    const int64_t i = t - p.warmup_start;
    const SlowWindow window = slow_window_of(p.windows, i);
    const bool in_window = p.adapt_mass_matrix && window.start >= 0;
    const double draws = static_cast<double>(i - window.start + 1);
    if (in_window) {
      const double inv_count = 1.0 / draws;
#pragma unroll
      for (int k = 0; k < CHUNKS; ++k) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          welford_update(mean[k][e], m2[k][e], static_cast<double>(q[k][e]), inv_count);
        }
      }
    }
    if (p.adapt_step_size && owner) {
      const int64_t n = i - dual_averaging_start(p.windows, i, p.adapt_mass_matrix) + 1;
      step_size = dual_averaging_update(averaging, n, static_cast<double>(decision.accept_prob),
                                        p.target_accept, step_size);
      if (i == p.windows.num_warmup - 1) step_size = dual_averaging_final(averaging);
    }
    if (in_window && window.end == i) {
#pragma unroll
      for (int k = 0; k < CHUNKS; ++k) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          inv_mass[k][e] = adapted_inverse_mass(m2[k][e] / (draws - 1.0), draws, inv_mass[k][e]);
          mean[k][e] = 0.0;
          m2[k][e] = 0.0;
        }
      }
      coefficients.update_scale();
    }
  }

  if (!seat.live) return;
  store_group_row<scalar_t, GROUP, CHUNKS>(c.q + chain * c.dim, seat, c.dim, c.vectorized, q);
  store_group_row<scalar_t, GROUP, CHUNKS>(c.inv_mass + chain * c.dim, seat, c.dim, false,
                                           inv_mass);
  transfer_moments<GROUP, CHUNKS, true>(p.window_mean, p.window_m2, chain, seat.lane, c.dim, mean,
                                        m2);
  if (owner) {
    c.step_size[chain] = step_size;
    p.dual_averaging[chain] = averaging;
  }
}

}  // namespace

template <typename scalar_t>
cudaError_t launch_warmup_per_chain(const WarmupParams<scalar_t>& p, cudaStream_t stream) {
  with_tuned_group_shape(choose_tuned_group_shape(p.chains.dim), [&](auto group, auto chunks) {
    constexpr int G = decltype(group)::value, C = decltype(chunks)::value;
    using Geometry = GroupGeometry<G>;
    const auto blocks = static_cast<unsigned>((p.chains.batch + Geometry::kChainsPerBlock - 1) /
                                              Geometry::kChainsPerBlock);
    warmup_per_chain_kernel<scalar_t, G, C>
        <<<blocks, Geometry::kThreads, dense_shared_bytes(p.chains, Geometry::kChainsPerBlock),
           stream>>>(p);
  });
  return cudaGetLastError();
}

template cudaError_t launch_warmup_per_chain<float>(const WarmupParams<float>&, cudaStream_t);
template cudaError_t launch_warmup_per_chain<double>(const WarmupParams<double>&, cudaStream_t);

}  // namespace fused_hmc
