// Correctly rounded arithmetic the compiler may not contract or approximate, in every build: the
// host build compiles with -ffp-contract=off, the device uses the _rn intrinsics, which nvcc never
// fuses (whatever its --fmad; users' models, in plain arithmetic, get --fmad=false: _build.py).
// Every result that must be the same bits on the CPU and the GPU is written with these.
#pragma once

#include <cmath>

#include "host_device.h"

namespace fused_hmc {

FHMC_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
FHMC_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
FHMC_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FHMC_HD double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
FHMC_HD double sub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
FHMC_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

FHMC_HD float fma_any(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}
FHMC_HD double fma_any(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// Correctly rounded square root and division (the device defaults may be approximate).
FHMC_HD float sqrt_rn(float v) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(v);
#else
  return std::sqrt(v);
#endif
}
FHMC_HD double sqrt_rn(double v) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(v);
#else
  return std::sqrt(v);
#endif
}
FHMC_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
FHMC_HD double div_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

}  // namespace fused_hmc
