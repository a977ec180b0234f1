"""How many CUDA threads (lanes) a chain of a rows-form CppTarget takes, when lanes="auto".

A rows-form log p is always the same fixed tree over 32 strided partial sums
(csrc/math/targets/lane_rows.h), so the lanes change the speed only, never the draws: the choice may
depend on the chain count and the GPU. The aim is a full GPU at 1,000 to 10,000 chains: about
``WARPS_PER_SM`` warps on every SM (enough to hide the memory latency of the rows' loads), each
lane keeping at least ``ROWS_PER_LANE`` rows so the butterfly over the lanes (dim shuffles a level)
stays small beside its share of the rows (rows / lanes x dim operations). Both costs grow with dim,
so dim does not move the balance and is not an input.
"""
from __future__ import annotations

import torch

MAX_LANES = 32  # a chain's lanes share one warp (csrc/cuda/lane_group.cuh)
WARPS_PER_SM = 8
ROWS_PER_LANE = 4


def choose_lanes(chains: int, sm_count: int, rows: int) -> int:
    """The smallest power of two G with chains * G >= WARPS_PER_SM * 32 * sm_count threads,
    capped at MAX_LANES and at the largest power of two <= rows / ROWS_PER_LANE (at least 1)."""
    for name, value in (("chains", chains), ("sm_count", sm_count), ("rows", rows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    threads = WARPS_PER_SM * 32 * sm_count
    cap = MAX_LANES
    while cap > 1 and cap * ROWS_PER_LANE > rows:
        cap //= 2
    lanes = 1
    while lanes < cap and chains * lanes < threads:
        lanes *= 2
    return lanes


def device_sm_count(device: torch.device) -> int:
    """The streaming multiprocessors of CUDA `device`."""
    return torch.cuda.get_device_properties(device).multi_processor_count
