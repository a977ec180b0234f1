"""CppTarget: a user's C++ log density (docs/TARGETS.md), compiled for the CPU and CUDA.

The source is compiled on first use for each (dtype, device kind) it meets, cached on disk
(:mod:`fused_hmc.cpp_build`); the gradient is by forward-mode dual numbers
(``csrc/math/autodiff/dual.h``), or the source's own ``log_density_and_gradient`` with
``gradient=True``. :meth:`CppTarget.check` compares both with torch autograd of a reference
``log_prob``.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Callable, NamedTuple

import torch

from . import cpp_build, cpp_data, lanes as lanes_module
from .cpp_build import CppCompileError

__all__ = ["CppTarget", "CppCompileError", "CppCheckError", "CheckReport"]

_DTYPES = (torch.float32, torch.float64)

# check(): positions are drawn uniformly from [-CHECK_RADIUS, CHECK_RADIUS]^dim (Stan's default
# initialisation of unconstrained parameters), and an error passes below
# CHECK_ULPS * eps(dtype) * scale (see check()).
CHECK_RADIUS = 2.0
CHECK_ULPS = 64


class CppCheckError(ValueError):
    """check() found the compiled log density or gradient disagreeing with its reference."""


class CheckReport(NamedTuple):
    """What check() compared. worst_*: the largest error / tolerance found (< 1 passes)."""

    points: int  # positions compared
    dtype: torch.dtype  # the compiled code's scalar type
    offset: float | None  # median of (compiled - log_prob): the constant the two may differ by
    worst_value: float  # value against log_prob (after the offset); 0 without log_prob
    worst_gradient: float  # gradient against log_prob's autograd; 0 without log_prob
    worst_dual_vs_hand: float  # gradient=True: the hand-written gradient against the duals; else 0


def _word_present(word: str, source: str) -> bool:
    return re.search(rf"\b{word}\b", source) is not None


class CppTarget:
    """A target whose log density is the user's C++ (docs/TARGETS.md).

    source: the C++ text (or a path to a file holding it) defining ``template <typename T, typename
    Data> FUSED_HMC_HD T log_density(const T* x, const Data& data)`` and, with gradient=True, also
    ``log_density_and_gradient(const T* x, T* grad, const Data& data)``. dim: the number of
    unconstrained parameters. data: name -> tensor | float | int, read in C++ as ``data.<name>``.
    names: dim parameter names. log_prob: ``log_prob(x [dim] float64, data) -> 0-d tensor``, a
    torch reference for check(). constrain: optional ``constrain(x [..., dim]) -> {name: [...,
    *shape]}``, the constrained parameters (pure torch): results then show the draws by these
    names and save them as data (see :meth:`constrain`).

    The rows form, for models whose log density is a sum over many data rows: the source
    defines, in place of log_density, ``log_density_rows(const T* x, const Data& data,
    fused_hmc::Rows rows)``: the terms of rows ``rows.first, rows.first + rows.step, ...`` (rows.step
    is the partial count P: 32, or 256 for data of 65,536 rows or more,
    :func:`fused_hmc.lanes.row_partials`), plus, where ``rows.first == 0``, the terms of no row (and
    with gradient=True ``log_density_and_gradient_rows(x, grad, data, rows)``, writing that share's
    gradient). log p is the sum of the P shares by one fixed pairwise tree, on the CPU and on CUDA
    (csrc/math/targets/lane_rows.h, docs/LANES.md). lanes: the CUDA threads a chain of a rows-form
    source takes (a power of two from 1 to P, at most 256; they share the P shares; above 32 a
    chain is a CUDA block), or "auto" (the default): chosen when sampling from the chain count, the
    GPU and the data (:func:`fused_hmc.lanes.choose_lanes`; 1 on the CPU). The draws are the same
    for any lanes. A source in the plain form takes one thread a
    chain (lanes "auto" or 1). ``FUSED_HMC_DIM`` is dim as a compile-time constant: loops
    bounded by it keep x and grad in registers on the GPU.

    vector_chains=True runs the CPU build's chains W at a time in the lanes of a vector register
    (8 float32 or 4 float64 chains with AVX): the source is compiled once more with T a pack of
    chains (csrc/cpu/simd/pack.h), or with gradient=False the duals of one (``Dual<Pack, W>``,
    csrc/math/autodiff/dual.h), so it may use T only through arithmetic and the functions above,
    never in an ``if`` or ``?:``. The draws are bit for bit those of
    vector_chains=False (docs/CPU.md).
    """

    def __init__(self, source, dim: int, data: dict | None = None, names=None,
                 log_prob: Callable | None = None, gradient: bool = False,
                 lanes: int | str = "auto",
                 constrain: Callable | None = None, vector_chains: bool = False):
        self.source, self.source_name = self._read_source(source)
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"dim must be an int, got {type(dim).__name__} {dim!r}")
        if dim < 1:
            raise ValueError(f"dim must be at least 1, got {dim}")
        self.dim = dim
        if not isinstance(gradient, bool):
            raise TypeError(f"gradient must be True or False, got {gradient!r}")
        self.has_gradient = gradient
        if not isinstance(vector_chains, bool):
            raise TypeError(f"vector_chains must be True or False, got {vector_chains!r}")
        self.vector_chains = vector_chains
        lanes_module.check_lanes(lanes)
        self.lanes = lanes  # as asked: "auto" or G (lanes_for: the lanes a run takes)
        rows_value, _ = cpp_build.entry_points(rows=True)
        self.rows_form = _word_present(rows_value.name, self.source)
        value, hand = cpp_build.entry_points(self.rows_form or lanes not in ("auto", 1))
        with_lanes = f" (lanes={lanes})" if lanes not in ("auto", 1) else ""
        if not _word_present(value.name, self.source):
            raise ValueError(f"source defines no {value.name}{with_lanes}: it must define "
                             f"{value.signature}")
        if gradient and not _word_present(hand.name, self.source):
            raise ValueError(f"gradient=True{with_lanes}, but source defines no {hand.name}: it "
                             f"must define {hand.signature}")
        self.names = self._check_names(names, dim)
        if log_prob is not None and not callable(log_prob):
            raise TypeError(f"log_prob must be callable (x [dim], data) -> 0-d tensor, got "
                            f"{type(log_prob).__name__}")
        self.log_prob = log_prob
        if constrain is not None and not callable(constrain):
            raise TypeError(f"constrain must be callable x [..., dim] -> dict name -> [..., "
                            f"*shape], got {type(constrain).__name__}")
        self._constrain = constrain
        self._constrained_shapes: dict[str, tuple[int, ...]] | None = None
        self._fields, self.data = cpp_data.prepare(data)
        if self.rows_form:
            lanes_module.check_lanes(lanes, self.data_rows)
        self._arguments: dict[tuple[torch.dtype, torch.device], tuple] = {}
        self._modules: dict[tuple[torch.dtype, str, int, bool], object] = {}
        self._registered: set[str] = set()
        for f in self._fields:
            if f.kind == "int" and abs(self.data[f.name]) > 2**53:
                raise ValueError(f"data[{f.name!r}] = {self.data[f.name]} is beyond 2**53 in "
                                 "magnitude: the sampler passes int scalars as doubles")

    @staticmethod
    def _read_source(source) -> tuple[str, str]:
        if isinstance(source, os.PathLike):
            path = Path(source)
            return path.read_text(), path.name
        if not isinstance(source, str):
            raise TypeError(f"source must be a str of C++ (or a path), got "
                            f"{type(source).__name__}")
        if not source.strip():
            raise ValueError("source is empty")
        return source, "<source>"

    @staticmethod
    def _check_names(names, dim: int) -> list[str] | None:
        if names is None:
            return None
        names = list(names)
        if len(names) != dim:
            raise ValueError(f"names has {len(names)} entries, dim is {dim}")
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"names must be str, got {type(n).__name__} {n!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"names has duplicates: {sorted({n for n in names if names.count(n) > 1})}")
        return names

    def __repr__(self) -> str:
        data = ", ".join(f.name for f in self._fields)
        lanes = f", lanes={self.lanes!r}" if self.rows_form else ""
        return f"CppTarget(dim={self.dim}, data=[{data}], gradient={self.has_gradient}{lanes})"

    # -- constrained parameters (results show and save the draws by these names) ---------------

    @property
    def has_constrain(self) -> bool:
        return self._constrain is not None

    def constrain(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The constrained parameters of x [..., dim]: {name: [..., *shape]} (the ``constrain=``
        callable, its output checked)."""
        if self._constrain is None:
            raise ValueError("this CppTarget was made without constrain=: it has no constrained "
                             "parameters")
        if not isinstance(x, torch.Tensor) or x.ndim == 0 or x.shape[-1] != self.dim:
            raise ValueError(f"x must be a tensor shaped [..., {self.dim}], got "
                             f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x)}")
        from .sampling.constrained import checked_values

        return checked_values(self._constrain(x), tuple(x.shape[:-1]))

    @property
    def constrained_shapes(self) -> dict[str, tuple[int, ...]] | None:
        """{name: shape} of :meth:`constrain`'s output (found once, at x = 0), or None without
        ``constrain=``."""
        if self._constrain is None:
            return None
        if self._constrained_shapes is None:
            values = self.constrain(torch.zeros(1, self.dim, dtype=torch.float64))
            self._constrained_shapes = {n: tuple(v.shape[1:]) for n, v in values.items()}
        return self._constrained_shapes

    # -- compiled module and its arguments (the sampler uses these too) -------------------------

    def build_spec(self, dtype: torch.dtype, device_kind: str, lanes: int = 1,
                   dense_mass: bool = False) -> cpp_build.BuildSpec:
        return cpp_build.BuildSpec(self.source, self.source_name, self.dim,
                                   cpp_build.scalar_name(dtype), device_kind, self._fields,
                                   self.has_gradient, lanes, self.rows_form, self.row_partials,
                                   self.vector_chains, dense_mass and device_kind == "cuda")

    @property
    def data_rows(self) -> int:
        """The data's rows as lanes="auto" counts them: the largest extent of any data tensor
        (1 without tensors)."""
        return max((max(t.shape, default=1) for t in self.data.values()
                    if isinstance(t, torch.Tensor)), default=1)

    @property
    def row_partials(self) -> int:
        """P, the strided partial sums log p is formed from (rows.step): chosen from the data's
        rows alone (:func:`fused_hmc.lanes.row_partials`) for a rows-form source, 1 for a plain
        one."""
        return lanes_module.row_partials(self.data_rows) if self.rows_form else 1

    def lanes_for(self, chains: int | None, device) -> int:
        """The lanes a run of `chains` chains on `device` takes: 1 for a plain source, the lanes
        asked for, or with lanes="auto" :func:`fused_hmc.lanes.choose_lanes` on the device's SMs
        (1 on the CPU, where the lanes change nothing, or with chains None)."""
        device = torch.device(device)
        if not self.rows_form:
            return 1
        if self.lanes != "auto":
            return self.lanes
        if chains is None or device.type != "cuda":
            return 1
        return lanes_module.choose_lanes(chains, lanes_module.device_sm_count(device),
                                         self.data_rows)

    def module(self, dtype: torch.dtype, device: torch.device, lanes: int | None = None,
               dense_mass: bool = False):
        """The compiled module for positions of `dtype` on `device`, its chains on `lanes` lanes
        (built on first use, one per lanes). lanes None: any module already built for the dtype
        and device (their evaluations agree bit for bit), else lanes_for(None, device).
        dense_mass: a CUDA module that also has the kernels with a dense mass (a second build,
        only for runs that ask for one; the CPU's always have them)."""
        kind = "cuda" if torch.device(device).type == "cuda" else "cpu"
        dense_mass = dense_mass and kind == "cuda"
        if kind == "cuda":
            from . import _build

            reason = _build.cuda_missing_reason()
            if reason is not None:
                raise _build.CudaUnavailableError(
                    f"CppTarget cannot compile for CUDA: {reason}; pass CPU tensors")
        if lanes is None:
            built = [g for (d, k, g, _) in self._modules if (d, k) == (dtype, kind)]
            lanes = built[0] if built else self.lanes_for(None, device)
        key = (dtype, kind, lanes, dense_mass)
        if key not in self._modules:
            self.data_arguments(dtype, device)  # data that overflows dtype: said before compiling
            self._modules[key] = cpp_build.load(self.build_spec(dtype, kind, lanes, dense_mass))
        return self._modules[key]

    def data_arguments(self, dtype: torch.dtype, device: torch.device) -> tuple:
        """(tensors, floats, ints): the data as make_data takes it, for positions of `dtype` on
        `device` (converted once and kept)."""
        key = (dtype, torch.device(device))
        if key not in self._arguments:
            self._arguments[key] = cpp_data.to_arguments(self._fields, self.data, dtype,
                                                         torch.device(device))
        return self._arguments[key]

    # -- what the sampler's chain ops take (fused_hmc/sampling/kernel.py) --------------------------

    def op_name(self, dtype: torch.dtype, device, chains: int | None = None,
                dense_mass: bool = False) -> str:
        """The chain ops' name for this model's chain kernels in `dtype` on `device` for `chains`
        chains (their lanes: :meth:`lanes_for`), with those of a dense mass where asked:
        compiles the module on first use and registers its kernels with the main library."""
        module = self.module(dtype, device, self.lanes_for(chains, device), dense_mass)
        name = module.target_name()
        if name not in self._registered:
            from . import _build

            if module.chain_params_version() != _build.bindings().chain_params_version():
                raise _build.ExtensionBuildError(
                    "the CppTarget module was compiled against other fused_hmc headers than the "
                    "loaded extension; remove its build directory and retry")
            entry = module.target_entry()
            _build.bindings().register_target(entry)
            if name not in _build.bindings().target_names():
                raise RuntimeError(f"the CppTarget module's registry entry is not {name!r}: its "
                                   "symbols bound to another module's")
            self._registered.add(name)
        return name

    def op_tensors(self, dtype: torch.dtype, device) -> list[torch.Tensor]:
        """The chain ops' target_tensors: the data tensors, in the generated order."""
        return list(self.data_arguments(dtype, device)[0])

    def op_scalars(self) -> list[float]:
        """The chain ops' target_scalars: the float data, then the int data (exact as doubles up to
        2^53, which the constructor checks)."""
        kinds = [f for kind in ("float", "int") for f in self._fields if f.kind == kind]
        return [float(self.data[f.name]) for f in kinds]

    def _positions(self, x, name: str = "x") -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a tensor [n, {self.dim}], got {type(x).__name__}")
        if x.dim() != 2 or x.shape[1] != self.dim:
            raise ValueError(f"{name} must have shape [n, {self.dim}] (dim = {self.dim}), got "
                             f"{list(x.shape)}")
        if x.dtype not in _DTYPES:
            raise TypeError(f"{name} must be float32 or float64, got {x.dtype}")
        if x.device.type not in ("cpu", "cuda"):
            raise ValueError(f"{name} must be on the CPU or a CUDA device, got {x.device}")
        return x.detach().contiguous()

    def _call(self, entry: str, x: torch.Tensor):
        # Any lanes' module evaluates the same tree; with none built yet, the one a run of these
        # x as chains takes (validate_start's q0 then builds the run's module).
        kind = "cuda" if x.device.type == "cuda" else "cpu"
        built = any((d, k) == (x.dtype, kind) for (d, k, _, _) in self._modules)
        module = self.module(x.dtype, x.device,
                             None if built else self.lanes_for(max(x.shape[0], 1), x.device))
        return getattr(module, entry)(x, *self.data_arguments(x.dtype, x.device))

    # -- evaluation -------------------------------------------------------------------------------

    def log_density(self, x: torch.Tensor) -> torch.Tensor:
        """log p at each row of x [n, dim] (float32/float64, CPU or CUDA) -> [n], up to the
        source's constant."""
        return self._call("log_density", self._positions(x))

    def log_density_and_gradient(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log p [n], d log p / dx [n, dim]) at the rows of x [n, dim]: the hand-written
        gradient with gradient=True, else forward-mode duals."""
        return self._call("log_density_and_gradient", self._positions(x))

    def gradient(self, x: torch.Tensor) -> torch.Tensor:
        """d log p / dx at the rows of x [n, dim] -> [n, dim]."""
        return self.log_density_and_gradient(x)[1]

    def dual_log_density_and_gradient(self, x: torch.Tensor):
        """(log p [n], d log p / dx [n, dim]) by dual numbers, even with gradient=True."""
        return self._call("dual_log_density_and_gradient", self._positions(x))

    def validate_start(self, q0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Raises ValueError unless q0 [chains, dim] has this target's dim and log p and its
        gradient are finite at every row; returns (log p [chains], gradient [chains, dim])."""
        q0 = self._positions(q0, "q0")
        value, grad = self.log_density_and_gradient(q0)
        for what, bad in (("NaN", torch.isnan(value)), ("+inf", value == math.inf),
                          ("-inf (zero density)", value == -math.inf)):
            if bool(bad.any()):
                raise ValueError(self._start_message(f"log_density is {what}", q0, bad))
        bad = ~torch.isfinite(grad).all(dim=1)
        if bool(bad.any()):
            raise ValueError(self._start_message("the gradient of log_density is not finite",
                                                 q0, bad))
        return value, grad

    def _start_message(self, what: str, q0: torch.Tensor, bad: torch.Tensor) -> str:
        rows = bad.nonzero().flatten().tolist()
        first = rows[0]
        point = ", ".join(f"{v:.6g}" for v in q0[first].tolist())
        return (f"{what} at {len(rows)} of {q0.shape[0]} starting points (chains "
                f"{rows[:8]}{' ...' if len(rows) > 8 else ''}); q0[{first}] = [{point}]")

    # -- check against torch ----------------------------------------------------------------------

    def check(self, n: int = 16, seed: int = 0, dtype: torch.dtype = torch.float64,
              device="cpu") -> CheckReport:
        """Compares the compiled code with `log_prob`'s torch autograd at n random points, and
        with gradient=True the hand-written gradient with the dual one; raises CppCheckError
        naming the worst point, else returns a CheckReport.

        Points: x ~ Uniform[-2, 2]^dim (torch.Generator seeded with `seed`), rounded to `dtype`.
        The reference evaluates log_prob in float64 at those points with the data rounded to
        `dtype` as the C++ code sees it, so only the compiled code's own rounding differs.
        Values may differ by one constant (a log density is defined up to one): the offset c is
        the median of (compiled - reference) and each point must agree after removing it.
        Tolerance at a point: CHECK_ULPS * eps(dtype) * scale, with the condition-aware scale
        ``s = 1 + |lp| + sum_j |x_j g_j|`` (lp, g: the reference): the size of the terms a log
        density sums (x_j d/dx_j scales a term by its degree in x_j), so cancellation among large
        terms is allowed for; the value uses s + |c|, each gradient entry 1 + max_j |g_j| + s.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        if dtype not in _DTYPES:
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        if self.log_prob is None and not self.has_gradient:
            raise ValueError("check() needs log_prob= (a torch reference) to compare against")
        gen = torch.Generator().manual_seed(seed)
        x = ((torch.rand(n, self.dim, generator=gen, dtype=torch.float64) * 2 - 1)
             * CHECK_RADIUS).to(dtype)
        x_dev = x.to(device)
        value, grad = (t.cpu().double() for t in self.log_density_and_gradient(x_dev))
        eps = torch.finfo(dtype).eps
        worst_value = worst_gradient = worst_dual = 0.0
        offset = None
        if self.log_prob is not None:
            ref_value, ref_grad = self._reference(x.double(), dtype)
            scale = 1 + ref_value.abs() + (x.double() * ref_grad).abs().sum(dim=1)
            offset, worst_value = self._compare_values(x, value, ref_value, scale, eps,
                                                       "log_prob")
            worst_gradient = self._compare_gradients(x, grad, ref_grad, scale, eps,
                                                     "log_prob's autograd gradient")
        if self.has_gradient:
            dual_value, dual_grad = (t.cpu().double()
                                     for t in self.dual_log_density_and_gradient(x_dev))
            scale = 1 + dual_value.abs() + (x.double() * dual_grad).abs().sum(dim=1)
            self._compare_values(x, value, dual_value, scale, eps, "log_density (the value "
                                 "log_density_and_gradient returns)", constant=False)
            worst_dual = self._compare_gradients(x, grad, dual_grad, scale, eps,
                                                 "the dual-number gradient of log_density")
        return CheckReport(n, dtype, offset, worst_value, worst_gradient, worst_dual)

    def _reference(self, x64: torch.Tensor, dtype: torch.dtype):
        data = cpp_data.reference_data(self._fields, self.data, dtype)
        values, grads = [], []
        for row in x64:
            xi = row.clone().requires_grad_(True)
            lp = self.log_prob(xi, data)
            if not isinstance(lp, torch.Tensor) or lp.dim() != 0:
                raise TypeError("log_prob must return a 0-d tensor, got "
                                f"{type(lp).__name__} {getattr(lp, 'shape', '')}")
            (g,) = torch.autograd.grad(lp, xi, allow_unused=True)
            values.append(lp.detach().double())
            grads.append(torch.zeros_like(row) if g is None else g.detach().double())
        return torch.stack(values), torch.stack(grads)

    def _point(self, x: torch.Tensor, i: int) -> str:
        coords = x[i].tolist()
        if self.names is not None:
            return ", ".join(f"{n}={v:.6g}" for n, v in zip(self.names, coords))
        return "[" + ", ".join(f"{v:.6g}" for v in coords) + "]"

    def _compare_values(self, x, value, ref, scale, eps, against, constant=True):
        both_same = (value == ref) | (torch.isnan(value) & torch.isnan(ref))
        finite = torch.isfinite(value) & torch.isfinite(ref)
        mismatched = ~finite & ~both_same
        if bool(mismatched.any()):
            i = int(mismatched.nonzero()[0])
            raise CppCheckError(f"log_density is {float(value[i])} where {against} is "
                                f"{float(ref[i])}, at x[{i}] = {self._point(x, i)}")
        if not bool(finite.any()):
            return None, 0.0
        diff = value - ref
        offset = float(diff[finite].median()) if constant else 0.0
        tol = CHECK_ULPS * eps * (scale + abs(offset))
        ratio = torch.where(finite, (diff - offset).abs() / tol, torch.zeros_like(tol))
        i = int(ratio.argmax())
        if float(ratio[i]) >= 1:
            shift = f" + {offset:.6g} (the median offset)" if constant else ""
            raise CppCheckError(
                f"log_density disagrees with {against}: at x[{i}] = {self._point(x, i)} the "
                f"compiled value is {float(value[i]):.17g}, {against}{shift} gives "
                f"{float(ref[i]) + offset:.17g}; error {float((diff[i] - offset).abs()):.3g} > "
                f"tolerance {float(tol[i]):.3g} (the worst of {len(x)} points)")
        return offset, float(ratio.max())

    def _compare_gradients(self, x, grad, ref, scale, eps, against):
        tol = CHECK_ULPS * eps * (1 + ref.abs().amax(dim=1) + scale)
        err = (grad - ref).abs()
        both_same = (grad == ref) | (torch.isnan(grad) & torch.isnan(ref))
        err = torch.where(both_same, torch.zeros_like(err), err)
        err = torch.where(torch.isnan(err), torch.full_like(err, math.inf), err)
        ratio = err / tol[:, None]
        flat = int(ratio.flatten().argmax())
        i, j = divmod(flat, self.dim)
        if float(ratio[i, j]) >= 1:
            coord = f"{j}] ({self.names[j]})" if self.names is not None else f"{j}]"
            raise CppCheckError(
                f"the gradient disagrees with {against}: at x[{i}] = {self._point(x, i)}, "
                f"d log p / dx[{coord} is {float(grad[i, j]):.17g} compiled, "
                f"{float(ref[i, j]):.17g} expected; error {float(err[i, j]):.3g} > tolerance "
                f"{float(tol[i]):.3g} (the worst of {len(x)} points)")
        return float(ratio.max())
