// CPU test extension over csrc/math/autodiff/dual.h (tests/unit/test_dual.py).
#include "dual_test_bindings.h"

namespace {

struct CpuBackend {
  template <class T>
  static void run_unary(int op, const T* x, T* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      T row[4];
      fused_hmc_user::unary_at(op, x[i], row);
      for (int r = 0; r < 4; ++r) out[r * n + i] = row[r];
    }
  }
  template <class T>
  static void run_binary(int op, const T* a, const T* b, T* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      T row[8];
      fused_hmc_user::binary_at(op, a[i], b[i], row);
      for (int r = 0; r < 8; ++r) out[r * n + i] = row[r];
    }
  }
  template <class T>
  static void run_gradient(int width, int model, const T* x, int dim,
                           const fused_hmc_user::TestData<T>& data, T* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      fused_hmc_user::gradient_at_width(width, model, x + i * dim, dim, data, out + i * (2 + dim));
  }
};

}  // namespace

FHMC_DUAL_TEST_MODULE(CpuBackend)
