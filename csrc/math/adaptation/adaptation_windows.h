// Stan's warm-up windows (Stan Reference Manual, "HMC algorithm parameters", automatic parameter
// tuning; stan/mcmc/windowed_adaptation.hpp), as pure functions of the warm-up iteration index i, so
// a kernel needs no window bookkeeping in memory and any split of warm-up into calls agrees.
//
// Warm-up iterations 0 .. W-1 are: an initial fast interval (init_buffer, Stan's default 75), slow
// windows whose draws estimate the inverse mass (the first base_window long (25), each next one
// twice as long, the last stretched to end where the terminal fast interval begins: a window is
// stretched when the one after it would overrun), and the terminal fast interval (term_buffer, 50).
// When W < init_buffer + base_window + term_buffer they scale to 15% / 75% / 10% of W (one slow
// window), the terminal interval widened to kMinDualAveragingRun = 25 iterations from W = 35 on
// (Stan keeps 10%). Below W = 20 there are no slow windows. Step-size dual averaging runs
// throughout and restarts after every slow window's end that at least kMinDualAveragingRun
// iterations follow (limits.h says why): after a shorter terminal interval (W = 20 .. 34, or
// adapt_windows with a term_buffer below 25) the run that began before the last window goes on.
//
// (Stan's own set_window_params, in the scaled case, sets the sizes but not the first window's end,
// so Stan never updates the metric there; we follow the documented intent.)
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "../limits.h"

namespace fused_hmc {

struct WarmupWindows {
  int64_t num_warmup;
  int64_t init_buffer, term_buffer, base_window;
  bool enabled;  // num_warmup >= 20
};

// Stan's set_window_params: init_buffer, term_buffer >= 0 and base_window >= 1.
FHMC_HD WarmupWindows warmup_windows(int64_t num_warmup, int64_t init_buffer = kInitBuffer,
                                     int64_t base_window = kBaseWindow,
                                     int64_t term_buffer = kTermBuffer) {
  if (num_warmup < kMinWarmupForWindows) return {num_warmup, 0, 0, 0, false};
  if (init_buffer + base_window + term_buffer > num_warmup) {
    // Stan's 0.15 * num_warmup and 0.10 * num_warmup, truncated, but a terminal interval of at
    // least kMinDualAveragingRun where a slow window of kMinScaledWindow draws still fits: the
    // final step size comes from the terminal run, which restarts at 10x eps to meet the new mass
    // (limits.h).
    const int64_t init = static_cast<int64_t>(0.15 * static_cast<double>(num_warmup));
    int64_t term = static_cast<int64_t>(0.10 * static_cast<double>(num_warmup));
    if (term < kMinDualAveragingRun &&
        num_warmup - init - kMinDualAveragingRun >= kMinScaledWindow) {
      term = kMinDualAveragingRun;
    }
    return {num_warmup, init, term, num_warmup - init - term, true};
  }
  return {num_warmup, init_buffer, term_buffer, base_window, true};
}

// A slow window [start, end] (inclusive); start < 0 means none.
struct SlowWindow {
  int64_t start, end;
};

// The slow window holding warm-up iteration i, if any.
FHMC_HD SlowWindow slow_window_of(const WarmupWindows& w, int64_t i) {
  const int64_t last = w.num_warmup - w.term_buffer - 1;  // the last slow iteration
  if (!w.enabled || i < w.init_buffer || i > last) return {-1, -1};
  int64_t start = w.init_buffer, size = w.base_window, end = w.init_buffer + w.base_window - 1;
  while (i > end) {  // Stan's compute_next_window, at the end of the window [start, end]
    size *= 2;
    int64_t next = end + size;
    if (next != last && next + 2 * size >= last + 1) next = last;
    start = end + 1;
    end = next;
  }
  return {start, end};
}

// Whether iteration i is the last of a slow window (the inverse mass is updated after it).
FHMC_HD bool ends_slow_window(const WarmupWindows& w, int64_t i) {
  const SlowWindow s = slow_window_of(w, i);
  return s.start >= 0 && s.end == i;
}

// The warm-up iteration at which the dual averaging that iteration i belongs to (re)started: 0, or
// one past the end of the last slow window before i (when the inverse mass is adapted) that leaves
// kMinDualAveragingRun iterations: the last such point at or before min(i, W - that many).
FHMC_HD int64_t dual_averaging_start(const WarmupWindows& w, int64_t i, bool adapt_mass) {
  if (i > w.num_warmup - kMinDualAveragingRun) i = w.num_warmup - kMinDualAveragingRun;
  if (!adapt_mass || !w.enabled || i <= w.init_buffer) return 0;
  const int64_t last = w.num_warmup - w.term_buffer - 1;
  const SlowWindow s = slow_window_of(w, i <= last ? i : last);
  if (i > s.end) return s.end + 1;  // past the last window
  return s.start > w.init_buffer ? s.start : 0;
}

}  // namespace fused_hmc
