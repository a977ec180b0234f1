"""What the driver needs from its surroundings: free memory, Ctrl-C between chunks, chunk pacing."""
from __future__ import annotations

import collections
import os
import signal
import threading
import time

import torch


class SamplesTooLargeError(MemoryError):
    """Keeping the requested draws would not fit in the device's free memory."""


def available_memory(device: torch.device) -> int | None:
    """Bytes that can still be allocated on `device`, or None when unknown.

    CUDA: the driver's free memory plus what torch's caching allocator holds unused. CPU: psutil's
    available memory when psutil is installed, else /proc/meminfo's MemAvailable, else free pages.
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    if device.type != "cpu":
        return None
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(nbytes: int, device: torch.device, what: str, advice: str) -> None:
    """Raises SamplesTooLargeError before allocating `nbytes` that `device` does not have."""
    available = available_memory(device)
    if available is not None and nbytes > available:
        raise SamplesTooLargeError(
            f"{what} needs {nbytes / 2**30:.3g} GiB on {device}, but only "
            f"{available / 2**30:.3g} GiB is available; {advice}")


class SigintDeferral:
    """While active, SIGINT is held instead of handled, so that a Ctrl-C can never land between an
    operator call and the driver's books of what it did (which would make a resumed run repeat
    transitions); :meth:`deliver` hands a held SIGINT to the handler that was installed before, at
    a point where the books are consistent. Whatever that handler does then happens there: Python's
    default raises KeyboardInterrupt (the driver then stops the run), another may only set a flag.

    Only in the main thread (where Python runs signal handlers) and only over a handler installed
    from Python (SIG_IGN, SIG_DFL and C handlers are left alone).
    """

    def __init__(self) -> None:
        self._previous = None
        self._held = None  # (signum, frame) of a SIGINT not delivered yet

    def __enter__(self) -> SigintDeferral:
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):
                self._previous = previous
                signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum, frame) -> None:
        if self._held is None:  # a second Ctrl-C before the first was delivered says the same
            self._held = (signum, frame)

    def deliver(self) -> None:
        """Calls the previous handler for a held SIGINT (it may raise KeyboardInterrupt)."""
        held, self._held = self._held, None
        if held is not None:
            self._previous(*held)

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self.deliver()  # none is lost


class ChunkPlanner:
    """Chunk lengths (transitions per operator call): fixed, or grown from a small first chunk
    until a chunk takes about `target_seconds`. Results do not depend on the chunking."""

    def __init__(self, fixed: int | None, first: int, target_seconds: float = 0.03,
                 max_growth: int = 4) -> None:
        self.fixed = fixed
        self.size = first
        self.target = target_seconds
        self.max_growth = max_growth

    def next_size(self, remaining: int) -> int:
        return min(self.fixed or self.size, remaining)

    def record(self, transitions: int, seconds: float) -> None:
        if self.fixed is not None or transitions < 1:
            return
        per_transition = max(seconds, 1e-9) / transitions
        wanted = int(self.target / per_transition)
        self.size = max(1, min(wanted, self.max_growth * max(transitions, self.size)))


class ChunkClock:
    """Learns when launched chunks finish, without a host sync per transition.

    CPU operators return when done. On CUDA, each chunk is bracketed by timing events, and at most
    `depth` chunks are in flight: launching one more waits for the oldest, so the GPU always has
    queued work while the progress bar and the planner hear of each chunk as it completes.
    """

    def __init__(self, device: torch.device, on_done, depth: int = 2) -> None:
        self.cuda = device.type == "cuda"
        self.on_done = on_done  # on_done(transitions, seconds)
        self.depth = depth
        self.in_flight: collections.deque = collections.deque()
        self._start = None

    def before_launch(self) -> None:
        if self.cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._start = time.perf_counter()

    def after_launch(self, transitions: int) -> None:
        if not self.cuda:
            self.on_done(transitions, time.perf_counter() - self._start)
            return
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        self.in_flight.append((transitions, self._start, end))
        while len(self.in_flight) >= self.depth:
            self._retire_oldest()

    def drain(self) -> None:
        while self.in_flight:
            self._retire_oldest()

    def _retire_oldest(self) -> None:
        transitions, start, end = self.in_flight.popleft()
        end.synchronize()
        self.on_done(transitions, start.elapsed_time(end) / 1000.0)
