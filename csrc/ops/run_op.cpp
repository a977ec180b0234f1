// The run op (schema.cpp), one implementation for every backend: gather and check the arguments
// once (run_request.cpp), build the launch parameters, and call the target's launcher for q's
// device and dtype (target_registry.h). CUDA specifics come through cuda_backend.h.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

#include "../check_message.h"
#include "../math/adaptation/adaptation_windows.h"
#include "../math/limits.h"
#include "../math/rng/stream_key.h"
#include "../transition_request.h"
#include "cuda_backend.h"
#include "run_request.h"
#include "target_registry.h"

namespace fused_hmc {

const CudaBackend*& cuda_backend_slot() {
  static const CudaBackend* backend = nullptr;
  return backend;
}
const CudaBackend* cuda_backend() { return cuda_backend_slot(); }
void set_cuda_backend(const CudaBackend* backend) { cuda_backend_slot() = backend; }

namespace {

using at::Tensor;
using OptionalTensor = std::optional<Tensor>;

template <typename scalar_t>
ChainBatch<scalar_t> chain_batch(const RunRequest& r) {
  ChainBatch<scalar_t> c{};
  c.q = r.q.data_ptr<scalar_t>();
  c.step_size = r.step_size.data_ptr<double>();
  c.inv_mass = r.inv_mass.numel() == 0 ? nullptr : r.inv_mass.data_ptr<scalar_t>();  // unit
  c.dense_mass = r.dense_mass();
  c.groups = r.step_size.size(0);
  c.jitter = r.jitter;
  c.num_steps = static_cast<int>(r.num_leapfrog_steps);
  c.trajectory_length = r.trajectory_length;
  c.gradient_evaluations =
      r.gradient_evaluations ? r.gradient_evaluations->data_ptr<int64_t>() : nullptr;
  c.batch = r.q.size(0);
  c.dim = r.q.size(1);
  c.stream = seeded_stream<scalar_t>(r.seed, c.dim);
  c.chain_offset = r.chain_offset;
  c.first_transition = r.first_transition;
  c.num_transitions = r.num_transitions;
  c.vectorized = rows_vectorizable(c.q, c.dim, sizeof(scalar_t));
  return c;
}

template <typename scalar_t>
RunOutputs<scalar_t> run_outputs(const RunRequest& r) {
  RunOutputs<scalar_t> out{};
  if (r.samples && r.samples->numel() > 0) {
    const Tensor& s = *r.samples;
    DrawSink<scalar_t>& sink = out.sink;
    sink.samples = s.data_ptr<scalar_t>();
    sink.chain_stride = s.stride(0);
    sink.draw_stride = s.stride(1);
    sink.dim_stride = s.stride(2);
    sink.vectorized = sink.dim_stride == 1 &&
                      rows_vectorizable(sink.samples, s.size(2), sizeof(scalar_t)) &&
                      sink.chain_stride % 4 == 0 && sink.draw_stride % 4 == 0;
  }
  out.mean = r.mean->data_ptr<double>();
  out.m2 = r.m2->data_ptr<double>();
  out.accept_count = r.accept_count->data_ptr<int64_t>();
  out.accept_prob_sum = r.accept_prob_sum->data_ptr<double>();
  out.thin = r.thin;
  out.kept_before = r.kept_before;
  return out;
}

TrajectoryRecording trajectory_recording(const RunRequest& r) {
  return {r.chees ? reinterpret_cast<const ChEESState*>(r.chees->data_ptr<double>()) : nullptr,
          r.trajectory_record ? r.trajectory_record->data_ptr<double>() : nullptr};
}

template <typename scalar_t>
WarmupParams<scalar_t> warmup_params(const RunRequest& r) {
  WarmupParams<scalar_t> p{};
  p.chains = chain_batch<scalar_t>(r);
  p.windows = warmup_windows_of(r.num_warmup, r.windows);
  p.warmup_start = r.warmup_start;
  p.target_accept = r.target_accept;
  p.adapt_step_size = r.adapt_step_size;
  p.adapt_mass_matrix = r.adapt_mass_matrix;
  p.dual_averaging = reinterpret_cast<DualAveraging*>(r.dual_averaging->data_ptr<double>());
  p.window_mean = r.window_mean->data_ptr<double>();
  p.window_m2 = r.window_m2->data_ptr<double>();
  p.chees = r.chees ? reinterpret_cast<ChEESState*>(r.chees->data_ptr<double>()) : nullptr;
  return p;
}

const char* dtype_name(at::ScalarType t) { return t == at::kFloat ? "float32" : "float64"; }

template <typename Launcher>
Launcher require(Launcher launcher, const RunRequest& r, const char* backend) {
  FHMC_CHECK_VALUE(launcher != nullptr, "target \"", r.target->name, "\" has no ", backend,
                   " kernels for ", dtype_name(r.q.scalar_type()),
                   " (it was compiled for another dtype or device)");
  return launcher;
}

template <typename scalar_t>
void launch_cpu(const RunRequest& r, const ChainLaunchers<scalar_t>& l, const TargetTensors& t) {
  if (r.warmup()) {
    require(l.warmup_cpu, r, "CPU")(t, warmup_params<scalar_t>(r));
  } else {
    require(l.sample_cpu, r, "CPU")(
        t, {chain_batch<scalar_t>(r), run_outputs<scalar_t>(r), trajectory_recording(r)});
  }
}

template <typename scalar_t>
void launch_cuda(const RunRequest& r, const ChainLaunchers<scalar_t>& l, const TargetTensors& t) {
  const CudaBackend* cuda = cuda_backend();
  FHMC_CHECK_VALUE(cuda != nullptr, "fused_hmc was built without its CUDA kernels");
  FHMC_CHECK_VALUE(!r.dense_mass(), "a dense inv_mass [G, d, d] runs on the CPU only for now; "
                   "pass a diagonal inv_mass [G, d] on CUDA, or run the chains on the CPU");
  check_dim_supported(r.q, kMaxCudaDim, "CUDA");
  check_batch_launchable(r.q);
  cuda->check_not_capturing("run");
  void* stream = cuda->current_stream();
  const int sm_count = cuda->sm_count(r.q.get_device());
  if (!r.warmup()) {
    SamplingParams<scalar_t> p{chain_batch<scalar_t>(r), run_outputs<scalar_t>(r),
                               trajectory_recording(r)};
    p.chains.sm_count = sm_count;
    cuda->check_launch(require(l.sample_cuda, r, "CUDA")(t, p, stream));
    return;
  }
  WarmupParams<scalar_t> p = warmup_params<scalar_t>(r);
  p.chains.sm_count = sm_count;
  const auto warmup = require(l.warmup_cuda, r, "CUDA");
  // the pooled kernel's scratch, no sync
  Tensor tile_accept, tile_moments, log_variance_sum, chees, carried_force;
  if (p.chains.groups == 1) {
    // Tiles of a block's chains each (a power of two; the last tile may be partly empty).
    const int64_t tile_chains = l.cuda_pooled_tile_chains(p.chains);
    const int64_t tiles = (p.chains.batch + tile_chains - 1) / tile_chains;
    const auto f64 = r.q.options().dtype(at::kDouble);
    tile_accept = at::empty({2 * tiles}, f64);
    p.tile_accept = tile_accept.data_ptr<double>();
    if (r.adapt_mass_matrix) {
      tile_moments = at::empty({tiles * p.chains.dim}, f64);
      log_variance_sum = at::empty({p.chains.dim}, f64);
      p.tile_moments = tile_moments.data_ptr<double>();
      p.log_variance_sum = log_variance_sum.data_ptr<double>();
    }
    if (p.chees != nullptr) {
      const int64_t b = p.chains.batch, d = p.chains.dim;
      const int64_t seats = tiles * tile_chains;
      chees = at::empty({3 * b * d + 3 * seats + tiles * (2 * d + 2) + 2 * d}, f64);
      p.chees_rows = chees.data_ptr<double>();
      p.chees_chains = p.chees_rows + 3 * b * d;
      p.chees_tiles = p.chees_chains + 3 * seats;
      p.chees_means = p.chees_tiles + tiles * (2 * d + 2);
    }
    if (r.target->carries_force) {
      carried_force = at::empty({p.chains.batch * (p.chains.dim + 1)}, r.q.options());
      p.carried_force = carried_force.data_ptr<scalar_t>();
    }
  }
  cuda->check_launch(warmup(t, p, stream));
}

const TargetEntry& find_target_or_raise(c10::string_view name) {
  const std::string key(name);
  const TargetEntry* entry = find_target(key.c_str());
  FHMC_CHECK_VALUE(entry != nullptr, "unknown target \"", key, "\"; the known targets are ",
                   registered_target_names());
  return *entry;
}

void run(const Tensor& q, c10::string_view target, at::TensorList target_tensors,
         at::ArrayRef<double> target_scalars, const Tensor& step_size, const Tensor& inv_mass,
         double jitter, int64_t num_leapfrog_steps, int64_t seed, int64_t chain_offset,
         int64_t first_transition, int64_t num_transitions, int64_t thin, int64_t kept_before,
         const OptionalTensor& samples, const OptionalTensor& mean, const OptionalTensor& m2,
         const OptionalTensor& accept_count, const OptionalTensor& accept_prob_sum,
         const OptionalTensor& dual_averaging, const OptionalTensor& window_mean,
         const OptionalTensor& window_m2, int64_t warmup_start, int64_t num_warmup,
         at::IntArrayRef windows, double target_accept, bool adapt_step_size,
         bool adapt_mass_matrix, double trajectory_length, const OptionalTensor& chees,
         const OptionalTensor& gradient_evaluations, const OptionalTensor& trajectory_record) {
  RunRequest r{q,
               &find_target_or_raise(target),
               target_tensors.vec(),
               target_scalars.vec(),
               step_size,
               inv_mass,
               jitter,
               num_leapfrog_steps,
               seed,
               chain_offset,
               first_transition,
               num_transitions,
               thin,
               kept_before,
               samples,
               mean,
               m2,
               accept_count,
               accept_prob_sum,
               dual_averaging,
               window_mean,
               window_m2,
               warmup_start,
               num_warmup,
               windows.vec(),
               target_accept,
               adapt_step_size,
               adapt_mass_matrix,
               trajectory_length,
               chees,
               gradient_evaluations,
               trajectory_record};
  check_run_request(r);
  if (num_transitions == 0 || q.size(0) == 0) return;
  // A recording call runs a kernel that reads an inverse mass: the unit mass as ones (same bits).
  if (r.trajectory_record && r.inv_mass.numel() == 0) {
    r.inv_mass = at::ones({r.step_size.size(0), q.size(1)}, q.options());
  }
  const c10::OptionalDeviceGuard guard(q.device());
  const TargetTensors views = target_tensor_views(r);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_hmc::run", [&] {
    const ChainLaunchers<scalar_t>& launchers = launchers_of<scalar_t>(*r.target);
    if (q.is_cuda()) {
      launch_cuda<scalar_t>(r, launchers, views);
    } else {
      launch_cpu<scalar_t>(r, launchers, views);
    }
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CPU, m) { m.impl("run", &run); }
TORCH_LIBRARY_IMPL(fused_hmc, CUDA, m) { m.impl("run", &run); }

}  // namespace fused_hmc
