// Each chain's statistics (chain_statistics.def) as the kernels keep them: where they live
// (ChainStatisticsArrays, one [B] array each) and a chain's running tally (ChainTally), both
// generated from the def, so no kernel names a statistic.
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "../hmc/metropolis.h"

namespace fused_hmc {

// The statistics of a call's chains: one [B] array per line of chain_statistics.def.
struct ChainStatisticsArrays {
#define FHMC_CHAIN_STATISTIC(name, type, value, description) type* name;
#include "chain_statistics.def"
#undef FHMC_CHAIN_STATISTIC
};

constexpr int kChainStatisticCount = 0
#define FHMC_CHAIN_STATISTIC(name, type, value, description) +1
#include "chain_statistics.def"
#undef FHMC_CHAIN_STATISTIC
    ;

// A statistic's share of a transition as a number; a deferred one (AcceptProbability) is formed
// here, or by a sum that forms several at once (the CUDA lane sums).
template <typename V>
FHMC_HD V statistic_value(const V& v) {
  return v;
}
template <typename scalar_t>
FHMC_HD scalar_t statistic_value(const AcceptProbability<scalar_t>& v) {
  return v.value();
}

// A running sum in one thread: the CPU chains, and statistics added in memory.
template <typename T>
class PlainSum {
 public:
  FHMC_HD explicit PlainSum(T start = T(0)) : sum_(start) {}
  template <typename V>
  FHMC_HD void add(const V& v) {
    sum_ += statistic_value(v);
  }
  FHMC_HD void flush() {}
  FHMC_HD T total() const { return sum_; }

 private:
  T sum_;
};

// One chain's statistics while it runs, each in a Sum<type> (PlainSum, or the CUDA kernels' lane
// sums): started from the stored values (in the `holder` thread; 0 in the others), fed every
// transition's decision in order, flushed (from every thread of the chain's group) and stored by
// the holder. Sums added one transition at a time onto the stored value: a float64 statistic has
// the same bits however the transitions are split into calls.
template <template <typename> class Sum = PlainSum>
struct ChainTally {
#define FHMC_CHAIN_STATISTIC(name, type, value, description) Sum<type> name;
#include "chain_statistics.def"
#undef FHMC_CHAIN_STATISTIC

  FHMC_HD ChainTally(const ChainStatisticsArrays& arrays, int64_t chain, bool holder) {
#define FHMC_CHAIN_STATISTIC(name, type, value, description) \
  name = Sum<type>(holder ? arrays.name[chain] : type(0));
#include "chain_statistics.def"
#undef FHMC_CHAIN_STATISTIC
  }

  template <class Decision>
  FHMC_HD void add(const Decision& d) {
#define FHMC_CHAIN_STATISTIC(name, type, value, description) name.add(value);
#include "chain_statistics.def"
#undef FHMC_CHAIN_STATISTIC
  }

  FHMC_HD void flush() {
#define FHMC_CHAIN_STATISTIC(name, type, value, description) name.flush();
#include "chain_statistics.def"
#undef FHMC_CHAIN_STATISTIC
  }

  // After flush(), in the holder.
  FHMC_HD void store(const ChainStatisticsArrays& arrays, int64_t chain) const {
#define FHMC_CHAIN_STATISTIC(name, type, value, description) arrays.name[chain] = name.total();
#include "chain_statistics.def"
#undef FHMC_CHAIN_STATISTIC
  }
};

// Adds one transition's decision to chain `chain`'s stored statistics (kernels that hold a chain
// for one transition: the pooled warm-ups).
template <class Decision>
FHMC_HD void add_to_statistics(const ChainStatisticsArrays& arrays, int64_t chain,
                               const Decision& d) {
  ChainTally<> tally(arrays, chain, true);
  tally.add(d);
  tally.store(arrays, chain);
}

}  // namespace fused_hmc
