"""Constraints torch.distributions lacks, registered with its ``biject_to``/``transform_to``.

``ordered``: a vector whose entries strictly increase, sampled through Stan's ordered transform
(Stan Reference Manual, "Ordered vector"): y_1 = x_1, y_k = y_{k-1} + exp(x_k), so
log |det dy/dx| = sum_{k >= 2} x_k.

Use it as any torch constraint in a parameter declaration:
``{"cutpoints": ((4,), fused_hmc.constraints.ordered)}``.
"""
from __future__ import annotations

import torch
from torch.distributions import biject_to, constraints, transform_to
from torch.distributions.transforms import Transform

__all__ = ["Ordered", "OrderedTransform", "ordered"]


class Ordered(constraints.Constraint):
    """Real vectors (last dimension) whose entries strictly increase."""

    is_discrete = False
    event_dim = 1

    def __repr__(self) -> str:
        return "Ordered()"

    def check(self, value: torch.Tensor) -> torch.Tensor:
        finite = torch.isfinite(value).all(-1)
        return finite & (value[..., 1:] > value[..., :-1]).all(-1)


ordered = Ordered()


class OrderedTransform(Transform):
    """Stan's ordered transform over the last dimension: y = cumsum(x_1, exp(x_2), ..., exp(x_K)).

    Built from ``cat``, ``exp`` and ``cumsum`` only, so it traces to ops the TorchModel compiler
    covers.
    """

    domain = constraints.independent(constraints.real, 1)
    codomain = ordered
    bijective = True

    def __eq__(self, other):
        return isinstance(other, OrderedTransform)

    def _call(self, x: torch.Tensor) -> torch.Tensor:
        steps = torch.cat([x[..., :1], torch.exp(x[..., 1:])], dim=-1)
        return torch.cumsum(steps, dim=-1)

    def _inverse(self, y: torch.Tensor) -> torch.Tensor:
        return torch.cat([y[..., :1], torch.log(y[..., 1:] - y[..., :-1])], dim=-1)

    def log_abs_det_jacobian(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x[..., 1:].sum(-1)


@biject_to.register(Ordered)
@transform_to.register(Ordered)
def _ordered_transform(constraint: Ordered) -> OrderedTransform:
    return OrderedTransform()
