"""JAX anchors: a hand-written jit/lax.scan HMC, BlackJAX vmap+scan, NumPyro vectorized.

Same target and transition as fused_hmc: N(0, I), unit mass, L leapfrog steps of size eps, float32.
Long runs (`*_scan`, `numpyro_vectorized`) return seconds for `num_transitions` transitions of
`chains` chains in one jitted call; `*_per_call` return seconds per transition when one jitted
transition is called back-to-back from Python (state chained, dispatch is asynchronous). Every
figure follows a warm-up call that compiles, and is timed on the host clock around
block_until_ready.

`numpyro_vectorized` is NumPyro's MCMC(chain_method="vectorized").run as a user calls it: it
collects every draw on the device, and compiles its sampling loop anew on every run (seen with
NumPyro 0.22: a fixed cost of about a second whatever the run's length). `numpyro_kernel_scan` times
NumPyro's own vectorized HMC kernel in a jitted lax.scan instead, the per-transition cost without
that.
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


def _per_call(step, state, target_s: float = 0.02, repeats: int = 5) -> float:
    """Seconds per call of state = step(*state), called back-to-back, after compile and warm-up."""
    import jax

    for _ in range(3):
        state = step(*state)
    jax.block_until_ready(state)
    start = time.perf_counter()
    for _ in range(5):
        state = step(*state)
    jax.block_until_ready(state)
    calls = max(1, min(5000, round(target_s / max((time.perf_counter() - start) / 5, 1e-9))))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            state = step(*state)
        jax.block_until_ready(state)
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def _transition(step_size: float, num_steps: int):
    """(q [B, d], key) -> (q_new, accepted [B]): one HMC transition of N(0, I), written by hand."""
    import jax
    import jax.numpy as jnp

    def transition(q, key):
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

    return transition


def _initial(chains: int, dim: int):
    import jax

    return jax.random.normal(jax.random.PRNGKey(0), (chains, dim))


def jax_scan(chains: int, dim: int, num_steps: int, step_size: float, num_transitions: int,
             repeats: int = 3) -> float:
    import jax

    transition = _transition(step_size, num_steps)

    @jax.jit
    def run(q, key):
        q, acc = jax.lax.scan(transition, q, jax.random.split(key, num_transitions))
        return q, acc.mean()

    q0 = _initial(chains, dim)
    return _median_seconds(lambda: jax.block_until_ready(run(q0, jax.random.PRNGKey(1))), repeats)


def jax_per_call(chains: int, dim: int, num_steps: int, step_size: float) -> float:
    import jax

    transition = _transition(step_size, num_steps)

    @jax.jit
    def step(q, key):
        key, sub = jax.random.split(key)
        return transition(q, sub)[0], key

    return _per_call(step, (_initial(chains, dim), jax.random.PRNGKey(1)))


def jax_scan_draws(chains: int, dim: int, num_steps: int, step_size: float, num_transitions: int,
                   keep_chains: int, keep_dims: int):
    """Draws [keep_chains, num_transitions, keep_dims] (numpy) of the first chains and dims."""
    import jax
    import numpy as np

    transition = _transition(step_size, num_steps)

    def one(q, key):
        q, _ = transition(q, key)
        return q, q[:keep_chains, :keep_dims]

    @jax.jit
    def run(q, key):
        return jax.lax.scan(one, q, jax.random.split(key, num_transitions))[1]

    draws = run(_initial(chains, dim), jax.random.PRNGKey(2))
    return np.asarray(jax.device_get(draws)).transpose(1, 0, 2)


def _blackjax_kernel(dim: int, num_steps: int, step_size: float):
    import blackjax
    import jax.numpy as jnp

    return blackjax.hmc(lambda x: -0.5 * jnp.sum(x * x), step_size, jnp.ones(dim), num_steps)


def blackjax_scan(chains: int, dim: int, num_steps: int, step_size: float,
                  num_transitions: int, repeats: int = 3) -> float:
    import jax

    kernel = _blackjax_kernel(dim, num_steps, step_size)

    @jax.jit
    def run(states, key):
        def one(states, key):
            keys = jax.random.split(key, chains)
            states, info = jax.vmap(kernel.step)(keys, states)
            return states, info.is_accepted

        states, acc = jax.lax.scan(one, states, jax.random.split(key, num_transitions))
        return states, acc.mean()

    states = jax.vmap(kernel.init)(_initial(chains, dim))
    return _median_seconds(lambda: jax.block_until_ready(run(states, jax.random.PRNGKey(1))),
                           repeats)


def blackjax_per_call(chains: int, dim: int, num_steps: int, step_size: float) -> float:
    import jax

    kernel = _blackjax_kernel(dim, num_steps, step_size)

    @jax.jit
    def step(states, key):
        key, sub = jax.random.split(key)
        states, _ = jax.vmap(kernel.step)(jax.random.split(sub, chains), states)
        return states, key

    states = jax.vmap(kernel.init)(_initial(chains, dim))
    return _per_call(step, (states, jax.random.PRNGKey(1)))


def numpyro_vectorized(chains: int, dim: int, num_steps: int, step_size: float,
                       num_transitions: int, repeats: int = 1) -> float:
    import jax
    from numpyro.infer import MCMC

    kernel = _numpyro_kernel(num_steps, step_size)
    mcmc = MCMC(kernel, num_warmup=0, num_samples=num_transitions, num_chains=chains,
                chain_method="vectorized", progress_bar=False)
    init = _initial(chains, dim)

    def go():
        mcmc.run(jax.random.PRNGKey(1), init_params=init)
        jax.block_until_ready(mcmc.get_samples())

    return _median_seconds(go, repeats=repeats)


def _numpyro_kernel(num_steps: int, step_size: float):
    import jax.numpy as jnp
    from numpyro.infer import HMC

    return HMC(potential_fn=lambda x: 0.5 * jnp.sum(x * x), step_size=step_size,
               num_steps=num_steps, adapt_step_size=False, adapt_mass_matrix=False)


def numpyro_kernel_scan(chains: int, dim: int, num_steps: int, step_size: float,
                        num_transitions: int, repeats: int = 3) -> float:
    import jax

    kernel = _numpyro_kernel(num_steps, step_size)
    state = kernel.init(jax.random.split(jax.random.PRNGKey(1), chains), 0,
                        init_params=_initial(chains, dim))  # vectorized: one key per chain

    @jax.jit
    def run(state):
        def one(state, _):
            state = kernel.sample(state, (), {})
            return state, None

        return jax.lax.scan(one, state, None, length=num_transitions)[0].z

    return _median_seconds(lambda: jax.block_until_ready(run(state)), repeats)
