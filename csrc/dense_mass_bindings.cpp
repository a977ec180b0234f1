// math/hmc/dense_mass.h's and gradient_mass.h's functions on the host (the Python bindings module
// exposes them as dense_* and gradient_*): for tests/unit/test_dense_mass.py and
// test_gradient_mass.py to check against torch, and for a dense warm-up pooled over several
// processes (fused_hmc/sampling/pooled_ranks.py: each rank folds its chains' window co-moments, and
// every rank forms the pooled covariance from all ranks' moments). Inputs are copied to contiguous CPU
// tensors of the dtype named; every loop is the kernels' own.
#include <torch/extension.h>

#include <tuple>
#include <vector>

#include "math/hmc/dense_mass.h"
#include "math/hmc/gradient_mass.h"

namespace fused_hmc {
namespace {

using at::Tensor;

Tensor contiguous_cpu(const Tensor& t, at::ScalarType dtype) {
  return t.to(at::kCPU, dtype).contiguous();
}

// (ok, L) of the symmetric a [d, d] (float64).
std::tuple<bool, Tensor> cholesky(const Tensor& a) {
  Tensor out = contiguous_cpu(a, at::kDouble).clone();
  const bool ok = cholesky_in_place(out.data_ptr<double>(), out.size(0));
  return {ok, out};
}

// Rows of z [n, d] (factor's dtype) mapped by the dense mass's momentum_row, velocity_row or
// kinetic_row (with p_end), as a transition forms them.
template <typename scalar_t>
Tensor rows_of(const Tensor& factor, const Tensor& z, const Tensor* p_end, int which) {
  const Tensor l = contiguous_cpu(factor, factor.scalar_type());
  Tensor out = contiguous_cpu(z, factor.scalar_type()).clone();
  Tensor other = p_end ? contiguous_cpu(*p_end, factor.scalar_type()) : out;
  const int64_t n = out.size(0), d = out.size(1);
  std::vector<scalar_t> velocity(d);
  std::vector<double> work(d);
  const DenseMass<scalar_t> mass{l.data_ptr<scalar_t>(), d, velocity.data(), work.data()};
  for (int64_t i = 0; i < n; ++i) {
    scalar_t* row = out.data_ptr<scalar_t>() + i * d;
    const scalar_t* v = nullptr;
    if (which == 0) {
      mass.momentum_row(row);
      continue;
    }
    v = which == 1 ? mass.velocity_row(row)
                   : mass.kinetic_row(row, other.data_ptr<scalar_t>() + i * d);
    for (int64_t j = 0; j < d; ++j) row[j] = v[j];
  }
  return out;
}

Tensor dense_rows(const Tensor& factor, const Tensor& z, const Tensor* p_end, int which) {
  TORCH_CHECK(factor.scalar_type() == at::kFloat || factor.scalar_type() == at::kDouble,
              "factor must be float32 or float64");
  if (factor.scalar_type() == at::kFloat) return rows_of<float>(factor, z, p_end, which);
  return rows_of<double>(factor, z, p_end, which);
}

// Each chain's state q [B, d] folded into its window moments mean [B, d] and m2 [B, d, d] (float64,
// contiguous, in place) with weight inv_count, as the warmup op folds it (comoment_update).
void fold_window(at::Tensor& mean, at::Tensor& m2, const Tensor& q, double inv_count) {
  TORCH_CHECK(mean.is_contiguous() && m2.is_contiguous() && mean.scalar_type() == at::kDouble &&
                  m2.scalar_type() == at::kDouble && !mean.is_cuda(),
              "mean and m2 must be contiguous float64 CPU tensors");
  const Tensor x = contiguous_cpu(q, at::kDouble);
  const int64_t batch = x.size(0), d = x.size(1);
  TORCH_CHECK(mean.sizes() == at::IntArrayRef({batch, d}) &&
                  m2.sizes() == at::IntArrayRef({batch, d, d}),
              "mean must be [B, d] and m2 [B, d, d] for q [B, d]");
  std::vector<double> scratch(2 * d);
  for (int64_t b = 0; b < batch; ++b) {
    comoment_update(mean.data_ptr<double>() + b * d, m2.data_ptr<double>() + b * d * d,
                    x.data_ptr<double>() + b * d, d, inv_count, scratch.data());
  }
}

// The window's (mean [d], co-moments [d, d]) of the draws x [n, d] (float64), in order.
std::tuple<Tensor, Tensor> comoments(const Tensor& x) {
  const Tensor in = contiguous_cpu(x, at::kDouble);
  const int64_t n = in.size(0), d = in.size(1);
  Tensor mean = at::zeros({d}, in.options()), m2 = at::zeros({d, d}, in.options());
  std::vector<double> scratch(2 * d);
  for (int64_t i = 0; i < n; ++i) {
    comoment_update(mean.data_ptr<double>(), m2.data_ptr<double>(),
                    in.data_ptr<double>() + i * d, d, 1.0 / static_cast<double>(i + 1),
                    scratch.data());
  }
  return {mean, m2};
}

Tensor regularized(const Tensor& s, double n) {
  Tensor out = contiguous_cpu(s, at::kDouble).clone();
  regularize_covariance(out.data_ptr<double>(), n, out.size(0));
  return out;
}

// (changed, factor): adapt_dense_factor of cov [d, d] onto a copy of factor (its dtype).
std::tuple<bool, Tensor> adapted_factor(const Tensor& cov, const Tensor& factor) {
  Tensor c = contiguous_cpu(cov, at::kDouble).clone();
  Tensor out = contiguous_cpu(factor, factor.scalar_type()).clone();
  bool changed = false;
  AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "adapted_factor", [&] {
    changed = adapt_dense_factor(c.data_ptr<double>(), c.size(0), out.data_ptr<scalar_t>());
  });
  return {changed, out};
}

// The pooled covariance (before regularisation) of windows of n draws with means mean [B, d] and
// co-moments m2 [B, d, d].
Tensor pooled(const Tensor& mean, const Tensor& m2, double n) {
  const Tensor means = contiguous_cpu(mean, at::kDouble), in = contiguous_cpu(m2, at::kDouble);
  const int64_t batch = in.size(0), d = in.size(1);
  Tensor out = at::empty({d, d}, in.options());
  pooled_dense_covariance(means.data_ptr<double>(), in.data_ptr<double>(), batch, n, d,
                          out.data_ptr<double>());
  return out;
}

// (values [d], vectors [d, d]) of the symmetric a [d, d] (float64).
std::tuple<Tensor, Tensor> eigen(const Tensor& a) {
  const Tensor in = contiguous_cpu(a, at::kDouble);
  const int64_t d = in.size(0);
  Tensor values = at::empty({d}, in.options()), vectors = at::empty({d, d}, in.options());
  symmetric_eigen(in.data_ptr<double>(), d, values.data_ptr<double>(), vectors.data_ptr<double>());
  return {values, vectors};
}

// (ok, Sigma) from the draws' covariance s and the gradients' covariance g ([d, d] float64).
std::tuple<bool, Tensor> gradient_covariance(const Tensor& s, const Tensor& g) {
  const Tensor a = contiguous_cpu(s, at::kDouble), b = contiguous_cpu(g, at::kDouble);
  Tensor out = at::empty_like(a);
  const bool ok = gradient_dense_covariance(a.data_ptr<double>(), b.data_ptr<double>(), a.size(0),
                                            out.data_ptr<double>());
  return {ok, out};
}

}  // namespace

void add_dense_mass_bindings(pybind11::module_& m) {
  m.def("dense_cholesky", &cholesky);
  m.def("dense_momentum", [](const Tensor& l, const Tensor& z) {
    return dense_rows(l, z, nullptr, 0);
  });
  m.def("dense_velocity", [](const Tensor& l, const Tensor& p) {
    return dense_rows(l, p, nullptr, 1);
  });
  m.def("dense_kinetic_coefficients", [](const Tensor& l, const Tensor& p0, const Tensor& p_end) {
    return dense_rows(l, p0, &p_end, 2);
  });
  m.def("dense_comoments", &comoments);
  m.def("dense_regularized", &regularized);
  m.def("dense_adapted_factor", &adapted_factor);
  m.def("dense_pooled_covariance", &pooled);
  m.def("dense_fold_window", &fold_window);
  m.def("gradient_eigen", &eigen);
  m.def("gradient_dense_covariance", &gradient_covariance);
}

}  // namespace fused_hmc
