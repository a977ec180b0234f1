"""The CLI's one place for errors (cli.main): a bad file or an allocation the machine refuses ends
in one line naming the flag and an exit status, never a traceback; a bug keeps its traceback."""
from __future__ import annotations

import json

import pytest

from fused_hmc.cli import entry as cli


def _error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("fused-hmc sample: error: "), lines
    return lines[0]


def test_resume_from_a_file_that_is_not_a_checkpoint_names_the_flag(tmp_path, capsys):
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"y": [1.0, 2.0]}))
    assert cli.main(["sample", "--resume", str(data), "--no-progress"]) == 2
    line = _error_line(capsys)
    assert f"argument --resume: {data} is not a fused_hmc checkpoint" in line


def test_resume_from_a_directory_names_the_flag(tmp_path, capsys):
    assert cli.main(["sample", "--resume", str(tmp_path), "--no-progress"]) == 2
    assert "argument --resume:" in _error_line(capsys)


def test_chains_beyond_memory_say_out_of_memory_naming_the_flags(capsys):
    """10^12 chains x 64 float32 dims: 256 TB, beyond any machine's address space, so the
    allocator refuses it at once (the issue's 10^8 chains did the same on its 2-core machine)."""
    assert cli.main(["sample", "--chains", str(10**12), "--samples", "1", "--no-progress"]) == 1
    line = _error_line(capsys)
    assert "out of memory (2.56e+05 GB asked for)" in line
    assert "fewer --chains" in line and "--no-keep-samples" in line


@pytest.mark.parametrize("error, status, shown", [
    (TypeError("mu must be a tensor"), 2, "mu must be a tensor"),
    (PermissionError(13, "Permission denied", "/out.zarr"), 1, "Permission denied: '/out.zarr'"),
    (MemoryError(), 1, "out of memory: the run does not fit"),
    (RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 139 GiB total)"), 1,
     "out of memory (20.00 GiB asked for)"),
])
def test_errors_of_the_run_end_in_one_line(monkeypatch, capsys, error, status, shown):
    def fail(args):
        raise error

    monkeypatch.setattr(cli, "build_parser", _parser_running(fail))
    assert cli.main(["sample"]) == status
    assert shown in _error_line(capsys)


def test_a_bug_keeps_its_traceback(monkeypatch):
    def fail(args):
        raise RuntimeError("index 3 is out of bounds")

    monkeypatch.setattr(cli, "build_parser", _parser_running(fail))
    with pytest.raises(RuntimeError, match="out of bounds"):
        cli.main(["sample"])


def _parser_running(run):
    """build_parser, with `sample` running `run`."""
    real = cli.build_parser

    def build():
        parser = real()
        parser._subparsers._group_actions[0].choices["sample"].set_defaults(run=run)
        return parser
    return build
