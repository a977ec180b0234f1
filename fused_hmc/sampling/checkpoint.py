"""Checkpoints: a Sampler's whole state in one file, written between chunks, from which
``Sampler.from_checkpoint`` continues in any process exactly as the run would have gone on (every
random number is keyed by the global transition index, so nothing else is needed).

The file is a zarr store zipped into one file (storage.py). Group ``sampler`` holds the constructor's
arguments (attribute ``arguments``; tensor arguments as ``argument_*`` arrays, the target in
``sampler/target``), the books (the state ``q``, the Welford sums; the counts in attribute ``integers``) and the
chains' state (``chains_*``: step sizes, inverse masses and, during warm-up, dual averaging and
window moments; with ChEES its state; every chain statistic of the warm-up and of sampling,
:mod:`.chain_statistics`). Group ``posterior`` holds
the draws kept in memory so far; draws streamed to ``out=`` stay in that store (its path kept
relative to the checkpoint's directory), which a resumed run cuts back to the draws the checkpoint
counted before it appends, once the store's run id is the checkpoint's (``integers["run_id"]``).

Each write replaces the file atomically (a temporary file beside it, fsync'd, renamed over it):
a process killed at any moment leaves the previous checkpoint or the next, never a torn one; the
temporaries such a kill leaves are removed by the next write. A zip file cannot be appended to
atomically, so the draws kept in memory are rewritten at every checkpoint (a warning gives their
size once it is large); stream them (``out=``) for long runs.
"""
from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import torch

from . import storage
from .saving import device_to_load, read_target, write_target

# The format: a checkpoint of another one is refused (storage.checked_attributes names both). 7
# adds mass_estimator (with "gradients", window moments [2, B, ...]: the draws', the gradients') to
# 6's mass_matrix (a dense mass: inverse_mass [G, d, d] its Cholesky factors, window_m2
# [B, d, d], the kept estimates) and 5's every chain statistic of the def (chains_warmup_<name>,
# chains_sampling_<name>).
FORMAT = 7
_TENSOR_ARGUMENTS = ("step_size", "inverse_mass")
# Draws kept in memory beyond this many bytes: each checkpoint's rewrite of them is warned of.
WARN_DRAW_BYTES = 256 * 2**20


class Checkpointer:
    """Writes a sampler's checkpoint to `path` when `every` seconds have passed since the last."""

    def __init__(self, path: Path, every: float):
        if path.is_dir():  # refused now, not when the first write renames onto it
            raise ValueError(f"checkpoint: {path} is a directory; give the path of a file")
        self.path, self.every = path, every
        self._last = time.monotonic()
        self._warned = False

    def start(self) -> None:
        """The clock starts with each run (the first checkpoint comes `every` s into it)."""
        self._last = time.monotonic()

    def due(self) -> bool:
        return time.monotonic() - self._last >= self.every

    def write(self, state: dict) -> None:
        self._warn_of_draws(state)
        storage.replace_file(self.path, lambda tmp: _write(tmp, state))
        storage.remove_stale_temporaries(self.path)
        self._last = time.monotonic()

    def _warn_of_draws(self, state: dict) -> None:
        parts = state["draws"] or []
        size = sum(p.numel() * p.element_size() for p in parts)
        if size > WARN_DRAW_BYTES and not self._warned:
            self._warned = True
            kept = sum(p.shape[1] for p in parts)
            warnings.warn(f"checkpoint={self.path}: each checkpoint rewrites the {kept} draws kept "
                          f"in memory ({size:,} bytes), more at each one; pass out= to stream "
                          "them to disk, where a checkpoint writes none of them", stacklevel=2)


def _mass_dims(rank: int, dense: bool) -> tuple[str, ...]:
    """The dims of an inverse_mass argument: [dim] or [chain, dim]; dense [dim, dim2] or
    [chain, dim, dim2]."""
    square = ("dim", "dim2") if dense else ("dim",)
    return square if rank == len(square) else ("chain", *square)


def _write(tmp: Path, state: dict) -> None:
    """state: Sampler._checkpoint_state()."""
    arguments = dict(state["arguments"])
    tensors = dict(state["tensors"])
    for name in _TENSOR_ARGUMENTS:
        value = arguments.pop(name)
        if isinstance(value, torch.Tensor):
            dims = ("chain",) if name == "step_size" else _mass_dims(
                value.dim(), arguments["mass_matrix"] == "dense")
            tensors[f"argument_{name}"] = (value, dims)
        else:
            arguments[name] = value  # a number, or None
    target = arguments.pop("target")
    arguments["seed"] = str(arguments["seed"])
    if arguments["out"] is not None:  # so that a copied directory streams to its own copy
        arguments["out"] = os.path.relpath(arguments["out"], tmp.parent)
    q = state["tensors"]["q"][0]
    directory = tmp.with_name(f"{tmp.name}-dir")  # written as a directory, then zipped
    try:
        root = storage.open_root(storage.directory_store(directory, "w"), "w",
                                 {"fused_hmc_checkpoint": FORMAT})
        group = root.create_group("sampler", attributes={
            "format": FORMAT, "arguments": arguments, "integers": state["integers"],
            "dtype": str(q.dtype), "device": str(q.device)})
        storage.write_tensors(group, tensors)
        write_target(group, target)
        if state["draws"] is not None:
            chains, dim = q.shape
            draws = storage.DrawStore.create(root, chains, dim, q.dtype, arguments["chain_offset"],
                                             {"sampler": "fused_hmc", "seed": arguments["seed"]})
            for part in state["draws"]:
                draws.fill_from(part, part.shape[1])
        storage.zip_directory(directory, tmp)
    finally:
        storage.remove(directory)


def read_checkpoint(path, device=None) -> tuple[dict, dict, dict, torch.Tensor | None]:
    """(constructor arguments, tensors, integers, draws kept in memory or None) of the checkpoint
    at `path`, the tensors on `device` (default: the device it was written from)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    with storage.zip_root(path, "a fused_hmc checkpoint") as root:
        if "sampler" not in root:
            raise ValueError(f"{path} is not a fused_hmc checkpoint")
        group = root["sampler"]
        attrs = storage.checked_attributes(group, path, "a checkpoint", FORMAT)
        where = device_to_load(attrs["device"], device)
        tensors = storage.read_tensors(group, where)
        arguments = dict(attrs["arguments"])
        arguments["seed"] = int(arguments["seed"])
        if arguments["out"] is not None:
            arguments["out"] = str(path.absolute().parent / arguments["out"])
        for name in _TENSOR_ARGUMENTS:
            if f"argument_{name}" in tensors:
                arguments[name] = tensors.pop(f"argument_{name}")
        arguments["target"] = read_target(group)
        arguments["adapt_windows"] = tuple(arguments["adapt_windows"])
        integers = attrs["integers"]
        draws = (storage.DrawStore(root["posterior"]).read(integers["num_kept"], where)
                 if "posterior" in root else None)
    return arguments, tensors, integers, draws
