"""Exact statistics of HMC on the Gaussian target N(mu, I), for the suite's expected values.

With x = q - mu, one leapfrog trajectory acts on every coordinate by the same 2x2 matrix M:
(x_L, p_L) = M (x_0, p_0) (before the final momentum flip, which H ignores). M is computed here
by running the leapfrog on the basis vectors in float64, so it is the integrator's own linear map
rather than a closed form. Then, per coordinate z = (x_0, p_0) ~ N(0, I_2) at stationarity,

    dH = H(x_L, p_L) - H(x_0, p_0) = sum_j z_j' A z_j,   A = (M'M - I) / 2.

A has eigenvalues a > 0 > -b (det M = 1), so dH = a X - b Y with X, Y iid chi2(d) (the squared
coordinates of z in A's eigenbasis), and every expectation below is a one-dimensional integral
over X of chi-square distribution functions in closed form (Y integrated analytically, using
E[e^{bY} 1{Y < y}] = (1 - 2b)^{-d/2} F_d((1 - 2b) y)). References: Neal (2011), "MCMC using
Hamiltonian dynamics", sec. 5.2.3.3 (leapfrog on a Gaussian is a rotation).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np


class GaussianHMCExact(NamedTuple):
    """Exact stationary quantities of the transition (float64 arithmetic, quadrature error < 1e-12).

    acceptance: E[min(1, exp(-dH))], the expected acceptance rate at stationarity.
    lag1_autocorrelation: E[x_t x_{t+1}] of one coordinate at stationarity (unit variance).
    mean_exp_minus_dh: E[exp(-dH)], which is exactly 1 for a volume-preserving integrator.
    leapfrog_matrix: M, ((x_L <- x_0, x_L <- p_0), (p_L <- x_0, p_L <- p_0)).
    """
    acceptance: float
    lag1_autocorrelation: float
    mean_exp_minus_dh: float
    leapfrog_matrix: tuple[tuple[float, float], tuple[float, float]]


def leapfrog_matrix(step_size: float, num_leapfrog_steps: int) -> np.ndarray:
    """M with (x_L, p_L) = M (x_0, p_0) for the spec's integrator on the target N(0, 1)."""
    state = np.eye(2)  # columns: the trajectories of (x, p) = (1, 0) and (0, 1)
    x, p = state[0].copy(), state[1].copy()
    p = p - 0.5 * step_size * x
    for _ in range(num_leapfrog_steps - 1):
        x = x + step_size * p
        p = p - step_size * x
    x = x + step_size * p
    p = p - 0.5 * step_size * x
    return np.stack([x, p])


@functools.lru_cache(maxsize=None)
def gaussian_hmc_exact(dim: int, step_size: float, num_leapfrog_steps: int) -> GaussianHMCExact:
    """Exact acceptance rate and lag-1 autocorrelation of HMC on N(mu, I_dim) at stationarity.

    d=64, L=10, eps=0.1 gives acceptance 0.9933021193 and lag-1 autocorrelation 0.542199.
    """
    from .thresholds import scipy_stats

    stats = scipy_stats()  # scipy, with a clear message when it is missing
    from scipy import integrate

    m = leapfrog_matrix(step_size, num_leapfrog_steps)
    a_mat = 0.5 * (m.T @ m - np.eye(2))
    evals, evecs = np.linalg.eigh(a_mat)  # ascending: evals[0] = -b < 0 < a = evals[1]
    b, a = -evals[0], evals[1]
    d = dim
    if not (a > 0 and 0 < b < 0.5):
        raise ValueError(f"unexpected energy-error eigenvalues a={a}, -b={-b}")
    tilt = 1.0 - 2.0 * b  # E[e^{bY} g(Y)] = tilt^{-d/2} E[g(W / tilt)], W ~ chi2(d)
    norm_tilt = tilt ** (-d / 2)
    chi_d, chi_d2 = stats.chi2(d), stats.chi2(d + 2)

    # Rejection happens when dH > 0, i.e. Y < y0(X) = a X / b, with probability 1 - e^{-dH}.
    def reject_given_x(x: float) -> float:  # E[(1 - e^{-dH}) 1{dH > 0} | X = x]
        y0 = a * x / b
        return chi_d.cdf(y0) - math.exp(-a * x) * norm_tilt * chi_d.cdf(tilt * y0)

    def reject_times_y_given_x(x: float) -> float:  # E[(1 - e^{-dH}) 1{dH > 0} Y | X = x]
        y0 = a * x / b  # uses y f_d(y) = d f_{d+2}(y)
        return d * (chi_d2.cdf(y0) - math.exp(-a * x) * norm_tilt / tilt * chi_d2.cdf(tilt * y0))

    upper = chi_d.isf(1e-18)

    def expect(g) -> float:
        value, err = integrate.quad(lambda x: chi_d.pdf(x) * g(x), 0.0, upper, limit=400,
                                    epsabs=1e-15, epsrel=1e-12)
        return value

    rejection = expect(reject_given_x)
    reject_x = expect(lambda x: x * reject_given_x(x))
    reject_y = expect(reject_times_y_given_x)
    # E[x_0 x_1] = E[x_0 x_L] + E[(1 - alpha)(x_0^2 - x_0 x_L)] summed over coordinates, where the
    # quadratic form x_0^2 - x_0 x_L = z' B z; in A's eigenbasis its cross term averages to 0
    # (alpha depends on X, Y only, and flipping the sign of one eigen-coordinate keeps X, Y), so
    # only the diagonal of B in that basis enters, against E[(1 - alpha) X] and E[(1 - alpha) Y].
    b_mat = np.array([[1.0 - m[0, 0], -0.5 * m[0, 1]], [-0.5 * m[0, 1], 0.0]])
    b_eig = evecs.T @ b_mat @ evecs  # [0, 0] pairs with Y (eigenvalue -b), [1, 1] with X
    lag1 = m[0, 0] + (b_eig[1, 1] * reject_x + b_eig[0, 0] * reject_y) / d
    mean_exp = (1.0 + 2.0 * a) ** (-d / 2) * tilt ** (-d / 2)
    return GaussianHMCExact(acceptance=1.0 - rejection, lag1_autocorrelation=float(lag1),
                            mean_exp_minus_dh=float(mean_exp),
                            leapfrog_matrix=tuple(map(tuple, m.tolist())))
