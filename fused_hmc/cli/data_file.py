"""``--data FILE.json``: a JSON object of name -> number or (nested) list of numbers, as the data
dict a CppTarget (or a TorchModel file's function) takes."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from .errors import CliError


def _leaves(value, where: str):
    """Every number of a (nested) JSON list; raises on anything else."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{where}[{i}]")
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "a bool" if isinstance(value, bool) else f"{type(value).__name__} {value!r}"
        raise ValueError(f"{where} is {kind}; data values are numbers or lists of numbers")
    else:
        yield value


def data_value(name: str, value):
    """A JSON value as CppTarget data: an integer -> int (int64_t in C++), another number ->
    float (the chains' dtype), a list of integers only -> int64 tensor, any other list of numbers
    -> float64 tensor (nested lists: a tensor of that shape)."""
    leaves = list(_leaves(value, name))
    if not isinstance(value, list):
        return value
    dtype = torch.int64 if all(isinstance(v, int) for v in leaves) and leaves else torch.float64
    try:
        return torch.tensor(value, dtype=dtype)
    except (ValueError, TypeError, RuntimeError, OverflowError) as exc:
        raise ValueError(f"{name} is not a rectangular list of numbers ({exc})") from None


def load_data(path: str) -> dict:
    """The --data file as CppTarget's data dict, checked as CppTarget checks it."""
    from .. import cpp_data

    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError("--data", f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CliError("--data", f"{path} is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise CliError("--data", f"{path} must hold a JSON object of name -> number or list of "
                                 f"numbers, got a JSON {type(raw).__name__}")
    try:
        data = {name: data_value(name, value) for name, value in raw.items()}
        cpp_data.prepare(data)  # names, finiteness, ranges: CppTarget's own checks
    except (ValueError, TypeError) as exc:
        raise CliError("--data", f"{path}: {exc}") from None
    return data
