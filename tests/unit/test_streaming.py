"""Draws streamed to a zarr store (out=): the store holds the in-memory run's draws bit for bit,
the memory check counts only the stream's buffers, and a crashed run resumed from its checkpoint
cuts the store back to the checkpoint's draws before appending."""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc import ops
from fused_hmc.sampling import resources, streaming
from fused_hmc.sampling.checkpoint import Checkpointer, read_checkpoint
from fused_hmc.sampling.storage import DrawStore

from .test_sampler import _q0, _run, assert_results_equal

TUNED = dict(num_warmup=20, jitter=0.1, target=fused_hmc.DiagonalGaussian(torch.zeros(5),
                                                                         torch.ones(5) * 0.7))


def _streamed_equals_in_memory(res, streamed):
    assert streamed.samples is None and streamed.samples_path is not None
    assert_results_equal(streamed._replace(samples_path=None, samples=res.samples), res)
    on_disk = fused_hmc.load(streamed.samples_path, samples=True)
    assert on_disk.samples.dtype == res.samples.dtype
    assert torch.equal(on_disk.samples.to(res.samples.device), res.samples)
    assert_results_equal(fused_hmc.load(streamed.samples_path), streamed)


@pytest.mark.parametrize("config", [dict(thin=3), TUNED])
def test_streamed_draws_equal_in_memory_draws(device, config, tmp_path, monkeypatch):
    # Buffers of 2 draws: many chunks, each slot reused several times, chunks cut to fit.
    monkeypatch.setattr(streaming, "SLOT_BYTES", 2 * 6 * 5 * 4)
    q0 = _q0(device, dtype=torch.float32)
    res = _run(q0, 40, **config)
    streamed = _run(q0, 40, out=tmp_path / "draws", **config)
    _streamed_equals_in_memory(res, streamed)


def test_memory_check_counts_only_the_stream_buffers(tmp_path, monkeypatch):
    """Draws of 60 chains x 50 dims x 300 transitions (3.6 MB) do not fit in 2 MB of memory; the
    stream's three buffers (1/16 of it each, at most) do."""
    monkeypatch.setattr(resources, "available_memory", lambda device: 2 * 2**20)
    q0 = _q0("cpu", chains=60, dim=50, dtype=torch.float32)
    with pytest.raises(fused_hmc.SamplesTooLargeError):
        _run(q0, 300)
    streamed = _run(q0, 300, out=tmp_path / "draws")
    monkeypatch.undo()
    _streamed_equals_in_memory(_run(q0, 300), streamed)


def test_a_crashed_stream_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    q0, ck, out = _q0("cpu"), tmp_path / "run.ckpt", tmp_path / "draws"
    whole = _run(q0, 30, chunk_size=4)
    real_due, real_op, calls = Checkpointer.due, ops.sample, []
    monkeypatch.setattr(Checkpointer, "due", lambda self: len(calls) == 2)  # after chunk 2 only

    def crashes_in_chunk_5(*args, **kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise RuntimeError("node lost")
        real_op(*args, **kwargs)

    monkeypatch.setattr(ops, "sample", crashes_in_chunk_5)
    with pytest.raises(RuntimeError, match="node lost"):
        _run(q0, 30, chunk_size=4, out=out, checkpoint=ck)
    monkeypatch.setattr(Checkpointer, "due", real_due)
    monkeypatch.setattr(ops, "sample", real_op)
    # The store got the draws of chunks 1-4 (8 past the checkpoint's), to be cut back to 8.
    assert DrawStore.open(out).count == 16 and read_checkpoint(ck)[2]["num_kept"] == 8
    resumed = fused_hmc.Sampler.from_checkpoint(ck).run(last=True)
    _streamed_equals_in_memory(whole, resumed)


def test_out_arguments_are_checked(tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="new path"):
        _run(_q0("cpu"), 4, out=tmp_path / "taken")
    with pytest.raises(ValueError, match="keep_samples=False"):
        _run(_q0("cpu"), 4, out=tmp_path / "x", keep_samples=False)
    with pytest.raises(ValueError, match="holds no finished result"):
        sampler = fused_hmc.Sampler(_q0("cpu"), out=tmp_path / "y", progress=False)
        sampler._open_stream(0)
        fused_hmc.load(tmp_path / "y")


@pytest.mark.cuda
def test_cuda_stream_copies_through_pinned_buffers(tmp_path, monkeypatch):
    """On CUDA the slots pair a device buffer with a pinned host buffer, and the streamed draws
    equal the in-memory ones bit for bit, over many slot reuses."""
    monkeypatch.setattr(streaming, "SLOT_BYTES", 3 * 256 * 16 * 4)
    q0 = _q0("cuda", chains=256, dim=16, dtype=torch.float32)
    made = []
    real_init = streaming._Slot.__init__

    def recording(self, *args):
        real_init(self, *args)
        made.append(self)

    monkeypatch.setattr(streaming._Slot, "__init__", recording)
    res = _run(q0, 300, thin=2, chunk_size=7)
    streamed = _run(q0, 300, thin=2, chunk_size=7, out=tmp_path / "draws")
    assert len(made) == streaming.SLOTS
    assert all(s.host_buffer.is_pinned() and s.device_buffer.is_cuda for s in made)
    _streamed_equals_in_memory(res, streamed)


def test_a_failed_write_stops_the_run_with_its_error(tmp_path, monkeypatch):
    import threading

    real, calls = DrawStore.append, []

    def fails_the_second_time(self, start, draws):
        calls.append(start)
        if len(calls) == 2:
            raise OSError("disk full")
        real(self, start, draws)

    monkeypatch.setattr(DrawStore, "append", fails_the_second_time)
    monkeypatch.setattr(streaming, "SLOT_BYTES", 6 * 5 * 8)  # one draw per buffer
    with pytest.raises(OSError, match="disk full"):
        _run(_q0("cpu"), 20, out=tmp_path / "draws")
    assert 2 <= len(calls) < 20  # it stopped soon after, not at the end
    assert not any(t.name == "fused_hmc draw writer" for t in threading.enumerate())


def _files(directory) -> dict:
    """Every file under `directory` and its bytes (to show that a store was not touched)."""
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file()}


def test_a_copied_experiment_resumes_into_its_own_store(tmp_path):
    """cp -r exp1 exp2, then resume exp2: exp2's store gets the draws, exp1 is untouched."""
    import shutil

    q0, exp1, exp2 = _q0("cpu"), tmp_path / "exp1", tmp_path / "exp2"
    exp1.mkdir()
    sampler = fused_hmc.Sampler(q0, seed=1234, progress=False, out=exp1 / "draws",
                                checkpoint=exp1 / "run.ckpt")
    sampler.run(10)
    shutil.copytree(exp1, exp2)
    before = _files(exp1)
    resumed = fused_hmc.Sampler.from_checkpoint(exp2 / "run.ckpt").run(6)
    assert _files(exp1) == before
    assert resumed.samples_path == str(exp2 / "draws")
    whole = _run(q0, 16)
    _streamed_equals_in_memory(whole, resumed)


def test_a_checkpoint_never_touches_another_runs_store(tmp_path):
    """A checkpoint made to point at another run's store is refused before it cuts that store."""
    other = tmp_path / "other"
    _run(_q0("cpu"), 12, out=other)
    before = _files(other)
    ck = tmp_path / "run.ckpt"
    sampler = fused_hmc.Sampler(_q0("cpu"), seed=7, progress=False, out=tmp_path / "mine",
                                checkpoint=ck)
    sampler.run(2)
    state = sampler._checkpoint_state()
    state["arguments"] = dict(state["arguments"], out=str(other))
    Checkpointer(ck, 0.0).write(state)
    with pytest.raises(ValueError, match=f"out={other} holds the draws of another run"):
        fused_hmc.Sampler.from_checkpoint(ck).run(3)
    assert _files(other) == before
    assert fused_hmc.load(other).num_kept == 12


def test_of_two_samplers_streaming_to_one_path_one_fails_before_writing(tmp_path, monkeypatch):
    """The race of issue 30: the other process gets its store made between this one's check and
    its creation (here: when this one first reaches zarr). Exactly one of the two may succeed,
    and the store then holds that one's draws."""
    from fused_hmc.sampling import storage

    out, real_zarr, outcomes = tmp_path / "draws", storage.zarr, {}
    ours = fused_hmc.Sampler(_q0("cpu"), seed=1, progress=False, out=out)
    theirs = fused_hmc.Sampler(_q0("cpu", key="other"), seed=2, progress=False, out=out)

    def other_process_first():
        monkeypatch.setattr(storage, "zarr", real_zarr)
        try:
            outcomes["theirs"] = theirs.run(5)
        except FileExistsError as exc:
            outcomes["theirs"] = exc
        return real_zarr()

    monkeypatch.setattr(storage, "zarr", other_process_first)
    try:
        outcomes["ours"] = ours.run(5)
    except FileExistsError as exc:
        outcomes["ours"] = exc
    won = [who for who, outcome in outcomes.items() if not isinstance(outcome, Exception)]
    assert len(won) == 1, outcomes
    assert all("exists; stream to a new path" in str(outcomes[who])
               for who in outcomes if who not in won)
    assert_results_equal(fused_hmc.load(out), outcomes[won[0]])
