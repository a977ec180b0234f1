"""``HMC``: the drop-in ``nn.Module`` with the reference Model's constructor and outputs."""
from __future__ import annotations

import math

import torch
import torch.nn as nn

from .transition import RNG_MODES, check_generator_traceable, hmc_step


class HMC(nn.Module):
    """One fused HMC transition on N(mu, I) per forward call, for a batch of chains.

    Constructor arguments match the reference ``Model(dim, num_leapfrog_steps=10, step_size=0.1)``.
    ``forward(q)`` draws in-kernel the very numbers the reference would (``rng="torch"``), so under the
    same seed the outputs are identical; ``forward(q, momentum=p, uniform=u)`` uses external noise.
    """

    def __init__(self, dim: int, num_leapfrog_steps: int = 10, step_size: float = 0.1,
                 rng: str = "torch", generator: torch.Generator | None = None):
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be an integer >= 1, got {dim!r}")
        if isinstance(num_leapfrog_steps, bool) or not isinstance(num_leapfrog_steps, int) \
                or num_leapfrog_steps < 1:
            raise ValueError(f"num_leapfrog_steps must be an integer >= 1, got {num_leapfrog_steps!r}")
        if not (isinstance(step_size, (int, float)) and math.isfinite(step_size) and step_size > 0):
            raise ValueError(f"step_size must be a finite number > 0, got {step_size!r}")
        if rng not in RNG_MODES:
            raise ValueError(f'rng must be "philox" or "torch", got {rng!r}')
        self.dim = dim
        self.num_leapfrog_steps = num_leapfrog_steps
        self.step_size = float(step_size)
        self.rng = rng
        self.generator = generator
        self.register_buffer("mu", torch.zeros(dim))

    def forward(self, q: torch.Tensor, momentum: torch.Tensor | None = None,
                uniform: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """q [B, dim] -> (q_new [B, dim], accepted [B] bool)."""
        check_generator_traceable(self.generator)  # before any draw from it
        if q.dim() != 2 or q.shape[1] != self.dim:
            raise ValueError(f"q must have shape [batch, {self.dim}], got {list(q.shape)}")
        mu = self.mu
        if q.is_floating_point() and mu.dtype != q.dtype:
            q, mu, momentum, uniform = self._promote_like_reference(q, mu, momentum, uniform)
        return hmc_step(q, mu, step_size=self.step_size, num_leapfrog_steps=self.num_leapfrog_steps,
                        rng=self.rng, generator=self.generator, momentum=momentum, uniform=uniform)

    def _promote_like_reference(self, q, mu, momentum, uniform):
        """Mixed float32/float64 q and mu: compute in the wider dtype, as the reference does.

        The widening is exact, so the results match the reference's promoted arithmetic. When q is
        the narrower one, the reference draws its momentum in q's dtype first: so do we.
        """
        wide = torch.promote_types(q.dtype, mu.dtype)
        if wide != q.dtype and momentum is None and self.rng == "torch":
            momentum = torch.empty_like(q).normal_(generator=self.generator)
            uniform = torch.rand(q.shape[0], device=q.device, generator=self.generator)
        if momentum is not None:
            momentum = momentum.to(wide)
        return q.to(wide), mu.to(wide), momentum, uniform

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, num_leapfrog_steps={self.num_leapfrog_steps}, "
                f"step_size={self.step_size}, rng={self.rng!r}")


ModelNew = HMC
