// Host-side argument checking and parsing shared by the CPU and CUDA implementations.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <optional>
#include <tuple>

namespace fused_hmc {

enum class NoiseMode { kPhilox, kTorch, kGiven };

// The ops have no autograd formula: an input that requires grad (while grad mode is on) would give
// outputs that require grad and carry none.
void check_not_differentiated(const at::Tensor& t, const char* name);

// "philox", "torch" or "given"; anything else raises ValueError naming `noise`.
NoiseMode parse_noise_mode(c10::string_view noise);

// The transition op's noise arguments: "given" needs momentum and uniform (check_noise_inputs) and
// no generator, seed or transition; the drawn modes take neither tensor, and check_stream_selection.
void check_transition_noise(const at::Tensor& q, NoiseMode mode,
                            const std::optional<at::Tensor>& momentum,
                            const std::optional<at::Tensor>& uniform, std::optional<int64_t> seed,
                            int64_t transition, bool has_generator);

// q [B, d] float32/float64 (any strides), mu [d] of q's dtype and device, step_size finite > 0,
// 1 <= num_leapfrog_steps <= INT32_MAX; q and mu not requiring grad while grad mode is on (the ops
// are not differentiable). Raises a ValueError/TypeError naming the argument.
void check_transition_inputs(const at::Tensor& q, const at::Tensor& mu, double step_size,
                             int64_t num_leapfrog_steps);

// momentum [B, d] of q's dtype, uniform [B] float32 or float64 (torch.rand(B) in either default
// dtype; the accept test promotes as the reference's does), both on q's device.
void check_noise_inputs(const at::Tensor& q, const at::Tensor& momentum, const at::Tensor& uniform);

// An explicit seed keys the philox stream; a generator reservation only covers transition 0; seed=
// and generator= exclude each other.
void check_stream_selection(NoiseMode mode, std::optional<int64_t> seed, int64_t transition,
                            bool has_generator);

// The transition op's noise outputs when trace=False: [0] of q's dtype, and [0] float32.
at::Tensor untraced_momentum(const at::Tensor& q);
at::Tensor untraced_uniform(const at::Tensor& q);

// The transition op's outputs: q_new, accepted, and the momentum and uniform used (traced), or
// untraced_momentum and untraced_uniform.
using TransitionOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// A backend's two paths of the transition op: given noise (q, mu, momentum, uniform, step_size,
// num_leapfrog_steps) -> (q_new, accepted), and drawn noise (q, mu, step_size,
// num_leapfrog_steps, mode, generator, seed, transition, trace) -> its outputs (the noise may be
// undefined when not traced).
using GivenTransition = std::tuple<at::Tensor, at::Tensor> (*)(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, double, int64_t);
using DrawnTransition = TransitionOutputs (*)(const at::Tensor&, const at::Tensor&, double, int64_t,
                                              NoiseMode, const std::optional<at::Generator>&,
                                              std::optional<int64_t>, int64_t, bool);

// The transition op (ops/schema.cpp) over a backend's two paths, the same for every backend: the
// arguments checked, then the given or the drawn path, and the noise outputs as trace asks.
template <GivenTransition given, DrawnTransition drawn>
TransitionOutputs transition_op(const at::Tensor& q, const at::Tensor& mu, double step_size,
                                int64_t num_leapfrog_steps, c10::string_view noise,
                                const std::optional<at::Generator>& generator,
                                std::optional<int64_t> seed, int64_t transition,
                                const std::optional<at::Tensor>& momentum,
                                const std::optional<at::Tensor>& uniform, bool trace) {
  check_transition_inputs(q, mu, step_size, num_leapfrog_steps);
  const NoiseMode mode = parse_noise_mode(noise);
  check_transition_noise(q, mode, momentum, uniform, seed, transition, generator.has_value());
  if (mode == NoiseMode::kGiven) {
    auto [q_new, accepted] =
        given(q, mu, *momentum, *uniform, step_size, num_leapfrog_steps);
    if (!trace) return {q_new, accepted, untraced_momentum(q), untraced_uniform(q)};
    // fresh tensors: the schema's outputs alias no input
    return {q_new, accepted, momentum->clone(at::MemoryFormat::Contiguous), uniform->clone()};
  }
  auto [q_new, accepted, drawn_momentum, drawn_uniform] =
      drawn(q, mu, step_size, num_leapfrog_steps, mode, generator, seed, transition, trace);
  if (!trace) return {q_new, accepted, untraced_momentum(q), untraced_uniform(q)};
  return {q_new, accepted, drawn_momentum, drawn_uniform};
}

// Limits of the CUDA kernel's launch shapes. These checks live in this g++-compiled file so every
// error is raised from host code built like the rest of the extension.
void check_dim_supported(const at::Tensor& q, int64_t max_dim, const char* backend);
// counters [N, 4] int32 (read as uint32) for the raw philox4x32 op.
void check_philox_counters(const at::Tensor& counters);

// A CUDA device index the per-device tables can hold.
void check_device_index(int device, int limit);

// One launch covers at most 2^31 - 1 blocks, and a block holds at least one chain.
void check_batch_launchable(const at::Tensor& q);

// A state buffer of the chains: exactly `shape` and `dtype`, on q's device, contiguous, and, with
// vector_rows (buffers the kernels move in 16-byte vectors: Welford moments), 16-byte aligned.
void check_chain_buffer(const at::Tensor& q, const at::Tensor& t, const char* name,
                        at::IntArrayRef shape, at::ScalarType dtype, bool vector_rows = false);

}  // namespace fused_hmc
