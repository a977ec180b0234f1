#include "dense_window_end.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "../math/hmc/dense_mass_update.h"

namespace fused_hmc {

void end_dense_window(const at::Tensor& inv_mass, const at::Tensor& window_mean,
                      const at::Tensor& window_m2, double draws, bool pooled) {
  const at::Tensor mean = window_mean.cpu().contiguous(), m2 = window_m2.cpu().contiguous();
  at::Tensor factors = inv_mass.cpu().contiguous();
  const int64_t batch = mean.size(0), d = mean.size(1);
  const double* means = mean.data_ptr<double>();
  const double* comoments = m2.data_ptr<double>();
  AT_DISPATCH_FLOATING_TYPES(factors.scalar_type(), "fused_hmc::end_dense_window", [&] {
    scalar_t* factor = factors.data_ptr<scalar_t>();
    if (pooled) {
      adapt_dense_window(DenseWindowMoments{means, comoments}, {}, batch, true, draws, d, factor);
      return;
    }
    at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        adapt_dense_window(DenseWindowMoments{means + b * d, comoments + b * d * d}, {}, 1, false,
                           draws, d, factor + b * d * d);
      }
    });
  });
  inv_mass.copy_(factors);
  window_mean.zero_();
  window_m2.zero_();
}

}  // namespace fused_hmc
