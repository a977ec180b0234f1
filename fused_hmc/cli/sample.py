"""``fused-hmc sample``: the target and its start from the flags, the run (one process, a
torchrun rank, or a resumed checkpoint), then the report."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from . import gaussian, named_summary, ranks, report, resume, user_targets
from .errors import CliError
from .flag_types import device as device_of


def sampler_options(args: argparse.Namespace, target) -> dict:
    """The Sampler keyword arguments (sampling.settings.SamplerOptions) the flags give."""
    return dict(step_size=args.step_size, num_leapfrog_steps=args.leapfrog, thin=args.thin,
                seed=args.seed, target=target, num_warmup=args.warmup,
                target_accept=args.target_accept, adapt_step_size=args.adapt_step_size,
                adapt_mass_matrix=args.adapt_mass_matrix, pooled=args.pooled,
                jitter=args.jitter, mass_matrix=args.mass_matrix,
                mass_estimator=args.mass_estimator, pooled_acceptance=args.pooled_acceptance,
                adapt_windows=None if args.adapt_windows is None else tuple(args.adapt_windows),
                superchains=args.superchains,
                adapt_trajectory_length=args.adapt_trajectory_length,
                max_leapfrog_steps=args.max_leapfrog_steps)


def check_paths(args: argparse.Namespace) -> None:
    """The files a run will write or read, checked before it starts (not after an hour)."""
    for flag, path in (("--out", args.out), ("--checkpoint", args.checkpoint),
                       ("--plot", args.plot)):
        if path is not None and not Path(path).absolute().parent.is_dir():
            raise CliError(flag, f"the directory {Path(path).absolute().parent} does not exist")
    if args.out is not None and Path(args.out).exists():
        raise CliError("--out", f"{args.out} exists; give a new path (a zarr store is made there)")
    if args.resume is not None and not Path(args.resume).is_file():
        raise CliError("--resume", f"no checkpoint at {args.resume}")
    if not args.keep_samples:
        for flag in ("--out", "--plot"):
            if getattr(args, flag[2:]) is not None:
                raise CliError(flag, "needs the draws: it cannot go with --no-keep-samples")


def _sample_ranks(args: argparse.Namespace, launch: ranks.Ranks) -> int:
    """Under torchrun: this rank's --chains of a run of every rank's (see ranks.py)."""
    from ..sampling import Sampler

    try:
        user_targets.resolve_flags(args)
        target, q0 = target_and_start(args, launch.world * args.chains, launch.device)
        sampler = Sampler(q0[launch.rows(args.chains)], keep_samples=args.keep_samples,
                          progress=not args.no_progress and launch.rank == 0, out=launch.store(),
                          process_group=launch.group, **sampler_options(args, target))
        start = time.perf_counter()
        res = sampler.run(args.samples)
        launch.report(res, time.perf_counter() - start)
        code = 130 if res.interrupted else 0
    finally:
        launch.close()
    from ..sampling.distributed import end_rank_process

    end_rank_process(code)


def run(args: argparse.Namespace) -> int:
    """The sample command: its exit status (0, or 130 when Ctrl-C stopped the run)."""
    from ..sampling import Sampler

    device = device_of(args.device)
    ranks.refuse_unsupported(args)
    check_paths(args)
    launch = ranks.from_environment(args)  # torchrun (WORLD_SIZE > 1): the process group
    if launch is not None:
        return _sample_ranks(args, launch)
    if args.resume is not None:
        sampler, q0, options = resume.resumed_sampler(args), None, None
        target = sampler.target
    else:
        if args.superchains is not None and args.chains % args.superchains:
            raise CliError("--superchains", f"must divide --chains {args.chains} into groups of "
                                            f"equal size, got {args.superchains}")
        user_targets.resolve_flags(args)  # every flag checked before anything compiles
        target, q0 = target_and_start(args, args.chains, device)
        if args.superchains is not None:  # the start the chains and a diagnostic re-run share
            from ..sampling.superchains import superchain_starts

            q0 = superchain_starts(q0, args.superchains)
        options = sampler_options(args, target)
        sampler = Sampler(q0, keep_samples=args.keep_samples, progress=not args.no_progress,
                          out=args.out, checkpoint=args.checkpoint,
                          checkpoint_every=args.checkpoint_every, **options)
    plot_params = report.plot_params(args, target)
    start = time.perf_counter()
    res = sampler.run(None if args.resume is not None else args.samples)  # the device has finished
    elapsed = time.perf_counter() - start
    if args.resume is not None:
        resume.flags_of(args, sampler, res)
        device = res.final_state.device
    adapting = args.warmup > 0 and (args.adapt_step_size or args.adapt_mass_matrix
                                    or args.adapt_trajectory_length)
    report.report_run(args, device, target, res, adapting)
    if report.is_user_target(target):
        named_summary.report_parameters(q0, options, res, getattr(args, "library_model", None))
    else:
        gaussian.report_moments(target, res)
        report.report_diagnostics(args, q0, options, res, adapting)
    report.report_time(args, res, elapsed)
    if res.samples_path is not None:
        print(f"draws             in {res.samples_path} with the whole result "
              "(fused_hmc.load reads it; a zarr store xarray and ArviZ open)")
    if args.plot is not None:
        report.plot(args, res, plot_params)
    return 130 if res.interrupted else 0


def target_and_start(args: argparse.Namespace, chains: int, device: torch.device):
    """(the target the resolved flags name, the start of `chains` chains on `device`): a user's
    target starts as Stan's chains do (its --dim checked there), a built-in one at stationarity."""
    dtype = getattr(torch, args.dtype)
    if user_targets.wants_user_target(args):
        user = user_targets.user_target(args)
        q0 = user_targets.start(user, chains, dtype, device, args.seed)
        user_targets.check_dim(user, q0)
        return user.target, q0
    target = gaussian.target_of(args)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    return target, target.draw(chains, dtype, device, generator)
