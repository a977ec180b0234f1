"""The host compiler's flags that make the CPU chains use every core and the vector unit.

Threads: the CPU chain loops split chains with ``at::parallel_for``, which is an OpenMP region in
torch's OpenMP builds; compiled without ``-fopenmp`` the pragma is ignored and every chain runs on
one thread. The region then uses torch's own OpenMP runtime (the library libtorch loaded), so
``torch.set_num_threads`` governs it.

Vector unit: the chain math calls ``std::fma`` for every leapfrog move. Without an FMA instruction
in the target ISA that is a call into libm per coordinate, and loops around it do not vectorise.
The extension is compiled on the machine that runs it (on first use), so it targets the ISA torch
found there (``torch.backends.cpu.get_cpu_capability()``, which ``ATEN_CPU_CAPABILITY`` may lower).
GCC vectorises a loop with a choice in it (Box-Muller's branch-free logf and sincos,
csrc/math/fp/host_transcendentals.h) only under ``-fno-trapping-math`` (no user-visible FP traps,
Clang's default), and a ``sqrt`` only without errno (``-fno-math-errno``): neither lets the
compiler change a value.
None of these flags changes a result: -ffp-contract=off still forbids contraction, an FMA
instruction rounds as libm's fma does, and vectorised loops apply the same IEEE operation per
element (GCC reorders no floating-point reduction without -ffast-math).
"""
from __future__ import annotations

import platform
import sys

import torch

# torch's CPU capability -> GCC/Clang target flags (x86-64 only; aarch64's baseline has FMA and
# NEON already).
_ISA_FLAGS = {
    "AVX512": ("-mavx2", "-mfma", "-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl"),
    "AVX2": ("-mavx2", "-mfma"),
}


def isa_flags() -> tuple[str, ...]:
    """Target flags for the vector ISA torch detected on this machine (none elsewhere)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ()
    return _ISA_FLAGS.get(torch.backends.cpu.get_cpu_capability(), ())


def vector_flags() -> tuple[str, ...]:
    """Flags that let loops with choices and square roots run in vector lanes (no value changes)."""
    return ("-fno-trapping-math", "-fno-math-errno")


def openmp_flags() -> tuple[str, ...]:
    """-fopenmp where torch's own parallel backend is OpenMP (Linux wheels), else nothing (then
    at::parallel_for runs on torch's native pool without it)."""
    return ("-fopenmp",) if torch._C.has_openmp and sys.platform.startswith("linux") else ()
