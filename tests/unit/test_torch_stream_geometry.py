"""The torch-stream emulation (csrc/math/rng/noise_streams.h, csrc/torch_stream.cpp) on the CPU,
against an independent Python model of how torch's CUDA distribution kernels fill a tensor.

The model is written from torch's sources (ATen/native/cuda/DistributionTemplates.h and
TensorIterator.cpp, unchanged from torch 2.11 to 2.14), not from csrc/:
- calc_execution_policy: block 256, grid = min(ceil(n / 256), SMs * (maxThreadsPerSM / 256)),
  generator increment 4 * ceil(n / (threads * unroll)).
- distribution_elementwise_grid_stride_kernel: thread idx is Philox subsequence idx from offset
  `offset`; its k-th curand call (one Philox block, offset / 4 + k) yields `unroll` values, lane ii
  going to linear index idx + k * threads * unroll + ii * threads when that is < n.
- distribution_nullary_kernel splits a TensorIterator that cannot use 32-bit indexing
  (numel > INT32_MAX, or 1 + sum((size - 1) * stride_bytes) > INT32_MAX over its dims).
- torch.randn_like(q) allocates like at::empty_like(q) (preserve format), whose strides torch
  itself gives here as torch.empty_like(q).stride().
The kernel's copy runs only on a GPU; these tests check its host build through test-only bindings.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fused_hmc import _build
from fused_hmc.philox_numpy import curand_counters, philox4x32_10

from ._layouts import LAYOUTS, make_layout

INT32_MAX = 2**31 - 1
BLOCK = 256
UNROLL = {torch.float32: 4, torch.float64: 2}  # values per curand call: float4 / double2


def torch_launch(n: int, unroll: int, sms: int, threads_per_sm: int) -> tuple[int, int]:
    """calc_execution_policy: (total threads, generator increment)."""
    grid = min((n + BLOCK - 1) // BLOCK, sms * (threads_per_sm // BLOCK))
    threads = BLOCK * grid
    return threads, ((n - 1) // (threads * unroll) + 1) * 4


def torch_sites(n: int, threads: int, unroll: int, offset: int) -> np.ndarray:
    """[n, 3]: (subsequence, Philox block, lane) of each value, by running the kernel's loops."""
    sites = np.full((n, 3), -1, dtype=np.int64)
    idx = np.arange(threads, dtype=np.int64)
    rounded = ((n - 1) // (threads * unroll) + 1) * threads * unroll
    for call, linear_index in enumerate(range(0, rounded, threads * unroll)):
        for lane in range(unroll):
            li = linear_index + idx + threads * lane
            ok = li < n
            assert (sites[li[ok], 0] == -1).all(), "a value written twice"
            sites[li[ok], 0] = idx[ok]
            sites[li[ok], 1] = offset // 4 + call
            sites[li[ok], 2] = lane
    assert (sites[:, 0] >= 0).all(), "a value never written"
    return sites


def torch_splits(t: torch.Tensor) -> bool:
    """Whether distribution_nullary_kernel splits the draw filling `t` (TensorIterator's
    can_use_32bit_indexing, over t's own sizes and byte strides)."""
    if t.numel() > INT32_MAX:
        return True
    max_offset = 1 + sum((size - 1) * stride * t.element_size()
                         for size, stride in zip(t.shape, t.stride()))
    return max_offset > INT32_MAX


def _bindings():
    return _build.bindings()


# GPUs as torch describes them: SM counts from tiny to beyond an H200's 132, and maxThreadsPerSM
# values of real architectures (1024: Turing; 1536: Ampere consumer, Ada; 2048: V100, A100, H100).
sm_counts = st.one_of(st.integers(1, 8), st.sampled_from([46, 80, 108, 114, 132, 144, 170]))
threads_per_sm = st.sampled_from([1024, 1536, 2048])


@st.composite
def draws(draw, max_n=1 << 20):
    """(n, unroll, sms, threads_per_sm): n around the interesting boundaries, where one call per
    thread turns into several and where the last call is partial."""
    sms, per_sm = draw(sm_counts), draw(threads_per_sm)
    unroll = draw(st.sampled_from([4, 2]))
    t_max = sms * (per_sm // BLOCK) * BLOCK
    anchor = draw(st.sampled_from([1, 256, t_max, unroll * t_max, 3 * unroll * t_max]))
    n = draw(st.integers(max(1, anchor - 300), anchor + 300) | st.integers(1, max_n))
    return min(n, max_n), unroll, sms, per_sm


@settings(max_examples=80)
@given(draws(), st.integers(0, 2**40).map(lambda k: 4 * k))
def test_value_sites_follow_torch_kernel(case, offset):
    n, unroll, sms, per_sm = case
    threads, increment = torch_launch(n, unroll, sms, per_sm)
    assert _bindings().torch_draw_geometry(n, unroll, sms, per_sm) == (threads, increment)
    want = torch_sites(n, threads, unroll, offset)
    got = _bindings().torch_draw_sites(torch.arange(n), offset, threads, unroll).numpy()
    np.testing.assert_array_equal(got, want)
    # the reservation covers every block any thread uses, so the next draw starts clear of this one
    assert want[:, 1].max() < offset // 4 + increment // 4


@settings(max_examples=40)
@given(draws(), st.integers(0, 2**63 - 1), st.integers(0, 2**40).map(lambda k: 4 * k),
       st.data())
def test_value_blocks_are_curand_philox_blocks(case, seed, offset, data):
    """torch_draw_block's words: Philox4x32-10 keyed by the generator's seed, counter (block,
    subsequence) as curand_init lays it out (philox_numpy, independent of csrc/)."""
    n, unroll, sms, per_sm = case
    threads, _ = torch_launch(n, unroll, sms, per_sm)
    indices = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8))
    sites = torch_sites(n, threads, unroll, offset)[indices]
    want = philox4x32_10(curand_counters(sites[:, 0], sites[:, 1]), seed)
    for k, i in enumerate(indices):
        *words, lane = _bindings().torch_draw_block(seed, offset, threads, unroll, i)
        assert words == want[k].tolist() and lane == sites[k, 2]


def test_sites_known_answers_on_an_h200():
    """132 SMs x 2048 threads: up to 270336 values each take lane 0 of their own subsequence; one
    call per thread covers 4 x 270336 float32 values, the next one needs a second call."""
    assert _bindings().torch_draw_geometry(270336, 4, 132, 2048) == (270336, 4)
    assert _bindings().torch_draw_geometry(4 * 270336, 4, 132, 2048) == (270336, 4)
    assert _bindings().torch_draw_geometry(4 * 270336 + 1, 4, 132, 2048) == (270336, 8)
    assert _bindings().torch_draw_geometry(2 * 270336 + 1, 2, 132, 2048) == (270336, 8)
    assert _bindings().torch_draw_geometry(2048 * 64, 4, 132, 2048) == (131072, 4)
    got = _bindings().torch_draw_sites(torch.tensor([0, 270335, 270336, 4 * 270336]), 8, 270336, 4)
    assert got.tolist() == [[0, 2, 0], [270335, 2, 0], [0, 2, 1], [0, 3, 0]]


@st.composite
def big_draws(draw):
    """A dense [B, d] draw (B * d near a 32-bit limit) in a drawn stride order, and its dtype."""
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.float16]))
    limit = draw(st.sampled_from([2**28, 2**29, 2**30, INT32_MAX, 2**31, 2**32]))
    d = draw(st.sampled_from([1, 2, 3, 7, 64, 4096]))
    batch = max(1, limit // d + draw(st.integers(-2, 2)))
    order = draw(st.sampled_from(["row-major", "column-major"]))
    return batch, d, dtype, order


@settings(max_examples=120)
@given(big_draws())
def test_split_predicate_is_torchs_32bit_indexing_test(case):
    batch, d, dtype, order = case
    shape = (batch, d) if order == "row-major" else (d, batch)
    q = torch.empty(shape, dtype=dtype, device="meta")
    q = q if order == "row-major" else q.t()
    momentum = torch.empty_like(q)  # torch.randn_like's output: what the draw fills
    uniform = torch.empty(batch, dtype=dtype, device="meta")  # torch.rand(B) in this dtype
    itemsize = momentum.element_size()
    assert _bindings().torch_draw_is_split(q.numel(), itemsize) == torch_splits(momentum)
    assert _bindings().torch_draw_is_split(batch, itemsize) == torch_splits(uniform)


def test_split_predicate_known_answers():
    split = _bindings().torch_draw_is_split
    assert not split(2**29, 4) and split(2**29 + 1, 4)  # float32
    assert not split(2**28, 8) and split(2**28 + 1, 8)  # float64
    assert not split(INT32_MAX, 1) and split(INT32_MAX + 1, 1)  # numel itself
    assert not split(0, 4) and not split(1, 8)


shapes = st.tuples(st.sampled_from([1, 2, 3, 5, 32, 33]), st.sampled_from([1, 2, 3, 7, 64]))


@settings(max_examples=150)
@given(shapes, st.sampled_from(LAYOUTS), st.sampled_from([torch.float32, torch.float64]))
def test_randn_like_layout_is_empty_likes(shape, layout, dtype):
    """The kernel indexes torch.randn_like(q)'s values by these strides: torch's own, for every
    layout, including non-dense q in a stride order other than row-major."""
    gen = torch.Generator().manual_seed(0)
    q = make_layout(gen, *shape, dtype=dtype, device="cpu", layout=layout)
    assert _bindings().randn_like_strides(q) == torch.empty_like(q).stride()


def test_randn_like_layout_of_the_issue_example():
    """torch.randn(64, 4096)[:, ::2].t(): strides (2, 4096), not dense, column-major order."""
    q = torch.empty(64, 4096)[:, ::2].t()
    assert q.stride() == (2, 4096) and not q.is_contiguous()
    assert _bindings().randn_like_strides(q) == (1, 2048) == torch.empty_like(q).stride()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_builder_gives_the_named_layout(layout):
    """Each named layout really is one (the property tests above and elsewhere rely on it)."""
    q = make_layout(torch.Generator().manual_seed(1), 6, 5, dtype=torch.float32, device="cpu",
                    layout=layout)
    assert q.shape == (6, 5)
    # empty_like keeps q's strides exactly when q is non-overlapping and dense (no size-1 dims here)
    dense, contiguous = torch.empty_like(q).stride() == q.stride(), q.is_contiguous()
    kinds = {"contiguous": contiguous, "expanded-then-contiguous": contiguous,
             "transposed": dense and not contiguous, "storage-offset": contiguous,
             "expanded-rows": not dense, "expanded-columns": not dense}
    assert kinds.get(layout, not dense), (layout, q.stride())
