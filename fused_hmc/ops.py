"""Typed one-line wrappers of the registered operators (``torch.ops.fused_hmc.*``).

Each call makes sure the extension is loaded; the op layer knows nothing of the driver or CLI.
"""
from __future__ import annotations

import torch

from . import _build


def _ops():
    _build.load_extension()
    return torch.ops.fused_hmc


def _bindings():
    """Direct pybind11 entry points (no per-call schema parsing); torch.ops while tracing."""
    return _build._state["bindings"] or _build.bindings()


def hmc_step_noise(q: torch.Tensor, mu: torch.Tensor, momentum: torch.Tensor, uniform: torch.Tensor,
                   step_size: float, num_leapfrog_steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q, momentum [B, d]; mu [d]; uniform [B] -> (q_new [B, d], accepted [B] bool)."""
    if torch.compiler.is_compiling():
        return _ops().hmc_step_noise.default(q, mu, momentum, uniform, step_size, num_leapfrog_steps)
    return _bindings().hmc_step_noise(q, mu, momentum, uniform, step_size, num_leapfrog_steps)


def hmc_step(q: torch.Tensor, mu: torch.Tensor, step_size: float, num_leapfrog_steps: int, rng: str,
             generator: torch.Generator | None = None, seed: int | None = None,
             transition: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """q [B, d]; mu [d] -> (q_new [B, d], accepted [B] bool), noise drawn in the kernel."""
    if torch.compiler.is_compiling():
        return _ops().hmc_step.default(q, mu, step_size, num_leapfrog_steps, rng, generator, seed,
                                       transition)
    return _bindings().hmc_step(q, mu, step_size, num_leapfrog_steps, rng, generator, seed,
                                transition)


def hmc_step_traced(q: torch.Tensor, mu: torch.Tensor, step_size: float, num_leapfrog_steps: int,
                    rng: str, generator: torch.Generator | None = None, seed: int | None = None,
                    transition: int = 0):
    """As hmc_step, plus the momentum [B, d] and uniform [B] the kernel drew."""
    return _ops().hmc_step_traced.default(q, mu, step_size, num_leapfrog_steps, rng, generator,
                                          seed, transition)


def philox4x32(counters: torch.Tensor, key: int) -> torch.Tensor:
    """counters [N, 4] int32 (as uint32), 64-bit key -> Philox4x32-10 blocks [N, 4] int32."""
    return _ops().philox4x32.default(counters, key)


def run_chains(q: torch.Tensor, mu: torch.Tensor, step_size: float, num_leapfrog_steps: int,
               seed: int, chain_offset: int, first_transition: int, num_transitions: int,
               thin: int, samples: torch.Tensor, mean: torch.Tensor, m2: torch.Tensor,
               accept_count: torch.Tensor, accept_prob_sum: torch.Tensor,
               kept_before: int) -> None:
    """Transitions [first_transition, first_transition + num_transitions) of every chain, in place.

    q [B, d] contiguous (the state); mu [d]; seed: int64 seed of the philox stream, mixed into its
    key (csrc/math/stream_key.h; chain b is stream chain chain_offset + b). Transition t is kept
    when (t + 1) % thin == 0: stored in samples [B, K, d] (K = draws kept by this call, any
    strides, e.g. a view big[:, k0:k0 + K]; pass an empty tensor to store none) and folded into the
    float64 Welford mean, m2 [B, d] (16-byte aligned) with count kept_before + k + 1.
    accept_count [B] int64 and accept_prob_sum [B] float64 accumulate over every transition, the
    latter one transition at a time onto the stored sum (chunk-invariant).
    """
    _ops().run_chains.default(q, mu, step_size, num_leapfrog_steps, seed, chain_offset,
                              first_transition, num_transitions, thin, samples, mean, m2,
                              accept_count, accept_prob_sum, kept_before)


def run_chains_tuned(q: torch.Tensor, target_kind: int, mu: torch.Tensor, precision: torch.Tensor,
                     step_size: torch.Tensor, inv_mass: torch.Tensor, jitter: float,
                     num_leapfrog_steps: int, seed: int, chain_offset: int, first_transition: int,
                     num_transitions: int, thin: int, samples: torch.Tensor, mean: torch.Tensor,
                     m2: torch.Tensor, accept_count: torch.Tensor, accept_prob_sum: torch.Tensor,
                     kept_before: int) -> None:
    """run_chains for the Gaussian target family with step_size [G] float64 and inv_mass [G, d]
    (G = 1 or B) and step-size jitter; target_kind 0/1/2 with precision empty/[d]/[d, d].
    Semantics: the schema comment in csrc/ops_schema.cpp.
    """
    _ops().run_chains_tuned.default(q, target_kind, mu, precision, step_size, inv_mass, jitter,
                                    num_leapfrog_steps, seed, chain_offset, first_transition,
                                    num_transitions, thin, samples, mean, m2, accept_count,
                                    accept_prob_sum, kept_before)


def warmup_chains(q: torch.Tensor, target_kind: int, mu: torch.Tensor, precision: torch.Tensor,
                  step_size: torch.Tensor, inv_mass: torch.Tensor, jitter: float,
                  num_leapfrog_steps: int, seed: int, chain_offset: int, first_transition: int,
                  num_transitions: int, warmup_start: int, num_warmup: int, init_buffer: int,
                  base_window: int, term_buffer: int, target_accept: float,
                  adapt_step_size: bool, adapt_mass_matrix: bool, dual_averaging: torch.Tensor,
                  window_mean: torch.Tensor, window_m2: torch.Tensor) -> None:
    """Warm-up transitions [first_transition, first_transition + num_transitions) of a warm-up of
    num_warmup transitions starting at warmup_start, adapting step_size [G] (dual averaging, state
    dual_averaging [G, 3]) and inv_mass [G, d] (Stan's windows from init_buffer, base_window and
    term_buffer; window_mean / window_m2 [B, d]) in place. Semantics: the schema comment in
    csrc/ops_schema.cpp.
    """
    _ops().warmup_chains.default(q, target_kind, mu, precision, step_size, inv_mass, jitter,
                                 num_leapfrog_steps, seed, chain_offset, first_transition,
                                 num_transitions, warmup_start, num_warmup, init_buffer,
                                 base_window, term_buffer, target_accept,
                                 adapt_step_size, adapt_mass_matrix, dual_averaging, window_mean,
                                 window_m2)
