"""The chains' kernels as the driver sees them.

``PlainChains``: the seed's sampler, ``fused_hmc::run_chains`` on N(mu, I) with one step size (CPU
and CUDA). ``TunedChains``: the tuned samplers ``fused_hmc::warmup_chains`` and
``fused_hmc::run_chains_tuned`` (CPU and CUDA): a target of :mod:`fused_hmc.targets`, a step
size and a diagonal inverse mass per chain (or shared by all), step-size jitter, and warm-up
adaptation whose whole state (step sizes, inverse masses, dual averaging, window moments) lives in
tensors on the chains' device and is updated inside the ops, so warm-up needs no host round trip
per transition. Both run a stretch of transitions with ``run(q, first, n, ...)`` in place.
"""
from __future__ import annotations

import torch

from .. import ops
from ..targets import StandardGaussian
from .warmup import WarmupSettings


class PlainChains:
    """N(mu, I) with one step size, through fused_hmc::run_chains."""

    warmup_left = 0

    def __init__(self, mu: torch.Tensor, step_size: float, num_leapfrog_steps: int, key: int,
                 chain_offset: int):
        self.mu, self.step_size, self.num_leapfrog_steps = mu, step_size, num_leapfrog_steps
        self.key, self.chain_offset = key, chain_offset

    def run(self, q, first, n, thin, draws, mean, m2, accept_count, accept_prob_sum, kept_before):
        ops.run_chains(q, self.mu, self.step_size, self.num_leapfrog_steps, self.key,
                       self.chain_offset, first, n, thin, draws, mean, m2, accept_count,
                       accept_prob_sum, kept_before)

    def state(self) -> tuple[dict, dict]:
        """(tensors, integers) that change as the chains run: none here."""
        return {}, {}

    def load_state(self, tensors: dict, integers: dict) -> None:
        pass

    def step_sizes(self, q: torch.Tensor) -> torch.Tensor:
        return torch.full((q.shape[0],), self.step_size, dtype=torch.float64, device=q.device)

    def inverse_masses(self, q: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(q)


class TunedChains:
    """The tuned samplers' state for chains q [B, d].

    step_size: [G] float64 and inverse_mass: [G, d] in q's dtype, G = 1 (shared) or B; both are
    copied. The warm-up (``settings.num_warmup`` transitions from global transition
    ``warmup_start``) adapts them in place; sampling reads them.
    """

    def __init__(self, q: torch.Tensor, target, step_size: torch.Tensor,
                 inverse_mass: torch.Tensor, jitter: float, num_leapfrog_steps: int, key: int,
                 chain_offset: int, settings: WarmupSettings, warmup_start: int):
        self.kind, self.mu, self.precision = target.op_arguments(q.dtype, q.device)
        self.step_size = step_size.to(dtype=torch.float64, device=q.device).clone()
        self.inv_mass = inverse_mass.to(dtype=q.dtype, device=q.device).clone().contiguous()
        self.jitter, self.num_leapfrog_steps = jitter, num_leapfrog_steps
        self.key, self.chain_offset = key, chain_offset
        self.settings, self.warmup_start = settings, warmup_start
        self.warmup_left = settings.num_warmup
        if self.warmup_left:
            f64 = dict(dtype=torch.float64, device=q.device)
            self._dual_averaging = torch.zeros(self.step_size.shape[0], 3, **f64)
            self._window_mean = torch.zeros(q.shape, **f64)
            self._window_m2 = torch.zeros(q.shape, **f64)

    def warmup(self, q: torch.Tensor, first: int, n: int) -> None:
        """Warm-up transitions [first, first + n), which must be the next ones of the warm-up."""
        s = self.settings
        ops.warmup_chains(q, self.kind, self.mu, self.precision, self.step_size, self.inv_mass,
                          self.jitter, self.num_leapfrog_steps, self.key, self.chain_offset, first,
                          n, self.warmup_start, s.num_warmup, *s.windows, s.target_accept,
                          s.adapt_step_size, s.adapt_mass_matrix, self._dual_averaging,
                          self._window_mean, self._window_m2)
        self.warmup_left -= n
        if self.warmup_left == 0:  # the adaptation state is spent
            del self._dual_averaging, self._window_mean, self._window_m2

    def state(self) -> tuple[dict, dict]:
        """(tensors with their dimension names, integers) that change as the chains run: step
        sizes, inverse masses, the warm-up left and, during warm-up, the dual averaging and window
        moments. With the constructor's arguments they resume the adaptation exactly."""
        tensors = {"step_size": (self.step_size, ("group",)),
                   "inv_mass": (self.inv_mass, ("group", "dim"))}
        if self.warmup_left:
            tensors.update(dual_averaging=(self._dual_averaging, ("group", "dual_averaging")),
                           window_mean=(self._window_mean, ("chain", "dim")),
                           window_m2=(self._window_m2, ("chain", "dim")))
        return tensors, {"warmup_left": self.warmup_left}

    def load_state(self, tensors: dict, integers: dict) -> None:
        """Restores what :meth:`state` gave, into chains built with the same arguments."""
        self.step_size.copy_(tensors["step_size"])
        self.inv_mass.copy_(tensors["inv_mass"])
        self.warmup_left = integers["warmup_left"]
        if self.warmup_left:
            self._dual_averaging.copy_(tensors["dual_averaging"])
            self._window_mean.copy_(tensors["window_mean"])
            self._window_m2.copy_(tensors["window_m2"])
        elif hasattr(self, "_dual_averaging"):  # the adaptation had ended
            del self._dual_averaging, self._window_mean, self._window_m2

    def run(self, q, first, n, thin, draws, mean, m2, accept_count, accept_prob_sum, kept_before):
        ops.run_chains_tuned(q, self.kind, self.mu, self.precision, self.step_size, self.inv_mass,
                             self.jitter, self.num_leapfrog_steps, self.key, self.chain_offset,
                             first, n, thin, draws, mean, m2, accept_count, accept_prob_sum,
                             kept_before)

    def step_sizes(self, q: torch.Tensor) -> torch.Tensor:
        return self.step_size.expand(q.shape[0]).clone()

    def inverse_masses(self, q: torch.Tensor) -> torch.Tensor:
        return self.inv_mass.expand(q.shape).clone()


def is_standard(target) -> bool:
    return target is None or isinstance(target, StandardGaussian)
