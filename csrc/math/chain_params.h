// What the sample and warmup ops hand a target's chain launchers (CPU, CUDA, and users' compiled modules): plain
// structs of pointers and sizes, torch-free and identical in every build, so a launcher compiled in
// another library reads them as the main library wrote them (ops/target_registry.h). The target
// itself is not here: each launcher builds its Target from the op's TargetTensors (target.h).
#pragma once

#include <cstdint>

#include "adaptation/adaptation_windows.h"
#include "fp/host_device.h"
#include "adaptation/dual_averaging.h"
#include "adaptation/trajectory_adaptation.h"
#include "rng/noise_streams.h"
#include "stats/chain_statistics.h"

namespace fused_hmc {

// Bumped whenever a struct below changes, so a stale compiled user module is refused.
constexpr int kChainParamsVersion = 9;

// Rows can be read 16 bytes at a time when every row starts 16-byte aligned.
inline bool rows_vectorizable(const void* base, int64_t dim, int64_t itemsize) {
  return dim % 4 == 0 && reinterpret_cast<uintptr_t>(base) % 16 == 0 && (dim * itemsize) % 16 == 0;
}

// The chains of a call: state q [B, d] (contiguous, read and written), step_size [G] float64 and
// inv_mass [G, d] (G = 1: shared by all chains, or B; with dense_mass [G, d, d], each group's
// Cholesky factor L of M^-1 = L L^T: math/hmc/dense_mass.h, and on CUDA each chain's float64
// scratch row dense_scratch [B, 2 d], cuda/lane_dense_mass.cuh), the jitter, the leapfrog
// steps (num_steps, or trajectory_steps of trajectory_length capped by num_steps), the philox
// stream (chain b is stream chain chain_offset + b) and the transitions [first_transition,
// + num_transitions);
// `statistics` accumulates each chain's statistics (math/stats/chain_statistics.def) over every
// transition.
template <typename scalar_t>
struct ChainBatch {
  scalar_t* q;
  double* step_size;
  scalar_t* inv_mass;
  bool dense_mass;
  double* dense_scratch;  // CUDA with a dense mass; else null
  int64_t groups;
  double jitter;
  int num_steps;
  double trajectory_length;
  ChainStatisticsArrays statistics;
  PhiloxStream stream;
  int64_t batch, dim, chain_offset, first_transition, num_transitions;
  bool vectorized;  // rows of q 16-byte aligned
  int sm_count;     // the CUDA device's multiprocessors (its launches' block size); CPU: 0
};

// Where a long run's kept draws go: samples[b, k, :] (any strides), or nowhere (null).
template <typename scalar_t>
struct DrawSink {
  scalar_t* samples;
  int64_t chain_stride, draw_stride, dim_stride;
  bool vectorized;  // unit dim stride and every row 16-byte aligned
};

// What sampling accumulates besides the state and the chain statistics: kept draws and their
// float64 Welford moments.
template <typename scalar_t>
struct RunOutputs {
  DrawSink<scalar_t> sink;
  double* mean;              // [B, d] Welford mean, read and written
  double* m2;                // [B, d] Welford sum of squared deviations, read and written
  int64_t thin, kept_before;
};

// A sampling call that serves a ChEES warm-up pooled outside the kernel (the chains of several
// processes, fused_hmc/sampling/pooled_ranks.py): its transitions run with the trajectory length
// chees->trajectory_length, read on the device (no host sync), instead of
// chains.trajectory_length; and each chain's last transition of the call is written to row b of
// rows [B, trajectory_record_width(d)] (trajectory_adaptation.h's layout). Both null, or both
// given with a non-null chains.inv_mass.
struct TrajectoryRecording {
  const ChEESState* chees;
  double* rows;
};

template <typename scalar_t>
struct SamplingParams {
  ChainBatch<scalar_t> chains;
  RunOutputs<scalar_t> out;
  TrajectoryRecording recording;
};

// Warm-up's adaptation state; the scratch arrays serve the pooled (G = 1) CUDA kernel only.
template <typename scalar_t>
struct WarmupParams {
  ChainBatch<scalar_t> chains;
  WarmupWindows windows;
  int64_t warmup_start;
  double target_accept;
  bool adapt_step_size, adapt_mass_matrix;
  // A pooled step size's statistic: the chains' harmonic mean acceptance, divergent transitions
  // left out, instead of their mean (math/adaptation/pooled_acceptance.h).
  bool harmonic_acceptance;
  // The inverse mass from the draws and their gradients (math/hmc/gradient_mass.h; CPU only): the
  // windows then hold the gradients' moments after the draws', [2, B, ...].
  bool gradient_estimate;
  DualAveraging* dual_averaging;  // [G]
  double* window_mean;            // [B, d]
  double* window_m2;              // [B, d], or [B, d, d] (the co-moments) with a dense mass
  double* tile_accept;            // [2, 2, tiles]: each tile's sums of the acceptance terms x, w
  double* tile_moments;           // [tiles, d]: each tile's per-coordinate window sums
  double* log_variance_sum;       // [d]: the chains' summed log window variances
  // ChEES (null: the trajectory is not adapted) and its pooled CUDA kernel's scratch.
  ChEESState* chees;
  double* chees_rows;             // [3, B, d]: x0, x1, velocity of every chain
  double* chees_chains;           // [3, tiles * chains per tile]: weight, jitter, weighted term
  double* chees_tiles;            // [tiles, 2 d + 2]: column sums of x0 and omega x1, sum of omega,
                                  // sum of the weighted terms, per tile
  double* chees_means;            // [2, d]: m0, m1
  // The pooled CUDA kernel's carried forces (carries_force targets; else null): f [B, d], u [B].
  scalar_t* carried_force;
};

// Whether a warm-up pools its chains (one step size and inverse mass adapted from every chain's
// statistics): a shared adaptation state (G = 1) over several chains, or ChEES's, pooled by nature.
// A lone chain with G = 1 runs the per-chain warm-up, so that its warm-up is the one it has in any
// batch (a rank's one chain of a per-chain warm-up over several processes); pooling one chain's
// statistics is that chain's own adaptation, up to the pooled estimates' rounding.
template <typename scalar_t>
FHMC_HD bool pools_chains(const WarmupParams<scalar_t>& p) {
  return p.chains.groups == 1 && (p.chains.batch > 1 || p.chees != nullptr);
}

}  // namespace fused_hmc
