// Trajectory-length adaptation by ChEES (Hoffman, Radul & Sountsov 2021, "An Adaptive MCMC Scheme
// for Setting Trajectory Lengths in Hamiltonian Monte Carlo", AISTATS), as BlackJAX's
// chees_adaptation forms it, pooled over all chains; and the jittered number of leapfrog steps.
//
// A transition with trajectory length T and step size eps runs
//   L = min(cap, max(1, ceil(w T / eps)))   leapfrog steps,
// w = torch_uniform_from_word(trajectory_jitter_word): on [0, 1), one per transition shared by
// every chain, a rotated van der Corput sequence (math/hmc/transition.h; BlackJAX shares a Halton
// sequence likewise).
//
// After each warm-up transition, with every chain's start x0_c, proposal x1_c (before the
// Metropolis test), end velocity v_c = inv_mass * p (the momentum before the final flip),
// acceptance probability a_c and jitter w_c:
//   omega_c = a_c if x1_c is finite, else 0 (and x1_c counts as 0)
//   m0 = mean_c x0_c,  m1 = sum_c omega_c x1_c / (sum_c omega_c + 1e-20)
//   g_c = w_c T (|x1_c - m1|^2 - |x0_c - m0|^2) ((x1_c - m1) . v_c)    (0 when not finite)
//   g   = sum_c omega_c g_c / (sum_c omega_c + 1e-20)        an estimate of dChEES / dlog T
// (BlackJAX 1.7.1 with a diagonal mass measures the squares in the coordinates the mass whitens
// and dots with p instead. Tried here: on a d = 16 Gaussian with scales 0.1 .. 10 the whitened
// estimate settled, after Stan's windows had adapted the mass, at the criterion's second local
// maximum (T 4.2 against 1.4); the form above lands at the first there, but at the second on
// scales 0.01 .. 100. Which to prefer is open.)
// then one Adam step of ascent on log T (learning rate 0.025, beta 0.9 / 0.999, eps 1e-8) from
// the moving average of log T (log T0 before the first update), the step clipped to +-0.35, a
// moving average of log T with weight k^-0.5 after the k-th update, and T = exp(average) clipped
// to [eps', cap eps'] (eps': the next transition's step size). The clip bounds the transitions'
// T only: the average, not the clipped T, is where the next step starts. Between calls, at every
// slow window's end, the driver restarts Adam from the average (fused_hmc/sampling/warmup.py's
// restart_chees_optimizer: T = exp(average), m = v = 0, the powers 1, k = 0). Sums over chains
// follow chunk_sum.h's pairwise order over the chain index, sums over coordinates run in
// coordinate order, and every operation is correctly rounded (exp / log from portable_math.h), so
// the CPU and CUDA builds adapt alike bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "../fp/host_device.h"
#include "../fp/portable_math.h"
#include "../fp/rounding.h"

namespace fused_hmc {

constexpr double kChEESLearningRate = 0.025;  // TFP's and the paper's
constexpr double kChEESBeta1 = 0.9;
constexpr double kChEESBeta2 = 0.999;
constexpr double kChEESAdamEps = 1e-8;
constexpr double kChEESUpdateClip = 0.35;  // as BlackJAX and TFP clip the log-space step
constexpr double kChEESWeightFloor = 1e-20;

// The pooled ChEES state, stored as eight float64 (the op's `chees` tensor).
struct ChEESState {
  double trajectory_length;   // T of the next transition
  double log_length_average;  // moving average of log T
  double adam_m, adam_v;      // Adam's first and second moments
  double beta1_power, beta2_power;  // beta^k, for Adam's bias correction
  double updates;             // k
  double unused;
};

// What a transition hands ChEES of its chain, as a row of 3 d + 2 float64: the start x0 [d], the
// proposal x1 [d] (both less the target's shift, which the centring removes), the end velocity
// inv_mass * p [d] (the momentum before its final flip), then the acceptance statistic a (column
// 3 d) and the trajectory jitter w (3 d + 1). omega and the finite checks above are the reader's.
FHMC_HD int64_t trajectory_record_width(int64_t dim) { return 3 * dim + 2; }

// The leapfrog steps of a transition with trajectory length `length` (0: `cap` steps, the fixed
// number) at step size `eps`, from its trajectory jitter w.
FHMC_HD int trajectory_steps(double length, int cap, double eps, float w) {
  if (length <= 0.0) return cap;
  const double steps = ceil(div_rn(mul_rn(static_cast<double>(w), length), eps));
  if (!(steps >= 1.0)) return 1;
  return steps >= static_cast<double>(cap) ? cap : static_cast<int>(steps);
}

// A chain's share of the gradient estimate: (|x1 - m1|^2 - |x0 - m0|^2) ((x1 - m1) . v), without
// the factor w T, summed over coordinates in order; non-finite terms give 0.
struct ChEESChainSums {
  double spread_change = 0.0, velocity_dot = 0.0;
  FHMC_HD void add(double x0_centred, double x1_centred, double velocity) {
    spread_change = add_rn(spread_change, sub_rn(mul_rn(x1_centred, x1_centred),
                                                 mul_rn(x0_centred, x0_centred)));
    velocity_dot = add_rn(velocity_dot, mul_rn(x1_centred, velocity));
  }
  FHMC_HD double term(double jitter_times_length) const {
    const double g = mul_rn(jitter_times_length, mul_rn(spread_change, velocity_dot));
    return g - g == 0.0 ? g : 0.0;  // NaN and infinities give 0
  }
};

FHMC_HD bool is_finite_value(double v) { return v - v == 0.0; }

// One update from the weighted gradient sum and weight sum; `next_step_size` is the step size of
// the next transition, `cap` the most leapfrog steps.
FHMC_HD void chees_update(ChEESState& s, double weighted_gradient_sum, double weight_sum,
                          double next_step_size, int cap) {
  const double g = div_rn(weighted_gradient_sum, add_rn(weight_sum, kChEESWeightFloor));
  // Adam ascends from the moving average, not from the clipped T: the clip bounds the T a
  // transition runs with, and its lower bound is the next step size, which spikes to about 10x
  // for the transition after each dual averaging restart (mu = log(10 eps) at a slow window's
  // end). Ascending from the clipped T moved log T a weight k^-1/2 of the way to that spike at
  // every window's end, and pushed the warm-up past the criterion's first minimum.
  const double log_length =
      s.updates > 0.0 ? s.log_length_average : portable_log(s.trajectory_length);
  double next_log = log_length;
  if (is_finite_value(g)) {
    s.updates = add_rn(s.updates, 1.0);
    s.beta1_power = mul_rn(s.beta1_power, kChEESBeta1);
    s.beta2_power = mul_rn(s.beta2_power, kChEESBeta2);
    s.adam_m = add_rn(mul_rn(kChEESBeta1, s.adam_m), mul_rn(1.0 - kChEESBeta1, g));
    s.adam_v = add_rn(mul_rn(kChEESBeta2, s.adam_v), mul_rn(1.0 - kChEESBeta2, mul_rn(g, g)));
    const double m_hat = div_rn(s.adam_m, sub_rn(1.0, s.beta1_power));
    const double v_hat = div_rn(s.adam_v, sub_rn(1.0, s.beta2_power));
    double step = div_rn(mul_rn(kChEESLearningRate, m_hat), add_rn(sqrt_rn(v_hat), kChEESAdamEps));
    if (step > kChEESUpdateClip) step = kChEESUpdateClip;
    if (step < -kChEESUpdateClip) step = -kChEESUpdateClip;
    next_log = add_rn(log_length, step);
    const double w = div_rn(1.0, sqrt_rn(s.updates));
    s.log_length_average =
        add_rn(mul_rn(sub_rn(1.0, w), s.log_length_average), mul_rn(w, next_log));
  }
  double length = s.updates > 0.0 ? portable_exp(s.log_length_average) : s.trajectory_length;
  const double longest = mul_rn(static_cast<double>(cap), next_step_size);
  if (length > longest) length = longest;
  if (length < next_step_size) length = next_step_size;
  s.trajectory_length = length;
}

}  // namespace fused_hmc
