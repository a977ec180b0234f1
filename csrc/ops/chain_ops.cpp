// The sample and warmup ops (schema.cpp), one boxed implementation each for every backend: read the
// arguments by their schema names and check them once (chain_request.cpp), build the launch
// parameters (math/chain_params.h), and call the target's launcher for q's device and dtype
// (target_registry.h). CUDA specifics come through cuda_backend.h.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "../check_message.h"
#include "../math/limits.h"
#include "../math/rng/stream_key.h"
#include "../transition_request.h"
#include "chain_request.h"
#include "cuda_backend.h"
#include "dense_window_end.h"
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

ChainStatisticsArrays statistics_arrays(const ChainRequest& r) {
  ChainStatisticsArrays a{};
  int i = 0;
#define FHMC_CHAIN_STATISTIC(name, type, value, description) \
  a.name = r.statistics[i++].data_ptr<type>();
#include "../math/stats/chain_statistics.def"
#undef FHMC_CHAIN_STATISTIC
  return a;
}

template <typename scalar_t>
ChainBatch<scalar_t> chain_batch(const ChainRequest& r, const Tensor& inv_mass) {
  ChainBatch<scalar_t> c{};
  c.q = r.q.data_ptr<scalar_t>();
  c.step_size = r.step_size.data_ptr<double>();
  c.inv_mass = inv_mass.numel() == 0 ? nullptr : inv_mass.data_ptr<scalar_t>();  // unit
  c.dense_mass = inv_mass.dim() == 3;  // [G, d, d]: each group's Cholesky factor
  c.groups = r.step_size.size(0);
  c.jitter = r.jitter;
  c.num_steps = static_cast<int>(r.num_leapfrog_steps);
  c.trajectory_length = r.trajectory_length;
  c.statistics = statistics_arrays(r);
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
SamplingParams<scalar_t> sampling_params(const SampleRequest& r, const Tensor& inv_mass) {
  SamplingParams<scalar_t> p{};
  p.chains = chain_batch<scalar_t>(r.chains, inv_mass);
  RunOutputs<scalar_t>& out = p.out;
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
  out.mean = r.mean.data_ptr<double>();
  out.m2 = r.m2.data_ptr<double>();
  out.thin = r.thin;
  out.kept_before = r.kept_before;
  if (r.trajectory_record) {
    p.recording = {reinterpret_cast<const ChEESState*>(r.chains.chees->data_ptr<double>()),
                   r.trajectory_record->data_ptr<double>()};
  }
  return p;
}

template <typename scalar_t>
WarmupParams<scalar_t> warmup_params(const WarmupRequest& r) {
  WarmupParams<scalar_t> p{};
  p.chains = chain_batch<scalar_t>(r.chains, r.chains.inv_mass);
  p.windows = warmup_windows_of(r.num_warmup, r.windows);
  p.warmup_start = r.warmup_start;
  p.target_accept = r.target_accept;
  p.adapt_step_size = r.adapt_step_size;
  p.adapt_mass_matrix = r.adapt_mass_matrix;
  p.gradient_estimate = r.gradient_mass_estimate;
  p.harmonic_acceptance = r.harmonic_acceptance;
  p.dual_averaging = reinterpret_cast<DualAveraging*>(r.dual_averaging.data_ptr<double>());
  p.window_mean = r.window_mean.data_ptr<double>();
  p.window_m2 = r.window_m2.data_ptr<double>();
  p.chees = r.chains.chees ? reinterpret_cast<ChEESState*>(r.chains.chees->data_ptr<double>())
                           : nullptr;
  return p;
}

const char* dtype_name(at::ScalarType t) { return t == at::kFloat ? "float32" : "float64"; }

template <typename Launcher>
Launcher require(Launcher launcher, const ChainRequest& r, const char* backend) {
  FHMC_CHECK_VALUE(launcher != nullptr, "target \"", r.target->name, "\" has no ", backend,
                   " kernels for ", dtype_name(r.q.scalar_type()),
                   " (it was compiled for another dtype or device)");
  return launcher;
}

// The CUDA backend, after the checks every CUDA launch needs; its device's multiprocessors.
const CudaBackend& cuda_for(const ChainRequest& r, const char* op, int& sm_count) {
  const CudaBackend* cuda = cuda_backend();
  FHMC_CHECK_VALUE(cuda != nullptr, "fused_hmc was built without its CUDA kernels");
  check_dim_supported(r.q, kMaxCudaDim, "CUDA");
  check_batch_launchable(r.q);
  cuda->check_not_capturing(op);
  sm_count = cuda->sm_count(r.q.get_device());
  return *cuda;
}

// A dense mass's launcher on CUDA (compiled apart: target_registry.h), and the chains' scratch
// rows (cuda/lane_dense_mass.cuh), which `scratch` keeps alive.
template <typename Launcher, typename scalar_t>
Launcher dense_launcher(Launcher launcher, const ChainRequest& r, ChainBatch<scalar_t>& c,
                        Tensor& scratch) {
  FHMC_CHECK_VALUE(launcher != nullptr, "target \"", r.target->name, "\" has no CUDA kernels "
                   "with a dense mass for ", dtype_name(r.q.scalar_type()), " (a CppTarget or "
                   "TorchModel builds them when a run asks for mass_matrix=\"dense\"); pass a "
                   "diagonal inv_mass [G, d]");
  scratch = at::empty({c.batch, 2 * c.dim}, r.q.options().dtype(at::kDouble));
  c.dense_scratch = scratch.data_ptr<double>();
  return launcher;
}

template <typename scalar_t>
void launch_sampling(const SampleRequest& r, const Tensor& inv_mass,
                     const ChainLaunchers<scalar_t>& l, const TargetTensors& t) {
  SamplingParams<scalar_t> p = sampling_params<scalar_t>(r, inv_mass);
  if (!r.chains.q.is_cuda()) {
    require(l.sample_cpu, r.chains, "CPU")(t, p);
    return;
  }
  const CudaBackend& cuda = cuda_for(r.chains, "sample", p.chains.sm_count);
  if (!p.chains.dense_mass) {
    cuda.check_launch(require(l.sample_cuda, r.chains, "CUDA")(t, p, cuda.current_stream()));
    return;
  }
  FHMC_CHECK_VALUE(!r.trajectory_record, "trajectory_record with a dense inv_mass runs on the CPU "
                   "only for now (a ChEES warm-up pooled over processes); pass a diagonal one");
  Tensor scratch;
  const auto sample = dense_launcher(l.sample_dense_cuda, r.chains, p.chains, scratch);
  cuda.check_launch(sample(t, p, cuda.current_stream()));
}

// A dense warm-up on CUDA, in parts that each end at a slow window's end or at the call's end:
// after each window the host estimates the new factors (dense_window_end.h).
template <typename scalar_t, typename Launcher>
void launch_dense_warmup(const WarmupRequest& r, WarmupParams<scalar_t> p, Launcher warmup,
                         const CudaBackend& cuda) {
  const int64_t first = p.chains.first_transition, end = first + p.chains.num_transitions;
  for (int64_t start = first, t = first; t < end; ++t) {
    const int64_t i = t - p.warmup_start;
    const bool window_end = p.adapt_mass_matrix && ends_slow_window(p.windows, i);
    if (!window_end && t != end - 1) continue;
    p.chains.first_transition = start;
    p.chains.num_transitions = t + 1 - start;
    cuda.check_launch(warmup(p, cuda.current_stream()));
    if (window_end) {
      const double draws = static_cast<double>(i - slow_window_of(p.windows, i).start + 1);
      end_dense_window(r.chains.inv_mass, r.window_mean, r.window_m2, draws, pools_chains(p));
    }
    start = t + 1;
  }
}

template <typename scalar_t>
void launch_warmup(const WarmupRequest& r, const ChainLaunchers<scalar_t>& l,
                   const TargetTensors& t) {
  WarmupParams<scalar_t> p = warmup_params<scalar_t>(r);
  if (!r.chains.q.is_cuda()) {
    require(l.warmup_cpu, r.chains, "CPU")(t, p);
    return;
  }
  const CudaBackend& cuda = cuda_for(r.chains, "warmup", p.chains.sm_count);
  FHMC_CHECK_VALUE(!r.gradient_mass_estimate, "gradient_mass_estimate runs on the CPU only for "
                   "now; estimate the mass from the draws alone on CUDA, or warm up on the CPU");
  Tensor dense_scratch;
  const auto warmup = p.chains.dense_mass
                          ? dense_launcher(l.warmup_dense_cuda, r.chains, p.chains, dense_scratch)
                          : require(l.warmup_cuda, r.chains, "CUDA");
  // the pooled kernel's scratch, no sync
  Tensor tile_accept, tile_moments, log_variance_sum, chees, carried_force;
  if (pools_chains(p)) {
    // Tiles of a block's chains each (a power of two; the last tile may be partly empty).
    const int64_t tile_chains = l.cuda_pooled_tile_chains(p.chains);
    const int64_t tiles = (p.chains.batch + tile_chains - 1) / tile_chains;
    const auto f64 = r.chains.q.options().dtype(at::kDouble);
    tile_accept = at::empty({4 * tiles}, f64);
    p.tile_accept = tile_accept.data_ptr<double>();
    if (r.adapt_mass_matrix && !p.chains.dense_mass) {
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
    if (r.chains.target->carries_force) {
      carried_force = at::empty({p.chains.batch * (p.chains.dim + 1)}, r.chains.q.options());
      p.carried_force = carried_force.data_ptr<scalar_t>();
    }
  }
  if (p.chains.dense_mass) {
    launch_dense_warmup(r, p, [&](const WarmupParams<scalar_t>& part, void* stream) {
      return warmup(t, part, stream);
    }, cuda);
    return;
  }
  cuda.check_launch(warmup(t, p, cuda.current_stream()));
}

void sample(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpArguments args(op, *stack);
  const SampleRequest r = sample_request(args);
  const Tensor& q = r.chains.q;
  if (r.chains.num_transitions > 0 && q.size(0) > 0) {
    // A recording call runs a kernel that reads an inverse mass: the unit mass as ones (same bits).
    const Tensor inv_mass = r.trajectory_record && r.chains.inv_mass.numel() == 0
                                ? at::ones({r.chains.step_size.size(0), q.size(1)}, q.options())
                                : r.chains.inv_mass;
    const c10::OptionalDeviceGuard guard(q.device());
    const TargetTensors views = target_tensor_views(r.chains);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_hmc::sample", [&] {
      launch_sampling<scalar_t>(r, inv_mass, launchers_of<scalar_t>(*r.chains.target), views);
    });
  }
  torch::jit::drop(*stack, args.size());
}

void warmup(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpArguments args(op, *stack);
  const WarmupRequest r = warmup_request(args);
  const Tensor& q = r.chains.q;
  if (r.chains.num_transitions > 0 && q.size(0) > 0) {
    const c10::OptionalDeviceGuard guard(q.device());
    const TargetTensors views = target_tensor_views(r.chains);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_hmc::warmup", [&] {
      launch_warmup<scalar_t>(r, launchers_of<scalar_t>(*r.chains.target), views);
    });
  }
  torch::jit::drop(*stack, args.size());
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CPU, m) {
  m.impl("sample", torch::CppFunction::makeFromBoxedFunction<&sample>());
  m.impl("warmup", torch::CppFunction::makeFromBoxedFunction<&warmup>());
}
TORCH_LIBRARY_IMPL(fused_hmc, CUDA, m) {
  m.impl("sample", torch::CppFunction::makeFromBoxedFunction<&sample>());
  m.impl("warmup", torch::CppFunction::makeFromBoxedFunction<&warmup>());
}

}  // namespace fused_hmc
