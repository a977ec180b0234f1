"""Argument checks of ``Sampler`` / ``sample``: each raises a ValueError/TypeError naming the
argument, and returns the value in the form the driver uses."""
from __future__ import annotations

import math
import numbers
import os
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from .. import targets
from ..targets import check_fits
from .warmup import WarmupSettings

INT64_MAX = 2**63 - 1


class Chains(NamedTuple):
    """What the checks need of the chains q0 (its values only check_target reads)."""

    count: int
    dim: int
    dtype: torch.dtype
    device: torch.device

    @classmethod
    def of(cls, q: torch.Tensor) -> Chains:
        return cls(q.shape[0], q.shape[1], q.dtype, q.device)


def count(name: str, value, minimum: int, maximum: int = INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if not minimum <= value <= maximum:
        upper = "" if maximum == INT64_MAX else f" and <= {maximum}"
        raise ValueError(f"{name} must be >= {minimum}{upper}, got {value}")
    return int(value)


def check_flag(name: str, value) -> bool:
    """A bool (numpy's too): a string such as "no" would be truthy, so it is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_path(name: str, value) -> Path | None:
    """None, or an absolute path whose directory exists (checked now, not at the first write)."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {type(value).__name__}")
    path = Path(value).absolute()
    if not path.parent.is_dir():
        raise ValueError(f"{name}: the directory {path.parent} does not exist")
    return path


def check_seconds(name: str, value) -> float:
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value) or value < 0):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def check_q0(q0) -> torch.Tensor:
    if not isinstance(q0, torch.Tensor):
        raise TypeError(f"q0 must be a torch.Tensor [chains, dim], got {type(q0).__name__}")
    if q0.dim() != 2 or q0.shape[0] < 1 or q0.shape[1] < 1:
        raise ValueError(f"q0 must have shape [chains, dim] with chains, dim >= 1, got "
                         f"{list(q0.shape)}")
    if q0.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"q0 must be float32 or float64, got {q0.dtype}")
    if q0.requires_grad and torch.is_grad_enabled():  # as hmc_step and HMC refuse it
        raise ValueError("q0 requires grad, but fused_hmc's transitions are not differentiable "
                         "(the outputs would carry no gradient); pass q0.detach()")
    if not bool(torch.isfinite(q0).all()):
        raise ValueError("q0 has non-finite entries (NaN or inf); start the chains at finite "
                         "values")
    return q0.detach().contiguous().clone()


def check_mu(mu, chains: Chains) -> torch.Tensor:
    if mu is None:
        return torch.zeros(chains.dim, dtype=chains.dtype, device=chains.device)
    mu = torch.as_tensor(mu).detach()
    if mu.shape != (chains.dim,):
        raise ValueError(f"mu must have shape [{chains.dim}] to match q0's dim, got "
                         f"{list(mu.shape)}")
    if not bool(torch.isfinite(mu).all()):
        raise ValueError("mu has non-finite entries")
    check_fits("mu", mu, chains.dtype, positive=False)
    return mu.to(dtype=chains.dtype, device=chains.device).contiguous()


def check_target(target, mu, q: torch.Tensor):
    if target is None:
        return None
    from ..cpp_target import CppTarget
    from .stored_target import StoredCppTarget, UntrustedSourceError, refusal

    if isinstance(target, StoredCppTarget):
        raise UntrustedSourceError(f"target: {refusal('this StoredCppTarget (read from a file)')}")
    built_in = targets.is_built_in(target)
    if not (built_in or isinstance(target, CppTarget)):
        raise TypeError(f"target must be a fused_hmc.targets {targets.kinds()}, or a "
                        f"fused_hmc.CppTarget, got {type(target).__name__}")
    if mu is not None:
        raise ValueError("pass the mean either as mu= or inside target=, not both")
    if target.dim != q.shape[1]:
        raise ValueError(f"target has dim {target.dim} but q0 has dim {q.shape[1]}")
    if not built_in:
        check_target_dim(target, q)
    return target


def check_target_dim(target, q: torch.Tensor) -> None:
    """A CppTarget's dim against what its source reads (dim_check.py): reading beyond dim raises,
    coordinates the density ignores warn; then log p and its gradient finite at every start."""
    from .. import dim_check

    points = dim_check.random_points(target.dim, q.dtype, q.device)
    if dim_check.reads_beyond_dim(target, points):
        raise ValueError(dim_check.beyond_message(target.dim, "target.dim"))
    _, gradient = target.validate_start(q)
    gradient = torch.cat([gradient, target.log_density_and_gradient(points)[1]])
    unused = dim_check.unused_coordinates(gradient)
    if unused:
        warnings.warn(dim_check.unused_message(unused, target.dim, gradient.shape[0],
                                               "target.dim"),
                      dim_check.UnusedCoordinatesWarning, stacklevel=4)


def _positive_tensor(name: str, value, chains: Chains) -> torch.Tensor:
    t = torch.as_tensor(value).detach().to(dtype=torch.float64, device=chains.device)
    if not bool((torch.isfinite(t) & (t > 0)).all()):
        raise ValueError(f"{name} must be finite and > 0 everywhere")
    return t


def check_step_size(step_size, chains: Chains) -> float | torch.Tensor:
    """A float, or a [chains] float64 tensor of per-chain step sizes."""
    if isinstance(step_size, torch.Tensor):
        t = _positive_tensor("step_size", step_size, chains)
        if t.numel() == 1:
            return float(t.reshape(()))
        if t.shape != (chains.count,):
            raise ValueError(f"a step_size tensor must have shape [{chains.count}] (one per "
                             f"chain) or one element, got {list(t.shape)}")
        return t.contiguous()
    if (isinstance(step_size, bool) or not isinstance(step_size, numbers.Real)
            or not math.isfinite(step_size) or step_size <= 0):
        raise ValueError(f"step_size must be a finite number > 0, got {step_size!r}")
    return float(step_size)


MASS_MATRICES = ("diagonal", "dense")


def check_mass_matrix(mass_matrix, chains: Chains) -> str:
    """"diagonal" or "dense" (csrc/math/hmc/dense_mass.h: d <= kMaxDenseMassDim)."""
    if mass_matrix not in MASS_MATRICES:
        raise ValueError(f"mass_matrix must be one of {MASS_MATRICES}, got {mass_matrix!r}")
    if mass_matrix == "dense":
        from .._limits import LIMITS

        limit = LIMITS["kMaxDenseMassDim"]
        if chains.dim > limit:
            raise ValueError(f"mass_matrix='dense' supports dim <= {limit}, got dim "
                             f"{chains.dim}; use mass_matrix='diagonal'")
    return mass_matrix


def check_mass_estimator(warmup, chains: Chains) -> None:
    """mass_estimator="gradients" (csrc/math/hmc/gradient_mass.h) runs on the CPU only for now."""
    if warmup.mass_estimator == "gradients" and chains.device.type != "cpu":
        raise ValueError("mass_estimator='gradients' runs on the CPU only for now (the CUDA "
                         f"kernels estimate the mass from the draws alone); q0 is on "
                         f"{chains.device}: use mass_estimator='draws'")


def check_per_chain_chees(warmup, chains: Chains) -> None:
    """ChEES with per-chain step sizes (pooled=False) runs on the CPU only for now: on CUDA ChEES
    runs inside the pooled warm-up's kernel, which holds one step size."""
    if warmup.adapt_trajectory_length and not warmup.pooled and chains.device.type != "cpu":
        raise ValueError("adapt_trajectory_length=True with pooled=False (per-chain step sizes) "
                         f"runs on the CPU only for now; q0 is on {chains.device}: pass "
                         "pooled=True (or leave pooled unset)")


def check_dense_inverse_mass(inverse_mass, chains: Chains) -> torch.Tensor:
    """A dense inverse mass: [dim, dim] (shared) or [chains, dim, dim] (per chain), symmetric
    positive definite, in the chains' dtype (symmetrised, as its lower triangle is what counts)."""
    t = torch.as_tensor(inverse_mass).detach().to(dtype=torch.float64, device=chains.device)
    count, dim = chains.count, chains.dim
    if t.shape not in ((dim, dim), (count, dim, dim)):
        raise ValueError(f"inverse_mass with mass_matrix='dense' must have shape [{dim}, {dim}] "
                         f"or [{count}, {dim}, {dim}], got {list(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError("inverse_mass has non-finite entries")
    scale = t.abs().amax(dim=(-2, -1), keepdim=True)
    if not bool(((t - t.mT).abs() <= 1e-6 * scale).all()):
        raise ValueError("inverse_mass (dense) must be symmetric")
    t = 0.5 * (t + t.mT)
    if bool((torch.linalg.cholesky_ex(t).info != 0).any()):
        raise ValueError("inverse_mass (dense) must be positive definite (its Cholesky "
                         "factorisation failed)")
    check_fits("inverse_mass", t, chains.dtype, positive=False)
    return t.to(chains.dtype)


def check_inverse_mass(inverse_mass, chains: Chains,
                       mass_matrix: str = "diagonal") -> torch.Tensor | None:
    """None (identity), [dim] (shared) or [chains, dim] (per chain), the chains' dtype; with
    mass_matrix="dense", check_dense_inverse_mass's shapes."""
    if inverse_mass is None:
        return None
    if mass_matrix == "dense":
        return check_dense_inverse_mass(inverse_mass, chains)
    count, dim = chains.count, chains.dim
    shape = tuple(torch.as_tensor(inverse_mass).shape)
    if len(shape) == 3 or (shape == (dim, dim) and count != dim):
        raise ValueError(f"inverse_mass of shape {list(shape)} is a dense matrix: pass "
                         "mass_matrix='dense' too")
    t = _positive_tensor("inverse_mass", inverse_mass, chains)
    if t.shape not in ((dim,), (count, dim)):
        raise ValueError(f"inverse_mass must have shape [{dim}] or [{count}, {dim}], got "
                         f"{list(t.shape)}")
    check_fits("inverse_mass", t, chains.dtype, positive=True)
    return t.to(chains.dtype)


def check_pooled(step_size: float | torch.Tensor, inverse_mass: torch.Tensor | None,
                 settings: WarmupSettings, mass_matrix: str = "diagonal") -> None:
    """A pooled warm-up adapts one step size and inverse mass for all chains: none per chain."""
    per_chain_mass = (inverse_mass is not None
                      and inverse_mass.dim() == (3 if mass_matrix == "dense" else 2))
    if settings.pooled and (isinstance(step_size, torch.Tensor) or per_chain_mass):
        what = ("adapt_trajectory_length=True (the pooled warm-up) adapts one trajectory "
                "length, step size and inverse mass" if settings.adapt_trajectory_length
                else "pooled=True adapts one step size and one inverse mass")
        raise ValueError(f"{what} for all chains: pass a scalar step_size and an "
                         "inverse_mass of shape [dim] (dense: [dim, dim])")


def check_jitter(jitter) -> float:
    if (isinstance(jitter, bool) or not isinstance(jitter, numbers.Real)
            or not math.isfinite(jitter) or not 0 <= jitter < 1):
        raise ValueError(f"jitter must be a number in [0, 1), got {jitter!r}")
    return float(jitter)


def check_step_size_fits(step_size: float | torch.Tensor, jitter: float,
                         settings: WarmupSettings, chains: Chains) -> None:
    """The kernels round each transition's step size, jittered into [1 - jitter, 1 + jitter) eps,
    and its half to the chains' dtype; dual averaging starts warm-up at mu = log(10 eps0) in float64.
    Raises ValueError where one of them would overflow or underflow."""
    eps = torch.as_tensor(step_size, dtype=torch.float64).reshape(-1).cpu()
    smallest, largest = eps.min(), eps.max()
    check_fits("the smallest half step (1 - jitter) step_size / 2", smallest * (1 - jitter) * 0.5,
               chains.dtype, positive=True, origin=("step_size", smallest))
    check_fits("the largest step (1 + jitter) step_size", largest * (1 + jitter), chains.dtype,
               positive=True, origin=("step_size", largest))
    if settings.num_warmup and settings.adapt_step_size and not math.isfinite(10 * float(largest)):
        raise ValueError(f"step_size = {float(largest):.3g} is too large to start warm-up: dual "
                         "averaging starts at mu = log(10 step_size), which overflows float64")


def check_trajectory(trajectory_length, max_leapfrog_steps, num_leapfrog_steps: int,
                     settings: WarmupSettings) -> tuple[float | None, int]:
    """(the fixed trajectory length T or None, the cap on leapfrog steps)."""
    from .._limits import LIMITS

    cap = count("max_leapfrog_steps", max_leapfrog_steps, 1, LIMITS["kMaxLeapfrogSteps"])
    if trajectory_length is not None:
        if (isinstance(trajectory_length, bool) or not isinstance(trajectory_length, numbers.Real)
                or not math.isfinite(trajectory_length) or trajectory_length <= 0):
            raise ValueError("trajectory_length must be a finite number > 0 (or None: "
                             f"num_leapfrog_steps steps), got {trajectory_length!r}")
        if settings.adapt_trajectory_length:
            raise ValueError("trajectory_length= fixes the trajectory length, "
                             "adapt_trajectory_length=True adapts it (starting from "
                             "num_leapfrog_steps * step_size): pass one or the other")
        trajectory_length = float(trajectory_length)
    if settings.adapt_trajectory_length and num_leapfrog_steps > cap:
        raise ValueError(f"num_leapfrog_steps = {num_leapfrog_steps} (the initial trajectory "
                         "length in steps, with adapt_trajectory_length=True) exceeds "
                         f"max_leapfrog_steps = {cap}, the cap on steps")
    return trajectory_length, cap
