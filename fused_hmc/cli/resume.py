"""``fused-hmc sample --resume PATH``: the sampler of a checkpoint, with its C++ target given again
(a file is data: its source is not compiled), and the flags the run had, for the report."""
from __future__ import annotations

import argparse

import torch

from . import user_targets
from .errors import CliError
from .flag_types import is_cpp_path

# With --resume the run's settings come from the checkpoint; only these flags may be given too.
_WITH_RESUME = ("resume", "device", "no_progress", "plot", "plot_params")


# A checkpoint's C++ target is not compiled from it (a file is data): these flags give it again.
_TARGET_WITH_RESUME = ("target", "model", "data", "dim", "gradient", "lanes")


def resumed_sampler(args: argparse.Namespace):
    from ..sampling import Sampler

    for dest, default, flag in args.sample_flags:
        if dest not in _WITH_RESUME + _TARGET_WITH_RESUME and getattr(args, dest) != default:
            raise CliError(flag, "a resumed run takes its settings from the checkpoint (only "
                                 "--device, --no-progress, --plot and --plot-params go with "
                                 "--resume)")
    from ..sampling.stored_target import TargetMismatchError, UntrustedSourceError

    target = _resumed_target(args)
    try:
        return Sampler.from_checkpoint(args.resume, target=target, device=args.device,
                                       progress=not args.no_progress)
    except UntrustedSourceError:
        raise CliError("--resume", f"{args.resume} holds a C++ target, which is not compiled "
                                   "from the checkpoint (a file is data): give it again, with "
                                   "--target FILE.cpp --dim N (and its --data, --gradient, "
                                   "--lanes) or --model NAME") from None
    except TargetMismatchError as exc:
        raise CliError("--model" if args.model is not None else "--target", str(exc)) from None
    except (ValueError, TypeError, OSError) as exc:  # not a checkpoint, or not a readable one
        raise CliError("--resume", str(exc)) from None


def _resumed_target(args: argparse.Namespace):
    """The C++ target --target FILE.cpp or --model gives beside --resume (None without them)."""
    if args.model is None and args.target is None:
        return None
    if args.model is None and not is_cpp_path(args.target):
        raise CliError("--target", "with --resume, gives a C++ target again (FILE.cpp); a "
                                   "Gaussian target is read from the checkpoint")
    user_targets.resolve_flags(args)
    return user_targets.user_target(args).target


def flags_of(args: argparse.Namespace, sampler, res) -> None:
    """The flags a resumed run would have been given, for the report."""
    chains, args.dim = res.final_state.shape
    args.chains, args.dtype = chains, str(res.final_state.dtype).removeprefix("torch.")
    step = sampler.step_size
    args.step_size = float(step) if not isinstance(step, torch.Tensor) else float(step.mean())
    args.leapfrog, args.jitter, args.thin = res.num_leapfrog_steps, res.jitter, res.thin
    w = res.warmup
    args.warmup, args.pooled, args.target_accept = w.num_warmup, w.pooled, w.target_accept
    args.adapt_step_size, args.adapt_mass_matrix = w.adapt_step_size, w.adapt_mass_matrix
    args.adapt_trajectory_length = w.adapt_trajectory_length
    args.mass_estimator = w.mass_estimator
    args.pooled_acceptance = w.pooled_acceptance
    args.max_leapfrog_steps = res.max_leapfrog_steps
