"""fused_hmc.TorchModel: a log density written in PyTorch, compiled into the fused kernels.

``TorchModel(fn, params, data)``: ``fn(p, data)`` returns the log density of one chain from its
constrained values ``p`` (name -> tensor of the declared shape). The sampled density is on the
unconstrained coordinates x [dim] (:class:`~fused_hmc.torch_model.parameters.Parameters`):

    lp(x) = fn(constrain(x), data) + log|det d constrain / dx|

Its value and reverse-mode gradient are traced to an ATen graph (trace.py), generated as C++
(codegen.py, ops.py) and compiled as a :class:`~fused_hmc.CppTarget` with ``gradient=True``, so
every sampler feature takes it as it takes a hand-written C++ model; ``check()`` compares the
compiled code with torch autograd of lp itself.
"""
from __future__ import annotations

import time
from typing import Callable, Mapping

import torch

from .. import cpp_data, lanes as lanes_module
from ..cpp_target import CppTarget
from .codegen import generate
from .parameters import Parameters
from .trace import TorchModelError, trace, tracing_defaults

__all__ = ["TorchModel", "TorchModelError"]


class TorchModel(CppTarget):
    """A log density in PyTorch, compiled to C++ with its reverse-mode gradient.

    fn: ``fn(p, data) -> 0-d tensor``, p: {name: constrained tensor of the declared shape} for
    ONE chain. params: {name: shape | (shape, constraint)} (Parameters). data: name -> tensor |
    float | int, passed to fn as given (tensors as float64 / int64). small_limit: per-chain
    values with at most this many entries are stored (default max(64, 4 dim)); larger ones (the
    data-length ones) are recomputed where used, never stored. lanes (1, 2, 4, .. 256, at most the
    data's row partials P, fused_hmc.lanes.row_partials): the CUDA threads a chain takes, its
    data's rows split between them (CppTarget's lanes); lanes > 1 need the density to be a sum
    over the rows, generated in the rows form. lanes "auto" (the default): each run's lanes
    chosen as CppTarget's "auto" chooses them (fused_hmc.lanes.choose_lanes) when the density has
    a loop over data rows that the lanes can split; else one thread a chain. lanes=1 and "auto"
    generate the rows form wherever the density allows it, so the draws are the same for any
    lanes; otherwise the plain form, whose sums keep their plain order. The CPU runs the chains W at a time in vector lanes (CppTarget's
    vector_chains: the generated code chooses on parameters by ``where``, never a branch), with
    the draws of one chain at a time.

    Raises TorchModelError at construction when fn cannot be compiled: an unsupported op, Python
    control flow on a parameter's value, a shape mismatch with params, a result that is not 0-d,
    lanes > 1 for a density that is not a sum over the data's rows (rows.py).
    """

    def __init__(self, fn: Callable, params: Mapping, data: Mapping | None = None, *,
                 small_limit: int | None = None, lanes: int | str = "auto"):
        if not callable(fn):
            raise TypeError(f"fn must be callable fn(p, data) -> 0-d tensor, got "
                            f"{type(fn).__name__}")
        lanes_module.check_lanes(lanes)
        self.parameters = Parameters(params)
        self.fn = fn
        fields, values = cpp_data.prepare(dict(data) if data is not None else None)
        self.user_data = {f.name: values[f.name] for f in fields}
        dim = self.parameters.dim
        if small_limit is None:
            small_limit = max(64, 4 * dim)
        started = time.perf_counter()
        traced = trace(lambda x: self._unconstrained_density(x), dim,
                       {k: v for k, v in self.user_data.items() if isinstance(v, torch.Tensor)},
                       fn)
        generated, lanes = _generate(traced, set(self.user_data), small_limit, lanes)
        self.trace_seconds = time.perf_counter() - started
        self.generated_source = generated.source
        compiled_data = {**{k: v for k, v in self.user_data.items()
                            if not isinstance(v, torch.Tensor)}, **generated.fields}
        super().__init__(generated.source, dim, data=compiled_data,
                         names=self.parameters.unconstrained_names(),
                         log_prob=self._reference_log_prob, gradient=True,
                         constrain=self.parameters.constrain, lanes=lanes,
                         vector_chains=True)
        self.source_name = "<TorchModel generated>"

    def __repr__(self) -> str:
        return f"TorchModel(dim={self.dim}, params={self.parameters!r})"

    # -- the density in torch ----------------------------------------------------------------------

    def _unconstrained_density(self, x: torch.Tensor, data: Mapping | None = None) -> torch.Tensor:
        data = self.user_data if data is None else data
        p = self.parameters.constrain(x)
        value = self.fn(p, dict(data))
        if not isinstance(value, torch.Tensor):
            raise TorchModelError(f"fn must return a tensor (the log density of one chain), got "
                                  f"{type(value).__name__}")
        if value.dim() != 0:
            raise TorchModelError(
                f"fn must return a 0-d tensor (the log density of ONE chain), got shape "
                f"{list(value.shape)}: sum the terms, and check that params declares the shapes "
                f"fn uses ({ {n: self.parameters.shapes[n] for n in self.parameters.names} })")
        return value + self.parameters.log_abs_det_jacobian(x)

    def _reference_log_prob(self, x: torch.Tensor, data) -> torch.Tensor:
        """check()'s reference: lp at x [dim] with the data as the compiled code sees it."""
        user = {k: data.get(k, v) if isinstance(v, torch.Tensor) else v
                for k, v in self.user_data.items()}
        with tracing_defaults():
            return self._unconstrained_density(x, user)

    def torch_log_density(self, x: torch.Tensor) -> torch.Tensor:
        """lp by torch itself at the rows of x [n, dim] (float64): the compiled code's reference."""
        with tracing_defaults():
            return torch.stack([self._unconstrained_density(row) for row in x.double()])

    # -- public helpers ------------------------------------------------------------------------------

    def initial_point(self, n: int, *, generator: torch.Generator | None = None,
                      dtype: torch.dtype = torch.float64, device="cpu",
                      radius: float = 2.0) -> torch.Tensor:
        """Stan's initialisation: [n, dim] uniform on [-radius, radius] on the unconstrained
        scale (``generator`` a CPU generator; the draw is moved to device after)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        u = torch.rand(n, self.dim, dtype=torch.float64, generator=generator)
        return ((2 * u - 1) * radius).to(dtype=dtype, device=device)


def _generate(traced, data_names, small_limit: int, lanes):
    """The generated source and the lanes to give CppTarget. lanes "auto" or 1: the rows form
    (any lanes above 1 generate the same source; one thread forms the whole fixed tree of
    partials, so lanes=1 draws what any other lanes draw) when the density has a row loop the
    lanes can split; otherwise (no row loop, or a density that is not a sum over the rows) the
    plain form on one thread a chain, whose sums keep their plain order."""
    if lanes not in ("auto", 1):
        return generate(traced, data_names, small_limit, lanes), lanes
    try:
        rows = generate(traced, data_names, small_limit, lanes_module.MAX_LANES)
    except TorchModelError:  # not a sum over the rows (rows.py)
        rows = None
    if rows is not None and rows.row_loops:
        return rows, lanes
    return generate(traced, data_names, small_limit, 1), 1
