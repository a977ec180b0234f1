"""Checkpoints: a run killed (SIGKILL) during warm-up and again during sampling, resumed each time
in a new process from its checkpoint, ends with the uninterrupted run's result bit for bit; Ctrl-C
writes a last checkpoint; a failed write leaves the previous checkpoint whole."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import warnings
import time

import pytest
import torch

import fused_hmc
from fused_hmc import ops
from fused_hmc.sampling import checkpoint, storage

from .test_sampler import assert_results_equal
from .test_sampler_ctrl_c import _sigint_after_call, sigint_handler  # noqa: F401 - a fixture
from .test_sampler_chain_kernels import _q0, _run

# 30 warm-up transitions in chunks of 5, then 16 sampling transitions (thin 2): 10 chunks.
RUN = dict(num_warmup=30, jitter=0.2, thin=2, chunk_size=5,
           target=fused_hmc.DiagonalGaussian(torch.zeros(5), torch.logspace(-1, 0, 5)))
N = 16

# The child runs the chunks slowly (a sleep after each op call; results do not depend on timing)
# so that the parent sees a checkpoint and kills it mid-way.
CHILD = textwrap.dedent("""
    import sys, time
    import torch
    import fused_hmc
    from fused_hmc import ops
    def slowly(op):
        def slow(**kwargs):
            op(**kwargs)
            time.sleep(0.05)
        return slow
    ops.sample, ops.warmup = slowly(ops.sample), slowly(ops.warmup)
    stage, ck, q0, out = sys.argv[1:]
    if stage == "start":
        run = dict(num_warmup=30, jitter=0.2, thin=2, chunk_size=5, target=fused_hmc.DiagonalGaussian(
            torch.zeros(5), torch.logspace(-1, 0, 5)))
        fused_hmc.sample(torch.load(q0), %d, seed=1234, progress=False, checkpoint=ck,
                         checkpoint_every=0, **run)
    else:
        fused_hmc.Sampler.from_checkpoint(ck).run(last=True).save(out)
""" % N)


def _child(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _kill_when(proc: subprocess.Popen, ck, ready) -> dict:
    """SIGKILLs `proc` once its checkpoint's integers satisfy ready(); returns them."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        if ck.exists():
            integers = checkpoint.read_checkpoint(ck)[2]
            if ready(integers):
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                return integers
        time.sleep(0.01)
    raise AssertionError("no checkpoint appeared")


def test_killed_runs_resume_in_new_processes_bit_for_bit(tmp_path):
    q0, ck, out = _q0(), tmp_path / "run.ckpt", tmp_path / "result"
    torch.save(q0, tmp_path / "q0.pt")
    whole = _run(q0, N, **RUN)

    start = _child("start", ck, tmp_path / "q0.pt", out)
    during_warmup = _kill_when(start, ck, lambda i: i["warmup_left"] > 0)
    assert during_warmup["num_transitions"] == 0 and during_warmup["remaining"] == N

    resumed = _child("resume", ck, tmp_path / "q0.pt", out)
    during_sampling = _kill_when(resumed, ck, lambda i: 0 < i["num_transitions"] < N)
    assert during_sampling["warmup_left"] == 0 and during_sampling["num_kept"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()).count("run.ckpt") == 1

    finished = _child("resume", ck, tmp_path / "q0.pt", out)
    assert finished.wait(timeout=120) == 0, finished.communicate()[1].decode()[-2000:]
    assert_results_equal(fused_hmc.load(out), whole)  # draws, moments, acceptance, final state


def test_ctrl_c_writes_a_last_checkpoint(sigint_handler, monkeypatch, tmp_path):  # noqa: F811
    q0, ck = _q0(), tmp_path / "run.ckpt"
    whole = _run(q0, N, **RUN)
    _sigint_after_call(monkeypatch, "sampling", call=2)
    res = _run(q0, N, checkpoint=ck, checkpoint_every=3600, **RUN)  # no timed checkpoint
    assert res.interrupted and res.num_transitions == 10
    monkeypatch.undo()
    sampler = fused_hmc.Sampler.from_checkpoint(ck)
    assert_results_equal(sampler.result(), res)
    assert_results_equal(sampler.run(), whole)


def test_a_pooled_warmup_on_the_harmonic_mean_resumes_on_it(sigint_handler, monkeypatch,  # noqa: F811
                                                             tmp_path):
    """pooled_acceptance travels in the checkpoint: interrupted mid-warm-up, the resumed run is
    the uninterrupted one bit for bit (and not the mean's)."""
    q0, ck = _q0(), tmp_path / "run.ckpt"
    run = dict(RUN, pooled=True, pooled_acceptance="harmonic")
    whole = _run(q0, N, **run)
    assert not torch.equal(whole.step_size, _run(q0, N, **RUN | dict(pooled=True)).step_size)
    _sigint_after_call(monkeypatch, "warmup", call=3)
    res = _run(q0, N, checkpoint=ck, checkpoint_every=3600, **run)
    assert res.interrupted and res.num_transitions == 0
    monkeypatch.undo()
    sampler = fused_hmc.Sampler.from_checkpoint(ck)
    assert sampler.settings.warmup.pooled_acceptance == "harmonic"
    assert_results_equal(sampler.run(), whole)


def test_a_failed_write_leaves_the_last_checkpoint(monkeypatch, tmp_path):
    q0, ck = _q0(), tmp_path / "run.ckpt"
    whole = _run(q0, N, **RUN)
    real, writes = storage.zip_directory, []

    def fails_the_third_time(directory, path):
        writes.append(path)
        if len(writes) == 3:
            raise OSError("disk full")
        real(directory, path)

    monkeypatch.setattr(storage, "zip_directory", fails_the_third_time)
    with pytest.raises(OSError, match="disk full"):
        _run(q0, N, checkpoint=ck, checkpoint_every=0, **RUN)
    assert [p.name for p in tmp_path.iterdir()] == ["run.ckpt"]  # no temporary left
    assert checkpoint.read_checkpoint(ck)[2]["next_transition"] == 10  # the second chunk's
    monkeypatch.undo()
    assert_results_equal(fused_hmc.Sampler.from_checkpoint(ck).run(), whole)


def test_a_finished_checkpoint_gives_its_result_without_running(monkeypatch, tmp_path):
    ck = tmp_path / "run.ckpt"
    res = _run(_q0(), 6, checkpoint=ck, keep_samples=False)

    def not_called(*args, **kwargs):
        raise AssertionError("ran a transition")

    monkeypatch.setattr(ops, "sample", not_called)
    monkeypatch.setattr(ops, "warmup", not_called)
    assert_results_equal(fused_hmc.Sampler.from_checkpoint(ck).run(), res)
    with pytest.raises(ValueError, match="no run to continue"):
        fused_hmc.Sampler(_q0(), progress=False).run()


def test_checkpoint_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="checkpoint: the directory"):
        fused_hmc.Sampler(_q0(), checkpoint=tmp_path / "missing" / "run.ckpt")
    with pytest.raises(ValueError, match="checkpoint_every"):
        fused_hmc.Sampler(_q0(), checkpoint=tmp_path / "ck", checkpoint_every=-1)
    with pytest.raises(TypeError, match="checkpoint must be a path"):
        fused_hmc.Sampler(_q0(), checkpoint=3)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        fused_hmc.Sampler.from_checkpoint(tmp_path / "none")


@pytest.mark.parametrize("damage", ["not a zip", "truncated"])
def test_a_damaged_checkpoint_names_the_file(tmp_path, damage):
    ck = tmp_path / "run.ckpt"
    if damage == "not a zip":
        ck.write_text('{"a": "json file"}')
    else:
        _run(_q0(), 6, checkpoint=ck)
        ck.write_bytes(ck.read_bytes()[:ck.stat().st_size // 2])
    with pytest.raises(ValueError, match=f"{ck}.*not a complete zip file"):
        fused_hmc.Sampler.from_checkpoint(ck)


def test_a_checkpoint_path_that_is_a_directory_is_refused_before_the_run(tmp_path):
    with pytest.raises(ValueError, match=f"checkpoint: {tmp_path} is a directory"):
        fused_hmc.Sampler(_q0(), checkpoint=tmp_path)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporaries_left_by_killed_writers_are_removed(tmp_path):
    ck, dead = tmp_path / "run.ckpt", _dead_pid()
    (tmp_path / f".run.ckpt.tmp-{dead}-0badf00d").write_bytes(b"half a zip")
    (tmp_path / f".run.ckpt.tmp-{dead}-0badf00d-dir").mkdir()
    alive = tmp_path / f".run.ckpt.tmp-{os.getppid()}-12345678"  # a live writer's: kept
    alive.write_bytes(b"")
    (tmp_path / "other.tmp-1").write_bytes(b"")  # not the checkpoint's: kept
    _run(_q0(), 6, checkpoint=ck)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [alive.name, "other.tmp-1", "run.ckpt"])


def test_in_memory_draws_rewritten_at_each_checkpoint_warn_with_their_size(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setattr(checkpoint, "WARN_DRAW_BYTES", 1000)  # 6 chains x 5 dims x 8 B a draw
    # Chunks of 2 draws: the third checkpoint is the first beyond 1000 bytes (once, not twice).
    with pytest.warns(UserWarning, match=r"rewrites the 6 draws kept in memory \(1,440 bytes\)"
                                         r".*out="):
        _run(_q0(), 8, checkpoint=tmp_path / "run.ckpt", checkpoint_every=0, chunk_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(_q0(), 4, checkpoint=tmp_path / "small.ckpt", checkpoint_every=0)
