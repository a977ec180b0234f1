"""``fused-hmc sample`` on users' models: ``--model NAME`` (:mod:`fused_hmc.models`), ``--model
path/to/model.py[:NAME]`` (a TorchModel: cli_model_file.py) and ``--target FILE.cpp --data
FILE.json --dim D`` (a user's C++ log density, docs/TARGETS.md).

The flags become a :class:`fused_hmc.CppTarget` (every combination checked before anything
compiles), the chains start as Stan's do (each unconstrained coordinate uniform on [-2, 2], drawn
from a CPU generator seeded with --seed, so CPU and CUDA runs start alike), and the summary is in
named parameters: a model's constrained ones (Model.constrain on the draws), else the target's
names or x[0], x[1], ...
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from .cli import CliError
from .cli_model_file import FileModel, is_model_file
from .cli_model_file import load as load_model_file

CPP_SUFFIXES = (".cpp", ".cc", ".cxx")
GAUSSIANS = ("standard", "diagonal", "dense")
# Warm-up when none is asked for: a model's chains start far from the posterior (Stan's default).
MODEL_WARMUP = 1000
# Stan's initialisation: each unconstrained coordinate uniform on [-INIT_RADIUS, INIT_RADIUS].
INIT_RADIUS = 2.0
# Starting points at which --dim is checked against the coordinates a C++ file reads.
DIM_CHECK_POINTS = 64
# Constrained moments go over the draws in blocks of chains of about this many values.
_BLOCK_VALUES = 2**22


def is_cpp_path(text: str | None) -> bool:
    return text is not None and text.lower().endswith(CPP_SUFFIXES)


def target_kind(text: str) -> str:
    """argparse type of --target: a Gaussian's name or a C++ file's path."""
    import argparse

    if text in GAUSSIANS or is_cpp_path(text):
        return text
    raise argparse.ArgumentTypeError(
        f"must be one of {', '.join(GAUSSIANS)} or a C++ file ending in "
        f"{', '.join(CPP_SUFFIXES)}, got {text!r}")


class UserTarget(NamedTuple):
    """What a --model or --target FILE.cpp run samples."""

    target: object  # the fused_hmc.CppTarget
    model: object | None  # the fused_hmc.models.Model, or None for a C++ file


def resolve_flags(args) -> None:
    """Refuses flag combinations that make no sense and fills in the defaults that depend on the
    kind of target (dim, warm-up, dtype, mean). Compiles nothing."""
    model_name, cpp = args.model, is_cpp_path(args.target)
    if model_name is not None and args.target is not None:
        raise CliError("--target", f"--model {model_name} is the target: give --model or "
                                   "--target, not both")
    user = model_name is not None or cpp
    if user:
        for flag, value in (("--mean", args.mean), ("--scale", args.scale),
                            ("--correlation", args.correlation)):
            if value is not None:
                raise CliError(flag, "describes a Gaussian --target; a --model or C++ target "
                                     "has none")
    else:
        if args.data is not None:
            raise CliError("--data", "needs --target FILE.cpp (a --model brings its own data)")
        if args.gradient:
            raise CliError("--gradient", "needs --model or --target FILE.cpp (the Gaussian "
                                         "targets' gradients are built in)")
    if model_name is not None and is_model_file(model_name):
        if args.dim is not None:
            raise CliError("--dim", f"--model {model_name}: the TorchModel's params give its "
                                    "dimension; leave --dim out")
        if args.gradient:
            raise CliError("--gradient", "a TorchModel's gradient is always compiled (reverse "
                                         "mode); leave --gradient out")
        if args.data is not None and not Path(args.data).is_file():
            raise CliError("--data", f"no file {args.data}")
        model = load_model_file(model_name, None if args.data is None else load_data(args.data))
        args.dim, args.library_model = model.dim, model
    elif model_name is not None:
        from .models import MODELS

        model = MODELS[model_name]()
        if args.dim is not None:
            raise CliError("--dim", f"--model {model_name} has its own dimension "
                                    f"({model.dim}); leave --dim out")
        if args.data is not None:
            raise CliError("--data", f"--model {model_name} brings its own data; --data goes "
                                     "with --target FILE.cpp")
        if args.gradient and model.gradient_source is None:
            raise CliError("--gradient", f"--model {model_name} has no hand-written gradient; "
                                         "leave --gradient out (exact gradients by dual numbers)")
        args.dim, args.library_model = model.dim, model
    else:
        args.library_model = None
    if cpp:
        if args.dim is None:
            raise CliError("--dim", "is required with --target FILE.cpp: the number of "
                                    "unconstrained parameters x[0 .. dim) the source reads")
        if not Path(args.target).is_file():
            raise CliError("--target", f"no file {args.target}")
        if args.data is not None and not Path(args.data).is_file():
            raise CliError("--data", f"no file {args.data}")
    if args.lanes != 1 and not cpp:
        raise CliError("--lanes", "goes with --target FILE.cpp (a --model brings its own lanes)")
    args.target = args.target or "standard"
    args.dim = args.dim if args.dim is not None else 64
    args.mean = args.mean if args.mean is not None else 0.0
    args.warmup = args.warmup if args.warmup is not None else (MODEL_WARMUP if user else 0)
    args.dtype = args.dtype or ("float64" if user else "float32")


# ---- --data FILE.json -----------------------------------------------------------------------

def _leaves(value, where: str):
    """Every number of a (nested) JSON list; raises on anything else."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{where}[{i}]")
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "a bool" if isinstance(value, bool) else f"{type(value).__name__} {value!r}"
        raise ValueError(f"{where} is {kind}; data values are numbers or lists of numbers")
    else:
        yield value


def data_value(name: str, value):
    """A JSON value as CppTarget data: an integer -> int (int64_t in C++), another number ->
    float (the chains' dtype), a list of integers only -> int64 tensor, any other list of numbers
    -> float64 tensor (nested lists: a tensor of that shape)."""
    leaves = list(_leaves(value, name))
    if not isinstance(value, list):
        return value
    dtype = torch.int64 if all(isinstance(v, int) for v in leaves) and leaves else torch.float64
    try:
        return torch.tensor(value, dtype=dtype)
    except (ValueError, TypeError, RuntimeError, OverflowError) as exc:
        raise ValueError(f"{name} is not a rectangular list of numbers ({exc})") from None


def load_data(path: str) -> dict:
    """The --data file as CppTarget's data dict, checked as CppTarget checks it."""
    from . import cpp_data

    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError("--data", f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CliError("--data", f"{path} is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise CliError("--data", f"{path} must hold a JSON object of name -> number or list of "
                                 f"numbers, got a JSON {type(raw).__name__}")
    try:
        data = {name: data_value(name, value) for name, value in raw.items()}
        cpp_data.prepare(data)  # names, finiteness, ranges: CppTarget's own checks
    except (ValueError, TypeError) as exc:
        raise CliError("--data", f"{path}: {exc}") from None
    return data


# ---- the target and its start -----------------------------------------------------------------

def user_target(args) -> UserTarget:
    """The CppTarget a resolved --model or --target FILE.cpp names (not compiled yet)."""
    from .cpp_target import CppTarget

    model = args.library_model
    if model is not None:
        return UserTarget(model.target(gradient=args.gradient), model)
    path = Path(args.target)
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError("--target", f"cannot read {path}: {exc}") from None
    data = load_data(args.data) if args.data is not None else None
    try:
        # The text, not the path: the build is keyed by the source's content, not its file name.
        target = CppTarget(source, args.dim, data=data, gradient=args.gradient,
                           lanes=args.lanes)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        flag = ("--data" if message.startswith("data") else
                "--gradient" if args.gradient and "log_density_and_gradient" in message else
                "--lanes" if "(lanes=" in message else
                "--target")
        raise CliError(flag, f"{path}: {message}") from None
    return UserTarget(target, None)


def start(user: UserTarget, chains: int, dtype: torch.dtype, device: torch.device,
          seed: int) -> torch.Tensor:
    """Stan's initialisation: [chains, dim] uniform on [-2, 2] from a CPU generator seeded with
    `seed` (a model's own Model.initial_point)."""
    generator = torch.Generator().manual_seed(seed)
    if user.model is not None:
        return user.model.initial_point(chains, dtype=dtype, device=device, generator=generator)
    u = torch.rand(chains, user.target.dim, dtype=torch.float64, generator=generator)
    return ((2 * u - 1) * INIT_RADIUS).to(dtype=dtype, device=device)


def check_dim(user: UserTarget, q0: torch.Tensor) -> None:
    """--dim against the coordinates a C++ file reads (dim_check.py), at the starting points
    (compiles the target; a --model's dim is its own)."""
    from . import dim_check

    if user.model is not None:
        return
    target = user.target
    points = q0[:DIM_CHECK_POINTS]  # Stan's random starts: distinct points, not the mode
    if dim_check.reads_beyond_dim(target, points):
        raise CliError("--dim", dim_check.beyond_message(target.dim, "--dim"))
    _, gradient = target.log_density_and_gradient(points)
    unused = dim_check.unused_coordinates(gradient)
    if unused:
        raise CliError("--dim", dim_check.unused_message(unused, target.dim, gradient.shape[0],
                                                         "--dim"))


def describe(target, model, path: Path | None) -> str:
    """The target in the run's first line."""
    how = "hand-written gradient" if target.has_gradient else "dual-number gradient"
    if isinstance(model, FileModel):
        return f"TorchModel {model.name} (reverse-mode gradient compiled from torch)"
    if model is not None:
        source = f", posteriordb {model.posteriordb}" if model.posteriordb else ""
        return f"model {model.name} ({how}{source})"
    data = ", ".join(f.name for f in target._fields)
    what = f"C++ {path.name}" if path is not None else "C++ target"
    return f"{what} (data: {data or 'none'}; {how})"


def compile_message(message: str, path: str | None) -> str:
    """A CppCompileError's message with the source's lines named by the user's file."""
    return message.replace("<source>", path) if is_cpp_path(path) else message


# ---- the summary --------------------------------------------------------------------------------

def parameter_names(target, model) -> list[str]:
    if model is not None:
        return list(model.constrained_names)
    return list(target.names) if target.names is not None else [
        f"x[{k}]" for k in range(target.dim)]


def _as_tensor(draws) -> torch.Tensor:
    if isinstance(draws, torch.Tensor):
        return draws.detach().to(device="cpu", dtype=torch.float64)
    return torch.as_tensor(np.asarray(draws), dtype=torch.float64)


def constrained_moments(model, draws, chains: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of the model's constrained parameters over every draw of `chains` chains of
    `draws` ([chains, kept, dim]: a tensor, or a store's DrawsOnDisk), a block of chains at a
    time (Chan et al.'s pairwise update merges the blocks' means and sums of squares)."""
    kept, dim = draws.shape[1], draws.shape[2]
    block = max(1, _BLOCK_VALUES // max(1, kept * dim))
    count, mean, m2 = 0, None, None
    for a in range(0, chains, block):
        values = model.constrained_values(_as_tensor(draws[a:a + block, :, :]))
        values = values.reshape(-1, values.shape[-1])
        n = values.shape[0]
        block_mean = values.mean(0)
        block_m2 = ((values - block_mean) ** 2).sum(0)
        if mean is None:
            count, mean, m2 = n, block_mean, block_m2
            continue
        delta, total = block_mean - mean, count + n
        mean = mean + delta * (n / total)
        m2 = m2 + block_m2 + delta ** 2 * (count * n / total)
        count = total
    sd = (m2 / (count - 1)).sqrt() if count > 1 else torch.full_like(mean, math.nan)
    return mean.numpy(), sd.numpy()


def report_parameters(q0, settings, res, model) -> None:
    """The summary table in named parameters (a model's constrained ones when `model` is given):
    mean and sd over every chain and draw, ESS / R-hat over the first chains and draws
    (cli.diagnostic_window's budget). q0, settings: the run's, to rerun the first chains when no
    draws were kept (None when resumed)."""
    from . import cli, diagnostics

    target = res.target
    names = parameter_names(target, model)
    rows = min(len(names), diagnostics.SUMMARY_ROWS)
    if res.num_kept == 0 and not res.interrupted:
        cli.warn(f"--thin {res.thin} keeps none of the {res.num_transitions} sampling "
                  "transitions: no summary; use --thin <= --samples")
        return
    if res.num_kept < 2:
        return
    no_draws = res.samples is None and res.samples_path is None
    can_draw = not no_draws or not (res.interrupted or q0 is None)
    if model is not None and not can_draw:  # constrained values need draws: show unconstrained
        names, model = list(model.names), None
        rows = min(len(names), diagnostics.SUMMARY_ROWS)
    chains = res.final_state.shape[0]
    window = cli.diagnostic_window(chains, res.num_kept, target.dim, rows)
    draws = cli.diagnostic_draws(q0, settings, res, window) if can_draw and (
        res.num_kept >= 4 or model is not None) else None
    if model is None:
        mean, sd = diagnostics.pooled_moments(res.mean.cpu().numpy(), res.var.cpu().numpy(),
                                              res.num_kept)
        over = f"all {chains} chains x {res.num_kept} draws"
        values = None if draws is None else _as_tensor(draws)[:, :, :rows].numpy()
    else:
        constrained = model.constrained_values(_as_tensor(draws)).numpy()
        if no_draws:  # only the window's chains have draws
            flat = constrained.reshape(-1, constrained.shape[-1])
            mean, sd = flat.mean(0), flat.std(0, ddof=1)
            over = f"the first {window[0]} chains x {window[1]} draws, run again with draws kept"
        else:
            full = res.samples if res.samples is not None else _store_draws(res)
            mean, sd = constrained_moments(model, full, chains)
            over = f"all {chains} chains x {res.num_kept} draws"
        values = constrained[:, :, :rows]
    which = f"{model.name}'s constrained parameters: " if model is not None else ""
    print(f"parameters        {which}mean and sd over {over}"
          + (f"; ESS / R-hat over the first {window[0]} chains x {window[1]} draws"
             if values is not None and res.num_kept >= 4 else ""))
    diag = None
    if values is not None and res.num_kept >= 4:
        diag = diagnostics.diagnose(values)
    missing = ("ESS / R-hat need 4 draws per chain" if res.num_kept < 4 else
               "ESS / R-hat skipped (" + ("interrupted" if res.interrupted else
                                          "resumed: the start is not in the checkpoint")
               + ", and no draws kept)")
    print(diagnostics.format_table(mean, sd, diag, range(rows), missing=missing, chains=chains,
                                   names=names))
    if diag is not None and res.superchains is not None:
        cli.report_nested_r_hat(values, chains // res.superchains, rows)
    if diag is not None and not diag.max_r_hat <= cli.HIGH_R_HAT:
        cli.warn(f"R-hat max {cli.figure(diag.max_r_hat)} > {cli.HIGH_R_HAT}: the chains have "
                  "not mixed (or are too short to tell); check --warmup, --samples, --step-size, "
                  "--leapfrog")
    if not np.isfinite(mean).all():
        cli.warn("non-finite means: the chains diverged")


def _store_draws(res):
    from .sampling.storage import posterior_draws

    return posterior_draws(res.samples_path, res.num_kept)
