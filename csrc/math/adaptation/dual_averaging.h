// Step-size adaptation by Nesterov dual averaging (Hoffman & Gelman 2014, "The No-U-Turn Sampler",
// JMLR 15, sec. 3.2, Algorithm 5), with Stan's constants and restarts (Stan's stepsize_adaptation).
//
// For the counter n = 1, 2, ... of transitions since the last restart and the transition's
// acceptance statistic a = min(1, exp(log_alpha)):
//   n == 1:  s_bar = 0, x_bar = 0, mu = log(10 * eps)     (eps: the step size that transition used)
//   eta   = 1 / (n + t0)
//   s_bar = (1 - eta) s_bar + eta (delta - a)
//   x     = mu - s_bar sqrt(n) / gamma          -> the next transition's step size is exp(x)
//   w     = n^-kappa
//   x_bar = (1 - w) x_bar + w x              -> at the end of warm-up the step size is exp(x_bar)
// with gamma = 0.05, t0 = 10, kappa = 0.75 (so w = 1 / (sqrt(n) sqrt(sqrt(n))), formed from
// correctly rounded operations, and exp / log from portable_math.h, so CPU and GPU agree bit for
// bit).
// (s_bar is the paper's H-bar.) Every product and sum is spelled with an explicit rounding so the
// device build cannot contract it differently from the host's.
#pragma once

#include <cmath>
#include <cstdint>

#include "../fp/host_device.h"
#include "../fp/portable_math.h"
#include "../fp/rounding.h"

namespace fused_hmc {

constexpr double kDualAveragingGamma = 0.05;
// gamma for one chain's own run over the terminal fast interval (warmup_update.h says why).
constexpr double kTerminalDualAveragingGamma = 0.25;
constexpr double kDualAveragingT0 = 10.0;
// kappa = 0.75 is built into dual_averaging_weight.

// A chain's (or the pooled) dual-averaging state, stored as three float64 [s_bar, x_bar, mu].
struct DualAveraging {
  double s_bar, x_bar, mu;
};

// n^-0.75.
FHMC_HD double dual_averaging_weight(double n) {
  const double root = sqrt_rn(n);
  return div_rn(1.0, mul_rn(root, sqrt_rn(root)));
}

// One update after the transition with counter `n` (>= 1) that ran with step size `step_size` and
// had acceptance statistic `accept_stat`; returns the step size of the next transition, exp(x).
FHMC_HD double dual_averaging_update(DualAveraging& s, int64_t n, double accept_stat,
                                     double target_accept, double step_size,
                                     double gamma = kDualAveragingGamma) {
  if (n == 1) {
    s.s_bar = 0.0;
    s.x_bar = 0.0;
    s.mu = portable_log(mul_rn(10.0, step_size));
  }
  const double a = accept_stat > 1.0 ? 1.0 : accept_stat;
  const double count = static_cast<double>(n);
  const double eta = div_rn(1.0, add_rn(count, kDualAveragingT0));
  s.s_bar = add_rn(mul_rn(sub_rn(1.0, eta), s.s_bar), mul_rn(eta, sub_rn(target_accept, a)));
  const double x =
      sub_rn(s.mu, div_rn(mul_rn(s.s_bar, sqrt_rn(count)), gamma));
  const double w = dual_averaging_weight(count);
  s.x_bar = add_rn(mul_rn(sub_rn(1.0, w), s.x_bar), mul_rn(w, x));
  return portable_exp(x);
}

// The step size warm-up ends with (Stan's complete_adaptation).
FHMC_HD double dual_averaging_final(const DualAveraging& s) { return portable_exp(s.x_bar); }

}  // namespace fused_hmc
