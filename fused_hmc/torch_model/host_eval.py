"""Generated C++ evaluated on the host through a plain g++ build (seconds, not a torch module).

For tests and debugging of the TorchModel compiler: ``HostEval(source, fields)`` compiles the
generated functions with fused_hmc's math headers only (float64, and log_density also with a
dual number so the generic form is checked to compile), loads the shared object with ctypes
and evaluates it at rows of x. The sampler never uses it: a TorchModel runs as a CppTarget.
With ``rows=True`` the source is the rows form (lanes > 1) and each call evaluates one lane's
share, ``rows=(first, step)``.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import torch

from .. import _build, cpp_build, cpp_data

MAX_RANK = 8


def harness_source(source: str, fields, rows: bool = False) -> str:
    tensors = [f for f in fields if f.is_tensor]
    floats = [f for f in fields if f.kind == "float"]
    ints = [f for f in fields if f.kind == "int"]
    fill = []
    for i, f in enumerate(tensors):
        element = "double" if f.kind == "tensor" else "int64_t"
        fill.append(f"  d.{f.name} = static_cast<const {element}*>(ptrs[{i}]);")
        for k in range(max(f.ndim, 1)):
            fill.append(f"  d.{f.name}_shape[{k}] = shapes[{i * MAX_RANK + k}];")
        fill.append(f"  d.{f.name}_size = sizes[{i}];")
    fill += [f"  d.{f.name} = floats[{i}];" for i, f in enumerate(floats)]
    fill += [f"  d.{f.name} = ints[{i}];" for i, f in enumerate(ints)]
    dual = "fused_hmc::Dual<double, 2>"
    suffix, rows_param, rows_arg = ("", "", "")
    if rows:
        suffix, rows_param, rows_arg = "_rows", ", fused_hmc::Rows", ", fused_hmc::Rows{first, step}"
    return "\n".join([
        "#include <cstdint>", '#include "math/targets/target_functions.h"',
        "namespace fused_hmc_user {", "using Scalar = double;",
        *cpp_build._data_struct(fields), source, "}  // namespace fused_hmc_user",
        f"template {dual} fused_hmc_user::log_density{suffix}<{dual}, fused_hmc_user::Data>("
        f"const {dual}*, const fused_hmc_user::Data&{rows_param});",
        'extern "C" double fhmc_eval(const double* x, double* grad, int with_grad, '
        "const void* const* ptrs, const int64_t* shapes, const int64_t* sizes, "
        "const double* floats, const int64_t* ints, int64_t first, int64_t step) {",
        "  fused_hmc_user::Data d{};", *fill,
        "  (void)ptrs; (void)shapes; (void)sizes; (void)floats; (void)ints; (void)first; "
        "(void)step;",
        f"  if (with_grad) return fused_hmc_user::log_density_and_gradient{suffix}<double>("
        f"x, grad, d{rows_arg});",
        f"  return fused_hmc_user::log_density{suffix}<double>(x, d{rows_arg});", "}", ""])


class HostEval:
    """log_density / log_density_and_gradient of generated `source` with data `data` (the
    compiled data: name -> tensor | float | int), on float64 rows x [n, dim]. rows: whether the
    source is in the rows form (None: whether it defines log_density_rows)."""

    def __init__(self, source: str, dim: int, data: dict, rows: bool | None = None):
        if rows is None:
            rows = "log_density_rows" in source
        self.dim, self.rows = dim, rows
        self.fields, self.values = cpp_data.prepare(data)
        text = harness_source(source, self.fields, rows)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        directory = Path(tempfile.gettempdir()) / "fused_hmc_host_eval"
        directory.mkdir(exist_ok=True)
        library = directory / f"model_{digest}.so"
        if not library.exists():
            cpp = directory / f"model_{digest}.cpp"
            cpp.write_text(text)
            partial = library.with_suffix(f".{os.getpid()}.tmp")
            done = subprocess.run(
                [os.environ.get("CXX", "c++"), "-std=c++20", "-O1", "-shared", "-fPIC",
                 f"-I{_build.csrc_dir()}", str(cpp), "-o", str(partial)],
                capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"the generated code does not compile:\n{done.stderr[-4000:]}")
            os.replace(partial, library)
        self._lib = ctypes.CDLL(str(library))
        self._fn = self._lib.fhmc_eval
        self._fn.restype = ctypes.c_double
        self._tensors, floats, ints = cpp_data.to_arguments(self.fields, self.values,
                                                            torch.float64, torch.device("cpu"))
        n = max(len(self._tensors), 1)
        self._ptrs = (ctypes.c_void_p * n)(*[t.data_ptr() for t in self._tensors])
        self._shapes = (ctypes.c_int64 * (n * MAX_RANK))()
        for i, t in enumerate(self._tensors):
            for k, s in enumerate(t.shape):
                self._shapes[i * MAX_RANK + k] = s
        self._sizes = (ctypes.c_int64 * n)(*[t.numel() for t in self._tensors])
        self._floats = (ctypes.c_double * max(len(floats), 1))(*floats)
        self._ints = (ctypes.c_int64 * max(len(ints), 1))(*ints)

    def _eval(self, row: torch.Tensor, with_grad: bool, rows):
        if rows is not None and not self.rows:
            raise ValueError("rows=(first, step) is for a source in the rows form only")
        first, step = rows if rows is not None else (0, 1)  # the rows form: one share of them all
        x = row.detach().double().contiguous()
        grad = torch.zeros(self.dim, dtype=torch.float64)
        value = self._fn(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(grad.data_ptr()),
                         int(with_grad), self._ptrs, self._shapes, self._sizes, self._floats,
                         self._ints, ctypes.c_int64(first), ctypes.c_int64(step))
        return value, grad

    def log_density(self, x: torch.Tensor, rows=None) -> torch.Tensor:
        """[n] at x [n, dim]; rows=(first, step): the share of those rows (the rows form; None:
        the whole density)."""
        return torch.tensor([self._eval(row, False, rows)[0] for row in x], dtype=torch.float64)

    def log_density_and_gradient(self, x: torch.Tensor, rows=None):
        out = [self._eval(row, True, rows) for row in x]
        return (torch.tensor([v for v, _ in out], dtype=torch.float64),
                torch.stack([g for _, g in out]))
