"""``main``: parses the flags, runs the command, and turns what it raises into one line on stderr
and an exit status (2: a bad flag or argument; 1: a build, a file, memory; a bug keeps its
traceback)."""
from __future__ import annotations

import re
import sys

from .errors import CliError, say
from .parser import build_parser
from .user_targets import compile_message

# API names in the sampler's messages, as the flags that set them.
_FLAG_OF = {"num_samples": "--samples", "num_transitions": "--samples", "num_warmup": "--warmup",
            "num_leapfrog_steps": "--leapfrog", "step_size": "--step-size",
            "target_accept": "--target-accept", "adapt_windows": "--adapt-windows",
            "adapt_trajectory_length=True": "--adapt-trajectory-length",
            "max_leapfrog_steps": "--max-leapfrog-steps", "mass_estimator": "--mass-estimator",
            "pooled_acceptance": "--pooled-acceptance",
            "keep_samples=False": "--no-keep-samples", "keep_samples": "--keep-samples"}
_API_NAME = re.compile("|".join(re.escape(k) for k in sorted(_FLAG_OF, key=len, reverse=True)))


def _in_flags(message: str) -> str:
    return _API_NAME.sub(lambda m: _FLAG_OF[m.group(0)], " ".join(message.split()))


# An allocation's failure, as torch's CPU allocator, its CUDA caching allocator and Python say it.
_NO_MEMORY = re.compile(r"can't allocate memory|out of memory|MemoryError", re.IGNORECASE)
_REQUEST = re.compile(r"allocate (\d+) bytes|allocate ([\d.]+ [KMGT]i?B)", re.IGNORECASE)


def _out_of_memory(exc: BaseException) -> str | None:
    """One line for an allocation the machine refused (naming the flags that size the run), or
    None when `exc` is something else."""
    if not (isinstance(exc, MemoryError) or _NO_MEMORY.search(str(exc))):
        return None
    request = _REQUEST.search(str(exc))
    size = ("" if request is None else f" ({float(request[1]) / 1e9:.3g} GB asked for)"
            if request[1] else f" ({request[2]} asked for)")
    return (f"out of memory{size}: the run does not fit on this machine; use fewer --chains, a "
            "smaller --dim, fewer --samples (or a larger --thin), or --no-keep-samples")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad flag (2, after its one-line message)
        return exc.code if isinstance(exc.code, int) else 2
    prog = f"{parser.prog} {args.command}"
    from .._build import CudaUnavailableError, ExtensionBuildError
    from ..cpp_build import CppCompileError
    from ..sampling import SamplesTooLargeError

    try:
        return args.run(args)
    except CppCompileError as exc:  # the compiler's lines, as they are
        print(f"{prog}: error: {compile_message(str(exc), getattr(args, 'target', None))}",
              file=sys.stderr)
        return 1
    except CliError as exc:
        message, status = str(exc), 2
    except CudaUnavailableError as exc:
        message, status = f"argument --device: {exc}", 2
    except (ValueError, TypeError, SamplesTooLargeError) as exc:  # what the checks let through
        message, status = _in_flags(str(exc)), 2
    except (ExtensionBuildError, OSError) as exc:  # the build, or a file the run reads or writes
        message, status = str(exc), 1
    except (RuntimeError, MemoryError) as exc:
        message, status = _out_of_memory(exc), 1
        if message is None:  # a bug: its traceback is what a report needs
            raise
    say(f"{prog}: error: {' '.join(message.split())}")
    return status
