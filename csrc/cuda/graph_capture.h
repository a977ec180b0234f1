// Host side (g++): which CUDA ops may be captured in a CUDA graph.
//
// A captured launch replays its arguments as they were at capture. Ops keyed by an explicit seed
// (transition with seed=, and run) take their transition indices as host integers, so every
// replay would redraw the same momenta and uniforms: not a Markov chain. They refuse capture. Generator-seeded modes (noise="philox" without seed=, and
// noise="torch") read the generator's seed and offset through philox_cuda_state, which a replay
// refills and advances, so they are replay-safe.
#pragma once

#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>

namespace fused_hmc {

// Raises RuntimeError when the current CUDA stream (of the current device) is capturing.
inline void check_not_capturing_seeded(const char* op) {
  if (c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None) return;
  throw c10::Error({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                   std::string(op) +
                       " is keyed by an explicit seed and cannot be captured in a CUDA graph: its "
                       "transition indices are fixed at capture, so every replay would redraw the "
                       "same numbers. Run it eagerly, or capture a generator-seeded call "
                       "(noise=\"philox\" without seed=, or noise=\"torch\"), which advances on "
                       "replay.");
}

}  // namespace fused_hmc
