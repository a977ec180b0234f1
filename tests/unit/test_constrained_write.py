"""constrained.write, the constrained draws beside q in a store's posterior: a write stopped at any
of the store's file operations (as a kill would stop it: zarr writes each file atomically) leaves
the earlier draws readable at the count the store's result group still records, and a completed
write reads back whole. Before, the arrays were deleted and then created again: a kill between
left a store whose listed variables were missing (KeyError on load)."""
from __future__ import annotations

import pytest
import torch
import zarr

from fused_hmc.sampling import constrained, storage


class _Stopped(Exception):
    """The simulated kill."""


def _values(draws: int) -> dict[str, torch.Tensor]:
    """Constrained draws of 3 chains whose first draws do not depend on how many there are (a
    later run of a streaming sampler only appends)."""
    t = torch.arange(draws, dtype=torch.float64) + 100 * torch.arange(3.0)[:, None]
    return {"tau": (-t / 10).exp(), "theta": torch.stack([t, 2 * t], dim=-1)}


def _posterior(path, values):
    root = storage.open_root(storage.directory_store(path, "w"), "w")
    group = root.create_group("posterior")
    constrained.write(group, values)
    return path


def _reopen(path):
    return storage.open_root(storage.directory_store(path, "a"), "r+")["posterior"]


def _operations(monkeypatch, stop_at: int | None) -> list[int]:
    """Counts the store's writes and deletes (and raises _Stopped at the stop_at-th)."""
    seen = [0]
    for method in ("set", "delete", "delete_dir"):
        original = getattr(zarr.storage.LocalStore, method)

        def wrapped(self, *args, _original=original, **kwargs):
            seen[0] += 1
            if stop_at is not None and seen[0] == stop_at:
                raise _Stopped()
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(zarr.storage.LocalStore, method, wrapped)
    return seen


def _equal(read, want):
    assert read is not None and set(read) == set(want)
    for name, value in want.items():
        assert torch.equal(read[name], value), name


def test_a_completed_write_reads_back_every_draw(tmp_path):
    path = _posterior(tmp_path / "store", _values(5))
    constrained.write(_reopen(path), _values(8))
    _equal(constrained.read(_reopen(path), 8, "cpu"), _values(8))


def test_a_write_stopped_at_any_file_operation_leaves_the_earlier_draws(tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        counted = _operations(m, None)
        path = _posterior(tmp_path / "count", _values(5))
        counted[0] = 0
        constrained.write(_reopen(path), _values(8))
        operations = counted[0]
    assert operations >= 4
    for stop in range(1, operations + 1):
        path = _posterior(tmp_path / f"stop{stop}", _values(5))
        with monkeypatch.context() as m:
            _operations(m, stop)
            with pytest.raises(_Stopped):
                constrained.write(_reopen(path), _values(8))
        _equal(constrained.read(_reopen(path), 5, "cpu"), _values(5))


def test_an_array_of_another_shape_is_replaced(tmp_path):
    path = _posterior(tmp_path / "store", _values(5))
    other = {"tau": torch.ones(3, 4, 2, dtype=torch.float64)}
    constrained.write(_reopen(path), other)
    group = _reopen(path)
    _equal(constrained.read(group, 4, "cpu"), other)
    assert "theta" not in group
