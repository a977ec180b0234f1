// Where each momentum and uniform of a transition comes from, for the two in-kernel noise modes.
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "philox.h"
#include "transforms.h"

namespace fused_hmc {

FHMC_HD uint64_t ceil_div_u64(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// ---- Native stream: keyed by (seed, global chain id, transition index, draw index). -------------
// Chain c is Philox subsequence c. Transition t of a chain owns blocks
// base_block + t * blocks_per_transition + [0, blocks_per_transition): the momentum fills the first
// ceil(d / normals-per-block) blocks in element order, and word 0 of the last block is the uniform.
// Nothing depends on how many chains run, how they are batched or how transitions are chunked.
struct PhiloxStream {
  uint64_t seed;
  uint64_t base_block;             // generator offset / 4, or 0 for an explicit seed
  uint64_t blocks_per_transition;  // momentum_blocks<scalar_t>(d) + 1
};

template <typename scalar_t>
FHMC_HD uint64_t momentum_blocks(int64_t dim) {
  return ceil_div_u64(static_cast<uint64_t>(dim), NormalsPerBlock<scalar_t>::value);
}

FHMC_HD PhiloxBlock stream_block(const PhiloxStream& s, uint64_t chain, uint64_t transition,
                                 uint64_t block) {
  return philox_block(s.seed, chain, s.base_block + transition * s.blocks_per_transition + block);
}

// The momentum of coordinates j0 .. j0 + 3 (j0 a multiple of 4) of (chain, transition): one block in
// float32, two in float64. Entries past dim are left unset.
FHMC_HD void stream_chunk_momentum(const PhiloxStream& s, uint64_t chain, uint64_t transition,
                                   int64_t j0, int64_t /*dim*/, float (&out)[4]) {
  block_normals(stream_block(s, chain, transition, static_cast<uint64_t>(j0 / 4)), out);
}

FHMC_HD void stream_chunk_momentum(const PhiloxStream& s, uint64_t chain, uint64_t transition,
                                   int64_t j0, int64_t dim, double (&out)[4]) {
  double pair[2];
  block_normals(stream_block(s, chain, transition, static_cast<uint64_t>(j0 / 2)), pair);
  out[0] = pair[0], out[1] = pair[1];
  if (j0 + 2 < dim) {
    block_normals(stream_block(s, chain, transition, static_cast<uint64_t>(j0 / 2 + 1)), pair);
    out[2] = pair[0], out[3] = pair[1];
  }
}

FHMC_HD float stream_uniform(const PhiloxStream& s, uint64_t chain, uint64_t transition) {
  return torch_uniform_from_word(stream_block(s, chain, transition, s.blocks_per_transition - 1).x);
}

// ---- torch stream: the numbers torch.randn / torch.rand draw on CUDA. ---------------------------
// torch's distribution kernels (ATen/native/cuda/DistributionTemplates.h) run T = 256 * G threads,
// G = min(ceil(n / 256), SMs * maxThreadsPerSM / 256); thread `idx` is subsequence idx and each of
// its curand calls yields `unroll` values (4 for float32, 2 for float64). Value i comes from call
// it = i / (unroll T), lane (i % (unroll T)) / T of thread i % T.
struct TorchDrawLayout {
  uint64_t seed;
  uint64_t offset;   // the generator offset this draw starts at (a multiple of 4)
  uint64_t threads;  // T
  uint32_t unroll;
};

// Where value i comes from: Philox subsequence (torch's thread), counter block, and lane.
struct TorchDrawSite {
  uint64_t subsequence;
  uint64_t block;
  int lane;
};

FHMC_HD TorchDrawSite torch_draw_site(const TorchDrawLayout& l, uint64_t i) {
  if (i < l.threads) return {i, l.offset / 4, 0};  // always the case when n <= T: lane 0
  const uint64_t per_call = l.unroll * l.threads;
  const uint64_t call = i / per_call;
  const uint64_t rest = i - call * per_call;
  const uint64_t lane = rest / l.threads;
  return {rest - lane * l.threads, l.offset / 4 + call, static_cast<int>(lane)};
}

FHMC_HD PhiloxBlock torch_draw_block(const TorchDrawLayout& l, uint64_t i, int& lane) {
  const TorchDrawSite site = torch_draw_site(l, i);
  lane = site.lane;
  return philox_block(l.seed, site.subsequence, site.block);
}

// Element i of torch.randn(..) in q's dtype.
template <typename scalar_t>
FHMC_HD scalar_t torch_randn_element(const TorchDrawLayout& l, uint64_t i) {
  int lane;
  const PhiloxBlock blk = torch_draw_block(l, i, lane);
  return normal_lane(blk, lane, scalar_t(0));
}

// Element i of torch.rand(..) in float32.
FHMC_HD float torch_rand_element(const TorchDrawLayout& l, uint64_t i) {
  int lane;
  const PhiloxBlock blk = torch_draw_block(l, i, lane);
  return torch_uniform_from_word(block_word(blk, lane));
}

// Host side: the launch geometry torch's calc_execution_policy picks, and the generator increment.
struct TorchDrawGeometry {
  uint64_t threads;
  uint64_t increment;
};

inline TorchDrawGeometry torch_draw_geometry(uint64_t n, uint32_t unroll, uint64_t sm_count,
                                             uint64_t max_threads_per_sm) {
  constexpr uint64_t kBlock = 256;
  const uint64_t grid_cap = sm_count * (max_threads_per_sm / kBlock);
  uint64_t grid = ceil_div_u64(n, kBlock);
  if (grid > grid_cap) grid = grid_cap;
  const uint64_t threads = kBlock * grid;
  return {threads, 4 * ((n - 1) / (threads * unroll) + 1)};
}

// Whether torch fills a dense tensor of n values of `element_size` bytes in more than one launch:
// a TensorIterator that cannot use 32-bit indexing (numel > INT32_MAX, or 1 + its largest byte
// offset > INT32_MAX: float32 n > 2^29, float64 n > 2^28) is split into sub-iterators, each its own
// launch geometry and generator reservation, after a reservation for the whole draw. The geometry
// above models one launch only, so such draws must be made by torch itself.
inline bool torch_draw_is_split(uint64_t n, uint64_t element_size) {
  constexpr uint64_t kMax = 0x7FFFFFFFu;  // INT32_MAX
  return n > kMax || (n > 0 && 1 + (n - 1) * element_size > kMax);
}

}  // namespace fused_hmc
