"""rng="torch" on CUDA at the edges of the in-kernel copy of torch's stream (issue 12, item 1).

- q whose randn_like layout is not row-major (non-dense q in another stride order): the kernel
  indexes torch's values by torch.empty_like(q)'s strides, so HMC(d)(q) is the reference Model(q).
- draws beyond 32-bit indexing (float32 B*d > 2^29, float64 > 2^28, torch.rand(B) alike), which
  torch splits into several launches and reservations: the op draws with torch itself (warning
  once), so the outputs, the traced noise and the generator state after are the reference's.
Each case compares with the reference under the same seed, and the generator state afterwards.
"""
from __future__ import annotations

import warnings

import pytest
import torch

import fused_hmc
from fused_hmc import ops
from fused_hmc.reference import ReferenceModel

from ._helpers import assert_bitwise_where_agree, energies, near_tie_tolerance

pytestmark = pytest.mark.cuda


def _check_against_reference(q, seed):
    """HMC(d)(q) == ReferenceModel(d)(q) under torch.manual_seed(seed), and the same generator
    state afterwards. Decisions may differ only at near ties (_helpers' tolerance, judged on the
    differing chains alone, so that 2^29 chains need no float64 copy of everything)."""
    d = q.shape[1]
    reference, ours = ReferenceModel(d).to(q.device), fused_hmc.HMC(d).to(q.device)
    torch.manual_seed(seed)
    ref_q, ref_acc = reference(q)
    ref_state = torch.cuda.get_rng_state(q.device)
    torch.manual_seed(seed)
    our_q, our_acc = ours(q)
    assert torch.equal(torch.cuda.get_rng_state(q.device), ref_state)
    agree = our_acc == ref_acc
    rows = (~agree).nonzero().flatten()
    assert len(rows) <= 2 + q.shape[0] // 512, f"{len(rows)} decisions differ"
    if len(rows):
        torch.manual_seed(seed)
        momentum, uniform = torch.randn_like(q)[rows].cpu(), torch.rand(q.shape[0], device=q.device)
        q_rows, u_rows, mu = q[rows].cpu(), uniform[rows].cpu(), reference.mu.to(q.dtype).cpu()
        log_alpha, _, _ = energies(q_rows, mu, momentum, 0.1, 10)
        gap = (torch.log(u_rows.double().clamp(min=1e-10)) - log_alpha).abs()
        assert (gap <= near_tie_tolerance(q_rows, mu, momentum, u_rows, 0.1, 10)).all(), gap
    assert_bitwise_where_agree(our_q, ref_q, agree)


LAYOUTS = {  # q [B, d] whose torch.randn_like(q) is not row-major
    "issue": lambda dt: torch.randn(64, 4096, device="cuda", dtype=dt)[:, ::2].t(),
    "transposed-row-sliced": lambda dt: torch.randn(2 * 33, 1000, device="cuda", dtype=dt)[::2].t(),
    "permuted-3d": lambda dt: torch.randn(7, 3, 517, device="cuda", dtype=dt).permute(2, 1, 0)[:, 1],
    "doubly-sliced-transposed": lambda dt: torch.randn(600, 90, device="cuda",
                                                       dtype=dt)[::2, ::3].t(),
    # B * d above the 270336 threads of one H200 draw: several curand calls per thread
    "sliced-transposed-large": lambda dt: torch.randn(64, 2 * 8192, device="cuda",
                                                      dtype=dt)[:, ::2].t(),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_randn_like_layout_not_row_major(layout, dtype):
    q = LAYOUTS[layout](dtype)
    b, d = q.shape
    assert torch.empty_like(q).stride() != (d, 1), "not a layout this test is about"
    _check_against_reference(q, seed=17)


# (B, d, dtype): at each 32-bit limit (torch draws in one launch: in-kernel) and just above it
# (torch splits the draw: the op draws with torch). 2 GiB per [B, d] tensor.
AT_LIMIT = [(2**23, 64, torch.float32), (2**22, 64, torch.float64)]
ABOVE_LIMIT = [(2**23 + 1, 64, torch.float32), (2**22 + 1, 64, torch.float64),
               (2**29 + 1, 1, torch.float32)]  # the last splits torch.rand(B) as well


@pytest.mark.parametrize("shape", AT_LIMIT, ids=["f32-2^29", "f64-2^28"])
def test_draws_at_the_32bit_limit_stay_in_kernel(shape):
    batch, d, dtype = shape
    q = torch.randn(batch, d, device="cuda", dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: one launch, drawn in the kernel
        _check_against_reference(q, seed=3)


def test_draws_beyond_32bit_indexing_use_torch_and_warn_once():
    """The first call warns, naming why; later calls (any shape) do not."""
    for k, (batch, d, dtype) in enumerate(ABOVE_LIMIT):
        q = torch.randn(batch, d, device="cuda", dtype=dtype)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _check_against_reference(q, seed=5 + k)
        messages = [str(w.message) for w in caught if "32-bit indexing" in str(w.message)]
        assert len(messages) == (1 if k == 0 else 0), messages
        del q
        torch.cuda.empty_cache()


@pytest.mark.parametrize("shape", ABOVE_LIMIT[:2], ids=["f32", "f64"])
def test_traced_op_beyond_32bit_indexing_returns_torchs_draws(shape):
    batch, d, dtype = shape
    q = torch.zeros(batch, d, device="cuda", dtype=dtype)
    mu = torch.zeros(d, device="cuda", dtype=dtype)
    gen = torch.Generator(device="cuda").manual_seed(23)
    _, _, momentum, uniform = ops.transition(q, mu, 0.1, 1, "torch", gen, trace=True)
    state = gen.get_state()
    gen.manual_seed(23)
    assert torch.equal(momentum, torch.empty_like(q).normal_(generator=gen))
    assert torch.equal(uniform, torch.rand(batch, device="cuda", generator=gen))
    assert torch.equal(state, gen.get_state())
