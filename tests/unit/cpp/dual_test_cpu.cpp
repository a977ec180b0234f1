// CPU test extension over csrc/math/autodiff/dual.h (tests/unit/test_dual.py): the shared checks,
// and the same functions on packs of chains (Dual<Pack, 2>, cpu/simd/pack_functions.h), whose lane
// l must hold the bits of element l's scalar evaluation.
#include <algorithm>

#include "cpu/simd/pack_functions.h"
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

// ---- packs of chains: elements [i0, i0 + lanes) in the lanes of one pack ----
template <class T>
using PackOf = fused_hmc::simd::Pack<T, fused_hmc::simd::kLanesOf<T>>;

template <class T>
PackOf<T> load_pack(const T* x, int64_t i0, int64_t n) {
  PackOf<T> p;
  for (int l = 0; l < PackOf<T>::kLanes; ++l) p.set(l, x[std::min(i0 + l, n - 1)]);
  return p;
}

template <class T>
void store_rows(const PackOf<T>* rows, int count, int64_t i0, T* out, int64_t n) {
  for (int r = 0; r < count; ++r) {
    for (int l = 0; l < PackOf<T>::kLanes && i0 + l < n; ++l) out[r * n + i0 + l] = rows[r][l];
  }
}

// out[0..4): plain f(a, b); f(Dual a, Dual b): value, d/da, d/db (the rows of binary_all a pack's
// duals have: a user's model mixes them with scalars only, never with a plain pack).
template <class P, class F>
void lanewise_binary_all(const F& f, P a, P b, P* out) {
  fused_hmc::Dual<P, 2> ad(a), bd(b);
  ad.d[0] = P(1);
  bd.d[1] = P(1);
  const auto plain = f(a, b);
  const auto dd = f(ad, bd);
  out[0] = fused_hmc_user::value_of<P>(plain);
  out[1] = fused_hmc_user::value_of<P>(dd);
  out[2] = fused_hmc_user::slope_of<P>(dd, 0);
  out[3] = fused_hmc_user::slope_of<P>(dd, 1);
}

template <class P>
void lanewise_binary_at(int op, P a, P b, P* out) {
  using namespace fused_hmc_user;
  switch (op) {
#define FHMC_TEST_CASE(name, expr)                                                            \
  case k_##name:                                                                              \
    lanewise_binary_all([](const auto& a, const auto& b) { return expr; }, a, b, out); \
    break;
    FHMC_TEST_LANEWISE_BINARY_OPS(FHMC_TEST_CASE)
#undef FHMC_TEST_CASE
    default:
      TORCH_CHECK_VALUE(false, "binary_packs: not a lane-wise operation");
  }
}

// x [n] -> [4, n]: unary's rows, computed in packs.
torch::Tensor unary_packs(const std::string& name, torch::Tensor x) {
  const int op = dual_test::find(dual_test::unary_names(), name, "unary");
  dual_test::check_floating(x, "x");
  x = x.contiguous();
  auto out = torch::empty({4, x.numel()}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "unary_packs", [&] {
    const int64_t n = x.numel();
    for (int64_t i0 = 0; i0 < n; i0 += PackOf<scalar_t>::kLanes) {
      PackOf<scalar_t> rows[4];
      fused_hmc_user::unary_at(op, load_pack(x.data_ptr<scalar_t>(), i0, n), rows);
      store_rows(rows, 4, i0, out.data_ptr<scalar_t>(), n);
    }
  });
  return out;
}

// a, b [n] -> [4, n]: binary's first four rows, computed in packs.
torch::Tensor binary_packs(const std::string& name, torch::Tensor a, torch::Tensor b) {
  const int op = dual_test::find(dual_test::binary_names(), name, "binary");
  dual_test::check_floating(a, "a");
  TORCH_CHECK_VALUE(b.sizes() == a.sizes() && b.scalar_type() == a.scalar_type(),
                    "b must match a's shape and dtype");
  a = a.contiguous();
  b = b.contiguous();
  auto out = torch::empty({4, a.numel()}, a.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "binary_packs", [&] {
    const int64_t n = a.numel();
    for (int64_t i0 = 0; i0 < n; i0 += PackOf<scalar_t>::kLanes) {
      PackOf<scalar_t> rows[4];
      lanewise_binary_at(op, load_pack(a.data_ptr<scalar_t>(), i0, n),
                         load_pack(b.data_ptr<scalar_t>(), i0, n), rows);
      store_rows(rows, 4, i0, out.data_ptr<scalar_t>(), n);
    }
  });
  return out;
}

void add_pack_functions(pybind11::module_& m) {
  m.def("unary_packs", &unary_packs);
  m.def("binary_packs", &binary_packs);
  m.def("pack_lanes", [](bool float64) {
    return float64 ? PackOf<double>::kLanes : PackOf<float>::kLanes;
  });
}

}  // namespace

FHMC_DUAL_TEST_MODULE(CpuBackend, add_pack_functions)
