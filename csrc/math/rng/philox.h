// Philox4x32-10 (Salmon et al. 2011, Random123) with curand's counter layout.
//
// curand_init(seed, subsequence, offset) keys the generator with (lo32(seed), hi32(seed)), puts
// the 64-bit subsequence in counter words z,w and offset/4 in words x,y: block `n` of subsequence
// `s` is philox(counter = (n, s), key = seed). torch's CUDA generator hands out offsets in those
// units, so a kernel that reserves `increment` words may use blocks offset/4 .. offset/4 +
// increment/4 - 1 of every subsequence.
#pragma once

#include <cstdint>

#include "../fp/host_device.h"

namespace fused_hmc {

struct PhiloxBlock {
  uint32_t x, y, z, w;
};

FHMC_HD uint32_t mulhi_u32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

FHMC_HD PhiloxBlock philox_round(PhiloxBlock c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  const uint32_t hi0 = mulhi_u32(kM0, c.x), lo0 = kM0 * c.x;
  const uint32_t hi1 = mulhi_u32(kM1, c.z), lo1 = kM1 * c.z;
  return {hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0};
}

// The bare block function: counter words (x, y, z, w), key words (k0, k1).
FHMC_HD PhiloxBlock philox4x32_10(PhiloxBlock counter, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 9; ++round) {
    counter = philox_round(counter, k0, k1);
    k0 += kW0;
    k1 += kW1;
  }
  return philox_round(counter, k0, k1);
}

// Block `block_index` of subsequence `subsequence` under `seed`, exactly as curand_init(seed,
// subsequence, 4 * block_index) followed by curand4() returns it.
FHMC_HD PhiloxBlock philox_block(uint64_t seed, uint64_t subsequence, uint64_t block_index) {
  const PhiloxBlock counter = {static_cast<uint32_t>(block_index),
                               static_cast<uint32_t>(block_index >> 32),
                               static_cast<uint32_t>(subsequence),
                               static_cast<uint32_t>(subsequence >> 32)};
  return philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

FHMC_HD uint32_t block_word(const PhiloxBlock& b, int lane) {
  return lane == 0 ? b.x : lane == 1 ? b.y : lane == 2 ? b.z : b.w;
}

}  // namespace fused_hmc
