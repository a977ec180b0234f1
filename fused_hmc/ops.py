"""Wrappers of the registered operators: ``torch.ops.fused_hmc.transition``, ``.sample``,
``.warmup`` and ``.pooled_update`` (csrc/ops/schema.cpp states their semantics), and the test-only
``fused_hmc_testing.philox4x32``. sample and warmup take their arguments by the names their
registered schemas give (:func:`argument_names`), so their signatures are written once.

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


def argument_names(op) -> tuple[str, ...]:
    """The argument names of a registered op overload (``torch.ops.fused_hmc.sample.default``),
    in order, from its schema: the one statement of its signature (csrc/ops/schema.cpp)."""
    return tuple(argument.name for argument in op._schema.arguments)


def _call_by_name(op, arguments: dict) -> None:
    # (Traced under torch.compile, where the dispatcher's own parse names a wrong argument.)
    if not torch.compiler.is_compiling():
        names = argument_names(op)
        unknown = [name for name in arguments if name not in names]
        if unknown:
            raise TypeError(f"{op._schema.name} has no argument {', '.join(map(repr, unknown))}; "
                            f"its arguments are {', '.join(names)}")
    op(**arguments)


def sample(**arguments) -> None:
    """The sample op: sampling transitions [first_transition, first_transition + num_transitions)
    of every chain, in place, every argument by its schema name. It keeps thinned draws in
    `samples`, folds them into the Welford `mean` / `m2`, and adds every transition to
    `statistics` (one [B] tensor per per-chain statistic, in
    :data:`fused_hmc.sampling.chain_statistics.NAMES`' order). Shapes and semantics:
    csrc/ops/schema.cpp."""
    _call_by_name(_ops().sample.default, arguments)


def warmup(**arguments) -> None:
    """The warmup op: warm-up transitions, adapting step_size and inv_mass (and with chees the
    trajectory length) in place, every argument by its schema name; `statistics` as for
    :func:`sample`. Shapes and semantics: csrc/ops/schema.cpp."""
    _call_by_name(_ops().warmup.default, arguments)


def pooled_update(step_size: torch.Tensor, dual_averaging: torch.Tensor,
                  inv_mass: torch.Tensor, acceptance_terms: torch.Tensor,
                  variance: torch.Tensor | None, variance_draws: float, iteration: int,
                  num_warmup: int, windows: Sequence[int], target_accept: float,
                  adapt_step_size: bool, adapt_mass_matrix: bool,
                  chees: torch.Tensor | None = None, chees_sums: torch.Tensor | None = None,
                  max_leapfrog_steps: int = 1000, harmonic_acceptance: bool = False) -> None:
    """One pooled warm-up update after warm-up iteration `iteration`, in place, from statistics
    of every chain reduced by the caller: step_size [1] by dual averaging (dual_averaging [1, 3])
    on the statistic of acceptance_terms [2] (the sums over every chain of the terms (x, w) of
    csrc/math/adaptation/pooled_acceptance.h: the chains' mean acceptance, or with
    harmonic_acceptance their harmonic mean); with chees [8] and chees_sums [2] (the sums of
    omega g and omega over every chain), ChEES's trajectory length capped at max_leapfrog_steps
    steps; with variance [d] (the pooled variance of a slow window's variance_draws draws),
    inv_mass [1, d]. The warmup op's pooled warm-up updates the same way
    (csrc/math/adaptation/warmup_update.h; shapes and semantics: csrc/ops/schema.cpp)."""
    _ops().pooled_update.default(step_size, dual_averaging, inv_mass, acceptance_terms, variance,
                                 float(variance_draws), iteration, num_warmup, list(windows),
                                 target_accept, adapt_step_size, adapt_mass_matrix, chees,
                                 chees_sums, max_leapfrog_steps, harmonic_acceptance)


def philox4x32(counters: torch.Tensor, key: int) -> torch.Tensor:
    """Test-only: counters [N, 4] int32 (as uint32), 64-bit key -> Philox4x32-10 blocks [N, 4]."""
    _build.load_extension()
    return torch.ops.fused_hmc_testing.philox4x32.default(counters, key)
