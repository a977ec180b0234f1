// The operator schemas, declared once; each backend registers only its implementations.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

TORCH_LIBRARY(fused_hmc, m) {
  // One HMC transition of N(mu, I) for every chain (q [B, d], any strides; mu [d]):
  // noise = "given": caller-supplied momentum [B, d] and uniform [B] (float32 or float64: the
  //   reference's exact integrator and accept test, bit for bit);
  // noise = "philox": the native stream, keyed by the generator, or by `seed` (then `transition`
  //   selects the transition within it; math/rng/stream_key.h);
  // noise = "torch": the numbers torch.randn_like(q) then torch.rand(B) would draw.
  // Returns q_new [B, d] contiguous and accepted [B] bool; with trace=True also the momentum [B, d]
  // (contiguous) and uniform [B] used (float32 for "philox", torch.rand's default dtype for
  // "torch", as given for "given"), else two empty tensors ([0] of q's dtype, [0] float32).
  m.def(
      "transition(Tensor q, Tensor mu, float step_size, int num_leapfrog_steps, str noise, "
      "Generator? generator=None, int? seed=None, int transition=0, Tensor? momentum=None, "
      "Tensor? uniform=None, bool trace=False) -> (Tensor q_new, Tensor accepted, "
      "Tensor momentum_out, Tensor uniform_out)",
      {at::Tag::nondeterministic_seeded});

  // sample and warmup: transitions first_transition .. first_transition + num_transitions - 1 of
  // every chain, in place, under the native philox stream keyed by `seed`: chain b is stream chain
  // chain_offset + b. Their arguments, read by name (ops/chain_request.h), and these comments are
  // the one statement of them.
  //
  // Both take: the chains q [B, d] contiguous float32/float64, the state. The target: its
  // registry name (csrc/targets.def: "standard" N(mu, I) with target_tensors [mu]; "diagonal"
  // N(mu, diag(1 / precision)) with [mu, precision [d]]; "dense" N(mu, precision^-1) with
  // [mu, precision [d, d]] symmetric positive definite, d <= 256; or a compiled CppTarget's name
  // with its data tensors and target_scalars), tensors contiguous in q's dtype (a CppTarget's
  // integer data int64) on q's device. step_size [G] float64 and inv_mass [G, d] (q's dtype, > 0),
  // G = 1 (shared by all chains) or G = B (chain b uses row b); when sampling, inv_mass may be
  // empty: the unit mass, compiled away. A dense inverse mass (d <= kMaxDenseMassDim) is
  // inv_mass [G, d, d], each group's lower Cholesky factor L of M^-1 = L L^T (math/hmc/dense_mass.h:
  // p = L^-T z, q += eps_t L L^T p, kinetic energy 0.5 p^T L L^T p); the warmup op then keeps the
  // window's co-moments in window_m2 [B, d, d] and sets L from the window's regularised covariance
  // (kept when that is not finite and positive definite). Transition t draws the momentum z (the
  // first blocks), the Metropolis uniform u (word x of the transition's last block) and the
  // jitter uniform v (word y, torch_uniform_from_word), and integrates (math/hmc/transition.h gives
  // the canonical operation order) with eps_t = step_size * (1 + jitter * (2 v - 1)) (exactly
  // step_size when jitter == 0), momentum p = z / sqrt(inv_mass), L leapfrog steps of
  // q += eps_t * inv_mass * p, p -= eps_t * grad U; it accepts with H = U(q) +
  // 0.5 * sum(inv_mass * p^2). With the standard target, inv_mass = 1 and jitter 0 it is
  // transition(noise="philox", seed=seed, transition=t) bit for bit. Jittered trajectories
  // (math/adaptation/trajectory_adaptation.h): trajectory_length T > 0 makes transition t run
  // L = min(num_leapfrog_steps, max(1, ceil(w T / eps_t))) leapfrog steps, w the trajectory jitter
  // (shared by the chains: transition.h's trajectory_jitter_word); num_leapfrog_steps is then the
  // cap; T = 0 runs num_leapfrog_steps.
  //
  // statistics: one [B] tensor per chain statistic of math/stats/chain_statistics.def (which states
  // what each counts), in its order and dtype (int64 or float64). Every transition adds its share
  // onto the stored values, one transition at a time, so chunking changes no bit.
  //
  // sample: step_size, inv_mass (and chees) are read only. Transition t is kept when
  // (t + 1) % thin == 0: written to samples[b, k, :] (k counts this call's kept draws; samples None
  // or empty keeps none, and may be a strided view such as big[:, k0:k0 + K]) and folded into the
  // float64 Welford mean / m2 [B, d] (16-byte aligned) with count kept_before + k + 1. With chees
  // [8] float64 (the warmup op's ChEES state), which comes with trajectory_record [B, 3 d + 2]
  // float64, the transitions run with T = chees[0], read on the device (trajectory_length must then
  // be 0), and trajectory_record receives each chain's record of the call's last transition
  // (math/adaptation/trajectory_adaptation.h): its start and proposal less the target's shift, end
  // velocity inv_mass * p, acceptance statistic and trajectory jitter; a ChEES warm-up pooled over
  // several processes reduces these outside the op.
  m.def(
      "sample(Tensor(a!) q, str target, Tensor[] target_tensors, float[] target_scalars, "
      "Tensor step_size, Tensor inv_mass, float jitter, int num_leapfrog_steps, int seed, "
      "int chain_offset, int first_transition, int num_transitions, Tensor(b!)[] statistics, "
      "Tensor(c!) mean, Tensor(d!) m2, int thin=1, int kept_before=0, "
      "Tensor(e!)? samples=None, float trajectory_length=0.0, Tensor? chees=None, "
      "Tensor(f!)? trajectory_record=None) -> ()");

  // warmup: the transitions are warm-up iterations i = t - warmup_start of a warm-up of num_warmup
  // transitions (a call never crosses its end), adapting step_size and inv_mass in place. After
  // transition t of every chain in group g (its own chain, or all chains when G = 1):
  //  1. if adapt_mass_matrix and i lies in a slow window [s, e]
  //     (math/adaptation/adaptation_windows.h: Stan's windows from windows = [init_buffer,
  //     base_window, term_buffer], or [] for Stan's (75, 25, 50), scaled to 15% / 75% / 10% when
  //     they do not fit in num_warmup), chain b's state is folded into window_mean / window_m2
  //     [B, d] float64 (Welford, count i - s + 1; the op zeroes them after each window, the caller
  //     zeroes them before iteration 0);
  //  2. if adapt_step_size: dual averaging (math/adaptation/dual_averaging.h; state
  //     dual_averaging [G, 3] float64 = s_bar, x_bar, mu, set by the op at each (re)start, so the
  //     caller may pass zeros) with counter n = i - (start of the current run) + 1 and statistic
  //     a = min(1, alpha) (G = 1: the mean over chains, summed in chunk_sum.h's pairwise order over
  //     the chain index) toward target_accept sets step_size[g] = exp(x); after
  //     i = num_warmup - 1, step_size[g] = exp(x_bar);
  //  3. if adapt_mass_matrix and i = e ends a slow window: inv_mass[g] = Stan's regularised
  //     variance of the window's draws (G = 1: of all chains' draws, pooled by the law of total
  //     variance, pairwise order over chains; a non-finite or non-positive estimate keeps the old
  //     value); dual averaging restarts at i + 1.
  // harmonic_acceptance: a pooled step size's statistic is the chains' harmonic mean acceptance
  // statistic, divergent transitions left out (math/adaptation/pooled_acceptance.h), not the mean.
  // gradient_mass_estimate (CPU only): step 3's estimate comes from the draws and the gradients of
  // the log density at them (math/hmc/gradient_mass.h), whose moments follow the draws' in
  // window_mean [2, B, d] and window_m2 [2, B, d] (dense: [2, B, d, d]).
  // chees [8] float64: the ChEES state [T, moving average of log T, Adam m, Adam v, beta1^k,
  // beta2^k, k, 0], the caller sets [T0, 0, 0, 0, 1, 1, 0, 0]; each transition runs with
  // T = chees[0] (trajectory_length unused) and then updates it from every chain's ChEES gradient
  // (after the step sizes' updates, so chees[0] is clipped to [eps', num_leapfrog_steps eps'] with
  // eps' the next step size, or with G = B (CPU only) the median of the chains' next step sizes).
  // With G = B each chain adapts its own step size and inverse mass, in lock step with the others
  // (one T for all). Splitting a warm-up into calls, or running chains 0..B-1 in parts (neither a
  // pooled warm-up nor chees), changes no bit.
  m.def(
      "warmup(Tensor(a!) q, str target, Tensor[] target_tensors, float[] target_scalars, "
      "Tensor(b!) step_size, Tensor(c!) inv_mass, float jitter, int num_leapfrog_steps, int seed, "
      "int chain_offset, int first_transition, int num_transitions, Tensor(d!)[] statistics, "
      "Tensor(e!) dual_averaging, Tensor(f!) window_mean, Tensor(g!) window_m2, "
      "int num_warmup, int warmup_start=0, int[] windows=[], float target_accept=0.8, "
      "bool adapt_step_size=False, bool adapt_mass_matrix=False, float trajectory_length=0.0, "
      "Tensor(h!)? chees=None, bool gradient_mass_estimate=False, "
      "bool harmonic_acceptance=False) -> ()");

  // One pooled warm-up update after warm-up iteration `iteration` from statistics of every chain
  // reduced by the caller (the chains of several processes; math/adaptation/warmup_update.h): the
  // step size [1] float64 by dual averaging (state dual_averaging [1, 3]) toward target_accept with
  // the statistic of acceptance_terms [2] float64, the sums over every chain of math/adaptation/
  // pooled_acceptance.h's terms (x, w): the chains' mean acceptance, or with harmonic_acceptance
  // their harmonic mean, as the warmup op's pooled warm-up updates it (when adapt_step_size);
  // then, when variance [d] float64 is given (the pooled variance of a slow window's
  // variance_draws draws), inv_mass [1, d] (float32/float64) =
  // Stan's regularised variance, keeping a coordinate whose estimate is not finite and positive;
  // for a dense inv_mass [1, d, d] (CPU tensors only), variance [d, d] is the pooled covariance
  // (math/hmc/dense_mass.h's pooled_dense_covariance), regularised and factorised into inv_mass
  // (kept when not positive definite).
  // num_warmup, windows, adapt_mass_matrix: the warmup op's (they place the dual averaging's
  // restarts). With chees [8] float64 (the warmup op's ChEES state) and chees_sums [2] float64 (the
  // sum over every chain of omega_c g_c and of omega_c, math/adaptation/trajectory_adaptation.h),
  // ChEES's update follows the step size's, with the new step size and the cap max_leapfrog_steps,
  // as the warmup op's pooled warm-up orders them. Every tensor on one device; in place, no host sync.
  m.def(
      "pooled_update(Tensor(a!) step_size, Tensor(b!) dual_averaging, Tensor(c!) inv_mass, "
      "Tensor acceptance_terms, Tensor? variance, float variance_draws, int iteration, "
      "int num_warmup, int[] windows, float target_accept, bool adapt_step_size, "
      "bool adapt_mass_matrix, Tensor(d!)? chees=None, Tensor? chees_sums=None, "
      "int max_leapfrog_steps=1000, bool harmonic_acceptance=False) -> ()");
}

// No gradient flows through the ops (inputs that require grad are refused): autograd passes them
// straight to the backend, instead of boxing every call through its fallback.
TORCH_LIBRARY_IMPL(fused_hmc, Autograd, m) {
  m.impl("transition", torch::CppFunction::makeFallthrough());
  m.impl("sample", torch::CppFunction::makeFallthrough());
  m.impl("warmup", torch::CppFunction::makeFallthrough());
  m.impl("pooled_update", torch::CppFunction::makeFallthrough());
}
