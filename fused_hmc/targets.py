"""The Gaussian target family that the samplers compute inside the kernel, with gradients.

Pass one as ``fused_hmc.sample(..., target=...)``:

- :class:`StandardGaussian` ``N(mu, I)``: the seed's target (``target=None`` with ``mu=`` is the same);
- :class:`DiagonalGaussian` ``N(mu, diag(scale^2))``;
- :class:`DenseGaussian` ``N(mu, Lambda^-1)`` given the precision matrix Lambda (symmetric positive
  definite, dim <= :data:`MAX_DENSE_DIM`).

Each has pure-torch ``log_prob`` and ``grad`` (the gradient of log_prob), the independent reference
the kernel is tested against, and the exact ``mean`` / ``covariance`` for checking samples. The
parameters are kept in float64 on the CPU; the sampler converts them to the chains' dtype and device
(``op_tensors``). Importing this module never loads the extension.

Every subclass of :class:`BuiltInTarget` that names its op target registers itself in
:data:`BUILT_IN`, from which the sampler's checks, saved results and the CLI (``--target NAME``,
its flags, first line and start) take the set of built-in targets: a new one is its C++ header
(csrc/targets.def) and one class here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import ClassVar

import torch

from ._limits import LIMITS

# The largest dimension of a dense target (csrc/math/limits.h, kMaxDenseDim).
MAX_DENSE_DIM = LIMITS["kMaxDenseDim"]

# Relative asymmetry of a dense precision that is put down to rounding and symmetrised away.
_SYMMETRY_TOLERANCE = 1e-6


def _vector(name: str, value, dim: int | None = None) -> torch.Tensor:
    t = torch.as_tensor(value).detach().to(device="cpu", dtype=torch.float64).clone()
    if t.dim() != 1 or t.shape[0] < 1 or (dim is not None and t.shape[0] != dim):
        want = f"[{dim}]" if dim is not None else "[dim] with dim >= 1"
        raise ValueError(f"{name} must have shape {want}, got {list(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} has non-finite entries")
    return t


def check_fits(name: str, value: torch.Tensor, dtype: torch.dtype, *, positive: bool,
               origin: tuple[str, torch.Tensor] | None = None, chains: bool = True) -> None:
    """Raises ValueError naming `name` and `dtype` when a float64 parameter does not survive the
    rounding to the chains' dtype: an entry becomes inf, or (positive=True) falls below the dtype's
    smallest normal number (0 or subnormal, its precision lost). Checked after the conversion: a
    parameter valid in float64 may overflow or underflow in float32. origin: the argument (name,
    values of value's shape) that the parameter was computed from, named too; chains: `dtype` is
    the chains' (else the float64 the parameters are kept in)."""
    value = value.detach().to(dtype=torch.float64)
    rounded = value.to(dtype)
    info = torch.finfo(dtype)
    bad = ~torch.isfinite(rounded)
    if positive:
        bad |= rounded < info.tiny
    if not bool(bad.any()):
        return
    i = int(bad.flatten().nonzero()[0])
    what = "overflows" if not math.isfinite(float(rounded.flatten()[i])) else "underflows"
    given = (f" (from {origin[0]} = {float(origin[1].flatten()[i]):.3g})" if origin is not None
             else "")
    span = (f"positive normal numbers {info.tiny:.3g} .. {info.max:.3g}" if positive
            else f"magnitudes up to {info.max:.3g}")
    role = ", the chains' dtype" if chains else ""
    raise ValueError(f"{name} = {float(value.flatten()[i]):.3g}{given} {what} in {dtype}{role} "
                     f"(it holds {span}); rescale the problem"
                     + (" or use float64 chains" if dtype != torch.float64 else ""))


# The built-in targets by their op target's name, as they registered (BuiltInTarget subclasses).
BUILT_IN: dict[str, type[BuiltInTarget]] = {}


def _one_of(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


class BuiltInTarget:
    """What the built-in targets share: the mean, how the sampler passes them to the op, and what
    the CLI asks of them. A subclass that sets ``op_target`` registers itself in BUILT_IN."""

    op_target: ClassVar[str]  # the chain ops' name for it (csrc/targets.def); --target's name
    # The CLI: --target NAME's help; the shape flags it takes besides --mean ("scale",
    # "correlation"); the largest dim it supports (None: any).
    flag_help: ClassVar[str]
    flags: ClassVar[tuple[str, ...]] = ()
    max_dim: ClassVar[int | None] = None
    # N(mu, I) whatever the parameters: the case with an exactly known acceptance rate
    # (validation.gaussian_exact's isotropic one).
    unit_covariance: ClassVar[bool] = False
    mu: torch.Tensor

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "op_target" in cls.__dict__:
            BUILT_IN[cls.op_target] = cls

    @classmethod
    def from_flags(cls, mu: torch.Tensor, scale: torch.Tensor,
                   correlation: torch.Tensor | None) -> BuiltInTarget:
        """The target of the CLI's flags: mean mu [d], standard deviations scale [d] and the
        correlation matrix [d, d] (None unless the class takes "correlation"), float64."""
        raise NotImplementedError

    def describe(self) -> str:
        """The target in the CLI run's first line."""
        raise NotImplementedError

    def draw(self, chains: int, dtype: torch.dtype, device,
             generator: torch.Generator) -> torch.Tensor:
        """[chains, dim] independent draws from the target (chains started at stationarity)."""
        z = torch.randn(chains, self.dim, device=device, dtype=dtype, generator=generator)
        factor = torch.linalg.cholesky(self.covariance).to(dtype=dtype, device=device)
        return z @ factor.T + self.mu.to(dtype=dtype, device=device)

    def parameters(self) -> dict[str, torch.Tensor]:
        """The parameters by name ([d] or [d, d] float64 on the CPU), as the constructor takes
        them: ``type(t)(**t.parameters())`` is ``t`` again (how a saved target is restored)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __eq__(self, other) -> bool:
        """Targets of one kind with the same parameters, bit for bit, are equal (so a target saved
        with a result and loaded again equals the one sampled)."""
        if type(other) is not type(self):
            return NotImplemented
        return all(torch.equal(a, b) for a, b in zip(self.parameters().values(),
                                                     other.parameters().values()))

    def __hash__(self) -> int:
        return hash((type(self).__name__,) + tuple(t.numpy().tobytes()
                                                   for t in self.parameters().values()))

    @property
    def dim(self) -> int:
        return self.mu.shape[0]

    @property
    def mean(self) -> torch.Tensor:
        """[d] float64, the exact mean."""
        return self.mu

    @property
    def variance(self) -> torch.Tensor:
        """[d] float64, the exact marginal variances."""
        return torch.diagonal(self.covariance).clone()

    def _op_precision(self) -> torch.Tensor | None:
        raise NotImplementedError

    def op_tensors(self, dtype: torch.dtype, device) -> list[torch.Tensor]:
        """The chain ops' target_tensors ([mu], or [mu, precision] with precision [d] or [d, d]) in
        the chains' dtype and device; raises ValueError when the parameters do not survive that
        rounding."""
        name = type(self).__name__
        check_fits(f"{name} mu", self.mu, dtype, positive=False)
        self._check_precision_fits(dtype)
        tensors = [self.mu.to(dtype=dtype, device=device).contiguous()]
        precision = self._op_precision()
        if precision is not None:
            tensors.append(precision.to(dtype=dtype, device=device).contiguous())
        return tensors

    def op_name(self, dtype: torch.dtype, device, chains: int | None = None,
                dense_mass: bool = False) -> str:
        """The chain ops' name for this target (any dtype, device, chain count and mass)."""
        return self.op_target

    def op_scalars(self) -> list[float]:
        """The chain ops' target_scalars: none for the Gaussians."""
        return []

    def _check_precision_fits(self, dtype: torch.dtype) -> None:
        pass

    def _centred(self, q: torch.Tensor) -> torch.Tensor:
        return q - self.mu.to(dtype=q.dtype, device=q.device)


@dataclass(frozen=True, eq=False)
class StandardGaussian(BuiltInTarget):
    """N(mu, I). mu: [d]."""

    mu: torch.Tensor
    op_target: ClassVar[str] = "standard"
    flag_help: ClassVar[str] = "N(mean, I)"
    unit_covariance: ClassVar[bool] = True

    def __post_init__(self):
        object.__setattr__(self, "mu", _vector("mu", self.mu))

    @classmethod
    def from_flags(cls, mu, scale, correlation) -> StandardGaussian:
        return cls(mu)

    def describe(self) -> str:
        return f"N({float(self.mu[0]):g}, I)"

    def draw(self, chains: int, dtype: torch.dtype, device,
             generator: torch.Generator) -> torch.Tensor:
        z = torch.randn(chains, self.dim, device=device, dtype=dtype, generator=generator)
        return z + self.mu.to(dtype=dtype, device=device)

    @property
    def covariance(self) -> torch.Tensor:
        return torch.eye(self.dim, dtype=torch.float64)

    def log_prob(self, q: torch.Tensor) -> torch.Tensor:
        """[..., d] -> [...]: the normalised log density."""
        x = self._centred(q)
        return -0.5 * (x ** 2).sum(-1) - 0.5 * self.dim * math.log(2 * math.pi)

    def grad(self, q: torch.Tensor) -> torch.Tensor:
        """[..., d] -> [..., d]: grad log_prob = -(q - mu)."""
        return -self._centred(q)

    def _op_precision(self) -> None:
        return None


@dataclass(frozen=True, eq=False)
class DiagonalGaussian(BuiltInTarget):
    """N(mu, diag(scale^2)). mu, scale: [d], scale > 0 (standard deviations)."""

    mu: torch.Tensor
    scale: torch.Tensor
    op_target: ClassVar[str] = "diagonal"
    flag_help: ClassVar[str] = "N(mean, diag(scale^2))"
    flags: ClassVar[tuple[str, ...]] = ("scale",)

    @classmethod
    def from_flags(cls, mu, scale, correlation) -> DiagonalGaussian:
        return cls(mu, scale)

    def describe(self) -> str:
        lo, hi = float(self.scale.min()), float(self.scale.max())
        scale = f"scale {lo:g}" if lo == hi else f"scale {lo:g} .. {hi:g}"
        return f"N({float(self.mu[0]):g}, diag(scale^2)), {scale}"

    def __post_init__(self):
        mu = _vector("mu", self.mu)
        scale = _vector("scale", self.scale, mu.shape[0])
        if not bool((scale > 0).all()):
            raise ValueError("scale must be > 0 (standard deviations)")
        object.__setattr__(self, "mu", mu)
        object.__setattr__(self, "scale", scale)
        check_fits("DiagonalGaussian precision 1 / scale^2", self.precision, torch.float64,
                   positive=True, origin=("scale", scale), chains=False)

    @property
    def precision(self) -> torch.Tensor:
        """[d] float64, 1 / scale^2: what the kernel multiplies by."""
        return self.scale ** -2

    @property
    def covariance(self) -> torch.Tensor:
        return torch.diag(self.scale ** 2)

    def log_prob(self, q: torch.Tensor) -> torch.Tensor:
        x = self._centred(q)
        prec = self.precision.to(dtype=q.dtype, device=q.device)
        return (-0.5 * (x * x * prec).sum(-1) - float(self.scale.log().sum())
                - 0.5 * self.dim * math.log(2 * math.pi))

    def grad(self, q: torch.Tensor) -> torch.Tensor:
        """-(q - mu) / scale^2."""
        return -self._centred(q) * self.precision.to(dtype=q.dtype, device=q.device)

    def _op_precision(self) -> torch.Tensor:
        return self.precision

    def _check_precision_fits(self, dtype: torch.dtype) -> None:
        check_fits("DiagonalGaussian precision 1 / scale^2", self.precision, dtype, positive=True,
                   origin=("scale", self.scale))


@dataclass(frozen=True, eq=False)
class DenseGaussian(BuiltInTarget):
    """N(mu, Lambda^-1) from its precision matrix Lambda [d, d] (symmetric positive definite,
    d <= MAX_DENSE_DIM). An asymmetry within rounding (relative 1e-6, as from inverting a
    covariance) is symmetrised away as (Lambda + Lambda^T) / 2."""

    mu: torch.Tensor
    precision: torch.Tensor
    op_target: ClassVar[str] = "dense"
    flag_help: ClassVar[str] = (f"covariance scale_i scale_j (correlation rho off the diagonal), "
                                f"dim <= {MAX_DENSE_DIM}")
    flags: ClassVar[tuple[str, ...]] = ("scale", "correlation")
    max_dim: ClassVar[int | None] = MAX_DENSE_DIM

    @classmethod
    def from_flags(cls, mu, scale, correlation) -> DenseGaussian:
        return cls.from_covariance(mu, scale[:, None] * correlation * scale[None, :])

    def describe(self) -> str:
        mean = float(self.mu[0])
        return "dense N(mu, Sigma)" + (f", mean {mean:g}" if mean else "")

    def __post_init__(self):
        mu = _vector("mu", self.mu)
        d = mu.shape[0]
        if d > MAX_DENSE_DIM:
            raise ValueError(f"DenseGaussian supports dim <= {MAX_DENSE_DIM} (the kernel keeps a "
                             f"chain's position in shared memory while reading the matrix), got "
                             f"dim {d}; use DiagonalGaussian or a smaller model")
        p = torch.as_tensor(self.precision).detach().to(device="cpu", dtype=torch.float64)
        if p.shape != (d, d):
            raise ValueError(f"precision must have shape [{d}, {d}] to match mu, got "
                             f"{list(p.shape)}")
        if not bool(torch.isfinite(p).all()):
            raise ValueError("precision has non-finite entries")
        if float((p - p.T).abs().max()) > _SYMMETRY_TOLERANCE * float(p.abs().max()):
            raise ValueError("precision must be symmetric")
        p = 0.5 * (p + p.T)
        if int(torch.linalg.cholesky_ex(p).info) != 0:
            raise ValueError("precision must be positive definite")
        object.__setattr__(self, "mu", mu)
        object.__setattr__(self, "precision", p.contiguous())

    @classmethod
    def from_covariance(cls, mu, covariance) -> DenseGaussian:
        """The DenseGaussian with covariance [d, d] (symmetric positive definite)."""
        cov = torch.as_tensor(covariance).detach().to(device="cpu", dtype=torch.float64)
        return cls(mu, torch.linalg.inv(0.5 * (cov + cov.T)))

    @property
    def covariance(self) -> torch.Tensor:
        return torch.linalg.inv(self.precision)

    def log_prob(self, q: torch.Tensor) -> torch.Tensor:
        x = self._centred(q)
        prec = self.precision.to(dtype=q.dtype, device=q.device)
        _, logdet = torch.linalg.slogdet(self.precision)
        return (-0.5 * ((x @ prec) * x).sum(-1) + 0.5 * float(logdet)
                - 0.5 * self.dim * math.log(2 * math.pi))

    def grad(self, q: torch.Tensor) -> torch.Tensor:
        """-Lambda (q - mu)."""
        return -self._centred(q) @ self.precision.to(dtype=q.dtype, device=q.device)

    def _op_precision(self) -> torch.Tensor:
        return self.precision

    def _check_precision_fits(self, dtype: torch.dtype) -> None:
        check_fits("DenseGaussian precision", self.precision, dtype, positive=False)
        rounded = self.precision.to(dtype).to(torch.float64)
        if int(torch.linalg.cholesky_ex(rounded).info) != 0:
            raise ValueError(f"DenseGaussian precision is not positive definite once rounded to "
                             f"{dtype} (the chains' dtype): it is too ill-conditioned for it; use "
                             f"float64 chains or a better-conditioned parametrisation")



def is_built_in(target) -> bool:
    """Whether `target` is a built-in target (else a user's: a CppTarget or TorchModel)."""
    return isinstance(target, BuiltInTarget)


def by_class_name(name: str) -> type[BuiltInTarget] | None:
    """The built-in target class of that name (how a saved result names its target), or None."""
    return next((cls for cls in BUILT_IN.values() if cls.__name__ == name), None)


def kinds() -> str:
    """The built-in targets' class names, as an error message lists them."""
    return _one_of([cls.__name__ for cls in BUILT_IN.values()])
