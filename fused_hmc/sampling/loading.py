"""``fused_hmc.load``: the :class:`SampleResult` a store holds (written by saving.py), every field
checked, and a store that a write left incomplete named as such."""
from __future__ import annotations

from pathlib import Path

from . import constrained, rank_stores, saving, storage
from .chain_statistics import RESULT_FIELDS
from .resources import check_memory
from .result import SampleResult


def load(path, *, device=None, samples: bool | None = None) -> SampleResult:
    """The :class:`SampleResult` saved at `path` (by ``SampleResult.save``, or a store that a
    finished ``out=`` run streamed into), bit for bit, with its tensors on `device` (default: the
    device it was saved from).

    samples: True reads the draws into memory (``result.samples``), False leaves them on disk
    (``samples`` None, ``samples_path`` = `path`, read lazily by to_arviz / summary / plot); None
    (the default) does as the saved result did, so that a streamed result stays on disk.
    """
    if samples is not None and not isinstance(samples, bool):
        raise TypeError(f"samples must be True, False or None, got {samples!r}")
    path = Path(path).absolute()
    storage.restore_displaced(path)  # a save over it killed between its renames: the old one
    if not path.is_dir():
        raise FileNotFoundError(f"no saved result at {path}")
    if rank_stores.is_rank_directory(path):
        raise ValueError(f"{path} holds a run over several processes: one store per rank, "
                         f"fused_hmc.load({str(path / 'rank0')!r}) and the others, and its "
                         f"{rank_stores.SUMMARY} (fused_hmc.sampling.rank_stores says how to "
                         "open them as one dataset)")
    name = saving.result_group(path)
    if name is None:
        raise ValueError(f"{path} holds no finished result (a run streaming into it has not "
                         "ended: resume it from its checkpoint)")
    root = storage.open_root(storage.directory_store(path, "r"), "r")
    group = _checked_group(root, name, path)
    attrs = storage.checked_attributes(group, path, "a result", saving.FORMAT)
    missing = [key for key in saving.REQUIRED if key not in attrs]
    if missing:
        _incomplete(path, f"{name} lacks the attributes {missing}")
    where = saving.device_to_load(attrs["device"], device)
    tensors = storage.read_tensors(group, where)
    _check_complete(root, group, tensors, attrs, path)
    fields = {name: tensors.get(name) for name in saving.TENSORS | saving.OPTIONAL_TENSORS}
    fields.update({name: attrs[name] for name in saving.SCALARS})
    fields.update({name: attrs.get(name) for name in saving.NEWER_SCALARS})
    fields.update({name: saving.read_statistics(group, name, where)
                   for name in RESULT_FIELDS})
    chains = fields["final_state"].shape[0]
    for name in RESULT_FIELDS:
        for statistic, t in (fields[name] or {}).items():
            if tuple(t.shape) != (chains,):
                _incomplete(path, f"{name}/{statistic} has shape {tuple(t.shape)}")
    kind = attrs["samples"]
    if samples and kind == "none":
        raise ValueError(f"samples=True, but {path} holds no draws (keep_samples=False)")
    in_memory = kind == "memory" if samples is None else samples
    fields["samples"] = fields["samples_path"] = fields["constrained"] = None
    if kind != "none" and in_memory:
        chains, dim = fields["final_state"].shape
        check_memory(chains * attrs["num_kept"] * dim * fields["final_state"].element_size(),
                     where, f"loading {attrs['num_kept']} draws of {chains} chains x {dim} dims",
                     "pass samples=False to leave them on disk")
        draws = storage.DrawStore(root["posterior"])
        fields["samples"] = draws.read(attrs["num_kept"], where)
        fields["constrained"] = constrained.read(root["posterior"], attrs["num_kept"], where)
    elif kind != "none":
        fields["samples_path"] = str(path)
    return SampleResult(seed=int(attrs["seed"]), warmup=saving.read_warmup(attrs["warmup"]),
                        # (absent from files saved before superchains existed)
                        target=saving.read_target(group), superchains=attrs.get("superchains"),
                        **fields)


def _incomplete(path, what: str):
    raise ValueError(f"{path} is incomplete ({what}): a write of it was stopped; a run streaming "
                     "into it continues from its checkpoint")


def _checked_group(root, name: str, path):
    try:
        return root[name]
    except KeyError:
        _incomplete(path, f"no group {name}")


def _check_complete(root, group, tensors: dict, attrs: dict, path) -> None:
    """Every field of a result group and the draws it counts are there, of consistent shapes."""
    missing = [name for name in saving.TENSORS if name not in tensors]
    if "target" not in group:
        missing.append("target")
    if missing:
        _incomplete(path, f"{group.basename} lacks {missing}")
    chains, dim = tensors["final_state"].shape
    for name, dims in (saving.TENSORS | saving.OPTIONAL_TENSORS).items():
        shapes = [(chains,) if dims == saving.CHAIN else (chains, dim)]
        if name == "inverse_mass":
            shapes.append((chains, dim, dim))  # dense
        if name in tensors and tuple(tensors[name].shape) not in shapes:
            _incomplete(path, f"{name} has shape {tuple(tensors[name].shape)}")
    if attrs["samples"] == "none":
        return
    if "posterior" not in root or "q" not in root["posterior"]:
        _incomplete(path, "no draws: group posterior or its q is missing")
    shape = root["posterior"]["q"].shape
    if shape[0] != chains or shape[2] != dim or shape[1] < attrs["num_kept"]:
        _incomplete(path, f"posterior/q has shape {shape}, not ({chains}, >= "
                          f"{attrs['num_kept']}, {dim})")
