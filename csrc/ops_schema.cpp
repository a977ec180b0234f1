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
  // hmc_step that also returns the momentum [B, d] (contiguous) and uniform [B] it drew: float32
  // uniforms with rng="philox", torch.rand(B)'s dtype (the default dtype) with rng="torch".
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

  // ---- The tuned samplers (CPU and CUDA): Gaussian target family, diagonal mass, warm-up. ----
  // Shared by both ops. q [B, d] contiguous, the chain state, updated in place. The target is
  // target_kind 0: N(mu, I) (precision empty); 1: N(mu, diag(1 / precision)) (precision [d], the
  // inverse variances); 2: N(mu, precision^-1) (precision [d, d], symmetric positive definite,
  // d <= 256); mu, precision contiguous in q's dtype. step_size [G] float64 and inv_mass [G, d]
  // (q's dtype, > 0), G = 1 (shared by all chains) or G = B (chain b uses row b). Chain b is philox
  // chain chain_offset + b, and transition t draws exactly run_chains' numbers: the momentum z (the
  // first blocks), the Metropolis uniform u (word x of the transition's last block) and the jitter
  // uniform v (word y of the last block, torch_uniform_from_word). The transition (see
  // math/tuned_transition.h for the canonical operation order) integrates with
  // eps_t = step_size * (1 + jitter * (2 v - 1)) (exactly step_size when jitter == 0), momentum
  // p = z / sqrt(inv_mass), L leapfrog steps of q += eps_t * inv_mass * p, p -= eps_t * grad U, and
  // accepts as hmc_step does with H = U(q) + 0.5 * sum(inv_mass * p^2). With target_kind 0,
  // inv_mass = 1 and jitter 0 it is run_chains' transition bit for bit.
  //
  // run_chains_tuned: run_chains (same thinning, samples, Welford and acceptance outputs and
  // chunk-invariance) with this transition, for the transitions after warm-up; step_size and
  // inv_mass are read only.
  m.def(
      "run_chains_tuned(Tensor(a!) q, int target_kind, Tensor mu, Tensor precision, "
      "Tensor step_size, Tensor inv_mass, float jitter, int num_leapfrog_steps, int seed, "
      "int chain_offset, int first_transition, int num_transitions, int thin, Tensor(b!) samples, "
      "Tensor(c!) mean, Tensor(d!) m2, Tensor(e!) accept_count, Tensor(f!) accept_prob_sum, "
      "int kept_before) -> ()");
  // warmup_chains: transitions first_transition .. first_transition + num_transitions - 1, which
  // are warm-up iterations i = t - warmup_start of a warm-up of num_warmup transitions (a call
  // never crosses its end), adapting step_size and inv_mass in place; nothing is kept. After
  // transition t of every chain in group g (its own chain, or all chains when G = 1):
  //  1. if adapt_mass_matrix and i lies in a slow window [s, e] (math/adaptation_windows.h: Stan's
  //     windows from init_buffer (75), base_window (25, doubling) and term_buffer (50), scaled to
  //     15% / 75% / 10% when they do not fit in num_warmup), chain b's state is folded into
  //     window_mean / window_m2 [B, d] float64 (Welford, count i - s + 1; the op zeroes them after
  //     each window, the caller zeroes them before iteration 0);
  //  2. if adapt_step_size: dual averaging (math/dual_averaging.h; state dual_averaging [G, 3]
  //     float64 = s_bar, x_bar, mu, set by the op at each (re)start, so the caller may pass zeros)
  //     with counter n = i - (start of the current run) + 1 and statistic a = min(1, alpha) (G = 1:
  //     the mean over chains, summed in chunk_sum.h's pairwise order over the chain index) toward
  //     target_accept sets step_size[g] = exp(x); after i = num_warmup - 1,
  //     step_size[g] = exp(x_bar);
  //  3. if adapt_mass_matrix and i = e ends a slow window: inv_mass[g] = Stan's regularised
  //     variance of the window's draws (G = 1: of all chains' draws, pooled by the law of total
  //     variance, pairwise order over chains; a non-finite or non-positive estimate keeps the old
  //     value); dual averaging restarts at i + 1.
  // Splitting a warm-up into calls, or running chains 0..B-1 in parts (G = B only), changes no bit.
  m.def(
      "warmup_chains(Tensor(a!) q, int target_kind, Tensor mu, Tensor precision, "
      "Tensor(b!) step_size, Tensor(c!) inv_mass, float jitter, int num_leapfrog_steps, int seed, "
      "int chain_offset, int first_transition, int num_transitions, int warmup_start, "
      "int num_warmup, int init_buffer, int base_window, int term_buffer, float target_accept, "
      "bool adapt_step_size, bool adapt_mass_matrix, Tensor(d!) dual_averaging, "
      "Tensor(e!) window_mean, Tensor(f!) window_m2) -> ()");
}
