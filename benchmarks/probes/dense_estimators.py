"""Probe (issue 32): how well two dense estimates from a few warm-up draws whiten diamonds in its
direct form (qr=False), on the CPU. Not yet in the kernels: this measures what the gradient-based
estimate would buy.

    python benchmarks/probes/dense_estimators.py

The reference covariance is that of a QR-form run (16 chains, 400 + 400, mapped to b). Each case
runs a pooled diagonal warm-up of W iterations from Stan's starts, then n draws x 16 chains, and
forms from those draws:
- the draws' covariance S (what the pooled dense warm-up estimates, dense_mass.h);
- the gradient-based estimate of nutpie (Seyboldt, Carlson & Carpenter, arXiv 2603.18845): the
  SPD matrix Sigma with Sigma G Sigma = S, G the covariance of the draws' gradients,
  Sigma = S^1/2 (S^1/2 G S^1/2)^-1/2 S^1/2. For a Gaussian target the gradient is -P (x - mu), so
  G = P S P and Sigma = P^-1 exactly, whatever S is: the draws need not be from the posterior.
The score is the range of eigenvalues of the estimate whitened by the reference (1..1 is exact;
the step size is bounded by the largest over the smallest):

    W = 100, n = 10: draws' covariance 0.22 .. 84.5 (cond 384);   gradient-based 0.76 .. 2.6 (3.4)
    W = 100, n = 50: draws' covariance 0.59 .. 66.5 (cond 113);   gradient-based 0.80 .. 2.5 (3.1)
    W = 300, n = 10: draws' covariance 0.0043 .. 23.6 (cond 5540); gradient-based 0.78 .. 1.8 (2.4)
    W = 300, n = 50: draws' covariance 0.030 .. 23.2 (cond 770);  gradient-based 0.79 .. 1.8 (2.3)

The estimate from draws needs the later windows (after 400 iterations of Stan's windows it whitens
well: ESS 1,178, benchmarks/probes/diamonds_dense.py); the gradient-based one is good after the
first. Building it into the kernels means a second co-moment per chain (of the gradients) in the
windows.
"""
from __future__ import annotations

import torch

import fused_hmc
from fused_hmc import models

CHAINS = 16


def reference_covariance() -> torch.Tensor:
    qr = models.diamonds(qr=True)
    res = fused_hmc.sample(qr.initial_point(CHAINS, generator=torch.Generator().manual_seed(1)),
                           400, target=qr.target(gradient=True), num_warmup=400, seed=1,
                           num_leapfrog_steps=8, jitter=0.2, progress=False)
    values = qr.constrained_values(res.samples.double())  # b, Intercept, sigma
    values[..., -1] = torch.log(values[..., -1])  # the direct form's coordinates
    return torch.cov(values.reshape(-1, values.shape[-1]).T)


def spd_power(a: torch.Tensor, power: float) -> torch.Tensor:
    e, v = torch.linalg.eigh(a)
    return v @ torch.diag(e ** power) @ v.T


def gradient_based(s: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Sigma with Sigma g Sigma = s."""
    root = spd_power(s, 0.5)
    out = root @ spd_power(root @ g @ root, -0.5) @ root
    return (out + out.T) / 2


def whitened_range(estimate: torch.Tensor, factor: torch.Tensor) -> str:
    a = torch.linalg.solve_triangular(factor, estimate, upper=False)
    a = torch.linalg.solve_triangular(factor, a.T, upper=False)
    e = torch.linalg.eigvalsh((a + a.T) / 2)
    return f"{e.min():.3g} .. {e.max():.3g} (cond {e.max() / e.min():.3g})"


def main() -> None:
    factor = torch.linalg.cholesky(reference_covariance())
    direct = models.diamonds(qr=False)
    target = direct.target(gradient=True)
    for warmup, draws in [(100, 10), (100, 50), (300, 10), (300, 50)]:
        q0 = direct.initial_point(CHAINS, generator=torch.Generator().manual_seed(2))
        res = fused_hmc.sample(q0, draws, target=target, num_warmup=warmup, seed=2,
                               num_leapfrog_steps=8, jitter=0.2, pooled=True, progress=False)
        x = res.samples.double().reshape(-1, res.samples.shape[-1]).requires_grad_(True)
        (gradient,) = torch.autograd.grad(direct.log_prob(x).sum(), x)
        s, g = torch.cov(x.detach().T), torch.cov(gradient.T)
        print(f"W = {warmup}, n = {draws}: draws' covariance {whitened_range(s, factor)}; "
              f"gradient-based {whitened_range(gradient_based(s, g), factor)}", flush=True)


if __name__ == "__main__":
    main()
