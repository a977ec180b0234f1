"""Small launches of every kernel shape and noise source, for compute-sanitizer memcheck/racecheck."""
from __future__ import annotations

import torch

from fused_hmc import ops
from fused_hmc.sampling import chain_statistics

for dtype in (torch.float32, torch.float64):
    for batch, dim in ((1, 1), (3, 5), (33, 64), (7, 129), (5, 600), (2, 4093), (1, 4096)):
        q = torch.randn(batch, dim, device="cuda", dtype=dtype)
        mu = torch.randn(dim, device="cuda", dtype=dtype)
        ops.transition(q, mu, 0.1, 3, "given", momentum=torch.randn_like(q),
                       uniform=torch.rand(batch, device="cuda"))
        ops.transition(q, mu, 0.1, 3, "philox", trace=True)
        ops.transition(q, mu, 0.1, 3, "torch", trace=True)
        ops.transition(q.t().contiguous().t(), mu, 0.1, 3, "torch")
        # non-dense q in column-major stride order: randn_like's inferred layout (issue 12, item 1)
        ops.transition(torch.randn(dim, 2 * batch, device="cuda", dtype=dtype)[:, ::2].t(), mu,
                       0.1, 3, "torch")
torch.cuda.synchronize()
print("sanitize smoke: done")

for dtype in (torch.float32, torch.float64):
    for batch, dim in ((3, 5), (33, 64), (5, 600), (2, 4096)):
        q = torch.randn(batch, dim, device="cuda", dtype=dtype)
        mu = torch.randn(dim, device="cuda", dtype=dtype)
        kept = torch.empty(batch, 4, dim, device="cuda", dtype=dtype)
        mean = torch.zeros(batch, dim, device="cuda", dtype=torch.float64)
        ops.sample(q=q, target="standard", target_tensors=[mu], target_scalars=[],
                   step_size=torch.full((1,), 0.1, device="cuda", dtype=torch.float64),
                   inv_mass=torch.ones(1, dim, device="cuda", dtype=dtype), jitter=0.0,
                   num_leapfrog_steps=3, seed=5, chain_offset=0, first_transition=0,
                   num_transitions=8, thin=2, samples=kept, mean=mean, m2=torch.zeros_like(mean),
                   statistics=chain_statistics.as_list(chain_statistics.zeros(batch, "cuda")))
torch.cuda.synchronize()
print("sanitize smoke (sample, standard target): done")

# The sample and warmup ops: every target, per-chain and pooled state, one- and four-chunk shapes.
for dtype in (torch.float32, torch.float64):
    for kind, batch, dim in (("standard", 3, 5), ("diagonal", 33, 64), ("dense", 7, 130),
                             ("dense", 300, 3), ("diagonal", 2, 1030), ("standard", 2, 4096)):
        q = torch.randn(batch, dim, device="cuda", dtype=dtype)
        mu = torch.randn(dim, device="cuda", dtype=dtype)
        tensors = {"standard": [mu], "diagonal": [mu, q.new_ones(dim)],
                   "dense": [mu, torch.eye(dim, device="cuda", dtype=dtype) * 2]}[kind]
        f64 = dict(device="cuda", dtype=torch.float64)
        kept = torch.empty(batch, 4, dim, device="cuda", dtype=dtype)
        mean, m2 = torch.zeros(batch, dim, **f64), torch.zeros(batch, dim, **f64)
        statistics = chain_statistics.as_list(chain_statistics.zeros(batch, "cuda"))
        for groups in (1, batch):
            step = torch.full((groups,), 0.1, **f64)
            inv_mass = torch.ones(groups, dim, device="cuda", dtype=dtype)
            chains = dict(q=q, target=kind, target_tensors=tensors, target_scalars=[],
                          step_size=step, inv_mass=inv_mass, jitter=0.2, num_leapfrog_steps=3,
                          seed=5, chain_offset=0, first_transition=0, statistics=statistics)
            ops.sample(num_transitions=8, thin=2, samples=kept, mean=mean, m2=m2, **chains)
            ops.warmup(num_transitions=40, dual_averaging=torch.zeros(groups, 3, **f64),
                       window_mean=torch.zeros(batch, dim, **f64),
                       window_m2=torch.zeros(batch, dim, **f64), warmup_start=0, num_warmup=40,
                       windows=[75, 25, 50], target_accept=0.8, adapt_step_size=True,
                       adapt_mass_matrix=True, **chains)
torch.cuda.synchronize()
print("sanitize smoke (run, every target): done")
