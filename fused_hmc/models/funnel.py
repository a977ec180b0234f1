"""Neal's funnel (Neal 2003, "Slice sampling", Ann. Statist. 31(3), section 8).

x = (v, x[1..dim-1]): v ~ N(0, 3^2), x_i | v ~ N(0, exp(v / 2)^2) independently, so

    log p = -v^2 / 18 - exp(-v) sum_i x_i^2 / 2 - (dim - 1) v / 2        (up to a constant).

Exact moments: E v = 0, Var v = 9; E x_i = 0, Var x_i = E exp(v) = exp(9 / 2) (the lognormal mean).
No constraint: the reported parameters are x itself.
"""
from __future__ import annotations

import functools
import math

import torch
from torch.distributions import Normal

from .model import Model, TorchForm, indexed

V_SCALE = 3.0

# data.num_x = dim - 1.
SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) {
  const T v = x[0];
  T sq = x[1] * x[1];
  for (int64_t i = 2; i <= data.num_x; ++i) sq += x[i] * x[i];
  return -(v * v) / 18.0 - 0.5 * exp(-v) * sq - (0.5 * data.num_x) * v;
}
"""


def _log_prob(x: torch.Tensor, data) -> torch.Tensor:
    v, rest = x[..., 0], x[..., 1:]
    return -(v * v) / (2 * V_SCALE ** 2) - 0.5 * torch.exp(-v) * (rest * rest).sum(-1) \
        - 0.5 * rest.shape[-1] * v


def _constrain(x: torch.Tensor, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    return {name: x[..., j] for j, name in enumerate(names)}


def _torch_fn(p, data):
    """The torch form: v ~ N(0, 3^2), x_i | v ~ N(0, exp(v / 2)^2)."""
    return (Normal(0.0, V_SCALE).log_prob(p["v"])
            + Normal(0.0, torch.exp(p["v"] / 2)).log_prob(p["x"]).sum())


def _torch_form(dim: int) -> TorchForm:
    return TorchForm(_torch_fn, {"v": (), "x": (dim - 1,)}, {}, tuple(range(dim)))


def funnel(dim: int = 10) -> Model:
    """Neal's funnel in ``dim`` dimensions: x[0] = v, x[1..dim) the funnel's x_i."""
    if not isinstance(dim, int) or dim < 2:
        raise ValueError(f"dim must be an int >= 2, got {dim!r}")
    names = ("v",) + indexed("x", dim - 1)
    var = torch.full((dim,), math.exp(V_SCALE ** 2 / 2), dtype=torch.float64)
    var[0] = V_SCALE ** 2
    return Model(
        name="funnel", dim=dim, source=SOURCE, data={"num_x": dim - 1}, names=names,
        constrained_names=names, log_prob_fn=_log_prob,
        constrain_fn=functools.partial(_constrain, names=names),
        exact_mean=torch.zeros(dim, dtype=torch.float64), exact_var=var,
        torch_form=functools.partial(_torch_form, dim))
