"""ChEES (``adapt_trajectory_length=True``): the adapted trajectory length lands where the ChEES
criterion peaks on a Gaussian, and the draws that follow have the right moments (a diagonal
Gaussian with scales 0.01 .. 100, exact moments; eight schools, posteriordb), on the CPU at CI sizes
and on CUDA at larger ones.

Where the criterion peaks. On N(0, diag sigma^2) with the inverse mass sigma^2 (what the warm-up
adapts), Hamilton's equations give every coordinate x(t) = x0 cos t + sigma^2 p0 sin t, period 2 pi,
so in the preconditioned coordinates z = x / sigma the target is N(0, I) and
ChEES(t) = 1/4 E[(|x(t)|^2 - |x0|^2)^2] = sum_i sigma_i^4 sin^2 t (cross terms vanish: each
coordinate's E[x(t)^2 - x0^2] is 0). With t = w T, w ~ U[0, 1) (the trajectory jitter),
E_w sin^2(w T) = 1/2 - sin(2T) / (4T), whose first maximum is at tan(2T) = 2T: T* = 2.2467. The op
ascends the ChEES gradient estimate g = w T (|x1|^2 - |x0|^2)(x1 . v) (acceptance weighted and
centred as BlackJAX's, in x's own coordinates: csrc/math/adaptation/trajectory_adaptation.h;
BlackJAX 1.7.1 with a diagonal mass divides the squares by the inverse mass and dots with p), whose
expectation given t is sigma^4 w T sin(2t) per coordinate (expand x(t) and v(t) = dx/dt; E[a^4] = 3,
E[a^2 b^2] = 1), so its root is the same T*. Discretisation moves it by two effects:
- ceil: a transition runs n = ceil(w T / eps) leapfrog steps, i.e. t = n eps = w T + eps f,
  f in [0, 1): E_w[w sin(2 eps ceil(w T / eps))] = 0 has its root at T*(eps) = 2.2467 - 0.639 eps
  to first order (2.1824 at eps = 0.1; ``exact_dynamics_root`` integrates it exactly, piece by
  piece in n);
- the leapfrog itself: each coordinate turns by theta with cos(theta) = 1 - eps^2 / 2 per step and
  the proposal is Metropolis-weighted: O(eps^2) shifts (0.3% at eps = 0.1), but at the step sizes
  dual averaging reaches toward 0.651 (eps ~ 0.95 for d = 16) the root falls to about 1.47
  (-35%): ``leapfrog_root`` finds it by Monte Carlo of the op's own estimator (numpy leapfrog,
  common random numbers across T).
The criterion has further local maxima (T = 5.45, 8.6, ...: the later roots of tan 2T = 2T);
ChEES climbs to the one the warm-up leaves it nearest, so these tests start below the first
minimum (T = 3.86).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import brentq

import fused_hmc
from fused_hmc import models
from fused_hmc.targets import DiagonalGaussian
from fused_hmc.validation.posteriordb import Reference, compare_draws

T_STAR = 2.246704728954527  # the first positive root of tan(2T) = 2T


def exact_dynamics_root(eps: float) -> float:
    """The root in T of E_w[w sin(2 eps max(1, ceil(w T / eps)))], w ~ U[0, 1): the fixed point
    of the ChEES gradient under exact dynamics with the op's ceil. The integrand is constant on
    w in ((n - 1) eps / T, n eps / T], where the weight w integrates to (b^2 - a^2) / 2."""
    def phi(T):
        n = np.arange(1, math.ceil(T / eps) + 1)
        a, b = (n - 1) * eps / T, np.minimum(n * eps / T, 1.0)
        return float(np.sum(np.sin(2 * eps * n) * (b * b - a * a)))

    return brentq(phi, 1.0, 3.0, xtol=1e-12)


def expected_gradient(T: float, eps: float, scale: np.ndarray, inverse_mass: np.ndarray,
                      chains: int = 512, reps: int = 64, seed: int = 0) -> float:
    """Monte Carlo of the op's ChEES gradient estimate at trajectory length T, step size eps and
    the given inverse mass, the chains at stationarity on N(0, diag scale^2): `reps` ensembles of
    `chains` chains (a fixed seed, so the same numbers for every T)."""
    rng = np.random.default_rng(seed)
    estimates = np.empty(reps)

    def energy(x, p):
        return 0.5 * ((x / scale) ** 2).sum(1) + 0.5 * (inverse_mass * p * p).sum(1)

    for r in range(reps):
        x0 = scale * rng.standard_normal((chains, scale.size))
        p0 = rng.standard_normal((chains, scale.size)) / np.sqrt(inverse_mass)
        w = rng.random(chains)
        n = np.maximum(1, np.ceil(w * T / eps))
        x, p = x0.copy(), p0.copy()
        for k in range(int(n.max())):
            going = (k < n)[:, None]
            half = p - 0.5 * eps * x / scale ** 2
            x_new = x + eps * inverse_mass * half
            p_new = half - 0.5 * eps * x_new / scale ** 2
            x, p = np.where(going, x_new, x), np.where(going, p_new, p)
        accept = np.minimum(1.0, np.exp(energy(x0, p0) - energy(x, p)))
        d0 = x0 - x0.mean(0)
        d1 = x - (accept[:, None] * x).sum(0) / (accept.sum() + 1e-20)
        g = w * T * (d1 ** 2 - d0 ** 2).sum(1) * (d1 * inverse_mass * p).sum(1)
        estimates[r] = (accept * g).sum() / (accept.sum() + 1e-20)
    return float(estimates.mean())


def leapfrog_root(eps: float, scale: np.ndarray, inverse_mass: np.ndarray) -> float:
    """The T in [1, 3] where the expected ChEES gradient of the leapfrog vanishes (bracketed by
    brentq on the common-random-number Monte Carlo, to 1e-3; its Monte Carlo error is about 1%)."""
    return brentq(lambda T: expected_gradient(T, eps, scale, inverse_mass), 1.0, 3.0, xtol=1e-3)


def test_the_references_agree_with_the_closed_form():
    """The exact-dynamics root tends to T* (tan 2T = 2T) as eps -> 0 and follows its first-order
    expansion 2.2467 - 0.639 eps; the leapfrog Monte Carlo brackets it at eps = 0.1, where the
    leapfrog's own corrections are O(eps^2): its expected gradient changes sign within +-3% of
    the exact root (there, with 256 ensembles of 512 chains, it is +0.45 and -0.58 with a
    Monte Carlo sd of 0.05, measured over 12 seeds: 9 sd from 0)."""
    assert abs(math.tan(2 * T_STAR) - 2 * T_STAR) < 1e-9
    assert abs(exact_dynamics_root(1e-5) - T_STAR) < 1e-5
    for eps in (0.01, 0.05):
        assert abs(exact_dynamics_root(eps) - (T_STAR - 0.6388 * eps)) < 0.3 * eps ** 2
    root, scale = exact_dynamics_root(0.1), np.ones(8)
    assert expected_gradient(0.97 * root, 0.1, scale, scale, reps=256) > 0
    assert expected_gradient(1.03 * root, 0.1, scale, scale, reps=256) < 0


def _fixed_step_chees(device, T0_steps: int, seed: int) -> fused_hmc.SampleResult:
    """ChEES alone: the step size (0.1) and the inverse mass (sigma^2) held, 1000 warm-up
    transitions of 512 chains started at the target, d = 16, scales 0.1 .. 10."""
    scale = torch.logspace(-1, 1, 16, dtype=torch.float64)
    q0 = scale * torch.randn(512, 16, generator=torch.Generator().manual_seed(seed),
                             dtype=torch.float64)
    return fused_hmc.sample(q0.to(device), 1, target=DiagonalGaussian(torch.zeros(16), scale),
                            num_warmup=1000, adapt_trajectory_length=True, adapt_step_size=False,
                            adapt_mass_matrix=False, inverse_mass=scale ** 2, step_size=0.1,
                            num_leapfrog_steps=T0_steps, seed=seed, progress=False,
                            keep_samples=False)


@pytest.mark.parametrize("T0_steps", [10, 30])  # T0 = 1.0 and 3.0: below and above the peak
def test_chees_alone_lands_where_the_criterion_peaks(T0_steps):
    """From T0 = 1 and from T0 = 3 the adapted T is within 6% of exact_dynamics_root(0.1) =
    2.1824. Measured over 24 seeds of this run (each start): mean 2.186 / 2.187, sd 0.011 / 0.013
    (0.6%): the residual noise of Adam's steps under the k^-1/2 moving average. The band: the
    99.9% upper confidence bound of that sd from 24 samples, 0.013 sqrt(23 / chi2_0.001(23)) =
    0.023, times 4.89 (two-sided 1e-6) = 0.11 = 5.1% of T, plus the 0.2% bias (the O(eps^2)
    leapfrog terms and the ensemble centring), so a correct kernel leaves it less than once in
    10^6 runs. A wrong sign, scale or jitter of the gradient misses by far more (T0 stays, or T
    runs to a clip)."""
    res = _fixed_step_chees("cpu", T0_steps, seed=3)
    assert abs(res.trajectory_length / exact_dynamics_root(0.1) - 1) < 0.06, res.trajectory_length


def test_per_chain_chees_from_far_starts_leaves_its_initial_length():
    """Per-chain ChEES (pooled=False) on the d = 16 Gaussian of scales 0.1 .. 10, 512 chains
    started from N(0, 100^2 I), T0 = 10 x 0.1 = 1.0, 1000 warm-up transitions. The first
    transitions' ChEES gradients are orders of magnitude above the settled ones; without Adam's
    restart at each slow window's end (restart_chees_optimizer) its second moment kept them and T
    stayed at T0 (this seed: 0.98; 6 seeds: 0.98 to 1.12). Measured with the restarts over 24 seeds
    of this run: T mean 1.710, sd 0.073, range 1.56 to 1.82. (The criterion's first root at the
    adapted step size, about 1.0, and the exact mass is about 1.45; the chains' own step sizes and
    noisy one-window masses put the per-chain T about 15% above it.) The band: mean -+ 4.75 (one-sided
    1e-6 each) times the sd's 99.9% upper bound from 24 samples, 0.073 sqrt(23 / chi2_0.001(23)) =
    0.128, i.e. [1.10, 2.32]; the upper end stays below the criterion's first minimum (about 3)."""
    scale = torch.logspace(-1, 1, 16, dtype=torch.float64)
    q0 = 100 * torch.randn(512, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    res = fused_hmc.sample(q0, 1, target=DiagonalGaussian(torch.zeros(16), scale), num_warmup=1000,
                           adapt_trajectory_length=True, pooled=False, num_leapfrog_steps=10,
                           seed=0, progress=False, keep_samples=False)
    assert 1.10 < res.trajectory_length < 2.32, res.trajectory_length


def _chees_warmup(device, num_warmup: int, seed: int) -> fused_hmc.SampleResult:
    scale = torch.logspace(-1, 1, 16, dtype=torch.float64)
    q0 = torch.randn(512, 16, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return fused_hmc.sample(q0.to(device), 1, target=DiagonalGaussian(torch.zeros(16), scale),
                            num_warmup=num_warmup, adapt_trajectory_length=True, seed=seed,
                            progress=False, keep_samples=False)


# The seeds the whole warm-up runs from: a wrong root shows on about half of them (it once hid
# behind one lucky seed, issue 32), so every test of it runs several.
WARMUP_SEEDS = range(4)


def _assert_the_warmups_land_where_the_criterion_peaks(device):
    """Each of WARMUP_SEEDS' ChEES warm-ups, 3000 iterations, ends within 43% of leapfrog_root at
    its own step size and inverse mass, and their mean ratio within 21% (see the test's
    docstring)."""
    ratios = []
    for seed in WARMUP_SEEDS:
        res = _chees_warmup(device, 3000, seed)
        eps, inverse_mass = res.step_size[0].item(), res.inverse_mass[0].cpu().numpy()
        ratios.append(res.trajectory_length
                      / leapfrog_root(eps, np.logspace(-1, 1, 16), inverse_mass))
        assert abs(ratios[-1] - 1) < 0.43, (seed, res.trajectory_length, eps)
    assert abs(np.mean(ratios) - 1) < 0.21, ratios


def test_the_whole_warmup_lands_where_the_criterion_peaks_at_its_step_size():
    """The default ChEES warm-up (the pooled warm-up's per-chain first phase, then dual averaging
    toward 0.651, Stan's windows for the mass, ChEES from T0 = 10 x 0.1) from N(0, I) on scales
    0.1 .. 10, d = 16: after 3000 warm-up transitions T is within 43% of leapfrog_root at the
    adapted step size (about 0.95) and inverse mass, for each of the 4 seeds. Measured over 24
    seeds on the CPU (seeds 0 .. 23): ratio 1.019, sd 0.046, range 0.92 to 1.09 (the reference's
    own Monte Carlo error included). Adam restarts at every slow window's end, with the clock of
    its moving average, so the terminal window's updates weigh more than before the restarts
    (sd 0.0073 then). The band for each seed: the offset 0.019 plus z = 5.16 (two-sided 1e-6 / 4,
    Bonferroni over the seeds) times the sd's 99.9% upper bound 0.046 sqrt(23 / chi2_0.001(23)) =
    0.080, i.e. 0.43; for the mean of the 4, 0.019 + 4.89 x 0.080 / 2 = 0.21. The criterion's
    second maximum (T about 4.7, where the warm-up landed for about half the seeds when Adam
    ascended from the clipped T: csrc/math/adaptation/trajectory_adaptation.h) is 3.2x the
    first."""
    _assert_the_warmups_land_where_the_criterion_peaks("cpu")


def test_a_length_far_below_one_step_leaves_one_step():
    """T0 = 0.01 (step_size 0.01, one leapfrog step) on the Gaussian of the test above, 3000
    warm-up transitions: the step size adapts to about 0.95, a hundred times T0. Without the floor
    at one step (restart_chees_optimizer, FarStarts._pool) T stayed clipped to one step, T / eps =
    1 exactly. Measured over 24 seeds with the floor: T / eps 1.47 to 1.69 for 21 seeds (mean
    1.593, sd 0.061: the criterion's first maximum), 4.05 to 4.94 for 3 (its second; the band
    below is one-sided). The bound: 1.593 - 4.75 (one-sided 1e-6) x the sd's 99.9% upper bound
    from those 21, 0.061 sqrt(20 / chi2_0.001(20)) = 0.113, i.e. 1.05."""
    scale = torch.logspace(-1, 1, 16, dtype=torch.float64)
    q0 = torch.randn(512, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    res = fused_hmc.sample(q0, 1, target=DiagonalGaussian(torch.zeros(16), scale),
                           num_warmup=3000, adapt_trajectory_length=True, step_size=0.01,
                           num_leapfrog_steps=1, seed=0, progress=False, keep_samples=False)
    assert res.trajectory_length / res.step_size[0].item() > 1.05, res.trajectory_length


def test_a_length_far_below_one_step_leaves_one_step_without_slow_windows():
    """The same start (T0 = 0.01, one step of 0.01) with no slow window to restart ChEES at:
    per-chain ChEES (pooled=False) with the mass not adapted, on N(0, I) in d = 16, 256 chains,
    1000 warm-up transitions. ChEES restarts once, at the initial fast interval's end
    (warmup.chees_restarts); without it T stayed at one step (T / eps = 1.0001).
    Measured over seeds 0 to 23: T / median eps 1.747 to 1.796 (mean 1.769, sd 0.0134). The bound:
    1.769 - 4.75 (one-sided 1e-6) x the sd's 99.9% upper bound from those 24,
    0.0134 sqrt(23 / chi2_0.001(23)) = 0.0234, i.e. 1.658."""
    q0 = torch.randn(256, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    res = fused_hmc.sample(q0, 1, target=DiagonalGaussian(torch.zeros(16), torch.ones(16)),
                           num_warmup=1000, adapt_trajectory_length=True, step_size=0.01,
                           num_leapfrog_steps=1, pooled=False, adapt_mass_matrix=False, seed=0,
                           progress=False, keep_samples=False)
    assert res.trajectory_length / res.step_size.median().item() > 1.65, res.trajectory_length


def _exact_reference(mean: torch.Tensor, scale: torch.Tensor) -> Reference:
    """The exact moments as a posteriordb-style reference with (practically) no error of its own."""
    mean, scale = mean.double().numpy(), scale.double().numpy()
    return Reference(name="N(mu, diag sigma^2)",
                     parameters=tuple(f"x[{i}]" for i in range(mean.size)), mean=mean, sd=scale,
                     sq_mean=mean ** 2 + scale ** 2, num_draws=10 ** 18)


def _gaussian_moments(device, chains: int, draws: int, dim: int, **extra):
    mean = torch.linspace(-3, 3, dim, dtype=torch.float64)
    scale = torch.logspace(-2, 2, dim, dtype=torch.float64)  # condition number 1e8
    q0 = torch.randn(chains, dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    res = fused_hmc.sample(q0.to(device), draws, target=DiagonalGaussian(mean, scale),
                           num_warmup=1000, adapt_trajectory_length=True, seed=21, progress=False,
                           **extra)
    report = compare_draws(res.samples.cpu(), _exact_reference(mean, scale), alpha=1e-6)
    report.raise_if_failed()
    return res


def test_moments_of_an_ill_conditioned_gaussian_after_chees():
    """d = 8, sigma 0.01 .. 100, chains started at N(0, I): every coordinate's mean and mean of
    the square within z sqrt(Var / ESS) of the exact value, ESS our draws' mean-ESS (of x and of
    x^2), z = 5.41 Bonferroni over the 16 comparisons for a family-wise false alarm of 1e-6
    (fused_hmc.validation.posteriordb's rule with an exact reference)."""
    res = _gaussian_moments("cpu", 128, 500, 8)
    eps = res.step_size[0].item()
    assert eps <= res.trajectory_length <= 1000 * eps


def test_moments_of_an_ill_conditioned_gaussian_after_per_chain_chees():
    """The same with pooled=False: each chain's own step size and inverse mass, one T."""
    res = _gaussian_moments("cpu", 128, 500, 8, pooled=False)
    eps = res.step_size.median().item()
    assert eps <= res.trajectory_length <= 1000 * eps


@pytest.mark.parametrize("pooled", [True, False])
def test_eight_schools_with_chees_matches_posteriordb_on_cpu(pooled):
    """Eight schools (non-centred, dual-number gradients) with ChEES, pooled or each chain its
    own step size and inverse mass: 128 chains x 500 draws after 500 warm-up, posteriordb's rule
    (test_posteriordb.py). On the chains' mean acceptance (pooled), whose target the band checks;
    on their harmonic mean (ChEES's default) the chains accept far more (0.97 here)."""
    model = models.eight_schools()
    q0 = model.initial_point(128, generator=torch.Generator().manual_seed(20261201))
    res = fused_hmc.sample(q0, 500, target=model.target(), num_warmup=500, pooled=pooled,
                           adapt_trajectory_length=True, pooled_acceptance="mean", seed=11,
                           progress=False)
    compare_draws(model.constrained_values(res.samples.double()), model.posteriordb,
                  alpha=1e-6).raise_if_failed()
    assert 0.55 < res.mean_accept_prob.mean().item() < 0.8


@pytest.mark.cuda
@pytest.mark.parametrize("T0_steps", [10, 30])
def test_chees_alone_lands_where_the_criterion_peaks_on_cuda(T0_steps):
    res = _fixed_step_chees("cuda", T0_steps, seed=3)
    assert abs(res.trajectory_length / exact_dynamics_root(0.1) - 1) < 0.06, res.trajectory_length


@pytest.mark.cuda
def test_the_whole_warmup_lands_where_the_criterion_peaks_on_cuda():
    _assert_the_warmups_land_where_the_criterion_peaks("cuda")


@pytest.mark.cuda
def test_moments_of_an_ill_conditioned_gaussian_after_chees_on_cuda():
    _gaussian_moments("cuda", 4096, 1000, 64)


@pytest.mark.cuda
def test_eight_schools_with_chees_matches_posteriordb_on_cuda():
    model = models.eight_schools()
    q0 = model.initial_point(4096, generator=torch.Generator().manual_seed(20261201))
    res = fused_hmc.sample(q0.cuda(), 1000, target=model.target(), num_warmup=1000,
                           adapt_trajectory_length=True, seed=11, progress=False)
    compare_draws(model.constrained_values(res.samples.double().cpu()), model.posteriordb,
                  alpha=1e-6).raise_if_failed()
