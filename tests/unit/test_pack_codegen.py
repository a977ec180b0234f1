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


def _is_gcc() -> bool:
    if shutil.which(COMPILER) is None:
        return False
    version = subprocess.run([COMPILER, "--version"], capture_output=True, text=True).stdout
    return "Free Software Foundation" in version and "clang" not in version.lower()


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64") or not _is_gcc(),
                    reason="the AVX2 code generation of GCC on x86-64")
def test_float_pack_transcendentals_do_no_scalar_work_per_lane(tmp_path):
    unit = tmp_path / "unit.cpp"
    unit.write_text(UNIT)
    # the build's value-preserving flags, and AVX2 whatever this machine has (AVX-512 registers
    # would hold the 8 doubles whole)
    flags = ["-O3", "-ffp-contract=off", *_cpu_flags.vector_flags()]
    done = subprocess.run([COMPILER, "-std=c++17", *flags, "-mavx2", "-mfma", "-S",
                           f"-I{_build.csrc_dir()}", str(unit), "-o", str(tmp_path / "unit.s")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assembly = (tmp_path / "unit.s").read_text()
    assert "pack_log1p" in assembly  # the functions were compiled
    assert "vfmadd" in assembly  # in AVX2 + FMA
    found = SCALAR_PER_LANE.findall(assembly)
    assert not found, f"scalar instructions per lane: {sorted(set(found))} ({len(found)})"
