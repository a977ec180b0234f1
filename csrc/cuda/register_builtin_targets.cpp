// Registers the built-in targets' CUDA launchers (csrc/targets.def) at load; builtin_*.cu
// instantiate them (builtin_dense_*.cu those with a dense mass).
#include "../math/targets/builtin.h"
#include "../ops/target_registry.h"
#include "chain_launchers.h"

namespace fused_hmc {
namespace {

template <template <typename> class Target>
bool register_cuda() {
  TargetEntry entry = target_entry<Target>();
  set_cuda_launchers<Target<float>>(entry.f32);
  set_cuda_launchers<Target<double>>(entry.f64);
  set_cuda_dense_launchers<Target<float>>(entry.f32);
  set_cuda_dense_launchers<Target<double>>(entry.f64);
  register_target(entry);
  return true;
}

#define FHMC_TARGET(T) const bool registered_##T = register_cuda<T>();
#include "../targets.def"
#undef FHMC_TARGET

}  // namespace
}  // namespace fused_hmc
