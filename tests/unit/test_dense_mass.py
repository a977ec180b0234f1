"""The dense mass matrix (csrc/math/hmc/dense_mass.h; docs/MASS_MATRIX.md): its math on the host
against torch and numpy references, a dense identity mass giving the diagonal unit mass's bits,
its estimation in warm-up against a reference of Stan's dense_e estimator (per chain and pooled)
fed the same draws, kept estimates counted, bad input, and save / checkpoint round trips."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import fused_hmc
from fused_hmc import _build
from fused_hmc._limits import LIMITS
from fused_hmc.sampling.kernel import ChainKernel, dense_factor
from fused_hmc.sampling.warmup import WarmupSettings
from fused_hmc.targets import DenseGaussian, DiagonalGaussian, StandardGaussian

from ._helpers import run_op
from .test_sampler import assert_results_equal
from .test_sampler_ctrl_c import _sigint_after_call, sigint_handler  # noqa: F401 - a fixture


def _spd(d: int, seed: int, condition: float = 50.0) -> torch.Tensor:
    """A symmetric positive definite [d, d] float64 matrix with the given condition number."""
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    eig = torch.logspace(0, math.log10(condition), d, dtype=torch.float64)
    return (q * eig) @ q.T


@pytest.fixture(scope="module")
def b():
    return _build.bindings()


# ---- the math header against references -----------------------------------------------------------

@pytest.mark.parametrize("d", [1, 3, 17])
def test_cholesky_is_torchs(b, d):
    a = _spd(d, d)
    ok, factor = b.dense_cholesky(a)
    assert ok
    torch.testing.assert_close(factor, torch.linalg.cholesky(a), rtol=1e-12, atol=1e-12)
    assert bool((factor.triu(1) == 0).all())


@pytest.mark.parametrize("bad", ["indefinite", "nan", "inf", "singular"])
def test_cholesky_refuses_what_is_not_finite_positive_definite(b, bad):
    a = _spd(4, 1)
    if bad == "indefinite":
        a[3, 3] = -1.0
    elif bad == "nan":
        a[2, 1] = a[1, 2] = math.nan
    elif bad == "inf":
        a[0, 0] = math.inf
    else:
        a = torch.ones(4, 4, dtype=torch.float64)
    assert not b.dense_cholesky(a)[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_momentum_velocity_and_kinetic_rows_are_their_formulas(b, dtype):
    """p = L^-T z (a triangular solve), v = L L^T p, and C (p0 - p_end), against torch in
    float64; the kernels round each once to the chains' dtype."""
    d, n = 9, 32
    factor = torch.linalg.cholesky(_spd(d, 2)).to(dtype)
    f = factor.double()
    z = torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(3)).to(dtype)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=2e-6, atol=2e-6)
    expected = torch.linalg.solve_triangular(f.T, z.double().T, upper=True).T
    torch.testing.assert_close(b.dense_momentum(factor, z).double(), expected, **tol)
    torch.testing.assert_close(b.dense_velocity(factor, z).double(), z.double() @ (f @ f.T),
                               **tol)
    p_end = torch.flip(z, [0])
    kinetic = b.dense_kinetic_coefficients(factor, z, p_end).double()
    sum_rounded = (z - p_end).double()  # the sum p0 + p1 (p1 = -p_end), rounded in dtype
    torch.testing.assert_close(kinetic, sum_rounded @ (f @ f.T), **tol)


def test_momentum_has_the_mass_as_covariance(b):
    """z ~ N(0, I) gives p = L^-T z ~ N(0, M), M = C^-1: the sample covariance of n = 200000
    momenta against M. Its entry (j, k) has variance (M_jk^2 + M_jj M_kk) / n (Wishart); with
    d (d + 1) / 2 = 15 entries, |error| <= 6 sd of each fails with probability < 15 * 2e-9."""
    d, n = 5, 200_000
    c = _spd(d, 4, condition=100.0)
    factor = torch.linalg.cholesky(c)
    z = torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    p = b.dense_momentum(factor, z)
    m = torch.linalg.inv(c)
    sd = ((m ** 2 + torch.outer(m.diagonal(), m.diagonal())) / n).sqrt()
    assert bool(((p.T @ p / n - m).abs() <= 6 * sd).all())
    assert bool((p.mean(0).abs() <= 6 * (m.diagonal() / n).sqrt()).all())


def test_velocity_is_the_gradient_of_the_kinetic_energy(b):
    """M^-1 p = dK/dp for K(p) = 0.5 p^T C p (autograd), and the kinetic coefficients give
    sum_i (p1 - p0)_i (C (p1 + p0))_i = 2 (K(p1) - K(p0))."""
    d = 7
    c = _spd(d, 6)
    factor = torch.linalg.cholesky(c)
    g = torch.Generator().manual_seed(7)
    p0, p_end = (torch.randn(3, d, dtype=torch.float64, generator=g) for _ in range(2))
    p = p0.clone().requires_grad_(True)
    (0.5 * torch.einsum("bi,ij,bj->b", p, c, p)).sum().backward()
    torch.testing.assert_close(b.dense_velocity(factor, p0), p.grad, rtol=1e-12, atol=1e-12)
    p1 = -p_end
    change = ((p1 - p0) * b.dense_kinetic_coefficients(factor, p0, p_end)).sum(1)

    def kinetic(x):
        return 0.5 * torch.einsum("bi,ij,bj->b", x, c, x)

    torch.testing.assert_close(change, 2 * (kinetic(p1) - kinetic(p0)), rtol=1e-11, atol=1e-11)


def test_comoments_are_the_window_covariance(b):
    """Welford co-moments of n draws: mean and m2 / (n - 1) = numpy's mean and covariance; the
    diagonal is the diagonal mass's Welford variance (same update)."""
    x = torch.randn(50, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    x = x @ torch.linalg.cholesky(_spd(6, 9)).T + 3.0
    mean, m2 = b.dense_comoments(x)
    torch.testing.assert_close(mean, x.mean(0), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(m2 / 49, torch.from_numpy(np.cov(x.numpy().T)), rtol=1e-12,
                               atol=1e-12)
    assert bool((m2 == m2.T).all())


def test_regularisation_is_stans_dense_e(b):
    s, n = _spd(4, 10), 37.0
    expected = (n / (n + 5)) * s + 1e-3 * (5 / (n + 5)) * torch.eye(4, dtype=torch.float64)
    torch.testing.assert_close(b.dense_regularized(s, n), expected, rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_new_factor_replaces_the_old_only_when_positive_definite(b, dtype):
    old = torch.eye(3, dtype=dtype)
    cov = _spd(3, 11)
    changed, new = b.dense_adapted_factor(cov, old)
    assert changed
    # LAPACK's factor is an independent reference, not the same bits: its blocking and FMA use
    # vary with the CPU's kernels.
    rtol = 1e-12 if dtype == torch.float64 else 1e-6
    torch.testing.assert_close(new, torch.linalg.cholesky(cov).to(dtype), rtol=rtol, atol=0)
    for bad in (-cov, cov * math.nan, torch.full((3, 3), math.inf, dtype=torch.float64)):
        changed, kept = b.dense_adapted_factor(bad, old)
        assert not changed and torch.equal(kept, old)


def _windows(chains: int, n: int, d: int, seed: int):
    """Chains' window draws x [B, n, d] of a correlated Gaussian, each chain at its own place along
    it (as chains spread along a long direction are), and their means and co-moments."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(chains, n, d, dtype=torch.float64, generator=g) @ torch.linalg.cholesky(
        _spd(d, 13)).T
    x = x + 3 * torch.randn(chains, 1, d, dtype=torch.float64, generator=g)
    mean = x.mean(1)
    centred = x - mean[:, None]
    return x, mean, torch.einsum("bni,bnj->bij", centred, centred)


def test_pooled_covariance_is_the_covariance_of_all_draws(b):
    """Pooled over chains, the estimate is the sample covariance of every chain's window draws
    about their grand mean (numpy's, an independent reference), the chains' spread included."""
    chains, n, d = 40, 30, 4
    x, mean, m2 = _windows(chains, n, d, 12)
    got = b.dense_pooled_covariance(mean, m2, float(n)).numpy()
    np.testing.assert_allclose(got, np.cov(x.reshape(-1, d).numpy().T), rtol=1e-12)


def test_pooled_covariance_leaves_out_strays_and_chains_without_moments(b):
    """A chain 1e3 total sds from the rest (a far start on its way), one that did not move (zero
    variance) and one that overflowed (NaN) are left out: the estimate is the others' alone."""
    chains, n, d = 40, 30, 4
    x, mean, m2 = _windows(chains, n, d, 17)
    mean[3] += 1e3 * x.reshape(-1, d).std(0)
    m2[5] = 0.0
    m2[8, 1, 1] = math.nan
    kept = [c for c in range(chains) if c not in (3, 5, 8)]
    got = b.dense_pooled_covariance(mean, m2, float(n)).numpy()
    np.testing.assert_allclose(got, np.cov(x[kept].reshape(-1, d).numpy().T), rtol=1e-12)


# ---- the transition -------------------------------------------------------------------------------

def _targets(d: int) -> list:
    g = torch.Generator().manual_seed(14)
    mu = torch.randn(d, generator=g, dtype=torch.float64)
    return [StandardGaussian(mu), DiagonalGaussian(mu, torch.rand(d, generator=g,
                                                                 dtype=torch.float64) + 0.5),
            DenseGaussian(mu, torch.linalg.inv(_spd(d, 15)))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_dense_identity_mass_is_the_unit_masss_bits(dtype, which):
    """With L = I every dense product is exact (dense_mass.h), so the momentum, drifts, energy
    terms and ChEES's velocity records are the unit mass's: warm-up of the step size and ChEES's
    trajectory length, then sampling, bit for bit."""
    d = 6
    target = _targets(d)[which]
    q0 = torch.randn(16, d, dtype=torch.float64, generator=torch.Generator().manual_seed(16))
    common = dict(target=target, seed=3, progress=False, num_warmup=60, adapt_mass_matrix=False,
                  jitter=0.1)
    runs = [fused_hmc.sample(q0.to(dtype), 40, mass_matrix=kind, **common)
            for kind in ("diagonal", "dense")]
    chees = [fused_hmc.sample(q0.to(dtype), 20, mass_matrix=kind, adapt_trajectory_length=True,
                              **common) for kind in ("diagonal", "dense")]
    for diagonal, dense in (runs, chees):
        assert torch.equal(diagonal.samples, dense.samples)
        assert torch.equal(diagonal.step_size, dense.step_size)
        assert torch.equal(diagonal.mean_accept_prob, dense.mean_accept_prob)
        assert diagonal.trajectory_length == dense.trajectory_length
        assert torch.equal(dense.inverse_mass, torch.eye(d, dtype=dtype).expand(16, d, d))


def test_dense_sampling_is_hmc_under_the_reference_mass():
    """A fixed dense mass samples its target: on a correlated Gaussian the draws' mean is mu
    within 6 standard errors (chain means are independent: sd over chains / sqrt(chains))."""
    d, chains = 5, 128
    cov = _spd(d, 17, condition=1e3)
    target = DenseGaussian(torch.zeros(d, dtype=torch.float64), torch.linalg.inv(cov))
    q0 = torch.randn(chains, d, dtype=torch.float64,
                     generator=torch.Generator().manual_seed(18)) @ torch.linalg.cholesky(cov).T
    res = fused_hmc.sample(q0, 400, target=target, mass_matrix="dense", inverse_mass=cov,
                           step_size=0.5, num_leapfrog_steps=4, jitter=0.2, seed=4,
                           progress=False)
    chain_means = res.mean
    se = chain_means.std(0) / math.sqrt(chains)
    assert bool((chain_means.mean(0).abs() <= 6 * se).all())
    assert res.mean_accept_prob.mean() > 0.8  # preconditioned: eps = 0.5 on unit scales


# ---- estimation in warm-up ---------------------------------------------------------------------

def _window_draws(target, q0):
    """The draws of warm-up iterations 10 .. 39 (the one slow window of windows (10, 30, 60) in
    100 iterations), as sampling with the initial identity mass and the fixed step size makes
    them (warm-up adapts no step size here, so its transitions are these)."""
    res = fused_hmc.sample(q0, 40, target=target, mass_matrix="dense", step_size=0.3,
                           num_leapfrog_steps=5, seed=9, progress=False)
    return res.samples[:, 10:40]


@pytest.mark.parametrize("pooled", [False, True])
def test_warmup_estimates_stans_dense_e_from_the_window(pooled):
    d = 4
    cov = _spd(d, 19, condition=30.0)
    target = DenseGaussian(torch.zeros(d, dtype=torch.float64), torch.linalg.inv(cov))
    q0 = torch.randn(12, d, dtype=torch.float64, generator=torch.Generator().manual_seed(20))
    draws = _window_draws(target, q0).numpy()
    res = fused_hmc.sample(q0, 1, target=target, mass_matrix="dense", step_size=0.3,
                           num_leapfrog_steps=5, seed=9, progress=False, num_warmup=100,
                           adapt_step_size=False, adapt_windows=(10, 30, 60), pooled=pooled)
    n = draws.shape[1]
    centred = draws - draws.mean(1, keepdims=True)
    m2 = np.einsum("bni,bnj->bij", centred, centred)
    if pooled:
        s, draws_counted = np.cov(draws.reshape(-1, d).T)[None], n * q0.shape[0]
    else:
        s, draws_counted = m2 / (n - 1), n
    w = draws_counted / (draws_counted + 5)
    expected = w * s + 1e-3 * (1 - w) * np.eye(d)
    np.testing.assert_allclose(res.inverse_mass.numpy(), np.broadcast_to(expected, (12, d, d)),
                               rtol=1e-10, atol=1e-14)
    assert bool((res.mass_factorization_failures == 0).all())


@pytest.mark.parametrize("pooled", [False, True])
def test_a_window_that_is_not_positive_definite_keeps_the_mass_and_is_counted(pooled):
    """Window co-moments poisoned with NaN before the window ends: the chain's (per chain) or the
    shared (pooled, every chain poisoned) estimate is not finite, the op keeps the old factor, and
    the kernel counts the window end for the chains concerned."""
    d, chains = 3, 4
    q = torch.randn(chains, d, dtype=torch.float64, generator=torch.Generator().manual_seed(21))
    settings = WarmupSettings(num_warmup=100, adapt_step_size=False, pooled=pooled,
                              windows=(10, 30, 60))
    groups = 1 if pooled else chains
    factor = dense_factor(torch.eye(d, dtype=torch.float64).expand(groups, d, d), q.dtype)
    kernel = ChainKernel(q, StandardGaussian(torch.zeros(d)), torch.full((groups,), 0.3), factor,
                         0.0, 5, 9, 0, settings, 0)
    kernel.warmup(q, 0, 20)
    poisoned = list(range(chains)) if pooled else [1]
    kernel.state.window_m2[poisoned] = math.nan
    kernel.warmup(q, 20, 80)
    expected = torch.zeros(chains, dtype=torch.int64)
    expected[poisoned] = 1
    assert torch.equal(kernel.mass_factorization_failures(), expected)
    kept = kernel.state.inverse_mass[0 if pooled else 1]
    assert torch.equal(kept, torch.eye(d, dtype=torch.float64))
    if not pooled:
        assert not torch.equal(kernel.state.inverse_mass[0], torch.eye(d, dtype=torch.float64))


def test_splitting_warmup_into_calls_changes_no_bit():
    d = 3
    q0 = torch.randn(8, d, generator=torch.Generator().manual_seed(22))
    kw = dict(target=_targets(d)[2], mass_matrix="dense", num_warmup=150, seed=2,
              progress=False, jitter=0.1)
    whole = fused_hmc.sample(q0, 10, **kw)
    parts = fused_hmc.sample(q0, 10, chunk_size=7, **kw)
    assert torch.equal(whole.samples, parts.samples)
    assert torch.equal(whole.inverse_mass, parts.inverse_mass)


# ---- results, checkpoints, bad input -----------------------------------------------------------

def test_save_load_and_summary(tmp_path, capsys):
    d = 3
    res = fused_hmc.sample(torch.randn(4, d, dtype=torch.float64), 20, target=_targets(d)[2],
                           mass_matrix="dense", num_warmup=100, seed=5, progress=False)
    res.save(tmp_path / "r")
    back = fused_hmc.load(tmp_path / "r")
    assert back.mass_matrix == "dense"
    assert torch.equal(back.inverse_mass, res.inverse_mass)
    assert torch.equal(back.mass_factorization_failures, res.mass_factorization_failures)
    res.summary()
    assert "mass_matrix: dense" in capsys.readouterr().out


def test_checkpoint_resumes_a_dense_warmup_bit_for_bit(sigint_handler, monkeypatch,  # noqa: F811
                                                        tmp_path):
    """Ctrl-C in the per-chain dense warm-up (its co-moments [B, d, d] in the checkpoint) and in
    sampling: new samplers from the checkpoints finish with the uninterrupted result."""
    d, ck = 3, tmp_path / "run.ckpt"
    q0 = torch.randn(6, d, dtype=torch.float64, generator=torch.Generator().manual_seed(23))
    run = dict(target=_targets(d)[2], mass_matrix="dense", num_warmup=150, seed=6,
               progress=False, chunk_size=20)
    whole = fused_hmc.Sampler(q0, **run).run(30)
    for mode, call, done in (("warmup", 3, 60), ("sampling", 1, 170)):
        _sigint_after_call(monkeypatch, mode, call=call)
        res = fused_hmc.Sampler(q0, checkpoint=ck, checkpoint_every=3600, **run).run(30)
        assert res.interrupted and res.next_transition == done
        monkeypatch.undo()
        sampler = fused_hmc.Sampler.from_checkpoint(ck)
        assert_results_equal(sampler.result(), res)
        resumed = sampler.run()
        assert_results_equal(resumed, whole)
        assert torch.equal(resumed.inverse_mass, whole.inverse_mass)


def test_bad_input_is_named():
    q = torch.randn(4, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="mass_matrix must be one of"):
        fused_hmc.Sampler(q, mass_matrix="full")
    with pytest.raises(ValueError, match="positive definite"):
        fused_hmc.Sampler(q, mass_matrix="dense", inverse_mass=-torch.eye(3))
    with pytest.raises(ValueError, match="symmetric"):
        fused_hmc.Sampler(q, mass_matrix="dense", inverse_mass=torch.eye(3) + torch.triu(
            torch.ones(3, 3), 1))
    with pytest.raises(ValueError, match=r"shape \[3, 3\] or \[4, 3, 3\]"):
        fused_hmc.Sampler(q, mass_matrix="dense", inverse_mass=torch.ones(3))
    with pytest.raises(ValueError, match="mass_matrix='dense' too"):
        fused_hmc.Sampler(q, inverse_mass=torch.eye(3).expand(4, 3, 3))
    limit = LIMITS["kMaxDenseMassDim"]
    with pytest.raises(ValueError, match=f"dim <= {limit}"):
        fused_hmc.Sampler(torch.randn(2, limit + 1), mass_matrix="dense")
    with pytest.raises(ValueError, match="pass a scalar step_size"):
        fused_hmc.Sampler(q, mass_matrix="dense", inverse_mass=torch.eye(3).expand(4, 3, 3),
                          pooled=True, num_warmup=10)


def test_the_op_names_a_bad_dense_argument():
    d, chains = 3, 2
    q = torch.randn(chains, d, dtype=torch.float64)
    f64 = dict(dtype=torch.float64)
    base = dict(q=q, target="standard", target_tensors=[torch.zeros(d, **f64)],
                target_scalars=[], step_size=torch.ones(1, **f64), jitter=0.0,
                num_leapfrog_steps=1, seed=0, chain_offset=0, first_transition=0,
                num_transitions=1)
    warm = dict(dual_averaging=torch.zeros(1, 3, **f64), window_mean=torch.zeros(chains, d, **f64),
                warmup_start=0, num_warmup=10, windows=[], target_accept=0.8,
                adapt_step_size=True, adapt_mass_matrix=True)
    with pytest.raises(ValueError, match="window_m2 must have shape"):
        run_op(**base, inv_mass=torch.eye(d, **f64)[None],
               window_m2=torch.zeros(chains, d, **f64), **warm)
    with pytest.raises(ValueError, match="inv_mass .*must have shape"):
        run_op(**base, inv_mass=torch.eye(d + 1, **f64)[None],
               window_m2=torch.zeros(chains, d, d, **f64), **warm)
    big = LIMITS["kMaxDenseMassDim"] + 1
    with pytest.raises(ValueError, match="supports d <= "):
        run_op(**{**base, "q": torch.randn(1, big, **f64),
                  "target_tensors": [torch.zeros(big, **f64)]},
               inv_mass=torch.eye(big, **f64)[None], mean=torch.zeros(1, big, **f64),
               m2=torch.zeros(1, big, **f64))


def test_pooled_update_factorises_a_pooled_covariance():
    """The pooled_update op with a dense factor [1, d, d] and a covariance [d, d] (the rank-pooled
    warm-up's window end): Stan's dense_e regularisation for the draws counted, factorised."""
    d = 4
    cov = _spd(d, 24)
    f64 = dict(dtype=torch.float64)
    factor = torch.eye(d, **f64)[None].contiguous()
    fused_hmc.ops.pooled_update(torch.full((1,), 0.3, **f64), torch.zeros(1, 3, **f64), factor,
                                torch.tensor([0.7, 1.0], **f64), cov, 40.0, 9, 40, [5, 5, 5], 0.8,
                                False, True)
    w = 40.0 / 45.0
    expected = torch.linalg.cholesky(w * cov + 1e-3 * (1 - w) * torch.eye(d, **f64))
    torch.testing.assert_close(factor[0], expected, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match=r"variance \(dense: the pooled covariance\) must have "
                                         r"shape \[4, 4\]"):
        fused_hmc.ops.pooled_update(torch.full((1,), 0.3, **f64), torch.zeros(1, 3, **f64),
                                    factor, torch.tensor([0.7, 1.0], **f64), torch.ones(d, **f64),
                                    40.0, 9, 40, [5, 5, 5], 0.8, False, True)
