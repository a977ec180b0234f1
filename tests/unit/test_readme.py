"""Every code block of README.md and docs/*.md runs on its own, as a user pastes it.

Each ```python block runs in a fresh interpreter, with "cuda" replaced by the device at hand. Each
```bash block runs in bash, minus the lines that rule out by rule: `pip install` lines (the set-up
already happened) and the test command itself (the one CI reads from the test-command marker; it
would run this test again). Any new block is therefore covered by default; blocks marked ```text
or ```sh are sketches and are not run.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = [README] + sorted((REPO / "docs").glob("*.md"))
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)
_TEST_COMMAND = re.compile(r"^<!-- test-command: (.*) -->$", re.M)


def blocks(language: str, files=(README,)) -> list[str]:
    return [code for path in files for lang, code in _BLOCK.findall(path.read_text())
            if lang == language]


def readme_test_command() -> str:
    found = _TEST_COMMAND.findall(README.read_text())
    assert len(found) == 1, "README.md needs exactly one test-command marker"
    return found[0].strip()


def runnable(line: str) -> bool:
    """False only for the two kinds of line this test must not run."""
    command = line.strip()
    return not (command.startswith("pip install") or command == readme_test_command())


def _ids(codes: list[str]) -> list[str]:
    return [f"{i}:{next(line for line in c.splitlines() if line.strip())[:40]}"
            for i, c in enumerate(codes)]


def _documented(language: str) -> list[str]:
    """Every block of the language in README.md and docs/*.md, each once (docs may quote a
    README block)."""
    return list(dict.fromkeys(blocks(language, DOCS)))


def _env() -> dict[str, str]:
    """This interpreter's environment (its TORCH_EXTENSIONS_DIR, so no rebuild) with its bin
    directory first on PATH, where the `fused-hmc` entry point lives."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def _check(done: subprocess.CompletedProcess, code: str) -> None:
    assert done.returncode == 0, f"block failed:\n{code}\n--- stdout\n{done.stdout}\n--- stderr\n" \
                                 f"{done.stderr}"


def test_readme_has_the_blocks_this_test_runs():
    """Guards the extraction itself: the README's API examples and its main command are found."""
    python, bash = blocks("python"), blocks("bash")
    assert len(python) >= 3 and any("fused_hmc.TorchModel(" in c for c in python)
    commands = [line for code in bash for line in code.splitlines() if line.strip()]
    assert any(line.startswith("fused-hmc sample") for line in commands if runnable(line))
    assert any(script.startswith("fused-hmc sample") for script in BASH_SCRIPTS)
    assert not runnable('pip install ".[test]"') and not runnable(readme_test_command())


PYTHON_BLOCKS = _documented("python")


@pytest.mark.parametrize("code", PYTHON_BLOCKS, ids=_ids(PYTHON_BLOCKS))
def test_python_block_runs_on_its_own(code, tmp_path):
    source = code.replace('"cuda"', f'"{DEVICE}"').replace(".cuda()", f'.to("{DEVICE}")')
    done = subprocess.run([sys.executable, "-c", source], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=600)
    _check(done, source)


# Each bash block without the lines ruled out above; blocks with nothing left are not run.
BASH_SCRIPTS = [s for s in ("\n".join(line for line in code.splitlines() if runnable(line))
                            for code in _documented("bash")) if s.strip()]


@pytest.mark.parametrize("script", BASH_SCRIPTS, ids=_ids(BASH_SCRIPTS))
def test_bash_block_runs(script):
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=README.parent,
                          env=_env(), capture_output=True, text=True, timeout=600)
    _check(done, script)
