"""A CPU probe of ChEES's statistics on diamonds (README.md here): ChEES through a
one-rank gloo group, whose per-chain terms are formed in torch (fused_hmc/sampling/pooled_ranks.py
ChEESRecord.sums), replaced here by robust variants.

    python probe_chees_statistics_cpu.py VARIANT SEED [CHAINS]   VARIANT: mean | median | median_clip

mean: the library's (ensemble means); median: centred on the coordinate-wise medians;
median_clip: also each chain's term clipped at 10 times the median term. W=2000 for a longer
warm-up.
"""
import os
import sys

import torch
import torch.distributed as dist

import fused_hmc
from fused_hmc import models
from fused_hmc.sampling import pooled_ranks
from fused_hmc.sampling.distributed import end_rank_process
from fused_hmc.validation.posteriordb import compare_draws

variant, seed = sys.argv[1], int(sys.argv[2])
chains = int(sys.argv[3]) if len(sys.argv) > 3 else 16
library_sums = pooled_ranks.ChEESRecord.sums


def robust_sums(self, every, group, length):
    if variant == "mean":
        return library_sums(self, every, group, length)
    x0, x1, velocity, omega, jitter = self._parts
    finite = torch.isfinite(x1).all(1)
    m0 = x0.median(0).values
    m1 = x1[finite].median(0).values if finite.any() else m0
    c0, c1 = x0 - m0, x1 - m1
    term = (jitter * length) * ((c1 * c1 - c0 * c0).sum(1) * (c1 * velocity).sum(1))
    term = torch.where(torch.isfinite(term), term, 0.0)
    if variant == "median_clip":
        bound = (omega * term).abs().median() * 10 + 1e-300
        term = term.clamp(-bound, bound)
    return torch.stack([(omega * term).sum(), omega.sum()])


pooled_ranks.ChEESRecord.sums = robust_sums
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29534")
torch.set_num_threads(1)
dist.init_process_group("gloo", rank=0, world_size=1)
model = models.diamonds()
q0 = model.initial_point(chains, generator=torch.Generator().manual_seed(20261201 + seed))
res = fused_hmc.sample(q0, 200, target=model.target(gradient=True),
                       num_warmup=int(os.environ.get("W", 375)), seed=seed, progress=False,
                       adapt_trajectory_length=True, max_leapfrog_steps=200,
                       num_leapfrog_steps=8, process_group=dist.group.WORLD)
values = model.constrained_values(res.samples.double())
report = compare_draws(values, model.posteriordb, alpha=1e-6)
sigma = values[..., model.constrained_names.index("sigma")].mean(1)
print(variant, seed, "PASS" if report.passed else "FAIL", f"eps {res.step_size[0]:.3g}",
      f"T {res.trajectory_length:.3g}", f"largest chain sigma {sigma.max():.3g}", flush=True)
dist.destroy_process_group()
end_rank_process(0)
