"""cpu/simd/: a float pack's exp, log and log1p (math/fp/float_transcendentals.h, computed in float64
lanes) compile for AVX2 to vector instructions, with no scalar work per lane.

GCC lowers a comparison of a vector wider than the target's registers (8 doubles are two AVX2
registers), the conversion of its lane masks between int64 and int32, and any int64 <-> float64
conversion (AVX2 has none) to one scalar instruction per lane: before pack.h compared and selected
wide vectors by halves and the functions built 2^k from bit patterns, these three compiled to 96
scalar compares (`vcomisd`, `vucomisd`), 8 scalar conversions and 134 lane moves (`vpextrq`,
`vpinsrq`), and were 4x to 8x slower (benchmarks/results/cpu/README.md). The test compiles them as
a user module with packs is compiled (fused_hmc/_build.py's host flags, for AVX2) and counts those
instructions in the assembly: none may be left. GCC only, on x86-64; seconds.

A second test compiles a function as large as a TorchModel's generated gradient and finds no call
to a pack function in it: GCC's inliner gives up on functions not marked always-inline inside
large callers, and a call per multiply-add (packs passed through memory) took a third of a
TorchModel's time.
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess

import pytest

from fused_hmc import _build, _cpu_flags

COMPILER = os.environ.get("CXX", "c++")
SCALAR_PER_LANE = re.compile(r"^\s+v?(u?comisd|cvtsi2sdq?|cvttsd2siq?|pextrq|pinsrq)\b", re.M)
UNIT = """
#include "cpu/simd/pack_functions.h"
using P = fused_hmc::simd::Pack<float, 8>;
P pack_exp(P x) { return fused_hmc::simd::exp(x); }
P pack_log(P x) { return fused_hmc::simd::log(x); }
P pack_log1p(P x) { return fused_hmc::simd::log1p(x); }
"""


# Two passes over 1,000 rows of 25 columns, each row 50 multiply-adds of packs with scalars
# splatted, as TorchModel's rows form computes a logistic regression's density and gradient.
def _large_unit() -> str:
    def row_pass(value: str) -> list[str]:
        return (["  for (long k = 0; k < 1000; ++k) {", "    T a(0.0);"]
                + [f"    a = fma(T(X[k * 25 + {j}]), x[{j}], a);" for j in range(25)]
                + [f"    const T e = {value};", "    lp += e;"]
                + [f"    acc[{j}] = fma(T(X[k * 25 + {j}]), e, acc[{j}]);" for j in range(25)]
                + ["  }"])

    return "\n".join(['#include "cpu/simd/pack_functions.h"',
                      "using T = fused_hmc::simd::Pack<double, 4>;",
                      "using fused_hmc::simd::fma;",
                      "T large(const double* X, const T* x, T* grad) {",
                      "  T acc[25];", "  for (int j = 0; j < 25; ++j) acc[j] = T(0.0);",
                      "  T lp(0.0);", *row_pass("a * a - a"), *row_pass("a - a * a"),
                      "  for (int j = 0; j < 25; ++j) grad[j] = acc[j];", "  return lp;", "}"])


def _is_gcc() -> bool:
    if shutil.which(COMPILER) is None:
        return False
    version = subprocess.run([COMPILER, "--version"], capture_output=True, text=True).stdout
    return "Free Software Foundation" in version and "clang" not in version.lower()


AVX2_GCC = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64") or not _is_gcc(),
    reason="the AVX2 code generation of GCC on x86-64")


def _assembly(tmp_path, source: str) -> str:
    """source compiled as a user module with packs is, to AVX2 + FMA assembly: the build's
    value-preserving flags, and AVX2 whatever this machine has (AVX-512 registers would hold 8
    doubles whole)."""
    unit = tmp_path / "unit.cpp"
    unit.write_text(source)
    flags = ["-O3", "-ffp-contract=off", *_cpu_flags.vector_flags()]
    done = subprocess.run([COMPILER, "-std=c++17", *flags, "-mavx2", "-mfma", "-S",
                           f"-I{_build.csrc_dir()}", str(unit), "-o", str(tmp_path / "unit.s")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assembly = (tmp_path / "unit.s").read_text()
    assert "vfmadd" in assembly  # in AVX2 + FMA
    return assembly


@AVX2_GCC
def test_float_pack_transcendentals_do_no_scalar_work_per_lane(tmp_path):
    assembly = _assembly(tmp_path, UNIT)
    assert "pack_log1p" in assembly  # the functions were compiled
    found = SCALAR_PER_LANE.findall(assembly)
    assert not found, f"scalar instructions per lane: {sorted(set(found))} ({len(found)})"


@AVX2_GCC
def test_a_large_function_calls_no_pack_function(tmp_path):
    """Before pack.h's operations were always inlined, this unit compiled to 99 calls to
    fused_hmc::simd functions (fma among them)."""
    calls = re.findall(r"^\s+call\s+(_ZN9fused_hmc4simd\S*)", _assembly(tmp_path, _large_unit()),
                       re.M)
    assert not calls, f"{len(calls)} calls to pack functions, e.g. {calls[0]}"
