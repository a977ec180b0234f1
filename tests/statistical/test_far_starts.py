"""From Stan's starts (uniform(-2, 2) on the unconstrained scale) the pooled and ChEES warm-ups
leave no chain that never accepts in sampling, and the draws agree with the reference: kidiq (the
stand-in of tests/statistical/_kidiq.py, exact posterior moments) and eight schools (posteriordb)
pooled and with ChEES (kidiq also with the pooled dense mass), logistic regression (R-hat) and
diamonds (posteriordb) with ChEES, and Neal's funnel with ChEES (on the chains' harmonic mean
acceptance, its default; on their mean it strands chains). Before
fused_hmc.sampling.far_starts, kidiq left 28 of 256 chains stuck with pooled=True and 70 with
ChEES (R-hat 13.6, mean sigma 6,678 against 17.2), and diamonds' ChEES run had R-hat 1.66
(benchmarks/results/far_starts).

Thresholds (a correct sampler fails this file with probability below 1e-6, Bonferroni over its
comparisons):
- stuck: a chain accepting none of n sampling transitions at acceptance a has probability
  (1 - a)^n; at a >= 0.3 and n >= 150 that is below 1e-23 per chain;
- moments: |mean - reference| <= z sd / sqrt(ESS) with z for alpha = 1e-6 over every comparison
  of the file (fused_hmc.validation.posteriordb's rule; for kidiq the exact moments, ESS the
  mean-ESS of the draws);
- R-hat: with m split chains of n draws and effective size n_e each, a correct sampler's R-hat^2
  is about (n - 1) / n + (1 / n_e) chi^2_{m - 1} / (m - 1) (the within-chain variance's factor
  and the between-chain variance of m means of n_e effective draws), so R-hat < 1.01 holds with
  probability 1 - alpha once n_e >= q / (1.01^2 - 1 + 1 / n), q = chi^2_{m - 1}(1 - alpha) /
  (m - 1) (:func:`ess_for_rhat`). The test asserts that the run's bulk ESS per split chain
  reaches that (a mixing check in itself), then that R-hat < 1.01. Pooled runs with a fixed
  number of steps mix too slowly on kidiq (a -0.96 correlation under a diagonal mass) and on
  logistic regression for R-hat at these sizes: kidiq's get the moment check.
"""
from __future__ import annotations

import math
import warnings

import _kidiq  # tests/statistical/_kidiq.py: pytest puts this directory on sys.path
import numpy as np
import pytest
import torch
from scipy.stats import chi2, norm, poisson

import fused_hmc
from fused_hmc import diagnostics, models
from fused_hmc.validation.posteriordb import compare_draws

# Every comparison of the file: kidiq 4 means x 3 modes, eight schools 2 x 20 (posteriordb's
# means and squares of 10 parameters), diamonds 52, the R-hat checks (5), the funnel's v (2) and the
# Rosenbrock's means (2).
COMPARISONS = 12 + 40 + 52 + 5 + 2 + 2
ALPHA = 1e-6 / COMPARISONS
MODES = {"pooled": dict(pooled=True, num_leapfrog_steps=20),
         "chees": dict(adapt_trajectory_length=True)}
# The pooled dense mass (kidiq only): its estimate leaves out chains that have not arrived
# (csrc/math/hmc/dense_mass.h), which would otherwise enter it with their squared distance.
DENSE = {"dense": dict(pooled=True, num_leapfrog_steps=20, mass_matrix="dense")}


def ess_for_rhat(split_chains: int, draws: int, alpha: float = ALPHA,
                 bound: float = 1.01) -> float:
    """The effective size per split chain (of `draws` draws) above which a correct sampler's
    R-hat stays below `bound` with probability 1 - alpha (the module's docstring)."""
    q = chi2.isf(alpha, split_chains - 1) / (split_chains - 1)
    return q / (bound ** 2 - 1 + 1 / draws)


def _stan_starts(chains: int, dim: int, seed: int) -> torch.Tensor:
    return 4 * torch.rand(chains, dim, generator=torch.Generator().manual_seed(seed),
                          dtype=torch.float64) - 2


def _sample(target, dim, mode, chains=128, warmup=500, samples=200, seed=1):
    with warnings.catch_warnings():
        warnings.simplefilter("error", fused_hmc.StuckChainsWarning)
        res = fused_hmc.sample(_stan_starts(chains, dim, seed), samples, target=target,
                               num_warmup=warmup, seed=seed, progress=False,
                               **(MODES | DENSE)[mode])
    assert bool((res.accept_count > 0).all()), int((res.accept_count == 0).sum())
    return res


def _assert_rhat(draws: torch.Tensor) -> None:
    diag = diagnostics.diagnose(draws)
    split_chains = 2 * draws.shape[0]
    needed = ess_for_rhat(split_chains, draws.shape[1] // 2)
    assert float(np.min(diag.ess_bulk)) / split_chains >= needed, (diag.ess_bulk, needed)
    assert float(np.max(diag.r_hat)) < 1.01, diag.r_hat


@pytest.fixture(scope="module")
def kidiq():
    return _kidiq.kidiq_model(), _kidiq.exact_moments()


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES) + list(DENSE))
def test_kidiq_from_stans_starts(kidiq, mode):
    model, exact = kidiq
    res = _sample(model, model.dim, mode, samples=600 if mode == "chees" else 200)
    draws = res.constrained_draws()
    z = norm.isf(ALPHA / 2)
    values = np.stack([draws[k].cpu().numpy() for k in exact], -1)  # [chains, draws, 4]
    ess = diagnostics.ess_mean(diagnostics.as_draws(values))
    for j, (name, (mean, sd)) in enumerate(exact.items()):
        error = abs(values[..., j].mean() - mean) / (sd / math.sqrt(ess[j]))
        assert error < z, (name, values[..., j].mean(), mean, error)
    if mode == "chees":
        _assert_rhat(res.samples)


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_eight_schools_from_stans_starts(mode):
    model = models.eight_schools()
    res = _sample(model.target(), model.dim, mode, samples=1500)  # tau: ESS about 0.15 a draw
    compare_draws(model.constrained_values(res.samples.double()), model.posteriordb,
                  alpha=ALPHA).raise_if_failed()
    _assert_rhat(res.samples)


@pytest.mark.slow
def test_logistic_regression_with_chees_from_stans_starts():
    """(ESS about 0.23 a draw; pooled=True with 20 steps mixes too slowly for R-hat here.) Stan's
    1000 warm-up iterations: ChEES climbs to its T (about 1.6) from below, by Adam steps from the
    moving average of log T."""
    model = models.logistic_regression()
    res = _sample(model.target(gradient=True), model.dim, "chees", warmup=1000, samples=700)
    _assert_rhat(res.samples)


@pytest.mark.slow
def test_diamonds_with_chees_from_stans_starts():
    model = models.diamonds()
    res = _sample(model.target(gradient=True), model.dim, "chees", chains=64, warmup=400,
                  samples=150)
    compare_draws(model.constrained_values(res.samples.double()), model.posteriordb,
                  alpha=ALPHA).raise_if_failed()


# Neal's funnel (d = 10): no one step size suits its neck and its mouth. On the chains' mean
# acceptance, ChEES's pooled step size suits the mouth and strands chains in the neck; on their
# harmonic mean (ChEES's default: the paper's and BlackJAX's statistic) it shrinks until the
# chains move.
HARMONIC_CHEES = dict(adapt_trajectory_length=True)


def _funnel(chains: int, device: str, **options):
    model = models.funnel()
    q0 = _stan_starts(chains, model.dim, 2).to(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fused_hmc.StuckChainsWarning)  # the control's
        return fused_hmc.sample(q0, 500, target=model.target(), num_warmup=1000, seed=2,
                                progress=False, **options)


# The funnel's deep neck: v below its 0.1% quantile (v ~ N(0, 3^2)).
DEEP_NECK_MASS = 1e-3
DEEP_NECK = 3 * norm.ppf(DEEP_NECK_MASS)  # -9.27


def _assert_no_chain_stranded_above_the_neck(res) -> None:
    """No one step size moves every chain of the funnel: deep in the neck (here v below its 0.1%
    quantile, -9.27) the x_i's scale exp(v / 2) is under 0.01 and a chain may reject for long
    even at the harmonic mean's step size (one float64 CUDA run left one chain at v = -10.97 for
    500 transitions). So every chain that accepted none of its sampling transitions must sit
    there (where warm-up left it: its first draw), and there may be at most as many as a correct
    sampler's B chains put there: Poisson(B 1e-3) chains, at most k but with probability below
    1e-6 (k = 7 for 512 chains, 17 for 4,096). The mean's pooled step size strands chains above
    that (the control)."""
    chains = res.accept_count.numel()
    most = int(poisson.isf(1e-6, chains * DEEP_NECK_MASS))
    stuck = (res.accept_count == 0).nonzero().flatten().cpu()
    v = res.samples[stuck, 0, 0].double().cpu()
    assert bool((v < DEEP_NECK).all()), (float(res.step_size[0]), stuck.tolist(), v.tolist())
    assert len(stuck) <= most, (stuck.tolist(), v.tolist(), most)


@pytest.mark.slow
def test_funnel_with_chees_on_the_harmonic_mean_strands_no_chain():
    """Every chain accepts in sampling but those in the deep neck (none here, from these starts),
    and v's mean (exact 0, sd 3) is within the family-wise bound. The control, on the mean
    acceptance, strands chains well above the neck (17 of 512 from these starts)."""
    res = _funnel(512, "cpu", **HARMONIC_CHEES)
    _assert_no_chain_stranded_above_the_neck(res)
    v = res.samples[..., 0].double().numpy()
    ess = float(diagnostics.ess_mean(diagnostics.as_draws(v[..., None]))[0])
    assert abs(v.mean()) < norm.isf(ALPHA / 2) * 3.0 / math.sqrt(ess), (v.mean(), ess)
    control = _funnel(512, "cpu", adapt_trajectory_length=True, pooled_acceptance="mean")
    stuck = control.accept_count == 0
    assert bool((control.samples[stuck, 0, 0] > DEEP_NECK).any())


@pytest.mark.slow
def test_rosenbrock_with_chees_matches_its_exact_moments():
    """The hybrid Rosenbrock (Pagani et al.'s 2-d banana, exact moments): with ChEES on the
    chains' harmonic mean acceptance (its default) both means lie within the family-wise bound of
    the exact ones and R-hat < 1.01. On their mean acceptance the pooled step size (13x larger)
    skips the banana's narrow tail: R-hat 1.53 and means 0.30 and 4.5 against 1 and 11 (the
    control, asserted outside the bound: 10.9 standard errors here against its 5.75, its few
    effective draws widening the bound)."""
    model = models.rosenbrock()
    q0 = _stan_starts(512, model.dim, 2)
    z = norm.isf(ALPHA / 2)

    def errors(**options):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fused_hmc.StuckChainsWarning)
            res = fused_hmc.sample(q0, 1000, target=model.target(), num_warmup=1000, seed=2,
                                   progress=False, adapt_trajectory_length=True, **options)
        x = res.samples.double().numpy()
        ess = diagnostics.ess_mean(diagnostics.as_draws(x))
        sd = model.exact_var.sqrt().numpy()
        return res, np.abs(x.mean((0, 1)) - model.exact_mean.numpy()) / (sd / np.sqrt(ess))

    res, error = errors()
    assert bool((res.accept_count > 0).all())
    assert bool((error < z).all()), error
    _assert_rhat(res.samples)
    _, control = errors(pooled_acceptance="mean")
    assert bool((control > z).any()), control


@pytest.mark.cuda
def test_funnel_with_chees_on_the_harmonic_mean_strands_no_chain_on_cuda():
    _assert_no_chain_stranded_above_the_neck(_funnel(4096, "cuda", **HARMONIC_CHEES))


@pytest.mark.cuda
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", ["eight_schools", "logistic_regression", "diamonds"])
def test_library_models_from_stans_starts_on_cuda(name, mode):
    model = models.MODELS[name]()
    target = model.target(gradient=model.gradient_source is not None)
    q0 = _stan_starts(4096, model.dim, 2).cuda()
    with warnings.catch_warnings():
        warnings.simplefilter("error", fused_hmc.StuckChainsWarning)
        res = fused_hmc.sample(q0, 1000, target=target, num_warmup=1000, seed=2,
                               progress=False, keep_samples=model.posteriordb is not None,
                               **MODES[mode])
    assert bool((res.accept_count > 0).all())
    if model.posteriordb is not None:
        compare_draws(model.constrained_values(res.samples.double().cpu()), model.posteriordb,
                      alpha=ALPHA).raise_if_failed()
