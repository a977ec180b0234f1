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
