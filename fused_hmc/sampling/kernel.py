"""The chains' kernel as the driver sees it: one class over the warmup and sample ops
(``fused_hmc::warmup`` / ``fused_hmc::sample``, CPU and CUDA) for every target, built-in or
compiled (:class:`fused_hmc.CppTarget`).

A target of :mod:`fused_hmc.targets` (or a CppTarget), a step size and an inverse mass per chain
(or shared by all), diagonal or dense (the op then carries each mass's Cholesky factor,
:func:`dense_factor`; csrc/math/hmc/dense_mass.h), step-size jitter, and warm-up adaptation whose whole state
(:class:`AdaptationState`) lives in tensors on the chains' device and is updated inside the op,
so warm-up needs no host round trip per transition. N(mu, I) with one step size and unit mass is
the same op with G = 1 and inverse mass 1 (bit for bit the seed sampler's transitions).

Trajectories are a fixed number of leapfrog steps L, or a trajectory length T (given, or adapted
by ChEES in a pooled warm-up): then each transition runs min(max_leapfrog_steps,
max(1, ceil(w T / eps_t))) steps, w the chain's jitter (see :mod:`fused_hmc.sampling.warmup`).
The ops add every transition to each chain's statistics (:mod:`.chain_statistics`: acceptance,
gradient evaluations, divergences, ...), kept apart for the warm-up and sampling.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .. import ops
from . import chain_statistics
from .warmup import (WarmupSettings, chees_restarts, restart_chees_optimizer,
                     slow_window_ends)


def dense_factor(inverse_mass: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The op's form of dense inverse masses C [..., d, d] (symmetric positive definite): their
    lower Cholesky factors L, C = L L^T, computed in float64 and rounded to `dtype`."""
    return torch.linalg.cholesky(inverse_mass.to(torch.float64)).to(dtype).contiguous()


def dense_inverse_mass(factor: torch.Tensor) -> torch.Tensor:
    """The inverse masses C = L L^T [..., d, d] that factors L represent (float64 products, in
    the factors' dtype). The product is d elementwise outer-product updates, column by column:
    a matrix product's summation order follows the thread count, and no bit of a result may."""
    f = factor.to(torch.float64)
    c = torch.zeros_like(f)
    for m in range(f.shape[-1]):
        column = f[..., :, m]
        c += column[..., :, None] * column[..., None, :]
    return c.to(factor.dtype)


class AdaptationState(NamedTuple):
    """What warm-up adapts and carries between calls, G = 1 (pooled or shared) or B (per chain).

    step_size: [G] float64, the chains' device. inverse_mass: [G, d] in the chains' dtype, or for a
    dense mass [G, d, d], each group's Cholesky factor L (:func:`dense_factor`).
    dual_averaging: [G, 3] float64, (s_bar, x_bar, mu) of Hoffman & Gelman's Algorithm 5 (the op
    resets it at every (re)start). window_mean, window_m2: [B, d] float64, the Welford moments of
    the current slow window (dense: window_m2 [B, d, d], the co-moments); with
    mass_estimator="gradients" [2, B, ...], the gradients' moments after the draws'. The last
    three exist during warm-up only (None after it).
    chees: [8] float64, the ChEES state of a warm-up adapting the trajectory length (the op's
    layout: T, moving average of log T, Adam m and v, beta1^k, beta2^k, k, 0); it stays after the
    warm-up, when chees[0] is the adapted T sampling runs with. None without ChEES.
    """

    step_size: torch.Tensor
    inverse_mass: torch.Tensor
    dual_averaging: torch.Tensor | None = None
    window_mean: torch.Tensor | None = None
    window_m2: torch.Tensor | None = None
    chees: torch.Tensor | None = None


class ChainStatistics(NamedTuple):
    """Each chain's statistics as the ops accumulate them ({name: [B]}, in the def's order,
    :mod:`.chain_statistics`), over the warm-up's transitions and over sampling's."""

    warmup: dict[str, torch.Tensor]
    sampling: dict[str, torch.Tensor]


class ChainKernel:
    """The kernel of chains q [B, d] on `target`.

    step_size: [G] float64 and inverse_mass: [G, d], or a dense mass's Cholesky factors [G, d, d]
    (:func:`dense_factor`), G = 1 (shared) or B; both are copied. The
    warm-up (``settings.num_warmup`` transitions from global transition ``warmup_start``) adapts
    them in place; sampling reads them. num_leapfrog_steps: L, or with a trajectory length the
    initial length in steps (ChEES starts at T0 = L step_size); trajectory_length: a fixed T
    (None: L steps, or ChEES's T when ``settings.adapt_trajectory_length``); max_leapfrog_steps:
    the most steps a transition of length T runs. pool_over: a
    :class:`~fused_hmc.sampling.distributed.ChainGroup` whose ranks' chains a pooled warm-up
    (G = 1) pools over (:mod:`fused_hmc.sampling.pooled_ranks`), or None.
    """

    def __init__(self, q: torch.Tensor, target, step_size: torch.Tensor,
                 inverse_mass: torch.Tensor | None, jitter: float, num_leapfrog_steps: int,
                 key: int, chain_offset: int, settings: WarmupSettings, warmup_start: int,
                 trajectory_length: float | None = None, max_leapfrog_steps: int = 1000,
                 pool_over=None):
        self.target_name = target.op_name(
            q.dtype, q.device, chains=q.shape[0],
            dense_mass=inverse_mass is not None and inverse_mass.dim() == 3)
        # The CUDA threads a chain of a rows-form CppTarget takes (the draws do not depend on
        # them); None for the other targets.
        self.lanes = target.lanes_for(q.shape[0], q.device) if hasattr(target, "lanes_for") \
            else None
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
        self.dense = inv_mass.dim() == 3
        # Dense: each chain's window ends that kept its old mass (the estimate was not finite and
        # positive definite), counted by count_kept_masses.
        self.mass_failures = (torch.zeros(q.shape[0], dtype=torch.int64, device=q.device)
                              if self.dense else None)
        # Where the calls split: at the slow windows' ends a dense mass counts its kept factors,
        # and at chees_restarts ChEES restarts its optimiser.
        self._window_ends = (set(slow_window_ends(settings))
                             if self.dense and settings.adapt_mass_matrix else set())
        self._chees_restarts = (chees_restarts(settings) if settings.adapt_trajectory_length
                                else set())
        self.jitter, self.num_leapfrog_steps = jitter, num_leapfrog_steps
        self.key, self.chain_offset = key, chain_offset
        self.settings, self.warmup_start = settings, warmup_start
        self.warmup_left = settings.num_warmup
        self.chains = q.shape[0]
        f64 = dict(dtype=torch.float64, device=q.device)
        chees = None
        if settings.adapt_trajectory_length:  # [T0, 0, 0, 0, 1, 1, 0, 0]: the op's initial state
            chees = torch.tensor([0, 0, 0, 0, 1, 1, 0, 0], **f64)
            chees[0] = step.median() * num_leapfrog_steps  # per chain: the median step size
        self.fixed_length = trajectory_length
        self.max_leapfrog_steps = max_leapfrog_steps
        self._sampling_length = None  # ChEES's T, read once from the device when sampling starts
        self.statistics = ChainStatistics(chain_statistics.zeros(q.shape[0], q.device),
                                          chain_statistics.zeros(q.shape[0], q.device))
        self.state = AdaptationState(step, inv_mass, chees=chees)
        self._rank_pool = None
        if pool_over is not None and settings.num_warmup:
            from .pooled_ranks import RankPooledWarmup

            self._rank_pool = RankPooledWarmup(self, pool_over)
        self.gradient_estimate = settings.mass_estimator == "gradients"
        if self.warmup_left:
            mean_shape = (2, *q.shape) if self.gradient_estimate else tuple(q.shape)
            m2_shape = (*mean_shape, q.shape[1]) if self.dense else mean_shape
            self.state = AdaptationState(step, inv_mass, torch.zeros(step.shape[0], 3, **f64),
                                         torch.zeros(mean_shape, **f64),
                                         torch.zeros(m2_shape, **f64), chees)
        # A pooled warm-up's per-chain first phase and restarts of stuck chains (far_starts.py).
        self.far_starts = None
        if settings.pooled and settings.num_warmup:
            from .far_starts import FarStarts

            self.far_starts = FarStarts(self, q, target, pool_over)

    def run_op(self, op, q: torch.Tensor, first: int, n: int, inv_mass: torch.Tensor,
               trajectory: dict, statistics: dict, **kwargs) -> None:
        """`op` (ops.sample or ops.warmup) on this kernel's target, stream and step sizes:
        transitions [first, first + n) with inv_mass, the trajectory arguments, the chain
        statistics to add to and the op's other arguments."""
        # With a trajectory length, the op's num_leapfrog_steps is the cap on steps.
        op(q=q, target=self.target_name, target_tensors=self.target_tensors,
           target_scalars=self.target_scalars, step_size=self.state.step_size,
           inv_mass=inv_mass, jitter=self.jitter,
           num_leapfrog_steps=self.max_leapfrog_steps if trajectory else self.num_leapfrog_steps,
           seed=self.key, chain_offset=self.chain_offset, first_transition=first,
           num_transitions=n, statistics=chain_statistics.as_list(statistics), **trajectory,
           **kwargs)

    def warmup(self, q: torch.Tensor, first: int, n: int) -> None:
        """Warm-up transitions [first, first + n), which must be the next ones of the warm-up
        (a pooled one in the parts of far_starts.py: its per-chain first phase, then pooled)."""
        far = self.far_starts
        if far is None:
            self._warmup_part(q, first, n)
            return
        for i, size in far.split(first - self.warmup_start, n):
            if far.runs(i):
                far.warmup(q, self.warmup_start + i, size)
                self.warmup_left -= size
            else:
                self._warmup_part(q, self.warmup_start + i, size)
            far.after(q, i + size - 1)

    def _warmup_part(self, q: torch.Tensor, first: int, n: int) -> None:
        s = self.settings
        if self.state.chees is not None:  # T = chees[0], adapted by the op after each transition
            trajectory = dict(chees=self.state.chees)
        else:
            trajectory = self._length_arguments()
        if self._rank_pool is not None:
            self._rank_pool.run(q, first, n, trajectory)
        else:
            for part_first, part_n in self._window_parts(first, n):
                last = part_first + part_n - 1 - self.warmup_start
                before = self.state.inverse_mass.clone() if last in self._window_ends else None
                self.run_op(ops.warmup, q, part_first, part_n, self.state.inverse_mass,
                            trajectory, self.statistics.warmup,
                            dual_averaging=self.state.dual_averaging,
                            window_mean=self.state.window_mean, window_m2=self.state.window_m2,
                            warmup_start=self.warmup_start, num_warmup=s.num_warmup,
                            windows=s.windows, target_accept=s.target_accept,
                            adapt_step_size=s.adapt_step_size,
                            adapt_mass_matrix=s.adapt_mass_matrix,
                            gradient_mass_estimate=self.gradient_estimate,
                            harmonic_acceptance=s.pooled_acceptance == "harmonic")
                if before is not None:
                    self.count_kept_masses(before)
                if last in self._chees_restarts:
                    restart_chees_optimizer(self.state.chees, self.state.step_size)
        self.warmup_left -= n
        if self.warmup_left == 0:  # the adaptation state is spent (ChEES's keeps T)
            self.state = AdaptationState(self.state.step_size, self.state.inverse_mass,
                                         chees=self.state.chees)

    def _window_parts(self, first: int, n: int) -> list[tuple[int, int]]:
        """Transitions [first, first + n) as (first, count) parts, each ending at a slow window's
        end (with a dense mass), a restart of ChEES, or the end."""
        parts, end = [], first + n
        for i in sorted(self._window_ends | self._chees_restarts):
            t = self.warmup_start + i
            if first <= t < end - 1:
                parts.append((first, t + 1 - first))
                first = t + 1
        parts.append((first, end - first))
        return parts

    def count_kept_masses(self, before: torch.Tensor) -> None:
        """After a call whose last transition ended a slow window: a dense factor left bit for bit
        as it was is one the op kept because the window's estimate was not finite and positive
        definite (a new estimate always changes it), counted for each of its chains."""
        kept = (self.state.inverse_mass == before).flatten(1).all(1)
        self.mass_failures += kept.to(torch.int64).expand(self.chains)

    def sample(self, q: torch.Tensor, first: int, n: int, thin: int, draws: torch.Tensor | None,
               mean: torch.Tensor, m2: torch.Tensor, kept_before: int) -> None:
        """Sampling transitions [first, first + n): draws [B, K, d] (or None), the Welford mean
        and m2 [B, d] of the kept draws, and the chains' sampling statistics."""
        inv_mass = self._unit if self.unit_mass else self.state.inverse_mass
        self.run_op(ops.sample, q, first, n, inv_mass, self._length_arguments(),
                    self.statistics.sampling, thin=thin, kept_before=kept_before,
                    samples=draws, mean=mean, m2=m2)

    def _length_arguments(self) -> dict:
        """The op's arguments for transitions of one fixed length: {} for L steps, else the length
        T (the one given, or ChEES's final one)."""
        length = self.fixed_length
        if self.state.chees is not None:
            if self._sampling_length is None:  # one read from the device, after the warm-up
                self._sampling_length = float(self.state.chees[0])
            length = self._sampling_length
        if length is None:
            return {}
        return dict(trajectory_length=length)

    def trajectory_length(self) -> float | None:
        """The trajectory length T transitions run with now (ChEES's current or final one, or the
        one given); None for a fixed number of steps."""
        if self.state.chees is not None:
            return float(self.state.chees[0])
        return self.fixed_length

    def chain_statistics(self) -> ChainStatistics:
        """Copies of the chains' statistics so far (warm-up, sampling)."""
        return ChainStatistics(*({name: t.clone() for name, t in part.items()}
                                 for part in self.statistics))

    def checkpoint_state(self) -> tuple[dict, dict]:
        """(tensors with their dimension names, integers) that change as the chains run: step
        sizes, inverse masses, the warm-up left, during warm-up the dual averaging and window
        moments, with ChEES its state, and the chains' statistics (``warmup_<name>``,
        ``sampling_<name>``). With the constructor's arguments they resume the adaptation
        exactly."""
        s = self.state
        square = ("dim", "dim2") if self.dense else ("dim",)
        tensors = {"step_size": (s.step_size, ("group",)),
                   "inv_mass": (s.inverse_mass, ("group", *square))}
        if self.warmup_left:
            moments = ("moments",) if self.gradient_estimate else ()  # draws', gradients'
            tensors.update(dual_averaging=(s.dual_averaging, ("group", "dual_averaging")),
                           window_mean=(s.window_mean, (*moments, "chain", "dim")),
                           window_m2=(s.window_m2, (*moments, "chain", *square)))
        if self.dense:
            tensors["mass_failures"] = (self.mass_failures, ("chain",))
        if s.chees is not None:
            tensors["chees"] = (s.chees, ("chees",))
        if self.far_starts is not None:
            tensors.update(self.far_starts.checkpoint_tensors(self.warmup_left))
        for part, statistics in self.statistics._asdict().items():
            tensors.update({f"{part}_{name}": (t, ("chain",)) for name, t in statistics.items()})
        return tensors, {"warmup_left": self.warmup_left}

    def load_checkpoint_state(self, tensors: dict, integers: dict) -> None:
        """Restores what :meth:`checkpoint_state` gave, into a kernel built with the same
        arguments (so, during warm-up, with the adaptation state allocated)."""
        s = self.state
        s.step_size.copy_(tensors["step_size"])
        s.inverse_mass.copy_(tensors["inv_mass"])
        self.warmup_left = integers["warmup_left"]
        if s.chees is not None:
            s.chees.copy_(tensors["chees"])
            self._sampling_length = None
        for part, statistics in self.statistics._asdict().items():
            for name, t in statistics.items():
                t.copy_(tensors[f"{part}_{name}"])
        if self.dense:
            self.mass_failures.copy_(tensors["mass_failures"])
        if self.far_starts is not None:
            self.far_starts.load(tensors, self.warmup_left)
        if self.warmup_left:
            s.dual_averaging.copy_(tensors["dual_averaging"])
            s.window_mean.copy_(tensors["window_mean"])
            s.window_m2.copy_(tensors["window_m2"])
        else:  # the adaptation had ended
            self.state = AdaptationState(s.step_size, s.inverse_mass, chees=s.chees)

    def warmup_reseeded(self) -> torch.Tensor | None:
        """[B] int64: each chain's restarts in a pooled warm-up (far_starts.py); None without."""
        return None if self.far_starts is None else self.far_starts.reseeded.clone()

    def step_sizes(self, q: torch.Tensor) -> torch.Tensor:
        return self.state.step_size.expand(q.shape[0]).clone()

    def inverse_masses(self, q: torch.Tensor) -> torch.Tensor:
        """[B, d] (diagonal), or [B, d, d] the dense inverse masses L L^T, in q's dtype."""
        if self.dense:
            return dense_inverse_mass(self.state.inverse_mass).expand(
                q.shape[0], q.shape[1], q.shape[1]).clone()
        return self.state.inverse_mass.expand(q.shape).clone()

    def mass_factorization_failures(self) -> torch.Tensor | None:
        """[B] int64: each chain's slow window ends that kept its dense inverse mass (the
        estimate was not finite and positive definite); None for a diagonal mass."""
        return None if self.mass_failures is None else self.mass_failures.clone()
