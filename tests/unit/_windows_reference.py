"""A Python oracle of Stan's warm-up windows (csrc/math/adaptation/adaptation_windows.h computes
them in the
kernels), written from Stan's windowed_adaptation.hpp for the tests, with one departure: the scaled
windows' terminal interval is at least kMinDualAveragingRun iterations where a slow window of
kMinScaledWindow draws still fits (csrc/math/limits.h says why)."""
from __future__ import annotations

from fused_hmc._limits import LIMITS

INIT_BUFFER, BASE_WINDOW, TERM_BUFFER = (LIMITS["kInitBuffer"], LIMITS["kBaseWindow"],
                                         LIMITS["kTermBuffer"])
MIN_WARMUP_FOR_WINDOWS = LIMITS["kMinWarmupForWindows"]
MIN_RUN, MIN_SCALED_WINDOW = LIMITS["kMinDualAveragingRun"], LIMITS["kMinScaledWindow"]


def warmup_windows(num_warmup: int, init_buffer: int = INIT_BUFFER, base_window: int = BASE_WINDOW,
                   term_buffer: int = TERM_BUFFER) -> list[tuple[int, int]]:
    """The slow windows of a warm-up of ``num_warmup`` iterations, as [start, stop) pairs.

    >>> warmup_windows(1000)
    [(75, 100), (100, 150), (150, 250), (250, 450), (450, 950)]
    """
    if num_warmup < MIN_WARMUP_FOR_WINDOWS:
        return []
    init, term, base = init_buffer, term_buffer, base_window
    if init + base + term > num_warmup:
        init, term = int(0.15 * num_warmup), int(0.10 * num_warmup)
        if num_warmup - init - MIN_RUN >= MIN_SCALED_WINDOW:  # our departure (issue 32)
            term = max(term, MIN_RUN)
        base = num_warmup - init - term
    last = num_warmup - term - 1  # the last slow iteration
    windows = []
    start, size, end = init, base, init + base - 1
    while True:
        windows.append((start, end + 1))
        if end == last:
            return windows
        size *= 2  # Stan's compute_next_window
        nxt = end + size
        if nxt != last and nxt + 2 * size >= last + 1:
            nxt = last
        start, end = end + 1, nxt
