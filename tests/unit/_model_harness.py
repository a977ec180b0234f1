"""Evaluate the models' C++ ``source`` (and ``gradient_source``) with g++, outside the extension.

One small C++ program holds every model in its own namespace, with a ``Data`` struct laid out as
TARGETS.md states (a tensor: ``const S* name``, ``int64_t name_shape[k]``, ``int64_t name_size``; a
float: ``S name``; an int: ``int64_t name``), explicit instantiations for S = float (so the float
path type-checks too) and a main that reads each model's data and points from binary files and
writes log_density (and log_density_and_gradient) in double. The math names TARGETS.md promises
come from PREAMBLE: the double/float overloads of <cmath> and the four helpers, written out here.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import torch

PREAMBLE = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>
#define FUSED_HMC_HD
using std::exp; using std::log; using std::log1p; using std::expm1; using std::sqrt;
using std::pow; using std::abs; using std::tanh; using std::sin; using std::cos; using std::lgamma;
using std::fmin; using std::fmax;
template <typename T> T log_sum_exp(T a, T b) {
  const T m = a > b ? a : b;
  return m + log1p(exp(-abs(a - b)));
}
template <typename T> T softplus(T x) { return x > T(0) ? x + log1p(exp(-x)) : log1p(exp(x)); }
template <typename T> T sigmoid(T x) { return T(1) / (T(1) + exp(-x)); }
template <typename T> T log_sigmoid(T x) { return -softplus(-x); }

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


def program(models: dict) -> str:
    """The C++ program text for ``models`` (key -> Model); argv[1] = key, argv[2] = folder."""
    parts, dispatch = [PREAMBLE], []
    for key, model in models.items():
        members, fill = _fields(model.data)
        grad = model.gradient_source is not None
        parts.append(f"namespace m_{key} {{\ntemplate <typename S> struct Data {{\n  {members}\n}};"
                     f"\n{model.source}\n{model.gradient_source or ''}\n}}  // namespace m_{key}")
        parts.append(f"template float m_{key}::log_density<float, m_{key}::Data<float>>("
                     f"const float*, const m_{key}::Data<float>&);")
        if grad:
            parts.append(f"template float m_{key}::log_density_and_gradient<float, "
                         f"m_{key}::Data<float>>(const float*, float*, "
                         f"const m_{key}::Data<float>&);")
        grad_call = (f"""
    std::vector<double> lg(n), g(x.size());
    for (size_t i = 0; i < n; ++i)
      lg[i] = m_{key}::log_density_and_gradient(x.data() + i * {model.dim}, g.data() + i * {model.dim}, d);
    write_file(dir + "/lp_and_grad.bin", lg);
    write_file(dir + "/grad.bin", g);""" if grad else "")
        dispatch.append(f"""
  if (key == "{key}") {{
    m_{key}::Data<double> d;
    {fill}
    std::vector<double> x = read_file<double>(dir + "/x.bin");
    const size_t n = x.size() / {model.dim};
    std::vector<double> lp(n);
    for (size_t i = 0; i < n; ++i) lp[i] = m_{key}::log_density(x.data() + i * {model.dim}, d);
    write_file(dir + "/lp.bin", lp);{grad_call}
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
    result = subprocess.run([compiler, "-std=c++17", "-O1", "-Wall", "-Werror", str(src), "-o",
                             str(exe)], capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"the models' C++ does not compile:\n{result.stderr[-4000:]}")
    return exe


def evaluate(exe: Path, key: str, model, x: torch.Tensor, folder: Path):
    """Run model ``key``'s C++ at x [n, dim] (float64): (log_density [n], None) or, with a
    gradient_source, (log_density [n], (log_density_and_gradient's value [n], grad [n, dim]))."""
    run = folder / key
    run.mkdir(exist_ok=True)
    for name, value in model.data.items():
        if isinstance(value, torch.Tensor):
            value.detach().cpu().contiguous().numpy().tofile(run / f"{name}.bin")
    x.detach().to(torch.float64).cpu().contiguous().numpy().tofile(run / "x.bin")
    subprocess.run([str(exe), key, str(run)], check=True)
    lp = torch.from_numpy(np.fromfile(run / "lp.bin", dtype=np.float64))
    if model.gradient_source is None:
        return lp, None
    lg = torch.from_numpy(np.fromfile(run / "lp_and_grad.bin", dtype=np.float64))
    grad = torch.from_numpy(np.fromfile(run / "grad.bin", dtype=np.float64)).reshape(x.shape)
    return lp, (lg, grad)
