"""``fused-hmc bench``: a quick side-by-side of fused_hmc and the pure-torch reference
(:mod:`fused_hmc.reference`) on the machine at hand, a few seconds in all.

Two workloads on N(0, I): one transition (the drop-in ``HMC`` module, torch-stream noise, against
the reference ``Model``; under one seed both draw the same numbers, and the bench checks that
their outputs agree), and a chain of transitions (``fused_hmc.sample``, moments and acceptance
kept on the device, against the reference transition called in a Python loop). Each figure is the
median over repeats of back-to-back calls, timed with CUDA events on a GPU and the host clock on
the CPU. The full suite against every anchor (torch.compile, CUDA graphs, JAX, BlackJAX, NumPyro)
is ``benchmarks/run.py`` in the repository.
"""
from __future__ import annotations

import statistics
from typing import NamedTuple

import torch

from .timing import seconds_per_call

REPEATS = 5


class Row(NamedTuple):
    workload: str
    fused_s: float  # seconds per call
    reference_s: float

    @property
    def ratio(self) -> float:
        """reference / fused_hmc: how many times faster fused_hmc is."""
        return self.reference_s / self.fused_s


def _seconds_per_call(fn, device: torch.device, budget_s: float) -> float:
    """Median over REPEATS of the time per call, each repeat about budget_s / REPEATS long."""
    fn()  # warm-up (and the extension's first load)
    first = seconds_per_call(fn, 1, device)
    calls = max(1, min(10_000, round(budget_s / REPEATS / max(first, 1e-9))))
    return statistics.median(seconds_per_call(fn, calls, device) for _ in range(REPEATS))


def run_bench(device: torch.device, chains: int, dim: int, num_leapfrog_steps: int,
              transitions: int, budget_s: float = 2.0, dtype=torch.float32) -> list[Row]:
    """The two workloads' rows, in about `budget_s` seconds of timing in all (plus warm-up)."""
    from . import HMC, sample
    from .reference import ReferenceModel, reference_hmc_step

    step = 0.1
    q = torch.randn(chains, dim, device=device, dtype=dtype)
    fused = HMC(dim, num_leapfrog_steps, step).to(device=device, dtype=dtype)
    reference = ReferenceModel(dim, num_leapfrog_steps, step).to(device=device, dtype=dtype)
    torch.manual_seed(0)
    ours = fused(q)
    torch.manual_seed(0)
    theirs = reference(q)
    if not torch.equal(ours[0], theirs[0]):
        raise RuntimeError("fused_hmc and the reference disagree on one transition under one "
                           "seed: run `fused-hmc validate` and report it")
    share = budget_s / 4
    rows = [Row("one transition", _seconds_per_call(lambda: fused(q), device, share),
                _seconds_per_call(lambda: reference(q), device, share))]
    mu = torch.zeros(dim, device=device, dtype=dtype)

    def reference_chain():
        x = q
        for _ in range(transitions):
            x, _ = reference_hmc_step(x, mu, step, num_leapfrog_steps)

    rows.append(Row(f"{transitions} transitions, chained (sample)",
                    _seconds_per_call(lambda: sample(q, transitions, seed=0, progress=False,
                                                     keep_samples=False,
                                                     num_leapfrog_steps=num_leapfrog_steps,
                                                     step_size=step), device, share),
                    _seconds_per_call(reference_chain, device, share)))
    return rows


def _time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def format_table(rows: list[Row]) -> str:
    width = max(len("workload"), *(len(r.workload) for r in rows))
    lines = [f"{'workload':<{width}}  {'fused_hmc':>10}  {'reference':>10}  {'ratio':>7}"]
    for r in rows:
        lines.append(f"{r.workload:<{width}}  {_time(r.fused_s):>10}  {_time(r.reference_s):>10}"
                     f"  {r.ratio:>6.3g}x")
    return "\n".join(lines)
