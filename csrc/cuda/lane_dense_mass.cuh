// A dense mass matrix on a lane group (lane_group.cuh): the Mass policy of math/hmc/transition.h
// for a chain whose coordinates are spread over GROUP threads, and the window's co-moment update,
// both computing math/hmc/dense_mass.h's bits. A product needs every coordinate, so each thread writes
// its coordinates to the chain's float64 scratch row in global memory, the group meets at a
// barrier (a warp's lanes: __syncwarp over the chain's lanes; a block's: __syncthreads), and each
// thread forms its own coordinates' results with the CPU's operations in the CPU's order:
//   velocity  work_k = sum_{i >= k} L_ik p_i (in order of i), then out_i = sum_{k <= i} L_ik
//             work_k;
//   momentum  back substitution for L^-T z by rows of L from the last, one barrier per row: each
//             thread updates its own coordinates below the row and publishes the next one's;
//   moments   Welford co-moments, row j of m2 (and its mirror, column j) by coordinate j's thread.
// A missing chain's threads (all of its group alike) skip it all, barriers included.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../math/chain_params.h"
#include "../math/fp/rounding.h"
#include "../math/limits.h"
#include "lane_group.cuh"

namespace fused_hmc {

// f(c, e, j) for each of the thread's coordinates j = chunk_start(c) + e below dim (compile-time
// chunk indices, so the registers stay registers).
template <int GROUP, int CHUNKS, class F>
__device__ __forceinline__ void each_own_coordinate(GroupSeat seat, int dim, F&& f) {
#pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    const int j0 = seat.chunk_start(c, GROUP);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (j0 + e < dim) f(c, e, j0 + e);
    }
  }
}

// The floats of a chain's dense-mass scratch row: math/chain_params.h's ChainBatch::dense_scratch.
constexpr int64_t dense_scratch_width(int64_t dim) { return 2 * dim; }

// The Mass policy: the unit mass's coefficients (coordinate targets' forces, the dimension) plus
// the chain's factor L [dim, dim] (row-major, lower triangle read) and scratch [2 dim] float64.
template <class Target, int GROUP, int CHUNKS>
struct LaneDenseMass : CoordinateCoefficients<Target, CHUNKS, true> {
  using scalar_t = typename Target::Scalar;
  using Row = Chunks<scalar_t, CHUNKS>;
  static constexpr bool kDense = true;
  const scalar_t* factor = nullptr;
  double* scratch = nullptr;  // null in a missing chain
  GroupSeat seat{};

  __device__ void load(const Target& target, int64_t dim, const scalar_t* factor_, double* scratch_,
                       GroupSeat seat_) {
    CoordinateCoefficients<Target, CHUNKS, true>::template load<GROUP>(target, dim, nullptr, seat_);
    factor = factor_;
    scratch = seat_.live ? scratch_ : nullptr;
    seat = seat_;
  }

  // p <- L^-T p (dense_mass.h's solve_upper_transposed).
  __device__ void momentum_row(Row& p) const {
    if (scratch == nullptr) return;
    const int d = this->dim;
    double own[CHUNKS][4];
    group_sync<GROUP>();  // every reader of the scratch is done with it
    each_own_coordinate<GROUP, CHUNKS>(seat, d, [&](int c, int e, int j) {
      own[c][e] = static_cast<double>(p.v[c][e]);
      if (j == d - 1) scratch[j] = own[c][e];
    });
    for (int i = d - 1; i >= 0; --i) {
      group_sync<GROUP>();  // row i's right-hand side is published
      const double pi = div_rn(scratch[i], static_cast<double>(factor[int64_t{i} * d + i]));
      each_own_coordinate<GROUP, CHUNKS>(seat, d, [&](int c, int e, int j) {
        if (j == i) {
          own[c][e] = pi;
        } else if (j < i) {
          own[c][e] = fma_any(-static_cast<double>(factor[int64_t{i} * d + j]), pi, own[c][e]);
          if (j == i - 1) scratch[j] = own[c][e];
        }
      });
    }
    each_own_coordinate<GROUP, CHUNKS>(seat, d, [&](int c, int e, int) {
      p.v[c][e] = static_cast<scalar_t>(own[c][e]);
    });
  }

  // C p = L (L^T p) (dense_mass.h's factor_product); zeros past the row's end.
  __device__ Row velocity_row(const Row& p) const {
    Row out{};
    if (scratch == nullptr) return out;
    const int d = this->dim;
    double* const a = scratch;
    double* const b = scratch + d;
    group_sync<GROUP>();
    each_own_coordinate<GROUP, CHUNKS>(seat, d, [&](int c, int e, int j) {
      a[j] = static_cast<double>(p.v[c][e]);
    });
    group_sync<GROUP>();
    each_own_coordinate<GROUP, CHUNKS>(seat, d, [&](int, int, int k) {
      double w = 0.0;
      for (int i = k; i < d; ++i) {
        w = fma_any(static_cast<double>(factor[int64_t{i} * d + k]), a[i], w);
      }
      b[k] = w;
    });
    group_sync<GROUP>();
    each_own_coordinate<GROUP, CHUNKS>(seat, d, [&](int c, int e, int i) {
      const scalar_t* row = factor + int64_t{i} * d;
      double sum = 0.0;
      for (int k = 0; k <= i; ++k) sum = fma_any(static_cast<double>(row[k]), b[k], sum);
      out.v[c][e] = static_cast<scalar_t>(sum);
    });
    return out;
  }

  // C (p1 + p0) from p0 and the end momentum before its flip (p1 = -p_end), as DenseMass forms it.
  __device__ Row kinetic_row(const Row& p0, const Row& p_end) const {
    Row sum{};
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) sum.v[c][e] = add_rn(-p_end.v[c][e], p0.v[c][e]);
    }
    return velocity_row(sum);
  }
};

// Folds the chain's draw x into its window's mean [dim] and co-moments m2 [dim, dim] (global
// memory) as dense_mass.h's comoment_update does; scratch: the chain's [dim] float64.
template <int GROUP, int CHUNKS, typename scalar_t>
__device__ void group_comoment_update(GroupSeat seat, int dim, double* mean, double* m2,
                                      const scalar_t (&x)[CHUNKS][4], double inv_count,
                                      double* scratch) {
  if (!seat.live) return;
  double before[CHUNKS][4];
  group_sync<GROUP>();  // every reader of the scratch is done with it
  each_own_coordinate<GROUP, CHUNKS>(seat, dim, [&](int c, int e, int j) {
    const double xj = static_cast<double>(x[c][e]);
    before[c][e] = sub_rn(xj, mean[j]);
    mean[j] = fma_any(before[c][e], inv_count, mean[j]);
    scratch[j] = sub_rn(xj, mean[j]);
  });
  group_sync<GROUP>();
  each_own_coordinate<GROUP, CHUNKS>(seat, dim, [&](int c, int e, int j) {
    double* row = m2 + int64_t{j} * dim;
    for (int k = 0; k <= j; ++k) {
      row[k] = fma_any(before[c][e], scratch[k], row[k]);
      if (k < j) m2[int64_t{k} * dim + j] = row[k];
    }
  });
}

// The shapes a dense mass is compiled for: those of dims up to kMaxDenseMassDim (one chunk a
// thread in at most a warp; a users' kPosition target, compiled for one dim, on its own lanes).
template <class Target, int GROUP, int CHUNKS>
constexpr bool kDenseMassShape = Target::kForce == TargetForce::kPosition
                                     ? Target::kFixedDim <= kMaxDenseMassDim
                                     : CHUNKS == 1 && GROUP <= kWarp;

// A chain kernel's Mass policy: the dense one, or the register inverse mass (UNIT: the identity).
template <bool DENSE, class Target, int GROUP, int CHUNKS, bool UNIT = false>
using LaneMass = std::conditional_t<DENSE, LaneDenseMass<Target, GROUP, CHUNKS>,
                                    CoordinateCoefficients<Target, CHUNKS, UNIT>>;

// Loads chain `chain`'s mass, group g's of the batch: its inverse mass row (none for the unit
// mass) or its dense factor and the chain's scratch row.
template <int GROUP, class Mass, class Target, typename scalar_t>
__device__ __forceinline__ void load_chain_mass(Mass& mass, const Target& target,
                                                const ChainBatch<scalar_t>& c, int64_t g,
                                                int64_t chain, GroupSeat seat) {
  if constexpr (kDenseMass<Mass>) {
    mass.load(target, c.dim, c.inv_mass + g * c.dim * c.dim,
              c.dense_scratch + chain * dense_scratch_width(c.dim), seat);
  } else {
    mass.template load<GROUP>(target, c.dim, Mass::kUnit ? nullptr : c.inv_mass + g * c.dim, seat);
  }
}

}  // namespace fused_hmc
