"""The functional form of one fused HMC transition, for every noise mode."""
from __future__ import annotations

import numbers

import torch

from . import _build, ops
from ._limits import LIMITS
from .torch_stream_guard import known_verdict, torch_stream_is_exact

RNG_MODES = ("philox", "torch")


_ZERO_MEANS: dict[tuple[int, torch.dtype, torch.device], torch.Tensor] = {}
_MAX_ZERO_MEANS = 64


def _default_mean(q: torch.Tensor) -> torch.Tensor:
    """mu=None: a cached, never-written zero mean, so it costs no launch per call.

    Never cached while tracing (a fake tensor) or while a CUDA graph captures: a tensor made during
    capture lives in the graph's private pool and is only zeroed when the graph replays.
    """
    key = (q.shape[-1], q.dtype, q.device)
    mean = _ZERO_MEANS.get(key)
    if mean is not None:
        return mean
    mean = q.new_zeros(q.shape[-1:])
    if q.is_cuda and torch.cuda.is_current_stream_capturing():
        return mean
    if len(_ZERO_MEANS) >= _MAX_ZERO_MEANS:
        _ZERO_MEANS.clear()
    _ZERO_MEANS[key] = mean
    return mean


def check_generator_traceable(generator: torch.Generator | None) -> None:
    """torch.compile's Dynamo cannot pass a torch.Generator to an op (it fails deep inside with
    "Failed to convert args/kwargs to proxy"): say so, and what to do instead, while tracing."""
    if generator is not None and torch.compiler.is_compiling():
        raise ValueError("generator= cannot be traced by torch.compile (Dynamo passes no "
                         "torch.Generator to an op): seed the default generator with "
                         "torch.manual_seed and drop generator=, or run this call eagerly")


def _integer(name: str, value, low: int, high: int, rule: str) -> int:
    """`value` as an int in [low, high]: a short error naming the argument, not pybind's."""
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {value!r}")
        value = int(value)
    if not low <= value <= high:
        raise ValueError(f"{name} must be {rule}, got {value}")
    return value


def check_scalars(step_size, num_leapfrog_steps, seed, transition) -> tuple:
    """The plain-number arguments of hmc_step, checked for type and range before the op (which
    checks the rest): seed as the op's int64 (a seed >= 2**63 by its two's complement)."""
    if isinstance(step_size, (bool, str, bytes)) or not hasattr(step_size, "__float__"):
        raise TypeError(f"step_size must be a number, got {step_size!r}")
    num_leapfrog_steps = _integer("num_leapfrog_steps", num_leapfrog_steps, 1,
                                  LIMITS["kMaxLeapfrogSteps"], "in [1, 2^31 - 1]")
    if seed is not None:
        seed = _integer("seed", seed, -2**63, 2**64 - 1, "in [0, 2**64)")
        seed = seed - 2**64 if seed >= 2**63 else seed
    transition = _integer("transition", transition, 0, 2**63 - 1, "in [0, 2**63)")
    return step_size, num_leapfrog_steps, seed, transition


def _torch_stream_in_kernel(q: torch.Tensor) -> bool:
    if torch.compiler.is_compiling():  # no probing while tracing; use what earlier calls verified
        return bool(known_verdict(q.device, q.dtype))
    return torch_stream_is_exact(q.device, q.dtype)


def hmc_step(q: torch.Tensor, mu: torch.Tensor | None = None, *, step_size: float = 0.1,
             num_leapfrog_steps: int = 10, rng: str = "philox",
             generator: torch.Generator | None = None, momentum: torch.Tensor | None = None,
             uniform: torch.Tensor | None = None, seed: int | None = None,
             transition: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """One HMC transition of N(mu, I) for every chain, in one fused launch.

    Args:
        q: [B, d] float32/float64 positions, any layout, CPU or CUDA.
        mu: [d] target mean, q's dtype and device (default zeros).
        step_size: leapfrog step eps > 0. num_leapfrog_steps: an integer L >= 1.
        rng: ``"philox"``: the native stream keyed by (seed, chain, transition, draw), seeded from
            ``generator`` (default: the device's default generator) or from ``seed``.
            ``"torch"``: the exact numbers ``torch.randn_like(q)`` then ``torch.rand(B)`` would draw.
        momentum, uniform: external noise, [B, d] and [B]; used exactly as given (rng is ignored).
        seed, transition: select the philox stream explicitly (transition t of the stream
            ``seed``; integers, 0 <= seed < 2**64, 0 <= transition < 2**63). The seed is mixed
            into the Philox key (csrc/math/rng/stream_key.h), so the stream is not the one torch's
            generator seeded with the same number draws. Not together with
            ``generator``; not inside a CUDA graph capture (a replay would redraw the same numbers;
            the generator-seeded modes advance on replay).

    Returns:
        (q_new [B, d] contiguous in q's dtype, accepted [B] bool).
    """
    check_generator_traceable(generator)
    if not torch.compiler.is_compiling():  # traced calls: the op's schema checks the types
        step_size, num_leapfrog_steps, seed, transition = check_scalars(
            step_size, num_leapfrog_steps, seed, transition)
    if mu is None:
        if torch.compiler.is_compiling() or q.dim() != 2:
            mu = q.new_zeros(q.shape[-1:])
        else:
            mu = _default_mean(q)
    if q.is_cuda:
        _build.require_cuda_kernels()
    if (momentum is None) != (uniform is None):
        raise ValueError("pass both momentum and uniform for external noise, or neither")
    if momentum is not None:
        return ops.transition(q, mu, step_size, num_leapfrog_steps, "given", momentum=momentum,
                              uniform=uniform)
    if rng not in RNG_MODES:
        raise ValueError(f'rng must be "philox" or "torch", got {rng!r}')
    # seed= / transition= go to the op, whose one stream check refuses them with rng="torch"
    if rng == "torch" and seed is None and transition == 0 and q.is_cuda \
            and not _torch_stream_in_kernel(q):
        momentum = torch.empty_like(q).normal_(generator=generator)
        uniform = torch.rand(q.shape[0], device=q.device, generator=generator)
        return ops.transition(q, mu, step_size, num_leapfrog_steps, "given", momentum=momentum,
                              uniform=uniform)
    return ops.transition(q, mu, step_size, num_leapfrog_steps, rng, generator, seed, transition)
