"""Whether a CppTarget's ``dim`` matches the coordinates its source reads.

A source compiled with a ``dim`` smaller than it reads takes ``x[k]``, ``k >= dim``, from beyond
the chain's row (another chain's coordinates, or past the end); one with a larger ``dim`` leaves
coordinates the density does not depend on, which wander freely (R-hat far above 1). Neither
fails by itself. Two probes find them:

- beyond: the log density at a point laid out as the first ``dim`` values of a longer buffer,
  once with the rest NaN and once with it finite. A source that reads only x[0 .. dim) gives the
  same number twice; one that reads further sees the difference. (The log density, which reads
  x where it lies: the gradient's dual numbers are a copy of x[0 .. dim) on the stack, and a read
  beyond it finds whatever the stack holds.)
- unused: coordinates whose gradient is exactly 0 at every point tried: the starting points and
  random ones (a density that depends on a coordinate has a nonzero derivative in it almost
  everywhere; the random points keep chains started at the mode, where every derivative is 0,
  from looking unused).
"""
from __future__ import annotations

import torch

class UnusedCoordinatesWarning(UserWarning):
    """The target's log density does not depend on some coordinates (dim larger than the source
    reads?)."""


# Values after the row in the probe's buffer: a source reading x[dim + PAD] or beyond is missed.
PAD = 4096
# Points the "beyond" probe evaluates (one launch each), and random points the unused probe adds.
PROBE_POINTS = 4
RANDOM_POINTS = 16


def random_points(dim: int, dtype: torch.dtype, device, n: int = RANDOM_POINTS) -> torch.Tensor:
    """[n, dim] uniform on [-2, 2] (Stan's initialisation), from a CPU generator with a fixed
    seed, so a check gives the same answer every time."""
    generator = torch.Generator().manual_seed(20_250_530)
    u = torch.rand(n, dim, dtype=torch.float64, generator=generator)
    return (4 * u - 2).to(dtype=dtype, device=device)


def reads_beyond_dim(target, points: torch.Tensor) -> bool:
    """Whether `target`'s log density at one of `points` [n, dim] depends on values stored after
    the point's dim coordinates."""
    n, dim = points.shape
    for row in points[:PROBE_POINTS]:
        results = []
        for fill in (float("nan"), 0.5):
            buffer = torch.full((dim + PAD,), fill, dtype=points.dtype, device=points.device)
            buffer[:dim] = row
            results.append(target.log_density(buffer[:dim].view(1, dim)))
        if not torch.allclose(*results, rtol=0, atol=0, equal_nan=True):
            return True
    return False


def unused_coordinates(gradient: torch.Tensor) -> list[int]:
    """The coordinates whose gradient [n, dim] is exactly 0 at all of n >= 2 points."""
    if gradient.shape[0] < 2:
        return []
    return (gradient == 0).all(dim=0).nonzero().flatten().tolist()


def _coordinates(ks: list[int]) -> str:
    shown = ", ".join(f"x[{k}]" for k in ks[:8])
    return shown + (f" and {len(ks) - 8} more" if len(ks) > 8 else "")


def beyond_message(dim: int, name: str = "dim") -> str:
    return (f"{name} = {dim} is less than the coordinates the target's source reads: its log "
            f"density changes with values stored after x[{dim - 1}] (it reads x[k] for some "
            f"k >= {dim}); give {name} the number of parameters the source reads")


def unused_message(ks: list[int], dim: int, points: int, name: str = "dim") -> str:
    return (f"the target's log density does not depend on {_coordinates(ks)} (its gradient is 0 "
            f"in them at all {points} points tried): is {name} = {dim} more than the "
            "parameters the source reads? Such coordinates are never constrained, and their "
            "chains do not mix")
