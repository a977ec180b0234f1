// Which transitions of a long run are kept. Thinning counts the global transition index t of the
// stream, not the index within a call: t is kept when (t + 1) % thin == 0. So however a run is
// split into calls (chunks, resumed runs), the same transitions are kept, in the same order.
#pragma once

#include <cstdint>

#include "host_device.h"

namespace fused_hmc {

FHMC_HD bool is_kept(int64_t transition, int64_t thin) { return (transition + 1) % thin == 0; }

// Number of kept transitions among [0, transition).
FHMC_HD int64_t kept_before(int64_t transition, int64_t thin) { return transition / thin; }

// Number of kept transitions among [first, first + count).
FHMC_HD int64_t kept_in_range(int64_t first, int64_t count, int64_t thin) {
  return kept_before(first + count, thin) - kept_before(first, thin);
}

}  // namespace fused_hmc
