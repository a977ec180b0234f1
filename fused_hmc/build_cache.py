"""A build directory that several processes share: a finished library loads without any lock; a
build runs under an OS file lock, which a killed process cannot leave held, and a wait for another
process's build ends after a timeout with a message naming the lock file.

``torch.utils.cpp_extension.load`` takes its own ``lock`` file on every call, even when the
library is built, and a process killed while holding it (a test timeout is enough) hangs every
later one forever. Here it is called only to build, with our lock held, so a ``lock`` file it
finds then was left by a killed build and is removed first. A build is complete once its marker
file is written (last, atomically); only then is the library loaded directly.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Callable

import filelock
from torch.utils import cpp_extension

from .build_errors import BuildLockTimeout, ExtensionBuildError

COMPLETE_MARKER = "build-complete"  # written after the library is built and loaded
LOCK_FILE = "fused_hmc-build.lock"  # flock'ed while a process builds here
TORCH_LOCK_FILE = "lock"  # cpp_extension.load's own
LOCK_TIMEOUT_ENV = "FUSED_HMC_BUILD_LOCK_TIMEOUT"
# The longest wait for another process's build: several builds' length (a CUDA build of the main
# extension on 2 busy cores took tens of minutes).
DEFAULT_LOCK_TIMEOUT_S = 3600.0


def library_path(directory: Path, name: str) -> Path:
    return directory / f"{name}{getattr(cpp_extension, 'LIB_EXT', '.so')}"


def is_complete(directory: Path, name: str) -> bool:
    """Whether `name`'s library in `directory` is built and whole (its marker names it)."""
    marker = directory / COMPLETE_MARKER
    try:
        return marker.read_text() == name and library_path(directory, name).is_file()
    except OSError:
        return False


def import_library(directory: Path, name: str):
    """The built pybind11 module `name`, loaded from its library without any lock."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, library_path(directory, name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def lock_timeout() -> float:
    text = os.environ.get(LOCK_TIMEOUT_ENV)
    if text is None:
        return DEFAULT_LOCK_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ExtensionBuildError(f"{LOCK_TIMEOUT_ENV}={text!r} must be a number of seconds >= 0")
    return seconds


def _acquire(lock: filelock.FileLock, what: str) -> None:
    timeout = lock_timeout()
    try:
        lock.acquire(timeout=0)
        return
    except filelock.Timeout:
        pass
    print(f"waiting for another process's build of {what} (lock file {lock.lock_file}; at most "
          f"{timeout:g} s, {LOCK_TIMEOUT_ENV} sets it) ...", file=sys.stderr, flush=True)
    start = time.monotonic()
    try:
        lock.acquire(timeout=timeout)
    except filelock.Timeout:
        raise BuildLockTimeout(
            f"timed out after {time.monotonic() - start:.0f} s waiting for the build lock "
            f"{lock.lock_file}, held by another process building {what} in the same directory. "
            f"If no such process is running any more (a hung one: stop it), delete "
            f"{lock.lock_file} and try again; {LOCK_TIMEOUT_ENV} sets the wait in seconds") \
            from None


def load_or_build(directory: Path, name: str, what: str, build: Callable[[], object]):
    """The module `name` from `directory`: loaded at once when its build is complete, else built
    by `build()` (which calls cpp_extension.load on `directory`) with the directory's lock held,
    then marked complete. `what` names the build in messages."""
    if is_complete(directory, name):
        return import_library(directory, name)
    directory.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(directory / LOCK_FILE)
    _acquire(lock, what)
    try:
        if is_complete(directory, name):  # another process built it while this one waited
            return import_library(directory, name)
        # Every build here holds our lock, so a torch lock file now was left by a killed build.
        (directory / TORCH_LOCK_FILE).unlink(missing_ok=True)
        module = build()
        marker = directory / f".{COMPLETE_MARKER}.tmp"
        marker.write_text(name)
        os.replace(marker, directory / COMPLETE_MARKER)
        return module
    finally:
        lock.release()
