"""Generates and compiles a CppTarget's module: the user's C++ inside fused_hmc's headers.

The generated files, in the build directory (``TORCH_EXTENSIONS_DIR``, else torch's default root,
``/fused_hmc_user_<cpu|cuda>_<hash>``):

- ``fused_hmc_user_model.h``: ``FHMC_USER_DIM`` (also as ``FUSED_HMC_DIM``, which the user's source
  may use as a compile-time constant), ``FHMC_USER_LANES``, ``FHMC_USER_ROWS`` and
  ``FHMC_USER_ROW_PARTIALS`` for a rows-form source, ``FHMC_USER_HAS_GRADIENT`` with
  gradient=True, ``FHMC_USER_VECTOR_CHAINS`` and ``FHMC_PORTABLE_FLOAT_MATH`` with vector_chains=True, ``FHMC_USER_WITH_CUDA`` for a CUDA build (and ``FHMC_USER_DENSE_MASS`` where a run asked for a dense mass: its kernels double the build), ``math/targets/target_functions.h``, then ``namespace fused_hmc_user { using Scalar =
  float|double; struct Data {...}; #line 1 "<source>" <the user's source> }`` and
  ``user/user_target.h`` (``UserTarget<S>``, what the kernels call). Torch-free.
- ``fused_hmc_user_module.cpp``: torch, the model header, each of :data:`MODULE_PARTS` and a
  ``PYBIND11_MODULE`` calling their register functions. The data reach the model one way: as
  ``TargetTensors`` views unpacked by the generated ``data_from_views`` (the chain ops', and the
  evaluation module's through ``user/data_tensors.h``'s ``make_data``).
- ``fused_hmc_user_kernels.cu`` (CUDA builds): the model header and each of :data:`CUDA_PARTS`.

The name hashes the generated text (source, dim, dtype, data signature, gradient), the device
kind, every source and header under the csrc folders the module includes (copied into the build
directory's ``csrc/``, so the build never depends on where fused_hmc lies), the flags, the
compiler environment and torch's and Python's versions; data *values* are not in it, so new values
reuse a build. A finished build loads without any lock (build_cache.py). Before the torch build,
the model alone is compiled with ``-fsyntax-only`` (a second or two): a mistake in the user's
source is reported at once, in the user's own line numbers, without torch's headers in the way.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch

from . import _build
from .cpp_data import DataField


class CppCompileError(RuntimeError):
    """The user's C++ did not compile. The message has the compiler's lines about the source (in
    the source's own line numbers); ``log_path`` is the full compiler output."""

    def __init__(self, message: str, log_path: Path | None = None):
        super().__init__(message)
        self.log_path = log_path


# The module's parts beyond the model: (header under csrc/, its register function). The sampler
# entry point is added here too.
MODULE_PARTS: tuple[tuple[str, str], ...] = (
    ("user/evaluate_module.h", "fused_hmc_user_eval::register_evaluate"),
    ("user/chains_module.h", "fused_hmc_user_chains::register_chains"),
)
# Headers the generated .cu includes after the model header (kernels and their launchers).
CUDA_PARTS: tuple[str, ...] = ("user/evaluate_cuda.cuh", "user/chains_cuda.cuh")

MODEL_HEADER = "fused_hmc_user_model.h"
MODULE_SOURCE = "fused_hmc_user_module.cpp"
CUDA_SOURCE = "fused_hmc_user_kernels.cu"
CHECK_SOURCE = "fused_hmc_user_check.cpp"
BUILD_LOG = "build.log"


@dataclass(frozen=True)
class BuildSpec:
    """Everything a CppTarget build depends on apart from the headers and the toolchain."""

    source: str
    source_name: str  # the file name compiler messages give the user's source ("<source>")
    dim: int
    scalar: str  # "float" or "double"
    device_kind: str  # "cpu" or "cuda"
    fields: tuple[DataField, ...]
    user_gradient: bool
    lanes: int = 1  # the CUDA threads a chain takes (csrc/math/targets/lane_rows.h); 1 unless rows
    rows: bool = False  # the source defines log_density_rows (the rows form) instead of log_density
    partials: int = 32  # with rows: P, the strided partials (fused_hmc/lanes.py's row_partials)
    vector_chains: bool = False  # the CPU chains also run W at a time on packs (cpu/simd/pack.h)
    dense_mass: bool = False  # CUDA: also the kernels with a dense mass (cuda/lane_dense_mass.cuh)


class EntryPoint(NamedTuple):
    name: str  # the function the source defines
    signature: str  # as messages quote it


def entry_points(rows: bool) -> tuple[EntryPoint, EntryPoint]:
    """The source's log density and hand-written gradient (gradient=True): in the rows form, a
    share of them over some of the data's rows (csrc/math/targets/lane_rows.h)."""
    head = "template <typename T, typename Data> FUSED_HMC_HD T "
    if not rows:
        return (EntryPoint("log_density", head + "log_density(const T* x, const Data& data)"),
                EntryPoint("log_density_and_gradient", head + "log_density_and_gradient(const T* "
                           "x, T* grad, const Data& data)"))
    return (EntryPoint("log_density_rows", head + "log_density_rows(const T* x, const Data& data, "
                       "fused_hmc::Rows rows)"),
            EntryPoint("log_density_and_gradient_rows", head + "log_density_and_gradient_rows("
                       "const T* x, T* grad, const Data& data, fused_hmc::Rows rows)"))


def scalar_name(dtype: torch.dtype) -> str:
    return {torch.float32: "float", torch.float64: "double"}[dtype]


def _data_struct(fields) -> list[str]:
    lines = ["// data.<name>: a tensor is a pointer to its row-major elements, its shape (a 0-d",
             "// tensor has shape {1}) and its element count; a float a Scalar, an int an int64_t.",
             "struct Data {"]
    for f in fields:
        if f.is_tensor:
            element = "Scalar" if f.kind == "tensor" else "int64_t"
            lines += [f"  const {element}* {f.name};",
                      f"  int64_t {f.name}_shape[{max(f.ndim, 1)}];",
                      f"  int64_t {f.name}_size;"]
        else:
            lines.append(f"  {'Scalar' if f.kind == 'float' else 'int64_t'} {f.name};")
    return lines + ["};"]


def model_header(spec: BuildSpec) -> str:
    source = spec.source if spec.source.endswith("\n") else spec.source + "\n"
    name = spec.source_name.replace("\\", "\\\\").replace('"', '\\"')
    head = ["// Generated by fused_hmc.CppTarget (fused_hmc/cpp_build.py): the user's model, shared by",
            "// the module and the CUDA kernels. Do not edit: the build directory's name hashes it.",
            "#pragma once",
            f"#define FHMC_USER_DIM {spec.dim}",
            f"#define FUSED_HMC_DIM {spec.dim}",
            f"#define FHMC_USER_LANES {spec.lanes}"]
    if spec.rows:
        head.append("#define FHMC_USER_ROWS 1")
        head.append(f"#define FHMC_USER_ROW_PARTIALS {spec.partials}")
    if spec.user_gradient:
        head.append("#define FHMC_USER_HAS_GRADIENT 1")
    if spec.vector_chains:
        # the packs' float exp/log/log1p, and the same for one chain (math/fp/scalar_functions.h)
        head += ["#define FHMC_USER_VECTOR_CHAINS 1", "#define FHMC_PORTABLE_FLOAT_MATH 1"]
    if spec.device_kind == "cuda":
        head.append("#define FHMC_USER_WITH_CUDA 1")
        if spec.dense_mass:
            head.append("#define FHMC_USER_DENSE_MASS 1")
    head += ["#include <cstdint>", "", '#include "math/targets/target.h"',
             '#include "math/targets/target_functions.h"', "",
             "namespace fused_hmc_user {",
             f"using Scalar = {spec.scalar};"]
    head += _data_struct(spec.fields)
    head += [f'#line 1 "{name}"']
    tail_start = len(head) + source.count("\n") + 1  # the physical line after the source
    tail = [f'#line {tail_start} "{MODEL_HEADER}"']
    tail += _data_from_views(spec.fields)
    tail += ["}  // namespace fused_hmc_user",
             "",
             '#include "user/user_target.h"']
    return "\n".join(head) + "\n" + source + "\n".join(tail) + "\n"


def _data_from_views(fields) -> list[str]:
    """Data from the chain ops' target_tensors (the data tensors in the fields' order) and
    target_scalars (the floats, then the ints, as doubles): what ChainTarget::make calls."""
    tensors = [f for f in fields if f.is_tensor]
    floats = [f for f in fields if f.kind == "float"]
    ints = [f for f in fields if f.kind == "int"]
    lines = ["// The data tensors in the order data_from_views reads them: name, rank, integer.",
             "struct DataTensorSpec { const char* name; int rank; bool integer; };",
             f"constexpr int kDataTensors = {len(tensors)}, kDataFloats = {len(floats)}, "
             f"kDataInts = {len(ints)};",
             "constexpr DataTensorSpec kDataTensorSpecs[kDataTensors > 0 ? kDataTensors : 1] = {"
             + ", ".join(f'{{"{f.name}", {f.ndim}, {str(f.kind != "tensor").lower()}}}'
                         for f in tensors) + "};",
             "// The data as the chain ops pass it (fused_hmc/cpp_target.py, CppTarget.op_tensors and",
             "// op_scalars): tensors in order, then scalars, floats first; the evaluation module",
             "// builds the same views (user/data_tensors.h).",
             "inline Data data_from_views(const fused_hmc::TargetTensors& v) {",
             "  Data data{};"]
    for i, f in enumerate(tensors):
        element = "Scalar" if f.kind == "tensor" else "int64_t"
        lines.append(f"  data.{f.name} = static_cast<const {element}*>(v.data[{i}]);")
        if f.ndim == 0:
            lines.append(f"  data.{f.name}_shape[0] = 1;")
        for k in range(f.ndim):
            lines.append(f"  data.{f.name}_shape[{k}] = v.shape[{i}][{k}];")
        lines.append(f"  data.{f.name}_size = v.numel[{i}];")
    for i, f in enumerate(floats):
        lines.append(f"  data.{f.name} = static_cast<Scalar>(v.scalars[{i}]);")
    for i, f in enumerate(ints):
        lines.append(f"  data.{f.name} = static_cast<int64_t>(v.scalars[{len(floats) + i}]);")
    return lines + ["  return data;", "}"]


def target_name(spec: BuildSpec) -> str:
    """The registry name of the model's chain kernels: a hash of its model header, so one source
    compiled for two dtypes or device kinds registers two entries."""
    digest = hashlib.sha256(model_header(spec).encode()).hexdigest()[:16]
    return f"cpp_{digest}"


def module_source(spec: BuildSpec) -> str:
    lines = ["// Generated by fused_hmc.CppTarget (fused_hmc/cpp_build.py). Do not edit.",
             f'#define FHMC_USER_TARGET_NAME "{target_name(spec)}"',
             "#include <torch/extension.h>",
             "",
             "#include <cstdint>",
             "#include <vector>",
             "",
             f'#include "{MODEL_HEADER}"',
             '#include "user/data_tensors.h"',
             ""]
    lines += [f'#include "{header}"' for header, _ in MODULE_PARTS]
    lines += ["", "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
    lines += [f"  {register}(m);" for _, register in MODULE_PARTS]
    return "\n".join(lines + ["}"]) + "\n"


def cuda_source(spec: BuildSpec) -> str:
    lines = ["// Generated by fused_hmc.CppTarget (fused_hmc/cpp_build.py). Do not edit.",
             f'#define FHMC_USER_TARGET_NAME "{target_name(spec)}"',
             f'#include "{MODEL_HEADER}"']
    return "\n".join(lines + [f'#include "{header}"' for header in CUDA_PARTS]) + "\n"


def check_source() -> str:
    """Instantiates every member of UserTarget, so the syntax check sees the user's templates
    with the chains' scalar and with duals."""
    return (f'#include "{MODEL_HEADER}"\n'
            "template struct UserTarget<fused_hmc_user::Scalar>;\n")


def generated_files(spec: BuildSpec) -> dict[str, str]:
    """The module's generated files, name -> text (CI compiles the CUDA ones: .ci/)."""
    files = {MODEL_HEADER: model_header(spec), MODULE_SOURCE: module_source(spec),
             CHECK_SOURCE: check_source()}
    if spec.device_kind == "cuda":
        files[CUDA_SOURCE] = cuda_source(spec)
    return files


# A cold CPU build of a small model (one translation unit, so one core), measured with
# TORCH_EXTENSIONS_DIR in a fresh directory: 45 s of CPU time, 118 s of wall time at load 10.
_BUILD_TIME = "about 45 s of CPU time"
_HASHED_DIRS = ("math", "user", "cpu", "cuda", "ops")
_HIDDEN = ("-fvisibility=hidden", "-fvisibility-inlines-hidden")
_COMPILER_ENVIRONMENT = ("CXX", "TORCH_CUDA_ARCH_LIST", "CUDA_HOME")


def build_name(spec: BuildSpec, files: dict[str, str]) -> str:
    """fused_hmc_user_<kind>_<hash>: see the module docstring for what the hash covers."""
    src = _build.csrc_dir()
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    for path in _build.build_inputs(src, _HASHED_DIRS):
        digest.update(path.relative_to(src).as_posix().encode() + b"\0" + path.read_bytes()
                      + b"\0")
    digest.update(repr((spec.device_kind, _build.HOST_FLAGS, _HIDDEN,
                        _build.cuda_compile_flags(user_model=True),
                        [os.environ.get(k) for k in _COMPILER_ENVIRONMENT], torch.__version__,
                        sys.version_info[:2], _build.LAYOUT)).encode())
    return f"fused_hmc_user_{spec.device_kind}_{digest.hexdigest()[:16]}"


def _write_if_changed(path: Path, text: str) -> None:
    # An unchanged file keeps its mtime, so ninja finds nothing to rebuild.
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


# A compiler diagnostic's location: g++ "file:line:col: ", nvcc "file(line): ".
_LOCATION = re.compile(r"^(?P<file>[^\s:()][^:()]*?)(?::(?P<line>\d+)(?::\d+)?:|\((?P<nline>\d+)\):)")


def compiler_messages(log: str, source_name: str, source: str = "",
                      limit: int = 40) -> list[str]:
    """The compiler's lines that concern the user: every diagnostic in the user's source (each
    followed by that line of `source`, since the compiler cannot read a string), and errors in
    the generated files and fused_hmc's headers (e.g. a missing log_density), with the snippet
    and caret g++ prints under them. Falls back to the log's last lines."""
    ours = (source_name, MODEL_HEADER, MODULE_SOURCE, CUDA_SOURCE, CHECK_SOURCE, "user/", "math/")
    source_lines = source.splitlines()
    kept, keep_snippet = [], False
    for line in log.splitlines():
        m = _LOCATION.match(line)
        head = line.split(":", 1)[0]
        if m or line.startswith(source_name + ":") or head.endswith(": In function"):
            file = m.group("file") if m else head
            concerns_user = file == source_name or line.startswith(source_name + ":")
            is_error = re.search(r"\b(error|fatal error)\b", line) is not None
            keep_snippet = concerns_user or (is_error and any(o in file for o in ours))
            if keep_snippet:
                kept.append(line)
            number = m and file == source_name and int(m.group("line") or m.group("nline"))
            if number and 1 <= number <= len(source_lines):
                kept.append(f"{number:5d} | {source_lines[number - 1]}")
        elif keep_snippet and (line.startswith(" ") or line.startswith("\t")):
            kept.append(line)
        elif re.search(r"\berror\b", line) and source_name in line:
            kept.append(line)
        else:
            keep_snippet = False
    if not kept:
        kept = [line for line in log.splitlines() if line.strip()][-limit:]
    if len(kept) > limit:
        kept = kept[:limit] + [f"... ({len(kept) - limit} more lines in the log)"]
    return kept


def _compile_error(log: str, spec: BuildSpec, directory: Path, stage: str) -> CppCompileError:
    log_path = directory / BUILD_LOG
    log_path.write_text(log)
    lines = compiler_messages(log, spec.source_name, spec.source)
    hint = ""
    value, gradient = entry_points(spec.rows)
    if re.search(rf"{gradient.name}.*(not a member|not declared|no matching|undefined)",
                 log) and spec.user_gradient:
        hint = f"\n(gradient=True: the source must define {gradient.signature})"
    elif re.search(rf"{value.name}.*(not a member|not declared|no matching|undefined)", log):
        hint = f"\n(the source must define {value.signature})"
    elif "has no member named" in log:
        members = ", ".join(f"{f.name} ({f.kind})" for f in spec.fields) or "none"
        hint = f"\n(the data members are: {members})"
    elif not any(line.startswith(spec.source_name) for line in lines):
        # No diagnostic at a line of the source and no known misuse: fused_hmc's own code failed.
        return CppCompileError(
            f"compiling the CppTarget failed in fused_hmc's own code, not at a line of the source "
            f"({stage}; a fused_hmc bug: please report it with the full log {log_path}):\n"
            + "\n".join(lines), log_path)
    return CppCompileError(
        f"the CppTarget source does not compile ({stage}; {spec.source_name} lines are the "
        f"source's own; the full log is {log_path}):\n" + "\n".join(lines) + hint, log_path)


def _syntax_check(spec: BuildSpec, directory: Path, headers: Path) -> None:
    compiler = os.environ.get("CXX", "c++")
    cmd = [compiler, "-std=c++20", "-fsyntax-only", f"-I{headers}", "-I.", CHECK_SOURCE]
    try:
        done = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise _build.ExtensionBuildError(
            f"no C++ compiler {compiler!r} found: install g++ or set CXX") from exc
    if done.returncode != 0:
        raise _compile_error(done.stdout + done.stderr, spec, directory, "syntax check")


_lock = threading.Lock()
_modules: dict[str, object] = {}
_failures: dict[str, CppCompileError] = {}


def load(spec: BuildSpec):
    """The compiled module for `spec`: from memory, from the disk cache, or built now (one line on
    stderr says so). A failed build is remembered, and raises the same error again."""
    files = generated_files(spec)
    name = build_name(spec, files)
    with _lock:
        if name in _modules:
            return _modules[name]
        if name in _failures:
            raise _failures[name]
        try:
            module = _compile_and_load(spec, files, name)
        except CppCompileError as exc:
            _failures[name] = exc
            raise
        _modules[name] = module
        return module


def _compile_and_load(spec: BuildSpec, files: dict[str, str], name: str):
    from .build_cache import load_or_build

    directory = _build.build_directory(name)
    return load_or_build(directory, name, _described(spec),
                         lambda: _build_module(spec, files, name, directory))


def _described(spec: BuildSpec) -> str:
    """The module in a build message: what tells two builds of one source apart (a module built
    again where one was expected shows which of these differs)."""
    lanes = f", {spec.lanes} lanes of {spec.partials} partials" if spec.lanes > 1 else ""
    dense = ", dense-mass kernels" if spec.dense_mass else ""
    return f"the CppTarget (dim {spec.dim}, {spec.scalar}, {spec.device_kind}{lanes}{dense})"


def _build_module(spec: BuildSpec, files: dict[str, str], name: str, directory: Path):
    """Writes the generated files and a copy of fused_hmc's headers into `directory`, checks the
    source's syntax, and builds and loads the module (the caller holds the directory's lock)."""
    from torch.utils import cpp_extension

    print(f"compiling {_described(spec)[:-1]}; first use of this source; {_BUILD_TIME}) in "
          f"{directory} ...", file=sys.stderr, flush=True)
    for file, text in files.items():
        _write_if_changed(directory / file, text)
    src = _build.csrc_dir()
    headers = _build.copy_sources(src, _build.build_inputs(src, _HASHED_DIRS), directory)
    _syntax_check(spec, directory, headers)
    with_cuda = spec.device_kind == "cuda"
    sources = [str(directory / MODULE_SOURCE)]
    if with_cuda:
        sources.append(str(directory / CUDA_SOURCE))
    try:
        return cpp_extension.load(
            name=name,
            sources=sources,
            # Hidden symbols: the modules of two models define the same template instances
            # (ChainTarget<double>'s launchers, the registry entry), which would otherwise bind
            # to the first module loaded.
            extra_cflags=[*_build.HOST_FLAGS, *_HIDDEN],
            extra_cuda_cflags=[*_build.cuda_compile_flags(user_model=True),
                               "-Xcompiler=" + ",".join(_HIDDEN)],
            extra_ldflags=list(_build.HOST_LDFLAGS),
            extra_include_paths=[str(headers)],
            build_directory=str(directory),
            with_cuda=with_cuda,
            is_python_module=True,
            verbose=os.environ.get("FUSED_HMC_VERBOSE_BUILD") == "1",
        )
    except RuntimeError as exc:
        if "Error building extension" not in str(exc):
            raise
        raise _compile_error(str(exc), spec, directory, f"{spec.device_kind} build") from None
