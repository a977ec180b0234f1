"""A Sampler's settings: its keyword arguments as given (:class:`SamplerOptions`, the one place that
names them and their defaults, from which ``Sampler`` and ``sample`` take their signatures), and
the same checked once against the chains (:class:`SamplerSettings`, built by
:func:`check_settings`; each check is one function of arguments.py, whose errors name the
argument). What a checkpoint records to build the sampler again is the checked settings under
the arguments' names (:meth:`SamplerSettings.checkpoint_arguments`).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from .._limits import LIMITS, STAN_WINDOWS
from .arguments import (Chains, check_flag, check_inverse_mass, check_jitter,
                        check_mass_estimator, check_mass_matrix, check_mu, check_path,
                        check_per_chain_chees, check_pooled, check_seconds, check_step_size,
                        check_step_size_fits, check_target, check_trajectory, count)
from .superchains import check_superchains
from .warmup import WarmupSettings


@dataclass(frozen=True)
class SamplerOptions:
    """The keyword arguments of ``Sampler(q0, ...)`` and ``sample(q0, num_samples, ...)`` with
    their defaults (Sampler's docstring says what each does), unchecked."""

    step_size: float | torch.Tensor = 0.1
    num_leapfrog_steps: int = 10
    mu: torch.Tensor | None = None
    thin: int = 1
    keep_samples: bool = True
    seed: int | None = None
    generator: torch.Generator | None = None
    progress: bool = True
    chunk_size: int | None = None
    chain_offset: int = 0
    first_transition: int = 0
    num_warmup: int = 0
    target: object = None
    target_accept: float | None = None
    adapt_step_size: bool = True
    adapt_mass_matrix: bool = True
    pooled: bool | None = None
    jitter: float = 0.0
    inverse_mass: torch.Tensor | None = None
    mass_matrix: str = "diagonal"
    adapt_windows: tuple[int, int, int] | None = None
    out: object = None
    checkpoint: object = None
    checkpoint_every: float = 60.0
    superchains: int | None = None
    process_group: object = None
    adapt_trajectory_length: bool = False
    max_leapfrog_steps: int = 1000
    trajectory_length: float | None = None
    mass_estimator: str = "draws"
    pooled_acceptance: str | None = None

    @classmethod
    def of(cls, caller: str, options: dict) -> SamplerOptions:
        """The options a call to `caller` was given, refusing a name that is not one (as Python
        refuses an unexpected keyword argument)."""
        names = {f.name for f in fields(cls)}
        for name in options:
            if name not in names:
                raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")
        return cls(**options)


def signature(*leading: inspect.Parameter) -> inspect.Signature:
    """`leading` parameters, then every option as a keyword-only one with its default: what
    ``help(Sampler)`` and ``inspect.signature(fused_hmc.sample)`` show."""
    return inspect.Signature(list(leading) + [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                          annotation=f.type) for f in fields(SamplerOptions)])


@dataclass(frozen=True)
class SamplerSettings:
    """The options, checked against the chains q [chains, dim] (in q's dtype and device where they
    are tensors). target: the target given, or None for N(mu, I) with mu (checked, q's dtype;
    zeros by default) — mu is None when a target is given. seed: the one given (None: drawn from
    generator later). warmup: num_warmup, target_accept, adapt_* and pooled as WarmupSettings."""

    target: object
    mu: torch.Tensor | None
    superchains: int | None
    keep_samples: bool
    out: Path | None
    checkpoint: Path | None
    checkpoint_every: float
    step_size: float | torch.Tensor
    num_leapfrog_steps: int
    warmup: WarmupSettings
    trajectory_length: float | None
    max_leapfrog_steps: int
    jitter: float
    inverse_mass: torch.Tensor | None
    mass_matrix: str
    thin: int
    progress: bool
    chunk_size: int | None
    chain_offset: int
    first_transition: int
    seed: int | None
    generator: torch.Generator | None

    def checkpoint_arguments(self, target, seed: int, chain_offset: int,
                             first_transition: int) -> dict:
        """The arguments, by name, that build this sampler again from a checkpoint (with the
        target as sampled, the seed and chain offset in use and the next transition; then the
        checkpoint's state is restored)."""
        w = self.warmup
        return dict(
            step_size=self.step_size, num_leapfrog_steps=self.num_leapfrog_steps, target=target,
            thin=self.thin, keep_samples=self.keep_samples, seed=seed, progress=self.progress,
            chunk_size=self.chunk_size, chain_offset=chain_offset,
            first_transition=first_transition, num_warmup=w.num_warmup,
            target_accept=w.target_accept, adapt_step_size=w.adapt_step_size,
            adapt_mass_matrix=w.adapt_mass_matrix, pooled=w.pooled, jitter=self.jitter,
            inverse_mass=self.inverse_mass, mass_matrix=self.mass_matrix,
            adapt_windows=w.windows,
            out=None if self.out is None else str(self.out),
            checkpoint_every=self.checkpoint_every, superchains=self.superchains,
            adapt_trajectory_length=w.adapt_trajectory_length,
            max_leapfrog_steps=self.max_leapfrog_steps, trajectory_length=self.trajectory_length,
            mass_estimator=w.mass_estimator, pooled_acceptance=w.pooled_acceptance)


def check_settings(options: SamplerOptions, q: torch.Tensor) -> SamplerSettings:
    """Every option checked (each by its one check, in this order) against the chains q (whose
    values only the target's check reads: a C++ target's log density at each start)."""
    o, chains = options, Chains.of(q)
    target = check_target(o.target, o.mu, q)
    superchains = check_superchains(o.superchains, chains.count)
    keep_samples = check_flag("keep_samples", o.keep_samples)
    out = check_path("out", o.out)
    if out is not None and not keep_samples:
        raise ValueError("out= streams the kept draws to disk, but keep_samples=False keeps "
                         "none: pass one or the other")
    checkpoint = check_path("checkpoint", o.checkpoint)
    checkpoint_every = check_seconds("checkpoint_every", o.checkpoint_every)
    step_size = check_step_size(o.step_size, chains)
    num_leapfrog_steps = count("num_leapfrog_steps", o.num_leapfrog_steps, 1,
                               LIMITS["kMaxLeapfrogSteps"])
    warmup = WarmupSettings(o.num_warmup, o.target_accept, o.adapt_step_size,
                            o.adapt_mass_matrix, o.pooled, o.adapt_windows,
                            o.adapt_trajectory_length, o.mass_estimator, o.pooled_acceptance)
    check_mass_estimator(warmup, chains)
    check_per_chain_chees(warmup, chains)
    trajectory_length, max_leapfrog_steps = check_trajectory(
        o.trajectory_length, o.max_leapfrog_steps, num_leapfrog_steps, warmup)
    jitter = check_jitter(o.jitter)
    check_step_size_fits(step_size, jitter, warmup, chains)
    mass_matrix = check_mass_matrix(o.mass_matrix, chains)
    inverse_mass = check_inverse_mass(o.inverse_mass, chains, mass_matrix)
    check_pooled(step_size, inverse_mass, warmup, mass_matrix)
    thin = count("thin", o.thin, 1)
    chunk_size = None if o.chunk_size is None else count("chunk_size", o.chunk_size, 1)
    chain_offset = count("chain_offset", o.chain_offset, 0)
    first_transition = count("first_transition", o.first_transition, 0)
    if o.seed is not None and o.generator is not None:
        raise ValueError("pass seed= (the stream's seed) or generator= (to draw one), not both")
    seed = None if o.seed is None else count("seed", o.seed, 0, 2**64 - 1)
    mu = check_mu(o.mu, chains) if target is None else None
    return SamplerSettings(
        target=target, mu=mu, superchains=superchains, keep_samples=keep_samples, out=out,
        checkpoint=checkpoint, checkpoint_every=checkpoint_every, step_size=step_size,
        num_leapfrog_steps=num_leapfrog_steps, warmup=warmup,
        trajectory_length=trajectory_length, max_leapfrog_steps=max_leapfrog_steps,
        jitter=jitter, inverse_mass=inverse_mass, mass_matrix=mass_matrix, thin=thin, progress=bool(o.progress),
        chunk_size=chunk_size, chain_offset=chain_offset, first_transition=first_transition,
        seed=seed, generator=o.generator)

