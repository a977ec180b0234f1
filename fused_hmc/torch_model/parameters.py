"""A model's parameters declared by name, shape and constraint, and the map from the sampler's
unconstrained coordinates to their constrained values.

The unconstrained coordinates x [..., dim] are the parameters in the order of the declaration,
each flattened row-major, each mapped as ``torch.distributions.biject_to(constraint)`` maps it
(``log_abs_det_jacobian`` summed over the parameter). Everything here is pure torch on the input's
dtype and device, differentiable, and traceable by ``torch.fx.experimental.proxy_tensor.make_fx``.

    spec = Parameters({"mu": (), "tau": ((), constraints.positive), "theta_trans": (8,)})
    spec.dim                               # 10
    spec.constrain(x)["tau"]               # exp(x[..., 1])
    fn(spec.constrain(x), data) + spec.log_abs_det_jacobian(x)   # the unconstrained density
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Mapping

import torch
from torch.distributions import biject_to, constraints
from torch.distributions.transforms import Transform

from fused_hmc.constraints import Ordered

__all__ = ["Parameters", "flat_names"]

_REAL, _GREATER, _LESS, _INTERVAL, _SIMPLEX = (
    type(constraints.real), type(constraints.positive), type(constraints.less_than(0.0)),
    type(constraints.unit_interval), type(constraints.simplex))
_SUPPORTED = ("constraints.real, positive, greater_than(a), less_than(b), interval(a, b), "
              "unit_interval, simplex, fused_hmc.constraints.ordered")


@dataclass(frozen=True)
class _Parameter:
    """One declared parameter: its constrained shape, its unconstrained shape and where its
    coordinates lie in x."""

    name: str
    shape: tuple[int, ...]
    constraint: constraints.Constraint
    unconstrained_shape: tuple[int, ...]
    start: int
    stop: int

    def transform(self, like: torch.Tensor) -> Transform | None:
        """biject_to(constraint) with tensor bounds on ``like``'s dtype and device; None: real."""
        c = self.constraint
        if isinstance(c, _REAL):
            return None
        if isinstance(c, _GREATER):
            c = constraints.greater_than(_on(c.lower_bound, like))
        elif isinstance(c, _LESS):
            c = constraints.less_than(_on(c.upper_bound, like))
        elif isinstance(c, _INTERVAL):
            c = constraints.interval(_on(c.lower_bound, like), _on(c.upper_bound, like))
        return biject_to(c)


def _on(bound, like: torch.Tensor):
    if isinstance(bound, torch.Tensor):
        return bound.to(dtype=like.dtype, device=like.device)
    return bound


class Parameters:
    """Parameters declared as ``{name: shape | (shape, constraint)}``.

    shape: ``()`` (a scalar), an int (a vector) or a tuple of ints, each at least 1. constraint:
    one of torch.distributions.constraints' real, positive, greater_than(a), less_than(b),
    interval(a, b), unit_interval, simplex (last dimension K >= 2, K - 1 unconstrained
    coordinates: torch's stick-breaking), or fused_hmc.constraints.ordered (last dimension).
    Bounds are finite numbers, or tensors that broadcast to the parameter's shape.

    Attributes: ``dim`` (unconstrained coordinates), ``names`` (in declaration order),
    ``shapes`` and ``constraints`` (name -> shape / constraint), ``slices`` (name -> the slice of
    x holding that parameter's unconstrained coordinates).
    """

    def __init__(self, params: Mapping):
        if not isinstance(params, Mapping):
            raise TypeError(f"params must be a dict name -> shape | (shape, constraint), got "
                            f"{type(params).__name__}")
        if not params:
            raise ValueError("params is empty: declare at least one parameter")
        self._params: dict[str, _Parameter] = {}
        start = 0
        for name, spec in params.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise TypeError(f"params: names must be Python identifiers (str), got {name!r}")
            shape, constraint = _split_spec(name, spec)
            constraint = _check_constraint(name, shape, constraint)
            unconstrained = _unconstrained_shape(shape, constraint)
            stop = start + math.prod(unconstrained)
            self._params[name] = _Parameter(name, shape, constraint, unconstrained, start, stop)
            start = stop
        self.dim: int = start
        self.names: list[str] = list(self._params)
        self.shapes: dict[str, tuple[int, ...]] = {n: p.shape for n, p in self._params.items()}
        self.constraints: dict[str, constraints.Constraint] = {
            n: p.constraint for n, p in self._params.items()}
        self.slices: dict[str, slice] = {n: slice(p.start, p.stop) for n, p in self._params.items()}

    def __repr__(self) -> str:
        inner = ", ".join(f"{n!r}: ({p.shape}, {p.constraint})" for n, p in self._params.items())
        return f"Parameters({{{inner}}})"

    def unconstrained_names(self) -> list[str]:
        """The ``dim`` coordinate names, in the order of x. A real parameter's coordinates carry
        its constrained names (``mu``, ``theta_trans[0]``); a constrained one's are
        ``<name>__unconstrained`` indexed over its unconstrained shape (``tau__unconstrained``,
        ``w__unconstrained[0]``.. for a simplex w of K entries, K - 1 of them)."""
        out = []
        for p in self._params.values():
            base = p.name if isinstance(p.constraint, _REAL) else f"{p.name}__unconstrained"
            out += flat_names(base, p.unconstrained_shape)
        return out

    def constrained_names(self) -> list[str]:
        """Flat names of the constrained values, 0-based, row-major, in declaration order:
        ``mu``, ``tau``, ``theta_trans[0]``, .., ``L[0,1]``."""
        return [n for p in self._params.values() for n in flat_names(p.name, p.shape)]

    def constrain(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """x [..., dim] -> {name: [..., *shape]}: the constrained values."""
        self._check_x(x)
        out = {}
        for p in self._params.values():
            u = self._unconstrained(p, x)
            t = p.transform(x)
            out[p.name] = u if t is None else t(u)
        return out

    def log_abs_det_jacobian(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., dim] -> [...]: log |det d constrain(x) / dx|, summed over the parameters (for a
        simplex, over its first K - 1 entries, as torch's stick-breaking transform defines it)."""
        self._check_x(x)
        total = None
        for p in self._params.values():
            t = p.transform(x)
            if t is None:
                continue
            u = self._unconstrained(p, x)
            term = t.log_abs_det_jacobian(u, t(u))
            leftover = len(p.unconstrained_shape) - t.domain.event_dim
            if leftover:
                term = term.sum(dim=tuple(range(-leftover, 0)))
            total = term if total is None else total + term
        if total is None:
            return x.new_zeros(x.shape[:-1])
        return total

    def unconstrain(self, values: Mapping, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """The inverse of :meth:`constrain`: {name: [..., *shape]} (tensors, numbers or nested
        lists; every parameter, same leading dims) -> x [..., dim] of ``dtype``. A value outside
        its constraint's support raises naming the parameter."""
        if not isinstance(values, Mapping):
            raise TypeError(f"values must be a dict name -> value, got {type(values).__name__}")
        unknown = sorted(set(values) - set(self._params))
        missing = [n for n in self._params if n not in values]
        if unknown or missing:
            raise ValueError(f"values: unknown {unknown}, missing {missing}; the parameters are "
                             f"{self.names}")
        pieces, batch = [], None
        for p in self._params.values():
            y = torch.as_tensor(values[p.name], dtype=dtype)
            if not y.is_floating_point():
                raise TypeError(f"values[{p.name!r}]: dtype must be floating, got {dtype}")
            lead = y.ndim - len(p.shape)
            if lead < 0 or tuple(y.shape[lead:]) != p.shape:
                raise ValueError(f"values[{p.name!r}] must be shaped [..., *{p.shape}], got "
                                 f"{tuple(y.shape)}")
            if batch is None:
                batch = tuple(y.shape[:lead])
            elif tuple(y.shape[:lead]) != batch:
                raise ValueError(f"values[{p.name!r}] has leading dims {tuple(y.shape[:lead])}, "
                                 f"the others {batch}")
            inside = torch.isfinite(y).all() and bool(p.constraint.check(y).all())
            if not inside:
                raise ValueError(f"values[{p.name!r}] lies outside {p.constraint} (or is not "
                                 "finite)")
            t = p.transform(y)
            u = y if t is None else t.inv(y)
            pieces.append(u.reshape(batch + (-1,)))
        return torch.cat(pieces, dim=-1)

    def flatten(self, values: Mapping) -> torch.Tensor:
        """{name: [..., *shape]} -> [..., len(constrained_names())], the columns in the order of
        :meth:`constrained_names`."""
        pieces = []
        for p in self._params.values():
            v = values[p.name]
            pieces.append(v.reshape(tuple(v.shape[:v.ndim - len(p.shape)]) + (-1,)))
        return torch.cat(pieces, dim=-1)

    def _check_x(self, x) -> None:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim == 0 or x.shape[-1] != self.dim:
            raise ValueError(f"x must be shaped [..., {self.dim}], got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"x must be floating point, got {x.dtype}")

    @staticmethod
    def _unconstrained(p: _Parameter, x: torch.Tensor) -> torch.Tensor:
        return x[..., p.start:p.stop].reshape(tuple(x.shape[:-1]) + p.unconstrained_shape)


def _split_spec(name: str, spec) -> tuple[tuple[int, ...], constraints.Constraint]:
    if isinstance(spec, constraints.Constraint):
        raise TypeError(f"params[{name!r}]: give (shape, constraint), e.g. ((), {spec}); got the "
                        "constraint alone")
    if (isinstance(spec, (tuple, list)) and len(spec) == 2
            and not isinstance(spec, torch.Size)
            and (isinstance(spec[1], constraints.Constraint)
                 or (isinstance(spec[1], type) and issubclass(spec[1], constraints.Constraint))
                 or callable(spec[1]))):
        shape, constraint = spec
    else:
        shape, constraint = spec, constraints.real
    return _check_shape(name, shape), constraint


def _check_shape(name: str, shape) -> tuple[int, ...]:
    def is_int(v):
        return not isinstance(v, bool) and hasattr(type(v), "__index__")

    if is_int(shape):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(is_int(s) for s in shape):
        raise TypeError(f"params[{name!r}]: shape must be () or an int or a tuple of ints, got "
                        f"{shape!r}")
    shape = tuple(operator.index(s) for s in shape)
    if any(s < 1 for s in shape):
        raise ValueError(f"params[{name!r}]: every size in the shape must be at least 1, got "
                         f"{shape}")
    return shape


def _check_constraint(name: str, shape: tuple[int, ...], c) -> constraints.Constraint:
    if not isinstance(c, constraints.Constraint):
        raise TypeError(f"params[{name!r}]: the constraint must be a constraint object (one of "
                        f"{_SUPPORTED}), got {c!r}; a constraint with bounds is called with them")
    kind = type(c)
    if kind is _REAL:
        return c
    if kind is _GREATER:
        return constraints.greater_than(_check_bound(name, shape, c.lower_bound, "lower bound"))
    if kind is _LESS:
        return constraints.less_than(_check_bound(name, shape, c.upper_bound, "upper bound"))
    if kind is _INTERVAL:
        lo = _check_bound(name, shape, c.lower_bound, "lower bound")
        hi = _check_bound(name, shape, c.upper_bound, "upper bound")
        if not bool(torch.all(torch.as_tensor(lo, dtype=torch.float64)
                              < torch.as_tensor(hi, dtype=torch.float64))):
            raise ValueError(f"params[{name!r}]: interval needs lower bound < upper bound, got "
                             f"{c}")
        return constraints.interval(lo, hi)
    if kind in (_SIMPLEX, Ordered):
        if not shape:
            raise ValueError(f"params[{name!r}]: {c} constrains the last dimension; give a shape "
                             "with at least one dimension, not ()")
        if kind is _SIMPLEX and shape[-1] < 2:
            raise ValueError(f"params[{name!r}]: a simplex needs at least 2 entries in its last "
                             f"dimension, got shape {shape}")
        return c
    raise ValueError(f"params[{name!r}]: constraint {c} is not supported; supported: {_SUPPORTED}")


def _check_bound(name: str, shape: tuple[int, ...], bound, what: str):
    """A finite float, or a float64 tensor that broadcasts to ``shape``."""
    if isinstance(bound, bool) or not isinstance(bound, (int, float, torch.Tensor)):
        raise TypeError(f"params[{name!r}]: the {what} must be a number or a tensor, got "
                        f"{bound!r}")
    t = torch.as_tensor(bound, dtype=torch.float64)
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"params[{name!r}]: the {what} must be finite, got {bound!r}")
    if t.numel() == 1 and t.ndim <= len(shape):
        return float(t.reshape(()))
    try:
        fits = torch.broadcast_shapes(t.shape, shape) == shape
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"params[{name!r}]: the {what} shaped {tuple(t.shape)} does not broadcast "
                         f"to the parameter's shape {shape}")
    return t


def _unconstrained_shape(shape: tuple[int, ...], c) -> tuple[int, ...]:
    if isinstance(c, _SIMPLEX):
        return shape[:-1] + (shape[-1] - 1,)
    return shape


def flat_names(base: str, shape: tuple[int, ...]) -> list[str]:
    """A parameter's flat names, 0-based, row-major: ``mu``; ``a[0]``, ``a[1]``; ``L[0,1]``."""
    if not shape:
        return [base]
    idx = torch.cartesian_prod(*[torch.arange(s) for s in shape]).reshape(-1, len(shape))
    return [f"{base}[{','.join(str(int(i)) for i in row)}]" for row in idx]
