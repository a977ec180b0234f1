"""CppTarget's rows form: log p as 32 strided partials in one fixed pairwise tree, whatever the
lanes (csrc/math/targets/lane_rows.h).

References: a logistic regression written once as a share (log_density_rows), and the same share
summed by a recursive pairwise tree in a plain source (TREE), independent of lane_rows.h's loop and
stack: value and dual gradient equal bit for bit. torch autograd of a torch log_prob checks the
value and both gradients (duals and hand-written) through check(). Sampling: the same chains bit
for bit for lanes 1, 4 and 32 on the CPU, and on CUDA agreeing with the CPU to rounding
(test_diamonds_lanes.py has CUDA's bit-for-bit tests over every lanes).
"""
from __future__ import annotations

import pytest
import torch

from fused_hmc import CppTarget

from ._helpers import run_op
from ._rows_logistic import GRADIENT, SHARE

N, K = 37, 3  # rows (not a multiple of the lanes: the lanes' shares differ in size), predictors
DIM = K + 1  # the coefficients, then the intercept


# The same model as a plain (one-call) source whose log_density forms the 32 strided partials and
# adds them by a recursive pairwise tree, written here independently of
# csrc/math/targets/lane_rows.h's loop and stack. The share is renamed so that this source is not in
# the rows form. With duals, each derivative is added by the same tree as the value.
TREE = SHARE.replace("log_density_rows", "share_rows") + r"""
template <typename T, typename Data>
FUSED_HMC_HD T tree(const T* x, const Data& data, int64_t first, int64_t count) {
  if (count == 1) return share_rows(x, data, fused_hmc::Rows{first, 32});
  const T left = tree(x, data, first, count / 2);
  return left + tree(x, data, first + count / 2, count / 2);
}

template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) {
  return tree(x, data, 0, 32);
}
"""


def _data() -> dict:
    gen = torch.Generator().manual_seed(14)
    X = torch.randn(N, K, generator=gen, dtype=torch.float64)
    y = (torch.rand(N, generator=gen, dtype=torch.float64) < 0.4).double()
    return {"XT": X.T.contiguous(), "y": y}


def _log_prob(x: torch.Tensor, data: dict) -> torch.Tensor:
    eta = data["XT"].T.to(x.dtype) @ x[:K] + x[K]
    y = data["y"].to(x.dtype)
    return (y * eta - torch.nn.functional.softplus(eta)).sum() - 0.125 * (x * x).sum()


@pytest.fixture(scope="module")
def rows() -> CppTarget:
    """The rows form with lanes="auto": one lane a chain on the CPU."""
    return CppTarget(SHARE + GRADIENT, DIM, data=_data(), log_prob=_log_prob, gradient=True)


def _points(n: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(n, DIM, generator=torch.Generator().manual_seed(3), dtype=dtype)


def test_log_p_is_the_fixed_tree_of_32_partials_bit_for_bit(rows):
    x = _points(64)
    tree = CppTarget(TREE, DIM, data=_data())
    assert not tree.rows_form and rows.rows_form and rows.lanes == "auto"
    value, gradient = tree.log_density_and_gradient(x)  # the duals of the tree
    assert torch.equal(rows.log_density(x), value)
    assert torch.equal(rows.dual_log_density_and_gradient(x)[1], gradient)
    assert torch.equal(rows.dual_log_density_and_gradient(x)[0], value)
    # The hand-written share's gradient is another formula: equal to rounding.
    torch.testing.assert_close(rows.gradient(x), gradient, rtol=1e-13, atol=1e-13)


def test_check_passes_against_autograd(rows):
    for dtype in (torch.float64, torch.float32):
        report = rows.check(n=32, dtype=dtype)
        assert report.worst_value < 1 and report.worst_gradient < 1
        assert report.worst_dual_vs_hand < 1


def test_lanes_take_the_share_functions():
    with pytest.raises(ValueError, match=r"lanes must be \"auto\" or one of \[1, 2, 4, 8, 16, 32, "
                                         r"64, 128, 256\], got 3"):
        CppTarget(SHARE, DIM, lanes=3)
    for bad in (0, 512, True, 2.0, "Auto"):
        with pytest.raises(ValueError, match="lanes must be"):
            CppTarget(SHARE, DIM, lanes=bad)
    # Block lanes need P = 256 partials, which only data of 65,536 rows or more have.
    with pytest.raises(ValueError, match=r"lanes=64 is more than the data's row partials P = 32 "
                                         r"\(with 37 rows"):
        CppTarget(SHARE, DIM, data=_data(), lanes=64)
    plain = "template <typename T, typename Data> FUSED_HMC_HD T log_density(const T* x, " \
            "const Data& data) { return -x[0] * x[0]; }"
    with pytest.raises(ValueError, match=r"no log_density_rows \(lanes=4\).*fused_hmc::Rows"):
        CppTarget(plain, 1, lanes=4)
    with pytest.raises(ValueError, match=r"gradient=True, but source defines no log_density_and_"
                                         r"gradient_rows"):
        CppTarget(SHARE, DIM, gradient=True)
    with pytest.raises(ValueError, match=r"gradient=True \(lanes=2\).*log_density_and_gradient_"
                                         r"rows"):
        CppTarget(SHARE, DIM, gradient=True, lanes=2)
    assert "lanes=4" in repr(CppTarget(SHARE, DIM, lanes=4))
    assert "lanes='auto'" in repr(CppTarget(SHARE, DIM))
    # A plain source takes one lane; the rows form the lanes asked for, or on the CPU with
    # "auto" one (the lanes change nothing there).
    assert not CppTarget(plain, 1).rows_form
    assert CppTarget(plain, 1).lanes_for(4096, "cuda") == 1
    assert CppTarget(SHARE, DIM, lanes=8).lanes_for(4096, "cpu") == 8
    assert CppTarget(SHARE, DIM).lanes_for(4096, "cpu") == 1


def _sample_run(target: CppTarget, q: torch.Tensor, transitions: int):
    """Fixed step sizes (each chain's own, 0.15 to 0.25) and mass, jittered trajectory lengths
    (so a warp's chains take different numbers of steps); q moves in place."""
    chains, device, f64 = q.shape[0], q.device, dict(dtype=torch.float64, device=q.device)
    stats = dict(mean=torch.zeros(chains, DIM, **f64), m2=torch.zeros(chains, DIM, **f64),
                 accept_count=torch.zeros(chains, dtype=torch.int64, device=device),
                 accept_prob_sum=torch.zeros(chains, **f64),
                 gradient_evaluations=torch.zeros(chains, dtype=torch.int64, device=device))
    run_op(q, target.op_name(q.dtype, device, chains=chains), target.op_tensors(q.dtype, device),
            target.op_scalars(), torch.linspace(0.15, 0.25, chains, **f64),
            torch.ones(chains, DIM, dtype=q.dtype, device=device),
            0.1, 12, 2026, 0, 0, transitions, trajectory_length=1.1, **stats)
    return stats


@pytest.fixture(scope="module")
def explicit_lanes() -> dict[int, CppTarget]:
    """lanes=4 and lanes=32 (each its own module: a CPU build is minutes on a small CI machine,
    so only these two beside "auto"'s one lane; CUDA runs every lanes, below)."""
    return {g: CppTarget(SHARE + GRADIENT, DIM, data=_data(), log_prob=_log_prob, gradient=True,
                         lanes=g) for g in (4, 32)}


@pytest.mark.slow
def test_cpu_draws_are_bit_identical_for_any_lanes(rows, explicit_lanes):
    """The CPU build of lanes 1, 4 and 32 (every one forms the same tree in one thread): the same
    chains bit for bit, and their log p the float64 reference's (the torch log_prob) to
    rounding, so the common tree is the right sum."""
    q0 = _points(24) * 0.3
    runs = {}
    for g, target in [(1, rows), *explicit_lanes.items()]:
        q = q0.clone()
        stats = _sample_run(target, q, 6)
        assert target.lanes_for(q.shape[0], q.device) == g
        runs[g] = [q] + list(stats.values())
    for g in (4, 32):
        for a, b in zip(runs[1], runs[g]):
            assert torch.equal(a, b), g
    final = runs[1][0]
    assert not torch.equal(final, q0)
    reference = torch.stack([_log_prob(x, _data()) for x in final])
    torch.testing.assert_close(rows.log_density(final), reference, rtol=1e-13, atol=1e-12)


@pytest.mark.slow
def test_sampling_records_the_lanes_and_saving_keeps_them(rows, explicit_lanes, tmp_path):
    import fused_hmc

    q0 = _points(8) * 0.3
    run = dict(num_warmup=0, seed=4, progress=False, step_size=0.2, num_leapfrog_steps=4)
    auto = fused_hmc.sample(q0, 5, target=rows, **run)
    four = fused_hmc.sample(q0, 5, target=explicit_lanes[4], **run)
    assert (auto.lanes, four.lanes) == (1, 4)
    assert torch.equal(auto.samples, four.samples)
    four.save(tmp_path / "four")
    back = fused_hmc.load(tmp_path / "four")
    assert back.lanes == 4 and back.target.lanes == 4
    assert fused_hmc.sample(q0, 2, **run).lanes is None  # a Gaussian has no lanes


@pytest.fixture(scope="module")
def lanes4(explicit_lanes) -> CppTarget:
    return explicit_lanes[4]


@pytest.mark.cuda
def test_cuda_chains_over_lanes_agree_with_the_cpu(lanes4):
    """70 chains (a partial last block and warp) of float64, 6 transitions: the same draws to
    rounding (the device's libm rounds exp and log its own way, so bits may differ; a flipped
    accept decision or a lane reading the wrong rows would differ by O(1)),
    the same acceptances and step counts."""
    q0 = _points(70) * 0.3
    out = {}
    for device in ("cpu", "cuda"):
        q = q0.to(device, copy=True)
        stats = _sample_run(lanes4, q, 6)
        out[device] = [q.cpu()] + [v.cpu() for v in stats.values()]
    cpu, cuda = out["cpu"], out["cuda"]
    torch.testing.assert_close(cuda[0], cpu[0], rtol=1e-9, atol=1e-11)
    assert torch.equal(cuda[3], cpu[3]) and torch.equal(cuda[5], cpu[5])
    assert len(set(cpu[5].tolist())) > 1  # the step sizes vary the steps between chains
    torch.testing.assert_close(lanes4.log_density(q0.cuda()).cpu(), lanes4.log_density(q0),
                               rtol=1e-12, atol=1e-12)


def test_a_stored_target_with_other_lanes_is_the_same_target():
    """Resuming with other lanes is resuming the same chains: a file's target does not differ
    from the given one by its lanes (no compiling here)."""
    from fused_hmc.sampling.stored_target import StoredCppTarget

    given = CppTarget(SHARE + GRADIENT, DIM, data=_data(), gradient=True, lanes=4)
    stored = StoredCppTarget(given.source, DIM, given.data, None, True, "auto")
    assert stored.difference(given) is None
    assert "gradient" in stored.difference(CppTarget(SHARE + GRADIENT, DIM, data=_data()))
