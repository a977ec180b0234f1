"""NumPyro's vectorized NUTS on the CPU for bench_cpu.py, run in an interpreter that has jax and
numpyro (they are not the project's dependencies): reads the model's data and starts from an .npz
file bench_cpu.py writes, writes the draws and the wall time of warm-up and sampling to another.

NUTS (max tree depth 10, target acceptance 0.8, diagonal mass adapted per chain: NumPyro's
defaults) on the model's log density from jax_models.py, in float32, chain_method="vectorized":
every chain in one vmapped program. One untimed run first compiles it (same shapes, another seed).

Usage: python bench_cpu_numpyro.py IN.npz OUT.npz
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(path_in: str, path_out: str) -> None:
    import jax
    import numpyro
    from numpyro.infer import MCMC, NUTS

    import jax_models

    inputs = dict(np.load(path_in))
    model = str(inputs.pop("model"))
    warmup, draws = int(inputs.pop("warmup")), int(inputs.pop("draws"))
    start = np.asarray(inputs.pop("initial_point"), dtype=np.float32)
    logdensity = getattr(jax_models, model)(inputs)
    chains = start.shape[0]
    numpyro.set_host_device_count(1)

    # one MCMC object for both runs: it keeps the compiled sampler between them
    mcmc = MCMC(NUTS(potential_fn=lambda x: -logdensity(x)), num_warmup=warmup,
                num_samples=draws, num_chains=chains, chain_method="vectorized",
                progress_bar=False)

    def run(seed: int):
        began = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(seed), init_params=start)
        positions = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
        return np.asarray(positions, dtype=np.float64), time.perf_counter() - began

    run(1)  # compiles
    positions, wall = run(2)
    np.savez(path_out, draws=positions, wall_s=wall, jax_version=jax.__version__,
             numpyro_version=numpyro.__version__)


if __name__ == "__main__":
    main(*sys.argv[1:3])
