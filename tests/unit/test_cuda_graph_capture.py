"""CUDA graphs: ops keyed by an explicit seed refuse capture (a replay would redraw the numbers of
the captured transition), the generator-seeded modes advance on every replay, and the cached zero
mean of mu=None is never made inside a capture (it would live in the graph's pool, unwritten until
a replay)."""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc import ops, transition

from ._helpers import run_op

pytestmark = pytest.mark.cuda

REFUSED = "keyed by an explicit seed and cannot be captured in a CUDA graph"


def _capture(fn):
    """fn's work captured in a fresh graph (after one eager call, so nothing is built or probed
    while capturing); returns (graph, fn's outputs inside the graph's memory)."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def _chain_state(chains=64, dim=8):
    f64 = dict(dtype=torch.float64, device="cuda")
    q = torch.randn(chains, dim, device="cuda")
    return q, dict(mean=torch.zeros(chains, dim, **f64), m2=torch.zeros(chains, dim, **f64),
                   count=torch.zeros(chains, dtype=torch.int64, device="cuda"),
                   prob=torch.zeros(chains, **f64))


def _seeded_calls():
    q, b = _chain_state()
    dim = q.shape[1]
    mu = torch.zeros(dim, device="cuda")
    f64 = dict(dtype=torch.float64, device="cuda")
    step, inv_mass = torch.full((1,), 0.1, **f64), torch.ones(1, dim, device="cuda")
    stats = dict(mean=b["mean"], m2=b["m2"], accept_count=b["count"], accept_prob_sum=b["prob"])
    return {
        "hmc_step": lambda: fused_hmc.hmc_step(q, mu, rng="philox", seed=0),
        "transition-traced": lambda: ops.transition(q, mu, 0.1, 10, "philox", None, 0, 3,
                                                    trace=True),
        "run-sampling": lambda: run_op(q, "standard", [mu], [], step, inv_mass, 0.0, 10, 0, 0,
                                        0, 5, **stats),
        "run-sampling-diagonal": lambda: run_op(
            q, "diagonal", [mu, torch.ones_like(mu)], [], step, inv_mass, 0.1, 10, 0, 0, 0, 5,
            samples=torch.zeros(q.shape[0], 5, dim, device="cuda"), **stats),
        "run-warmup": lambda: run_op(
            q, "standard", [mu], [], step.clone(), inv_mass.clone(), 0.0, 10, 0, 0, 0, 5,
            dual_averaging=torch.zeros(1, 3, **f64), window_mean=torch.zeros_like(b["mean"]),
            window_m2=torch.zeros_like(b["m2"]), num_warmup=5, windows=[1, 3, 1],
            adapt_step_size=True, adapt_mass_matrix=True),
    }


@pytest.mark.parametrize("name", ["hmc_step", "transition-traced", "run-sampling",
                                  "run-sampling-diagonal", "run-warmup"])
def test_seeded_ops_refuse_capture(name):
    call = _seeded_calls()[name]
    call()  # eager: fine
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=REFUSED):
        with torch.cuda.graph(graph):
            call()
    call()  # and eager again afterwards


@pytest.mark.parametrize("rng", ["philox", "torch"])
def test_generator_seeded_modes_draw_fresh_numbers_on_every_replay(rng):
    q = torch.randn(256, 16, device="cuda")
    mu = torch.zeros(16, device="cuda")
    graph, out = _capture(lambda: ops.transition(q, mu, 0.1, 10, rng, trace=True))
    draws = []
    for _ in range(3):
        graph.replay()
        draws.append(out[2].clone())
    torch.cuda.synchronize()
    assert not torch.equal(draws[0], draws[1]) and not torch.equal(draws[1], draws[2])
    torch.manual_seed(11)
    graph.replay()
    again = out[2].clone()
    torch.manual_seed(11)
    graph.replay()
    assert torch.equal(again, out[2])  # replays follow the generator


def test_zero_mean_is_not_cached_while_capturing():
    dim = 23  # a size no other test caches
    q = torch.randn(32, dim, device="cuda")
    key = (dim, q.dtype, q.device)
    transition._ZERO_MEANS.pop(key, None)
    ops.transition(q, torch.zeros(dim, device="cuda"), 0.1, 3, "philox")  # load and warm up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fused_hmc.hmc_step(q, rng="philox")
    assert key not in transition._ZERO_MEANS
    del graph
    torch.manual_seed(5)
    eager = fused_hmc.hmc_step(q, rng="philox")
    cached = transition._ZERO_MEANS[key]
    assert torch.equal(cached, torch.zeros(dim, device="cuda"))
    torch.manual_seed(5)
    explicit = fused_hmc.hmc_step(q, torch.zeros(dim, device="cuda"), rng="philox")
    assert torch.equal(eager[0], explicit[0]) and torch.equal(eager[1], explicit[1])
