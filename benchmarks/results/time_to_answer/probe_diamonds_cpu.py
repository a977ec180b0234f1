"""CPU probes of diamonds' warm-up from Stan's starts (README.md here).

    python probe_diamonds_cpu.py MODE SEED [CHAINS]      MODE: pooled | perchain | chees
    W=2000 python probe_diamonds_cpu.py chees 1          a longer warm-up

375 warm-up transitions + 200 draws, float64, starts initial_point(CHAINS, seed 20261201 + SEED),
sample(seed=SEED); prints the posteriordb verdict, step size, T, the inverse mass's range and the
largest chain mean of sigma (posterior 0.123).
"""
import os
import sys
import time

import torch

import fused_hmc
from fused_hmc import models
from fused_hmc.validation.posteriordb import compare_draws

mode, seed = sys.argv[1], int(sys.argv[2])
chains = int(sys.argv[3]) if len(sys.argv) > 3 else 16
SETTINGS = {"pooled": dict(num_leapfrog_steps=8, jitter=0.2, pooled=True),
            "perchain": dict(num_leapfrog_steps=8, jitter=0.2),
            "chees": dict(adapt_trajectory_length=True, max_leapfrog_steps=200,
                          num_leapfrog_steps=8)}
model = models.diamonds()
q0 = model.initial_point(chains, generator=torch.Generator().manual_seed(20261201 + seed))
start = time.time()
res = fused_hmc.sample(q0, 200, target=model.target(gradient=True),
                       num_warmup=int(os.environ.get("W", 375)), seed=seed, progress=False,
                       **SETTINGS[mode])
values = model.constrained_values(res.samples.double())
report = compare_draws(values, model.posteriordb, alpha=1e-6)
sigma = values[..., model.constrained_names.index("sigma")].mean(1)
root_inv_mass = res.inverse_mass[0].sqrt()
print(mode, seed, "PASS" if report.passed else "FAIL", f"{time.time() - start:.0f} s",
      f"eps {res.step_size[0]:.3g}", f"T {res.trajectory_length}",
      f"sqrt(inverse mass) {root_inv_mass.min():.3g} .. {root_inv_mass.max():.3g}",
      f"largest chain sigma {sigma.max():.3g}")
