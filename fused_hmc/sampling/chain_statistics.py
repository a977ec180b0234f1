"""The per-chain statistics the sample and warmup ops accumulate (accept_count, accept_prob_sum,
gradient_evaluations, divergences, ...), read from their one source,
csrc/math/stats/chain_statistics.def, at import: nothing is built. The kernel, results, saved
files, checkpoints and the ranks' gathering all go through :data:`STATISTICS`, so a statistic
added to the def reaches every one of them.
"""
from __future__ import annotations

import re
from typing import NamedTuple

import torch

from .._build import csrc_dir

_LINE = re.compile(r'^FHMC_CHAIN_STATISTIC\((\w+),\s*(int64_t|double),\s*(.+),\s*"([^"]*)"\)\s*$',
                   re.MULTILINE)
_DTYPES = {"int64_t": torch.int64, "double": torch.float64}


class ChainStatistic(NamedTuple):
    """One line of the def: its name, dtype (int64 or float64) and what it counts."""

    name: str
    dtype: torch.dtype
    description: str


def _read() -> tuple[ChainStatistic, ...]:
    text = (csrc_dir() / "math" / "stats" / "chain_statistics.def").read_text()
    found = tuple(ChainStatistic(name, _DTYPES[kind], description)
                  for name, kind, _, description in _LINE.findall(text))
    if not found:
        raise RuntimeError("csrc/math/stats/chain_statistics.def declares no FHMC_CHAIN_STATISTIC")
    return found


STATISTICS: tuple[ChainStatistic, ...] = _read()
NAMES: tuple[str, ...] = tuple(s.name for s in STATISTICS)
# SampleResult's fields of chain statistics ({name: [chains]}): sampling's and the warm-up's.
RESULT_FIELDS = ("chain_statistics", "warmup_chain_statistics")


def zeros(chains: int, device) -> dict[str, torch.Tensor]:
    """Every statistic at zero for `chains` chains: {name: [chains] in its dtype}, in the def's
    order."""
    return {s.name: torch.zeros(chains, dtype=s.dtype, device=device) for s in STATISTICS}


def as_list(statistics: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The ops' `statistics` argument: the tensors in the def's order."""
    return [statistics[name] for name in NAMES]


def totals(statistics: dict[str, torch.Tensor]) -> dict[str, int | float]:
    """Each statistic summed over the chains (an int for an int64 one)."""
    return {name: (int if t.dtype == torch.int64 else float)(t.sum()) for name, t in
            statistics.items()}
