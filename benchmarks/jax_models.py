"""fused_hmc.models' log densities written in JAX, for the BlackJAX anchors of bench_models.py and
bench_chees.py (one copy each): functions of the unconstrained position x, as the models' own
torch log_prob, from the model's data dict."""
from __future__ import annotations

import numpy as np


def _arrays(data: dict):
    import jax.numpy as jnp

    return {k: jnp.asarray(np.asarray(v, dtype=np.float32)) for k, v in data.items()}


def eight_schools(data: dict):
    """posteriordb's eight_schools_noncentered: x = (theta_tilde[8], mu, log tau)."""
    import jax.numpy as jnp

    d = _arrays(data)
    y, sigma = d["y"], d["sigma"]

    def logdensity(x):
        mu, log_tau = x[8], x[9]
        tau = jnp.exp(log_tau)
        lp = -0.5 * (mu / 5.0) ** 2 - jnp.log1p((tau / 5.0) ** 2) + log_tau
        z = (y - (mu + tau * x[:8])) / sigma
        return lp - 0.5 * jnp.sum(x[:8] ** 2) - 0.5 * jnp.sum(z ** 2)

    return logdensity


def diamonds(data: dict):
    """posteriordb's diamonds (brms): x = (coefficients[K], intercept, log sigma), the
    coefficients theta (b = B theta, the QR form) or b itself (B the identity), as the model's
    data says."""
    import jax.numpy as jnp

    d = _arrays(data)
    design, Y, B = d["XT"].T, d["Y"], d["B"]  # fused_hmc keeps the design by column
    K, N = design.shape[1], design.shape[0]

    def logdensity(x):
        coef, intercept, log_sigma = x[:K], x[K], x[K + 1]
        b = B @ coef
        sigma = jnp.exp(log_sigma)
        r = Y - intercept - design @ coef
        u, s = (intercept - 8.0) / 10.0, sigma / 10.0
        return (-0.5 * jnp.sum(b * b) - 2.0 * jnp.log1p(u * u / 3.0)
                - 2.0 * jnp.log1p(s * s / 3.0) + (1.0 - N) * log_sigma
                - 0.5 * jnp.sum(r * r) / (sigma * sigma))

    return logdensity


def funnel(data: dict):
    """fused_hmc.models.funnel: x = (v, x[1..num_x]), v ~ N(0, 3^2), x_i | v ~ N(0, exp(v / 2)^2),
    up to the model's constant."""
    import jax.numpy as jnp

    num_x = int(data["num_x"])

    def logdensity(x):
        v, rest = x[0], x[1:num_x + 1]
        return -(v * v) / 18.0 - 0.5 * jnp.exp(-v) * jnp.sum(rest * rest) - 0.5 * num_x * v

    return logdensity


def logistic_regression(data: dict):
    """fused_hmc.models.logistic_regression: x = beta [k], data X [n, k], y [n], prior_scale."""
    import jax
    import jax.numpy as jnp

    X = jnp.asarray(np.asarray(data["X"], dtype=np.float32))
    y = jnp.asarray(np.asarray(data["y"], dtype=np.float32))
    inv_var = 1.0 / float(data["prior_scale"]) ** 2

    def logdensity(x):
        eta = X @ x
        return jnp.sum(y * eta - jax.nn.softplus(eta)) - 0.5 * inv_var * jnp.sum(x * x)

    return logdensity


# The torch forms (TorchModel) of bench_lanes.py's models (lanes_models.py), exactly: the same
# unconstrained coordinates, Jacobian terms and torch.distributions' normalising constants, so the
# two log densities agree to rounding. dtype: numpy's float32 or float64 (the data's and x's).

def _typed(data: dict, dtype):
    import jax.numpy as jnp

    return {k: jnp.asarray(np.asarray(v, dtype=dtype)) for k, v in data.items()}


def earnings_torch_form(data: dict, dtype=np.float32):
    """x = (beta[4], log sigma): y ~ Normal(beta0 + X beta[1:], sigma), flat priors."""
    import jax.numpy as jnp
    from jax.scipy.stats import norm

    d = _typed(data, dtype)
    X, y = d["X"], d["y"]

    def logdensity(x):
        log_sigma = x[4]
        mean = x[0] + X @ x[1:4]
        return jnp.sum(norm.logpdf(y, mean, jnp.exp(log_sigma))) + log_sigma

    return logdensity


def logistic_regression_torch_form(data: dict, dtype=np.float32):
    """x = beta [k]: beta ~ N(0, prior_scale^2), y ~ Bernoulli(logits = X beta)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.stats import norm

    d = _typed({"X": data["X"], "y": data["y"]}, dtype)
    X, y, scale = d["X"], d["y"], float(data["prior_scale"])

    def logdensity(x):
        eta = X @ x
        return (jnp.sum(norm.logpdf(x, 0.0, scale))
                + jnp.sum(y * eta - jax.nn.softplus(eta)))

    return logdensity


def gauss_mix_torch_form(data: dict, dtype=np.float32):
    """x = (mu1, log(mu2 - mu1), log sigma[2], logit theta) (ordered, positive, unit interval):
    mu ~ N(0, 2), sigma ~ N(0, 2) on sigma > 0, theta ~ Beta(5, 5),
    y ~ theta N(mu1, sigma1) + (1 - theta) N(mu2, sigma2)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.stats import beta, norm

    y = _typed(data, dtype)["y"]

    def logdensity(x):
        mu = jnp.stack([x[0], x[0] + jnp.exp(x[1])])
        sigma = jnp.exp(x[2:4])
        theta = jax.nn.sigmoid(x[4])
        jacobian = x[1] + x[2] + x[3] - jax.nn.softplus(-x[4]) - jax.nn.softplus(x[4])
        prior = (jnp.sum(norm.logpdf(mu, 0.0, 2.0)) + jnp.sum(norm.logpdf(sigma, 0.0, 2.0))
                 + beta.logpdf(theta, 5.0, 5.0))
        first = jnp.log(theta) + norm.logpdf(y, mu[0], sigma[0])
        second = jnp.log1p(-theta) + norm.logpdf(y, mu[1], sigma[1])
        return prior + jnp.sum(jnp.logaddexp(first, second)) + jacobian

    return logdensity


def diamonds_torch_form(data: dict, dtype=np.float32):
    """x = (theta[K], Intercept, log sigma), b = B theta: b ~ N(0, 1), Intercept ~ t(3, 8, 10),
    sigma ~ t(3, 0, 10) on sigma > 0, Y ~ Normal(Intercept + theta . XT, sigma)."""
    import jax.numpy as jnp
    from jax.scipy.stats import norm, t

    d = _typed(data, dtype)
    XT, Y, B = d["XT"], d["Y"], d["B"]
    K = XT.shape[0]

    def logdensity(x):
        coef, intercept, log_sigma = x[:K], x[K], x[K + 1]
        sigma = jnp.exp(log_sigma)
        return (jnp.sum(norm.logpdf(B @ coef, 0.0, 1.0)) + t.logpdf(intercept, 3.0, 8.0, 10.0)
                + t.logpdf(sigma, 3.0, 0.0, 10.0)
                + jnp.sum(norm.logpdf(Y, intercept + coef @ XT, sigma)) + log_sigma)

    return logdensity

