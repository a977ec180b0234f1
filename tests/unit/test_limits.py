"""The constants C++ and Python share: fused_hmc._limits parses csrc/math/limits.h at import, with
nothing built; here the parse is checked against the compiled library's own values, and the target
registry's built-in names against the three the Python targets pass to the chain ops."""
from __future__ import annotations

import re
import subprocess
import sys

from fused_hmc import _build, _limits
from fused_hmc._limits import LIMITS
from fused_hmc.targets import DenseGaussian, DiagonalGaussian, StandardGaussian

BUILT_IN = {"standard", "diagonal", "dense"}


def _limit_lines() -> list[str]:
    text = (_build.csrc_dir() / "math" / "limits.h").read_text()
    return [line for line in text.splitlines() if line.startswith("FHMC_LIMIT(")]


def test_every_limit_line_parses():
    """Each FHMC_LIMIT(name, value) line of limits.h (the #define aside) gives one entry."""
    lines = _limit_lines()
    assert lines, "limits.h declares no FHMC_LIMIT lines"
    for line in lines:
        found = _limits._LINE.findall(line)
        assert len(found) == 1, f"limits.h line not parsed: {line!r}"
        name, value = found[0]
        assert LIMITS[name] == int(value), line
    assert len(LIMITS) == len(lines)  # no name twice, none read from elsewhere


def test_the_parse_equals_the_compiled_values():
    assert LIMITS == dict(_build.bindings().limits())


def test_stan_windows_and_the_python_constants_come_from_the_limits():
    assert _limits.STAN_WINDOWS == (LIMITS["kInitBuffer"], LIMITS["kBaseWindow"],
                                    LIMITS["kTermBuffer"]) == (75, 25, 50)
    from fused_hmc.targets import MAX_DENSE_DIM

    assert MAX_DENSE_DIM == LIMITS["kMaxDenseDim"]


def test_the_python_targets_name_the_built_in_targets():
    assert {t.op_target for t in (StandardGaussian, DiagonalGaussian, DenseGaussian)} == BUILT_IN


def test_the_registry_holds_exactly_the_built_in_targets_in_a_fresh_process():
    """Before any CppTarget is compiled, the registry's names are the three of csrc/targets.def."""
    code = "from fused_hmc import _build; _build.load_extension(); print(_build.bindings().target_names())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         check=True).stdout.strip().splitlines()[-1]
    names = re.findall(r'"([^"]*)"', out)
    assert set(names) == BUILT_IN and len(names) == 3, out
