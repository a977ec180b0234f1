"""Builds the C++/CUDA extension on first use and loads its operators into ``torch.ops.fused_hmc``.

``import fused_hmc`` never compiles. The first operator call builds the library with
``torch.utils.cpp_extension.load`` (ninja) in a directory named by a hash of every source and
header, the flags and torch's version, into which the sources are copied first: so the build
depends on the sources' content alone, never on where they lie, and an installed package and a
checkout with the same sources share one build instead of rebuilding each other's. A finished
build loads directly, without torch's lock (build_cache.py); a build that will compile says so in
one line on stderr (a cached load is silent). CUDA sources are compiled only where torch sees a
GPU and a CUDA toolkit; elsewhere the ``.cpp`` files build alone. A failed build is remembered,
and every later call fails fast with the same message.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
from pathlib import Path

import torch

from . import _cpu_flags
# build_cache.py raises them too: they live apart so that neither module imports the other back.
from .build_errors import BuildLockTimeout, ExtensionBuildError  # noqa: F401 (re-exported)


class CudaUnavailableError(RuntimeError):
    """A CUDA tensor reached fused_hmc, but the extension was built without its CUDA kernels."""


_lock = threading.Lock()
_state = {"loaded": False, "failure": None, "cuda": False, "cuda_missing_reason": None,
          "bindings": None, "directory": None}


def csrc_dir() -> Path:
    """The C++/CUDA sources: beside the package when installed, at the repository root in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_csrc", here.parent / "csrc"):
        if (candidate / "ops" / "schema.cpp").is_file():
            return candidate
    raise ExtensionBuildError(f"fused_hmc's C++ sources are missing (looked in {here / '_csrc'} "
                              f"and {here.parent / 'csrc'}); reinstall the package")


def _cuda_missing_reason() -> str | None:
    from torch.utils.cpp_extension import CUDA_HOME

    if os.environ.get("FUSED_HMC_NO_CUDA") == "1":
        return "FUSED_HMC_NO_CUDA=1 is set"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    if torch.version.cuda is None:
        return "this torch build has no CUDA support"
    if CUDA_HOME is None:
        return "no nvcc found: install the CUDA toolkit (or set CUDA_HOME)"
    return None


def cuda_missing_reason() -> str | None:
    """Why a CUDA build cannot be made here (no GPU, no CUDA torch, no nvcc, FUSED_HMC_NO_CUDA=1),
    or None when it can: for other builds (CppTarget modules) that compile CUDA code too."""
    return _cuda_missing_reason()


# The build's flags and sources, in one place: .ci/compile_cuda.py compiles the CUDA sources with
# them too.
# -ffp-contract=off: the exact-parity arithmetic must round each operation as torch does. The CPU
# chains' threads and vector ISA: _cpu_flags.py (they change no result).
HOST_FLAGS = ("-O3", "-ffp-contract=off", *_cpu_flags.vector_flags(), *_cpu_flags.openmp_flags(),
              *_cpu_flags.isa_flags())
HOST_LDFLAGS = _cpu_flags.openmp_flags()
PTXAS_VERBOSE_FLAG = "-Xptxas=-v"  # registers, stack frame and spills per kernel


# Users' models (CppTarget, TorchModel modules) are compiled as written on the device too:
# --fmad=false rounds every + and * as the host does under -ffp-contract=off. With nvcc's default,
# a model's plain C++ arithmetic was contracted into FMAs differently where it is inlined: the
# force at a call's start and the same force in the leapfrog differed in their last bits, so a
# pooled float32 ChEES warm-up split into calls drifted from the unsplit one
# (tests/unit/test_force_carry.py on CUDA). fused_hmc's own kernels spell every rounding out
# (math/fp/rounding.h).
USER_CUDA_FLAGS = ("--fmad=false",)


def cuda_compile_flags(user_model: bool = False) -> list[str]:
    """nvcc's flags for the kernels, and with user_model those of a user's model's module
    (FUSED_HMC_PTXAS_VERBOSE=1 adds the ptxas report)."""
    flags = ["-O3", "-lineinfo", "-Xcompiler=-ffp-contract=off",
             *(USER_CUDA_FLAGS if user_model else ())]
    if os.environ.get("FUSED_HMC_PTXAS_VERBOSE") == "1":
        flags.append(PTXAS_VERBOSE_FLAG)
    return flags


def cuda_sources(src: Path) -> list[str]:
    """The CUDA ops' files: host files for g++ (.cpp, they include CUDA headers), kernels (.cu)."""
    cuda_dir = src / "cuda"
    return [str(p) for pattern in ("*.cpp", "*.cu") for p in sorted(cuda_dir.glob(pattern))]


_BUILD_INPUT_SUFFIXES = (".cpp", ".cu", ".h", ".cuh", ".def")
# Environment that changes what the compilers produce without changing a flag we pass.
_BUILD_ENVIRONMENT = ("CXX", "TORCH_CUDA_ARCH_LIST")
# The build directory's layout, in the hash: a directory of an earlier layout is never reused.
LAYOUT = "sources copied into the build directory, build-complete marker"
# Where a build directory holds its copy of the sources.
SOURCES_SUBDIR = "csrc"
# A cold build of the main extension (CPU only), measured with TORCH_EXTENSIONS_DIR in a fresh
# directory: 2m32s of CPU time (139 s user, 13 s system), 3m01s of wall time on 2 cores that other
# jobs shared (load 5).
_BUILD_TIME = "about 2.5 minutes of CPU time, 3 minutes on 2 busy cores"


def build_inputs(src: Path, subdirs: tuple[str, ...] | None = None) -> list[Path]:
    """The sources and headers under `src` (or only under its `subdirs`) that a build reads:
    what the build's name hashes and what is copied into its directory."""
    roots = [src] if subdirs is None else [src / sub for sub in subdirs]
    return sorted(p for root in roots for p in root.rglob("*")
                  if p.suffix in _BUILD_INPUT_SUFFIXES and p.is_file())


def copy_sources(src: Path, files: list[Path], directory: Path) -> Path:
    """Copies `files` (under `src`) into directory/csrc, rewriting only those that differ (an
    unchanged file keeps its mtime, so ninja finds nothing to rebuild); returns that copy's root."""
    root = directory / SOURCES_SUBDIR
    for path in files:
        target = root / path.relative_to(src)
        data = path.read_bytes()
        if not target.is_file() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return root


def build_name(src: Path, with_cuda: bool, flags: list[str]) -> str:
    """fused_hmc_cpu_<hash> or fused_hmc_cuda_<hash>: the hash covers every source and header under
    `src` (path relative to it, and content), the flags, the compiler environment, and torch's and
    Python's versions, but not where `src` lies."""
    digest = hashlib.sha256()
    for path in build_inputs(src):
        digest.update(path.relative_to(src).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(repr((with_cuda, list(flags), [os.environ.get(k) for k in _BUILD_ENVIRONMENT],
                        torch.__version__, sys.version_info[:2], LAYOUT)).encode())
    return f"fused_hmc_{'cuda' if with_cuda else 'cpu'}_{digest.hexdigest()[:16]}"


def build_directory(name: str) -> Path:
    """Where the build named `name` lives: TORCH_EXTENSIONS_DIR (else torch's default root)/name."""
    from torch.utils import cpp_extension

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    return Path(root) / name


def build_needed(directory: Path, name: str) -> bool:
    """Whether loading `name` from `directory` will compile: its build is not complete. (The name
    hashes every input, so a complete build there was built from these very sources.)"""
    from .build_cache import is_complete

    return not is_complete(directory, name)


def _compile_and_load() -> None:
    from torch.utils import cpp_extension

    from .build_cache import load_or_build

    src = csrc_dir()
    missing = _cuda_missing_reason()
    host_flags, cuda_flags = list(HOST_FLAGS), cuda_compile_flags()
    name = build_name(src, missing is None, host_flags + (cuda_flags if missing is None else []))
    directory = build_directory(name)

    def build():
        print(f"building the fused_hmc extension (first use of these sources; {_BUILD_TIME}"
              f"{', longer with the CUDA kernels' if missing is None else ''}) in {directory} ...",
              file=sys.stderr, flush=True)
        copy = copy_sources(src, build_inputs(src), directory)
        sources = sorted(str(p) for p in copy.rglob("*.cpp") if copy / "cuda" not in p.parents)
        if missing is None:
            sources += cuda_sources(copy)
        return cpp_extension.load(
            name=name,
            sources=sources,
            extra_cflags=host_flags,
            extra_cuda_cflags=cuda_flags,
            extra_ldflags=list(HOST_LDFLAGS),
            extra_include_paths=[str(copy)],
            build_directory=str(directory),
            with_cuda=missing is None,
            is_python_module=True,
            verbose=os.environ.get("FUSED_HMC_VERBOSE_BUILD") == "1",
        )

    _state["bindings"] = load_or_build(directory, name, "the fused_hmc extension", build)
    _state["directory"] = directory
    _state["cuda"] = missing is None
    _state["cuda_missing_reason"] = missing


def _explain(exc: BaseException) -> str:
    import shutil

    hints = []
    if shutil.which("ninja") is None:
        hints.append("ninja is not installed: pip install ninja")
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        hints.append("no C++ compiler found: install g++ (e.g. apt-get install g++) or set CXX")
    hint = "; ".join(hints) or "see the compiler output above (FUSED_HMC_VERBOSE_BUILD=1 shows it all)"
    return f"building the fused_hmc extension failed: {hint}. Cause: {exc}"


def load_extension() -> None:
    """Builds (first time) and loads the extension; idempotent and thread-safe."""
    if _state["loaded"]:
        return
    with _lock:
        if _state["loaded"]:
            return
        if _state["failure"] is not None:
            raise ExtensionBuildError(_state["failure"])
        try:
            _compile_and_load()
        except BuildLockTimeout:  # not a failed build: a later call may find the lock free
            raise
        except Exception as exc:  # noqa: BLE001 - any build error becomes one cached, explained error
            _state["failure"] = _explain(exc)
            raise ExtensionBuildError(_state["failure"]) from exc
        from . import _fake_impls  # registers fake (meta) kernels now that the schemas exist

        _fake_impls.register()
        _state["loaded"] = True


def bindings():
    """The extension's pybind11 module: direct, low-overhead entry points for the hot path."""
    load_extension()
    return _state["bindings"]


def has_cuda_kernels() -> bool:
    load_extension()
    return _state["cuda"]


def require_cuda_kernels() -> None:
    if not has_cuda_kernels():
        raise CudaUnavailableError(
            f"fused_hmc was built without CUDA kernels ({_state['cuda_missing_reason']}); "
            "install the CUDA toolkit and restart, or pass CPU tensors")
