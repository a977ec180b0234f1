// Loads and stores of one chunk (4 consecutive coordinates of a row), 16-byte wide when the row
// layout allows, element by element (masked at the row's end) otherwise.
#pragma once

#include <cstdint>

namespace fused_hmc {

template <typename scalar_t>
__device__ __forceinline__ void load_chunk(const scalar_t* row, int j0, int dim,
                                           bool vectorized, scalar_t (&v)[4]) {
  if (vectorized) {
    if constexpr (sizeof(scalar_t) == 4) {
      const float4 t = *reinterpret_cast<const float4*>(row + j0);
      v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
      const double2 a = reinterpret_cast<const double2*>(row + j0)[0];
      const double2 b = reinterpret_cast<const double2*>(row + j0)[1];
      v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) v[e] = j0 + e < dim ? row[j0 + e] : scalar_t(0);
}

template <typename scalar_t>
__device__ __forceinline__ void store_chunk(scalar_t* row, int j0, int dim, bool vectorized,
                                            const scalar_t (&v)[4]) {
  if (vectorized) {
    if constexpr (sizeof(scalar_t) == 4) {
      *reinterpret_cast<float4*>(row + j0) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      reinterpret_cast<double2*>(row + j0)[0] = make_double2(v[0], v[1]);
      reinterpret_cast<double2*>(row + j0)[1] = make_double2(v[2], v[3]);
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (j0 + e < dim) row[j0 + e] = v[e];
  }
}

}  // namespace fused_hmc
