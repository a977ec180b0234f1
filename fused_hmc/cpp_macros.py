"""The object-like macros a CppTarget's data names must avoid, as the compiler itself defines them.

The generated module includes torch's extension header (and through it the C and C++ libraries,
POSIX and Python's headers) before the ``Data`` struct, so a data member named like one of their
object-like macros (``M_PI``, ``EXIT_SUCCESS``, ``SIZE_MAX``, ``stdout``, ``HAVE_FORK``, ...) would
be rewritten by the preprocessor and fail to compile, blaming the user's source. (A function-like
macro needs a ``(`` after its name, which a data member never has.) The names come from the
compiler: ``-dM -E`` over those headers, a second of CPU time once, then cached in memory and in a
text file of names under the build root, read back as data (every line checked to be an
identifier). Where no compiler runs, a fixed list of the C and C++ libraries' macros stands in: the
build then fails anyway, and says what to install.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import torch

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OBJECT_LIKE = re.compile(r"^#define ([A-Za-z_][A-Za-z0-9_]*)(?:\s|$)", re.MULTILINE)
# Every header the generated module and the syntax check include before the user's Data struct.
_PROBE = ('#include <torch/extension.h>\n#include <cstdint>\n#include "math/targets/target.h"\n'
          '#include "math/targets/target_functions.h"\n')
# Prefixes of the macros of headers the probe cannot see (the CUDA toolkit's, for CUDA builds).
CUDA_PREFIXES = ("CUDA", "CUDART_", "CUB_", "THRUST_", "NV_")
# The C and C++ libraries' object-like macros, where the compiler cannot be asked.
FALLBACK = frozenset("""
NULL errno stdin stdout stderr math_errhandling EOF BUFSIZ FILENAME_MAX FOPEN_MAX TMP_MAX L_tmpnam
SEEK_CUR SEEK_END SEEK_SET EXIT_SUCCESS EXIT_FAILURE RAND_MAX MB_CUR_MAX MB_LEN_MAX CHAR_BIT
CHAR_MAX CHAR_MIN SCHAR_MAX SCHAR_MIN UCHAR_MAX SHRT_MAX SHRT_MIN USHRT_MAX INT_MAX INT_MIN UINT_MAX
LONG_MAX LONG_MIN ULONG_MAX LLONG_MAX LLONG_MIN ULLONG_MAX SIZE_MAX PTRDIFF_MAX PTRDIFF_MIN
INTMAX_MAX INTMAX_MIN UINTMAX_MAX INTPTR_MAX INTPTR_MIN UINTPTR_MAX WCHAR_MAX WCHAR_MIN WINT_MAX
WINT_MIN SIG_ATOMIC_MAX SIG_ATOMIC_MIN INT8_MAX INT8_MIN INT16_MAX INT16_MIN INT32_MAX INT32_MIN
INT64_MAX INT64_MIN UINT8_MAX UINT16_MAX UINT32_MAX UINT64_MAX CLOCKS_PER_SEC TIME_UTC HUGE_VAL
HUGE_VALF HUGE_VALL INFINITY NAN MATH_ERRNO MATH_ERREXCEPT DECIMAL_DIG FLT_MAX FLT_MIN FLT_EPSILON
DBL_MAX DBL_MIN DBL_EPSILON LDBL_MAX LDBL_MIN LDBL_EPSILON FP_NAN FP_INFINITE FP_ZERO FP_NORMAL
FP_SUBNORMAL M_E M_LOG2E M_LOG10E M_LN2 M_LN10 M_PI M_PI_2 M_PI_4 M_1_PI M_2_PI M_2_SQRTPI
M_SQRT2 M_SQRT1_2 EDOM ERANGE EILSEQ WEOF LC_ALL LC_COLLATE LC_CTYPE LC_MONETARY LC_NUMERIC LC_TIME
SIGABRT SIGFPE SIGILL SIGINT SIGSEGV SIGTERM SIG_DFL SIG_ERR SIG_IGN
""".split())

_lock = threading.Lock()
_cached: dict[str, frozenset[str]] = {}


def _cache_key(compiler: str, csrc: Path) -> str:
    digest = hashlib.sha256(repr((compiler, torch.__version__, sys.version, sys.executable))
                            .encode())
    for header in ("math/targets/target.h", "math/targets/target_functions.h"):
        digest.update((csrc / header).read_bytes())
    return digest.hexdigest()[:16]


def _from_compiler(compiler: str, csrc: Path) -> frozenset[str] | None:
    """The probe's object-like macros, or None when the compiler cannot run it."""
    import sysconfig

    from torch.utils import cpp_extension

    includes = [f"-I{p}" for p in (*cpp_extension.include_paths(),
                                   sysconfig.get_paths()["include"], csrc)]
    try:
        done = subprocess.run([compiler, "-std=c++20", "-dM", "-E", *includes, "-x", "c++", "-"],
                              input=_PROBE, capture_output=True, text=True, check=False,
                              timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return frozenset(_OBJECT_LIKE.findall(done.stdout))


def _read(path: Path) -> frozenset[str] | None:
    try:
        names = path.read_text().split()
    except (OSError, UnicodeDecodeError):
        return None
    if not names or not all(_IDENTIFIER.match(n) for n in names):
        return None  # not a file this module wrote: computed again
    return frozenset(names)


def _write(path: Path, names: frozenset[str]) -> None:
    """Written whole or not at all (a temporary file, then a rename)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text("\n".join(sorted(names)) + "\n")
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only cache only costs the next process the probe again


def object_like_macros() -> frozenset[str]:
    """The object-like macros defined where a CppTarget's Data struct is compiled (FALLBACK's
    where the compiler cannot tell)."""
    from . import _build

    compiler = os.environ.get("CXX", "c++")
    with _lock:
        if compiler in _cached:
            return _cached[compiler]
        csrc = _build.csrc_dir()
        path = _build.build_directory(f"fused_hmc_macros_{_cache_key(compiler, csrc)}.txt")
        names = _read(path)
        if names is None:
            names = _from_compiler(compiler, csrc)
            if names is not None:
                _write(path, names)
        _cached[compiler] = FALLBACK | (names or frozenset())  # once per process either way
        return _cached[compiler]
