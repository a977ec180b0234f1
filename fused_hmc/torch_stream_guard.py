"""Run-time check that the in-kernel copy of torch's CUDA RNG still reproduces torch.

The ``torch`` noise mode draws, inside the one kernel, the numbers ``torch.randn_like(q)`` and
``torch.rand(B)`` would draw. That mapping follows torch internals (DistributionTemplates.h), which a
future torch may change. Once per (process, device, dtype) we draw a small probe both ways from a
private generator; on any difference we warn once and the caller falls back to drawing with torch
plus the fused external-noise kernel (still exact, three launches).
"""
from __future__ import annotations

import warnings

import torch

from . import ops

_verdicts: dict[tuple[int, torch.dtype], bool] = {}


def _probe_shapes(device: torch.device, dtype: torch.dtype) -> list[tuple[int, int]]:
    """A small draw (one block per element) and one large enough that threads make several calls."""
    props = torch.cuda.get_device_properties(device)
    max_threads = props.multi_processor_count * props.max_threads_per_multi_processor
    per_call = 4 if dtype == torch.float32 else 2
    return [(3, 50), ((per_call * max_threads) // 5 + 1001, 5)]


def _probe(device: torch.device, dtype: torch.dtype) -> bool:
    gen = torch.Generator(device=device)
    for batch, dim in _probe_shapes(device, dtype):
        q = torch.zeros(batch, dim, device=device, dtype=dtype)
        mu = torch.zeros(dim, device=device, dtype=dtype)
        gen.manual_seed(0x5EED)
        _, _, momentum, uniform = ops.transition(q, mu, 0.1, 1, "torch", gen, trace=True)
        state_after_kernel = gen.get_state()
        gen.manual_seed(0x5EED)
        want_momentum = torch.empty_like(q).normal_(generator=gen)
        want_uniform = torch.rand(batch, device=device, generator=gen)
        if not (torch.equal(momentum, want_momentum) and torch.equal(uniform, want_uniform)
                and torch.equal(state_after_kernel, gen.get_state())):
            return False
    return True


def known_verdict(device: torch.device, dtype: torch.dtype) -> bool | None:
    """What an earlier probe found for this device and dtype, or None when none ran (so a caller
    that cannot probe, e.g. while tracing, uses only what was verified)."""
    return _verdicts.get((device.index, dtype))


def torch_stream_is_exact(device: torch.device, dtype: torch.dtype) -> bool:
    """True when the in-kernel torch stream is verified for this device and dtype.

    While a CUDA graph is being captured no probe can run (it synchronises); the caller then uses the
    exact three-launch path, which captures like any torch RNG op.
    """
    if torch.get_default_dtype() != torch.float32:
        # torch.rand(B) is then float64, which the kernel does not draw: the op itself would draw
        # with torch (csrc/torch_stream.h), so a probe now would verify nothing for later calls.
        return False
    key = (device.index, dtype)
    verdict = _verdicts.get(key)
    if verdict is None:
        if torch.cuda.is_current_stream_capturing():
            return False
        verdict = _probe(device, dtype)
        _verdicts[key] = verdict
        if not verdict:
            warnings.warn(
                f"fused_hmc: this torch ({torch.__version__}) draws CUDA random numbers differently "
                f"from fused_hmc's in-kernel copy on {device} ({dtype}); falling back to torch's own "
                "draws plus the fused kernel (still exact, three launches instead of one)",
                RuntimeWarning, stacklevel=3)
    return verdict
