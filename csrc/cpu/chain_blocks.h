// How the CPU builds hand chains to torch's intra-op threads (at::parallel_for, which honours
// torch.set_num_threads): in blocks of chains that each thread takes one at a time as it finishes
// the last, not in one even share per thread decided up front. On a machine shared with other work
// a thread the OS deschedules then holds up one block, not half of the chains. Chains are
// independent, so which thread runs a chain changes no bit.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace fused_hmc {
namespace chains_cpu {

// About this many blocks per thread: enough to even out a descheduled thread, few enough that
// taking a block costs nothing next to running it.
constexpr int64_t kBlocksPerThread = 8;

// Chains per block: `at_least` (chains a block needs to be worth taking), else an even share of
// kBlocksPerThread blocks per thread.
inline int64_t chain_block_size(int64_t batch, int64_t at_least) {
  const int64_t share = batch / (kBlocksPerThread * std::max<int64_t>(1, at::get_num_threads()));
  return std::max<int64_t>({int64_t{1}, at_least, share});
}

// Runs body(worker, begin, end) over the chains [0, batch) in blocks of `block`; each thread makes
// its worker (its scratch arrays) once with make_worker().
template <class MakeWorker, class Body>
void for_chain_blocks(int64_t batch, int64_t block, const MakeWorker& make_worker,
                      const Body& body) {
  const int64_t blocks = (batch + block - 1) / block;
  if (blocks <= 0) return;
  std::atomic<int64_t> next{0};
  const int64_t threads = std::min<int64_t>(blocks, at::get_num_threads());
  at::parallel_for(0, threads, 1, [&](int64_t, int64_t) {
    auto worker = make_worker();
    for (int64_t k = next.fetch_add(1); k < blocks; k = next.fetch_add(1)) {
      body(worker, k * block, std::min(batch, (k + 1) * block));
    }
  });
}

// The same without a worker.
template <class Body>
void for_chain_blocks(int64_t batch, int64_t block, const Body& body) {
  for_chain_blocks(batch, block, [] { return 0; },
                   [&](int, int64_t begin, int64_t end) { body(begin, end); });
}

}  // namespace chains_cpu
}  // namespace fused_hmc
