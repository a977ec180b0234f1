"""``fused-hmc sample --target NAME``: the built-in target (fused_hmc.targets.BUILT_IN) the flags
describe, the exact acceptance rate where one is known, and the moments checked against the exact
ones. Its chains start from the target itself (BuiltInTarget.draw), so at stationarity."""
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
    """The built-in target --target NAME and its flags describe (fused_hmc.targets.BUILT_IN)."""
    from ..targets import BUILT_IN

    kind, d = BUILT_IN[args.target], args.dim
    for flag in ("scale", "correlation"):
        if getattr(args, flag) is not None and flag not in kind.flags:
            takers = " or ".join(name for name, other in BUILT_IN.items() if flag in other.flags)
            raise CliError(f"--{flag}", f"needs --target {takers}"
                           + (f" ({args.target} has scale 1)" if flag == "scale" else ""))
    largest = torch.finfo(getattr(torch, args.dtype)).max
    if abs(args.mean) > largest:  # else the start overflows, blamed on q0
        raise CliError("--mean", f"{args.mean:g} overflows {args.dtype}, the chains' dtype (it "
                                 f"holds magnitudes up to {largest:.3g}); use --dtype float64")
    mu = torch.full((d,), args.mean, dtype=torch.float64)
    scale = correlation = None
    if "scale" in kind.flags:
        scale = args.scale or [1.0]
        if len(scale) > 2:
            raise CliError("--scale", f"takes one value or two (smallest, largest), got "
                                      f"{len(scale)}")
        scale = (torch.full((d,), scale[0], dtype=torch.float64) if len(scale) == 1 else
                 torch.logspace(math.log10(scale[0]), math.log10(scale[1]), d,
                                dtype=torch.float64))
    if kind.max_dim is not None and d > kind.max_dim:
        raise CliError("--dim", f"--target {args.target} supports dim <= {kind.max_dim}, got {d}")
    if "correlation" in kind.flags:
        rho = args.correlation or 0.0
        if d > 1 and not -1 / (d - 1) < rho < 1:
            raise CliError("--correlation", f"must lie in (-1/(dim - 1), 1) = "
                           f"({-1 / (d - 1):.4g}, 1) for a positive definite covariance, got "
                           f"{rho:g}")
        correlation = torch.full((d, d), rho, dtype=torch.float64).fill_diagonal_(1.0)
    return kind.from_flags(mu, scale, correlation)


def exact_acceptance(args, target, res) -> float | None:
    """The exact stationary acceptance rate where one is known: N(mu, I), identity mass, no jitter,
    a fixed L, one step size for every chain (gaussian_exact's isotropic case)."""
    from ..targets import is_built_in

    step = res.step_size
    if (not is_built_in(target) or not target.unit_covariance or args.jitter
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
