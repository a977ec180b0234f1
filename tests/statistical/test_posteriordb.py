"""Posterior means and standard deviations of the library's models (fused_hmc.models), in their C++
forms (CppTargets, dual-number or hand-written gradient) and their PyTorch forms (TorchModels,
the generated reverse-mode gradient), compiled into the chain kernels, against Stan's reference posteriors from posteriordb.

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
    """gradient: False (dual numbers), True (hand-written) or "torch" (the model's torch form,
    its draws mapped to the C++ form's coordinates by TorchForm.to_cpp)."""
    generator = torch.Generator().manual_seed(20261201)
    if gradient == "torch":
        form = model.torch_form()
        target = form.model()
        q0 = target.initial_point(chains, generator=generator)
    else:
        target = model.target(gradient=gradient)
        q0 = model.initial_point(chains, generator=generator)
    res = fused_hmc.sample(q0.to(device), draws, target=target, num_warmup=warmup, seed=11,
                           progress=False, **kwargs)
    x = res.samples.double().cpu()
    if gradient == "torch":
        x = x[..., list(form.to_cpp)]
    constrained = model.constrained_values(x)
    report = compare_draws(constrained, model.posteriordb, alpha=1e-6)
    report.raise_if_failed()
    return res, report


@pytest.mark.parametrize("gradient", [False, "torch"])
def test_eight_schools_matches_posteriordb_on_cpu(gradient):
    """Eight schools (non-centred), dual-number gradients or the torch form, per-chain
    adaptation, on the CPU at a size CI affords (128 chains x 500 draws after 500 warm-up)."""
    res, report = _check_against_reference(models.eight_schools(), "cpu", 128, 500, 500, gradient,
                                           num_leapfrog_steps=8, jitter=0.2)
    assert 0.6 < float(res.mean_accept_prob.mean()) < 0.95


@pytest.mark.cuda
@pytest.mark.parametrize("gradient", [False, True, "torch"])
def test_eight_schools_matches_posteriordb_on_cuda(gradient):
    res, report = _check_against_reference(models.eight_schools(), "cuda", 4096, 1000, 1000,
                                           gradient, num_leapfrog_steps=8, jitter=0.2)
    assert 0.6 < float(res.mean_accept_prob.mean()) < 0.95


@pytest.mark.parametrize("gradient", [True, "torch"])
def test_diamonds_matches_posteriordb_on_cpu(gradient):
    """Diamonds in its QR form on the CPU at a size CI affords (16 chains x 200 draws after 300
    warm-up, each chain's 5,000 rows over 8 lanes as on CUDA): Stan's warm-up per chain, L = 8.
    The hand-written gradient, or the torch form's generated one."""
    res, _ = _check_against_reference(models.diamonds(), "cpu", 16, 300, 200, gradient,
                                      num_leapfrog_steps=8, jitter=0.2)
    assert 0.6 < float(res.mean_accept_prob.mean()) < 0.95


def test_diamonds_direct_form_with_a_pooled_dense_mass_matches_posteriordb_on_cpu():
    """Diamonds in its direct form (qr=False: b itself, correlations near 1, condition number
    about 2.6e5 after a diagonal mass), no reparameterisation: the pooled dense mass
    (docs/MASS_MATRIX.md) whitens it within Stan's windows of a 400-iteration warm-up, from
    Stan's starts. With each chain's own correlations averaged instead, runs of this size gave a
    bulk ESS of 20 and means 33 to 43 standard errors from posteriordb's
    (benchmarks/probes/diamonds_dense.py)."""
    res, _ = _check_against_reference(models.diamonds(qr=False), "cpu", 16, 400, 400, True,
                                      num_leapfrog_steps=8, jitter=0.2, mass_matrix="dense",
                                      pooled=True)
    assert 0.6 < float(res.mean_accept_prob.mean()) < 0.95


@pytest.mark.cuda
@pytest.mark.parametrize("gradient", [True, "torch"])
def test_diamonds_matches_posteriordb_on_cuda(gradient):
    """Diamonds (26 parameters, 5,000 rows) in the model library's QR form (models/diamonds.py:
    condition number about 1.5 after a diagonal mass, against 2.6e5 in b), reported in b;
    Stan's warm-up per chain (a pooled mass matrix is spoiled by chains that converge late from
    Stan's far starts), L = 8, the hand-written gradient, float64. A chain's rows are spread
    over the lanes CppTarget chooses (lanes="auto": 16 on an H200 at 4096 chains), so 4096
    chains fill the GPU. The torch form runs over the library's 8 lanes."""
    res, _ = _check_against_reference(models.diamonds(), "cuda", 4096, 1000, 1000, gradient,
                                      num_leapfrog_steps=8, jitter=0.2)
    assert 0.6 < float(res.mean_accept_prob.mean()) < 0.95
