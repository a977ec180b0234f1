"""Crash consistency: writers SIGKILLed at seeded points, then read back.

_crash_writer.py forks a child per kill point that kills itself just before its k-th filesystem
operation (a rename, replace, mkdir, unlink or rmdir, a zarr file write, a zip member's write),
in six scenarios: a save, a save over an older result, a streamed run with a checkpoint after
every chunk, an in-memory run checkpointed after every chunk, a later run of a streaming sampler
(the end of a stream) and a streamed result saved to its own store. After each kill the reader
must get the old complete result, the new complete result, or (where there was no old one) a
clear error naming the file: never a wrong or partial result, never an unclear error; and a
checkpoint left behind must resume to the uninterrupted run's result bit for bit.

The kill points are drawn by a seeded generator, one in each of POINTS equal stretches of the
scenario's operations (counted in an uninterrupted run), and each is repeated REPEATS times (the
stream's writer thread may order its writes differently).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SEED, POINTS, REPEATS = 30, 8, 2
SCENARIOS = ["save", "overwrite", "stream", "checkpoint", "stream_end", "resave"]


@pytest.fixture(scope="module")
def reports() -> dict:
    writer = Path(__file__).with_name("_crash_writer.py")
    done = subprocess.run([sys.executable, str(writer), str(SEED), str(POINTS), str(REPEATS)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    kills = sum(r["kills"] for r in lines)
    print(f"crash consistency: {kills} kills at {sum(len(r['points']) for r in lines)} kill "
          f"points, each repeated {REPEATS} times")
    return {r["scenario"]: r for r in lines}


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_killed_writer_leaves_the_old_or_the_new_result(reports, scenario):
    report = reports[scenario]
    assert report["failures"] == [], "\n".join(report["failures"])
    assert len(report["points"]) >= POINTS - 1 and report["kills"] >= len(report["points"])
