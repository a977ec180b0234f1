"""``fused-hmc sample`` on users' models: ``--model NAME`` (:mod:`fused_hmc.models`), ``--model
path/to/model.py[:NAME]`` (a TorchModel: model_file.py) and ``--target FILE.cpp --data
FILE.json --dim D`` (a user's C++ log density, docs/TARGETS.md).

The flags become a :class:`fused_hmc.CppTarget` (every combination checked before anything
compiles), and the chains start as Stan's do (each unconstrained coordinate uniform on [-2, 2],
drawn from a CPU generator seeded with --seed, so CPU and CUDA runs start alike).
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch

from .data_file import load_data
from .errors import CliError
from .flag_types import is_cpp_path
from .model_file import FileModel, is_model_file
from .model_file import load as load_model_file

# Warm-up when none is asked for: a model's chains start far from the posterior (Stan's default).
MODEL_WARMUP = 1000
# Stan's initialisation: each unconstrained coordinate uniform on [-INIT_RADIUS, INIT_RADIUS].
INIT_RADIUS = 2.0
# Starting points at which --dim is checked against the coordinates a C++ file reads.
DIM_CHECK_POINTS = 64


class UserTarget(NamedTuple):
    """What a --model or --target FILE.cpp run samples."""

    target: object  # the fused_hmc.CppTarget
    model: object | None  # the fused_hmc.models.Model, or None for a C++ file


def wants_user_target(args) -> bool:
    """Whether the resolved flags name a user's target (--model or --target FILE.cpp)."""
    return args.library_model is not None or is_cpp_path(args.target)


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
        from ..models import MODELS

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
    if args.lanes != "auto" and not cpp:
        raise CliError("--lanes", "goes with --target FILE.cpp (a --model brings its own lanes)")
    args.target = args.target or "standard"
    args.dim = args.dim if args.dim is not None else 64
    args.mean = args.mean if args.mean is not None else 0.0
    args.warmup = args.warmup if args.warmup is not None else (MODEL_WARMUP if user else 0)
    args.dtype = args.dtype or ("float64" if user else "float32")


# ---- the target and its start -----------------------------------------------------------------

def user_target(args) -> UserTarget:
    """The CppTarget a resolved --model or --target FILE.cpp names (not compiled yet)."""
    from ..cpp_target import CppTarget

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
                "--lanes" if "(lanes=" in message or message.startswith("lanes") else
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
    from .. import dim_check

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


