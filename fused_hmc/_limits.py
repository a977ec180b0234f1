"""The limits and defaults C++ and Python share, read from their one source, csrc/math/limits.h
(one ``FHMC_LIMIT(name, value)`` line each), at import: nothing is built, so ``import fused_hmc``
and constructing a target never compile. ``tests/unit/test_limits.py`` checks this parse against
the compiled library's own values."""
from __future__ import annotations

import re

from ._build import csrc_dir

_LINE = re.compile(r"^FHMC_LIMIT\((k\w+),\s*(\d+)\)\s*$", re.MULTILINE)


def _read() -> dict[str, int]:
    text = (csrc_dir() / "math" / "limits.h").read_text()
    found = {name: int(value) for name, value in _LINE.findall(text)}
    if not found:
        raise RuntimeError("csrc/math/limits.h declares no FHMC_LIMIT lines")
    return found


LIMITS: dict[str, int] = _read()
STAN_WINDOWS: tuple[int, int, int] = (LIMITS["kInitBuffer"], LIMITS["kBaseWindow"],
                                      LIMITS["kTermBuffer"])
