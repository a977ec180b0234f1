"""``SampleResult.save``: a result as a zarr store (layout in storage.py; loading.py reads it).

A store is complete when group ``fused_hmc`` is. It never changes in place: a new version (at the
end of each later run of a streaming sampler) is written whole as ``fused_hmc_next``, then takes
the place of the old one by two renames; a kill between them leaves the old one as
``fused_hmc_previous`` beside the complete new one, which ``load`` then reads (and the next write
puts in place). ``load`` checks every field and names a store that is incomplete.

Group ``fused_hmc`` holds every tensor field of the result (in its own dtype), the scalars as
attributes (the seed as a decimal string: it may not fit a signed 64-bit integer), the warm-up
settings, the dtype and device, the chain statistics (one array per statistic) in
``fused_hmc/chain_statistics`` and ``fused_hmc/warmup_chain_statistics``, and the target in
``fused_hmc/target``; group ``posterior`` the
draws, when there are any, and beside ``q`` the constrained draws of a target with ``constrain``
(as data, :mod:`fused_hmc.sampling.constrained`: loading them runs none of the target's code).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch

from .. import targets
from . import constrained, storage
from .chain_statistics import NAMES, RESULT_FIELDS
from .stored_target import StoredCppTarget
from .warmup import WarmupSettings

FORMAT = 1
CHAIN, CHAIN_DIM = ("chain",), ("chain", "dim")
TENSORS = {"mean": CHAIN_DIM, "var": CHAIN_DIM, "accept_count": CHAIN,
            "accept_rate": CHAIN, "mean_accept_prob": CHAIN, "final_state": CHAIN_DIM,
            "step_size": CHAIN, "inverse_mass": CHAIN_DIM}
# Tensors a result may lack (None): the restarts of a pooled warm-up (far_starts.py), a dense
# mass's kept estimates; files saved before them lack them too.
OPTIONAL_TENSORS = {"warmup_reseeded": CHAIN, "mass_factorization_failures": CHAIN}
# A dense mass's inverse_mass is [chain, dim, dim2] (its dims as the file names them).
DENSE_MASS = ("chain", "dim", "dim2")
SCALARS = ("num_transitions", "num_kept", "next_transition", "interrupted", "thin",
            "chain_offset", "num_warmup", "num_leapfrog_steps", "jitter")
# Scalars files saved before the trajectory length, gradient counts and lanes existed lack (None
# then).
NEWER_SCALARS = ("trajectory_length", "max_leapfrog_steps", "warmup_gradient_evaluations",
                  "sampling_gradient_evaluations", "lanes")
# The result group, its next version while that is written, and the old one while it is replaced.
RESULT, NEXT, PREVIOUS = "fused_hmc", "fused_hmc_next", "fused_hmc_previous"
# Attributes every result group has (NEWER_SCALARS and superchains may be absent: older files).
REQUIRED = SCALARS + ("format", "seed", "samples", "warmup", "dtype", "device")


# ---- pieces shared with checkpoints -------------------------------------------------------------

def write_target(parent, target) -> None:
    """The target as group ``target`` of `parent`: its kind and parameters (float64), or for a
    CppTarget its source, dim, names, gradient flag and data (tensors as arrays, scalars as an
    attribute; its lanes; its torch log_prob, a Python function, is not saved)."""
    if target is None:
        return
    if not targets.is_built_in(target):  # a CppTarget (a TorchModel) or a StoredCppTarget
        tensors = {k: v for k, v in target.data.items() if isinstance(v, torch.Tensor)}
        scalars = {k: v for k, v in target.data.items() if not isinstance(v, torch.Tensor)}
        group = parent.create_group("target", attributes={
            "kind": "CppTarget", "source": target.source, "dim": target.dim,
            "names": target.names, "gradient": target.has_gradient, "lanes": target.lanes,
            "scalars": scalars, "tensor_order": list(tensors)})
        storage.write_tensors(group, {name: (t, tuple(f"{name}_{k}" for k in range(t.dim())))
                                      for name, t in tensors.items()})
        return
    group = parent.create_group("target", attributes={"kind": type(target).__name__})
    params = target.parameters()
    storage.write_tensors(group, {name: (t, ("dim",) if t.dim() == 1 else ("dim", "dim2"))
                                  for name, t in params.items()})


def read_target(parent):
    """The target of group ``target`` of `parent` (None without one); a CppTarget as inert data
    (stored_target.py: a file's source is never compiled unasked)."""
    if "target" not in parent:
        return None
    group = parent["target"]
    kind = group.attrs["kind"]
    if kind == "CppTarget":
        tensors = storage.read_tensors(group, torch.device("cpu"))
        data = {name: tensors[name] for name in group.attrs["tensor_order"]}
        data.update(group.attrs["scalars"])
        lanes = group.attrs.get("lanes", 1)  # files before lanes: 1
        return StoredCppTarget(str(group.attrs["source"]), int(group.attrs["dim"]), data,
                               group.attrs["names"], bool(group.attrs["gradient"]),
                               lanes if lanes == "auto" else int(lanes))
    built_in = targets.by_class_name(kind)
    if built_in is None:
        raise ValueError(f"unknown target kind {kind!r} in the file")
    return built_in(**storage.read_tensors(group, torch.device("cpu")))


def warmup_attribute(settings: WarmupSettings | None) -> dict | None:
    return None if settings is None else dataclasses.asdict(settings)


def read_warmup(value: dict | None) -> WarmupSettings | None:
    return None if value is None else WarmupSettings(**value)


def device_to_load(saved: str, device) -> torch.device:
    """`device` (when given) or the saved one, which must exist here."""
    chosen = torch.device(device if device is not None else saved)
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: the file was written from {saved}, but torch sees no CUDA "
                         "device here; pass device='cpu'")
    return chosen


# ---- save ---------------------------------------------------------------------------------------

def _samples_kind(res) -> str:
    if res.samples is not None:
        return "memory"
    return "disk" if res.samples_path is not None else "none"


def write_result_group(root, res, name: str = RESULT) -> None:
    """Group `name` of `root` (a new one): every field but the draws."""
    attrs = {name: getattr(res, name) for name in SCALARS + NEWER_SCALARS}
    attrs.update(format=FORMAT, seed=str(res.seed), superchains=res.superchains,
                 samples=_samples_kind(res),
                 warmup=warmup_attribute(res.warmup), dtype=str(res.final_state.dtype),
                 device=str(res.final_state.device))
    group = root.create_group(name, attributes=attrs)
    storage.write_tensors(group, {name: (getattr(res, name), tensor_dims(res, name, dims))
                                  for name, dims in (TENSORS | OPTIONAL_TENSORS).items()
                                  if getattr(res, name) is not None})
    for field in RESULT_FIELDS:
        write_statistics(group, field, getattr(res, field))
    write_target(group, res.target)


def write_statistics(parent, name: str, statistics: dict | None) -> None:
    """Chain statistics ({name: [chains]}, as the result holds them) as group `name` of `parent`,
    one array each (none: no group)."""
    if statistics is not None:
        storage.write_tensors(parent.create_group(name),
                              {k: (t, CHAIN) for k, t in statistics.items()})


def read_statistics(parent, name: str, device) -> dict | None:
    """What write_statistics wrote (None without the group: a file saved before it), in the
    order of chain_statistics.NAMES, then any other statistic the file holds."""
    if name not in parent:
        return None
    found = storage.read_tensors(parent[name], device)
    order = [k for k in NAMES if k in found] + sorted(k for k in found if k not in NAMES)
    return {k: found[k] for k in order}


def tensor_dims(res, name: str, dims: tuple) -> tuple:
    """The dims field `name` is written with: `dims`, or DENSE_MASS for a dense inverse_mass."""
    return DENSE_MASS if name == "inverse_mass" and res.mass_matrix == "dense" else dims


def complete_stream_store(path, res) -> None:
    """Completes a store the draws were streamed into: the result's other fields (replacing an
    earlier version whole, see the module's docstring), the posterior's attributes, and metadata
    that xarray reads."""
    path = Path(path)
    _settle(path)
    root = storage.open_root(storage.directory_store(path, "a"), "r+")
    write_constrained(root, res)
    write_result_group(root, res, NEXT)
    if (path / RESULT).exists():
        os.rename(path / RESULT, path / PREVIOUS)
    os.rename(path / NEXT, path / RESULT)
    storage.remove(path / PREVIOUS)
    root["posterior"].attrs.update(res.posterior_attrs())
    storage.consolidate(path)


def _settle(path: Path) -> None:
    """Finishes the swap of result groups that a kill interrupted (the new one in place), or
    removes what an earlier kill left of a version not yet complete."""
    if result_group(path) == NEXT:
        os.rename(path / NEXT, path / RESULT)
    storage.remove(path / NEXT)
    storage.remove(path / PREVIOUS)


def result_group(path: Path) -> str | None:
    """The complete result group of the store at `path`: ``fused_hmc``, or ``fused_hmc_next`` when
    a kill came between the renames that put it in place (the old one moved aside); else None."""
    if (path / RESULT).is_dir():
        return RESULT
    return NEXT if (path / PREVIOUS).is_dir() and (path / NEXT).is_dir() else None


def write_constrained(root, res) -> None:
    """The result's constrained draws (when it has them: see constrained.of_result) into
    ``posterior``."""
    values = res.constrained_draws()
    if values is not None:
        constrained.write(root["posterior"], values)


def save_result(res, path, overwrite: bool = False) -> None:
    if not isinstance(overwrite, bool):
        raise TypeError(f"overwrite must be True or False, got {overwrite!r}")
    path = Path(path).absolute()
    if res.samples_path is not None and Path(res.samples_path) == path:
        complete_stream_store(path, res)  # the streamed store itself: completed in place
        return
    storage.restore_displaced(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
    tmp = storage.temporary_sibling(path)
    try:
        root = storage.open_root(storage.directory_store(tmp, "w"), "w",
                                 {"fused_hmc_format": FORMAT})
        source = res.samples
        if source is None and res.samples_path is not None:
            source = storage.posterior_draws(res.samples_path, res.num_kept)
        if source is not None:
            chains, dim = res.final_state.shape
            draws = storage.DrawStore.create(root, chains, dim, res.final_state.dtype,
                                             res.chain_offset, res.posterior_attrs())
            draws.fill_from(source, res.num_kept)
            write_constrained(root, res)
        write_result_group(root, res)
        storage.consolidate(tmp)
        storage.publish_directory(tmp, path, overwrite)
    except BaseException:
        storage.remove(tmp)
        raise
