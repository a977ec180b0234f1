// The targets the chain ops know, by name: for each, its tensors' specification and its chain
// launchers per dtype and backend. Torch-free and plain, so a user's compiled model (another
// shared library, built from the same headers) hands the main library an entry through a
// PyCapsule (fused_hmc.CppTarget) and the chain ops launch its kernels like a built-in target's.
#pragma once

#include <cstdint>
#include <string>

#include "../math/chain_params.h"
#include "../math/targets/target.h"

namespace fused_hmc {

// Launchers of one target for one dtype; a null pointer is a backend or dtype it was not built
// for. CUDA launchers return the launch's cudaError_t (as an int) and take the cudaStream_t.
template <typename scalar_t>
struct ChainLaunchers {
  void (*sample_cpu)(const TargetTensors&, const SamplingParams<scalar_t>&);
  void (*warmup_cpu)(const TargetTensors&, const WarmupParams<scalar_t>&);
  int (*sample_cuda)(const TargetTensors&, const SamplingParams<scalar_t>&, void* stream);
  // Per chain (G = B) or pooled (G = 1, cooperative; scratch sized by its tiles of
  // cuda_pooled_tile_chains chains).
  int (*warmup_cuda)(const TargetTensors&, const WarmupParams<scalar_t>&, void* stream);
  int64_t (*cuda_pooled_tile_chains)(const ChainBatch<scalar_t>&);
  // The same with a dense mass (inv_mass [G, d, d]), compiled apart: the built-in targets' in
  // their own units, a user's module only when a run asks for one (fused_hmc.CppTarget).
  int (*sample_dense_cuda)(const TargetTensors&, const SamplingParams<scalar_t>&, void* stream);
  int (*warmup_dense_cuda)(const TargetTensors&, const WarmupParams<scalar_t>&, void* stream);
};

struct TargetEntry {
  int version;            // kChainParamsVersion of the headers it was built with
  const char* name;
  int tensor_count;       // -1: any tensors (the target checks them itself)
  const char* const* tensor_names;
  const int* tensor_ranks;  // 1: [dim], 2: [dim, dim]
  int64_t max_dim;        // 0: no limit of its own
  int64_t fixed_dim;      // 0: any dimension
  bool carries_force;     // target.h's carries_force: the pooled CUDA warm-up keeps it per chain
  ChainLaunchers<float> f32;
  ChainLaunchers<double> f64;
};

// An entry's launchers for one dtype.
template <typename scalar_t>
ChainLaunchers<scalar_t>& launchers_of(TargetEntry& e);
template <>
inline ChainLaunchers<float>& launchers_of<float>(TargetEntry& e) { return e.f32; }
template <>
inline ChainLaunchers<double>& launchers_of<double>(TargetEntry& e) { return e.f64; }
template <typename scalar_t>
const ChainLaunchers<scalar_t>& launchers_of(const TargetEntry& e) {
  return launchers_of<scalar_t>(const_cast<TargetEntry&>(e));
}

// Adds (or, by name, replaces) a target; a registered CPU and a CUDA half of one target merge.
void register_target(const TargetEntry& entry);
// The entry called `name`, or null.
const TargetEntry* find_target(const char* name);
// The registered names, comma-separated (for messages).
std::string registered_target_names();

// A target class's entry with its specification and no launchers yet.
template <template <typename> class Target>
TargetEntry target_entry() {
  using T = Target<float>;
  return {kChainParamsVersion, T::kName, T::kTensorCount, T::kTensorNames, T::kTensorRanks,
          T::kMaxDim, T::kFixedDim, carries_force<T>(), {}, {}};
}

}  // namespace fused_hmc
