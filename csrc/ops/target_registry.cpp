#include "target_registry.h"

#include <map>
#include <mutex>
#include <string>

namespace fused_hmc {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, TargetEntry> entries;
};

Registry& registry() {
  static Registry r;  // built on first use, so static registrations of any TU may come first
  return r;
}

template <typename scalar_t>
void merge(ChainLaunchers<scalar_t>& into, const ChainLaunchers<scalar_t>& from) {
  if (from.sample_cpu) into.sample_cpu = from.sample_cpu;
  if (from.warmup_cpu) into.warmup_cpu = from.warmup_cpu;
  if (from.sample_cuda) into.sample_cuda = from.sample_cuda;
  if (from.warmup_cuda) into.warmup_cuda = from.warmup_cuda;
  if (from.cuda_pooled_tile_chains) into.cuda_pooled_tile_chains = from.cuda_pooled_tile_chains;
  if (from.sample_dense_cuda) into.sample_dense_cuda = from.sample_dense_cuda;
  if (from.warmup_dense_cuda) into.warmup_dense_cuda = from.warmup_dense_cuda;
}

}  // namespace

void register_target(const TargetEntry& entry) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  auto [it, fresh] = r.entries.emplace(entry.name, entry);
  if (fresh) return;
  TargetEntry& known = it->second;
  const bool same_spec = known.tensor_count == entry.tensor_count &&
                         known.fixed_dim == entry.fixed_dim && known.max_dim == entry.max_dim &&
                         known.carries_force == entry.carries_force;
  if (!same_spec) {  // a different target under a known name replaces it
    known = entry;
    return;
  }
  merge(known.f32, entry.f32);
  merge(known.f64, entry.f64);
}

const TargetEntry* find_target(const char* name) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.entries.find(name);
  return it == r.entries.end() ? nullptr : &it->second;
}

std::string registered_target_names() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  std::string names;
  for (const auto& [name, entry] : r.entries) names += (names.empty() ? "\"" : ", \"") + name + "\"";
  return names;
}

}  // namespace fused_hmc
