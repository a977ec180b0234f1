"""How many CUDA threads (lanes) a chain of a rows-form CppTarget takes, and how its rows are summed.

A rows-form log p is always the same fixed tree over P strided partial sums
(csrc/math/targets/lane_rows.h, docs/LANES.md), P chosen by :func:`row_partials` from the data's
rows alone: 32 for ordinary data, 256 from ``BLOCK_ROWS`` rows on. A chain on G lanes (any power of
two up to P) computes P / G partials a lane in the same order, so the lanes change the speed only,
never the draws, and lanes="auto" may depend on the chain count and the GPU (:func:`choose_lanes`).
Lanes up to 32 share one warp (shuffles); 64, 128 and 256 make a chain one block (block lanes:
the warps' sums meet in shared memory).
"""
from __future__ import annotations

import torch

LANES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # the lanes a chain may take (csrc/user/user_target.h)
WARP_LANES = 32  # lanes up to a warp share it (csrc/cuda/lane_group.cuh); more make a block
MAX_LANES = LANES[-1]
ROW_PARTIALS = 32  # P for ordinary data (csrc/math/targets/lane_rows.h's kRowPartials)
BLOCK_ROW_PARTIALS = 256  # P for large data (kMaxRowPartials): up to 256 lanes share them
BLOCK_ROWS = 65_536  # the rows from which P = BLOCK_ROW_PARTIALS and "auto" takes block lanes
WARPS_PER_SM = 8
ROWS_PER_LANE = 4


def _positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def row_partials(rows: int) -> int:
    """P, the strided partial sums a rows-form log p over `rows` data rows is formed from:
    ROW_PARTIALS (32), or BLOCK_ROW_PARTIALS (256) for BLOCK_ROWS (65,536) rows or more. A
    function of the rows alone, so the same data give the same draws on any lanes and GPU."""
    _positive_int("rows", rows)
    return BLOCK_ROW_PARTIALS if rows >= BLOCK_ROWS else ROW_PARTIALS


def check_lanes(lanes, rows: int | None = None, argument: str = "lanes"):
    """`lanes` if valid ("auto" or a power of two in LANES, at most row_partials(rows) when the
    data's rows are given), else ValueError naming `argument`."""
    if lanes == "auto" and isinstance(lanes, str):
        return lanes
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes not in LANES:
        raise ValueError(f"{argument} must be \"auto\" or one of {list(LANES)}, got {lanes!r}")
    if rows is not None and lanes > row_partials(rows):
        raise ValueError(
            f"{argument}={lanes} is more than the data's row partials P = {row_partials(rows)} "
            f"(with {rows} rows; P = {BLOCK_ROW_PARTIALS} from {BLOCK_ROWS} rows): each lane "
            f"needs at least one partial; use {argument} <= {row_partials(rows)} or \"auto\"")
    return lanes


def choose_lanes(chains: int, sm_count: int, rows: int) -> int:
    """The lanes="auto" choice.

    Large data (rows >= BLOCK_ROWS, so P = 256): a block of 256 lanes per chain. Each lane reads
    rows l, l + 256, ..., so a warp's loads are adjacent rows (with fewer lanes a lane's P / G
    partials are P / G rows apart); each lane keeps at least 256 rows, beside which the block's
    reduction (two barriers, dim + 1 values per warp) is small; and 132 chains already put
    WARPS_PER_SM warps on each of an H200's 132 SMs.

    Otherwise (P = 32): the smallest power of two G with chains * G >= WARPS_PER_SM * 32 *
    sm_count threads (about WARPS_PER_SM warps on every SM, enough to hide the rows' load
    latency), capped at 32 (one warp) and at the largest power of two <= rows / ROWS_PER_LANE (at
    least 1), so the butterfly over the lanes (dim shuffles a level) stays small beside a lane's
    share of the rows (rows / G x dim operations). Both costs grow with dim, so dim does not move
    the balance and is not an input."""
    for name, value in (("chains", chains), ("sm_count", sm_count), ("rows", rows)):
        _positive_int(name, value)
    partials = row_partials(rows)
    if partials > WARP_LANES:
        return partials
    threads = WARPS_PER_SM * 32 * sm_count
    cap = partials
    while cap > 1 and cap * ROWS_PER_LANE > rows:
        cap //= 2
    lanes = 1
    while lanes < cap and chains * lanes < threads:
        lanes *= 2
    return lanes


def device_sm_count(device: torch.device) -> int:
    """The streaming multiprocessors of CUDA `device`."""
    return torch.cuda.get_device_properties(device).multi_processor_count
