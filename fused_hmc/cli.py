"""Command line: ``fused-hmc sample|validate|bench`` (also ``python -m fused_hmc``).

Bad flags end in one line naming the flag and exit status 2, as argparse's own errors do.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
import time
from pathlib import Path

import torch

from ._limits import STAN_WINDOWS

# Exact stationary acceptance rate of the default configuration (d=64, L=10, eps=0.1):
# validation.gaussian_exact.gaussian_hmc_exact(64, 0.1, 10).acceptance, kept here to spare the
# default run scipy's start-up (tests/statistical/test_checks.py checks the value).
_DEFAULT_EXACT_ACCEPTANCE = 0.9933021193
# ESS / R-hat look at the first chains and draws of the first dims: chains x draws x dims values
# (about a second per million per estimator), and the draws they need hold chains x draws x dim.
_DIAGNOSTIC_DIMS = 8
_DIAGNOSTIC_VALUES = 500_000
_DIAGNOSTIC_ELEMENTS = 2**24
# Degenerate-run warnings: HMC works well at acceptance 0.6 - 0.9; below this the chains barely
# move. R-hat above 1.1 is Gelman et al.'s classic sign of chains that have not mixed.
_LOW_ACCEPTANCE = 0.1
HIGH_R_HAT = 1.1


class CliError(Exception):
    """A bad flag found after parsing: `flag` and what is wrong with it."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"argument {flag}: {message}")


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


# ---- argument types: each names the rule, and argparse prefixes the flag --------------------

def _parameter_list(text: str) -> list[int | str]:
    """Comma-separated parameter names or indices (digits: an index)."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"must be comma-separated names or indices, got {text!r}")
    return [int(item) if item.isdigit() else item for item in items]


def _integer(minimum: int, maximum: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            upper = f" and <= {maximum}" if maximum is not None else ""
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}{upper}, got {text}")
        return value
    return parse


def _lanes(text: str):
    """--lanes: auto or a power of two from 1 to 32."""
    if text == "auto":
        return text
    if text not in ("1", "2", "4", "8", "16", "32"):
        raise argparse.ArgumentTypeError(f"must be auto, 1, 2, 4, 8, 16 or 32, got {text!r}")
    return int(text)


def _real(low: float, high: float = math.inf, *, low_open: bool = True, high_open: bool = True):
    interval = (("(" if low_open else "[") + f"{low:g}, {high:g}" + (")" if high_open else "]"))

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (math.isfinite(value) and above and below):
            raise argparse.ArgumentTypeError(f"must be a finite number in {interval}, got {text}")
        return value
    return parse


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _device(name: str | None) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        why = ("this torch build has no CUDA support" if torch.version.cuda is None
               else "torch sees no CUDA device")
        raise CliError("--device", f"cuda requested, but {why}; use --device cpu")
    return torch.device(name or default_device())


# ---- sample: target, start, run, report -------------------------------------------------------

def _target(args: argparse.Namespace):
    from .targets import MAX_DENSE_DIM, DenseGaussian, DiagonalGaussian, StandardGaussian

    d = args.dim
    if args.scale is not None and args.target == "standard":
        raise CliError("--scale", "needs --target diagonal or dense (standard has scale 1)")
    if args.correlation is not None and args.target != "dense":
        raise CliError("--correlation", "needs --target dense")
    largest = torch.finfo(getattr(torch, args.dtype)).max
    if abs(args.mean) > largest:  # else the start overflows, blamed on q0
        raise CliError("--mean", f"{args.mean:g} overflows {args.dtype}, the chains' dtype (it "
                                 f"holds magnitudes up to {largest:.3g}); use --dtype float64")
    mu = torch.full((d,), args.mean, dtype=torch.float64)
    if args.target == "standard":
        return StandardGaussian(mu)
    scale = args.scale or [1.0]
    if len(scale) > 2:
        raise CliError("--scale", f"takes one value or two (smallest, largest), got {len(scale)}")
    scale = (torch.full((d,), scale[0], dtype=torch.float64) if len(scale) == 1 else
             torch.logspace(math.log10(scale[0]), math.log10(scale[1]), d, dtype=torch.float64))
    if args.target == "diagonal":
        return DiagonalGaussian(mu, scale)
    if d > MAX_DENSE_DIM:
        raise CliError("--dim", f"--target dense supports dim <= {MAX_DENSE_DIM}, got {d}")
    rho = args.correlation or 0.0
    if d > 1 and not -1 / (d - 1) < rho < 1:
        raise CliError("--correlation", f"must lie in (-1/(dim - 1), 1) = ({-1 / (d - 1):.4g}, 1) "
                       f"for a positive definite covariance, got {rho:g}")
    correlation = torch.full((d, d), rho, dtype=torch.float64).fill_diagonal_(1.0)
    return DenseGaussian.from_covariance(mu, scale[:, None] * correlation * scale[None, :])


def _is_user_target(target) -> bool:
    from .cpp_target import CppTarget

    return isinstance(target, CppTarget)


def _describe(args, target) -> str:
    from .targets import DenseGaussian, DiagonalGaussian

    if _is_user_target(target):
        from .cli_models import describe, is_cpp_path

        path = Path(args.target) if is_cpp_path(getattr(args, "target", None)) else None
        return describe(target, getattr(args, "library_model", None), path)
    mean = float(target.mu[0])
    if isinstance(target, DiagonalGaussian):
        lo, hi = float(target.scale.min()), float(target.scale.max())
        scale = f"scale {lo:g}" if lo == hi else f"scale {lo:g} .. {hi:g}"
        return f"N({mean:g}, diag(scale^2)), {scale}"
    if isinstance(target, DenseGaussian):
        return "dense N(mu, Sigma)" + (f", mean {mean:g}" if mean else "")
    return f"N({mean:g}, I)"


def _start(target, chains: int, dtype: torch.dtype, device: torch.device,
           generator: torch.Generator) -> torch.Tensor:
    """Draws from the target itself, so the chains start at stationarity."""
    from .targets import StandardGaussian

    z = torch.randn(chains, target.dim, device=device, dtype=dtype, generator=generator)
    if isinstance(target, StandardGaussian):
        return z + target.mu.to(dtype=dtype, device=device)
    factor = torch.linalg.cholesky(target.covariance).to(dtype=dtype, device=device)
    return z @ factor.T + target.mu.to(dtype=dtype, device=device)


def _sampler_settings(args: argparse.Namespace, target) -> dict:
    return dict(step_size=args.step_size, num_leapfrog_steps=args.leapfrog, thin=args.thin,
                seed=args.seed, target=target, num_warmup=args.warmup,
                target_accept=args.target_accept, adapt_step_size=args.adapt_step_size,
                adapt_mass_matrix=args.adapt_mass_matrix, pooled=args.pooled or None,
                jitter=args.jitter, adapt_windows=tuple(args.adapt_windows),
                superchains=args.superchains,
                adapt_trajectory_length=args.adapt_trajectory_length,
                max_leapfrog_steps=args.max_leapfrog_steps)


def diagnostic_window(chains: int, kept: int, dim: int,
                       dims: int | None = None) -> tuple[int, int, int]:
    """(chains, draws, dims) that ESS / R-hat look at: the first ones, within the budgets; dims:
    how many quantities are diagnosed (default: the first _DIAGNOSTIC_DIMS of dim)."""
    dims = min(dim, _DIAGNOSTIC_DIMS) if dims is None else dims
    draws = max(1, min(kept, _DIAGNOSTIC_VALUES // (2 * dims), _DIAGNOSTIC_ELEMENTS // (2 * dim)))
    most = min(_DIAGNOSTIC_VALUES // (draws * dims), _DIAGNOSTIC_ELEMENTS // (draws * dim))
    return min(chains, max(2, most)), draws, dims


def diagnostic_draws(q0, settings, res, window) -> torch.Tensor:
    """The first window[0] chains' first window[1] draws: from the result, or (without kept draws)
    by running those chains again with draws kept; chain b of either run is the same philox chain,
    so without pooled adaptation they are the very draws of the main run."""
    from .sampling import Sampler

    chains, draws, _ = window
    if res.samples is not None:
        return res.samples[:chains, :draws]
    if res.samples_path is not None:  # streamed: read those draws from the store
        from .sampling.storage import posterior_draws

        return posterior_draws(res.samples_path, res.num_kept)[:chains, :draws, :]
    first = res.next_transition - res.num_transitions  # the first sampling transition
    thin = res.thin
    transitions = thin * (first // thin + draws) - first  # the fewest that keep `draws`
    settings = dict(settings, superchains=None)  # q0 already holds the superchains' starts
    sub = Sampler(q0[:chains], keep_samples=True, progress=False, **settings).run(transitions)
    return sub.samples


def _exact_acceptance(args, target, res) -> float | None:
    """The exact stationary acceptance rate where one is known: N(mu, I), identity mass, no jitter,
    a fixed L, one step size for every chain (gaussian_exact's isotropic case)."""
    from .targets import StandardGaussian

    step = res.step_size
    if (not isinstance(target, StandardGaussian) or args.jitter
            or res.trajectory_length is not None or not bool((res.inverse_mass == 1).all())
            or not bool((step == step[0]).all())):
        return None
    eps = float(step[0])
    if (args.dim, args.leapfrog, eps) == (64, 10, 0.1):
        return _DEFAULT_EXACT_ACCEPTANCE
    try:
        from .validation.gaussian_exact import gaussian_hmc_exact

        return gaussian_hmc_exact(args.dim, eps, args.leapfrog).acceptance
    except (ImportError, ValueError):
        return None


def figure(value: float) -> str:
    """R-hat as 1.0123, or 4.5e+15 when it has blown up."""
    return f"{value:.4f}" if abs(value) < 10 else f"{value:.3g}"


def warn(message: str) -> None:
    _say(f"fused-hmc sample: warning: {message}")


def _report_run(args, device, target, res, adapting: bool) -> None:
    """The configuration, the transitions, the adapted parameters and the acceptance."""
    eps = f"eps0={args.step_size:g}" if adapting and args.adapt_step_size else \
        f"eps={args.step_size:g}"
    print(f"fused-hmc sample on {device}: {args.chains} chains x {args.dim} dims, "
          f"{_describe(args, target)}, {args.dtype}, L={args.leapfrog}, {eps}"
          + (f", jitter {args.jitter:g}" if args.jitter else "") + f", seed {res.seed}")
    print(f"transitions       {res.num_warmup} warm-up (discarded) + {res.num_transitions} "
          f"sampling, thin {res.thin}: {res.num_kept} draws kept per chain"
          + ("  [interrupted]" if res.interrupted else ""))
    if adapting:
        step, inv_mass = res.step_size.double(), res.inverse_mass.double()
        w = res.warmup
        print(f"warm-up           {'pooled' if w.pooled else 'per-chain'} adaptation toward "
              f"acceptance {w.target_accept:g}: step size {step.mean().item():.4g} (range "
              f"{step.min().item():.4g} .. {step.max().item():.4g}), inverse mass "
              f"{inv_mass.min().item():.4g} .. {inv_mass.max().item():.4g}")
    if res.trajectory_length is not None:
        how = "ChEES-adapted" if res.warmup.adapt_trajectory_length else "given"
        print(f"trajectory        {how} length T = {res.trajectory_length:.4g}: ceil(w T / eps) "
              f"leapfrog steps, w ~ U[0, 1) per chain and transition, at most "
              f"{res.max_leapfrog_steps}")
    sampled = res.num_transitions * res.final_state.shape[0]
    mean = (f", {res.sampling_gradient_evaluations / sampled:.3g} per transition in sampling"
            if sampled else "")
    print(f"gradients         {res.warmup_gradient_evaluations:,} in warm-up + "
          f"{res.sampling_gradient_evaluations:,} in sampling (all chains{mean})")
    exact = _exact_acceptance(args, target, res)
    rate = res.accept_rate.double().mean().item()
    known = ("" if _is_user_target(target) else "; exact at stationarity " + (
        f"{exact:.4f}" if exact is not None else "unknown for this configuration"))
    print(f"acceptance rate   {rate:.4f}  (mean acceptance probability "
          f"{res.mean_accept_prob.double().mean().item():.4f}{known})")
    if rate < _LOW_ACCEPTANCE:
        warn(f"acceptance rate {rate:.4f}: the chains barely move (HMC works well at 0.6 - 0.9); "
              "use a smaller --step-size, or --warmup to adapt it")
    warn_stuck_chains(res)


def warn_stuck_chains(res) -> None:
    """The warning on chains that accepted no transition (sampling.stuck_chains)."""
    from .sampling import stuck_chains

    ids = stuck_chains.stuck_chain_ids(res)
    if ids:
        warn(stuck_chains.describe(res, ids, stuck_chains.remedy(res, cli=True)))


def _report_moments(target, res) -> None:
    """Moments against the target's exact ones (from the Welford statistics, no draws needed)."""
    from . import diagnostics

    if res.num_kept == 0 and not res.interrupted:
        warn(f"--thin {res.thin} keeps none of the {res.num_transitions} sampling transitions: "
              "no moments or diagnostics; use --thin <= --samples")
    elif 0 < res.num_kept < 4:
        warn(f"only {res.num_kept} draws kept per chain: the variance needs 2 and ESS / R-hat 4; "
              "use more --samples or a smaller --thin")
    if res.num_kept >= 2:
        mean, sd = diagnostics.pooled_moments(res.mean.cpu().numpy(), res.var.cpu().numpy(),
                                              res.num_kept)
        truth_sd = target.variance.sqrt().numpy()
        error = (mean - target.mean.numpy()) / truth_sd
        ratio = sd ** 2 / truth_sd ** 2
        print(f"mean              (mean - truth) / sd: average {error.mean():+.4f}, largest "
              f"|.| over dims {abs(error).max():.4f}")
        print(f"variance          variance / truth: average {ratio.mean():.4f}, range over dims "
              f"{ratio.min():.4f} .. {ratio.max():.4f}")
        if not (math.isfinite(error.max()) and math.isfinite(ratio.max())):
            warn("non-finite moments: the chains diverged")


def _report_diagnostics(args, q0, settings, res, adapting: bool) -> None:
    """ESS and R-hat of the first chains, draws and dimensions (diagnostic_window)."""
    from . import diagnostics

    no_draws = res.samples is None and res.samples_path is None
    if res.num_kept >= 4 and no_draws and (res.interrupted or q0 is None):
        print("ESS / R-hat       skipped (" + ("interrupted" if res.interrupted else
                                              "resumed: the start is not in the checkpoint")
              + ", and no draws kept)")
    elif res.num_kept >= 4:
        window = diagnostic_window(args.chains, res.num_kept, args.dim)
        draws = diagnostic_draws(q0, settings, res, window)
        diag = diagnostics.diagnose(draws, max_dims=window[2])
        how = "" if not no_draws else (
            "; those chains run again with draws kept"
            + (", pooled adaptation over them alone" if res.warmup.pooled and adapting else ""))
        print(f"ESS bulk / tail   min {diag.min_ess_bulk:.0f} / {diag.min_ess_tail:.0f}   "
              f"R-hat max {figure(diag.max_r_hat)}  (first {diag.chains} chains x {diag.draws} "
              f"draws, first {window[2]} dims{how})")
        if diag.at_cap(diag.ess_bulk).all() or diag.at_cap(diag.ess_tail).all():  # the minimum
            print(f"                  {diagnostics.cap_note(diag).removeprefix('* ')}")
        if res.superchains is not None:
            report_nested_r_hat(draws, args.chains // res.superchains, window[2])
        warn_high_r_hat(diag.max_r_hat)


def warn_high_r_hat(max_r_hat: float) -> None:
    """The warning on chains that have not mixed (R-hat above HIGH_R_HAT, or not a number)."""
    if not max_r_hat <= HIGH_R_HAT:
        warn(f"R-hat max {figure(max_r_hat)} > {HIGH_R_HAT}: the chains have not mixed (or are "
             "too short to tell); check --step-size, --leapfrog, --warmup, --samples")


def report_nested_r_hat(draws, size: int, dims: int) -> None:
    """Nested R-hat of the whole superchains (of `size` chains) among the chains diagnosed."""
    from . import diagnostics

    whole = draws.shape[0] // size
    if whole < 2:
        print(f"nested R-hat      skipped (the first {draws.shape[0]} chains diagnosed hold fewer "
              f"than 2 whole superchains of {size})")
        return
    nested = diagnostics.diagnose(draws[:whole * size], max_dims=dims, superchains=whole)
    print(f"nested R-hat      max {figure(nested.max_nested_r_hat)}  (first {whole} superchains "
          f"x {size} chains)")


def _report_time(args, res, elapsed: float) -> None:
    total = res.num_warmup + res.num_transitions
    per_s = total / elapsed if elapsed > 0 else float("inf")
    print(f"time              {elapsed:.3f} s ({per_s:,.0f} transitions/s, "
          f"{per_s * args.chains:,.3g} chain-transitions/s"
          + (", warm-up included)" if res.num_warmup else ")"))


def _check_paths(args: argparse.Namespace) -> None:
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


# With --resume the run's settings come from the checkpoint; only these flags may be given too.
_WITH_RESUME = ("resume", "device", "no_progress", "plot", "plot_params")


# A checkpoint's C++ target is not compiled from it (a file is data): these flags give it again.
_TARGET_WITH_RESUME = ("target", "model", "data", "dim", "gradient", "lanes")


def _resumed_sampler(args: argparse.Namespace):
    from .sampling import Sampler

    for dest, default, flag in args.sample_flags:
        if dest not in _WITH_RESUME + _TARGET_WITH_RESUME and getattr(args, dest) != default:
            raise CliError(flag, "a resumed run takes its settings from the checkpoint (only "
                                 "--device, --no-progress, --plot and --plot-params go with "
                                 "--resume)")
    from .sampling.stored_target import TargetMismatchError, UntrustedSourceError

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
    from . import cli_models

    if args.model is None and args.target is None:
        return None
    if args.model is None and not cli_models.is_cpp_path(args.target):
        raise CliError("--target", "with --resume, gives a C++ target again (FILE.cpp); a "
                                   "Gaussian target is read from the checkpoint")
    cli_models.resolve_flags(args)
    return cli_models.user_target(args).target


def _settings_of(args: argparse.Namespace, sampler, res) -> None:
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
    args.max_leapfrog_steps = res.max_leapfrog_steps


def _plot_params(args: argparse.Namespace, target) -> list[int] | None:
    """The dimensions --plot-params names, checked before the run (None without --plot)."""
    from .diagnostics import parameter_indices
    from .plots import DEFAULT_PARAMS

    if args.plot is None:
        if args.plot_params is not None:
            raise CliError("--plot-params", "chooses what --plot draws: give --plot PNG too")
        return None
    try:
        return parameter_indices(args.plot_params, target.dim, getattr(target, "names", None),
                                 default=DEFAULT_PARAMS, argument="--plot-params")
    except ValueError as exc:
        raise CliError("--plot-params", str(exc).removeprefix("--plot-params ")) from None


def _plot(args: argparse.Namespace, res, params: list[int]) -> None:
    if res.num_kept < 2:
        warn(f"--plot skipped: it needs 2 kept draws per chain, the run kept {res.num_kept}")
        return
    res.plot(args.plot, params=params)
    from .plots import parameter_labels

    labels = parameter_labels(res)
    print(f"plot              trace and rank plots of {', '.join(labels[j] for j in params)} "
          f"(first 4 chains) in {args.plot}")


def _sample_ranks(args: argparse.Namespace, ranks) -> int:
    """Under torchrun: this rank's --chains of a run of every rank's (see cli_distributed)."""
    from . import cli_models
    from .sampling import Sampler

    try:
        cli_models.resolve_flags(args)
        dtype, everyone = getattr(torch, args.dtype), ranks.world * args.chains
        if args.library_model is not None or cli_models.is_cpp_path(args.target):
            user = cli_models.user_target(args)
            target = user.target
            q0 = cli_models.start(user, everyone, dtype, ranks.device, args.seed)
            cli_models.check_dim(user, q0)
        else:  # the one-process start of every chain; this rank's rows
            target = _target(args)
            generator = torch.Generator(device=ranks.device).manual_seed(args.seed)
            q0 = _start(target, everyone, dtype, ranks.device, generator)
        sampler = Sampler(q0[ranks.rows(args.chains)], keep_samples=args.keep_samples,
                          progress=not args.no_progress and ranks.rank == 0, out=ranks.store(),
                          process_group=ranks.group, **_sampler_settings(args, target))
        start = time.perf_counter()
        res = sampler.run(args.samples)
        ranks.report(res, time.perf_counter() - start)
        code = 130 if res.interrupted else 0
    finally:
        ranks.close()
    from .sampling.distributed import end_rank_process

    end_rank_process(code)


def _sample(args: argparse.Namespace) -> int:
    from . import cli_distributed
    from .sampling import Sampler

    device = _device(args.device)
    cli_distributed.refuse_unsupported(args)
    _check_paths(args)
    ranks = cli_distributed.from_environment(args)  # torchrun (WORLD_SIZE > 1): the process group
    if ranks is not None:
        return _sample_ranks(args, ranks)
    if args.resume is not None:
        sampler, q0, settings = _resumed_sampler(args), None, None
        target = sampler.target
    else:
        from . import cli_models

        if args.superchains is not None and args.chains % args.superchains:
            raise CliError("--superchains", f"must divide --chains {args.chains} into groups of "
                                            f"equal size, got {args.superchains}")
        cli_models.resolve_flags(args)  # every flag checked before anything compiles
        dtype = getattr(torch, args.dtype)
        if args.library_model is not None or cli_models.is_cpp_path(args.target):
            user = cli_models.user_target(args)
            target = user.target
            q0 = cli_models.start(user, args.chains, dtype, device, args.seed)
            cli_models.check_dim(user, q0)
        else:
            target = _target(args)
            generator = torch.Generator(device=device).manual_seed(args.seed)
            q0 = _start(target, args.chains, dtype, device, generator)
        if args.superchains is not None:  # the start the chains and a diagnostic re-run share
            from .sampling.superchains import superchain_starts

            q0 = superchain_starts(q0, args.superchains)
        settings = _sampler_settings(args, target)
        sampler = Sampler(q0, keep_samples=args.keep_samples, progress=not args.no_progress,
                          out=args.out, checkpoint=args.checkpoint,
                          checkpoint_every=args.checkpoint_every, **settings)
    plot_params = _plot_params(args, target)
    start = time.perf_counter()
    res = sampler.run(None if args.resume is not None else args.samples)  # the device has finished
    elapsed = time.perf_counter() - start
    if args.resume is not None:
        _settings_of(args, sampler, res)
        device = res.final_state.device
    adapting = args.warmup > 0 and (args.adapt_step_size or args.adapt_mass_matrix
                                    or args.adapt_trajectory_length)
    _report_run(args, device, target, res, adapting)
    if _is_user_target(target):
        from .cli_models import report_parameters

        report_parameters(q0, settings, res, getattr(args, "library_model", None))
    else:
        _report_moments(target, res)
        _report_diagnostics(args, q0, settings, res, adapting)
    _report_time(args, res, elapsed)
    if res.samples_path is not None:
        print(f"draws             in {res.samples_path} with the whole result "
              "(fused_hmc.load reads it; a zarr store xarray and ArviZ open)")
    if args.plot is not None:
        _plot(args, res, plot_params)
    return 130 if res.interrupted else 0


# ---- bench ------------------------------------------------------------------------------------

def _bench(args: argparse.Namespace) -> int:
    from .bench import format_table, run_bench

    device = _device(args.device)
    gpu = device.type == "cuda"
    chains = args.chains or (2048 if gpu else 256)
    transitions = args.transitions or (1000 if gpu else 100)
    print(f"fused-hmc bench on {device} (torch {torch.__version__}): {chains} chains x "
          f"{args.dim} dims, N(0, I), L={args.leapfrog}, eps=0.1, {args.dtype}", flush=True)
    rows = run_bench(device, chains, args.dim, args.leapfrog, transitions, args.seconds,
                     getattr(torch, args.dtype))
    print(format_table(rows))
    print("ratio: reference time / fused_hmc time (higher: fused_hmc faster). One transition: "
          "the HMC module against the reference Model, same draws, outputs checked equal; "
          "chained: fused_hmc.sample (moments and acceptance on the device) against the "
          "reference transition in a Python loop. Medians of back-to-back calls.")
    return 0


# ---- validate ---------------------------------------------------------------------------------

def _validate(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from .validation import report
    from .validation.suite import FULL, QUICK, describe_budget, run_suite

    device = _device(args.device)
    config = QUICK if args.quick else FULL
    if args.seed is not None:
        config = replace(config, seed=args.seed)
    print(f"fused_hmc validate: {'quick' if args.quick else 'full'} suite on {device} "
          f"(torch {torch.__version__}), seed {config.seed}", flush=True)
    start = time.perf_counter()
    result = run_suite(device, config=config,
                       progress=lambda name: print(f"  running {name} ...", flush=True))
    print(report.format_table(result.results, details=args.details))
    print(describe_budget(result))
    print(f"time {time.perf_counter() - start:.1f} s ("
          + ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items()) + ")")
    print(report.format_summary(result.results))
    return 0 if result.passed else 1


# ---- the parser -------------------------------------------------------------------------------

def _add_sample_parser(sub) -> None:
    from .cli_model_file import model_kind
    from .cli_models import CPP_SUFFIXES, GAUSSIANS, MODEL_WARMUP, target_kind
    from .models import MODELS

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
    flag("--chains", type=_integer(1), default=2048,
         help="number of chains (under torchrun: per rank, every rank's chains in the report)")
    flag("--dim", type=_integer(1), default=None,
         help="dimension of a Gaussian target (default: 64); required with --target FILE.cpp "
              "(the number of unconstrained parameters the source reads); a --model has its own")
    flag("--samples", type=_integer(1), default=1000,
         help="sampling transitions per chain (draws kept: about samples / thin)")
    flag("--warmup", type=_integer(0), default=None,
         help="warm-up transitions first, adapting the step size (dual averaging toward "
              "--target-accept) and a diagonal inverse mass (Stan's windows); discarded "
              "(default: 0 on a Gaussian, whose chains start at stationarity; "
              f"{MODEL_WARMUP} for a --model or a C++ target)")
    flag("--thin", type=_integer(1), default=1,
         help="keep the state after transition t when (t + 1) %% thin == 0")
    flag("--leapfrog", type=_integer(1, 2**31 - 1), default=10,
         help="leapfrog steps L per transition (with --adapt-trajectory-length: the initial "
              "trajectory length in steps, T0 = L eps0)")
    flag("--step-size", type=_real(0), default=0.1,
         help="leapfrog step size eps (with --warmup: the initial one, eps0)")
    flag("--jitter", type=_real(0, 1, low_open=False), default=0.0,
         help="each transition's step size is drawn in [1 - jitter, 1 + jitter] eps")
    flag("--target", type=target_kind, default=None,
         metavar="{" + ",".join(GAUSSIANS) + ",FILE.cpp}",
         help="standard: N(mean, I); diagonal: N(mean, diag(scale^2)); dense: covariance "
              "scale_i scale_j (correlation rho off the diagonal), dim <= 256; FILE.cpp (or "
              + ", ".join(CPP_SUFFIXES[1:]) + "): your C++ log_density, compiled on "
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
    flag("--lanes", type=_lanes, default="auto",
         help="--target FILE.cpp in the rows form (it defines log_density_rows, a share of the "
              "data's rows: docs/TARGETS.md): the CUDA threads a chain takes, 1, 2, 4, 8, 16 or "
              "32, or auto (chosen from the chains and the GPU); sampling's draws are the same "
              "for any, a warm-up's adaptation not yet to the last bit (default: auto)")
    flag("--mean", type=_real(-math.inf), default=None,
         help="a Gaussian target's mean, every coordinate (default: 0)")
    flag("--scale", type=_real(0), nargs="+", metavar="SCALE", default=None,
         help="standard deviations of a diagonal or dense target: one value for every "
              "coordinate, or two (smallest, largest) spaced logarithmically over the "
              "coordinates (default: 1)")
    flag("--correlation", type=_real(-1, 1), default=None,
         help="correlation rho between every two coordinates of a dense target (default: 0)")
    flag("--target-accept", type=_real(0, 1), default=None,
         help="average acceptance statistic the warm-up aims for (default: 0.8; 0.651, the "
              "ChEES paper's, with --adapt-trajectory-length)")
    flag("--pooled", action="store_true",
         help="warm-up adapts one step size and inverse mass for all chains (else per chain)")
    flag("--adapt-step-size", action=argparse.BooleanOptionalAction, default=True,
         help="whether warm-up adapts the step size")
    flag("--adapt-mass-matrix", action=argparse.BooleanOptionalAction, default=True,
         help="whether warm-up adapts the diagonal inverse mass")
    flag("--adapt-trajectory-length", action="store_true",
         help="warm-up also adapts one trajectory length T for all chains by ChEES (Hoffman, "
              "Radul & Sountsov 2021), pooled with the step size and inverse mass (implies "
              "--pooled); each transition then runs ceil(w T / eps) leapfrog steps, w ~ U[0, 1) "
              "from the chain's stream, at most --max-leapfrog-steps")
    flag("--max-leapfrog-steps", type=_integer(1, 2**31 - 1), default=1000,
         help="the most leapfrog steps a transition runs with --adapt-trajectory-length")
    flag("--adapt-windows", type=_integer(0), nargs=3, default=list(STAN_WINDOWS),
         metavar=("INIT", "BASE", "TERM"),
         help="warm-up windows: initial fast interval, first slow window (then doubling), final "
              "fast interval (Stan's; scaled to 15%% / 75%% / 10%% when they do not fit)")
    flag("--superchains", type=_integer(2), default=None, metavar="K",
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
    flag("--seed", type=_integer(0, 2**64 - 1), default=0,
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
    flag("--checkpoint-every", type=_real(0, low_open=False), default=60.0, metavar="SECONDS",
         help="seconds between checkpoints (0: after every chunk)")
    flag("--resume", metavar="PATH", default=None,
         help="continue the run checkpointed at PATH (killed, or stopped by Ctrl-C) with the "
              "result it would have had; its settings come from the checkpoint, which it keeps "
              "writing (default: a new run)")
    flag("--plot", metavar="PNG", default=None,
         help="write trace and rank plots of the first 4 chains to PNG, one row per parameter "
              "(--plot-params) titled by its name (default: no plot)")
    flag("--plot-params", metavar="P,P,...", type=_parameter_list, default=None,
         help="the parameters --plot draws, comma-separated: names of the sampled (for a "
              "--model, unconstrained) parameters, as the summary names them, or dimension "
              "indices from 0 (default: the first 4)")
    p.set_defaults(run=_sample, sample_flags=[
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
    flag("--chains", type=_integer(1), default=None,
         help="number of chains (default: 2048 on cuda, 256 on cpu)")
    flag("--dim", type=_integer(1), default=64, help="dimension of the target")
    flag("--leapfrog", type=_integer(1, 2**31 - 1), default=10,
         help="leapfrog steps L per transition")
    flag("--transitions", type=_integer(1), default=None,
         help="transitions of the chained workload (default: 1000 on cuda, 100 on cpu)")
    flag("--seconds", type=_real(0), default=2.0,
         help="time spent timing, in all (warm-up calls come on top)")
    flag("--dtype", choices=["float32", "float64"], default="float32", help="the chains' dtype")
    p.set_defaults(run=_bench)


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
    p.add_argument("--seed", type=_integer(0, 2**63 - 1), default=None,
                   help="base seed of the suite's streams (default: the suite's fixed seed)")
    p.add_argument("--details", action="store_true", help="a detail line under every check")
    p.set_defaults(run=_validate)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(prog="fused-hmc", description=__doc__.split("\n")[0],
                     formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_sample_parser(sub)
    _add_validate_parser(sub)
    _add_bench_parser(sub)
    return parser


# API names in the sampler's messages, as the flags that set them.
_FLAG_OF = {"num_samples": "--samples", "num_transitions": "--samples", "num_warmup": "--warmup",
            "num_leapfrog_steps": "--leapfrog", "step_size": "--step-size",
            "target_accept": "--target-accept", "adapt_windows": "--adapt-windows",
            "adapt_trajectory_length=True": "--adapt-trajectory-length",
            "max_leapfrog_steps": "--max-leapfrog-steps",
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
    from ._build import CudaUnavailableError, ExtensionBuildError
    from .cpp_build import CppCompileError
    from .sampling import SamplesTooLargeError

    try:
        return args.run(args)
    except CppCompileError as exc:  # the compiler's lines, as they are
        from .cli_models import compile_message

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
    _say(f"{prog}: error: {' '.join(message.split())}")
    return status


def _say(line: str) -> None:
    """One line to stderr in one write (print writes the newline apart): the ranks of a torchrun
    share stderr, and two ranks' lines must not interleave."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
