"""Small launches of every kernel shape and noise source, for compute-sanitizer memcheck/racecheck."""
from __future__ import annotations

import torch

from fused_hmc import ops

for dtype in (torch.float32, torch.float64):
    for batch, dim in ((1, 1), (3, 5), (33, 64), (7, 129), (5, 600), (2, 4093), (1, 4096)):
        q = torch.randn(batch, dim, device="cuda", dtype=dtype)
        mu = torch.randn(dim, device="cuda", dtype=dtype)
        ops.hmc_step_noise(q, mu, torch.randn_like(q), torch.rand(batch, device="cuda"), 0.1, 3)
        ops.hmc_step_traced(q, mu, 0.1, 3, "philox")
        ops.hmc_step_traced(q, mu, 0.1, 3, "torch")
        ops.hmc_step(q.t().contiguous().t(), mu, 0.1, 3, "torch")
        # non-dense q in column-major stride order: randn_like's inferred layout (issue 12, item 1)
        ops.hmc_step(torch.randn(dim, 2 * batch, device="cuda", dtype=dtype)[:, ::2].t(), mu, 0.1, 3,
                     "torch")
torch.cuda.synchronize()
print("sanitize smoke: done")

for dtype in (torch.float32, torch.float64):
    for batch, dim in ((3, 5), (33, 64), (5, 600), (2, 4096)):
        q = torch.randn(batch, dim, device="cuda", dtype=dtype)
        mu = torch.randn(dim, device="cuda", dtype=dtype)
        kept = torch.empty(batch, 4, dim, device="cuda", dtype=dtype)
        mean = torch.zeros(batch, dim, device="cuda", dtype=torch.float64)
        m2, count = torch.zeros_like(mean), torch.zeros(batch, device="cuda", dtype=torch.int64)
        prob = torch.zeros(batch, device="cuda", dtype=torch.float64)
        ops.run_chains(q, mu, 0.1, 3, 5, 0, 0, 8, 2, kept, mean, m2, count, prob, 0)
torch.cuda.synchronize()
print("sanitize smoke (run_chains): done")

# The tuned samplers: every target kind, per-chain and pooled state, one- and four-chunk shapes.
for dtype in (torch.float32, torch.float64):
    for kind, batch, dim in ((0, 3, 5), (1, 33, 64), (2, 7, 130), (2, 300, 3), (1, 2, 1030),
                             (0, 2, 4096)):
        q = torch.randn(batch, dim, device="cuda", dtype=dtype)
        mu = torch.randn(dim, device="cuda", dtype=dtype)
        precision = {0: q.new_empty(0), 1: q.new_ones(dim),
                     2: torch.eye(dim, device="cuda", dtype=dtype) * 2}[kind]
        f64 = dict(device="cuda", dtype=torch.float64)
        kept = torch.empty(batch, 4, dim, device="cuda", dtype=dtype)
        mean, m2 = torch.zeros(batch, dim, **f64), torch.zeros(batch, dim, **f64)
        count = torch.zeros(batch, device="cuda", dtype=torch.int64)
        prob = torch.zeros(batch, **f64)
        for groups in (1, batch):
            step = torch.full((groups,), 0.1, **f64)
            inv_mass = torch.ones(groups, dim, device="cuda", dtype=dtype)
            ops.run_chains_tuned(q, kind, mu, precision, step, inv_mass, 0.2, 3, 5, 0, 0, 8, 2,
                                 kept, mean, m2, count, prob, 0)
            ops.warmup_chains(q, kind, mu, precision, step, inv_mass, 0.2, 3, 5, 0, 0, 40, 0, 40,
                              75, 25, 50, 0.8, True, True, torch.zeros(groups, 3, **f64),
                              torch.zeros(batch, dim, **f64), torch.zeros(batch, dim, **f64))
torch.cuda.synchronize()
print("sanitize smoke (tuned samplers): done")
