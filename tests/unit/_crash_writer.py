"""The writer side of test_crash_consistency: each scenario writes a result, a store or a
checkpoint in a forked child that SIGKILLs itself just before its k-th filesystem operation
(os.rename / replace / mkdir / unlink / rmdir, zarr's file writes, a zip member's write), then
checks in the parent what a reader gets: the old complete result, the new complete result, or a
clear error naming the incomplete file; and a checkpoint, when there is one, resumes to the
uninterrupted run's result bit for bit.

Run: python _crash_writer.py SEED POINTS REPEATS; prints one JSON line per scenario.
Forking is safe here: this process runs torch on one thread, and zarr resets its event loop in a
forked child.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import traceback
import zipfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import zarr.storage._local as zarr_local  # noqa: E402

import fused_hmc  # noqa: E402

torch.set_num_threads(1)


class KillSwitch:
    """Counts filesystem operations; SIGKILLs this process before the `at`-th (when armed)."""

    def __init__(self):
        self.count, self.at, self.lock = 0, None, threading.Lock()

    def tick(self) -> None:
        with self.lock:  # zarr writes from its own threads
            self.count += 1
            if self.at is not None and self.count >= self.at:
                os.kill(os.getpid(), signal.SIGKILL)

    def arm(self, at: int | None) -> None:
        self.count, self.at = 0, at


SWITCH = KillSwitch()


def _count_calls(owner, name: str) -> None:
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        SWITCH.tick()
        return real(*args, **kwargs)

    setattr(owner, name, counted)


for _name in ("rename", "replace", "mkdir", "unlink", "rmdir"):
    _count_calls(os, _name)
_count_calls(zarr_local, "_put")  # a chunk's or a metadata document's write
_count_calls(zipfile.ZipFile, "write")  # a member of a checkpoint's zip

Q0 = torch.randn(4, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
# 4 warm-up transitions and 8 sampling ones in chunks of 4: three checkpoints and stream appends.
RUN = dict(seed=11, progress=False, chunk_size=4, num_warmup=4, jitter=0.1)


def _sample(n: int, **kw):
    return fused_hmc.sample(Q0, n, **(RUN | kw))


# ---- scenarios: setup(work) -> context (unarmed); write(work, context) (armed; returns the run's
# result); what a reader gets: read(work); errors_allowed: a clear error is a correct outcome
# (there was no old result); checkpoint: the file a kill leaves to resume from ---------------

class Save:
    errors_allowed, checkpoint = True, None

    def setup(self, work):
        return _sample(6)

    def write(self, work, res):
        res.save(work / "res")

    def read(self, work):
        return fused_hmc.load(work / "res")


class Overwrite(Save):
    errors_allowed = False

    def setup(self, work):
        _sample(4, seed=12).save(work / "res")
        return _sample(6)

    def write(self, work, res):
        res.save(work / "res", overwrite=True)


class Stream:
    """A streamed run with a checkpoint after every chunk (and the store's completion)."""
    errors_allowed, checkpoint = True, "run.ckpt"

    def setup(self, work):
        return None

    def write(self, work, _):
        return fused_hmc.Sampler(Q0, out=work / "draws", checkpoint=work / "run.ckpt",
                                 checkpoint_every=0, **RUN).run(8)

    def read(self, work):
        return fused_hmc.load(work / "draws")


class Checkpoint(Stream):
    """In-memory draws, checkpointed after every chunk."""

    def write(self, work, _):
        return fused_hmc.Sampler(Q0, checkpoint=work / "run.ckpt", checkpoint_every=0,
                                 **RUN).run(8)

    def read(self, work):
        return None


class StreamEnd(Stream):
    """A later run of a streaming sampler: its store complete from the first run."""
    errors_allowed, checkpoint = False, None

    def setup(self, work):
        sampler = fused_hmc.Sampler(Q0, out=work / "draws", **RUN)
        sampler.run(4)
        return sampler

    def write(self, work, sampler):
        sampler.run(4)


class Resave(StreamEnd):
    """res.save(res.samples_path): the streamed store completed again, in place."""

    def setup(self, work):
        return fused_hmc.Sampler(Q0, out=work / "draws", **RUN).run(4)

    def write(self, work, res):
        res.save(res.samples_path)


SCENARIOS = {"save": Save(), "overwrite": Overwrite(), "stream": Stream(),
             "checkpoint": Checkpoint(), "stream_end": StreamEnd(), "resave": Resave()}


# ---- comparing -----------------------------------------------------------------------------

def _same(a, b) -> bool:
    """Every field equal (tensors bit for bit, NaNs equal), but where the draws are stored."""
    for name in a._fields:
        if name == "samples_path":
            continue
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
                    and x.shape == y.shape and x.dtype == y.dtype
                    and torch.equal(x.nan_to_num(7.0), y.nan_to_num(7.0))):
                return False
        elif isinstance(x, dict) and isinstance(y, dict) and x.keys() == y.keys():
            if not all(torch.equal(x[k], y[k]) for k in x):
                return False
        elif x != y:
            return False
    return (a.samples_path is None) == (b.samples_path is None)


def _outcome(read, work, old, new):
    """'old', 'new', 'none' (read gives nothing to compare), 'error: ...' (clear), or raises
    AssertionError describing a wrong or partial result or an unclear error."""
    try:
        got = read(work)
    except (FileNotFoundError, ValueError) as exc:
        if str(work) not in str(exc):
            raise AssertionError(f"an error that names no file: {exc!r}") from None
        return f"error: {type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - what is not a clear error is the finding
        raise AssertionError(f"unclear error {exc!r}") from None
    if got is None:
        return "none"
    if old is not None and _same(got, old):
        return "old"
    if _same(got, new):
        return "new"
    raise AssertionError("a result that is neither the old nor the new one")


def _resumed(scenario, work, whole):
    """From the checkpoint (if any), continued to the end: the uninterrupted run's result."""
    if scenario.checkpoint is None or not (work / scenario.checkpoint).exists():
        return
    copy = work.with_name(work.name + "-resumed")  # resumes beside a copy (out= is relative)
    shutil.copytree(work, copy)
    try:
        res = fused_hmc.Sampler.from_checkpoint(copy / scenario.checkpoint).run()
        if not _same(res, whole):
            raise AssertionError("the run resumed from the checkpoint differs from the whole run")
    finally:
        shutil.rmtree(copy)


# ---- one scenario ----------------------------------------------------------------------------

def _in_child(scenario, work, at, report: Path) -> None:
    """Forked: setup, then the write with the kill switch armed; never returns."""
    code = 0
    try:
        context = scenario.setup(work)
        SWITCH.arm(at)
        scenario.write(work, context)
        SWITCH.arm(None)
        report.write_text(json.dumps({"ops": SWITCH.count}))
    except BaseException:  # noqa: BLE001 - reported to the parent
        report.write_text(json.dumps({"error": traceback.format_exc()}))
        code = 1
    finally:
        os._exit(code)


def _fork(scenario, work, at) -> tuple[bool, dict]:
    """(killed, the child's report)."""
    report = work.with_name(work.name + ".json")
    pid = os.fork()
    if pid == 0:
        _in_child(scenario, work, at, report)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    data = json.loads(report.read_text()) if report.exists() else {}
    report.unlink(missing_ok=True)
    return killed, data


def run_scenario(name: str, seed: int, points: int, repeats: int, root: Path) -> dict:
    scenario = SCENARIOS[name]
    dry = root / f"{name}-dry"
    dry.mkdir()
    context = scenario.setup(dry)
    old = scenario.read(dry) if not scenario.errors_allowed else None
    SWITCH.arm(None)
    whole = scenario.write(dry, context)  # (what a run resumed from a checkpoint must give)
    ops = SWITCH.count
    new = scenario.read(dry)
    # One point drawn in each of `points` equal stretches of the operations: spread over them all.
    rng = random.Random(f"{seed}-{name}")
    chosen = sorted({rng.randint(1 + k * ops // points, max(1 + k * ops // points,
                                                            (k + 1) * ops // points))
                     for k in range(points)})
    failures, outcomes, kills = [], {}, 0
    for at in chosen:
        for repeat in range(repeats):
            work = root / f"{name}-{at}-{repeat}"
            work.mkdir()
            killed, report = _fork(scenario, work, at)
            kills += killed
            try:
                if "error" in report:
                    raise AssertionError(f"the writer failed: {report['error']}")
                outcome = _outcome(scenario.read, work, old, new)
                if outcome.startswith("error") and not scenario.errors_allowed:
                    raise AssertionError(f"the old result was lost: {outcome}")
                _resumed(scenario, work, whole)
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
            except AssertionError as exc:
                failures.append(f"kill before op {at} (repeat {repeat}): {exc}")
            shutil.rmtree(work)
    return {"scenario": name, "ops": ops, "points": chosen, "repeats": repeats, "kills": kills,
            "outcomes": outcomes, "failures": failures}


def main(argv: list[str]) -> None:
    seed, points, repeats = map(int, argv[1:4])
    names = argv[4:] or list(SCENARIOS)
    with tempfile.TemporaryDirectory() as root:
        for name in names:
            print(json.dumps(run_scenario(name, seed, points, repeats, Path(root))), flush=True)


if __name__ == "__main__":
    main(sys.argv)
