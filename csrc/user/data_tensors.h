// The evaluation module's data: the tensors and scalars fused_hmc/cpp_data.to_arguments passes,
// checked against the generated field table and turned into the chain ops' TargetTensors views, so
// the generated data_from_views is the one place Data is filled. The Python side already converted
// every tensor, so a failure here is a bug there, named.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <vector>

#include "math/targets/target.h"

namespace fused_hmc_user_eval {

// The row-major elements of data tensor `name`, which must be contiguous, of element type T, on
// `device`, with `ndim` dimensions.
template <typename T>
const T* data_tensor_pointer(const at::Tensor& t, const char* name, int64_t ndim,
                             const at::Device& device) {
  TORCH_CHECK(t.dim() == ndim, "CppTarget data '", name, "': expected ", ndim,
              " dimensions, got ", t.dim());
  TORCH_CHECK(t.scalar_type() == c10::CppTypeToScalarType<T>::value, "CppTarget data '", name,
              "': expected ", c10::CppTypeToScalarType<T>::value, ", got ", t.scalar_type());
  TORCH_CHECK(t.device() == device, "CppTarget data '", name, "': on ", t.device(),
              ", the positions on ", device);
  TORCH_CHECK(t.is_contiguous(), "CppTarget data '", name, "' must be contiguous");
  return t.data_ptr<T>();
}

inline void check_data_counts(const std::vector<at::Tensor>& tensors,
                              const std::vector<double>& floats, const std::vector<int64_t>& ints,
                              size_t num_tensors, size_t num_floats, size_t num_ints) {
  TORCH_CHECK(tensors.size() == num_tensors && floats.size() == num_floats &&
                  ints.size() == num_ints,
              "CppTarget data: this module takes ", num_tensors, " tensors, ", num_floats,
              " floats and ", num_ints, " ints, got ", tensors.size(), ", ", floats.size(),
              " and ", ints.size());
}

// Data from the module's arguments (ints are exact as doubles: CppTarget refuses beyond 2^53).
inline fused_hmc_user::Data make_data(const std::vector<at::Tensor>& tensors,
                                      const std::vector<double>& floats,
                                      const std::vector<int64_t>& ints, const at::Device& device) {
  using fused_hmc_user::kDataFloats;
  using fused_hmc_user::kDataInts;
  using fused_hmc_user::kDataTensors;
  check_data_counts(tensors, floats, ints, kDataTensors, kDataFloats, kDataInts);
  fused_hmc::TargetTensors views{};
  views.count = kDataTensors;
  for (int i = 0; i < kDataTensors; ++i) {
    const auto& spec = fused_hmc_user::kDataTensorSpecs[i];
    const at::Tensor& t = tensors[i];
    views.data[i] = spec.integer ? static_cast<const void*>(data_tensor_pointer<int64_t>(
                                       t, spec.name, spec.rank, device))
                                 : static_cast<const void*>(data_tensor_pointer<
                                       fused_hmc_user::Scalar>(t, spec.name, spec.rank, device));
    views.numel[i] = t.numel();
    views.rank[i] = static_cast<int>(t.dim());
    for (int k = 0; k < t.dim(); ++k) views.shape[i][k] = t.size(k);
  }
  views.scalar_count = kDataFloats + kDataInts;
  for (int i = 0; i < kDataFloats; ++i) views.scalars[i] = floats[i];
  for (int i = 0; i < kDataInts; ++i) views.scalars[kDataFloats + i] = static_cast<double>(ints[i]);
  return fused_hmc_user::data_from_views(views);
}

}  // namespace fused_hmc_user_eval
