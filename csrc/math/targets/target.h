// The Target concept: what the chain kernels (CPU and CUDA) need to know of a log density.
//
// A Target is a class over the chains' scalar type (`using Scalar = S`), passed to the kernels as a
// template parameter and inlined (no virtual calls, no device function pointers). It holds plain
// pointers and sizes only (it is a kernel parameter), and says how its force f = -grad log p is
// formed, which decides how a chain's coordinates may be spread over threads:
//
//   kCoordinate  f_j from x_j alone and a per-coordinate coefficient c_j the kernel may keep in a
//                register: `S coefficient(int64_t j)`, `S force(S x_j, S c_j)`. A thread holding
//                some coordinates forms their forces without seeing the others.
//   kRow         f_j from row j and the whole position x (visible to every thread of the chain,
//                e.g. in shared memory): `S row_force(int64_t j, const S* x)`.
//   kPosition    the whole gradient at once from the whole position:
//                `S log_density_and_gradient(const S* x, S* grad)` returns log p(x) and writes
//                d log p / dx. Users' models (CppTarget) are of this kind. `kLanes` (a power of
//                two up to 256; above 32 the chain is a block) is the threads a chain takes on
//                CUDA; above one, each calls
//                `S lane_log_density_and_gradient(const S* x, S* grad, int lane)`, its block of
//                the partial sums that log_density_and_gradient adds (math/targets/lane_rows.h).
//
// and:
//   kName            the registry key, as the sample and warmup ops name the target;
//   kQuadratic       U(x) = 0.5 x^T Lambda x for symmetric Lambda: the energy change is summed as
//                    differences (x1 - x0)(f0 + f1) per coordinate (exact for quadratics, no
//                    cancellation); otherwise the kernel sums the kinetic change and adds
//                    2 (U1 - U0) from the log densities;
//   kShifted         the kernels integrate x = q - shift() (the Gaussians' mean), else x = q;
//   kMaxDim          the largest dimension it supports (0: the kernel's limit), kFixedDim the one
//                    dimension it was compiled for (0: any);
//   kTensorNames     the op's target_tensors by position (for messages), each [dim] or [dim, dim]
//                    as kTensorRanks says, in the chains' dtype, contiguous, on q's device
//                    (checked once on the host, ops/chain_request.cpp); a target with
//                    kTensorCount = -1 takes any tensors and checks them itself;
//   make(TargetTensors, dim)  the target from the op's tensors (host side, torch-free).
#pragma once

#include <cstdint>

namespace fused_hmc {

enum class TargetForce { kCoordinate, kRow, kPosition };

// Whether a Target's chains carry the force at their state from one transition to the next (L
// gradient evaluations per transition, not L + 1; math/hmc/transition.h's ForceCarry). A shifted
// target (the Gaussians, x0 = q - mu) evaluates it at every start instead: (x + mu) - mu is not x
// bitwise, so a carried force would change the bits, and its force is one multiply per coordinate.
template <class Target>
constexpr bool carries_force() {
  return !Target::kShifted;
}

// The op's target_tensors and target_scalars as plain views (host side fills it, ops/).
constexpr int kMaxTargetTensors = 32;
constexpr int kMaxTargetScalars = 32;
constexpr int kMaxTensorRank = 8;

struct TargetTensors {
  int count;
  const void* data[kMaxTargetTensors];
  int64_t numel[kMaxTargetTensors];
  int rank[kMaxTargetTensors];
  int64_t shape[kMaxTargetTensors][kMaxTensorRank];
  int scalar_count;
  double scalars[kMaxTargetScalars];
};

}  // namespace fused_hmc
