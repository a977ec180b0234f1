"""C++ expressions as the generator builds them: typed strings, literals folded in Python.

An :class:`Expr` is C++ text with its kind: ``T`` (depends on the chain's position: the template
scalar, a float or double or a dual number, or a pack of chains), ``S`` (a float constant,
``Scalar``: the chains' dtype), ``i`` (``int64_t``), ``b`` (``bool``), and per chain ``m`` (a
condition on T values: a ``bool``, or a lane mask where T is a pack of chains,
csrc/cpu/simd/pack.h, so chosen on by ``where``, never ``?:``) and ``j`` (an ``int64_t``, or a
pack of them: a count of a mask's set entries); ``lit`` holds the Python value of a literal so
arithmetic on literals happens here, not in the generated code. Index expressions are ints or C++
strings (:func:`iadd`, :func:`imul`, ...), folded when both sides are ints.
"""
from __future__ import annotations

import math
import re
from typing import NamedTuple

# IntT: int64_t, or a pack of them where T is a pack (declared by codegen.py where used)
CTYPE = {"T": "T", "S": "Scalar", "i": "int64_t", "b": "bool", "m": "fused_hmc::lane_mask_t<T>",
         "j": "IntT"}
PER_CHAIN = ("T", "j")  # the numbers that are packs where T is
_ATOM = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*(\[[^\[\]]*\])?\Z|-?[0-9.]+\Z|Scalar\([^()]*\)\Z")


class Expr(NamedTuple):
    code: str
    kind: str
    lit: object = None  # the Python value of a literal, else None
    factors: tuple | None = None  # (a, b) where the code is the product a * b

    @property
    def atomic(self) -> bool:
        return _ATOM.match(self.code) is not None or self.lit is not None


def literal(value, kind: str) -> Expr:
    if kind in ("b", "m"):
        return Expr("true" if value else "false", "b", bool(value))
    if kind in ("i", "j"):
        if isinstance(value, float) and math.isinf(value):  # an integer max's or min's start
            return Expr("INT64_MAX" if value > 0 else "INT64_MIN", "i",
                        2**63 - 1 if value > 0 else -2**63)
        v = int(value)
        return Expr(str(v) if v >= 0 else f"({v})", "i", v)
    v = float(value)
    if math.isnan(v):
        code = "Scalar(NAN)"
    elif math.isinf(v):
        code = "Scalar(INFINITY)" if v > 0 else "(-Scalar(INFINITY))"
    else:
        code = f"Scalar({v!r})"
    return Expr(code, "S", v)


def add_to(target: str, e: Expr, kind: str) -> str:
    """The statement target += e, as target = fma(a, b, target) where e is a product a * b of
    numbers: one rounding, on the FMA units (users' modules are compiled without contraction,
    fused_hmc/_build.py's USER_CUDA_FLAGS, so a sum of products is otherwise a mul and an add)."""
    if e.factors is not None and kind in ("T", "S") and all(
            f.kind == kind or (f.kind, kind) == ("S", "T") for f in e.factors):
        a, b = (f.code if f.kind == kind else f"{CTYPE[kind]}({f.code})" for f in e.factors)
        return f"{target} = fma({a}, {b}, {target});"
    return f"{target} += {e.code};"


_FIXED_ATOM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[0-9]+\])?\Z")


def fixed_factors(e: Expr) -> bool:
    """Whether a local bound to e may still be summed as fma of e's factors (add_to): each factor
    is a number read from the data, or a per-chain name or entry at a fixed index (x[3]). A
    per-chain entry under a loop variable (x[k]) is not: repeating it at each use spilled
    diamonds' kernels 8x (ptxas, float64, 16 lanes; benchmarks/results/fmad/)."""
    return e.factors is not None and all(
        (f.kind == "S" and f.atomic) or _FIXED_ATOM.match(f.code) is not None for f in e.factors)


def paren(e: Expr) -> str:
    return e.code if e.atomic else f"({e.code})"


def as_kind(e: Expr, kind: str) -> Expr:
    """e converted to kind (T, S, i, b, m or j; a condition asked for as b may come as m)."""
    if e.kind == kind or (kind == "b" and e.kind == "m"):
        return e
    if kind == "m":
        b = as_kind(e, "b")  # a plain bool (data, a literal) becomes a mask by comparing a T
        return b if b.kind == "m" else Expr(f"({as_kind(b, 'T').code} != T(0))", "m")
    if e.lit is not None:
        return literal(e.lit, "S" if kind == "T" else kind)
    if kind == "b":
        return Expr(f"({paren(e)} != 0)", "m" if e.kind in PER_CHAIN else "b")
    if kind == "i":
        return Expr(f"static_cast<int64_t>({e.code})", "i")
    if e.kind in ("b", "m") and kind in PER_CHAIN:
        return Expr(f"where({e.code}, {CTYPE[kind]}(1), {CTYPE[kind]}(0))", kind)
    if e.kind == "b":
        return Expr(f"Scalar({e.code})", kind)
    if kind == "T" and e.kind == "S":
        return e  # Scalar mixes with T in every operator and function
    return Expr(f"{CTYPE[kind]}({e.code})", kind)


# -- index arithmetic (int or C++ string) -------------------------------------------------------

def iadd(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if b == 0:
        return a
    if a == 0:
        return b
    return f"({a} + {b})"


def imul(a, c: int):
    if isinstance(a, int):
        return a * c
    if c == 1:
        return a
    if c == 0:
        return 0
    return f"{a} * {c}"


def ifloordiv(a, c: int):
    if isinstance(a, int):
        return a // c
    return a if c == 1 else f"(({a}) / {c})"


def imod(a, c: int):
    if isinstance(a, int):
        return a % c
    return 0 if c == 1 else f"(({a}) % {c})"


def flat(idx, shape) -> object:
    """Row-major offset of idx in shape."""
    total, stride = 0, 1
    for i, n in zip(reversed(idx), reversed(shape)):
        total = iadd(imul(i, stride), total) if n > 1 else total
        stride *= n
    return total


def unflat(offset, shape) -> tuple:
    out, stride = [], 1
    strides = []
    for n in reversed(shape):
        strides.append(stride)
        stride *= n
    strides.reverse()
    for d, (n, s) in enumerate(zip(shape, strides)):
        q = ifloordiv(offset, s)
        out.append(0 if n == 1 else (q if d == 0 else imod(q, n)))  # offset < numel
    return tuple(out)


def loop_vars(idx) -> set[str]:
    return {v for i in idx if isinstance(i, str) for v in re.findall(r"\bk\d+\b", i)}
