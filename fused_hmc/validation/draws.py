"""Drawing from the sampler under test: the kernel's own momenta, uniforms and chain states.

A *step* is one HMC transition that also reports the noise it drew. ``KernelStep`` and
``KernelGeneratorStep`` are the real kernel (``torch.ops.fused_hmc.transition`` with trace=True:
the momentum and uniform come back from the very code path that made the transition); tests substitute
deliberately broken steps with the same signature to measure the suite's power.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch

from .. import ops


class Transition(NamedTuple):
    """One transition of B chains.

    q_new: [B, d] positions after the transition.
    accepted: [B] bool, the Metropolis decisions.
    momentum: [B, d] the momentum the transition drew.
    uniform: [B] the uniform its accept test used.
    """
    q_new: torch.Tensor
    accepted: torch.Tensor
    momentum: torch.Tensor
    uniform: torch.Tensor


class SeededStep(Protocol):
    """Transition ``transition`` of the native stream ``seed``: q [B, d], mu [d] -> Transition."""

    def __call__(self, q: torch.Tensor, mu: torch.Tensor, *, seed: int,
                 transition: int) -> Transition: ...


class GeneratorStep(Protocol):
    """One transition seeded from (and advancing) ``generator``: q [B, d], mu [d] -> Transition."""

    def __call__(self, q: torch.Tensor, mu: torch.Tensor, *,
                 generator: torch.Generator) -> Transition: ...


@dataclass(frozen=True)
class KernelStep:
    """The kernel in ``rng="philox"`` mode with an explicit seed and transition index."""
    step_size: float = 0.1
    num_leapfrog_steps: int = 10

    def __call__(self, q, mu, *, seed, transition):
        return Transition(*ops.transition(q, mu, self.step_size, self.num_leapfrog_steps,
                                          "philox", None, seed, transition, trace=True))


@dataclass(frozen=True)
class KernelGeneratorStep:
    """The kernel seeded from a torch generator, ``rng="philox"`` or ``rng="torch"``."""
    rng: str
    step_size: float = 0.1
    num_leapfrog_steps: int = 10

    def __call__(self, q, mu, *, generator):
        return Transition(*ops.transition(q, mu, self.step_size, self.num_leapfrog_steps,
                                          self.rng, generator, trace=True))


def stationary_start(mu: torch.Tensor, chains: int, generator: torch.Generator) -> torch.Tensor:
    """[chains, d] draws of N(mu, I) from ``generator`` (independent of the kernel's streams)."""
    return mu + torch.randn(chains, mu.numel(), generator=generator, device=mu.device,
                            dtype=mu.dtype)


class FreshStartDraws(NamedTuple):
    """Transitions 0..T-1 of one stream, each from a fresh exact-stationary start q ~ N(mu, I).

    momentum: [Tm, B, d] the momenta of the first Tm transitions.
    uniform: [T, B] the uniforms.
    accepted: [T, B] bool; the B*T decisions are independent trials at stationarity.
    """
    momentum: torch.Tensor
    uniform: torch.Tensor
    accepted: torch.Tensor


def fresh_start_draws(step: SeededStep, mu: torch.Tensor, chains: int, transitions: int,
                      momentum_transitions: int, seed: int,
                      start_generator: torch.Generator) -> FreshStartDraws:
    """Runs ``transitions`` transitions of stream ``seed``, each from a new start q ~ N(mu, I)."""
    kept = min(momentum_transitions, transitions)
    momentum = torch.empty(kept, chains, mu.numel(), device=mu.device, dtype=mu.dtype)
    uniform, accepted = None, torch.empty(transitions, chains, device=mu.device, dtype=torch.bool)
    for t in range(transitions):
        out = step(stationary_start(mu, chains, start_generator), mu, seed=seed, transition=t)
        if uniform is None:
            uniform = torch.empty(transitions, chains, device=mu.device, dtype=out.uniform.dtype)
        if t < kept:
            momentum[t] = out.momentum
        uniform[t] = out.uniform
        accepted[t] = out.accepted
    return FreshStartDraws(momentum, uniform, accepted)


class ChainRun(NamedTuple):
    """B chains run for T transitions.

    final: [B, d] the positions after the last transition.
    lag1_per_chain: [B] float64, (1 / (T d)) sum_t sum_j x_{t,j} x_{t+1,j} with x = q - mu: an
        unbiased estimate of the lag-1 autocorrelation when the chain is stationary with unit
        variance (its mean is known, so none is estimated).
    acceptance_per_chain: [B] float64, the fraction of transitions accepted.
    """
    final: torch.Tensor
    lag1_per_chain: torch.Tensor
    acceptance_per_chain: torch.Tensor


def run_chains(step: SeededStep, q0: torch.Tensor, mu: torch.Tensor, transitions: int,
               seed: int) -> ChainRun:
    """Transitions 0..T-1 of stream ``seed`` from q0 [B, d]; accumulates lag-1 products on the fly."""
    q = q0
    x_prev = (q - mu).to(torch.float64)
    lag = torch.zeros(q.shape[0], device=q.device, dtype=torch.float64)
    accepted = torch.zeros_like(lag)
    for t in range(transitions):
        out = step(q, mu, seed=seed, transition=t)
        q = out.q_new
        x = (q - mu).to(torch.float64)
        lag += (x_prev * x).sum(-1)
        accepted += out.accepted
        x_prev = x
    scale = 1.0 / (transitions * q.shape[1])
    return ChainRun(q, lag * scale, accepted / transitions)


class GeneratorDraws(NamedTuple):
    """C consecutive generator-seeded transitions from one generator.

    momentum: [C, B, d] and uniform: [C, B], the kernel's draws of each call.
    randn_after: [C, B, d] a ``torch.randn`` drawn from the same generator right after each call.
    """
    momentum: torch.Tensor
    uniform: torch.Tensor
    randn_after: torch.Tensor


def generator_draws(step: GeneratorStep, q: torch.Tensor, mu: torch.Tensor, calls: int,
                    generator: torch.Generator) -> GeneratorDraws:
    momenta, uniforms, after = [], [], []
    for _ in range(calls):
        out = step(q, mu, generator=generator)
        momenta.append(out.momentum)
        uniforms.append(out.uniform)
        after.append(torch.randn(q.shape, generator=generator, device=q.device, dtype=q.dtype))
    return GeneratorDraws(torch.stack(momenta), torch.stack(uniforms), torch.stack(after))
