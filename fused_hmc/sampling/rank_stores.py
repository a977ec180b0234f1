"""The files of a run over several processes (``torchrun ... sample --out PATH``).

PATH is a directory: ``rank<r>`` is rank r's store, a result of its own chains like any other
(``fused_hmc.load`` reads it; xarray and ArviZ open it; its ``chain`` coordinate holds the global
chain ids), and ``summary.json`` holds what only every rank together knows: the global
statistics of :class:`fused_hmc.sampling.distributed.GlobalSummary` (float64 values written so
that they read back bit for bit) and the stores in rank order with their chains. Every rank
writes its own store, so PATH must be on a file system every rank sees.

To open every rank's draws as one dataset::

    import json, xarray as xr
    stores = json.load(open(f"{PATH}/summary.json"))["stores"]
    posterior = xr.concat([xr.open_zarr(f"{PATH}/{s['store']}", group="posterior")
                           for s in stores], dim="chain")
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .storage import replace_file

SUMMARY = "summary.json"
FORMAT = 1


def rank_store(path, rank: int) -> Path:
    return Path(path) / _store_name(rank)


def _store_name(rank: int) -> str:
    return f"rank{rank}"


def is_rank_directory(path) -> bool:
    return (Path(path) / SUMMARY).is_file()


def write_summary(path, summary, chain_counts: list[int]) -> None:
    """Rank 0's part, once every rank's store is complete: ``summary.json``."""
    offsets = np.cumsum([0] + chain_counts[:-1]).tolist()
    document = {
        "fused_hmc_ranks_format": FORMAT,
        "chains": summary.chains, "ranks": summary.ranks, "draws": summary.draws,
        "mean": summary.mean.tolist(), "var": summary.var.tolist(),
        "accept_count": summary.accept_count, "transitions": summary.transitions,
        "accept_rate": summary.accept_rate, "mean_accept_prob": summary.mean_accept_prob,
        "statistics": summary.statistics,
        "stores": [{"store": _store_name(r), "first_chain": first, "chains": count}
                   for r, (first, count) in enumerate(zip(offsets, chain_counts))]}
    text = json.dumps(document, indent=1)  # repr floats: an exact round trip
    replace_file(Path(path) / SUMMARY, lambda tmp: tmp.write_text(text))


def read_summary(path) -> dict:
    """``summary.json`` of a ranks directory, with mean and var as float64 arrays."""
    document = json.loads((Path(path) / SUMMARY).read_text())
    if document.get("fused_hmc_ranks_format") != FORMAT:
        raise ValueError(f"{path}/{SUMMARY} is of format "
                         f"{document.get('fused_hmc_ranks_format')!r}; this fused_hmc reads "
                         f"format {FORMAT}")
    document["mean"] = np.array(document["mean"], dtype=np.float64)
    document["var"] = np.array(document["var"], dtype=np.float64)
    return document
