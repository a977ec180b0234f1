"""``fused-hmc sample --target standard|diagonal|dense``: the built-in target the flags describe,
chains started from the target itself (so at stationarity), the exact acceptance rate where one
is known, and the moments checked against the exact ones."""
from __future__ import annotations

import argparse
import math

import torch

from .errors import CliError, warn

# Exact stationary acceptance rate of the default configuration (d=64, L=10, eps=0.1):
# validation.gaussian_exact.gaussian_hmc_exact(64, 0.1, 10).acceptance, kept here to spare the
# default run scipy's start-up (tests/statistical/test_checks.py checks the value).
_DEFAULT_EXACT_ACCEPTANCE = 0.9933021193


def target_of(args: argparse.Namespace):
    from ..targets import MAX_DENSE_DIM, DenseGaussian, DiagonalGaussian, StandardGaussian

    d = args.dim
    if args.scale is not None and args.target == "standard":
        raise CliError("--scale", "needs --target diagonal or dense (standard has scale 1)")
    if args.correlation is not None and args.target != "dense":
        raise CliError("--correlation", "needs --target dense")
    largest = torch.finfo(getattr(torch, args.dtype)).max
    if abs(args.mean) > largest:  # else the start overflows, blamed on q0
        raise CliError("--mean", f"{args.mean:g} overflows {args.dtype}, the chains' dtype (it "
                                 f"holds magnitudes up to {largest:.3g}); use --dtype float64")
    mu = torch.full((d,), args.mean, dtype=torch.float64)
    if args.target == "standard":
        return StandardGaussian(mu)
    scale = args.scale or [1.0]
    if len(scale) > 2:
        raise CliError("--scale", f"takes one value or two (smallest, largest), got {len(scale)}")
    scale = (torch.full((d,), scale[0], dtype=torch.float64) if len(scale) == 1 else
             torch.logspace(math.log10(scale[0]), math.log10(scale[1]), d, dtype=torch.float64))
    if args.target == "diagonal":
        return DiagonalGaussian(mu, scale)
    if d > MAX_DENSE_DIM:
        raise CliError("--dim", f"--target dense supports dim <= {MAX_DENSE_DIM}, got {d}")
    rho = args.correlation or 0.0
    if d > 1 and not -1 / (d - 1) < rho < 1:
        raise CliError("--correlation", f"must lie in (-1/(dim - 1), 1) = ({-1 / (d - 1):.4g}, 1) "
                       f"for a positive definite covariance, got {rho:g}")
    correlation = torch.full((d, d), rho, dtype=torch.float64).fill_diagonal_(1.0)
    return DenseGaussian.from_covariance(mu, scale[:, None] * correlation * scale[None, :])


def describe(target) -> str:
    """The built-in target in the run's first line."""
    from ..targets import DenseGaussian, DiagonalGaussian

    mean = float(target.mu[0])
    if isinstance(target, DiagonalGaussian):
        lo, hi = float(target.scale.min()), float(target.scale.max())
        scale = f"scale {lo:g}" if lo == hi else f"scale {lo:g} .. {hi:g}"
        return f"N({mean:g}, diag(scale^2)), {scale}"
    if isinstance(target, DenseGaussian):
        return "dense N(mu, Sigma)" + (f", mean {mean:g}" if mean else "")
    return f"N({mean:g}, I)"


def start(target, chains: int, dtype: torch.dtype, device: torch.device,
          generator: torch.Generator) -> torch.Tensor:
    """Draws from the target itself, so the chains start at stationarity."""
    from ..targets import StandardGaussian

    z = torch.randn(chains, target.dim, device=device, dtype=dtype, generator=generator)
    if isinstance(target, StandardGaussian):
        return z + target.mu.to(dtype=dtype, device=device)
    factor = torch.linalg.cholesky(target.covariance).to(dtype=dtype, device=device)
    return z @ factor.T + target.mu.to(dtype=dtype, device=device)


def exact_acceptance(args, target, res) -> float | None:
    """The exact stationary acceptance rate where one is known: N(mu, I), identity mass, no jitter,
    a fixed L, one step size for every chain (gaussian_exact's isotropic case)."""
    from ..targets import StandardGaussian

    step = res.step_size
    if (not isinstance(target, StandardGaussian) or args.jitter
            or res.trajectory_length is not None or not bool((res.inverse_mass == 1).all())
            or not bool((step == step[0]).all())):
        return None
    eps = float(step[0])
    if (args.dim, args.leapfrog, eps) == (64, 10, 0.1):
        return _DEFAULT_EXACT_ACCEPTANCE
    try:
        from ..validation.gaussian_exact import gaussian_hmc_exact

        return gaussian_hmc_exact(args.dim, eps, args.leapfrog).acceptance
    except (ImportError, ValueError):
        return None


def report_moments(target, res) -> None:
    """Moments against the target's exact ones (from the Welford statistics, no draws needed)."""
    from .. import diagnostics

    if res.num_kept == 0 and not res.interrupted:
        warn(f"--thin {res.thin} keeps none of the {res.num_transitions} sampling transitions: "
              "no moments or diagnostics; use --thin <= --samples")
    elif 0 < res.num_kept < 4:
        warn(f"only {res.num_kept} draws kept per chain: the variance needs 2 and ESS / R-hat 4; "
              "use more --samples or a smaller --thin")
    if res.num_kept >= 2:
        mean, sd = diagnostics.pooled_moments(res.mean.cpu().numpy(), res.var.cpu().numpy(),
                                              res.num_kept)
        truth_sd = target.variance.sqrt().numpy()
        error = (mean - target.mean.numpy()) / truth_sd
        ratio = sd ** 2 / truth_sd ** 2
        print(f"mean              (mean - truth) / sd: average {error.mean():+.4f}, largest "
              f"|.| over dims {abs(error).max():.4f}")
        print(f"variance          variance / truth: average {ratio.mean():.4f}, range over dims "
              f"{ratio.min():.4f} .. {ratio.max():.4f}")
        if not (math.isfinite(error.max()) and math.isfinite(ratio.max())):
            warn("non-finite moments: the chains diverged")
