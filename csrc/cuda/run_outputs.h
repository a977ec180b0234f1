// Host side (g++): the launch view of a long run's output tensors, shared by run_chains and
// run_chains_tuned (their shapes were checked by check_run_chains_inputs).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "launch_params.h"

namespace fused_hmc {

template <typename scalar_t>
RunOutputs<scalar_t> run_outputs(const at::Tensor& samples, const at::Tensor& mean,
                                 const at::Tensor& m2, const at::Tensor& accept_count,
                                 const at::Tensor& accept_prob_sum, int64_t thin,
                                 int64_t kept_before) {
  RunOutputs<scalar_t> out{};
  if (samples.numel() > 0) {
    DrawSink<scalar_t>& sink = out.sink;
    sink.samples = samples.data_ptr<scalar_t>();
    sink.chain_stride = samples.stride(0);
    sink.draw_stride = samples.stride(1);
    sink.dim_stride = samples.stride(2);
    sink.vectorized = sink.dim_stride == 1 &&
                      rows_vectorizable(sink.samples, samples.size(2), sizeof(scalar_t)) &&
                      sink.chain_stride % 4 == 0 && sink.draw_stride % 4 == 0;
  }
  out.mean = mean.data_ptr<double>();
  out.m2 = m2.data_ptr<double>();
  out.accept_count = accept_count.data_ptr<int64_t>();
  out.accept_prob_sum = accept_prob_sum.data_ptr<double>();
  out.thin = thin;
  out.kept_before = kept_before;
  return out;
}

}  // namespace fused_hmc
