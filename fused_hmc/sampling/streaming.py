"""Kept draws streamed to a zarr store chunk by chunk while the chains run on (``out=``).

The op writes a chunk's draws into the buffer of one of a few slots; :meth:`DrawStream.submit`
hands the slot to a writer thread, which appends the draws to the store while the next chunks run
into the other slots. On CUDA a slot is a device buffer and a pinned host buffer: the copy between
them runs on a side stream, ordered after the op by an event (no host sync), and the writer waits
on the copy's own event before writing. The chains wait only when the disk falls `slots` chunks
behind. Only the slots stay resident, so a run may keep more draws than device or host memory
holds; it then samples at the speed the store is written.

The store is made exclusively (``os.mkdir``, before anything is written), so that of two
processes streaming to one path one fails before either writes. Its root records the run id of
the sampler that made it, which its checkpoint records too: a resumed run cuts back and appends
to the store only when the ids match, never to another run's store.
"""
from __future__ import annotations

import os
import queue
import threading
from pathlib import Path

import torch

from . import storage
from .storage import DrawStore

SLOTS = 3
# A slot's size: at most this, and at most 1/16 of the free memory (SLOTS of them stay resident).
SLOT_BYTES = 32 * 2**20


def slot_capacity(draw_bytes: int, kept: int, available: int | None) -> int:
    """Draws per slot: as many as fit in the slot size (at least one), no more than are kept."""
    budget = SLOT_BYTES if available is None else min(SLOT_BYTES, available // 16)
    return max(1, min(kept, budget // draw_bytes))


RUN_ID = "fused_hmc_run_id"  # the root attribute naming the run that made the store
_FORMAT = 1  # saving.FORMAT: a completed stream is a saved result


def create_store(path: Path, run_id: str, chains: int, dim: int, dtype: torch.dtype,
                 chain_offset: int, attributes: dict) -> DrawStore:
    """The new store at `path` of the run `run_id`, with no draws yet."""
    try:
        os.mkdir(path)  # the one test of existence: atomic
    except FileExistsError:
        raise FileExistsError(f"out={path} exists; stream to a new path") from None
    root = storage.open_root(storage.directory_store(path, "a"), "w-",
                             {"fused_hmc_format": _FORMAT, RUN_ID: run_id})
    store = DrawStore.create(root, chains, dim, dtype, chain_offset, attributes)
    storage.consolidate(path)
    return store


def reopen_store(path: Path, run_id: str, count: int) -> DrawStore:
    """The store of run `run_id` at `path`, cut back to its first `count` draws (those its
    checkpoint counted); a store of any other run is refused untouched."""
    if not path.is_dir():
        raise FileNotFoundError(f"out={path}: the store this checkpointed run streamed its draws "
                                "to is missing")
    root = storage.open_root(storage.directory_store(path, "a"), "r+")
    found = root.attrs.get(RUN_ID)
    if found != run_id:
        raise ValueError(f"out={path} holds the draws of another run (run id {found}, the "
                         f"checkpoint's {run_id}): it was left untouched. A checkpoint streams "
                         "to the store beside it (its path is kept relative to the checkpoint)")
    store = DrawStore(root["posterior"])
    store.truncate(count)
    return store


class _Slot:
    def __init__(self, chains: int, capacity: int, dim: int, dtype: torch.dtype,
                 device: torch.device):
        numel = chains * capacity * dim
        self.device_buffer = torch.empty(numel, dtype=dtype, device=device)
        self.host_buffer = (torch.empty(numel, dtype=dtype, pin_memory=True)
                            if device.type == "cuda" else self.device_buffer)

    @staticmethod
    def view(buffer: torch.Tensor, shape: tuple[int, int, int]) -> torch.Tensor:
        chains, kept, dim = shape
        return buffer[:chains * kept * dim].view(chains, kept, dim)  # contiguous


class DrawStream:
    """Draws [chains, k, dim] of successive chunks on their way to `store`, in order."""

    def __init__(self, store: DrawStore, chains: int, dim: int, dtype: torch.dtype,
                 device: torch.device, capacity: int, slots: int = SLOTS):
        self.store, self.shape, self.capacity = store, (chains, dim), capacity
        self.cuda = device.type == "cuda"
        self._side = torch.cuda.Stream(device) if self.cuda else None
        self._free: queue.Queue = queue.Queue()
        for _ in range(slots):
            self._free.put(_Slot(chains, capacity, dim, dtype, device))
        self._pending: queue.Queue = queue.Queue()
        self._current = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._write_loop, name="fused_hmc draw writer",
                                        daemon=True)
        self._thread.start()

    def buffer(self, kept: int) -> torch.Tensor:
        """A [chains, kept, dim] buffer (kept <= capacity) for the next chunk's draws; waits while
        every slot is still being written. Raises the error a write failed with, if any."""
        if not 1 <= kept <= self.capacity:
            raise AssertionError(f"{kept} draws in a slot of {self.capacity}")
        slot = self._free.get()
        if self._error is not None:
            self._free.put(slot)
            raise self._error
        self._current = slot
        chains, dim = self.shape
        return slot.view(slot.device_buffer, (chains, kept, dim))

    def submit(self, start: int, kept: int) -> None:
        """Queues the draws the op wrote into the last buffer as draws start .. start + kept - 1
        of the store (after every draw submitted before). Never blocks; never raises."""
        slot, self._current = self._current, None
        chains, dim = self.shape
        done = None
        if self.cuda:
            written = torch.cuda.Event()
            written.record()  # on the current stream, after the op
            self._side.wait_event(written)
            slot.device_buffer.record_stream(self._side)  # not reused before the copy is done
            with torch.cuda.stream(self._side):
                shape = (chains, kept, dim)
                slot.view(slot.host_buffer, shape).copy_(slot.view(slot.device_buffer, shape),
                                                         non_blocking=True)
                done = torch.cuda.Event()
                done.record()
        self._pending.put((slot, start, kept, done))

    def _write_loop(self) -> None:
        while True:
            item = self._pending.get()
            if item is None:
                self._pending.task_done()
                return
            slot, start, kept, done = item
            try:
                if done is not None:
                    done.synchronize()  # the copy into the host buffer is complete
                if self._error is None:
                    chains, dim = self.shape
                    self.store.append(start, slot.view(slot.host_buffer,
                                                       (chains, kept, dim)).numpy())
            except BaseException as exc:  # reported to the sampling thread
                self._error = exc
            finally:
                self._free.put(slot)
                self._pending.task_done()

    def flush(self) -> None:
        """Waits until every submitted draw is in the store; raises a write's error."""
        self._pending.join()
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Flushes, then ends the writer thread (idempotent)."""
        if self._thread.is_alive():
            self._pending.put(None)
            self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
