// Which transitions of a long run are kept. Thinning counts the global transition index t of the
// stream, not the index within a call: t is kept when (t + 1) % thin == 0. So however a run is
// split into calls (chunks, resumed runs), the same transitions are kept, in the same order.
#pragma once

#include <cstdint>

#include "../fp/host_device.h"

namespace fused_hmc {

// Number of kept transitions among [0, transition).
FHMC_HD int64_t kept_before(int64_t transition, int64_t thin) { return transition / thin; }

// Number of kept transitions among [first, first + count).
FHMC_HD int64_t kept_in_range(int64_t first, int64_t count, int64_t thin) {
  return kept_before(first + count, thin) - kept_before(first, thin);
}

// Which of a call's consecutive transitions are kept ((t + 1) % thin == 0), and the kept draws'
// numbering, without two 64-bit divisions per transition (SASS subroutines on the GPU): a
// countdown to the next kept transition. advance() after each transition t = first, first + 1,
// ...: true when t is kept, and then kept_index() is kept_before(t) - kept_before(first), the
// draw's index in the call.
class KeepClock {
 public:
  FHMC_HD KeepClock(int64_t first, int64_t thin)
      : thin_(thin), until_kept_(thin - 1 - first % thin) {}

  FHMC_HD bool advance() {
    if (until_kept_ > 0) {
      --until_kept_;
      return false;
    }
    until_kept_ = thin_ - 1;
    ++kept_;
    return true;
  }

  FHMC_HD int64_t kept_index() const { return kept_ - 1; }

 private:
  int64_t thin_;
  int64_t until_kept_;  // transitions until the next kept one
  int64_t kept_ = 0;
};

}  // namespace fused_hmc
