"""The gradient-based inverse mass (mass_estimator="gradients"; csrc/math/hmc/gradient_mass.h,
docs/MASS_MATRIX.md): its math on the host against torch, and the warm-up's estimates on
Gaussian targets, where the estimate is the target's covariance whatever the window's draws
(Sigma G Sigma = S with G = P S P gives Sigma = P^-1), so the adapted inverse mass is known in
closed form: Stan's regularisation of the covariance, w C + 1e-3 (1 - w) I with w = N / (N + 5)
for the N draws the window counts. Rounding aside it is exact, so the tolerances are rounding's:
a few hundred float64 operations per entry on matrices of condition <= 1e4 (relative error below
1e4 x 1e3 x 2^-53 = 1e-9)."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fused_hmc
from fused_hmc import _build
from fused_hmc.targets import DenseGaussian, DiagonalGaussian

from .test_sampler import assert_results_equal
from .test_sampler_ctrl_c import _sigint_after_call, sigint_handler  # noqa: F401 - a fixture

F64 = torch.float64
# Stan's windows shrunk to one slow window of 30 draws: init 10, slow [10, 40), terminal 60.
WINDOWS = dict(num_warmup=100, adapt_windows=(10, 30, 60))
WINDOW_DRAWS = 30


@pytest.fixture(scope="module")
def b():
    return _build.bindings()


def _symmetric(d: int, seed: int) -> torch.Tensor:
    a = torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=F64)
    return a + a.T


def _correlated_covariance(d: int = 6) -> torch.Tensor:
    """Correlation 0.99 between coordinates 0 and 1 (scales 10 and 4), the others' scales down to
    0.1: condition about 1.2e4 for d = 6."""
    r = torch.eye(d, dtype=F64)
    r[0, 1] = r[1, 0] = 0.99
    scale = torch.logspace(1, -1, d, dtype=F64)
    return scale[:, None] * r * scale[None, :]


def _regularised(cov: torch.Tensor, draws: int) -> torch.Tensor:
    w = draws / (draws + 5)
    return w * cov + 1e-3 * (1 - w) * torch.eye(cov.shape[-1], dtype=F64)


# ---- the header against torch --------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(d=st.integers(1, 24), seed=st.integers(0, 2**31 - 1))
def test_eigen_decomposition_reconstructs_and_is_orthonormal(b, d, seed):
    a = _symmetric(d, seed)
    values, vectors = b.gradient_eigen(a)
    scale = a.abs().max().item()
    assert torch.allclose(vectors @ torch.diag(values) @ vectors.T, a, rtol=0, atol=1e-12 * scale)
    assert torch.allclose(vectors.T @ vectors, torch.eye(d, dtype=F64), rtol=0, atol=1e-12)
    assert torch.allclose(values.sort().values, torch.linalg.eigvalsh(a), rtol=0,
                          atol=1e-12 * scale)


@settings(max_examples=30, deadline=None)
@given(d=st.integers(1, 16), seed=st.integers(0, 2**31 - 1))
def test_the_dense_estimate_solves_sigma_g_sigma_equals_s(b, d, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2 * d + 2, d, generator=g, dtype=F64) * torch.logspace(-1, 1, d, dtype=F64)
    y = torch.randn(2 * d + 2, d, generator=g, dtype=F64)
    s, grads = torch.cov(x.T).reshape(d, d), torch.cov(y.T).reshape(d, d)
    ok, sigma = b.gradient_dense_covariance(s, grads)
    assert ok
    assert torch.equal(sigma, sigma.T)
    assert torch.linalg.eigvalsh(sigma).min() > 0
    assert torch.allclose(sigma @ grads @ sigma, s, rtol=0, atol=1e-9 * s.abs().max())


def test_a_gaussian_gradient_covariance_gives_the_precision_inverse(b):
    """G = P S P for any S (even far from P^-1): the estimate is P^-1. Here S^1/2 G S^1/2 has
    condition number 1.1e12, within the 1e15 the header's eigenvalue floor keeps (Jacobi's
    rotations find small eigenvalues to about 2^-53 of the largest)."""
    cov = _correlated_covariance()
    precision = torch.linalg.inv(cov)
    s = torch.diag(torch.logspace(-1, 1, 6, dtype=F64))  # draws that are nothing like the target
    ok, sigma = b.gradient_dense_covariance(s, precision @ s @ precision)
    assert ok
    assert torch.allclose(sigma, cov, rtol=1e-8, atol=1e-8 * cov.abs().max())


def test_a_rank_deficient_window_gives_an_estimate_in_the_draws_span(b):
    """A chain's window of n <= d draws: S is singular; the estimate is finite, positive
    semi-definite and zero across the draws' span's complement (the regularisation completes it)."""
    d = 5
    x = torch.randn(3, d, generator=torch.Generator().manual_seed(3), dtype=F64)
    s = torch.cov(x.T)
    ok, sigma = b.gradient_dense_covariance(s, torch.eye(d, dtype=F64))
    assert ok and bool(torch.isfinite(sigma).all())
    null = torch.linalg.svd(x - x.mean(0)).Vh[-1]  # orthogonal to every centred draw
    assert (sigma @ null).abs().max() < 1e-10 * sigma.abs().max()
    assert torch.linalg.eigvalsh(sigma).min() > -1e-10 * sigma.abs().max()


def test_not_finite_moments_are_refused(b):
    s = torch.eye(3, dtype=F64)
    s[0, 1] = math.nan
    assert not b.gradient_dense_covariance(s, torch.eye(3, dtype=F64))[0]
    assert not b.gradient_dense_covariance(torch.zeros(3, 3, dtype=F64),
                                           torch.eye(3, dtype=F64))[0]


# ---- warm-up on Gaussians: the covariance, in closed form ----------------------------------------

@pytest.mark.parametrize("pooled", [False, True])
def test_dense_warmup_recovers_a_correlated_gaussians_covariance(pooled):
    """Condition number about 2e4 and correlation 0.99 (the issue's test case), chains started
    far off (sd 3 about the mean): one window of 30 draws gives the covariance (pooled: of 30 x 12
    draws) to rounding."""
    cov = _correlated_covariance()
    assert 1e4 < torch.linalg.cond(cov) < 1e5
    target = DenseGaussian(torch.zeros(6, dtype=F64), torch.linalg.inv(cov))
    q0 = 3 * torch.randn(12, 6, generator=torch.Generator().manual_seed(4), dtype=F64)
    res = fused_hmc.sample(q0, 1, target=target, mass_matrix="dense", mass_estimator="gradients",
                           step_size=0.05, num_leapfrog_steps=5, seed=9, progress=False,
                           adapt_step_size=False, pooled=pooled, **WINDOWS)
    draws = WINDOW_DRAWS * (q0.shape[0] if pooled else 1)
    expected = _regularised(cov, draws).expand(12, 6, 6)
    assert torch.allclose(res.inverse_mass, expected, rtol=1e-8, atol=1e-8 * cov.max())
    assert bool((res.mass_factorization_failures == 0).all())


@pytest.mark.parametrize("pooled", [False, True])
def test_diagonal_warmup_recovers_a_diagonal_gaussians_variances(pooled):
    """sigma_j = sqrt(S_jj / G_jj) with G_jj = S_jj / scale_j^4: the variance scale_j^2, scales
    0.1 .. 10."""
    scale = torch.logspace(-1, 1, 5, dtype=F64)
    target = DiagonalGaussian(torch.zeros(5, dtype=F64), scale)
    q0 = torch.randn(9, 5, generator=torch.Generator().manual_seed(5), dtype=F64)
    res = fused_hmc.sample(q0, 1, target=target, mass_estimator="gradients", step_size=1e-2,
                           num_leapfrog_steps=3, seed=2, progress=False, adapt_step_size=False,
                           pooled=pooled, **WINDOWS)
    draws = WINDOW_DRAWS * (q0.shape[0] if pooled else 1)
    w = draws / (draws + 5)
    expected = (w * scale**2 + 1e-3 * (1 - w)).expand(9, 5)
    assert torch.allclose(res.inverse_mass, expected, rtol=1e-12, atol=0)


def test_the_estimate_needs_no_draws_from_the_posterior():
    """The point of the estimator: chains stuck 20 sd away in a tiny step size still estimate the
    mass the draws' covariance cannot (their window spread is the step size's, not the target's)."""
    cov = _correlated_covariance()
    target = DenseGaussian(torch.zeros(6, dtype=F64), torch.linalg.inv(cov))
    q0 = 20 * torch.randn(8, 6, generator=torch.Generator().manual_seed(6), dtype=F64)
    run = dict(target=target, mass_matrix="dense", step_size=1e-3, num_leapfrog_steps=2, seed=3,
               progress=False, adapt_step_size=False, pooled=True, **WINDOWS)
    from_gradients = fused_hmc.sample(q0, 1, mass_estimator="gradients", **run)
    from_draws = fused_hmc.sample(q0, 1, **run)
    expected = _regularised(cov, WINDOW_DRAWS * 8)
    assert torch.allclose(from_gradients.inverse_mass[0], expected, rtol=1e-8,
                          atol=1e-8 * cov.max())
    assert not torch.allclose(from_draws.inverse_mass[0], expected, rtol=0.5)


# ---- runs: splitting, checkpoints, results, bad input --------------------------------------------

@pytest.mark.parametrize("mass_matrix", ["diagonal", "dense"])
def test_checkpoint_resumes_a_gradient_warmup_bit_for_bit(sigint_handler, monkeypatch,  # noqa: F811
                                                           tmp_path, mass_matrix):
    """Ctrl-C in the per-chain warm-up (the draws' and gradients' window moments [2, B, ...] in
    the checkpoint): a new sampler from the checkpoint finishes with the uninterrupted result."""
    ck = tmp_path / "run.ckpt"
    cov = _correlated_covariance(3)
    q0 = torch.randn(6, 3, dtype=F64, generator=torch.Generator().manual_seed(7))
    run = dict(target=DenseGaussian(torch.zeros(3, dtype=F64), torch.linalg.inv(cov)),
               mass_matrix=mass_matrix, mass_estimator="gradients", num_warmup=150, seed=6,
               progress=False, chunk_size=20)
    whole = fused_hmc.Sampler(q0, **run).run(30)
    _sigint_after_call(monkeypatch, "warmup", call=3)
    res = fused_hmc.Sampler(q0, checkpoint=ck, checkpoint_every=3600, **run).run(30)
    assert res.interrupted and res.next_transition == 60
    monkeypatch.undo()
    resumed = fused_hmc.Sampler.from_checkpoint(ck).run()
    assert_results_equal(resumed, whole)
    assert torch.equal(resumed.inverse_mass, whole.inverse_mass)
    assert resumed.warmup.mass_estimator == "gradients"


def test_save_load_keeps_the_estimator(tmp_path, capsys):
    res = fused_hmc.sample(torch.randn(4, 3, dtype=F64), 10, mass_estimator="gradients",
                           num_warmup=60, seed=1, progress=False)
    res.save(tmp_path / "r")
    assert fused_hmc.load(tmp_path / "r").warmup.mass_estimator == "gradients"


def test_bad_input_is_named():
    q = torch.randn(4, 3, dtype=F64)
    with pytest.raises(ValueError, match="mass_estimator must be one of"):
        fused_hmc.Sampler(q, mass_estimator="fisher")
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="mass_estimator='gradients' runs on the CPU only"):
            fused_hmc.Sampler(q.cuda(), mass_estimator="gradients", num_warmup=10)


def test_the_op_names_a_bad_window_shape():
    """With gradient_mass_estimate the windows hold the draws' moments, then the gradients'."""
    from ._helpers import run_op

    d, chains = 3, 2
    f64 = dict(dtype=F64)
    with pytest.raises(ValueError, match=r"window_mean must have shape \[2, 2, 3\]"):
        run_op(q=torch.randn(chains, d, **f64), target="standard",
               target_tensors=[torch.zeros(d, **f64)], target_scalars=[],
               step_size=torch.ones(1, **f64), inv_mass=torch.ones(1, d, **f64), jitter=0.0,
               num_leapfrog_steps=1, seed=0, chain_offset=0, first_transition=0,
               num_transitions=1, dual_averaging=torch.zeros(1, 3, **f64),
               window_mean=torch.zeros(chains, d, **f64),
               window_m2=torch.zeros(2, chains, d, **f64),
               warmup_start=0, num_warmup=10, windows=[], target_accept=0.8,
               adapt_step_size=True, adapt_mass_matrix=True, gradient_mass_estimate=True)


def test_the_cli_flag(capsys):
    from fused_hmc import cli

    code = cli.main(["sample", "--chains", "8", "--dim", "3", "--samples", "10", "--warmup", "60",
                     "--mass-estimator", "gradients", "--device", "cpu", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and "inverse mass from draws and gradients" in out, out
