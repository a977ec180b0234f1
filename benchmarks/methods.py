"""What run.py times on the torch side: fused_hmc's entry points and the torch anchors.

`per_transition(name, ctx, B, d, L)` times one transition of B chains x d dims with L leapfrog
steps, back-to-back (CUDA events, median of repeats), in a CUDA graph, or as one launch of T
transitions of the persistent kernel divided by T. Back-to-back and graph calls rotate among
`ctx.rotate` input tensors, so no call finds its exact input in cache from the call before.
`run_of(name, ctx, B, d, L, T)` times T chained transitions (each output is the next input).
Each returns a dict: seconds (per transition, or for the run), and how it was timed.
"""
from __future__ import annotations

import itertools
import time

import torch

import fused_hmc
from fused_hmc import ops
from fused_hmc.sampling import chain_statistics
from fused_hmc.reference import ReferenceModel
from timing import calls_for, host_seconds, time_adaptive, time_graph, time_per_call

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")
SEED = 7


class Ctx:
    def __init__(self, device: str, eps: float, rotate: int, max_rotate_bytes: int = 2 << 30):
        self.device, self.eps, self.rotate = torch.device(device), eps, rotate
        self.max_rotate_bytes = max_rotate_bytes
        self.compiled: dict = {}  # (mode, B, d, L) -> compiled reference, kept for the long runs

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def inputs(self, B: int, d: int) -> list[torch.Tensor]:
        count = max(1, min(self.rotate, self.max_rotate_bytes // (B * d * 4)))
        gen = torch.Generator(device=self.device).manual_seed(B * 7919 + d)
        return [torch.randn(B, d, device=self.device, generator=gen) for _ in range(count)]

    def rotating(self, B: int, d: int):
        """(next_input callable, number of inputs rotated)."""
        inputs = self.inputs(B, d)
        return itertools.cycle(inputs).__next__, len(inputs)

    def mu(self, d: int) -> torch.Tensor:
        return torch.zeros(d, device=self.device)


def _one_call(ctx: Ctx, name: str, B: int, d: int, L: int):
    """The function one back-to-back call of `name` runs (inputs rotating), and #inputs."""
    nxt, count = ctx.rotating(B, d)
    mu, eps = ctx.mu(d), ctx.eps
    if name == "reference eager" or name == "reference CUDA graph":
        model = ReferenceModel(d, L, eps).to(ctx.device)
        return (lambda: model(nxt())), count
    if name == "3-launch (randn_like + rand + fused)":
        def three_launch():
            q = nxt()
            return ops.transition(q, mu, eps, L, "given", momentum=torch.randn_like(q),
                                  uniform=torch.rand(B, device=q.device))
        return three_launch, count
    if name in ("fused_hmc HMC module, torch mode", "fused_hmc torch mode, CUDA graph"):
        module = fused_hmc.HMC(d, L, eps).to(ctx.device)
        return (lambda: module(nxt())), count
    if name == "fused_hmc hmc_step, philox":
        return (lambda: fused_hmc.hmc_step(nxt(), mu, step_size=eps, num_leapfrog_steps=L,
                                           rng="philox")), count
    if name in ("fused_hmc op, philox", "fused_hmc philox, CUDA graph"):
        return (lambda: ops.transition(nxt(), mu, eps, L, "philox")), count
    if name.startswith("torch.compile "):
        mode = name.removeprefix("torch.compile ")
        compiled = _compiled(ctx, mode, B, d, L)
        return (lambda: compiled(nxt())), count
    raise KeyError(name)


def _compiled(ctx: Ctx, mode: str, B: int, d: int, L: int):
    key = (mode, B, d, L)
    if key not in ctx.compiled:
        model = ReferenceModel(d, L, ctx.eps).to(ctx.device)
        ctx.compiled[key] = torch.compile(model, mode=mode, dynamic=False)
    return ctx.compiled[key]


def compile_seconds(ctx: Ctx, mode: str, B: int, d: int, L: int) -> float:
    """Compiles (first calls, until the outputs are ready) and returns the seconds it took."""
    compiled = _compiled(ctx, mode, B, d, L)
    q = ctx.inputs(B, d)[0]
    start = time.perf_counter()
    for _ in range(3):  # reduce-overhead records its graph on a later call than the first
        compiled(q)
    if ctx.cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _graph(fn, per_call_estimate: float) -> tuple[float, int]:
    calls = max(5, min(100, calls_for(per_call_estimate, 0.01)))
    return time_graph(fn, calls, repeats=10), calls


def per_transition(name: str, ctx: Ctx, B: int, d: int, L: int) -> dict:
    if name == "fused_hmc sample op":
        return _sample_op_per_transition(ctx, B, d, L)
    fn, count = _one_call(ctx, name, B, d, L)
    seconds, calls = time_adaptive(fn, ctx.device)
    info = {"inputs_rotated": count}
    if "CUDA graph" in name:
        graph_seconds, per_graph = _graph(fn, seconds)
        return {"seconds": graph_seconds, "mode": "graph", "calls_per_graph": per_graph,
                "back_to_back_seconds": seconds, **info}
    return {"seconds": seconds, "mode": "back-to-back", "calls": calls, **info}


class _RunChainsBuffers:
    """The "fused_hmc sample op" method: the sample op on N(mu, I), one step size, unit mass, no
    draws kept (the label is the pre-issue-13 op's, as the recorded results name it)."""

    def __init__(self, ctx: Ctx, B: int, d: int):
        dev = ctx.device
        self.q = torch.randn(B, d, device=dev)
        mean = torch.zeros(B, d, device=dev, dtype=torch.float64)
        self.stats = dict(mean=mean, m2=torch.zeros_like(mean),
                          statistics=chain_statistics.as_list(chain_statistics.zeros(B, dev)))
        self.mu = ctx.mu(d)
        self.inv_mass = torch.ones(1, d, device=dev)
        self.steps = {}  # eps -> its [1] float64 tensor, made outside the timed calls

    def launch(self, eps: float, L: int, T: int) -> None:
        if eps not in self.steps:
            self.steps[eps] = torch.full((1,), eps, device=self.q.device, dtype=torch.float64)
        ops.sample(q=self.q, target="standard", target_tensors=[self.mu], target_scalars=[],
                   step_size=self.steps[eps], inv_mass=self.inv_mass, jitter=0.0,
                   num_leapfrog_steps=L, seed=SEED, chain_offset=0, first_transition=0,
                   num_transitions=T, **self.stats)


def _sample_op_per_transition(ctx: Ctx, B: int, d: int, L: int) -> dict:
    bufs = _RunChainsBuffers(ctx, B, d)
    probe = time_per_call(lambda: bufs.launch(ctx.eps, L, 10), 1, repeats=1, warmup=1,
                          device=ctx.device) / 10
    T = max(10, min(1000, calls_for(probe, 0.02)))
    seconds = time_per_call(lambda: bufs.launch(ctx.eps, L, T), 1, repeats=5, warmup=1,
                            device=ctx.device)
    return {"seconds": seconds / T, "mode": "persistent", "transitions_per_launch": T,
            "note": "Welford moments and acceptance statistics updated every transition"}


def floors(ctx: Ctx) -> dict[str, dict]:
    one = torch.zeros(1, device=ctx.device)
    seconds, calls = time_adaptive(lambda: torch.add(one, 1), ctx.device)
    rows = {"floor: smallest torch op launch (add on 1 element)":
            {"seconds": seconds, "mode": "back-to-back", "calls": calls}}
    if ctx.cuda:
        rows["floor: smallest kernel in a CUDA graph"] = {
            "seconds": time_graph(lambda: torch.add(one, 1), 100, repeats=10), "mode": "graph",
            "calls_per_graph": 100}
    return rows


def run_of(name: str, ctx: Ctx, B: int, d: int, L: int, T: int, compile_mode: str = "default",
           repeats: int = 3) -> dict:
    """T chained transitions; seconds for the whole run (CUDA events, median of repeats)."""
    dev, eps, mu = ctx.device, ctx.eps, ctx.mu(d)
    q0 = ctx.inputs(B, d)[0]
    timed = lambda fn: time_per_call(fn, 1, repeats=repeats, warmup=1, device=dev)  # noqa: E731
    if name == "fused_hmc sample op":
        bufs = _RunChainsBuffers(ctx, B, d)
        return {"seconds": timed(lambda: bufs.launch(eps, L, T)), "mode": "one launch"}
    if name == "fused_hmc sample()":
        seconds = host_seconds(lambda: fused_hmc.sample(
            q0, T, step_size=eps, num_leapfrog_steps=L, keep_samples=False, progress=False,
            seed=3), repeats=repeats, device=dev)
        return {"seconds": seconds, "mode": "API end to end, host clock, synchronised"}
    step = {
        "reference eager": lambda: ReferenceModel(d, L, eps).to(dev),
        "reference CUDA graph": lambda: ReferenceModel(d, L, eps).to(dev),
        "torch.compile": lambda: _compiled(ctx, compile_mode, B, d, L),
        "3-launch (randn_like + rand + fused)": lambda: (
            lambda q: ops.transition(q, mu, eps, L, "given", momentum=torch.randn_like(q),
                                     uniform=torch.rand(B, device=dev))),
        "fused_hmc HMC module, torch mode": lambda: fused_hmc.HMC(d, L, eps).to(dev),
        "fused_hmc op, philox": lambda: (lambda q: ops.transition(q, mu, eps, L, "philox")),
        "fused_hmc philox, CUDA graph": lambda: (lambda q: ops.transition(q, mu, eps, L, "philox")),
    }[name]()
    if "CUDA graph" in name:
        return _chained_graph(step, q0, T, repeats)

    def chain():
        q = q0
        for _ in range(T):
            q = step(q)[0]
        return q

    info = {"mode": "Python loop, chained"}
    if name == "torch.compile":
        info["compile_mode"] = compile_mode
    return {"seconds": timed(chain), **info}


def _chained_graph(step, q0: torch.Tensor, T: int, repeats: int, per_graph: int = 100) -> dict:
    """T transitions as T / per_graph replays of one graph of per_graph chained transitions."""
    per_graph = min(per_graph, T)
    state = q0.clone()

    def body():
        q = state
        for _ in range(per_graph):
            q = step(q)[0]
        state.copy_(q)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    replays = max(1, T // per_graph)

    def run():
        for _ in range(replays):
            graph.replay()

    seconds = time_per_call(run, 1, repeats=repeats, warmup=1)
    return {"seconds": seconds * T / (replays * per_graph), "mode": "CUDA graph replays, chained",
            "transitions_per_graph": per_graph}
