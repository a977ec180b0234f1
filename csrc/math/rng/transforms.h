// curand's uniform and Box-Muller transforms (curand_uniform.h, curand_normal.h), float32 and
// float64, written so that the device build reproduces curand bit for bit.
//
// curand is compiled with nvcc's default --fmad=true, which contracts `x * C + C / 2` into one
// fused multiply-add; we spell that FMA out so the result does not depend on our own flags. On the
// device the float32 path uses the __sincosf intrinsic as curand does; the host computes the
// radius with libdevice's logf and the angle's sine and cosine to within an ulp
// (fp/host_transcendentals.h: no libm, so the same bits on every machine, and vectorisable), so
// CPU and GPU normals agree to the intrinsic's error (~2^-21 absolute), not bit for bit. float64
// uses libm's log, sin and cos on the host. The uint32 words are bit-identical everywhere.
#pragma once

#include <cmath>
#include <cstdint>

#include "../fp/host_device.h"
#include "../fp/host_transcendentals.h"
#include "philox.h"

namespace fused_hmc {

constexpr float kTwoPow32Inv = 2.3283064e-10f;                    // CURAND_2POW32_INV
constexpr float kTwoPow32Inv2Pi = 2.3283064e-10f * 6.2831855f;    // CURAND_2POW32_INV_2PI
constexpr double kTwoPow53Inv = 1.1102230246251565e-16;           // CURAND_2POW53_INV_DOUBLE
constexpr double kPi = 3.1415926535897932;                         // CURAND_PI_DOUBLE

FHMC_HD float fma_f32(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}

FHMC_HD double fma_f64(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// curand_uniform: (0, 1], and 0xFFFFFFFF rounds to exactly 1.0f.
FHMC_HD float uniform_from_word(uint32_t w) {
  return fma_f32(static_cast<float>(w), kTwoPow32Inv, kTwoPow32Inv / 2.0f);
}

// torch.rand on CUDA: curand's value with the upper bound mapped to the lower one, so [0, 1).
FHMC_HD float torch_uniform_from_word(uint32_t w) {
  const float u = uniform_from_word(w);
  return u == 1.0f ? 0.0f : u;
}

// _curand_uniform_double_hq: 53 bits from two words.
FHMC_HD double uniform_from_words_f64(uint32_t lo, uint32_t hi) {
  const uint64_t z = static_cast<uint64_t>(lo) ^ (static_cast<uint64_t>(hi) << (53 - 32));
  return fma_f64(static_cast<double>(z), kTwoPow53Inv, kTwoPow53Inv / 2.0);
}

// _curand_box_muller: two float32 normals from two words.
FHMC_HD void box_muller_f32(uint32_t a, uint32_t b, float& first, float& second) {
  const float u = fma_f32(static_cast<float>(a), kTwoPow32Inv, kTwoPow32Inv / 2.0f);
  const float v = fma_f32(static_cast<float>(b), kTwoPow32Inv2Pi, kTwoPow32Inv2Pi / 2.0f);
#if defined(__CUDA_ARCH__)
  const float s = sqrtf(-2.0f * logf(u));
  __sincosf(v, &first, &second);
#else
  const float s = std::sqrt(-2.0f * libdevice_logf(u));
  angle_sincos(v, first, second);
#endif
  first *= s;
  second *= s;
}

// _curand_box_muller_double: two float64 normals from a whole block.
FHMC_HD void box_muller_f64(const PhiloxBlock& blk, double& first, double& second) {
  const uint64_t zx = static_cast<uint64_t>(blk.x) ^ (static_cast<uint64_t>(blk.y) << (53 - 32));
  const uint64_t zy = static_cast<uint64_t>(blk.z) ^ (static_cast<uint64_t>(blk.w) << (53 - 32));
  const double u = fma_f64(static_cast<double>(zx), kTwoPow53Inv, kTwoPow53Inv / 2.0);
  const double v = fma_f64(static_cast<double>(zy), kTwoPow53Inv * 2.0, kTwoPow53Inv);
  const double s = sqrt(-2.0 * log(u));
#if defined(__CUDA_ARCH__)
  sincospi(v, &first, &second);
#else
  first = sin(v * kPi);
  second = cos(v * kPi);
#endif
  first *= s;
  second *= s;
}

// Normals one Philox block yields: curand_normal4 (float32) or curand_normal2_double (float64).
template <typename scalar_t>
struct NormalsPerBlock;
template <>
struct NormalsPerBlock<float> {
  static constexpr int value = 4;
};
template <>
struct NormalsPerBlock<double> {
  static constexpr int value = 2;
};

// Lane `lane` of curand_normal4 / curand_normal2_double applied to `blk`.
FHMC_HD float normal_lane(const PhiloxBlock& blk, int lane, float /*tag*/) {
  float first, second;
  if (lane < 2) {
    box_muller_f32(blk.x, blk.y, first, second);
  } else {
    box_muller_f32(blk.z, blk.w, first, second);
  }
  return (lane & 1) ? second : first;
}

FHMC_HD double normal_lane(const PhiloxBlock& blk, int lane, double /*tag*/) {
  double first, second;
  box_muller_f64(blk, first, second);
  return lane ? second : first;
}

// All normals of one block, in lane order.
FHMC_HD void block_normals(const PhiloxBlock& blk, float (&out)[4]) {
  box_muller_f32(blk.x, blk.y, out[0], out[1]);
  box_muller_f32(blk.z, blk.w, out[2], out[3]);
}

FHMC_HD void block_normals(const PhiloxBlock& blk, double (&out)[2]) {
  box_muller_f64(blk, out[0], out[1]);
}

}  // namespace fused_hmc
