"""A result's draws as the target's constrained parameters, by name.

A target with ``constrain`` (a CppTarget made with ``constrain=``, a TorchModel, a library
model's target) maps the unconstrained draws q [chains, draws, dim] to {name: [chains, draws,
*shape]}. Saved results keep these as data: arrays beside ``q`` in the ``posterior`` group, listed
in its attribute ``constrained_variables``, so that loading one needs none of the target's code
and xarray / ArviZ see one variable per parameter with dims (chain, draw, <name>_dim_0, ...).
"""
from __future__ import annotations

import numpy as np
import torch

from ..torch_model.parameters import flat_names

# Names the posterior group already uses.
RESERVED = ("q", "chain", "draw", "dim")
ATTRIBUTE = "constrained_variables"
# Draws are constrained a block of chains at a time, of about this many unconstrained values.
_BLOCK_VALUES = 2**22


def checked_values(values, batch: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """A constrain callable's output, checked: a dict of floating tensors shaped [*batch, ...]
    whose names can name stored arrays."""
    if not isinstance(values, dict) or not values:
        raise TypeError(f"constrain must return a non-empty dict name -> tensor, got "
                        f"{type(values).__name__}")
    for name, value in values.items():
        if (not isinstance(name, str) or not name or "/" in name or name.startswith("__")
                or name in RESERVED or name.endswith(tuple(f"_dim_{k}" for k in range(8)))):
            raise ValueError(f"constrain returned the name {name!r}: names are non-empty str, "
                             f"without '/', not starting with '__', not one of {RESERVED}")
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            kind = str(value.dtype) if isinstance(value, torch.Tensor) else type(value).__name__
            raise TypeError(f"constrain returned {name!r} as {kind}; values are floating "
                            "tensors")
        if tuple(value.shape[:len(batch)]) != batch:
            raise ValueError(f"constrain returned {name!r} shaped {tuple(value.shape)}; for x "
                             f"[..., dim] with ... = {batch} it must start with {batch}")
    return values


def names(shapes: dict[str, tuple[int, ...]]) -> list[str]:
    """The flat names of every constrained value: ``tau``, ``theta[0]``, .., ``L[0,1]``."""
    return [n for name, shape in shapes.items() for n in flat_names(name, shape)]


def flatten(values: dict[str, torch.Tensor], lead: int = 2) -> torch.Tensor:
    """{name: [*lead dims, *shape]} -> [*lead dims, number of values], columns as :func:`names`."""
    pieces = [v.reshape(tuple(v.shape[:lead]) + (-1,)) for v in values.values()]
    return torch.cat(pieces, dim=-1)


def names_and_flat(values: dict[str, torch.Tensor]) -> tuple[list[str], torch.Tensor]:
    """Constrained draws {name: [chains, draws, *shape]} as (:func:`names`, [chains, draws,
    number of values])."""
    return names({n: tuple(v.shape[2:]) for n, v in values.items()}), flatten(values)


def pooled_moments(flat: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd (n - 1) of each column of flat [chains, draws, values] over every chain and
    draw, in float64."""
    pooled = flat.detach().reshape(-1, flat.shape[-1]).to(torch.float64)
    sd = pooled.std(0) if pooled.shape[0] > 1 else torch.full_like(pooled[0], float("nan"))
    return pooled.mean(0).cpu().numpy(), sd.cpu().numpy()


def draws(constrain, source, count: int) -> dict[str, torch.Tensor]:
    """constrain applied to the first `count` draws of `source` ([chains, >= count, dim]: a
    tensor, or a store's DrawsOnDisk), a block of chains at a time: {name: [chains, count,
    *shape]} in the draws' dtype, on their device (the CPU for a store)."""
    chains, _, dim = source.shape
    block = max(1, _BLOCK_VALUES // max(1, count * dim))
    parts: dict[str, list[torch.Tensor]] = {}
    for a in range(0, chains, block):
        part = source[a:a + block, slice(0, count), slice(None)]
        if not isinstance(part, torch.Tensor):
            part = torch.from_numpy(np.ascontiguousarray(part))
        with torch.no_grad():
            for name, value in constrain(part).items():
                parts.setdefault(name, []).append(value)
    return {name: torch.cat(values, dim=0) for name, values in parts.items()}


def write(group, values: dict[str, torch.Tensor]) -> None:
    """The constrained draws as arrays of the posterior `group`, replacing earlier ones so that a
    kill at any point leaves the earlier draws readable (:func:`read` of the count the store's
    result group records).

    A store's later runs only append draws, so an array already there (same chains, shape and
    dtype) is grown and rewritten in place: its earlier draws are rewritten with their own values,
    and zarr replaces each file (metadata, chunk) atomically. An array of another shape is
    replaced. The list of variables changes last, and arrays it no longer names go after it."""
    earlier = list(group.attrs.get(ATTRIBUTE, []))
    for name, value in values.items():
        data = value.detach().cpu().contiguous().numpy()
        if name in group and _extends(group[name], data):
            group[name].resize(data.shape)
            group[name][...] = data
            continue
        if name in group:
            del group[name]
        dims = ["chain", "draw"] + [f"{name}_dim_{k}" for k in range(value.ndim - 2)]
        group.create_array(name, data=data, compressors=None, dimension_names=dims)
    group.attrs[ATTRIBUTE] = list(values)
    for name in earlier:
        if name not in values and name in group:
            del group[name]


def _extends(array, data: np.ndarray) -> bool:
    """Whether `data` [chains, draws, *shape] can replace `array` grown along the draws."""
    return (array.dtype == data.dtype and array.shape[0] == data.shape[0]
            and tuple(array.shape[2:]) == data.shape[2:] and array.shape[1] <= data.shape[1])


def read(group, count: int, device) -> dict[str, torch.Tensor] | None:
    """The constrained draws a posterior `group` holds (the first `count`), or None."""
    stored = group.attrs.get(ATTRIBUTE)
    if not stored:
        return None
    return {name: torch.from_numpy(np.ascontiguousarray(group[name][:, :count])).to(device)
            for name in stored}


def of_result(res) -> dict[str, torch.Tensor] | None:
    """A result's constrained draws: those loaded with it, those its store holds, or its
    target's ``constrain`` of its draws; None when it has neither draws nor constrain."""
    if res.constrained is not None:
        return res.constrained
    if res.samples_path is not None:
        from . import storage

        root = storage.open_root(storage.directory_store(res.samples_path, "r"), "r")
        if "posterior" in root:
            stored = read(root["posterior"], res.num_kept, torch.device("cpu"))
            if stored is not None:
                return stored
    if not getattr(res.target, "has_constrain", False):
        return None
    if res.samples is not None:
        return draws(res.target.constrain, res.samples, res.num_kept)
    if res.samples_path is not None:
        from .storage import posterior_draws

        return draws(res.target.constrain, posterior_draws(res.samples_path, res.num_kept),
                     res.num_kept)
    return None
