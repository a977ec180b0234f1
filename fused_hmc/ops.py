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

    q [B, d] contiguous (the state); mu [d]; seed: int64 key of the philox stream (chain b is stream
    chain chain_offset + b). Transition t is kept when (t + 1) % thin == 0: stored in samples
    [B, K, d] (K = draws kept by this call, any strides, e.g. a view big[:, k0:k0 + K]; pass an
    empty tensor to store none) and folded into the float64 Welford mean, m2 [B, d] with count
    kept_before + k + 1. accept_count [B] int64 and accept_prob_sum [B] float64 accumulate over
    every transition, the latter one transition at a time onto the stored sum (chunk-invariant).
    """
    _ops().run_chains.default(q, mu, step_size, num_leapfrog_steps, seed, chain_offset,
                              first_transition, num_transitions, thin, samples, mean, m2,
                              accept_count, accept_prob_sum, kept_before)
