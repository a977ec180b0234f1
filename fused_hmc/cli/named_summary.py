"""The summary of a user's target in named parameters: a model's constrained ones
(Model.constrain on the draws), else the target's names or x[0], x[1], ..."""
from __future__ import annotations

import math

import numpy as np
import torch

from .diagnosed_draws import diagnostic_draws, diagnostic_window
from .errors import warn
from .report import HIGH_R_HAT, figure, report_nested_r_hat

# Constrained moments go over the draws in blocks of chains of about this many values.
_BLOCK_VALUES = 2**22


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


def report_parameters(q0, options, res, model) -> None:
    """The summary table in named parameters (a model's constrained ones when `model` is given):
    mean and sd over every chain and draw, ESS / R-hat over the first chains and draws
    (diagnostic_window's budget). q0, options: the run's start and Sampler options, to rerun the first chains when no
    draws were kept (None when resumed)."""
    from .. import diagnostics

    target = res.target
    names = parameter_names(target, model)
    rows = min(len(names), diagnostics.SUMMARY_ROWS)
    if res.num_kept == 0 and not res.interrupted:
        warn(f"--thin {res.thin} keeps none of the {res.num_transitions} sampling "
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
    window = diagnostic_window(chains, res.num_kept, target.dim, rows)
    draws = diagnostic_draws(q0, options, res, window) if can_draw and (
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
        report_nested_r_hat(values, chains // res.superchains, rows)
    if diag is not None and not diag.max_r_hat <= HIGH_R_HAT:
        warn(f"R-hat max {figure(diag.max_r_hat)} > {HIGH_R_HAT}: the chains have "
             "not mixed (or are too short to tell); check --warmup, --samples, --step-size, "
             "--leapfrog")
    if not np.isfinite(mean).all():
        warn("non-finite means: the chains diverged")


def _store_draws(res):
    from ..sampling.storage import posterior_draws

    return posterior_draws(res.samples_path, res.num_kept)
