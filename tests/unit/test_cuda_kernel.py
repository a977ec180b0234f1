"""The CUDA kernel: parity at large shapes, generator semantics, graphs, limits, CPU agreement."""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc import ops
from fused_hmc.reference import reference_hmc_step

from ._helpers import assert_accepted_agree, assert_bitwise_where_agree

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(65536, 64), (2048, 1024), (64, 4096), (5, 4093)])
def test_external_noise_parity_large_shapes(shape, dtype):
    q = torch.randn(*shape, device="cuda", dtype=dtype)
    mu = torch.randn(shape[1], device="cuda", dtype=dtype)
    momentum = torch.randn_like(q)
    uniform = torch.rand(shape[0], device="cuda")
    ours = fused_hmc.hmc_step(q, mu, step_size=0.1, num_leapfrog_steps=10, momentum=momentum,
                              uniform=uniform)
    ref = reference_hmc_step(q, mu, 0.1, 10, momentum, uniform)
    agree = assert_accepted_agree(ours[1], ref[1], q, mu, momentum, uniform, 0.1, 10)
    assert_bitwise_where_agree(ours[0], ref[0], agree)


def test_dim_above_limit_is_a_clear_error():
    q = torch.randn(2, 4097, device="cuda")
    with pytest.raises(ValueError, match="dim 4097 is above the largest supported"):
        fused_hmc.hmc_step(q, rng="philox")


def test_empty_batch():
    q_new, acc = fused_hmc.hmc_step(torch.empty(0, 8, device="cuda"), rng="philox")
    assert q_new.shape == (0, 8) and acc.shape == (0,)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_philox_reserves_exactly_its_blocks_and_never_reuses(dtype):
    q = torch.randn(100, 37, device="cuda", dtype=dtype)  # first: CUDA's lazy init makes the
    gen = torch.cuda.default_generators[0]                 # generators (a fresh process has none)
    per_block = 4 if dtype == torch.float32 else 2
    blocks = -(-37 // per_block) + 1
    mu = torch.zeros(37, device="cuda", dtype=dtype)
    start = gen.get_offset()
    _, _, m1, u1 = ops.transition(q, mu, 0.1, 3, "philox", trace=True)
    assert gen.get_offset() == start + 4 * blocks
    _, _, m2, u2 = ops.transition(q, mu, 0.1, 3, "philox", trace=True)
    assert gen.get_offset() == start + 8 * blocks
    assert not torch.equal(m1, m2) and not torch.equal(u1, u2)


def test_philox_graph_replays_draw_fresh_numbers():
    q = torch.randn(256, 64, device="cuda")
    mu = torch.zeros(64, device="cuda")
    ops.transition(q, mu, 0.1, 10, "philox", trace=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.transition(q, mu, 0.1, 10, "philox", trace=True)
    gen = torch.cuda.default_generators[0]
    start = gen.get_offset()
    graph.replay()
    first = out[2].clone()
    graph.replay()
    torch.cuda.synchronize()
    assert not torch.equal(first, out[2])
    assert gen.get_offset() > start
    torch.manual_seed(3)
    graph.replay()
    again = out[2].clone()
    torch.manual_seed(3)
    graph.replay()
    assert torch.equal(again, out[2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_philox_stream_matches_cpu_build(dtype):
    """Same seed: uint32 words identical, normals within the __sincosf error, same decisions."""
    counters = torch.randint(-2**31, 2**31 - 1, (4096, 4), dtype=torch.int32)
    key = 0x1234_5678_9ABC_DEF0
    assert torch.equal(ops.philox4x32(counters, key), ops.philox4x32(counters.cuda(), key).cpu())

    q = torch.randn(4096, 67, dtype=dtype)
    mu = torch.randn(67, dtype=dtype)
    cpu = ops.transition(q, mu, 0.1, 10, "philox", None, 42, 3, trace=True)
    gpu = [t.cpu() for t in ops.transition(q.cuda(), mu.cuda(), 0.1, 10, "philox", None, 42, 3,
                                           trace=True)]
    assert torch.equal(cpu[3], gpu[3])  # uniforms: fma of the word, no transcendental
    # float32: __sincosf on the device vs sinf/cosf on the host, absolute error <= 2^-21.41 times
    # the radius sqrt(-2 log u) <= 6.7; float64: sincospi vs sin(pi v), a few ulp.
    tol = 6.7 * 2 ** -21.4 + 1e-6 if dtype == torch.float32 else 1e-13
    assert (cpu[2] - gpu[2]).abs().max() <= tol
    agree = cpu[1] == gpu[1]
    assert agree.float().mean() > 0.999
    assert torch.allclose(cpu[0][agree], gpu[0][agree], rtol=0, atol=50 * tol)


def test_runs_on_the_last_device_index():
    device = torch.device("cuda", torch.cuda.device_count() - 1)
    q = torch.randn(128, 16, device=device)
    q_new, acc = fused_hmc.hmc_step(q, rng="philox")
    assert q_new.device == device and acc.device == device
