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

import pytest
import torch

import fused_hmc
from fused_hmc import _build

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
    assert {"fused_hmc::transition", "fused_hmc::run", "fused_hmc_testing::philox4x32"} <= set(names)


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
    for changed in (copy / "ops" / "schema.cpp", copy / "math" / "philox.h"):
        original = changed.read_bytes()
        changed.write_bytes(original + b"\n// edited\n")
        assert _build.build_name(copy, False, FLAGS) != name, changed
        changed.write_bytes(original)
        assert _build.build_name(copy, False, FLAGS) == name
    assert _build.build_name(copy, False, FLAGS + ["-g"]) != name
    assert _build.build_name(copy, True, FLAGS).startswith("fused_hmc_cuda_")


def test_build_is_needed_exactly_when_its_library_is_missing(tmp_path):
    name = "fused_hmc_cpu_0123456789abcdef"
    assert _build.build_needed(tmp_path / name, name)  # no directory yet
    (tmp_path / name).mkdir()
    (tmp_path / name / "build.ninja").write_text("")  # a build that never finished
    assert _build.build_needed(tmp_path / name, name)
    (tmp_path / name / f"{name}.so").write_bytes(b"")
    assert not _build.build_needed(tmp_path / name, name)


def test_a_build_says_so_on_stderr_and_a_cached_load_is_silent(monkeypatch, fresh_state, capfd,
                                                               tmp_path):
    """cpp_extension.load is replaced by one that 'builds' the library into the directory it is
    given; the first load announces the build in one line, the next (library present) says
    nothing, and both use the hashed name inside TORCH_EXTENSIONS_DIR."""
    from torch.utils import cpp_extension

    calls = []

    def fake_load(*, name, build_directory, **kwargs):
        calls.append((name, build_directory))
        (tmp_path / "ext" / name / f"{name}.so").write_bytes(b"")
        return types.SimpleNamespace(__name__=name)

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setattr(cpp_extension, "load", fake_load)
    monkeypatch.setitem(_build._state, "cuda", _build._state["cuda"])
    monkeypatch.setitem(_build._state, "cuda_missing_reason", _build._state["cuda_missing_reason"])
    _build._compile_and_load()
    first = capfd.readouterr().err.strip().splitlines()
    _build._compile_and_load()
    assert capfd.readouterr().err == ""
    assert len(first) == 1 and first[0].startswith(
        "building the fused_hmc extension (first use of these sources, about a minute"), first
    name, directory = calls[0]
    assert calls[1] == calls[0] and directory == str(tmp_path / "ext" / name)
    assert name.startswith("fused_hmc_cpu_" if not _build._state["cuda"] else "fused_hmc_cuda_")
