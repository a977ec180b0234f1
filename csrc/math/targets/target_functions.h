// What a user's log density (docs/TARGETS.md) sees: FUSED_HMC_HD, fused_hmc::Rows, and the
// functions exp log log1p expm1 sqrt pow abs fabs tanh sin cos lgamma fmin fmax fma log_sum_exp
// sigmoid log_sigmoid softplus, resolving unqualified for float, double and Dual<float|double, W>,
// under g++ and nvcc
// (host and device) alike. Plain versions: scalar_functions.h; dual versions: dual.h. Also
// where(cond, a, b), the branch-free choice (cond ? a : b for a bool; lane by lane for a pack of
// chains' mask, cpu/simd/pack.h, by argument-dependent lookup), and digamma of float and double
// (lgamma's derivative, in TorchModel's gradients; no dual form).
//
// How user code is wrapped (the CppTarget code generator does exactly this):
//
//   #include "math/targets/target_functions.h"     // (path from csrc/) this header and nothing
//   else <the generated Data struct>            // anywhere; it only holds pointers, shapes,
//   scalars namespace fused_hmc_user {
//   #line 1 "<model file name>"            // so compiler messages carry the user's line numbers
//   <user source, verbatim>
//   }  // namespace fused_hmc_user
//
// and calls fused_hmc_user::log_density<T>(x, data) with T = float or double for values, and
// fused_hmc::value_and_gradient<W>(f, x, DIM, xd, grad) with f calling
// fused_hmc_user::log_density<fused_hmc::Dual<T, W>>(xd, data) for gradients (dual.h).
//
// Why a namespace of using-declarations: they hide the C library's global exp/log/... inside
// fused_hmc_user, so a call like exp(float) cannot be ambiguous between ::exp and std::exp
// overloads, nor silently promote to double; Dual arguments reach dual.h by argument-dependent
// lookup too. Do not add `using namespace fused_hmc;` around user code: a using-directive puts the
// names beside the global ones, where float calls become ambiguous. A user's `using namespace std;`
// is harmless (the declarations here are found first). Names not listed (erf, atan, floor, ...)
// fall through to the C library: fine for float/double, a compile error for a Dual.
#pragma once

#include <stdint.h>

#include "../autodiff/dual.h"
#include "lane_rows.h"  // fused_hmc::Rows, for a model over lanes (log_density_rows)
#include "../fp/host_device.h"
#include "../fp/scalar_functions.h"

#define FUSED_HMC_HD FHMC_HD

namespace fused_hmc_user {
using fused_hmc::target_math::abs;
using fused_hmc::target_math::cos;
using fused_hmc::target_math::digamma;
using fused_hmc::target_math::exp;
using fused_hmc::target_math::expm1;
using fused_hmc::target_math::fabs;
using fused_hmc::target_math::fma;
using fused_hmc::target_math::fmax;
using fused_hmc::target_math::fmin;
using fused_hmc::target_math::lgamma;
using fused_hmc::target_math::log;
using fused_hmc::target_math::log1p;
using fused_hmc::target_math::log_sigmoid;
using fused_hmc::target_math::log_sum_exp;
using fused_hmc::target_math::pow;
using fused_hmc::target_math::sigmoid;
using fused_hmc::target_math::sin;
using fused_hmc::target_math::softplus;
using fused_hmc::target_math::sqrt;
using fused_hmc::target_math::tanh;
using fused_hmc::where;
}  // namespace fused_hmc_user
