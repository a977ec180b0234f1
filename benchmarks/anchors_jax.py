"""JAX anchors for long runs: a hand-written jit/lax.scan HMC, BlackJAX vmap+scan, NumPyro vectorized.

Each returns seconds for `num_transitions` transitions of `chains` chains on N(0, I) (d, L, eps as
given), after a warm-up call that compiles. Timed with block_until_ready on synchronised clocks.
"""
from __future__ import annotations

import statistics
import time


def _median_seconds(fn, repeats: int = 3) -> float:
    fn()  # compile + warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def jax_scan(chains: int, dim: int, num_steps: int, step_size: float, num_transitions: int) -> float:
    import jax
    import jax.numpy as jnp

    def transition(carry, key):
        q = carry
        k_p, k_u = jax.random.split(key)
        p0 = jax.random.normal(k_p, q.shape)
        p = p0 - 0.5 * step_size * q
        x = q

        def leap(_, xp):
            x, p = xp
            x = x + step_size * p
            return x, p - step_size * x

        x, p = jax.lax.fori_loop(0, num_steps - 1, leap, (x, p))
        x = x + step_size * p
        p = p - 0.5 * step_size * x
        h0 = 0.5 * jnp.sum(q * q, -1) + 0.5 * jnp.sum(p0 * p0, -1)
        h1 = 0.5 * jnp.sum(x * x, -1) + 0.5 * jnp.sum(p * p, -1)
        u = jax.random.uniform(k_u, (q.shape[0],))
        accept = jnp.log(jnp.maximum(u, 1e-10)) < h0 - h1
        return jnp.where(accept[:, None], x, q), accept

    @jax.jit
    def run(q, key):
        q, acc = jax.lax.scan(transition, q, jax.random.split(key, num_transitions))
        return q, acc.mean()

    q0 = jax.random.normal(jax.random.PRNGKey(0), (chains, dim))
    return _median_seconds(lambda: jax.block_until_ready(run(q0, jax.random.PRNGKey(1))))


def blackjax_scan(chains: int, dim: int, num_steps: int, step_size: float,
                  num_transitions: int) -> float:
    import blackjax
    import jax
    import jax.numpy as jnp

    kernel = blackjax.hmc(lambda x: -0.5 * jnp.sum(x * x), step_size, jnp.ones(dim), num_steps)

    @jax.jit
    def run(states, key):
        def one(states, key):
            keys = jax.random.split(key, chains)
            states, info = jax.vmap(kernel.step)(keys, states)
            return states, info.is_accepted

        states, acc = jax.lax.scan(one, states, jax.random.split(key, num_transitions))
        return states, acc.mean()

    q0 = jax.random.normal(jax.random.PRNGKey(0), (chains, dim))
    states = jax.vmap(kernel.init)(q0)
    return _median_seconds(lambda: jax.block_until_ready(run(states, jax.random.PRNGKey(1))))


def numpyro_vectorized(chains: int, dim: int, num_steps: int, step_size: float,
                       num_transitions: int) -> float:
    import jax
    import jax.numpy as jnp
    from numpyro.infer import HMC, MCMC

    kernel = HMC(potential_fn=lambda x: 0.5 * jnp.sum(x * x), step_size=step_size,
                 num_steps=num_steps, adapt_step_size=False, adapt_mass_matrix=False)
    mcmc = MCMC(kernel, num_warmup=0, num_samples=num_transitions, num_chains=chains,
                chain_method="vectorized", progress_bar=False)
    init = jax.random.normal(jax.random.PRNGKey(0), (chains, dim))

    def go():
        mcmc.run(jax.random.PRNGKey(1), init_params=init)
        jax.block_until_ready(mcmc.get_samples())

    return _median_seconds(go, repeats=1)
