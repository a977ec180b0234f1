// The sample and warmup ops' arguments (ops/schema.cpp declares and documents them, once), read by
// name from the dispatcher's boxed stack under each op's registered schema, and checked once for
// every backend (chain_ops.cpp runs them).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../math/targets/target.h"
#include "target_registry.h"

namespace fused_hmc {

// A boxed call's arguments by their schema names. A name the schema lacks is a bug here, not the
// caller's: an internal error.
class OpArguments {
 public:
  OpArguments(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

  at::Tensor tensor(const char* name) const { return at(name).toTensor(); }
  std::optional<at::Tensor> optional_tensor(const char* name) const;
  std::vector<at::Tensor> tensors(const char* name) const { return at(name).toTensorVector(); }
  int64_t integer(const char* name) const { return at(name).toInt(); }
  std::vector<int64_t> integers(const char* name) const { return at(name).toIntVector(); }
  double real(const char* name) const { return at(name).toDouble(); }
  std::vector<double> reals(const char* name) const { return at(name).toDoubleVector(); }
  bool flag(const char* name) const { return at(name).toBool(); }
  std::string text(const char* name) const { return std::string(at(name).toStringRef()); }
  size_t size() const { return schema_.arguments().size(); }

 private:
  const c10::IValue& at(const char* name) const;

  const c10::FunctionSchema& schema_;
  const c10::IValue* first_;  // the first argument on the stack
};

// What both ops take: the chains, the target, the stream, the trajectory and the statistics.
struct ChainRequest {
  at::Tensor q;
  const TargetEntry* target;
  std::vector<at::Tensor> target_tensors;
  std::vector<double> target_scalars;
  at::Tensor step_size, inv_mass;
  double jitter;
  int64_t num_leapfrog_steps, seed, chain_offset, first_transition, num_transitions;
  double trajectory_length;  // 0: num_leapfrog_steps steps; else jittered, capped by them
  std::vector<at::Tensor> statistics;  // math/stats/chain_statistics.def's, in its order
  std::optional<at::Tensor> chees;

  // inv_mass [G, d, d]: the Cholesky factors of a dense inverse mass (math/hmc/dense_mass.h).
  bool dense_mass() const { return inv_mass.dim() == 3; }
};

struct SampleRequest {
  ChainRequest chains;
  int64_t thin, kept_before;
  std::optional<at::Tensor> samples;
  at::Tensor mean, m2;
  std::optional<at::Tensor> trajectory_record;  // [B, 3 d + 2] float64, with chees
};

struct WarmupRequest {
  ChainRequest chains;
  at::Tensor dual_averaging, window_mean, window_m2;
  int64_t warmup_start, num_warmup;
  std::vector<int64_t> windows;  // (init_buffer, base_window, term_buffer), or empty: Stan's
  double target_accept;
  bool adapt_step_size, adapt_mass_matrix;
  bool gradient_mass_estimate;  // windows [2, B, ...]: the draws' moments, then the gradients'
  bool harmonic_acceptance;     // a pooled step size's statistic (pooled_acceptance.h)
};

// The requests of a call, checked (ValueError / TypeError naming the argument). Values that would
// need a device sync to inspect (positive step sizes and inverse masses, a positive definite
// precision) are the caller's preconditions; the Python driver checks them once.
SampleRequest sample_request(const OpArguments& args);
WarmupRequest warmup_request(const OpArguments& args);

// The warm-up's length, windows ([] for Stan's, or [init_buffer, base_window, term_buffer]) and
// target acceptance, as the warmup op and the pooled_update op take them; and the windows they mean.
void check_warmup_schedule(int64_t num_warmup, const std::vector<int64_t>& windows,
                           double target_accept);
WarmupWindows warmup_windows_of(int64_t num_warmup, const std::vector<int64_t>& windows);

// The target's tensors and scalars as plain views (of a checked request).
TargetTensors target_tensor_views(const ChainRequest& r);

}  // namespace fused_hmc
