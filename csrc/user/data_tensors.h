// What the generated make_data (fused_hmc/cpp_target.py) checks before it takes a data tensor's
// pointer: the Python side already converted the tensor, so a failure here is a bug there, named.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <vector>

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

}  // namespace fused_hmc_user_eval
