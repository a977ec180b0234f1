"""A stand-in for posteriordb's kidiq-kidscore_momhsiq (not in /work/shared/posteriordb): Gelman &
Hill's regression of a child's test score on the mother's high-school completion and IQ,

    kid_score ~ normal(b0 + b1 mom_hs + b2 mom_iq, sigma),  sigma > 0, flat priors,

on generated data of kidiq's size and shape (N = 434; mom_hs ~ Bernoulli(0.79), mom_iq ~
N(100, 15), the truth near Gelman & Hill's fit: b = (26, 6, 0.56), sigma = 18). mom_iq is the
far-scaled predictor: b0 and b2 correlate at about -0.96 (condition number about 200 under a
diagonal mass) and their posterior sds differ by a factor of about 100 (b0 about 6, b2 about
0.06). From Stan's starts (uniform(-2, 2) on (b0, b1, b2, log sigma)) b2 begins up to 40
posterior sds from its answer and sigma at 0.14 .. 7.4 against 17, where residuals near 100 make
the density very steep, so chains arrive at very different times. The posterior is the
conjugate one of a linear regression, so its moments are known exactly (:func:`exact_moments`).
"""
from __future__ import annotations

import math

import torch
from torch.distributions import Normal, constraints

N = 434


def kidiq_data(seed: int = 20) -> dict:
    g = torch.Generator().manual_seed(seed)
    f64 = dict(dtype=torch.float64)
    mom_hs = (torch.rand(N, generator=g, **f64) < 0.79).double()
    mom_iq = 100 + 15 * torch.randn(N, generator=g, **f64)
    kid = 26 + 6 * mom_hs + 0.56 * mom_iq + 18 * torch.randn(N, generator=g, **f64)
    return {"kid_score": kid, "mom_hs": mom_hs, "mom_iq": mom_iq}


def kidiq_fn(p, data):
    mean = p["b0"] + p["b1"] * data["mom_hs"] + p["b2"] * data["mom_iq"]
    return Normal(mean, p["sigma"]).log_prob(data["kid_score"]).sum()


PARAMS = {"b0": (), "b1": (), "b2": (), "sigma": ((), constraints.positive)}


def kidiq_model(seed: int = 20):
    """The compiled fused_hmc.TorchModel (x = (b0, b1, b2, log sigma))."""
    import fused_hmc

    return fused_hmc.TorchModel(kidiq_fn, PARAMS, data=kidiq_data(seed))


def exact_moments(seed: int = 20) -> dict:
    """{name: (posterior mean, posterior sd)} of b0, b1, b2 and sigma. With flat priors on
    (b, sigma), p(b, sigma | y) is proportional to sigma^-N exp(-|y - X b|^2 / (2 sigma^2)), so
    sigma^2 | y is scaled Inv-chi^2(nu, s^2) with nu = N - k - 1 and nu s^2 the residual sum of
    squares at the least-squares b_hat, and b | y is t_nu(b_hat, s^2 (X'X)^-1) (BDA3 14.2, with
    one degree of freedom fewer than under p(sigma) ~ 1 / sigma)."""
    d = kidiq_data(seed)
    X = torch.stack([torch.ones(N, dtype=torch.float64), d["mom_hs"], d["mom_iq"]], 1)
    y = d["kid_score"]
    xtx = X.T @ X
    b_hat = torch.linalg.solve(xtx, X.T @ y)
    k = X.shape[1]
    rss = float(((y - X @ b_hat) ** 2).sum())
    nu = N - k - 1  # flat p(sigma) = sigma^0: one degree of freedom fewer than p(sigma) ~ 1/sigma
    s2 = rss / nu  # sigma^2 | y ~ scaled Inv-chi^2(nu, s2)
    cov_b = torch.linalg.inv(xtx) * s2 * nu / (nu - 2)  # b | y ~ t_nu(b_hat, s2 (X'X)^-1)
    # E sigma for sigma^2 ~ Inv-chi^2(nu, s2): sqrt(s2 nu / 2) Gamma((nu - 1) / 2) / Gamma(nu / 2)
    e_sigma = math.sqrt(s2 * nu / 2) * math.exp(math.lgamma((nu - 1) / 2) - math.lgamma(nu / 2))
    var_sigma = s2 * nu / (nu - 2) - e_sigma ** 2
    return {"b0": (float(b_hat[0]), math.sqrt(float(cov_b[0, 0]))),
            "b1": (float(b_hat[1]), math.sqrt(float(cov_b[1, 1]))),
            "b2": (float(b_hat[2]), math.sqrt(float(cov_b[2, 2]))),
            "sigma": (e_sigma, math.sqrt(var_sigma))}
