// Error messages of the argument checks, built with std::string and snprintf, and the macros that
// raise them as Python ValueError / TypeError.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace fused_hmc {

// Messages are assembled with std::string, never an ostream: where the extension's compiler is
// newer than the libstdc++ loaded with torch, ostream number formatting compiled into the extension
// crashes (seen on the H200 machine, /opt/gcc against the venv's libstdc++).
namespace message {

inline std::string piece(const char* s) { return s; }
inline std::string piece(const std::string& s) { return s; }
inline std::string piece(int64_t v) { return std::to_string(v); }
inline std::string piece(int v) { return std::to_string(v); }
inline std::string piece(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
inline std::string piece(at::ScalarType t) { return c10::toString(t); }
inline std::string piece(const at::Device& d) { return d.str(); }
inline std::string piece(at::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

template <typename... Parts>
std::string join(const Parts&... parts) {
  return (std::string() + ... + piece(parts));
}

}  // namespace message

#define FHMC_CHECK_VALUE(cond, ...)                                                  \
  if (!(cond))                                                                       \
  throw c10::ValueError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},       \
                        message::join(__VA_ARGS__))
#define FHMC_CHECK_TYPE(cond, ...)                                                   \
  if (!(cond))                                                                       \
  throw c10::TypeError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},        \
                       message::join(__VA_ARGS__))

}  // namespace fused_hmc
