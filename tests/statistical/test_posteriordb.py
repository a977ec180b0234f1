"""Posterior means and standard deviations of users' C++ models (fused_hmc.models, compiled as
CppTargets into the chain kernels) against Stan's reference posteriors from posteriordb.

The rule is posteriordb's (fused_hmc/models/data/README.md): for every reported parameter, the
mean, and the mean of the square (which fixes the sd), agree with the reference within z times
the combined Monte Carlo error sqrt(sd^2 / ESS_ours + sd^2 / 10000), z Bonferroni-corrected over
all 2P comparisons of a run for a family-wise false-alarm rate of 1e-6 (validation/posteriordb.py;
the ESS is the mean-ESS of our draws, the reference's 10,000 near-independent draws its own). A
correct sampler fails one of these tests less than once in 10^6 runs (up to the accuracy of the
ESS estimate, which with >= 64 chains of >= 400 draws is within a few percent).
"""
from __future__ import annotations

import pytest
import torch

import fused_hmc
from fused_hmc import models
from fused_hmc.validation.posteriordb import compare_draws


def _check_against_reference(model, device, chains, warmup, draws, gradient, **kwargs):
    target = model.target(gradient=gradient)
    q0 = model.initial_point(chains, generator=torch.Generator().manual_seed(20261201)).to(device)
    res = fused_hmc.sample(q0, draws, target=target, num_warmup=warmup, seed=11, progress=False,
                           **kwargs)
    constrained = model.constrained_values(res.samples.double().cpu())
    report = compare_draws(constrained, model.posteriordb, alpha=1e-6)
    report.raise_if_failed()
    return res, report


def test_eight_schools_matches_posteriordb_on_cpu():
    """Eight schools (non-centred), dual-number gradients, per-chain adaptation, on the CPU at a
    size CI affords (128 chains x 500 draws after 500 warm-up)."""
    res, report = _check_against_reference(models.eight_schools(), "cpu", 128, 500, 500, False,
                                           num_leapfrog_steps=8, jitter=0.2)
    assert 0.6 < float(res.mean_accept_prob.mean()) < 0.95


@pytest.mark.cuda
@pytest.mark.parametrize("gradient", [False, True])
def test_eight_schools_matches_posteriordb_on_cuda(gradient):
    res, report = _check_against_reference(models.eight_schools(), "cuda", 4096, 1000, 1000,
                                           gradient, num_leapfrog_steps=8, jitter=0.2)
    assert 0.6 < float(res.mean_accept_prob.mean()) < 0.95


def test_diamonds_matches_posteriordb_on_cpu():
    """Diamonds in its QR form on the CPU at a size CI affords (16 chains x 200 draws after 300
    warm-up, each chain's 5,000 rows over 8 lanes as on CUDA): Stan's warm-up per chain, L = 8."""
    res, _ = _check_against_reference(models.diamonds(), "cpu", 16, 300, 200, True,
                                      num_leapfrog_steps=8, jitter=0.2)
    assert 0.6 < float(res.mean_accept_prob.mean()) < 0.95


@pytest.mark.cuda
def test_diamonds_matches_posteriordb_on_cuda():
    """Diamonds (26 parameters, 5,000 rows) in the model library's QR form (models/diamonds.py:
    condition number about 1.5 after a diagonal mass, against 2.6e5 in b), reported in b;
    Stan's warm-up per chain (a pooled mass matrix is spoiled by chains that converge late from
    Stan's far starts), L = 8, the hand-written gradient, float64. A chain's rows are spread
    over the lanes CppTarget chooses (lanes="auto": 16 on an H200 at 4096 chains), so 4096
    chains fill the GPU."""
    res, _ = _check_against_reference(models.diamonds(), "cuda", 4096, 1000, 1000, True,
                                      num_leapfrog_steps=8, jitter=0.2)
    assert 0.6 < float(res.mean_accept_prob.mean()) < 0.95
