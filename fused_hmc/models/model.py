"""The description of a model in the library: C++ source, data, names and torch reference.

A :class:`Model` carries everything ``fused_hmc.CppTarget`` takes (docs/TARGETS.md: source, dim,
data, names, a torch ``log_prob``) and what a report needs beyond it: the map to the constrained
parameters (the ones posteriordb and Stan report), their names, Stan's initialisation, and exact
moments where they are known. :meth:`Model.target` builds the CppTarget on demand, so importing or
constructing a model never compiles anything.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple

import torch

LogProb = Callable[[torch.Tensor, Mapping], torch.Tensor]
Constrain = Callable[[torch.Tensor], dict]


class TorchForm(NamedTuple):
    """A model written for ``fused_hmc.TorchModel``: ``fn(p, data)``, p the constrained values of
    one chain by name; ``params`` name -> shape | (shape, constraint); ``data``. ``to_cpp``: the
    C++ form's coordinates from the torch form's, x_cpp = x_torch[..., to_cpp] (both
    unconstrained; the two log densities then agree up to a constant). ``lanes``: TorchModel's
    (default "auto": the rows form where the density has a loop over data rows)."""

    fn: Callable
    params: dict
    data: dict
    to_cpp: tuple[int, ...]
    lanes: int | str = "auto"

    def model(self):
        """The compiled ``fused_hmc.TorchModel`` (traced and compiled here, cached on disk)."""
        from ..torch_model import TorchModel

        return TorchModel(self.fn, self.params, data=self.data, lanes=self.lanes)


@dataclass(frozen=True, eq=False)
class Model:
    """One model: a log density over ``dim`` unconstrained parameters, in C++ and in torch.

    Fields:
        name: short name (``"eight_schools"``).
        dim: number of unconstrained parameters.
        source: C++ defining ``template <typename T, typename Data> FUSED_HMC_HD T
            log_density(const T* x, const Data& data)`` (docs/TARGETS.md), up to a constant.
        data: name -> tensor (float64 or int64), float or int, read in C++ as ``data.<name>``.
        names: the ``dim`` unconstrained parameter names, in the order of ``x``.
        constrained_names: the names :meth:`constrain` returns, in order (posteriordb's names for
            the posteriordb models).
        log_prob_fn: ``log_prob_fn(x, data)``, x [..., dim] -> [...]; the torch reference.
        constrain_fn: x [..., dim] -> dict constrained name -> [...].
        gradient_source: optional hand-written ``log_density_and_gradient`` (C++, same template
            form), for ``target(gradient=True)``.
        init_radius: Stan's initialisation: each unconstrained coordinate uniform on
            [-init_radius, init_radius] (Stan's default is 2).
        exact_mean, exact_var: the exact mean and variance of the unconstrained parameters [dim],
            float64, where they are known in closed form (funnel, Rosenbrock); else None.
        posteriordb: the posteriordb posterior this model reproduces (``"eight_schools-
            eight_schools_noncentered"``), whose reference summary is over ``constrained_names``.
        lanes: CppTarget's lanes ("auto", the default, or 1 .. 256 for sources in the rows form,
            which define a share of the data's rows: ``log_density_rows``,
            ``log_density_and_gradient_rows``).
        torch_form: () -> :class:`TorchForm`, the same model written for ``fused_hmc.TorchModel``
            (on the same data), or None.
        vector_chains: the source and gradient_source compute with T only through arithmetic
            and the target functions (no branch on a value), so ``target()`` runs CPU chains in
            vector lanes (CppTarget's vector_chains), with either gradient.
    """

    name: str
    dim: int
    source: str
    data: Mapping[str, torch.Tensor | float | int]
    names: tuple[str, ...]
    constrained_names: tuple[str, ...]
    log_prob_fn: LogProb = field(repr=False)
    constrain_fn: Constrain = field(repr=False)
    gradient_source: str | None = field(default=None, repr=False)
    init_radius: float = 2.0
    exact_mean: torch.Tensor | None = field(default=None, repr=False)
    exact_var: torch.Tensor | None = field(default=None, repr=False)
    posteriordb: str | None = None
    lanes: int | str = "auto"
    torch_form: Callable[[], TorchForm] | None = field(default=None, repr=False)
    vector_chains: bool = False

    def __post_init__(self):
        if len(self.names) != self.dim:
            raise ValueError(f"{self.name}: names has {len(self.names)} entries, dim is {self.dim}")

    def log_prob(self, x: torch.Tensor, data: Mapping | None = None) -> torch.Tensor:
        """Log density up to a constant, x [..., dim] -> [...] (x [dim] -> 0-d), differentiable
        by autograd; ``data`` defaults to the model's own (docs/TARGETS.md's log_prob(x, data))."""
        self._check_x("x", x)
        return self.log_prob_fn(x, self.data if data is None else data)

    def constrain(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Constrained parameters from unconstrained x [..., dim]: name -> [...], keys in the order
        of ``constrained_names``."""
        self._check_x("x", x)
        return self.constrain_fn(x)

    def constrained_values(self, x: torch.Tensor) -> torch.Tensor:
        """The constrained parameters stacked, x [..., dim] -> [..., len(constrained_names)]."""
        values = self.constrain(x)
        return torch.stack([values[n] for n in self.constrained_names], dim=-1)

    def initial_point(self, num_chains: int, *, dtype: torch.dtype = torch.float64,
                      device: torch.device | str = "cpu",
                      generator: torch.Generator | None = None) -> torch.Tensor:
        """Stan's initialisation for ``num_chains`` chains: [num_chains, dim] uniform on
        [-init_radius, init_radius] (``generator`` is a CPU generator; the draw is moved after)."""
        if not isinstance(num_chains, int) or num_chains < 1:
            raise ValueError(f"num_chains must be a positive int, got {num_chains!r}")
        u = torch.rand(num_chains, self.dim, dtype=torch.float64, generator=generator)
        return ((2 * u - 1) * self.init_radius).to(dtype=dtype, device=device)

    def target(self, gradient: bool = False):
        """``fused_hmc.CppTarget`` for this model (compiled on first use, not here).
        gradient=True uses the hand-written ``gradient_source`` instead of dual numbers."""
        if gradient and self.gradient_source is None:
            raise ValueError(f"{self.name} has no hand-written gradient_source; use gradient=False "
                             "(automatic gradient by dual numbers)")
        from ..cpp_target import CppTarget

        source = self.source + ("\n" + self.gradient_source if gradient else "")
        return CppTarget(source, self.dim, data=dict(self.data), names=list(self.names),
                         log_prob=self.log_prob_fn, gradient=gradient, lanes=self.lanes,
                         constrain=self.constrain, vector_chains=self.vector_chains)

    def _check_x(self, arg: str, x) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{arg} must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim == 0 or x.shape[-1] != self.dim:
            raise ValueError(f"{arg} must be shaped [..., {self.dim}] for {self.name}, got "
                             f"{tuple(x.shape)}")


def indexed(base: str, count: int) -> tuple[str, ...]:
    """Stan's names for a vector, 1-based: indexed("theta", 2) == ("theta[1]", "theta[2]")."""
    return tuple(f"{base}[{i}]" for i in range(1, count + 1))
