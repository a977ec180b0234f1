"""argparse types of the flags: each names the rule, and argparse prefixes the flag."""
from __future__ import annotations

import argparse
import math

import torch

from ..lanes import LANES
from .errors import CliError
from .model_file import is_model_file

CPP_SUFFIXES = (".cpp", ".cc", ".cxx")


def parameter_list(text: str) -> list[int | str]:
    """Comma-separated parameter names or indices (digits: an index)."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"must be comma-separated names or indices, got {text!r}")
    return [int(item) if item.isdigit() else item for item in items]


def integer(minimum: int, maximum: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            upper = f" and <= {maximum}" if maximum is not None else ""
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}{upper}, got {text}")
        return value
    return parse


def lanes(text: str):
    """--lanes: auto or a power of two from 1 to 256 (fused_hmc.lanes.LANES; above 32 a chain is
    a CUDA block; at most the data's row partials, which CppTarget checks)."""
    if text == "auto":
        return text
    if text not in {str(g) for g in LANES}:
        raise argparse.ArgumentTypeError(
            f"must be auto or one of {', '.join(map(str, LANES))}, got {text!r}")
    return int(text)


def real(low: float, high: float = math.inf, *, low_open: bool = True, high_open: bool = True):
    interval = (("(" if low_open else "[") + f"{low:g}, {high:g}" + (")" if high_open else "]"))

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (math.isfinite(value) and above and below):
            raise argparse.ArgumentTypeError(f"must be a finite number in {interval}, got {text}")
        return value
    return parse


def is_cpp_path(text: str | None) -> bool:
    return text is not None and text.lower().endswith(CPP_SUFFIXES)


def target_kind(text: str) -> str:
    """argparse type of --target: a built-in target's name or a C++ file's path."""
    from ..targets import BUILT_IN

    if text in BUILT_IN or is_cpp_path(text):
        return text
    raise argparse.ArgumentTypeError(
        f"must be one of {', '.join(BUILT_IN)} or a C++ file ending in "
        f"{', '.join(CPP_SUFFIXES)}, got {text!r}")


def model_kind(text: str) -> str:
    """argparse type of --model: a library model's name or path.py[:NAME]."""
    from ..models import MODELS

    if text in MODELS or is_model_file(text):
        return text
    raise argparse.ArgumentTypeError(
        f"must be one of {', '.join(sorted(MODELS))} or a Python file path/to/model.py[:NAME] "
        f"defining a fused_hmc.TorchModel, got {text!r}")


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def device(name: str | None) -> torch.device:
    """--device: the one named (cuda only where torch sees one), else the default."""
    if name == "cuda" and not torch.cuda.is_available():
        why = ("this torch build has no CUDA support" if torch.version.cuda is None
               else "torch sees no CUDA device")
        raise CliError("--device", f"cuda requested, but {why}; use --device cpu")
    return torch.device(name or default_device())
