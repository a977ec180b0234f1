// The gradient-based estimate of the inverse mass (mass_estimator="gradients"), beside Stan's
// estimate from the draws alone (mass_matrix.h, dense_mass.h).
//
// Seyboldt, Carlson & Carpenter (arXiv 2603.18845, nutpie) choose the inverse mass Sigma that
// minimises the Fisher divergence between the target, whitened by Sigma, and a standard normal,
// over affine maps: from the covariance S of a window's draws and the covariance G of the gradients
// of the log density at those draws, Sigma is the symmetric positive definite solution of
// Sigma G Sigma = S,
//   Sigma = S^1/2 (S^1/2 G S^1/2)^-1/2 S^1/2,
// and for a diagonal mass sigma_j = sqrt(S_jj / G_jj). For a Gaussian target the gradient is
// -P (x - mu), so G = P S P and Sigma = P^-1 exactly, whatever the draws: one short window of draws
// far from the posterior's bulk already gives the posterior's covariance, where Stan's estimate needs
// the draws to have spread over the posterior (benchmarks/probes/dense_estimators.py).
//
// The estimate is then regularised as Stan regularises the draws' covariance (mass_matrix.h's
// regularized_variance, dense_mass.h's regularize_covariance). The windows and the pooling over
// chains are the draws' (the chains' geometric mean of each variance for a diagonal mass,
// pooled_dense_covariance for a dense one), applied to the draws and to the gradients alike.
// Host only, as the dense mass.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "../fp/host_device.h"
#include "../fp/rounding.h"

namespace fused_hmc {

// A diagonal coordinate's estimate from its draws' variance and its gradients' variance: NaN or
// infinite when either is not a finite positive number (adapted_inverse_mass then keeps the old).
FHMC_HD double gradient_variance(double draws_variance, double gradients_variance) {
  return sqrt_rn(div_rn(draws_variance, gradients_variance));
}

// The eigen-decomposition of the symmetric a [d, d] (both triangles read) by cyclic Jacobi rotations
// in float64 (Golub & Van Loan, "Matrix Computations", sec. 8.5): a = V diag(values) V^T, column k of
// vectors [d, d] (row-major) the eigenvector of values[k]. Rotations run in a fixed order until the
// off-diagonal mass is below 1e-30 of the diagonal's (squares), at most 64 sweeps.
inline void symmetric_eigen(const double* a, int64_t d, double* values, double* vectors) {
  std::vector<double> w(a, a + d * d);
  for (int64_t i = 0; i < d * d; ++i) vectors[i] = i % (d + 1) == 0 ? 1.0 : 0.0;
  for (int sweep = 0; sweep < 64; ++sweep) {
    double off = 0.0, diagonal = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      diagonal += w[i * d + i] * w[i * d + i];
      for (int64_t j = i + 1; j < d; ++j) off += w[i * d + j] * w[i * d + j];
    }
    if (!(off > 1e-30 * diagonal)) break;  // converged (or not finite: the caller checks)
    for (int64_t p = 0; p < d; ++p) {
      for (int64_t q = p + 1; q < d; ++q) {
        const double apq = w[p * d + q];
        if (apq == 0.0) continue;
        // the rotation J (J_pp = J_qq = c, J_pq = s, J_qp = -s) whose J^T w J has (p, q) zero
        const double theta = (w[q * d + q] - w[p * d + p]) / (2.0 * apq);
        const double t = (theta >= 0.0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
        const double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
        for (int64_t k = 0; k < d; ++k) {  // w J
          const double kp = w[k * d + p], kq = w[k * d + q];
          w[k * d + p] = c * kp - s * kq;
          w[k * d + q] = s * kp + c * kq;
        }
        for (int64_t k = 0; k < d; ++k) {  // J^T (w J)
          const double pk = w[p * d + k], qk = w[q * d + k];
          w[p * d + k] = c * pk - s * qk;
          w[q * d + k] = s * pk + c * qk;
        }
        for (int64_t k = 0; k < d; ++k) {  // V J
          const double kp = vectors[k * d + p], kq = vectors[k * d + q];
          vectors[k * d + p] = c * kp - s * kq;
          vectors[k * d + q] = s * kp + c * kq;
        }
      }
    }
  }
  for (int64_t i = 0; i < d; ++i) values[i] = w[i * d + i];
}

// out [d, d] = V diag(f) V^T, from symmetric_eigen's vectors and f [d].
inline void symmetric_from_eigen(const double* vectors, const double* f, int64_t d, double* out) {
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      double sum = 0.0;
      for (int64_t k = 0; k < d; ++k) sum += vectors[i * d + k] * f[k] * vectors[j * d + k];
      out[i * d + j] = sum;
      out[j * d + i] = sum;
    }
  }
}

// out [d, d] = a b (row-major, d x d each).
inline void square_product(const double* a, const double* b, int64_t d, double* out) {
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      double sum = 0.0;
      for (int64_t k = 0; k < d; ++k) sum += a[i * d + k] * b[k * d + j];
      out[i * d + j] = sum;
    }
  }
}

// Eigenvalues below this fraction of the largest count as zero: a window of n <= d draws (one chain's
// early windows) leaves S singular, and the estimate then lives in the span of the draws (a
// pseudo-inverse), which the regularisation completes.
constexpr double kEigenFloor = 1e-15;

// The dense estimate Sigma = S^1/2 (S^1/2 G S^1/2)^-1/2 S^1/2 into out [d, d], from the draws'
// covariance s [d, d] and the gradients' covariance g [d, d] (before regularisation). False, with out
// unspecified, when either is not finite or S has no positive eigenvalue.
inline bool gradient_dense_covariance(const double* s, const double* g, int64_t d, double* out) {
  for (int64_t i = 0; i < d * d; ++i) {
    if (!(std::isfinite(s[i]) && std::isfinite(g[i]))) return false;
  }
  std::vector<double> values(d), vectors(d * d), f(d), root(d * d), m(d * d), t(d * d);
  symmetric_eigen(s, d, values.data(), vectors.data());
  double largest = 0.0;
  for (double v : values) largest = std::fmax(largest, v);
  if (!(largest > 0.0 && std::isfinite(largest))) return false;
  for (int64_t k = 0; k < d; ++k) f[k] = values[k] > kEigenFloor * largest ? sqrt(values[k]) : 0.0;
  symmetric_from_eigen(vectors.data(), f.data(), d, root.data());  // S^1/2
  square_product(root.data(), g, d, t.data());
  square_product(t.data(), root.data(), d, m.data());  // S^1/2 G S^1/2
  for (int64_t i = 0; i < d; ++i) {  // symmetric up to rounding: make it exactly so
    for (int64_t j = 0; j < i; ++j) m[i * d + j] = m[j * d + i] = 0.5 * (m[i * d + j] + m[j * d + i]);
  }
  symmetric_eigen(m.data(), d, values.data(), vectors.data());
  largest = 0.0;
  for (double v : values) largest = std::fmax(largest, v);
  if (!(largest > 0.0 && std::isfinite(largest))) return false;
  for (int64_t k = 0; k < d; ++k) {
    f[k] = values[k] > kEigenFloor * largest ? 1.0 / sqrt(values[k]) : 0.0;
  }
  symmetric_from_eigen(vectors.data(), f.data(), d, m.data());  // (S^1/2 G S^1/2)^-1/2
  square_product(root.data(), m.data(), d, t.data());
  square_product(t.data(), root.data(), d, out);
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < i; ++j) {
      out[i * d + j] = out[j * d + i] = 0.5 * (out[i * d + j] + out[j * d + i]);
    }
  }
  return true;
}

}  // namespace fused_hmc
