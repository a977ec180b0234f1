"""How the CLI fails and warns: a bad flag (CliError, exit status 2) and one-line messages."""
from __future__ import annotations

import sys


class CliError(Exception):
    """A bad flag found after parsing: `flag` and what is wrong with it."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"argument {flag}: {message}")


def say(line: str) -> None:
    """One line to stderr in one write (print writes the newline apart): the ranks of a torchrun
    share stderr, and two ranks' lines must not interleave."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    say(f"fused-hmc sample: warning: {message}")
