"""Evaluate the models' C++ ``source`` (and ``gradient_source``) with g++, outside the extension.

One small C++ program holds every model in its own namespace, with a ``Data`` struct laid out as
TARGETS.md states (a tensor: ``const S* name``, ``int64_t name_shape[k]``, ``int64_t name_size``; a
float: ``S name``; an int: ``int64_t name``), explicit instantiations for S = float (so the float
path type-checks too) and a main that reads each model's data and points from binary files and
writes, in double, log_density, its gradient by the project's dual numbers
(fused_hmc::value_and_gradient, as the kernels take it) and log_density_and_gradient where the
model has one. The sources are wrapped as CppTarget wraps them:
csrc/math/targets/target_functions.h, then namespace fused_hmc_user.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import torch

CSRC = Path(__file__).resolve().parents[2] / "csrc"

# The wrapping CppTarget generates (csrc/math/targets/target_functions.h's comment): the header,
# then the user's source inside namespace fused_hmc_user (here one nested namespace per model).
PREAMBLE = r"""
#include "math/targets/target_functions.h"
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

template <typename V> std::vector<V> read_file(const std::string& path) {
  std::vector<V> out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) { std::fprintf(stderr, "cannot open %s\n", path.c_str()); std::exit(2); }
  V v;
  while (std::fread(&v, sizeof(V), 1, f) == 1) out.push_back(v);
  std::fclose(f);
  return out;
}
void write_file(const std::string& path, const std::vector<double>& values) {
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(values.data(), sizeof(double), values.size(), f);
  std::fclose(f);
}
"""


def _fields(data) -> tuple[str, str]:
    """(struct members, statements filling ``Data<double> d`` in main) for a model's data."""
    members, fill = [], []
    for name, value in data.items():
        if isinstance(value, torch.Tensor):
            elem = "int64_t" if value.dtype == torch.int64 else "S"
            read = "int64_t" if value.dtype == torch.int64 else "double"
            shape = list(value.shape)
            members.append(f"const {elem}* {name}; int64_t {name}_shape[{max(len(shape), 1)}]; "
                           f"int64_t {name}_size;")
            fill.append(f"static std::vector<{read}> v_{name} = read_file<{read}>(dir + "
                        f"\"/{name}.bin\"); d.{name} = v_{name}.data(); d.{name}_size = "
                        f"{value.numel()};")
            fill += [f"d.{name}_shape[{k}] = {n};" for k, n in enumerate(shape)]
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"data[{name!r}]: unsupported {type(value).__name__}")
        elif isinstance(value, int):
            members.append(f"int64_t {name};")
            fill.append(f"d.{name} = {value};")
        else:
            members.append(f"S {name};")
            fill.append(f"d.{name} = {float(value).hex()};")
    return "\n  ".join(members), "\n    ".join(fill)


def _lane_sums(model) -> str:
    """For a model in the rows form (it defines log_density_rows): log_density (and
    log_density_and_gradient) as the sum of 4 strided shares, in order (not the kernels' 32
    partials in a pairwise tree: an independent reading)."""
    if "log_density_rows" not in model.source:
        return ""
    lanes, dim = 4, model.dim
    out = f"""
template <typename T, typename D> T log_density(const T* x, const D& d) {{
  T lp = 0.0;
  for (int64_t l = 0; l < {lanes}; ++l) lp += log_density_rows(x, d, fused_hmc::Rows{{l, {lanes}}});
  return lp;
}}
"""
    if model.gradient_source is not None:
        out += f"""
template <typename T, typename D> T log_density_and_gradient(const T* x, T* grad, const D& d) {{
  T lp = 0.0, g[{dim}];
  for (int64_t j = 0; j < {dim}; ++j) grad[j] = 0.0;
  for (int64_t l = 0; l < {lanes}; ++l) {{
    lp += log_density_and_gradient_rows(x, g, d, fused_hmc::Rows{{l, {lanes}}});
    for (int64_t j = 0; j < {dim}; ++j) grad[j] += g[j];
  }}
  return lp;
}}
"""
    return out


def program(models: dict) -> str:
    """The C++ program text for ``models`` (key -> Model); argv[1] = key, argv[2] = folder."""
    parts, dispatch = [PREAMBLE], []
    for key, model in models.items():
        members, fill = _fields(model.data)
        ns, dim = f"fused_hmc_user::m_{key}", model.dim
        dual_f, dual_d = (f"fused_hmc::Dual<{s}, fused_hmc::dual_width({dim})>"
                          for s in ("float", "double"))
        parts.append(f"#define FUSED_HMC_DIM {dim}\n"
                     f"namespace fused_hmc_user {{ namespace m_{key} {{\n"
                     f"template <typename S> struct Data {{\n  {members}\n}};\n"
                     f"{model.source}\n{model.gradient_source or ''}\n"
                     f"{_lane_sums(model)}}} }}\n#undef FUSED_HMC_DIM")
        # the float path type-checks too: values, duals and the hand-written gradient
        parts.append(f"template float {ns}::log_density<float, {ns}::Data<float>>("
                     f"const float*, const {ns}::Data<float>&);")
        parts.append(f"template {dual_f} {ns}::log_density<{dual_f}, {ns}::Data<float>>("
                     f"const {dual_f}*, const {ns}::Data<float>&);")
        hand = ""
        if model.gradient_source is not None:
            parts.append(f"template float {ns}::log_density_and_gradient<float, "
                         f"{ns}::Data<float>>(const float*, float*, const {ns}::Data<float>&);")
            hand = f"""
    std::vector<double> lh(n), gh(x.size());
    for (size_t i = 0; i < n; ++i)
      lh[i] = {ns}::log_density_and_gradient(x.data() + i * {dim}, gh.data() + i * {dim}, d);
    write_file(dir + "/lp_hand.bin", lh);
    write_file(dir + "/grad_hand.bin", gh);"""
        dispatch.append(f"""
  if (key == "{key}") {{
    {ns}::Data<double> d;
    {fill}
    std::vector<double> x = read_file<double>(dir + "/x.bin");
    const size_t n = x.size() / {dim};
    std::vector<double> lp(n), ld(n), gd(x.size());
    for (size_t i = 0; i < n; ++i) lp[i] = {ns}::log_density(x.data() + i * {dim}, d);
    write_file(dir + "/lp.bin", lp);
    std::vector<{dual_d}> xd({dim});
    auto f = [&d](const {dual_d}* q) {{ return {ns}::log_density(q, d); }};
    for (size_t i = 0; i < n; ++i)
      ld[i] = fused_hmc::value_and_gradient<fused_hmc::dual_width({dim})>(
          f, x.data() + i * {dim}, {dim}, xd.data(), gd.data() + i * {dim});
    write_file(dir + "/lp_dual.bin", ld);
    write_file(dir + "/grad_dual.bin", gd);{hand}
    return 0;
  }}""")
    parts.append("int main(int argc, char** argv) {\n  if (argc != 3) return 2;\n"
                 "  const std::string key = argv[1], dir = argv[2];" + "".join(dispatch)
                 + "\n  return 3;\n}\n")
    return "\n".join(parts)


def compile_program(models: dict, folder: Path) -> Path:
    """Compile ``program(models)`` with g++ (-Wall -Werror) in ``folder``; returns the binary."""
    compiler = shutil.which("g++")
    if compiler is None:
        raise RuntimeError("g++ is needed to evaluate the models' C++ sources")
    src, exe = folder / "models.cpp", folder / "models"
    src.write_text(program(models))
    result = subprocess.run([compiler, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{CSRC}",
                             str(src), "-o", str(exe)], capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"the models' C++ does not compile:\n{result.stderr[-4000:]}")
    return exe


def evaluate(exe: Path, key: str, model, x: torch.Tensor, folder: Path) -> dict:
    """Run model ``key``'s C++ at x [n, dim] (float64). Returns float64 tensors: "lp" [n]
    (log_density), "lp_dual" [n] and "grad_dual" [n, dim] (value_and_gradient over Duals), and,
    with a gradient_source, "lp_hand" [n] and "grad_hand" [n, dim] (log_density_and_gradient)."""
    run = folder / key
    run.mkdir(exist_ok=True)
    for name, value in model.data.items():
        if isinstance(value, torch.Tensor):
            value.detach().cpu().contiguous().numpy().tofile(run / f"{name}.bin")
    x.detach().to(torch.float64).cpu().contiguous().numpy().tofile(run / "x.bin")
    subprocess.run([str(exe), key, str(run)], check=True)
    names = ["lp", "lp_dual", "grad_dual"]
    if model.gradient_source is not None:
        names += ["lp_hand", "grad_hand"]
    out = {n: torch.from_numpy(np.fromfile(run / f"{n}.bin", dtype=np.float64)) for n in names}
    for n in names:
        if n.startswith("grad"):
            out[n] = out[n].reshape(x.shape)
    return out
