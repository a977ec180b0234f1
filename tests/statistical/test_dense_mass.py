"""A Gaussian with a known dense covariance (condition number 1e4, correlations up to 0.99) is
recovered by the sampler with a dense mass adapted in warm-up (issue 32), with derived bounds.

Sigma = D R D with R the AR(1) correlation rho^|i - j|, rho = 0.99 (every entry non-zero, the
largest correlation 0.99), and D = diag(exp(a s_i)), s evenly spaced in [-1, 1], a chosen so that
cond(Sigma) = 1e4 exactly. Chains start at exact draws from N(0, Sigma) (fixed seed), so there is
no burn-in to bias the draws; warm-up adapts one dense mass and step size for all chains (pooled)
or one per chain; on the CPU and on CUDA.

1. The draws recover Sigma. Whitened by Sigma's own Cholesky factor (y = L^-1 x, y ~ N(0, I)),
   each chain's average m_b of y_j and of y_j y_k (j <= k) over its draws has expectation 0 and
   delta_jk. The chains are independent, so t = (mean_b m_b - expected) / (sd_b m_b / sqrt(B))
   follows Student's t with B - 1 degrees of freedom (the chain averages of 1000 draws are close
   to normal); each of the d + d (d + 1) / 2 statistics gets alpha = 1e-6 / (their number)
   (Bonferroni), so a correct sampler fails the test less than once in 1e6 runs.
2. The adapted inverse mass C recovers Sigma: the eigenvalues of W = L^-1 C L^-T lie within
   1 +- delta. If C were the covariance of N = n B / tau independent draws (the last slow window
   of n draws per chain, tau the draws' integrated autocorrelation time), W would be a Wishart
   matrix over N, whose eigenvalues lie within (1 +- sqrt(d / N))^2 and whose entries have sd at
   most sqrt(2 / N); the estimator adds biases of order tau / n (the geometric mean of variances,
   exp(-1 / n_eff) of each chain's, and the mean of correlations, Fisher's
   rho (1 - rho^2) / (2 n_eff), which the (1 - rho) scale of the narrowest direction turns into
   about 1 / n_eff; each at most 2 tau / n below). So delta = 2 sqrt(d / N) + d / N +
   6 sqrt(2 / N) + 4 tau / n, with tau the largest of the whitened products' autocorrelation
   times estimated from test 1's chain averages (tau_jk = n_s var_b(m_b) / var(y_j y_k), var 2 on
   the diagonal, 1 off it), doubled for its own estimation noise and for the window's draws being
   from warm-up. Per chain (pooled=False) N is one chain's n / tau, and every chain's W is
   held to its bound.
"""
from __future__ import annotations

import math

import pytest
import torch

import fused_hmc
from fused_hmc.targets import DenseGaussian
from fused_hmc.validation.thresholds import per_check_alpha, t_critical

D, RHO, CONDITION = 6, 0.99, 1e4
CHAINS, WARMUP, DRAWS = 512, 1000, 1000
LAST_WINDOW = 500  # Stan's windows in 1000 warm-up iterations: the last is [450, 949]


def known_covariance() -> torch.Tensor:
    i = torch.arange(D, dtype=torch.float64)
    r = RHO ** (i[:, None] - i[None, :]).abs()
    s = torch.linspace(-1, 1, D, dtype=torch.float64)

    def condition(a: float) -> float:
        scale = torch.exp(a * s)
        return float(torch.linalg.cond(scale[:, None] * r * scale[None, :]))

    low, high = 0.0, 10.0  # cond is increasing in a; bisection to machine precision
    for _ in range(200):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if condition(mid) < CONDITION else (low, mid)
    scale = torch.exp(0.5 * (low + high) * s)
    return scale[:, None] * r * scale[None, :]


@pytest.fixture(scope="module")
def sigma():
    cov = known_covariance()
    assert abs(float(torch.linalg.cond(cov)) / CONDITION - 1) < 1e-9
    return cov


@pytest.mark.parametrize("pooled", [True, False])
def test_a_dense_gaussian_is_recovered(sigma, pooled, device):
    factor = torch.linalg.cholesky(sigma)
    g = torch.Generator().manual_seed(2026)
    q0 = torch.randn(CHAINS, D, dtype=torch.float64, generator=g) @ factor.T
    target = DenseGaussian(torch.zeros(D, dtype=torch.float64), torch.linalg.inv(sigma))
    res = fused_hmc.sample(q0.to(device), DRAWS, target=target, mass_matrix="dense",
                           num_warmup=WARMUP, pooled=pooled, num_leapfrog_steps=8, jitter=0.2,
                           seed=32, progress=False)
    assert bool((res.mass_factorization_failures == 0).all())

    # 1. the draws
    y = torch.linalg.solve_triangular(factor, res.samples.cpu().reshape(-1, D).T, upper=False).T
    y = y.reshape(CHAINS, DRAWS, D)
    j, k = torch.triu_indices(D, D)
    products = y[..., j] * y[..., k]
    averages = torch.cat([y.mean(1), products.mean(1)], 1)  # [chains, statistics]
    expected = torch.cat([torch.zeros(D), (j == k).double()])
    spread = averages.std(0)
    t = (averages.mean(0) - expected) / (spread / math.sqrt(CHAINS))
    limit = t_critical(per_check_alpha(averages.shape[1]), CHAINS - 1)
    assert float(t.abs().max()) < limit, (t, limit)

    # 2. the adapted inverse mass
    variance = torch.where(j == k, 2.0, 1.0).double()
    tau = float((DRAWS * spread[D:] ** 2 / variance).max())
    tau = 2 * max(tau, 1.0)
    n_eff = LAST_WINDOW * (CHAINS if pooled else 1) / tau
    delta = 2 * math.sqrt(D / n_eff) + D / n_eff + 6 * math.sqrt(2 / n_eff) + 4 * tau / LAST_WINDOW
    c = res.inverse_mass.cpu().double()[: 1 if pooled else CHAINS]
    whitened = torch.linalg.solve_triangular(
        factor, torch.linalg.solve_triangular(factor, c, upper=False).mT, upper=False)
    eig = torch.linalg.eigvalsh(0.5 * (whitened + whitened.mT))
    assert float((eig - 1).abs().max()) < delta, (float((eig - 1).abs().max()), delta)
