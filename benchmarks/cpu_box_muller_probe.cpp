// What a vector Box-Muller would save on the CPU (issue 33; benchmarks/results/cpu/README.md): a
// transition's 64 float32 momenta for 2048 chains, drawn by stream_momentum.h (glibc's scalar
// logf/sinf/cosf, the CPU build's bits) and by the same Philox words through glibc's libmvec in 16
// AVX-512 lanes, timed, and the normals compared. Not part of the build; x86-64 with AVX-512 and
// glibc's libmvec. From the repository root:
//   g++ -std=c++20 -O3 -ffp-contract=off -mavx2 -mfma -mavx512f -mavx512dq -mavx512bw -mavx512vl \
//       -Icsrc benchmarks/cpu_box_muller_probe.cpp -o /tmp/box_muller_probe -lmvec -lm
//   /tmp/box_muller_probe
#include <immintrin.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include "math/rng/stream_momentum.h"
using namespace fused_hmc;
extern "C" __m512 _ZGVeN16v_logf(__m512);
extern "C" __m512 _ZGVeN16v_sinf(__m512);
extern "C" __m512 _ZGVeN16v_cosf(__m512);
void vec_momentum(const PhiloxStream& s, uint64_t chain, uint64_t t, float* z) {
  // 16 blocks -> 32 (u, v) pairs -> 64 normals, Box-Muller in 16 lanes
  alignas(64) float u[32], v[32];
  const uint64_t first = s.base_block + t * s.blocks_per_transition;
  for (int i = 0; i < 16; ++i) {
    const uint64_t index = first + i;
    const PhiloxBlock r = philox4x32_10({(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)chain, (uint32_t)(chain >> 32)}, (uint32_t)s.seed, (uint32_t)(s.seed >> 32));
    u[2*i] = fma_f32((float)r.x, kTwoPow32Inv, kTwoPow32Inv / 2.0f); v[2*i] = fma_f32((float)r.y, kTwoPow32Inv2Pi, kTwoPow32Inv2Pi / 2.0f);
    u[2*i+1] = fma_f32((float)r.z, kTwoPow32Inv, kTwoPow32Inv / 2.0f); v[2*i+1] = fma_f32((float)r.w, kTwoPow32Inv2Pi, kTwoPow32Inv2Pi / 2.0f);
  }
  for (int h = 0; h < 2; ++h) {
    __m512 U = _mm512_load_ps(u + 16*h), V = _mm512_load_ps(v + 16*h);
    __m512 S = _mm512_sqrt_ps(_mm512_mul_ps(_mm512_set1_ps(-2.0f), _ZGVeN16v_logf(U)));
    alignas(64) float a[16], b[16];
    _mm512_store_ps(a, _mm512_mul_ps(_ZGVeN16v_sinf(V), S)); _mm512_store_ps(b, _mm512_mul_ps(_ZGVeN16v_cosf(V), S));
    for (int i = 0; i < 16; ++i) { z[32*h + 2*i] = a[i]; z[32*h + 2*i + 1] = b[i]; }
  }
}
int main() {
  PhiloxStream s{12345, 0, 17};
  alignas(64) float z[64], w[64]; double acc = 0; int differ = 0;
  const int chains = 2048, T = 200;
  auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < T; ++t) for (int c = 0; c < chains; ++c) { stream_momentum<float>(s, c, t, 64, z); acc += z[5]; }
  auto t1 = std::chrono::steady_clock::now();
  for (int t = 0; t < T; ++t) for (int c = 0; c < chains; ++c) { vec_momentum(s, c, t, w); acc += w[5]; }
  auto t2 = std::chrono::steady_clock::now();
  for (int c = 0; c < 256; ++c) { stream_momentum<float>(s, c, 1, 64, z); vec_momentum(s, c, 1, w); for (int j = 0; j < 64; ++j) differ += z[j] != w[j]; }
  double a = std::chrono::duration<double>(t1 - t0).count() / T * 1e3, b = std::chrono::duration<double>(t2 - t1).count() / T * 1e3;
  printf("scalar glibc: %.3f ms per 2048-chain momentum draw; libmvec: %.3f ms; %d of %d normals differ (%g)\n", a, b, differ, 256*64, acc);
}
