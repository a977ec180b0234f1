"""Command line: ``fused-hmc sample|validate|bench`` (also ``python -m fused_hmc``).

Bad flags end in one line naming the flag and exit status 2, as argparse's own errors do.

The modules, by job (each imports only those above it in this list):

- errors: CliError and the one-line warnings;
- data_file, model_file: --data FILE.json, and --model FILE.py's TorchModel;
- flag_types: argparse types (numbers, --lanes, --target, --model);
- user_targets: --model / --target FILE.cpp as a CppTarget, its start and first line;
- gaussian: a built-in --target from the flags (targets.BUILT_IN), exact acceptance, moments;
- diagnosed_draws, report, named_summary: what a run prints (ESS / R-hat over the first chains);
- resume, ranks: --resume, and the process group under torchrun;
- sample, bench, validate: the commands; parser: the flags; entry: ``main``.
"""
from .entry import main
from .errors import CliError
from .parser import build_parser

__all__ = ["CliError", "build_parser", "main"]
