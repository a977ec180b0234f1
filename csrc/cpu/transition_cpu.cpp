// CPU implementations of the fused_hmc operators, built from the same math headers as the kernels.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>
#include <tuple>

#include "../math/hmc/mass_matrix.h"
#include "../math/hmc/metropolis.h"
#include "../math/hmc/transition.h"
#include "../math/rng/noise_streams.h"
#include "../math/rng/stream_key.h"
#include "../math/targets/reference_gaussian.h"
#include "../math/targets/standard_gaussian.h"
#include "../torch_stream.h"
#include "../transition_request.h"
#include "chain_blocks.h"
#include "chains_cpu.h"
#include "serial_group.h"

namespace fused_hmc {
namespace {

using at::Tensor;

// Chains per block at least (chain_blocks.h): a transition of one chain is a few microseconds.
constexpr int64_t kChainsPerBlock = 16;

// The transition op's noise policy (math/hmc/transition.h) for given tensors (and the torch mode's
// draws, made first): the chain's momentum row, and its uniform u in its own dtype (float or
// double), under the reference's Metropolis test.
template <typename scalar_t, typename uniform_t>
struct GivenNoise {
  const scalar_t* momentum;  // [dim]
  uniform_t uniform;

  void draw_row(int64_t dim, scalar_t* z) const { std::copy(momentum, momentum + dim, z); }
  float jitter_uniform() const { return 0.0f; }
  float trajectory_uniform() const { return 0.0f; }
  void await_uniform() const {}
  bool accepts(scalar_t log_alpha) const { return metropolis_accept(uniform, log_alpha); }
};

// Another noise policy whose momentum row is also written to `trace` [dim] (null: not traced).
template <class Noise, typename scalar_t>
struct TracedNoise : Noise {
  scalar_t* trace;
  void draw_row(int64_t dim, scalar_t* z) const {
    Noise::draw_row(dim, z);
    if (trace != nullptr) std::copy(z, z + dim, trace);
  }
};

// One transition of every chain of q [B, d] (contiguous) into q_new (q's row, updated in place
// where accepted): math/hmc/transition.h's body on the serial group, with noise_of(b) chain b's
// noise policy and unit mass.
template <class Target, class NoiseOf, typename scalar_t = typename Target::Scalar>
void transition_chains(const Target& target, const Tensor& q, double step_size, int num_steps,
                       const NoiseOf& noise_of, Tensor& q_new, Tensor& accepted) {
  const int64_t batch = q.size(0), dim = q.size(1);
  const scalar_t* q_ptr = q.data_ptr<scalar_t>();
  scalar_t* out_ptr = q_new.data_ptr<scalar_t>();
  bool* acc_ptr = accepted.data_ptr<bool>();
  const Trajectory trajectory{step_size, 0.0, num_steps, 0.0};
  const auto make_arrays = [&] { return chains_cpu::TrajectoryArrays<scalar_t>(dim); };
  chains_cpu::for_chain_blocks(batch, chains_cpu::chain_block_size(batch, kChainsPerBlock),
                               make_arrays, [&](chains_cpu::TrajectoryArrays<scalar_t>& arrays,
                                                int64_t begin, int64_t end) {
    ForceCarry<scalar_t> none{nullptr, nullptr, false};
    for (int64_t b = begin; b < end; ++b) {
      scalar_t* row = out_ptr + b * dim;
      std::copy(q_ptr + b * dim, q_ptr + (b + 1) * dim, row);
      acc_ptr[b] = transition(arrays.group(), target, noise_of(b), IdentityMass{}, row, trajectory,
                              none)
                       .accepted;
    }
  });
}

// q, mu, momentum, uniform contiguous; uniform_t is float or double. ReferenceGaussian: the
// reference's rounding, so q_new is its bits.
template <typename scalar_t, typename uniform_t>
void transition_with_noise(const Tensor& q, const Tensor& mu, const Tensor& momentum,
                           const Tensor& uniform, double step_size, int num_steps, Tensor& q_new,
                           Tensor& accepted) {
  const int64_t dim = q.size(1);
  const scalar_t* p_ptr = momentum.data_ptr<scalar_t>();
  const uniform_t* u_ptr = uniform.data_ptr<uniform_t>();
  const ReferenceGaussian<scalar_t> target{mu.data_ptr<scalar_t>(), dim};
  transition_chains(target, q, step_size, num_steps, [&](int64_t b) {
    return GivenNoise<scalar_t, uniform_t>{p_ptr + b * dim, u_ptr[b]};
  }, q_new, accepted);
}

// Native philox stream on the standard target; optionally records the momentum and uniform it drew.
template <typename scalar_t>
void transition_philox(const Tensor& q, const Tensor& mu, const PhiloxStream& stream,
                       uint64_t transition, double step_size, int num_steps, Tensor& q_new,
                       Tensor& accepted, scalar_t* momentum_out, float* uniform_out) {
  const int64_t dim = q.size(1);
  const StandardGaussian<scalar_t> target{mu.data_ptr<scalar_t>(), dim};
  transition_chains(target, q, step_size, num_steps, [&](int64_t b) {
    const auto chain = static_cast<uint64_t>(b);
    if (uniform_out) uniform_out[b] = stream_uniform(stream, chain, transition);
    return TracedNoise<PhiloxNoise<scalar_t>, scalar_t>{
        {stream, chain, transition, transition_uniforms(stream, chain, transition)},
        momentum_out ? momentum_out + b * dim : nullptr};
  }, q_new, accepted);
}

std::tuple<Tensor, Tensor> allocate_outputs(const Tensor& q) {
  return {at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous)),
          at::empty({q.size(0)}, q.options().dtype(at::kBool))};
}

std::tuple<Tensor, Tensor> transition_given_cpu(const Tensor& q, const Tensor& mu,
                                                const Tensor& momentum, const Tensor& uniform,
                                                double step_size, int64_t num_leapfrog_steps) {
  auto [q_new, accepted] = allocate_outputs(q);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "transition_given_cpu", [&] {
    const auto run = [&](auto uniform_tag) {
      transition_with_noise<scalar_t, decltype(uniform_tag)>(
          q.contiguous(), mu.contiguous(), momentum.contiguous(), uniform.contiguous(), step_size,
          static_cast<int>(num_leapfrog_steps), q_new, accepted);
    };
    uniform.scalar_type() == at::kFloat ? run(float{}) : run(double{});
  });
  return {q_new, accepted};
}

// A fresh 64-bit key from the CPU generator: manual_seed controls it, each call draws a new one.
uint64_t draw_cpu_key(const std::optional<at::Generator>& generator) {
  auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(
      generator, at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return gen->random64();
}

// A drawn transition's outputs and the noise it drew, traced or not (arguments checked by
// transition_op).
TransitionOutputs transition_drawn_cpu(const Tensor& q, const Tensor& mu, double step_size,
                                       int64_t num_leapfrog_steps, NoiseMode mode,
                                       const std::optional<at::Generator>& generator,
                                       std::optional<int64_t> seed, int64_t transition, bool) {
  if (mode == NoiseMode::kTorch) {
    // The reference's draws, in its order, from the same generator; then the fused transition.
    // The traced momentum is contiguous, like every backend's (and the fake impl's).
    const ReferenceNoise noise = draw_reference_noise(q, generator);
    auto [q_new, accepted] = transition_given_cpu(q, mu, noise.momentum, noise.uniform,
                                                  step_size, num_leapfrog_steps);
    return {q_new, accepted, noise.momentum.contiguous(), noise.uniform};
  }
  auto [q_new, accepted] = allocate_outputs(q);
  Tensor momentum = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
  Tensor uniform = at::empty({q.size(0)}, q.options().dtype(at::kFloat));
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "transition_drawn_cpu", [&] {
    const PhiloxStream stream =
        seed ? seeded_stream<scalar_t>(*seed, q.size(1))
             : PhiloxStream{draw_cpu_key(generator), 0, momentum_blocks<scalar_t>(q.size(1)) + 1};
    transition_philox<scalar_t>(q.contiguous(), mu.contiguous(), stream,
                                static_cast<uint64_t>(transition), step_size,
                                static_cast<int>(num_leapfrog_steps), q_new, accepted,
                                momentum.data_ptr<scalar_t>(), uniform.data_ptr<float>());
  });
  return {q_new, accepted, momentum, uniform};
}

}  // namespace

TORCH_LIBRARY_IMPL(fused_hmc, CPU, m) {
  m.impl("transition", &transition_op<&transition_given_cpu, &transition_drawn_cpu>);
}

}  // namespace fused_hmc
