// The built-in targets' CPU launchers (csrc/targets.def), registered at load.
#include "../math/targets/builtin.h"
#include "../ops/target_registry.h"
#include "chains_cpu.h"

namespace fused_hmc {
namespace {

template <template <typename> class Target>
bool register_cpu() {
  TargetEntry entry = target_entry<Target>();
  entry.f32.sample_cpu = &sample_cpu<Target<float>>;
  entry.f32.warmup_cpu = &warmup_cpu<Target<float>>;
  entry.f64.sample_cpu = &sample_cpu<Target<double>>;
  entry.f64.warmup_cpu = &warmup_cpu<Target<double>>;
  register_target(entry);
  return true;
}

#define FHMC_TARGET(T) const bool registered_##T = register_cpu<T>();
#include "../targets.def"
#undef FHMC_TARGET

}  // namespace
}  // namespace fused_hmc
