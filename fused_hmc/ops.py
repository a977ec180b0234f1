"""Typed wrappers of the registered operators: ``torch.ops.fused_hmc.transition``, ``.run`` and
``.pooled_update`` (csrc/ops/schema.cpp states their semantics), and the test-only
``fused_hmc_testing.philox4x32``.

Each call makes sure the extension is loaded; the op layer knows nothing of the driver or CLI.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import torch

from . import _build

NOISE_MODES = ("philox", "torch", "given")


class TransitionTrace(NamedTuple):
    """One transition's outputs and the noise it used (``transition(..., trace=True)``).

    q_new: [B, d] contiguous, q's dtype and device. accepted: [B] bool.
    momentum: [B, d] contiguous, q's dtype. uniform: [B]: float32 with noise="philox", torch.rand's
    (the default) dtype with "torch", as given with "given".
    """

    q_new: torch.Tensor
    accepted: torch.Tensor
    momentum: torch.Tensor
    uniform: torch.Tensor


def _ops():
    _build.load_extension()
    return torch.ops.fused_hmc


def transition(q: torch.Tensor, mu: torch.Tensor, step_size: float, num_leapfrog_steps: int,
               noise: str, generator: torch.Generator | None = None, seed: int | None = None,
               transition: int = 0, momentum: torch.Tensor | None = None,
               uniform: torch.Tensor | None = None, trace: bool = False):
    """One HMC transition of N(mu, I) for every chain: q [B, d]; mu [d]; noise "philox" (native
    stream, from `generator` or `seed` + `transition`), "torch" (torch.randn_like + torch.rand's
    numbers) or "given" (`momentum` [B, d], `uniform` [B]).

    Returns (q_new [B, d], accepted [B] bool), or with trace=True a :class:`TransitionTrace`.
    Eager calls go through a direct binding (no per-call schema parsing); traced calls through
    torch.ops.
    """
    args = (q, mu, step_size, num_leapfrog_steps, noise, generator, seed, transition, momentum,
            uniform, trace)
    if torch.compiler.is_compiling():
        out = _ops().transition.default(*args)
    else:
        out = _build.bindings().transition(*args)
    return TransitionTrace(*out) if trace else (out[0], out[1])


def run(q: torch.Tensor, target: str, target_tensors: Sequence[torch.Tensor],
        target_scalars: Sequence[float], step_size: torch.Tensor, inv_mass: torch.Tensor,
        jitter: float, num_leapfrog_steps: int, seed: int, chain_offset: int,
        first_transition: int, num_transitions: int, *, thin: int = 1, kept_before: int = 0,
        samples: torch.Tensor | None = None, mean: torch.Tensor | None = None,
        m2: torch.Tensor | None = None, accept_count: torch.Tensor | None = None,
        accept_prob_sum: torch.Tensor | None = None, dual_averaging: torch.Tensor | None = None,
        window_mean: torch.Tensor | None = None, window_m2: torch.Tensor | None = None,
        warmup_start: int = 0, num_warmup: int = 0, windows: Sequence[int] = (),
        target_accept: float = 0.8, adapt_step_size: bool = False,
        adapt_mass_matrix: bool = False, trajectory_length: float = 0.0,
        chees: torch.Tensor | None = None,
        gradient_evaluations: torch.Tensor | None = None,
        trajectory_record: torch.Tensor | None = None) -> None:
    """Transitions [first_transition, first_transition + num_transitions) of every chain, in place.

    Sampling (dual_averaging None) keeps draws in `samples` and accumulates mean, m2,
    accept_count and accept_prob_sum; warm-up (dual_averaging, window_mean, window_m2 given) adapts
    step_size and inv_mass; trajectory_length > 0 jitters each transition's leapfrog steps
    (num_leapfrog_steps is then their cap), chees [8] adapts it in a pooled warm-up (ChEES; when
    sampling, the transitions run with T = chees[0]), gradient_evaluations [B] int64 accumulates
    each chain's gradient evaluations (L per transition, plus one per call for a target that
    carries its force across transitions, such as a CppTarget, or per transition for the
    Gaussians), and trajectory_record [B, 3 d + 2] float64 (sampling) receives what ChEES needs
    of each chain's last transition. Shapes and semantics: csrc/ops/schema.cpp.
    """
    _ops().run.default(q, target, list(target_tensors), [float(v) for v in target_scalars],
                       step_size, inv_mass, jitter, num_leapfrog_steps, seed, chain_offset,
                       first_transition, num_transitions, thin, kept_before, samples, mean, m2,
                       accept_count, accept_prob_sum, dual_averaging, window_mean, window_m2,
                       warmup_start, num_warmup, list(windows), target_accept, adapt_step_size,
                       adapt_mass_matrix, trajectory_length, chees, gradient_evaluations,
                       trajectory_record)


def pooled_update(step_size: torch.Tensor, dual_averaging: torch.Tensor,
                  inv_mass: torch.Tensor, accept_stat: torch.Tensor,
                  variance: torch.Tensor | None, variance_draws: float, iteration: int,
                  num_warmup: int, windows: Sequence[int], target_accept: float,
                  adapt_step_size: bool, adapt_mass_matrix: bool,
                  chees: torch.Tensor | None = None, chees_sums: torch.Tensor | None = None,
                  max_leapfrog_steps: int = 1000) -> None:
    """One pooled warm-up update after warm-up iteration `iteration`, in place, from statistics
    of every chain reduced by the caller: step_size [1] by dual averaging (dual_averaging [1, 3])
    with the mean acceptance statistic accept_stat [1]; with chees [8] and chees_sums [2] (the sums
    of omega g and omega over every chain), ChEES's trajectory length capped at
    max_leapfrog_steps steps; with variance [d] (the pooled variance of a slow window's
    variance_draws draws), inv_mass [1, d]. The run op's pooled warm-up updates the same way
    (csrc/math/adaptation/warmup_update.h; shapes and semantics: csrc/ops/schema.cpp)."""
    _ops().pooled_update.default(step_size, dual_averaging, inv_mass, accept_stat, variance,
                                 float(variance_draws), iteration, num_warmup, list(windows),
                                 target_accept, adapt_step_size, adapt_mass_matrix, chees,
                                 chees_sums, max_leapfrog_steps)


def philox4x32(counters: torch.Tensor, key: int) -> torch.Tensor:
    """Test-only: counters [N, 4] int32 (as uint32), 64-bit key -> Philox4x32-10 blocks [N, 4]."""
    _build.load_extension()
    return torch.ops.fused_hmc_testing.philox4x32.default(counters, key)
