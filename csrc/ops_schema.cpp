// The operator schemas, declared once; each backend file registers only its implementations.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

TORCH_LIBRARY(fused_hmc, m) {
  // One transition with caller-supplied noise: momentum [B, d], uniform [B].
  m.def(
      "hmc_step_noise(Tensor q, Tensor mu, Tensor momentum, Tensor uniform, float step_size, "
      "int num_leapfrog_steps) -> (Tensor q_new, Tensor accepted)");
  // One transition drawing its own noise: rng = "philox" (native stream) or "torch" (the numbers
  // torch.randn_like(q) then torch.rand(B) would draw). `seed` keys the philox stream explicitly
  // instead of the generator; `transition` then selects the transition index within it.
  m.def(
      "hmc_step(Tensor q, Tensor mu, float step_size, int num_leapfrog_steps, str rng, "
      "Generator? generator=None, int? seed=None, int transition=0) -> (Tensor q_new, Tensor accepted)",
      {at::Tag::nondeterministic_seeded});
  // hmc_step that also returns the momentum [B, d] and uniform [B] it drew, from the same kernel.
  m.def(
      "hmc_step_traced(Tensor q, Tensor mu, float step_size, int num_leapfrog_steps, str rng, "
      "Generator? generator=None, int? seed=None, int transition=0) -> "
      "(Tensor q_new, Tensor accepted, Tensor momentum, Tensor uniform)",
      {at::Tag::nondeterministic_seeded});
  // Raw Philox4x32-10 blocks: counters [N, 4] int32 (read as uint32) under a 64-bit key.
  m.def("philox4x32(Tensor counters, int key) -> Tensor");
  // Many transitions of every chain, in place, under the native philox stream keyed by `seed`:
  // chain b is global chain chain_offset + b, and transitions first_transition ..
  // first_transition + num_transitions - 1 each equal hmc_step(..., "philox", seed=seed,
  // transition=t). Transition t is kept when (t + 1) % thin == 0: written to samples[b, k, :]
  // (k counts this call's kept draws; samples may be empty to keep none, and may be a strided view
  // such as big[:, k0:k0 + K], as the driver passes) and folded into the float64 Welford mean / m2
  // [B, d] with count kept_before + k + 1. accept_count [B] int64 and accept_prob_sum [B] float64
  // (min(1, exp(log_alpha)), added to the stored sum one transition at a time, so chunking changes
  // no bit) accumulate every transition.
  m.def(
      "run_chains(Tensor(a!) q, Tensor mu, float step_size, int num_leapfrog_steps, int seed, "
      "int chain_offset, int first_transition, int num_transitions, int thin, Tensor(b!) samples, "
      "Tensor(c!) mean, Tensor(d!) m2, Tensor(e!) accept_count, Tensor(f!) accept_prob_sum, "
      "int kept_before) -> ()");
}
