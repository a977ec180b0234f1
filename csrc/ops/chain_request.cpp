#include "chain_request.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "../check_message.h"
#include "../math/chain_params.h"
#include "../math/limits.h"
#include "../transition_request.h"

namespace fused_hmc {

OpArguments::OpArguments(const c10::OperatorHandle& op, const torch::jit::Stack& stack)
    : schema_(op.schema()), first_(stack.data() + stack.size() - op.schema().arguments().size()) {}

const c10::IValue& OpArguments::at(const char* name) const {
  const std::optional<int> index = schema_.argumentIndexWithName(name);
  TORCH_INTERNAL_ASSERT(index.has_value(), schema_.name(), " has no argument ", name);
  return first_[*index];
}

std::optional<at::Tensor> OpArguments::optional_tensor(const char* name) const {
  const c10::IValue& v = at(name);
  if (v.isNone()) return std::nullopt;
  return v.toTensor();
}

namespace {

const TargetEntry& find_target_or_raise(const std::string& name) {
  const TargetEntry* entry = find_target(name.c_str());
  FHMC_CHECK_VALUE(entry != nullptr, "unknown target \"", name, "\"; the known targets are ",
                   registered_target_names());
  return *entry;
}

ChainRequest chain_request(const OpArguments& a) {
  return {a.tensor("q"),
          &find_target_or_raise(a.text("target")),
          a.tensors("target_tensors"),
          a.reals("target_scalars"),
          a.tensor("step_size"),
          a.tensor("inv_mass"),
          a.real("jitter"),
          a.integer("num_leapfrog_steps"),
          a.integer("seed"),
          a.integer("chain_offset"),
          a.integer("first_transition"),
          a.integer("num_transitions"),
          a.real("trajectory_length"),
          a.tensors("statistics"),
          a.optional_tensor("chees")};
}

void check_target_tensors(const ChainRequest& r) {
  const TargetEntry& t = *r.target;
  const at::Tensor& q = r.q;
  const int64_t dim = q.size(1);
  FHMC_CHECK_VALUE(t.version == kChainParamsVersion, "target \"", t.name,
                   "\" was compiled against another version of fused_hmc's headers (",
                   t.version, ", this library ", kChainParamsVersion, "); rebuild it");
  FHMC_CHECK_VALUE(t.fixed_dim == 0 || dim == t.fixed_dim, "target \"", t.name,
                   "\" was compiled for dim ", t.fixed_dim, ", but q has dim ", dim);
  FHMC_CHECK_VALUE(t.max_dim == 0 || dim <= t.max_dim, "target \"", t.name,
                   "\" supports dim <= ", t.max_dim, ", got dim ", dim);
  const int64_t count = static_cast<int64_t>(r.target_tensors.size());
  FHMC_CHECK_VALUE(count <= kMaxTargetTensors && r.target_scalars.size() <= kMaxTargetScalars,
                   "a target takes at most ", kMaxTargetTensors, " tensors and ",
                   kMaxTargetScalars, " scalars, got ", count, " and ",
                   static_cast<int64_t>(r.target_scalars.size()));
  if (t.tensor_count >= 0) {
    FHMC_CHECK_VALUE(count == t.tensor_count, "target \"", t.name, "\" takes ", t.tensor_count,
                     " target_tensors, got ", count);
  }
  for (int64_t i = 0; i < count; ++i) {
    const at::Tensor& x = r.target_tensors[i];
    const std::string name = t.tensor_count >= 0 ? std::string(t.tensor_names[i])
                                                 : "target_tensors[" + std::to_string(i) + "]";
    FHMC_CHECK_VALUE(x.device() == q.device(), name, " must be on q's device ", q.device(),
                     ", got ", x.device());
    FHMC_CHECK_VALUE(x.is_contiguous(), name, " must be contiguous");
    check_not_differentiated(x, name.c_str());
    FHMC_CHECK_VALUE(x.dim() <= kMaxTensorRank, name, " has more than ", kMaxTensorRank,
                     " dimensions");
    if (t.tensor_count < 0) {
      FHMC_CHECK_TYPE(x.scalar_type() == q.scalar_type() || x.scalar_type() == at::kLong, name,
                      " must have q's dtype ", q.scalar_type(), " or be int64, got ",
                      x.scalar_type());
      continue;
    }
    FHMC_CHECK_TYPE(x.scalar_type() == q.scalar_type(), name, " must have q's dtype ",
                    q.scalar_type(), ", got ", x.scalar_type());
    const bool square = t.tensor_ranks[i] == 2;
    FHMC_CHECK_VALUE(square ? (x.dim() == 2 && x.size(0) == dim && x.size(1) == dim)
                            : (x.dim() == 1 && x.size(0) == dim),
                     name, " of the ", t.name, " target must have shape [", dim,
                     square ? ", " + std::to_string(dim) : std::string(), "], got ", x.sizes());
  }
}

// statistics: one [B] tensor per line of math/stats/chain_statistics.def, in its order and dtype.
void check_statistics(const ChainRequest& r) {
  static const char* const kNames[] = {
#define FHMC_CHAIN_STATISTIC(name, type, value, description) #name,
#include "../math/stats/chain_statistics.def"
#undef FHMC_CHAIN_STATISTIC
  };
  static const at::ScalarType kTypes[] = {
#define FHMC_CHAIN_STATISTIC(name, type, value, description) \
  std::is_same_v<type, double> ? at::kDouble : at::kLong,
#include "../math/stats/chain_statistics.def"
#undef FHMC_CHAIN_STATISTIC
  };
  std::string names;
  for (int i = 0; i < kChainStatisticCount; ++i) names += (i ? ", " : "") + std::string(kNames[i]);
  const int64_t batch = r.q.size(0);
  FHMC_CHECK_VALUE(static_cast<int64_t>(r.statistics.size()) == kChainStatisticCount,
                   "statistics must hold ", static_cast<int64_t>(kChainStatisticCount),
                   " tensors of shape [", batch, "], the chain statistics ", names,
                   " in that order; got ", static_cast<int64_t>(r.statistics.size()));
  for (int i = 0; i < kChainStatisticCount; ++i) {
    const std::string name =
        "statistics[" + std::to_string(i) + "] (" + std::string(kNames[i]) + ")";
    check_chain_buffer(r.q, r.statistics[i], name.c_str(), {batch}, kTypes[i]);
    check_not_differentiated(r.statistics[i], name.c_str());
  }
}

void check_chain_request(const ChainRequest& r, bool warmup) {
  const at::Tensor& q = r.q;
  FHMC_CHECK_VALUE(q.dim() == 2, "q must be a 2-D tensor [batch, dim], got shape ", q.sizes());
  FHMC_CHECK_TYPE(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble,
                  "q must be float32 or float64, got ", q.scalar_type());
  FHMC_CHECK_VALUE(q.size(1) >= 1, "q must have dim >= 1, got shape ", q.sizes());
  FHMC_CHECK_VALUE(q.is_contiguous(), "q (the chain state, updated in place) must be contiguous");
  check_not_differentiated(q, "q");
  FHMC_CHECK_VALUE(r.num_leapfrog_steps >= 1 && r.num_leapfrog_steps <= kMaxLeapfrogSteps,
                   "num_leapfrog_steps must be in [1, 2^31 - 1], got ", r.num_leapfrog_steps);
  FHMC_CHECK_VALUE(r.chain_offset >= 0, "chain_offset must be >= 0, got ", r.chain_offset);
  FHMC_CHECK_VALUE(r.first_transition >= 0, "first_transition must be >= 0, got ",
                   r.first_transition);
  FHMC_CHECK_VALUE(r.num_transitions >= 0, "num_transitions must be >= 0, got ",
                   r.num_transitions);
  FHMC_CHECK_VALUE(r.num_transitions <= std::numeric_limits<int64_t>::max() - r.first_transition,
                   "first_transition + num_transitions overflows int64");
  check_target_tensors(r);
  const int64_t batch = q.size(0), dim = q.size(1);
  FHMC_CHECK_VALUE(
      r.step_size.dim() == 1 && (r.step_size.size(0) == 1 || r.step_size.size(0) == batch),
      "step_size must have shape [1] (shared) or [", batch, "] (one per chain), got ",
      r.step_size.sizes());
  const int64_t groups = r.step_size.size(0);
  check_chain_buffer(q, r.step_size, "step_size", {groups}, at::kDouble);
  if (r.inv_mass.numel() == 0 && !warmup) {  // the unit mass
    FHMC_CHECK_TYPE(r.inv_mass.scalar_type() == q.scalar_type(), "inv_mass must have q's dtype ",
                    q.scalar_type(), ", got ", r.inv_mass.scalar_type());
  } else if (r.dense_mass()) {
    FHMC_CHECK_VALUE(dim <= kMaxDenseMassDim, "a dense inv_mass [G, d, d] supports d <= ",
                     kMaxDenseMassDim, ", got d = ", dim, "; pass a diagonal inv_mass [G, d]");
    check_chain_buffer(q, r.inv_mass, "inv_mass (dense: each group's Cholesky factor L)",
                       {groups, dim, dim}, q.scalar_type());
  } else {
    FHMC_CHECK_VALUE(r.inv_mass.numel() > 0 || !warmup,
                     "warm-up adapts inv_mass in place: pass it as [", groups, ", ", dim,
                     "] (or [", groups, ", ", dim, ", ", dim, "] dense), not empty");
    FHMC_CHECK_VALUE(r.inv_mass.dim() == 2, "inv_mass must have shape [", groups, ", ", dim,
                     "] (diagonal) or [", groups, ", ", dim, ", ", dim,
                     "] (dense: each group's Cholesky factor), got ", r.inv_mass.sizes());
    check_chain_buffer(q, r.inv_mass, "inv_mass", {groups, dim}, q.scalar_type());
  }
  check_not_differentiated(r.step_size, "step_size");
  check_not_differentiated(r.inv_mass, "inv_mass");
  FHMC_CHECK_VALUE(std::isfinite(r.jitter) && r.jitter >= 0 && r.jitter < 1,
                   "jitter must be in [0, 1), got ", r.jitter);
  FHMC_CHECK_VALUE(std::isfinite(r.trajectory_length) && r.trajectory_length >= 0,
                   "trajectory_length must be finite and >= 0 (0: num_leapfrog_steps steps), got ",
                   r.trajectory_length);
  check_statistics(r);
  if (r.chees) check_chain_buffer(q, *r.chees, "chees", {8}, at::kDouble);
}

}  // namespace

SampleRequest sample_request(const OpArguments& a) {
  SampleRequest r{chain_request(a),        a.integer("thin"),       a.integer("kept_before"),
                  a.optional_tensor("samples"), a.tensor("mean"), a.tensor("m2"),
                  a.optional_tensor("trajectory_record")};
  const ChainRequest& c = r.chains;
  check_chain_request(c, false);
  const at::Tensor& q = c.q;
  const int64_t batch = q.size(0), dim = q.size(1);
  FHMC_CHECK_VALUE(r.thin >= 1, "thin must be >= 1, got ", r.thin);
  FHMC_CHECK_VALUE(r.kept_before >= 0, "kept_before must be >= 0, got ", r.kept_before);
  const int64_t kept =
      (c.first_transition + c.num_transitions) / r.thin - c.first_transition / r.thin;
  if (r.samples && r.samples->numel() > 0) {
    const at::Tensor& s = *r.samples;
    FHMC_CHECK_VALUE(s.dim() == 3 && s.size(0) == batch && s.size(1) == kept && s.size(2) == dim,
                     "samples must be None, empty, or have shape [", batch, ", ", kept, ", ", dim,
                     "] (chains, draws kept by this call, dim), got ", s.sizes());
    FHMC_CHECK_TYPE(s.scalar_type() == q.scalar_type(), "samples must have q's dtype ",
                    q.scalar_type(), ", got ", s.scalar_type());
    FHMC_CHECK_VALUE(s.device() == q.device(), "samples must be on q's device ", q.device(),
                     ", got ", s.device());
  }
  check_chain_buffer(q, r.mean, "mean", {batch, dim}, at::kDouble, true);
  check_chain_buffer(q, r.m2, "m2", {batch, dim}, at::kDouble, true);
  FHMC_CHECK_VALUE(c.chees.has_value() == r.trajectory_record.has_value(),
                   "sampling with chees records for a ChEES warm-up pooled outside the op: pass "
                   "chees and trajectory_record together, got ",
                   c.chees ? "chees" : "trajectory_record", " alone");
  if (c.chees) {
    FHMC_CHECK_VALUE(c.trajectory_length == 0.0,
                     "sampling with chees runs with its trajectory length chees[0]: "
                     "trajectory_length must be 0, got ", c.trajectory_length);
    check_chain_buffer(q, *r.trajectory_record, "trajectory_record",
                       {batch, trajectory_record_width(dim)}, at::kDouble);
  }
  return r;
}

WarmupRequest warmup_request(const OpArguments& a) {
  WarmupRequest r{chain_request(a),          a.tensor("dual_averaging"),
                  a.tensor("window_mean"),   a.tensor("window_m2"),
                  a.integer("warmup_start"), a.integer("num_warmup"),
                  a.integers("windows"),     a.real("target_accept"),
                  a.flag("adapt_step_size"), a.flag("adapt_mass_matrix"),
                  a.flag("gradient_mass_estimate"), a.flag("harmonic_acceptance")};
  const ChainRequest& c = r.chains;
  check_chain_request(c, true);
  const at::Tensor& q = c.q;
  FHMC_CHECK_VALUE(r.warmup_start >= 0, "warmup_start must be >= 0, got ", r.warmup_start);
  check_warmup_schedule(r.num_warmup, r.windows, r.target_accept);
  FHMC_CHECK_VALUE(c.first_transition >= r.warmup_start &&
                       c.first_transition - r.warmup_start <= r.num_warmup - c.num_transitions,
                   "warm-up transitions [", c.first_transition, ", ", c.first_transition, " + ",
                   c.num_transitions, ") must lie in the warm-up [", r.warmup_start, ", ",
                   r.warmup_start, " + ", r.num_warmup, ")");
  const int64_t batch = q.size(0), dim = q.size(1);
  check_chain_buffer(q, r.dual_averaging, "dual_averaging", {c.step_size.size(0), 3},
                     at::kDouble);
  // with gradient_mass_estimate the gradients' moments follow the draws'
  std::vector<int64_t> mean_shape{batch, dim}, m2_shape{batch, dim};
  if (c.dense_mass()) m2_shape.push_back(dim);
  if (r.gradient_mass_estimate) {
    mean_shape.insert(mean_shape.begin(), 2);
    m2_shape.insert(m2_shape.begin(), 2);
  }
  check_chain_buffer(q, r.window_mean, "window_mean", mean_shape, at::kDouble, true);
  check_chain_buffer(q, r.window_m2, "window_m2", m2_shape, at::kDouble, true);
  // chees with step_size [B]: one trajectory length from every chain, each chain's own step size
  // and inverse mass (the CPU build's lock-step per-chain warm-up, cpu/warmup_chains.h).
  FHMC_CHECK_VALUE(!c.chees || c.step_size.size(0) == 1 || !q.is_cuda(),
                   "chees with per-chain step sizes (step_size [B]) runs on the CPU only for now: "
                   "on CUDA, chees adapts with the pooled warm-up (step_size [1]), got ",
                   c.step_size.sizes());
  return r;
}

void check_warmup_schedule(int64_t num_warmup, const std::vector<int64_t>& windows,
                           double target_accept) {
  FHMC_CHECK_VALUE(num_warmup >= 0 && num_warmup <= kMaxWarmupLength,
                   "num_warmup must be in [0, 2^40], got ", num_warmup);
  FHMC_CHECK_VALUE(windows.empty() || windows.size() == 3,
                   "windows must be [] (Stan's) or [init_buffer, base_window, term_buffer], got ",
                   static_cast<int64_t>(windows.size()), " values");
  if (windows.size() == 3) {
    const int64_t init = windows[0], base = windows[1], term = windows[2];
    FHMC_CHECK_VALUE(init >= 0 && term >= 0 && base >= 1 && init <= kMaxWarmupLength &&
                         term <= kMaxWarmupLength && base <= kMaxWarmupLength,
                     "warm-up windows need init_buffer, term_buffer >= 0 and base_window >= 1 "
                     "(all <= 2^40), got init_buffer ", init, ", base_window ", base,
                     ", term_buffer ", term);
  }
  FHMC_CHECK_VALUE(std::isfinite(target_accept) && target_accept > 0 && target_accept < 1,
                   "target_accept must be in (0, 1), got ", target_accept);
}

WarmupWindows warmup_windows_of(int64_t num_warmup, const std::vector<int64_t>& windows) {
  return windows.empty() ? warmup_windows(num_warmup)
                         : warmup_windows(num_warmup, windows[0], windows[1], windows[2]);
}

TargetTensors target_tensor_views(const ChainRequest& r) {
  TargetTensors v{};
  v.count = static_cast<int>(r.target_tensors.size());
  for (int i = 0; i < v.count; ++i) {
    const at::Tensor& t = r.target_tensors[i];
    v.data[i] = t.data_ptr();
    v.numel[i] = t.numel();
    v.rank[i] = static_cast<int>(t.dim());
    for (int k = 0; k < t.dim(); ++k) v.shape[i][k] = t.size(k);
  }
  v.scalar_count = static_cast<int>(r.target_scalars.size());
  for (int i = 0; i < v.scalar_count; ++i) v.scalars[i] = r.target_scalars[i];
  return v;
}

}  // namespace fused_hmc
