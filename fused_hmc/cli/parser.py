"""The flags of ``fused-hmc sample|validate|bench``: each subcommand's parser, with its defaults
shown in --help and its command (``run``) set as the parsed namespace's ``run``."""
from __future__ import annotations

import argparse
import math

from .. import __version__, targets
from .._limits import STAN_WINDOWS
from ..sampling.warmup import HARMONIC_WINDOWS
from . import bench, sample, validate
from .flag_types import (CPP_SUFFIXES, integer, lanes, model_kind, parameter_list, real,
                         target_kind)
from .user_targets import MODEL_WARMUP

DESCRIPTION = "Command line: ``fused-hmc sample|validate|bench`` (also ``python -m fused_hmc``)."


class _Parser(argparse.ArgumentParser):
    """argparse's parser with errors on one line (usage is one --help away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, except where the help text already says it in words."""

    def _get_help_string(self, action):
        if action.default is None or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def _add_sample_parser(sub) -> None:
    from ..models import MODELS

    p = sub.add_parser("sample", formatter_class=_HelpFormatter,
                       help="run many chains on a Gaussian target, a model of fused_hmc.models or "
                            "your C++ log density, and report acceptance, moments, ESS, R-hat "
                            "and the time",
                       description="Runs many HMC chains and reports acceptance, moments, ESS, "
                                   "R-hat and the time. On a Gaussian --target the chains start "
                                   "from the target itself and the moments are checked against "
                                   "the truth; a --model (fused_hmc.models) or your own C++ "
                                   "(--target FILE.cpp --data FILE.json --dim D: a "
                                   "log_density as docs/TARGETS.md shows; or --model FILE.py[:NAME], a TorchModel) "
                                   "starts as Stan does, each unconstrained "
                                   "parameter uniform in [-2, 2] (from --seed), warms up, and "
                                   "is summarised in named parameters (a model's constrained "
                                   "ones). Degenerate runs end with a warning.")
    flag = p.add_argument
    flag("--chains", type=integer(1), default=2048,
         help="number of chains (under torchrun: per rank, every rank's chains in the report)")
    flag("--dim", type=integer(1), default=None,
         help="dimension of a Gaussian target (default: 64); required with --target FILE.cpp "
              "(the number of unconstrained parameters the source reads); a --model has its own")
    flag("--samples", type=integer(1), default=1000,
         help="sampling transitions per chain (draws kept: about samples / thin)")
    flag("--warmup", type=integer(0), default=None,
         help="warm-up transitions first, adapting the step size (dual averaging toward "
              "--target-accept) and a diagonal inverse mass (Stan's windows); discarded "
              "(default: 0 on a Gaussian, whose chains start at stationarity; "
              f"{MODEL_WARMUP} for a --model or a C++ target)")
    flag("--thin", type=integer(1), default=1,
         help="keep the state after transition t when (t + 1) %% thin == 0")
    flag("--leapfrog", type=integer(1, 2**31 - 1), default=10,
         help="leapfrog steps L per transition (with --adapt-trajectory-length: the initial "
              "trajectory length in steps, T0 = L eps0)")
    flag("--step-size", type=real(0), default=0.1,
         help="leapfrog step size eps (with --warmup: the initial one, eps0)")
    flag("--mass-matrix", choices=("diagonal", "dense"), default="diagonal",
         help="the inverse mass warm-up adapts (Stan's diag_e or dense_e, per chain or "
              "--pooled; docs/MASS_MATRIX.md): dense needs dim <= 128 (default: diagonal)")
    flag("--mass-estimator", choices=("draws", "gradients"), default="draws",
         help="what a slow window's inverse mass is estimated from: the draws (Stan's) or the "
              "draws and the gradients at them (nutpie's; needs --device cpu; "
              "docs/MASS_MATRIX.md) (default: draws)")
    flag("--pooled-acceptance", choices=("mean", "harmonic"), default=None,
         help="what a pooled step size (--pooled, ChEES) is adapted on: the chains' mean "
              "acceptance statistic, or their harmonic mean (divergent transitions left out, as "
              "the ChEES paper and BlackJAX form it: smaller steps, no stranded chains) "
              "(default: harmonic with --adapt-trajectory-length, else mean)")
    flag("--jitter", type=real(0, 1, low_open=False), default=0.0,
         help="each transition's step size is drawn in [1 - jitter, 1 + jitter] eps")
    flag("--target", type=target_kind, default=None,
         metavar="{" + ",".join(targets.BUILT_IN) + ",FILE.cpp}",
         help="".join(f"{name}: {kind.flag_help}; " for name, kind in targets.BUILT_IN.items())
              + "FILE.cpp (or " + ", ".join(CPP_SUFFIXES[1:]) + "): your C++ log_density, "
              "compiled on "
              "first use and cached (docs/TARGETS.md), with --dim and --data "
              "(default: standard)")
    flag("--model", type=model_kind, default=None, metavar="NAME|FILE.py[:NAME]",
         help=f"a model of fused_hmc.models ({', '.join(sorted(MODELS))}) with its data, or a "
              "fused_hmc.TorchModel in a Python file (NAME: a module-level TorchModel or a "
              "function of --data's dict returning one; docs/TORCH_MODELS.md), instead of a "
              "--target; the summary is in its named, constrained parameters (default: none)")
    flag("--data", metavar="FILE.json", default=None,
         help="the data of --target FILE.cpp (read in C++ as data.<name>) or of a --model "
              "FILE.py's function (its dict argument): a JSON object of "
              "name -> number or (nested) list of numbers. A list of JSON integers only becomes "
              "an int64 tensor (int64_t in C++; write 28.0 for a real), any other list a tensor "
              "of the chains' dtype; an integer an int64_t, any other number a scalar of the "
              "chains' dtype (default: no data)")
    flag("--gradient", action="store_true",
         help="use the target's hand-written gradient (log_density_and_gradient: a --model that "
              "has one, or defined in FILE.cpp) instead of dual numbers")
    flag("--lanes", type=lanes, default="auto",
         help="--target FILE.cpp in the rows form (it defines log_density_rows, a share of the "
              "data's rows: docs/TARGETS.md): the CUDA threads a chain takes, a power of two from 1 "
              "to 32 (one warp) or to 256 (a block a chain) for data of 65,536 rows or more "
              "(docs/LANES.md), or auto (chosen from the chains, the GPU and the rows); "
              "sampling's draws are the same for any, a warm-up's adaptation not yet to the last "
              "bit (default: auto)")
    flag("--mean", type=real(-math.inf), default=None,
         help="a Gaussian target's mean, every coordinate (default: 0)")
    flag("--scale", type=real(0), nargs="+", metavar="SCALE", default=None,
         help="standard deviations of a diagonal or dense target: one value for every "
              "coordinate, or two (smallest, largest) spaced logarithmically over the "
              "coordinates (default: 1)")
    flag("--correlation", type=real(-1, 1), default=None,
         help="correlation rho between every two coordinates of a dense target (default: 0)")
    flag("--target-accept", type=real(0, 1), default=None,
         help="average acceptance statistic the warm-up aims for (default: 0.8; 0.651, the "
              "ChEES paper's, with --adapt-trajectory-length)")
    flag("--pooled", action=argparse.BooleanOptionalAction, default=None,
         help="warm-up adapts one step size and inverse mass for all chains, or one per chain "
              "(default: per chain, or pooled with --adapt-trajectory-length)")
    flag("--adapt-step-size", action=argparse.BooleanOptionalAction, default=True,
         help="whether warm-up adapts the step size")
    flag("--adapt-mass-matrix", action=argparse.BooleanOptionalAction, default=True,
         help="whether warm-up adapts the diagonal inverse mass")
    flag("--adapt-trajectory-length", action="store_true",
         help="warm-up also adapts one trajectory length T for all chains by ChEES (Hoffman, "
              "Radul & Sountsov 2021), pooled with the step size and inverse mass (with "
              "--no-pooled, on the CPU: beside each chain's own); each transition then runs ceil(w T / eps) leapfrog steps, w ~ U[0, 1) "
              "from the chain's stream, at most --max-leapfrog-steps")
    flag("--max-leapfrog-steps", type=integer(1, 2**31 - 1), default=1000,
         help="the most leapfrog steps a transition runs with --adapt-trajectory-length")
    flag("--adapt-windows", type=integer(0), nargs=3, default=None,
         metavar=("INIT", "BASE", "TERM"),
         help="warm-up windows: initial fast interval, first slow window (then doubling), final "
              "fast interval, scaled to 15%% / 75%% / 10%% when they do not fit (default: "
              f"Stan's {' '.join(map(str, STAN_WINDOWS))}; {' '.join(map(str, HARMONIC_WINDOWS))} "
              "for a pooled step size on the harmonic mean, --adapt-trajectory-length's default, "
              "from --warmup 400 on)")
    flag("--superchains", type=integer(2), default=None, metavar="K",
         help="run the chains as K superchains of --chains / K chains each, every chain of a "
              "superchain started from one point (its first chain's start), and report their "
              "nested R-hat (Margossian et al. 2024) besides R-hat (default: none; each chain "
              "starts from its own point)")
    flag("--dtype", choices=["float32", "float64"], default=None,
         help="the chains' dtype (default: float32 on a Gaussian; float64 for a --model or a C++ "
              "target, as Stan computes)")
    flag("--keep-samples", action=argparse.BooleanOptionalAction, default=True,
         help="keep every draw (chains x samples / thin x dim values on the device); without, "
              "only the moments and acceptance are kept and ESS / R-hat run the first chains "
              "again with draws kept")
    flag("--seed", type=integer(0, 2**64 - 1), default=0,
         help="seeds the start (drawn from a Gaussian target; uniform in [-2, 2] for a model) "
              "and keys the philox stream")
    flag("--device", choices=["cpu", "cuda"], default=None,
         help="where the chains run (default: cuda when torch sees a GPU, else cpu; with "
              "--resume, the checkpoint's device)")
    flag("--no-progress", action="store_true", help="no progress bar")
    flag("--out", metavar="PATH", default=None,
         help="stream the kept draws to a new zarr store at PATH as they come, instead of "
              "keeping them in memory (a run may keep more than memory holds); at the end the "
              "store holds the whole result: fused_hmc.load(PATH), or xarray / ArviZ; under "
              "torchrun PATH is a directory of each rank's store, PATH/rank<r>, and "
              "PATH/summary.json, every chain's statistics (default: draws in memory)")
    flag("--checkpoint", metavar="PATH", default=None,
         help="write the sampler's state to the file PATH every --checkpoint-every seconds, at "
              "the end and on Ctrl-C; --resume PATH continues from it exactly (default: none)")
    flag("--checkpoint-every", type=real(0, low_open=False), default=60.0, metavar="SECONDS",
         help="seconds between checkpoints (0: after every chunk)")
    flag("--resume", metavar="PATH", default=None,
         help="continue the run checkpointed at PATH (killed, or stopped by Ctrl-C) with the "
              "result it would have had; its settings come from the checkpoint, which it keeps "
              "writing (default: a new run)")
    flag("--plot", metavar="PNG", default=None,
         help="write trace and rank plots of the first 4 chains to PNG, one row per parameter "
              "(--plot-params) titled by its name (default: no plot)")
    flag("--plot-params", metavar="P,P,...", type=parameter_list, default=None,
         help="the parameters --plot draws, comma-separated: names of the sampled (for a "
              "--model, unconstrained) parameters, as the summary names them, or dimension "
              "indices from 0 (default: the first 4)")
    p.set_defaults(run=sample.run, sample_flags=[
        (a.dest, a.default, a.option_strings[-1 if a.default is True else 0])
        for a in p._actions if a.option_strings and a.dest != "help"])


def _add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", formatter_class=_HelpFormatter,
                       help="a quick side-by-side benchmark against the pure-torch reference on "
                            "this machine (a few seconds)",
                       description="Times fused_hmc against the pure-torch reference "
                                   "(fused_hmc/reference.py) on N(0, I): one transition, and a "
                                   "chain of transitions, and prints a table with the ratios. "
                                   "The full suite against every anchor is benchmarks/run.py.")
    flag = p.add_argument
    flag("--device", choices=["cpu", "cuda"], default=None,
         help="where to run (default: cuda when torch sees a GPU, else cpu)")
    flag("--chains", type=integer(1), default=None,
         help="number of chains (default: 2048 on cuda, 256 on cpu)")
    flag("--dim", type=integer(1), default=64, help="dimension of the target")
    flag("--leapfrog", type=integer(1, 2**31 - 1), default=10,
         help="leapfrog steps L per transition")
    flag("--transitions", type=integer(1), default=None,
         help="transitions of the chained workload (default: 1000 on cuda, 100 on cpu)")
    flag("--seconds", type=real(0), default=2.0,
         help="time spent timing, in all (warm-up calls come on top)")
    flag("--dtype", choices=["float32", "float64"], default="float32", help="the chains' dtype")
    p.set_defaults(run=bench.run)


def _add_validate_parser(sub) -> None:
    p = sub.add_parser("validate", formatter_class=_HelpFormatter,
                       help="statistical validation of the sampler; exit 1 on any failure (a "
                            "correct sampler fails < once per 10^6 runs)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="where the suite runs (default: cuda when torch sees a GPU, else cpu)")
    p.add_argument("--quick", action="store_true",
                   help="smaller samples, with thresholds derived for them: about 45 s of CPU "
                        "time instead of 100 s (about 25 s on 2 idle CPU cores); the full suite "
                        "takes 2 s on an H200")
    p.add_argument("--seed", type=integer(0, 2**63 - 1), default=None,
                   help="base seed of the suite's streams (default: the suite's fixed seed)")
    p.add_argument("--details", action="store_true", help="a detail line under every check")
    p.set_defaults(run=validate.run)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fused-hmc", description=DESCRIPTION,
                     formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_sample_parser(sub)
    _add_validate_parser(sub)
    _add_bench_parser(sub)
    return parser
