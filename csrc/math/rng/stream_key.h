// How an explicit seed= becomes the native stream's Philox key.
//
// torch's CUDA generator keys Philox with its raw seed and numbers its subsequences from 0, the
// very (key, subsequence, counter) triples the native stream uses for chain c, transition 0. Keying
// an explicit seed s with s itself made hmc_step(seed=s) draw, as its momenta, the numbers
// torch.randn draws after torch.cuda.manual_seed(s). So an explicit seed is first mixed: the key is
// SplitMix64's finalizer (Steele, Lea & Flood 2014; constants from Vigna's splitmix64.c) of
// seed ^ kExplicitSeedDomain. The finalizer is a bijection of 64-bit words (xor-shifts and odd
// multipliers are invertible), so distinct seeds keep distinct keys; the key of seed s equals a
// torch generator's key only for a torch seed of philox_key_from_seed(s), a scrambled 64-bit value.
// Generator-seeded modes (no seed=) use the generator's own reservation and are not mixed.
// Mirrored in fused_hmc/philox_numpy.py (philox_key_from_seed).
#pragma once

#include <cstdint>

#include "../fp/host_device.h"
#include "noise_streams.h"

namespace fused_hmc {

constexpr uint64_t kExplicitSeedDomain = 0x6675736564686D63ull;  // ASCII "fusedhmc"

FHMC_HD uint64_t philox_key_from_seed(uint64_t seed) {
  uint64_t z = seed ^ kExplicitSeedDomain;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The native stream of an explicit seed (the schema's int64, read as its 64 bits), for chains of
// dimension `dim`: the one place the transition op (seed=) and the chain ops key their noise.
template <typename scalar_t>
FHMC_HD PhiloxStream seeded_stream(int64_t seed, int64_t dim) {
  return {philox_key_from_seed(static_cast<uint64_t>(seed)), 0, momentum_blocks<scalar_t>(dim) + 1};
}

}  // namespace fused_hmc
