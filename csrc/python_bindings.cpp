// Direct Python entry points into the dispatcher for the per-transition hot path.
//
// torch.ops.fused_hmc.* parses each call's arguments against the schema in Python and costs
// ~15 us, more than the kernel. These bindings make the same dispatcher call through pybind11's
// converters (~1-2 us). The registered ops stay the interface for torch.compile and fake tensors.
// Also the registration of compiled targets (fused_hmc.CppTarget) and, for the tests, the host
// build of math/fp/portable_math.h's exp and log, fp/host_transcendentals.h's Box-Muller
// functions, user models' float exp, log and log1p (fp/float_transcendentals.h, alone and in
// packs of chains: cpu/simd/pack_functions.h) and math/rng/stream_key.h's philox_key_from_seed. Test-only too: the torch-stream
// emulation (math/rng/noise_streams.h's launch geometry, value -> (subsequence, block, lane) map
// and 32-bit split test; torch_stream.h's randn_like layout); the CUDA chain kernels' block
// choice (cuda/group_shape.h, host logic); the CPU chains' threads (at::parallel_for as compiled
// here, cpu/chain_blocks.h's scheduler).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/extension.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/chain_blocks.h"
#include "cpu/simd/pack_functions.h"
#include "cuda/group_shape.h"
#include "math/chain_params.h"
#include "math/fp/host_transcendentals.h"
#include "math/fp/portable_math.h"
#include "math/limits.h"
#include "math/rng/noise_streams.h"
#include "math/rng/stream_key.h"
#include "ops/chain_request.h"
#include "ops/target_registry.h"
#include "torch_stream.h"

namespace fused_hmc {
void add_dense_mass_bindings(pybind11::module_& m);  // dense_mass_bindings.cpp
}  // namespace fused_hmc

namespace {

using at::Tensor;

using Quad = std::tuple<Tensor, Tensor, Tensor, Tensor>;

const auto& transition_op() {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("fused_hmc::transition", "")
          .typed<Quad(const Tensor&, const Tensor&, double, int64_t, c10::string_view,
                      const std::optional<at::Generator>&, std::optional<int64_t>, int64_t,
                      const std::optional<Tensor>&, const std::optional<Tensor>&, bool)>();
  return op;
}

// Raises the operator's errors as the Python exceptions torch would (ValueError, TypeError,
// RuntimeError) through pybind11's own exception types, independent of torch's translators, and
// its warnings (TORCH_WARN) as Python warnings, as torch.ops would; a warning that the filters turn
// into an error is raised as that error.
template <typename Call>
auto translating_errors(Call&& call) {
  try {
    torch::PyWarningHandler warnings;  // issues the buffered warnings when it goes out of scope
    try {
      return call();
    } catch (...) {
      warnings.set_in_exception();
      throw;
    }
  } catch (python_error& e) {
    e.restore();
    throw pybind11::error_already_set();
  } catch (const c10::ValueError& e) {
    throw pybind11::value_error(e.what_without_backtrace());
  } catch (const c10::TypeError& e) {
    throw pybind11::type_error(e.what_without_backtrace());
  } catch (const c10::Error& e) {
    throw std::runtime_error(e.what_without_backtrace());
  }
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("transition",
        [](const Tensor& q, const Tensor& mu, double step_size, int64_t num_steps,
           const std::string& noise, std::optional<at::Generator> generator,
           std::optional<int64_t> seed, int64_t transition, std::optional<Tensor> momentum,
           std::optional<Tensor> uniform, bool trace) {
          return translating_errors([&] {
            return transition_op().call(q, mu, step_size, num_steps, noise, generator, seed,
                                        transition, momentum, uniform, trace);
          });
        });
  // A compiled target's registry entry (a PyCapsule named "fused_hmc.TargetEntry" holding a
  // const TargetEntry* of the module that made it, which stays loaded), so the chain ops find it.
  m.def("register_target", [](pybind11::capsule entry) {
    if (std::string(entry.name() ? entry.name() : "") != "fused_hmc.TargetEntry") {
      throw pybind11::type_error("register_target takes a fused_hmc.TargetEntry capsule");
    }
    fused_hmc::register_target(*entry.get_pointer<const fused_hmc::TargetEntry>());
  });
  m.def("target_names", &fused_hmc::registered_target_names);
  m.def("chain_params_version", [] { return fused_hmc::kChainParamsVersion; });
  fused_hmc::add_dense_mass_bindings(m);
  // The slow window [start, end] holding warm-up iteration i ((-1, -1): none), for the Python
  // driver of a warm-up pooled over several processes (math/adaptation/adaptation_windows.h).
  m.def("slow_window_of", [](int64_t num_warmup, std::vector<int64_t> windows, int64_t i) {
    fused_hmc::check_warmup_schedule(num_warmup, windows, 0.5);
    const fused_hmc::SlowWindow w =
        fused_hmc::slow_window_of(fused_hmc::warmup_windows_of(num_warmup, windows), i);
    return std::pair<int64_t, int64_t>{w.start, w.end};
  });
  // ChEES's weight floor (math/adaptation/trajectory_adaptation.h), for the same pooled-warm-up
  // driver.
  m.attr("chees_weight_floor") = fused_hmc::kChEESWeightFloor;
  m.def("limits", [] {
    return std::map<std::string, int64_t>{
        {"kMaxDenseDim", fused_hmc::kMaxDenseDim},
        {"kMaxDenseMassDim", fused_hmc::kMaxDenseMassDim},
        {"kMaxCudaDim", fused_hmc::kMaxCudaDim},
        {"kMaxWarmupLength", fused_hmc::kMaxWarmupLength},
        {"kMaxLeapfrogSteps", fused_hmc::kMaxLeapfrogSteps},
        {"kInitBuffer", fused_hmc::kInitBuffer},
        {"kBaseWindow", fused_hmc::kBaseWindow},
        {"kTermBuffer", fused_hmc::kTermBuffer},
        {"kMinWarmupForWindows", fused_hmc::kMinWarmupForWindows},
        {"kMinDualAveragingRun", fused_hmc::kMinDualAveragingRun},
        {"kMinScaledWindow", fused_hmc::kMinScaledWindow}};
  });
  // (threads, chains) of a CUDA chain kernel's block (cuda/group_shape.h: host logic only).
  m.def("chain_block", [](int group, int64_t batch, int sm_count) {
    const fused_hmc::ChainBlock b = fused_hmc::chain_block(group, batch, sm_count);
    return std::make_pair(b.threads, b.chains);
  });
  m.def("portable_exp", [](double x) { return fused_hmc::portable_exp(x); });
  m.def("portable_log", [](double x) { return fused_hmc::portable_log(x); });
  m.def("portable_exp_f32", [](float x) { return fused_hmc::portable_exp(x); });
  m.def("portable_log_f32", [](float x) { return fused_hmc::portable_log(x); });
  // x [N] float32 -> the host build's Box-Muller functions (math/fp/host_transcendentals.h):
  // libdevice_logf(x) [N], and angle_sincos(x) as [N, 2] (sin, cos).
  m.def("libdevice_logf", [](const Tensor& x) {
    const Tensor in = x.to(at::kFloat).contiguous();
    Tensor out = at::empty_like(in);
    const float* a = in.data_ptr<float>();
    float* r = out.data_ptr<float>();
    for (int64_t i = 0; i < in.numel(); ++i) r[i] = fused_hmc::libdevice_logf(a[i]);
    return out;
  });
  m.def("angle_sincos", [](const Tensor& x) {
    const Tensor in = x.to(at::kFloat).contiguous();
    Tensor out = at::empty({in.numel(), 2}, in.options());
    const float* a = in.data_ptr<float>();
    float* r = out.data_ptr<float>();
    for (int64_t i = 0; i < in.numel(); ++i) fused_hmc::angle_sincos(a[i], r[2 * i], r[2 * i + 1]);
    return out;
  });
  // x [N] float32 -> [6, N]: the exp, log, log1p of a float of user models whose chains run in
  // vector lanes (math/fp/float_transcendentals.h), then the same of packs of kLanesOf<float>.
  m.def("target_float_functions", [](const Tensor& x) {
    namespace ft = fused_hmc::float_transcendentals;
    using Pack = fused_hmc::simd::Pack<float, fused_hmc::simd::kLanesOf<float>>;
    const Tensor in = x.to(at::kFloat).contiguous();
    const int64_t n = in.numel();
    Tensor out = at::empty({6, n}, in.options());
    const float* a = in.data_ptr<float>();
    float* r = out.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      r[i] = ft::exp(a[i]);
      r[n + i] = ft::log(a[i]);
      r[2 * n + i] = ft::log1p(a[i]);
    }
    for (int64_t i0 = 0; i0 < n; i0 += Pack::kLanes) {
      Pack p;
      for (int l = 0; l < Pack::kLanes; ++l) p.set(l, a[std::min(i0 + l, n - 1)]);
      const Pack values[3] = {fused_hmc::simd::exp(p), fused_hmc::simd::log(p),
                              fused_hmc::simd::log1p(p)};
      for (int f = 0; f < 3; ++f) {
        for (int l = 0; l < Pack::kLanes && i0 + l < n; ++l) r[(3 + f) * n + i0 + l] = values[f][l];
      }
    }
    return out;
  });
  m.def("philox_key_from_seed",
        [](uint64_t seed) { return fused_hmc::philox_key_from_seed(seed); });
  m.def("torch_draw_geometry", [](uint64_t n, uint32_t unroll, uint64_t sms, uint64_t per_sm) {
    const auto g = fused_hmc::torch_draw_geometry(n, unroll, sms, per_sm);
    return std::make_tuple(g.threads, g.increment);
  });
  // indices [N] int64 -> [N, 3] int64: (subsequence, counter block, lane) of each value.
  m.def("torch_draw_sites", [](const Tensor& indices, uint64_t offset, uint64_t threads,
                               uint32_t unroll) {
    const Tensor idx = indices.to(at::kLong).contiguous();
    Tensor out = at::empty({idx.numel(), 3}, idx.options());
    const fused_hmc::TorchDrawLayout layout{0, offset, threads, unroll};
    for (int64_t k = 0; k < idx.numel(); ++k) {
      const auto s = fused_hmc::torch_draw_site(layout, idx.data_ptr<int64_t>()[k]);
      int64_t* row = out.data_ptr<int64_t>() + 3 * k;
      row[0] = static_cast<int64_t>(s.subsequence), row[1] = static_cast<int64_t>(s.block);
      row[2] = s.lane;
    }
    return out;
  });
  m.def("torch_draw_block", [](uint64_t seed, uint64_t offset, uint64_t threads, uint32_t unroll,
                               uint64_t i) {
    int lane;
    const auto b = fused_hmc::torch_draw_block({seed, offset, threads, unroll}, i, lane);
    return std::make_tuple(b.x, b.y, b.z, b.w, lane);
  });
  m.def("torch_draw_is_split", &fused_hmc::torch_draw_is_split);
  // The intra-op thread that ran each index of at::parallel_for(0, n, grain 1): all 0 when the
  // extension was compiled without OpenMP (fused_hmc/_cpu_flags.py), as it once was.
  m.def("parallel_thread_ids", [](int64_t n) {
    std::vector<int64_t> ids(static_cast<size_t>(std::max<int64_t>(n, 0)), -1);
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ids[i] = at::get_thread_num();
    });
    return ids;
  });
  // How many times cpu/chain_blocks.h's scheduler ran each of `batch` chains in blocks of `block`.
  m.def("chain_block_visits", [](int64_t batch, int64_t block) {
    std::vector<std::atomic<int64_t>> visits(static_cast<size_t>(std::max<int64_t>(batch, 0)));
    fused_hmc::chains_cpu::for_chain_blocks(batch, block, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) visits[b].fetch_add(1);
    });
    std::vector<int64_t> out;
    for (const auto& v : visits) out.push_back(v.load());
    return out;
  });
  m.def("randn_like_strides", [](const Tensor& q) {
    const auto l = fused_hmc::randn_like_layout(q);
    return std::make_tuple(l.chain_stride, l.dim_stride);
  });
}
