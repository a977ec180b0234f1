"""A CppTarget's data: checked once, described by a signature the build hashes, converted per use.

``data`` maps C++ identifiers to tensors (any shape), Python floats or Python ints
(docs/TARGETS.md). The C++ side reads them as ``data.<name>``; the generated ``Data`` struct
depends only on the *signature* (each name, kind and tensor rank), never on the values, so new
values reuse a build. Values are kept on the CPU, floating tensors in float64 and integer tensors
in int64, and converted to the chains' dtype and device on use (:func:`to_arguments`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

import torch

Kind = Literal["tensor", "int_tensor", "float", "int"]

# C++20 keywords and alternative tokens: not usable as member names.
CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export extern
false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr
operator or or_eq private protected public register reinterpret_cast requires return short signed
sizeof static static_assert static_cast struct switch template this thread_local throw true try
typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
""".split())
# Names the generated code or the headers it includes already use for something else: the struct
# and scalar type, and macros that would rewrite a member's name.
GENERATED_NAMES = frozenset({"Data", "Scalar", "make_data", "NAN", "INFINITY", "HUGE_VAL",
                             "EOF", "NULL", "assert", "errno", "int64_t", "int32_t", "size_t"})
_RESERVED_PREFIXES = ("FHMC_", "FUSED_HMC_", "fused_hmc")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
_FLOATING_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@dataclass(frozen=True)
class DataField:
    """One member group of the generated ``Data`` struct; ndim: the tensor's rank (0: a scalar)."""

    name: str
    kind: Kind
    ndim: int = 0

    @property
    def is_tensor(self) -> bool:
        return self.kind in ("tensor", "int_tensor")


def check_name(name) -> None:
    """Raises unless `name` can be a member of the generated C++ struct."""
    if not isinstance(name, str):
        raise TypeError(f"data names must be str, got {type(name).__name__} {name!r}")
    if not _IDENTIFIER.match(name):
        raise ValueError(f"data name {name!r} is not a C++ identifier (letters, digits and _, "
                         "not starting with a digit)")
    if name in CPP_KEYWORDS:
        raise ValueError(f"data name {name!r} is a C++ keyword")
    if "__" in name or re.match(r"_[A-Z]", name):
        raise ValueError(f"data name {name!r} is reserved in C++ (it contains __, or starts with _ "
                         "and a capital letter)")
    if name in GENERATED_NAMES or name.startswith(_RESERVED_PREFIXES):
        raise ValueError(f"data name {name!r} clashes with a name the generated C++ code uses")
    from .cpp_macros import CUDA_PREFIXES, object_like_macros

    if name in object_like_macros() or name.startswith(CUDA_PREFIXES):
        raise ValueError(f"data name {name!r} is a macro of the C/C++ or system headers the "
                         "generated code includes: the preprocessor would rewrite data."
                         f"{name}; rename it")


def _field_and_value(name: str, value) -> tuple[DataField, object]:
    if isinstance(value, bool):
        raise TypeError(f"data[{name!r}] is a bool: pass an int (0 or 1) or a tensor of numbers")
    if isinstance(value, int):
        if not -2**63 <= value < 2**63:
            raise ValueError(f"data[{name!r}] = {value} does not fit in int64_t")
        return DataField(name, "int"), int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"data[{name!r}] = {value} is not finite")
        return DataField(name, "float"), float(value)
    if not isinstance(value, torch.Tensor):
        try:
            value = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"data[{name!r}] must be a tensor, float or int, got "
                            f"{type(value).__name__}") from exc
    t = value.detach()
    if t.dtype in _INTEGER_DTYPES:
        return DataField(name, "int_tensor", t.dim()), t.to(device="cpu", dtype=torch.int64)
    if t.dtype not in _FLOATING_DTYPES:
        raise TypeError(f"data[{name!r}] has dtype {t.dtype}, which a C++ target cannot read: "
                        "use a floating or integer tensor")
    t = t.to(device="cpu", dtype=torch.float64)
    if not bool(torch.isfinite(t).all()):
        i = int((~torch.isfinite(t)).flatten().nonzero()[0])
        index = list(torch.unravel_index(torch.tensor(i), t.shape)) if t.dim() else []
        raise ValueError(f"data[{name!r}] has a non-finite entry {float(t.flatten()[i])} at "
                         f"index {[int(k) for k in index]}")
    return DataField(name, "tensor", t.dim()), t


def prepare(data) -> tuple[tuple[DataField, ...], dict[str, object]]:
    """Checks `data` (a dict, or None) and returns its fields in the generated order (by name) and
    the values kept on the CPU (float64 / int64 tensors, Python floats and ints)."""
    if data is None:
        return (), {}
    if not isinstance(data, dict):
        raise TypeError(f"data must be a dict of name -> tensor | float | int, got "
                        f"{type(data).__name__}")
    fields, values = [], {}
    for name in data:
        check_name(name)
    for name in sorted(data):
        field, value = _field_and_value(name, data[name])
        fields.append(field)
        values[name] = value
    derived = {f"{f.name}_{suffix}": f.name for f in fields if f.is_tensor
               for suffix in ("shape", "size")}
    for f in fields:
        if f.name in derived:
            raise ValueError(f"data name {f.name!r} clashes with the generated member of tensor "
                             f"{derived[f.name]!r} (data.{f.name})")
    return tuple(fields), values


def to_arguments(fields, values, dtype: torch.dtype, device: torch.device):
    """The module's (tensors, floats, ints) lists for positions of `dtype` on `device`: floating
    tensors in `dtype`, integer tensors in int64, contiguous, in the fields' order. Raises when a
    value does not survive the rounding to `dtype` (overflows to inf)."""
    tensors, floats, ints = [], [], []
    for f in fields:
        value = values[f.name]
        if f.kind == "int":
            ints.append(value)
        elif f.kind == "float":
            if not math.isfinite(float(torch.tensor(value, dtype=dtype))):
                raise ValueError(f"data[{f.name!r}] = {value} overflows {dtype}")
            floats.append(value)
        else:
            t = value.to(dtype=dtype if f.kind == "tensor" else torch.int64)
            if f.kind == "tensor" and not bool(torch.isfinite(t).all()):
                raise ValueError(f"data[{f.name!r}] has entries that overflow {dtype}")
            tensors.append(t.to(device=device).contiguous())
    return tensors, floats, ints


def reference_data(fields, values, dtype: torch.dtype) -> dict[str, object]:
    """The data as the compiled code sees it for `dtype` (floating values rounded to it), in
    float64 for a torch reference: tensors float64 / int64 on the CPU, floats and ints as Python
    numbers."""
    out = {}
    for f in fields:
        value = values[f.name]
        if f.kind == "tensor":
            out[f.name] = value.to(dtype).to(torch.float64)
        elif f.kind == "float":
            out[f.name] = float(torch.tensor(value, dtype=dtype))
        else:
            out[f.name] = value
    return out
