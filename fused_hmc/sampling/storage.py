"""fused_hmc's files: zarr (v3) stores that xarray and ArviZ open.

A store is a directory (saved results, streamed draws) or one zip file of such a directory
(checkpoints, which are replaced whole). Every array names its dimensions (zarr's ``dimension_names``, which xarray reads)
and is stored raw (no compression: random floats do not compress; no fill-value masking), so
tensors come back bit for bit in their own dtype; scalars are JSON attributes of their group.

Group ``posterior`` holds the kept draws ``q`` (chain, draw, dim) in the chains' dtype with the
coordinates chain (global chain ids), draw (0, 1, ...) and dim (0, 1, ...), as
``SampleResult.to_arviz`` gives them; streamed draws are appended along ``draw`` as they come.
Importing this module does not import zarr (it is imported on first use).
"""
from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import warnings
import zipfile
from pathlib import Path

import numpy as np
import torch

# Draws per zarr chunk: about this many bytes. An append rewrites the partial chunks at its ends,
# so chunks are small next to the stream's appends (its buffers, up to 32 MiB).
_CHUNK_BYTES = 2**20
# Draws copied per block when a store is filled from a tensor or another store.
_COPY_BYTES = 64 * 2**20


def zarr():
    try:
        import zarr as module
    except ImportError as exc:
        raise ImportError("saving, checkpoints and streamed draws need zarr, a dependency of "
                          "fused_hmc: pip install zarr") from exc
    return module


def directory_store(path, mode: str):
    """A directory store at `path` ("r": read, "a": read and write, "w": new)."""
    return zarr().storage.LocalStore(str(path), read_only=mode == "r")


def zip_store(path, mode: str):
    """A store in one zip file at `path` ("r" or "w")."""
    return zarr().storage.ZipStore(str(path), mode=mode)


@contextlib.contextmanager
def zip_root(path: Path, what: str):
    """The root group of the zip file at `path` (which should hold `what`), closed on leaving; a
    file that is not a complete zip (truncated, or some other file) raises ValueError naming it."""
    store = zip_store(path, "r")
    try:
        root = open_root(store, "r")
    except zipfile.BadZipFile as exc:  # (store.close() would fail: nothing was opened)
        raise ValueError(f"{path} is not {what}: not a complete zip file ({exc})") from None
    try:
        yield root
    except zipfile.BadZipFile as exc:  # a damaged member
        raise ValueError(f"{path} is not {what}: a damaged zip file ({exc})") from None
    finally:
        store.close()


def open_root(store, mode: str, attributes: dict | None = None):
    """The root group ("w": a new store; "w-": a new one in an empty directory, which it does not
    clear first). Reads ignore consolidated metadata (written for xarray), which is stale while
    draws are appended."""
    if mode in ("w", "w-"):
        return zarr().open_group(store, mode=mode, attributes=attributes)
    return zarr().open_group(store, mode=mode, use_consolidated=False)


def checked_attributes(group, path, what: str, expected: int) -> dict:
    """The attributes of `group` (read from `path`, `what` it holds), after checking that they
    were written in format `expected`: one check for results and checkpoints alike."""
    attrs = dict(group.attrs)
    if attrs.get("format") != expected:
        raise ValueError(f"{path} holds {what} of format {attrs.get('format')!r}; this fused_hmc "
                         f"reads format {expected}")
    return attrs


def consolidate(path) -> None:
    """Records the hierarchy's metadata in its root, as xarray reads it (shapes included: call
    again after appending)."""
    module = zarr()
    with warnings.catch_warnings():  # that zarr v3's spec lacks it; xarray and zarr read it
        warnings.filterwarnings("ignore", message="Consolidated metadata")
        module.consolidate_metadata(directory_store(path, "a"))


def zip_directory(directory: Path, path: Path) -> None:
    """Packs a directory store into the zip file `path` (uncompressed, as zarr's ZipStore reads)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for file in sorted(directory.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(directory).as_posix())


# ---- tensors as arrays --------------------------------------------------------------------------

def write_tensors(group, tensors: dict[str, tuple[torch.Tensor, tuple[str, ...]]]) -> None:
    """Writes each tensor (on any device) as an array of its dtype with the named dimensions."""
    for name, (tensor, dims) in tensors.items():
        if tensor.dim() != len(dims):
            raise AssertionError(f"{name}: {tensor.dim()} dims, named {dims}")
        data = tensor.detach().cpu().contiguous().numpy()
        group.create_array(name, data=data, compressors=None, dimension_names=list(dims))


def read_tensors(group, device: torch.device) -> dict[str, torch.Tensor]:
    """Every array of `group` as a tensor on `device`, in its stored dtype."""
    return {name: torch.from_numpy(np.ascontiguousarray(array[...])).to(device)
            for name, array in group.arrays()}


# ---- the draws ----------------------------------------------------------------------------------

class DrawStore:
    """The ``posterior`` group of a store: draws appended along ``draw``, in order."""

    def __init__(self, group):
        self.group = group
        self.q = group["q"]
        self.draw = group["draw"]

    @classmethod
    def create(cls, root, chains: int, dim: int, dtype: torch.dtype, chain_offset: int,
               attributes: dict) -> DrawStore:
        group = root.create_group("posterior", attributes=attributes)
        itemsize = torch.empty((), dtype=dtype).element_size()
        chain_chunk = max(1, min(chains, _CHUNK_BYTES // (dim * itemsize)))
        draw_chunk = max(1, _CHUNK_BYTES // (chain_chunk * dim * itemsize))
        numpy_dtype = torch.empty((), dtype=dtype).numpy().dtype
        group.create_array("q", shape=(chains, 0, dim), chunks=(chain_chunk, draw_chunk, dim),
                           dtype=numpy_dtype, compressors=None, fill_value=0,
                           dimension_names=["chain", "draw", "dim"])
        group.create_array("chain", data=np.arange(chain_offset, chain_offset + chains,
                                                   dtype=np.int64),
                           compressors=None, dimension_names=["chain"])
        group.create_array("dim", data=np.arange(dim, dtype=np.int64), compressors=None,
                           dimension_names=["dim"])
        group.create_array("draw", shape=(0,), chunks=(4096,), dtype=np.int64, compressors=None,
                           fill_value=0, dimension_names=["draw"])
        return cls(group)

    @classmethod
    def open(cls, path) -> DrawStore:
        return cls(open_root(directory_store(path, "a"), "r+")["posterior"])

    @property
    def count(self) -> int:
        return self.q.shape[1]

    def append(self, start: int, draws: np.ndarray) -> None:
        """Writes draws [chains, k, dim] as draws start .. start + k - 1 (start = count: the
        draws before are all there)."""
        if start != self.count:
            raise RuntimeError(f"the store holds {self.count} draws, not the {start} this run "
                               "expects before its next (a write failed?); continue from the "
                               "checkpoint")
        chains, k, dim = draws.shape
        end = start + k
        if end > self.count:
            self.q.resize((chains, end, dim))
            self.draw.resize((end,))
        self.q[:, start:end] = draws
        self.draw[start:end] = np.arange(start, end, dtype=np.int64)

    def truncate(self, count: int) -> None:
        """Keeps the first `count` draws (those a checkpoint knows of)."""
        if count > self.count:
            raise ValueError(f"the store holds {self.count} draws, fewer than the {count} the "
                             "checkpoint recorded: it is not the store this run wrote")
        self.q.resize((self.q.shape[0], count, self.q.shape[2]))
        self.draw.resize((count,))

    def set_attributes(self, attributes: dict) -> None:
        self.group.attrs.update(attributes)

    def fill_from(self, draws, count: int) -> None:
        """Appends the first `count` draws of `draws` (a tensor or an array [chains, >= count,
        dim]), a block at a time, so that a copy of device draws never doubles host memory."""
        chains, _, dim = draws.shape
        block = max(1, _COPY_BYTES // max(1, chains * dim * self.q.dtype.itemsize))
        for start in range(0, count, block):
            part = draws[:, start:min(start + block, count)]
            if isinstance(part, torch.Tensor):
                part = part.detach().cpu().numpy()
            self.append(self.count, np.asarray(part))

    def read(self, count: int, device: torch.device) -> torch.Tensor:
        """The first `count` draws as one tensor [chains, count, dim] on `device`."""
        chains, _, dim = self.q.shape
        dtype = torch.from_numpy(np.empty(0, dtype=self.q.dtype)).dtype
        out = torch.empty(chains, count, dim, dtype=dtype, device=device)
        block = max(1, _COPY_BYTES // max(1, chains * dim * self.q.dtype.itemsize))
        for start in range(0, count, block):
            stop = min(start + block, count)
            out[:, start:stop] = torch.from_numpy(np.ascontiguousarray(self.q[:, start:stop]))
        return out


class DrawsOnDisk:
    """The first `count` draws of a store's ``posterior/q``, read only where sliced (what
    diagnostics.diagnose needs: it slices chains and dims before reading)."""

    def __init__(self, path, count: int):
        self.q = open_root(directory_store(path, "r"), "r")["posterior"]["q"]
        self.count = count
        self.shape = (self.q.shape[0], count, self.q.shape[2])

    def __getitem__(self, key):
        chains, draws, dims = key
        return self.q[chains, slice(*draws.indices(self.count)), dims]


def posterior_draws(path, count: int) -> DrawsOnDisk:
    return DrawsOnDisk(path, count)


def open_posterior(path, count: int):
    """The store's first `count` draws as ArviZ data (a DataTree with group ``posterior``), read
    lazily by xarray."""
    import xarray as xr

    tree = xr.open_datatree(str(path), engine="zarr")
    posterior = tree["posterior"].to_dataset().isel(draw=slice(0, count))
    return xr.DataTree.from_dict({"posterior": posterior})


# ---- writing in one go --------------------------------------------------------------------------

def temporary_sibling(path: Path) -> Path:
    """A fresh name beside `path` (same file system, so a rename publishes it atomically)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def publish_directory(tmp: Path, path: Path, overwrite: bool) -> None:
    """Moves the finished store `tmp` to `path`. An existing `path` (overwrite=True) is moved
    aside first (to displaced(path)) and removed once the new one is in place: a kill between
    the two renames leaves the old one aside, whole, and restore_displaced puts it back."""
    restore_displaced(path)
    if path.exists():
        if not overwrite:
            raise FileExistsError(f"{path} exists; pass overwrite=True to replace it")
        os.rename(path, displaced(path))
    os.rename(tmp, path)
    remove(displaced(path))
    remove_stale_temporaries(path)


def displaced(path: Path) -> Path:
    """Where publish_directory keeps the store it replaces until the new one is in place."""
    return path.with_name(f".{path.name}.displaced")


def restore_displaced(path: Path) -> None:
    """After a save killed between its renames (`path` missing): the old store back at `path`;
    after one killed later (`path` there): the old store removed."""
    old = displaced(path)
    if old.is_dir():
        if path.exists():
            remove(old)
        else:
            os.rename(old, path)


def replace_file(path: Path, write) -> None:
    """Calls write(tmp) for a temporary file beside `path`, makes it durable (fsync) and renames it
    over `path` (atomic): a reader, or a process killed meanwhile, sees the old or the new file."""
    tmp = temporary_sibling(path)
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        remove(tmp)
        raise


def remove_stale_temporaries(path: Path) -> None:
    """Removes the temporaries beside `path` (temporary_sibling's, and names made from them) that
    killed writers left: those of this process and of processes that no longer run."""
    for leftover in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):
        pid = leftover.name[len(path.name) + 6:].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and _is_running(int(pid)):
            continue
        remove(leftover)


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()
