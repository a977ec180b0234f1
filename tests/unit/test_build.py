"""The lazy build: importing never compiles, failures are cached and explained, loading is idempotent.

These are about the host process, so they are CPU-only by nature.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest
import torch

import fused_hmc
from fused_hmc import _build, build_cache

_PROBE = textwrap.dedent("""
    import os, sys, time
    import torch
    t0 = time.perf_counter()
    import fused_hmc
    import_s = time.perf_counter() - t0
    from fused_hmc import _build
    assert _build._state["loaded"] is False, _build._state
    assert not [p for p in torch.ops.loaded_libraries if "fused_hmc" in os.path.basename(p)]
    assert not [n for n in torch._C._dispatch_get_all_op_names() if n.startswith("fused_hmc::")]
    assert not [m for m in sys.modules if m.startswith(("fused_hmc_cpu", "fused_hmc_cuda"))]
    assert os.listdir(os.environ["TORCH_EXTENSIONS_DIR"]) == [], "import started a build"
    print(f"IMPORT_OK {import_s:.3f}")
    if sys.argv[1] == "build":
        t0 = time.perf_counter()
        for attempt in range(2):
            try:
                fused_hmc.hmc_step(torch.zeros(2, 3))
            except fused_hmc.ExtensionBuildError as exc:
                print(f"FAILED{attempt} {time.perf_counter() - t0:.3f} {exc}")
            t0 = time.perf_counter()
""")


def _probe(tmp_path, mode, **env):
    ext_dir = tmp_path / "torch_extensions"
    ext_dir.mkdir()
    full_env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(ext_dir), **env)
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], env=full_env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_import_does_not_build_or_load(tmp_path):
    out = _probe(tmp_path, "import")
    assert "IMPORT_OK" in out


def test_import_works_without_a_compiler_and_the_failure_is_explained_and_cached(tmp_path):
    """With no usable compiler, import still works; the first op call raises ExtensionBuildError
    saying what to install, and the second raises the same error without trying again."""
    out = _probe(tmp_path, "build", CXX=str(tmp_path / "no-such-compiler"))
    assert "IMPORT_OK" in out
    lines = {line.split(" ", 1)[0]: line for line in out.splitlines()}
    assert "FAILED0" in lines and "FAILED1" in lines, out
    first, second = lines["FAILED0"].split(" ", 2), lines["FAILED1"].split(" ", 2)
    assert first[2] == second[2], "the cached failure must repeat the same message"
    assert "building the fused_hmc extension failed" in first[2]
    assert "no C++ compiler found" in first[2] and "set CXX" in first[2]
    assert float(second[1]) < 0.05, "the second failure must come from the cache"


@pytest.fixture
def fresh_state(monkeypatch):
    """A not-yet-loaded _state for this test only (the real extension stays loaded)."""
    fused_hmc.load_extension()
    for key, value in {"loaded": False, "failure": None, "bindings": None}.items():
        if key in _build._state:  # every key that says "already loaded"
            monkeypatch.setitem(_build._state, key, value)
    return _build._state


def test_failed_build_is_cached_and_fails_fast(monkeypatch, fresh_state):
    calls = []

    def broken_compile():
        calls.append(1)
        time.sleep(0.2)
        raise RuntimeError("g++: internal compiler error (simulated)")

    monkeypatch.setattr(_build, "_compile_and_load", broken_compile)
    with pytest.raises(fused_hmc.ExtensionBuildError) as first:
        fused_hmc.load_extension()
    assert "building the fused_hmc extension failed" in str(first.value)
    assert "internal compiler error (simulated)" in str(first.value)
    assert isinstance(first.value.__cause__, RuntimeError)
    start = time.perf_counter()
    with pytest.raises(fused_hmc.ExtensionBuildError) as again:
        fused_hmc.hmc_step(torch.zeros(2, 3), rng="philox", seed=0)
    assert time.perf_counter() - start < 0.1
    assert str(again.value) == str(first.value)
    assert len(calls) == 1, "a failed build must not be retried"
    assert fresh_state["loaded"] is False


def test_failure_message_says_what_to_install(monkeypatch, fresh_state):
    monkeypatch.setattr(_build, "_compile_and_load", lambda: (_ for _ in ()).throw(OSError("boom")))
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(fused_hmc.ExtensionBuildError, match="pip install ninja") as info:
        fused_hmc.load_extension()
    assert "install g++" in str(info.value) and "boom" in str(info.value)


def test_load_extension_is_idempotent(monkeypatch):
    fused_hmc.load_extension()
    assert _build._state["loaded"] and _build._state["failure"] is None

    def must_not_run():
        raise AssertionError("an already loaded extension was compiled again")

    monkeypatch.setattr(_build, "_compile_and_load", must_not_run)
    assert fused_hmc.load_extension() is None
    assert fused_hmc.load_extension() is None
    names = torch._C._dispatch_get_all_op_names()
    assert {"fused_hmc::transition", "fused_hmc::sample", "fused_hmc::warmup",
            "fused_hmc_testing::philox4x32"} <= set(names)


def test_concurrent_first_loads_compile_once(monkeypatch, fresh_state):
    calls = []

    def slow_compile():
        calls.append(threading.get_ident())
        time.sleep(0.2)

    monkeypatch.setattr(_build, "_compile_and_load", slow_compile)
    errors = []

    def load():
        try:
            fused_hmc.load_extension()
        except Exception as exc:  # noqa: BLE001 - collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(calls) == 1 and fresh_state["loaded"] is True


# ---- the build's name and its announcement ---------------------------------------------------

FLAGS = ["-O3", "-ffp-contract=off"]


def test_build_name_hashes_the_sources_and_flags_not_their_location(tmp_path):
    """A copy of csrc elsewhere (an installed package beside a checkout) gets the same name, so
    switching between them loads one build; any changed source or header, flag or the choice of
    CUDA gives another."""
    copy = tmp_path / "csrc"
    shutil.copytree(_build.csrc_dir(), copy)
    name = _build.build_name(copy, False, FLAGS)
    assert re.fullmatch(r"fused_hmc_cpu_[0-9a-f]{16}", name), name
    assert _build.build_name(copy, False, FLAGS) == name == _build.build_name(
        _build.csrc_dir(), False, FLAGS)
    for changed in (copy / "ops" / "schema.cpp", copy / "math" / "rng" / "philox.h"):
        original = changed.read_bytes()
        changed.write_bytes(original + b"\n// edited\n")
        assert _build.build_name(copy, False, FLAGS) != name, changed
        changed.write_bytes(original)
        assert _build.build_name(copy, False, FLAGS) == name
    assert _build.build_name(copy, False, FLAGS + ["-g"]) != name
    assert _build.build_name(copy, True, FLAGS).startswith("fused_hmc_cuda_")


def test_build_is_needed_until_its_library_is_marked_complete(tmp_path):
    """A library without the marker (a build killed while linking) is not trusted."""
    name = "fused_hmc_cpu_0123456789abcdef"
    assert _build.build_needed(tmp_path / name, name)  # no directory yet
    (tmp_path / name).mkdir()
    (tmp_path / name / "build.ninja").write_text("")  # a build that never finished
    assert _build.build_needed(tmp_path / name, name)
    (tmp_path / name / f"{name}.so").write_bytes(b"")
    assert _build.build_needed(tmp_path / name, name)  # linked, perhaps partly: not marked
    (tmp_path / name / build_cache.COMPLETE_MARKER).write_text("fused_hmc_cpu_another")
    assert _build.build_needed(tmp_path / name, name)
    (tmp_path / name / build_cache.COMPLETE_MARKER).write_text(name)
    assert not _build.build_needed(tmp_path / name, name)


def _fake_build(tmp_path, monkeypatch, calls):
    """cpp_extension.load replaced by one that 'builds' an empty library into the directory it is
    given (asserting that no torch lock file is there), and the direct load by one that returns a
    stand-in module."""
    from torch.utils import cpp_extension

    def fake_load(*, name, build_directory, **kwargs):
        assert not (Path(build_directory) / build_cache.TORCH_LOCK_FILE).exists()
        calls.append(dict(kwargs, name=name, build_directory=build_directory))
        (Path(build_directory) / f"{name}.so").write_bytes(b"")
        return types.SimpleNamespace(__name__=name)

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setattr(cpp_extension, "load", fake_load)
    monkeypatch.setattr(build_cache, "import_library",
                        lambda directory, name: types.SimpleNamespace(__name__=name))
    monkeypatch.setitem(_build._state, "cuda", _build._state["cuda"])
    monkeypatch.setitem(_build._state, "cuda_missing_reason", _build._state["cuda_missing_reason"])
    monkeypatch.setitem(_build._state, "directory", _build._state["directory"])


def test_a_build_says_so_on_stderr_and_a_cached_load_is_silent(monkeypatch, fresh_state, capfd,
                                                               tmp_path):
    """The first load announces the build in one line with the measured build time, compiles
    the copy of the sources in the build directory (so the build never depends on where they
    lie), and marks it complete; the next load says nothing and compiles nothing."""
    calls = []
    _fake_build(tmp_path, monkeypatch, calls)
    _build._compile_and_load()
    first = capfd.readouterr().err.strip().splitlines()
    _build._compile_and_load()
    assert capfd.readouterr().err == ""
    assert len(first) == 1 and first[0].startswith(
        "building the fused_hmc extension (first use of these sources; about 2.5 minutes of CPU "
        "time"), first
    assert len(calls) == 1, "a complete build must load without compiling"
    name, directory = calls[0]["name"], Path(calls[0]["build_directory"])
    assert directory == tmp_path / "ext" / name
    assert name.startswith("fused_hmc_cpu_" if not _build._state["cuda"] else "fused_hmc_cuda_")
    assert (directory / build_cache.COMPLETE_MARKER).read_text() == name
    copy = directory / _build.SOURCES_SUBDIR
    assert calls[0]["extra_include_paths"] == [str(copy)]
    assert calls[0]["sources"] and all(Path(s).is_relative_to(copy) for s in calls[0]["sources"])
    for source in calls[0]["sources"]:
        original = _build.csrc_dir() / Path(source).relative_to(copy)
        assert Path(source).read_bytes() == original.read_bytes()


def test_a_torch_lock_left_by_a_killed_build_is_removed_before_building(monkeypatch, fresh_state,
                                                                          tmp_path, capfd):
    """A kill mid-build leaves torch's lock file and no marker: the next load builds (with our
    lock held, torch's can only be stale) instead of waiting on it forever."""
    calls = []
    _fake_build(tmp_path, monkeypatch, calls)
    _build._compile_and_load()
    directory = Path(calls[0]["build_directory"])
    (directory / build_cache.COMPLETE_MARKER).unlink()
    (directory / build_cache.TORCH_LOCK_FILE).write_text("")
    _build._compile_and_load()  # fake_load asserts that torch's lock is gone
    assert len(calls) == 2 and calls[1]["build_directory"] == str(directory)
    assert build_cache.is_complete(directory, calls[1]["name"])


def _hold_lock(path: Path):
    """Holds the OS lock on `path` from a child process (as another build would) until killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import filelock, sys, time; l = filelock.FileLock(sys.argv[1]); "
         "l.acquire(); print('held', flush=True); time.sleep(600)", str(path)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_wait_on_a_held_build_lock_times_out_naming_the_lock(monkeypatch, fresh_state, tmp_path,
                                                               capfd):
    calls = []
    _fake_build(tmp_path, monkeypatch, calls)
    monkeypatch.setenv(build_cache.LOCK_TIMEOUT_ENV, "0.5")
    missing = _build._cuda_missing_reason()
    flags = list(_build.HOST_FLAGS) + (_build.cuda_compile_flags() if missing is None else [])
    directory = _build.build_directory(_build.build_name(_build.csrc_dir(), missing is None,
                                                         flags))
    directory.mkdir(parents=True)
    lock = directory / build_cache.LOCK_FILE
    holder = _hold_lock(lock)
    try:
        start = time.perf_counter()
        with pytest.raises(fused_hmc.ExtensionBuildError) as info:
            fused_hmc.load_extension()
        assert time.perf_counter() - start < 30
    finally:
        holder.kill()
        holder.wait()
    assert isinstance(info.value, _build.BuildLockTimeout)
    message = " ".join(str(info.value).split())
    assert f"waiting for the build lock {lock}" in message and f"delete {lock}" in message
    assert build_cache.LOCK_TIMEOUT_ENV in message
    assert "waiting for another process's build" in capfd.readouterr().err
    assert not calls and fresh_state["failure"] is None, "a lock timeout is not a failed build"
    fused_hmc.load_extension()  # the holder is gone: the lock is free again
    assert len(calls) == 1 and fresh_state["loaded"]


def test_a_cpp_target_build_waits_on_its_lock_with_a_timeout(monkeypatch, tmp_path):
    from fused_hmc import cpp_build

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv(build_cache.LOCK_TIMEOUT_ENV, "0.5")
    spec = cpp_build.BuildSpec(source="template <typename T, typename Data>\nFUSED_HMC_HD T "
                               "log_density(const T* x, const Data&) { return -x[0] * x[0]; }\n",
                               source_name="<source>", dim=1, scalar="double", device_kind="cpu",
                               fields=(), user_gradient=False)
    name = cpp_build.build_name(spec, cpp_build.generated_files(spec))
    directory = _build.build_directory(name)
    directory.mkdir(parents=True)
    holder = _hold_lock(directory / build_cache.LOCK_FILE)
    try:
        with pytest.raises(_build.BuildLockTimeout, match=re.escape(str(directory))):
            cpp_build.load(spec)
    finally:
        holder.kill()
        holder.wait()


@pytest.fixture
def fake_cpp_load(monkeypatch, tmp_path):
    """cpp_build.load(spec) with torch's compile replaced: returns the keyword arguments of each
    cpp_extension.load call (the build's name and directory, the flags)."""
    from torch.utils import cpp_extension

    from fused_hmc import cpp_build

    calls = []

    def fake_load(*, name, build_directory, **kwargs):
        calls.append(dict(kwargs, name=name, build_directory=build_directory))
        return types.SimpleNamespace(__name__=name)

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setattr(cpp_build, "_modules", {})
    monkeypatch.setattr(cpp_extension, "load", fake_load)
    monkeypatch.setattr(cpp_build, "_syntax_check", lambda spec, directory, headers: None)

    def load(spec):
        cpp_build.load(spec)
        return calls
    return load


def _any_spec(device_kind: str):
    from fused_hmc import cpp_build

    return cpp_build.BuildSpec(source="// any\n", source_name="<source>", dim=1, scalar="double",
                               device_kind=device_kind, fields=(), user_gradient=False)


def test_a_cpp_target_builds_from_its_own_copy_of_the_headers_and_says_how_long(
        fake_cpp_load, capfd):
    """Its build depends on fused_hmc's headers' content, not on where they lie; the message
    quotes the measured build time; then it is marked complete."""
    calls = fake_cpp_load(_any_spec("cpu"))
    [line] = capfd.readouterr().err.strip().splitlines()
    assert line.startswith("compiling the CppTarget (dim 1, double, cpu; first use of this "
                           "source; about 45 s of CPU time) in "), line
    directory = Path(calls[0]["build_directory"])
    headers = directory / _build.SOURCES_SUBDIR
    assert calls[0]["extra_include_paths"] == [str(headers)]
    assert (headers / "user" / "user_target.h").read_bytes() == (
        _build.csrc_dir() / "user" / "user_target.h").read_bytes()
    assert (directory / build_cache.COMPLETE_MARKER).read_text() == calls[0]["name"]


def test_a_complete_cpp_target_build_loads_without_touching_torchs_lock(monkeypatch, tmp_path):
    from torch.utils import cpp_extension

    from fused_hmc import cpp_build

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setattr(cpp_build, "_modules", {})
    monkeypatch.setattr(cpp_extension, "load", lambda **kw: pytest.fail("compiled again"))
    loaded = types.SimpleNamespace()
    monkeypatch.setattr(build_cache, "import_library", lambda directory, name: loaded)
    spec = cpp_build.BuildSpec(source="// any\n", source_name="<source>", dim=1,
                               scalar="double", device_kind="cpu", fields=(),
                               user_gradient=False)
    name = cpp_build.build_name(spec, cpp_build.generated_files(spec))
    directory = _build.build_directory(name)
    directory.mkdir(parents=True)
    (directory / f"{name}.so").write_bytes(b"")
    (directory / build_cache.COMPLETE_MARKER).write_text(name)
    (directory / build_cache.TORCH_LOCK_FILE).write_text("")  # stale: a killed process's
    assert cpp_build.load(spec) is loaded


# ---- real processes: the built library under a stale lock, and two copies of the sources --------

_LOAD_AND_STEP = textwrap.dedent("""
    import sys, time, torch
    t0 = time.perf_counter()
    import fused_hmc
    from fused_hmc import _build
    q, accepted = fused_hmc.hmc_step(torch.zeros(4, 3), rng="philox", seed=1)
    assert accepted.shape == (4,)
    print("LOADED", _build.csrc_dir(), _build._state["directory"], time.perf_counter() - t0)
""")


def _cached_build(tmp_path) -> Path:
    """A copy of this process's complete build of the extension under tmp_path/ext."""
    fused_hmc.load_extension()
    built = _build._state["directory"]
    copy = tmp_path / "ext" / built.name
    shutil.copytree(built, copy, ignore=shutil.ignore_patterns(build_cache.LOCK_FILE))
    return copy


def _run(code: str, cwd: Path, ext: Path, timeout: float = 120) -> str:
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(ext))
    env.pop(build_cache.LOCK_TIMEOUT_ENV, None)
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "building" not in done.stderr, done.stderr
    return done.stdout


@pytest.mark.slow
def test_a_stale_torch_lock_does_not_stop_a_built_library_from_loading(tmp_path):
    """A kill inside cpp_extension.load leaves its lock file; loading the built library must not
    wait on it (it used to, forever)."""
    directory = _cached_build(tmp_path)
    (directory / build_cache.TORCH_LOCK_FILE).write_text("")
    library = directory / f"{directory.name}.so"
    mtime = library.stat().st_mtime_ns
    out = _run(_LOAD_AND_STEP, tmp_path, tmp_path / "ext", timeout=60)
    assert f" {directory} " in out
    assert library.stat().st_mtime_ns == mtime


@pytest.mark.slow
def test_two_copies_of_the_sources_share_one_build_and_never_rebuild_it(tmp_path):
    """An installed package and a checkout (two copies of fused_hmc and csrc at different paths)
    load the one build their sources' content names, neither rebuilding it (they used to rebuild
    each other's, minutes per switch)."""
    directory = _cached_build(tmp_path)
    library = directory / f"{directory.name}.so"
    mtime = library.stat().st_mtime_ns
    root = Path(fused_hmc.__file__).resolve().parent
    for copy in ("a", "b", "a"):
        place = tmp_path / copy
        if not place.exists():
            shutil.copytree(root, place / "fused_hmc", ignore=shutil.ignore_patterns("__pycache__"))
            shutil.copytree(_build.csrc_dir(), place / "csrc")
        out = _run(_LOAD_AND_STEP, place, tmp_path / "ext")
        assert f"LOADED {place / 'csrc'} {directory} " in out, out
    assert library.stat().st_mtime_ns == mtime


def test_a_cpp_target_cuda_build_compiles_the_model_as_written(fake_cpp_load, monkeypatch):
    """A user's model reaches nvcc with --fmad=false: with nvcc's default contraction the force at
    a call's start and in the leapfrog were different FMAs of the same plain C++, and a CUDA warm-up
    split into calls drifted from the unsplit one (test_force_carry's CUDA cases). fused_hmc's own
    kernels, which spell every rounding out, keep their flags; and the flag is in the build's name,
    so a module built without it is never reused."""
    from fused_hmc import cpp_build

    spec = _any_spec("cuda")
    [call] = fake_cpp_load(spec)
    assert "--fmad=false" in call["extra_cuda_cflags"]
    assert "--fmad=false" not in _build.cuda_compile_flags()
    monkeypatch.setattr(_build, "USER_CUDA_FLAGS", ())
    assert cpp_build.build_name(spec, cpp_build.generated_files(spec)) != call["name"]
