"""Plain-text report of a suite run: one row per check, then a summary."""
from __future__ import annotations

import math

from .checks import CheckResult


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "-"
    if value == int(value) and abs(value) < 1e9:
        return f"{int(value)}"
    return f"{value:.4g}" if 1e-3 <= abs(value) < 1e5 else f"{value:.3e}"


def _fmt_p(p: float) -> str:
    return "-" if math.isnan(p) else f"{p:.2g}"


def format_table(results: list[CheckResult], details: bool = False) -> str:
    """Columns: check, statistic, threshold (acceptance region), p-value, PASS/FAIL."""
    rows = [("check", "statistic", "threshold", "p-value", "result")]
    rows += [(r.name, _fmt(r.statistic), r.threshold, _fmt_p(r.p_value),
              "PASS" if r.passed else "FAIL") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = []
    for i, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) if c in (0, 2) else cell.rjust(w)
                               for c, (cell, w) in enumerate(zip(row, widths))).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
        elif details or not results[i - 1].passed:
            lines.append(f"    {results[i - 1].detail}")
    return "\n".join(lines)


def format_summary(results: list[CheckResult]) -> str:
    failed = [r.name for r in results if not r.passed]
    if not failed:
        return f"PASS: all {len(results)} checks passed"
    return f"FAIL: {len(failed)} of {len(results)} checks failed: " + "; ".join(failed)
