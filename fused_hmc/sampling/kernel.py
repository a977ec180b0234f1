"""The chains' kernel as the driver sees it: one class over the run op (``fused_hmc::run``, CPU
and CUDA) for every target, built-in or compiled (:class:`fused_hmc.CppTarget`).

A target of :mod:`fused_hmc.targets` (or a CppTarget), a step size and a diagonal inverse mass per
chain (or shared by all), step-size jitter, and warm-up adaptation whose whole state
(:class:`AdaptationState`) lives in tensors on the chains' device and is updated inside the op,
so warm-up needs no host round trip per transition. N(mu, I) with one step size and unit mass is
the same op with G = 1 and inverse mass 1 (bit for bit the seed sampler's transitions).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .. import ops
from ..targets import StandardGaussian
from .warmup import WarmupSettings


class AdaptationState(NamedTuple):
    """What warm-up adapts and carries between calls, G = 1 (pooled or shared) or B (per chain).

    step_size: [G] float64, the chains' device. inverse_mass: [G, d] in the chains' dtype.
    dual_averaging: [G, 3] float64, (s_bar, x_bar, mu) of Hoffman & Gelman's Algorithm 5 (the op
    resets it at every (re)start). window_mean, window_m2: [B, d] float64, the Welford moments of
    the current slow window. The last three exist during warm-up only (None after it).
    """

    step_size: torch.Tensor
    inverse_mass: torch.Tensor
    dual_averaging: torch.Tensor | None = None
    window_mean: torch.Tensor | None = None
    window_m2: torch.Tensor | None = None


class RunStatistics(NamedTuple):
    """What sampling accumulates per chain: mean, m2 [B, d] float64 (Welford, over kept draws),
    accept_count [B] int64 and accept_prob_sum [B] float64 (over every transition)."""

    mean: torch.Tensor
    m2: torch.Tensor
    accept_count: torch.Tensor
    accept_prob_sum: torch.Tensor


class ChainKernel:
    """The kernel of chains q [B, d] on `target`.

    step_size: [G] float64 and inverse_mass: [G, d], G = 1 (shared) or B; both are copied. The
    warm-up (``settings.num_warmup`` transitions from global transition ``warmup_start``) adapts
    them in place; sampling reads them.
    """

    def __init__(self, q: torch.Tensor, target, step_size: torch.Tensor,
                 inverse_mass: torch.Tensor | None, jitter: float, num_leapfrog_steps: int,
                 key: int, chain_offset: int, settings: WarmupSettings, warmup_start: int):
        self.target_name = target.op_name(q.dtype, q.device)
        self.target_tensors = target.op_tensors(q.dtype, q.device)
        self.target_scalars = target.op_scalars()
        step = step_size.to(dtype=torch.float64, device=q.device).clone()
        # No inverse mass, and none adapted: sampling passes the op an empty one, the unit mass
        # its kernels compile away (the same bits as ones).
        self.unit_mass = inverse_mass is None and not (settings.num_warmup
                                                       and settings.adapt_mass_matrix)
        self._unit = q.new_empty(0)
        if inverse_mass is None:
            inverse_mass = torch.ones(step.shape[0], q.shape[1], dtype=q.dtype)
        inv_mass = inverse_mass.to(dtype=q.dtype, device=q.device).clone().contiguous()
        self.jitter, self.num_leapfrog_steps = jitter, num_leapfrog_steps
        self.key, self.chain_offset = key, chain_offset
        self.settings, self.warmup_start = settings, warmup_start
        self.warmup_left = settings.num_warmup
        self.state = AdaptationState(step, inv_mass)
        if self.warmup_left:
            f64 = dict(dtype=torch.float64, device=q.device)
            self.state = AdaptationState(step, inv_mass, torch.zeros(step.shape[0], 3, **f64),
                                         torch.zeros(q.shape, **f64), torch.zeros(q.shape, **f64))

    def _run(self, q: torch.Tensor, first: int, n: int, inv_mass: torch.Tensor,
             **kwargs) -> None:
        ops.run(q, self.target_name, self.target_tensors, self.target_scalars,
                self.state.step_size, inv_mass, self.jitter, self.num_leapfrog_steps, self.key,
                self.chain_offset, first, n, **kwargs)

    def warmup(self, q: torch.Tensor, first: int, n: int) -> None:
        """Warm-up transitions [first, first + n), which must be the next ones of the warm-up."""
        s = self.settings
        self._run(q, first, n, self.state.inverse_mass, dual_averaging=self.state.dual_averaging,
                  window_mean=self.state.window_mean, window_m2=self.state.window_m2,
                  warmup_start=self.warmup_start, num_warmup=s.num_warmup, windows=s.windows,
                  target_accept=s.target_accept, adapt_step_size=s.adapt_step_size,
                  adapt_mass_matrix=s.adapt_mass_matrix)
        self.warmup_left -= n
        if self.warmup_left == 0:  # the adaptation state is spent
            self.state = AdaptationState(self.state.step_size, self.state.inverse_mass)

    def sample(self, q: torch.Tensor, first: int, n: int, thin: int, draws: torch.Tensor | None,
               stats: RunStatistics, kept_before: int) -> None:
        """Sampling transitions [first, first + n): draws [B, K, d] (or None) and stats."""
        inv_mass = self._unit if self.unit_mass else self.state.inverse_mass
        self._run(q, first, n, inv_mass, thin=thin, kept_before=kept_before, samples=draws,
                  mean=stats.mean, m2=stats.m2, accept_count=stats.accept_count,
                  accept_prob_sum=stats.accept_prob_sum)

    def checkpoint_state(self) -> tuple[dict, dict]:
        """(tensors with their dimension names, integers) that change as the chains run: step
        sizes, inverse masses, the warm-up left and, during warm-up, the dual averaging and window
        moments. With the constructor's arguments they resume the adaptation exactly."""
        s = self.state
        tensors = {"step_size": (s.step_size, ("group",)),
                   "inv_mass": (s.inverse_mass, ("group", "dim"))}
        if self.warmup_left:
            tensors.update(dual_averaging=(s.dual_averaging, ("group", "dual_averaging")),
                           window_mean=(s.window_mean, ("chain", "dim")),
                           window_m2=(s.window_m2, ("chain", "dim")))
        return tensors, {"warmup_left": self.warmup_left}

    def load_checkpoint_state(self, tensors: dict, integers: dict) -> None:
        """Restores what :meth:`checkpoint_state` gave, into a kernel built with the same
        arguments (so, during warm-up, with the adaptation state allocated)."""
        s = self.state
        s.step_size.copy_(tensors["step_size"])
        s.inverse_mass.copy_(tensors["inv_mass"])
        self.warmup_left = integers["warmup_left"]
        if self.warmup_left:
            s.dual_averaging.copy_(tensors["dual_averaging"])
            s.window_mean.copy_(tensors["window_mean"])
            s.window_m2.copy_(tensors["window_m2"])
        else:  # the adaptation had ended
            self.state = AdaptationState(s.step_size, s.inverse_mass)

    def step_sizes(self, q: torch.Tensor) -> torch.Tensor:
        return self.state.step_size.expand(q.shape[0]).clone()

    def inverse_masses(self, q: torch.Tensor) -> torch.Tensor:
        return self.state.inverse_mass.expand(q.shape).clone()


def is_standard(target) -> bool:
    return target is None or isinstance(target, StandardGaussian)
