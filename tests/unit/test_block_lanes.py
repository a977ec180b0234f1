"""Block lanes and the partial count P (docs/LANES.md, csrc/math/targets/lane_rows.h).

A rows-form log p is the fixed pairwise tree over P strided partials, P = 32, or 256 from 65,536
data rows on (fused_hmc.lanes.row_partials: the rows alone); a chain on G lanes sums P / G
partials a lane, then the lanes' sums by the butterfly and, above 32 lanes (a CUDA block a chain),
the warps' sums from shared memory.

CPU: the rule; argument checks; and lane_rows.h itself, built by g++ into a small harness
(tests/unit/cpp/lane_tree_harness.cpp) that forms log p from given partials as G lanes do: equal
bit for bit for every G to one thread's tree (G = 1, the CPU build's order), and to a recursive
pairwise tree written here in numpy (independent of lane_rows.h), on partials of wide dynamic
range whose sequential sum differs from the tree (so a wrong order would show).

CUDA (`cuda`; build the modules first: ``python -m tests.unit._block_lanes_targets --jobs 8``):
a logistic regression over 65,573 rows (P = 256; _block_lanes_targets.py), its C++ rows form on
lanes 1, 2, .. 256 and its TorchModel form on 1, 32 and 256: the same draws and acceptances bit for
bit, with jittered trajectory lengths and each chain's own step size (the chains of a warp take
different numbers of steps).
"""
from __future__ import annotations

import ctypes
import hashlib
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from fused_hmc import lanes as lanes_module
from fused_hmc.lanes import (
    BLOCK_ROW_PARTIALS,
    BLOCK_ROWS,
    LANES,
    ROW_PARTIALS,
    check_lanes,
    choose_lanes,
    row_partials,
)

from . import _block_lanes_targets as targets

HERE = Path(__file__).resolve().parent
CSRC = HERE.parent.parent / "csrc"


# ---- the rule --------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, partials", [(1, 32), (5000, 32), (BLOCK_ROWS - 1, 32),
                                            (BLOCK_ROWS, 256), (262_144, 256), (10**8, 256)])
def test_row_partials_depend_on_the_rows_alone(rows, partials):
    assert row_partials(rows) == partials
    assert partials in (ROW_PARTIALS, BLOCK_ROW_PARTIALS)
    # Every lanes "auto" may take divides P: each lane has a whole block of partials.
    for chains in (1, 132, 4096, 1 << 20):
        for sms in (1, 132):
            g = choose_lanes(chains, sms, rows)
            assert partials % g == 0 and g in LANES


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, None])
def test_row_partials_names_a_bad_argument(bad):
    with pytest.raises(ValueError, match=rf"rows must be a positive int, got {bad!r}"):
        row_partials(bad)


def test_check_lanes():
    assert [check_lanes(g) for g in LANES] == list(LANES) == [2**k for k in range(9)]
    assert check_lanes("auto") == "auto"
    assert check_lanes(256, rows=BLOCK_ROWS) == 256
    for bad in (0, 3, 512, True, 2.0, "Auto", "32"):
        with pytest.raises(ValueError, match=r"^lanes must be \"auto\" or one of \[1, 2, 4, 8, "
                                             r"16, 32, 64, 128, 256\]"):
            check_lanes(bad)
    with pytest.raises(ValueError, match=r"^--lanes=64 is more than the data's row partials P = "
                                         r"32 \(with 5000 rows"):
        check_lanes(64, rows=5000, argument="--lanes")


def test_the_cli_takes_block_lanes():
    import argparse

    from fused_hmc.cli.flag_types import lanes

    assert [lanes(str(g)) for g in LANES] == list(LANES) and lanes("auto") == "auto"
    for bad in ("3", "512", "0", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match="must be auto or one of 1, 2, 4"):
            lanes(bad)


def test_a_target_takes_p_from_its_rows():
    """The generated header carries P and the lanes (no compiling here)."""
    from fused_hmc import CppTarget, cpp_build

    large = targets.rows_target(256)
    assert large.data_rows == targets.ROWS and large.row_partials == 256
    header = cpp_build.model_header(large.build_spec(torch.float64, "cuda", 256))
    assert "#define FHMC_USER_ROW_PARTIALS 256" in header and "#define FHMC_USER_LANES 256" in header
    small = CppTarget(targets.SHARE, targets.DIM, data={"XT": torch.zeros(targets.K, 100),
                                                        "y": torch.zeros(100)})
    assert small.row_partials == 32
    assert "#define FHMC_USER_ROW_PARTIALS 32" in cpp_build.model_header(
        small.build_spec(torch.float64, "cuda", 32))
    with pytest.raises(ValueError, match=r"lanes=64 is more than the data's row partials P = 32"):
        CppTarget(targets.SHARE, targets.DIM, data=small.data, lanes=64)
    plain = "template <typename T, typename Data> FUSED_HMC_HD T log_density(const T* x, " \
            "const Data& data) { return -x[0] * x[0]; }"
    assert CppTarget(plain, 1).row_partials == 1


def test_a_generated_target_takes_p_from_its_rows():
    model = targets.generated_target("auto")
    assert model.lanes == "auto" and model.rows_form and model.row_partials == 256
    assert model.lanes_for(4096, "cpu") == 1


# ---- lane_rows.h's tree, for every G, on the CPU ------------------------------------------------

@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    source = HERE / "cpp" / "lane_tree_harness.cpp"
    headers = [CSRC / "math" / "targets" / "lane_rows.h", CSRC / "math" / "fp" / "host_device.h"]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in [source, *headers])).hexdigest()[:12]
    lib = tmp_path_factory.mktemp("lane_tree") / f"lane_tree_{digest}.so"
    subprocess.run(["g++", "-std=c++17", "-O2", "-ffp-contract=off", "-shared", "-fPIC",
                    f"-I{CSRC}", str(source), "-o", str(lib)], check=True)
    dll = ctypes.CDLL(str(lib))
    for name, c_type in (("fhmc_lanes_sum_f32", ctypes.c_float),
                         ("fhmc_lanes_sum_f64", ctypes.c_double)):
        fn = getattr(dll, name)
        fn.restype = c_type
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    return dll


def _lanes_sum(dll, partials: np.ndarray, lanes: int):
    fn = dll.fhmc_lanes_sum_f32 if partials.dtype == np.float32 else dll.fhmc_lanes_sum_f64
    return partials.dtype.type(fn(partials.ctypes.data, len(partials), lanes))


def _pairwise_tree(values: np.ndarray):
    """((v0 + v1) + (v2 + v3)) + ..., recursively, in the values' dtype."""
    if len(values) == 1:
        return values[0]
    half = len(values) // 2
    return values.dtype.type(_pairwise_tree(values[:half]) + _pairwise_tree(values[half:]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("partials", [ROW_PARTIALS, BLOCK_ROW_PARTIALS])
def test_every_lanes_forms_the_one_tree(harness, partials, dtype):
    """Partials spanning 12 orders of magnitude with both signs, from a fixed seed: the lanes' sum
    is the tree's bits for every G in 1 .. P, and differs from the sequential sum (the order
    matters for these values)."""
    rng = np.random.default_rng(partials)
    orders_differ = 0
    for trial in range(20):
        values = (rng.standard_normal(partials) * 10.0 ** rng.uniform(-6, 6, partials)).astype(dtype)
        tree = _pairwise_tree(values)
        sequential = dtype(0)
        for v in values:
            sequential = dtype(sequential + v)
        orders_differ += sequential != tree
        for g in (g for g in LANES if g <= partials):
            got = _lanes_sum(harness, values, g)
            assert got.tobytes() == tree.tobytes(), (partials, g, trial)
    assert orders_differ >= 5  # the data can tell the orders apart


def test_the_harness_refuses_lanes_beyond_p(harness):
    values = np.ones(ROW_PARTIALS)
    assert np.isnan(_lanes_sum(harness, values, 64))


# ---- the CPU build of a P = 256 target -------------------------------------------------------

@pytest.mark.slow
def test_cpu_log_density_of_256_partials():
    """The CPU module (one thread: the whole tree over 256 partials) against the torch reference
    in float64 (to rounding: a sum of 65,573 terms of size about 1 in another order; 1e-12
    relative is about 2^-40, far above the pairwise tree's error bound of a few ulp x log2 n),
    and its gradient against autograd."""
    target = targets.rows_target("auto")
    x = torch.randn(8, targets.DIM, generator=torch.Generator().manual_seed(1),
                    dtype=torch.float64) * 0.5
    reference = torch.stack([targets.log_prob(row, targets.data()) for row in x])
    torch.testing.assert_close(target.log_density(x), reference, rtol=1e-12, atol=1e-9)
    report = target.check(n=8, dtype=torch.float64)
    assert report.worst_value < 1 and report.worst_gradient < 1


# ---- CUDA: the same draws on every lanes -------------------------------------------------------

def _start(chains: int, device: str = "cuda"):
    """(q0, step size): starts near the posterior mode (Newton's method in torch), 0.5 of each
    coordinate's posterior sd away, and a step size of half the smallest sd (the leapfrog is
    stable and accepts)."""
    d = targets.data()
    X = torch.cat([d["XT"].T, torch.ones(targets.ROWS, 1, dtype=torch.float64)], 1)
    x = torch.zeros(targets.DIM, dtype=torch.float64)
    for _ in range(25):
        p = torch.sigmoid(X @ x)
        grad = X.T @ (d["y"] - p) - 0.25 * x
        hessian = -(X.T * (p * (1 - p))) @ X - 0.25 * torch.eye(targets.DIM, dtype=torch.float64)
        x = x - torch.linalg.solve(hessian, grad)
    sd = torch.linalg.inv(-hessian).diagonal().sqrt()
    noise = torch.randn(chains, targets.DIM, generator=torch.Generator().manual_seed(2),
                        dtype=torch.float64)
    return (x + 0.5 * sd * noise).to(device), 0.5 * float(sd.min())


def _run(target, q0, step_size, pooled=False, **extra):
    import fused_hmc

    # each chain's own step size (0.8 to 1.2 of step_size): with the trajectory jitter the chains
    # share, the chains of a warp then take different numbers of steps; a pooled warm-up starts
    # all chains from one step size
    steps = step_size if pooled else step_size * torch.linspace(
        0.8, 1.2, q0.shape[0], dtype=torch.float64, device=q0.device)
    return fused_hmc.sample(q0, 10, target=target, seed=35, progress=False, jitter=0.3,
                            step_size=steps, trajectory_length=6 * step_size, pooled=pooled,
                            **extra)


def _assert_same_draws(runs: dict, q0) -> None:
    base = next(iter(runs.values()))
    assert float(base.accept_rate.mean()) > 0.3 and not torch.equal(base.final_state, q0)
    for g, res in runs.items():
        assert res.lanes == (256 if g == "auto" else g)
        assert torch.equal(res.samples, base.samples), g
        assert torch.equal(res.accept_count, base.accept_count), g
        assert res.sampling_gradient_evaluations == base.sampling_gradient_evaluations, g


@pytest.mark.cuda
@pytest.mark.slow
def test_rows_form_draws_are_bit_identical_for_every_lanes():
    """70 chains (a partial last warp for lanes below 32; 70 blocks for block lanes), 10
    transitions: lanes 1 .. 256 and "auto" (256 at this data's size)."""
    q0, eps = _start(70)
    runs = {g: _run(targets.rows_target(g), q0, eps) for g in (*targets.EVERY_LANES, "auto")}
    _assert_same_draws(runs, q0)


@pytest.mark.cuda
@pytest.mark.slow
def test_generated_draws_are_bit_identical_for_warp_and_block_lanes():
    q0, eps = _start(70)
    runs = {g: _run(targets.generated_target(g), q0, eps) for g in targets.GENERATED_LANES}
    _assert_same_draws(runs, q0)


@pytest.mark.cuda
@pytest.mark.slow
def test_block_lanes_agree_with_the_cpu():
    """lanes="auto" (256 on CUDA, one thread on the CPU): the same draws to rounding (the
    device's libm rounds exp and log its own way; a lane reading the wrong rows, or a warp's sum
    lost in shared memory, would differ by O(sd)), the same acceptances."""
    q0, eps = _start(33)
    cuda = _run(targets.rows_target("auto"), q0, eps)
    cpu = _run(targets.rows_target("auto"), q0.cpu(), eps)
    assert (cuda.lanes, cpu.lanes) == (256, 1)
    torch.testing.assert_close(cuda.samples.cpu(), cpu.samples, rtol=1e-9, atol=1e-11)
    assert torch.equal(cuda.accept_count.cpu(), cpu.accept_count)


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("pooled", [False, True])
def test_block_lanes_warm_up(pooled):
    """A warm-up (per chain, and pooled: the cooperative kernel, whose shared memory holds the
    inverse mass before the block's exchange) on 256 lanes against 32: the two adapt alike, with
    mean step sizes within 20% of each other and mean acceptances within 0.05 (the acceptance
    probabilities may differ in the last bits between lanes, test_diamonds_lanes.py's xfail, so the
    runs part chaotically; on the CPU build three seeds' mean step sizes span 6% and their
    acceptances 0.001). Not the target acceptance: a 60-iteration per-chain warm-up ends with a
    6-iteration window whose averaged step size accepts 0.997 on the CPU too (issue 32)."""
    q0, eps = _start(132)
    results = {g: _run(targets.rows_target(g), q0, eps, num_warmup=60, pooled=pooled)
               for g in (32, 256)}
    for res in results.values():
        assert torch.isfinite(res.samples).all() and torch.isfinite(res.step_size).all()
        assert float(res.mean_accept_prob.mean()) > 0.5
    accept = [float(res.mean_accept_prob.mean()) for res in results.values()]
    assert abs(accept[0] - accept[1]) < 0.05, accept
    ratio = results[256].step_size.double().mean() / results[32].step_size.double().mean()
    assert 0.8 < float(ratio) < 1.25


def test_lanes_module_has_one_list():
    """One list of lanes: the CLI, CppTarget and TorchModel read fused_hmc.lanes."""
    assert lanes_module.MAX_LANES == max(LANES) == BLOCK_ROW_PARTIALS
