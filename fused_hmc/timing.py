"""The one clock for timing back-to-back calls: CUDA events on a GPU (the calls queue without
waiting for the host), the host clock on the CPU. ``fused-hmc bench`` and benchmarks/ share it."""
from __future__ import annotations

import time

import torch


def seconds_per_call(fn, calls: int, device) -> float:
    """(time for `calls` back-to-back calls of fn) / calls, in seconds, on `device` (None: CUDA)."""
    if device is None or torch.device(device).type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / calls
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls
