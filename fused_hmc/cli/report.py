"""What ``fused-hmc sample`` prints about a run: its configuration, acceptance, gradients, ESS /
R-hat of a built-in target's first chains, the time and the plot, with warnings on degenerate
runs (chains that barely move, never move, or have not mixed)."""
from __future__ import annotations

import argparse
from pathlib import Path

from . import gaussian, user_targets
from .diagnosed_draws import diagnostic_draws, diagnostic_window
from .errors import CliError, warn
from .flag_types import is_cpp_path

# Degenerate-run warnings: HMC works well at acceptance 0.6 - 0.9; below this the chains barely
# move. R-hat above 1.1 is Gelman et al.'s classic sign of chains that have not mixed.
_LOW_ACCEPTANCE = 0.1
HIGH_R_HAT = 1.1


def figure(value: float) -> str:
    """R-hat as 1.0123, or 4.5e+15 when it has blown up."""
    return f"{value:.4f}" if abs(value) < 10 else f"{value:.3g}"


def is_user_target(target) -> bool:
    """A user's target (a CppTarget or TorchModel), not a built-in one."""
    from ..targets import is_built_in

    return not is_built_in(target)


def describe(args, target) -> str:
    """The target in the run's first line."""
    if not is_user_target(target):
        return target.describe()
    path = Path(args.target) if is_cpp_path(getattr(args, "target", None)) else None
    return user_targets.describe(target, getattr(args, "library_model", None), path)


def report_run(args, device, target, res, adapting: bool) -> None:
    """The configuration, the transitions, the adapted parameters and the acceptance."""
    eps = f"eps0={args.step_size:g}" if adapting and args.adapt_step_size else \
        f"eps={args.step_size:g}"
    print(f"fused-hmc sample on {device}: {args.chains} chains x {args.dim} dims, "
          f"{describe(args, target)}, {args.dtype}, L={args.leapfrog}, {eps}"
          + (f", jitter {args.jitter:g}" if args.jitter else "") + f", seed {res.seed}")
    print(f"transitions       {res.num_warmup} warm-up (discarded) + {res.num_transitions} "
          f"sampling, thin {res.thin}: {res.num_kept} draws kept per chain"
          + ("  [interrupted]" if res.interrupted else ""))
    if adapting:
        step, inv_mass = res.step_size.double(), res.inverse_mass.double()
        w = res.warmup
        how = "pooled" if w.pooled else "per-chain"
        if w.mass_estimator == "gradients":
            how += " (inverse mass from draws and gradients)"
        toward = "harmonic mean acceptance" if w.pooled and w.pooled_acceptance == "harmonic" \
            else "acceptance"
        print(f"warm-up           {how} adaptation toward "
              f"{toward} {w.target_accept:g}: step size {step.mean().item():.4g} (range "
              f"{step.min().item():.4g} .. {step.max().item():.4g}), inverse mass "
              f"{inv_mass.min().item():.4g} .. {inv_mass.max().item():.4g}")
        if res.mass_matrix == "dense":
            print(f"                  {res.dense_mass_line()}")
    if res.trajectory_length is not None:
        how = "ChEES-adapted" if res.warmup.adapt_trajectory_length else "given"
        print(f"trajectory        {how} length T = {res.trajectory_length:.4g}: ceil(w T / eps) "
              f"leapfrog steps, w ~ U[0, 1) per transition, shared by the chains, at most "
              f"{res.max_leapfrog_steps}")
    sampled = res.num_transitions * res.final_state.shape[0]
    mean = (f", {res.sampling_gradient_evaluations / sampled:.3g} per transition in sampling"
            if sampled else "")
    print(f"gradients         {res.warmup_gradient_evaluations:,} in warm-up + "
          f"{res.sampling_gradient_evaluations:,} in sampling (all chains{mean})")
    from ..sampling.chain_statistics import totals
    from ..sampling.result import statistics_lines

    for line in statistics_lines(totals(res.chain_statistics), sampled):
        print(line)
    exact = gaussian.exact_acceptance(args, target, res)
    rate = res.accept_rate.double().mean().item()
    known = ("" if is_user_target(target) else "; exact at stationarity " + (
        f"{exact:.4f}" if exact is not None else "unknown for this configuration"))
    print(f"acceptance rate   {rate:.4f}  (mean acceptance probability "
          f"{res.mean_accept_prob.double().mean().item():.4f}{known})")
    if rate < _LOW_ACCEPTANCE:
        warn(f"acceptance rate {rate:.4f}: the chains barely move (HMC works well at 0.6 - 0.9); "
              "use a smaller --step-size, or --warmup to adapt it")
    warn_stuck_chains(res)


def warn_stuck_chains(res) -> None:
    """The warning on chains that accepted no transition (sampling.stuck_chains)."""
    from ..sampling import stuck_chains

    ids = stuck_chains.stuck_chain_ids(res)
    if ids:
        warn(stuck_chains.describe(res, ids, stuck_chains.remedy(res, cli=True)))


def report_diagnostics(args, q0, options, res, adapting: bool) -> None:
    """ESS and R-hat of the first chains, draws and dimensions (diagnostic_window)."""
    from .. import diagnostics

    no_draws = res.samples is None and res.samples_path is None
    if res.num_kept >= 4 and no_draws and (res.interrupted or q0 is None):
        print("ESS / R-hat       skipped (" + ("interrupted" if res.interrupted else
                                              "resumed: the start is not in the checkpoint")
              + ", and no draws kept)")
    elif res.num_kept >= 4:
        window = diagnostic_window(args.chains, res.num_kept, args.dim)
        draws = diagnostic_draws(q0, options, res, window)
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
    from .. import diagnostics

    whole = draws.shape[0] // size
    if whole < 2:
        print(f"nested R-hat      skipped (the first {draws.shape[0]} chains diagnosed hold fewer "
              f"than 2 whole superchains of {size})")
        return
    nested = diagnostics.diagnose(draws[:whole * size], max_dims=dims, superchains=whole)
    print(f"nested R-hat      max {figure(nested.max_nested_r_hat)}  (first {whole} superchains "
          f"x {size} chains)")


def report_time(args, res, elapsed: float) -> None:
    total = res.num_warmup + res.num_transitions
    per_s = total / elapsed if elapsed > 0 else float("inf")
    print(f"time              {elapsed:.3f} s ({per_s:,.0f} transitions/s, "
          f"{per_s * args.chains:,.3g} chain-transitions/s"
          + (", warm-up included)" if res.num_warmup else ")"))


def plot_params(args: argparse.Namespace, target) -> list[int] | None:
    """The dimensions --plot-params names, checked before the run (None without --plot)."""
    from ..diagnostics import parameter_indices
    from ..plots import DEFAULT_PARAMS

    if args.plot is None:
        if args.plot_params is not None:
            raise CliError("--plot-params", "chooses what --plot draws: give --plot PNG too")
        return None
    try:
        return parameter_indices(args.plot_params, target.dim, getattr(target, "names", None),
                                 default=DEFAULT_PARAMS, argument="--plot-params")
    except ValueError as exc:
        raise CliError("--plot-params", str(exc).removeprefix("--plot-params ")) from None


def plot(args: argparse.Namespace, res, params: list[int]) -> None:
    if res.num_kept < 2:
        warn(f"--plot skipped: it needs 2 kept draws per chain, the run kept {res.num_kept}")
        return
    res.plot(args.plot, params=params)
    from ..plots import parameter_labels

    labels = parameter_labels(res)
    print(f"plot              trace and rank plots of {', '.join(labels[j] for j in params)} "
          f"(first 4 chains) in {args.plot}")
