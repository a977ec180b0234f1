"""Warm-up adaptation (the fused_hmc::warmup op) against a pure-Python Stan.

The oracle follows Stan's stepsize_adaptation / windowed_adaptation / diag_e adaptation literally
(restart() and set_mu() at each window end, the variance of the window's stored draws computed in
one pass by torch), with one departure from Stan: a per-chain step size's dual averaging over the
terminal fast interval uses gamma = 0.25 (csrc/math/adaptation/warmup_update.h says why; issue 32).
It shares no code with the op, and is run in lock step with it: before every op
transition the oracle gets the same state, and the transition's acceptance statistic comes from
the chain ops sampling (the same transition, checked equal), so each step's adaptation is compared on
its own.
"""
from __future__ import annotations

import math

import pytest
import torch

import fused_hmc
from fused_hmc._limits import STAN_WINDOWS
from fused_hmc.sampling.warmup import HARMONIC_WINDOWS, WarmupSettings
from fused_hmc.targets import DiagonalGaussian

from ._helpers import run_op
from ._windows_reference import MIN_RUN, warmup_windows
from .test_targets import make_target, run_sample_op

STAN_WINDOWS_1000 = [(75, 100), (100, 150), (150, 250), (250, 450), (450, 950)]


@pytest.mark.parametrize("num_warmup, windows, expected", [
    (1000, (75, 25, 50), STAN_WINDOWS_1000),
    (2000, (75, 25, 50), [(75, 100), (100, 150), (150, 250), (250, 450), (450, 850),
                          (850, 1950)]),
    (150, (75, 25, 50), [(75, 100)]),
    (200, (75, 25, 50), [(75, 100), (100, 150)]),
    (100, (75, 25, 50), [(15, 75)]),  # scaled to 15% / 60% / 25 iterations (Stan: 10%)
    (35, (75, 25, 50), [(5, 10)]),  # the shortest with the widened terminal interval
    (34, (75, 25, 50), [(5, 31)]),  # Stan's 15% / 75% / 10%
    (20, (75, 25, 50), [(3, 18)]),
    (19, (75, 25, 50), []),
    (0, (75, 25, 50), []),
    (300, (10, 20, 30), [(10, 30), (30, 70), (70, 270)]),
])
def test_windows(num_warmup, windows, expected):
    assert warmup_windows(num_warmup, *windows) == expected


def _ops_state(q0, groups, eps0, inv_mass0):
    chains, dim = q0.shape
    f64 = dict(dtype=torch.float64, device=q0.device)
    return dict(step=torch.full((groups,), eps0, **f64),
                inv=inv_mass0.to(q0.dtype).to(q0.device).expand(groups, dim).clone(),
                da=torch.zeros(groups, 3, **f64), wm=torch.zeros(chains, dim, **f64),
                wm2=torch.zeros(chains, dim, **f64))


def _warmup_op(q, target, s, jitter, steps, seed, first, n, num_warmup, windows, settings,
               chain_offset=0):
    run_op(q, target.op_target, target.op_tensors(q.dtype, q.device), target.op_scalars(),
            s["step"], s["inv"], jitter, steps, seed, chain_offset, first, n,
            dual_averaging=s["da"], window_mean=s["wm"], window_m2=s["wm2"], warmup_start=0,
            num_warmup=num_warmup, windows=list(windows), target_accept=settings.target_accept,
            adapt_step_size=settings.adapt_step_size,
            adapt_mass_matrix=settings.adapt_mass_matrix, chees=s.get("chees"),
            harmonic_acceptance=settings.pooled_acceptance == "harmonic")


STAN_GAMMA = 0.05
TERMINAL_GAMMA = 0.25  # a per-chain step size's run over the terminal fast interval


class StanStepSize:
    """stan::mcmc::stepsize_adaptation, verbatim in float64 (gamma may be set per run)."""

    def __init__(self, delta, eps):
        self.delta, self.gamma, self.t0, self.kappa = delta, STAN_GAMMA, 10.0, 0.75
        self.set_mu(eps)

    def set_mu(self, eps):
        self.mu = math.log(10 * eps)
        self.counter, self.s_bar, self.x_bar = 0, 0.0, 0.0

    def learn(self, adapt_stat):
        self.counter += 1
        adapt_stat = min(adapt_stat, 1.0)
        eta = 1.0 / (self.counter + self.t0)
        self.s_bar = (1.0 - eta) * self.s_bar + eta * (self.delta - adapt_stat)
        x = self.mu - self.s_bar * math.sqrt(self.counter) / self.gamma
        x_eta = self.counter ** -self.kappa
        self.x_bar = (1.0 - x_eta) * self.x_bar + x_eta * x
        return math.exp(x)


def pooled_statistic(accept_prob: torch.Tensor, acceptance: str) -> float:
    """The pooled statistic of the chains' acceptance probabilities: their mean, or the harmonic
    mean of the non-divergent ones (0 when that is not a number in [0, 1]). A divergent
    transition (energy error above 1000) has probability exp(-1000), 0 in float64; no transition of
    these tests has an error in (745, 1000], the other way to a probability of 0."""
    if acceptance == "mean":
        return float(accept_prob.mean())
    kept = accept_prob[accept_prob > 0].double()
    h = kept.numel() / float(kept.reciprocal().sum()) if kept.numel() else float("nan")
    return h if 0 <= h <= 1 else 0.0


def replay(target, q0, *, eps0=0.4, jitter=0.2, steps=5, seed=77, num_warmup=200,
           windows=(75, 25, 50), settings=WarmupSettings(), inv_mass0=None,
           divergent_iterations=None):
    """Runs the op one transition at a time beside the oracle; returns the op's final state. With
    settings.adapt_trajectory_length the op carries a ChEES state from T0 = steps x eps0 (steps
    is then the cap), each transition runs with its T, and after each T lies in [eps, steps eps]
    at the next step size (per chain: the chains' median)."""
    chains, dim = q0.shape
    groups = 1 if settings.pooled else chains
    chains_in_statistic = chains if groups == 1 else 1
    inv_mass0 = torch.ones(dim) if inv_mass0 is None else inv_mass0
    s = _ops_state(q0, groups, eps0, inv_mass0)
    if settings.adapt_trajectory_length:
        s["chees"] = torch.tensor([steps * eps0, 0, 0, 0, 1, 1, 0, 0], dtype=torch.float64,
                                  device=q0.device)
    q = q0.clone()
    stan = [StanStepSize(settings.target_accept, eps0) for _ in range(groups)]
    slow = warmup_windows(num_warmup, *windows)
    draws, updates = [], []
    for i in range(num_warmup):
        before = {k: v.clone() for k, v in s.items()}
        q_check = q.clone()
        length = float(before["chees"][0]) if "chees" in s else 0.0
        _, _, _, accept_prob = run_sample_op(q_check, target, before["step"], before["inv"], jitter,
                                             steps, seed, i, 1, q.new_empty(0),
                                             trajectory_length=length)
        _warmup_op(q, target, s, jitter, steps, seed, i, 1, num_warmup, windows, settings)
        assert torch.equal(q, q_check), i  # the warm-up transition is sampling's
        if "chees" in s:
            sizes, h = sorted(s["step"].tolist()), groups // 2
            eps = sizes[h] if groups % 2 else 0.5 * (sizes[h - 1] + sizes[h])
            assert eps <= float(s["chees"][0]) <= steps * eps, i

        if settings.adapt_step_size:
            stats = ([pooled_statistic(accept_prob, settings.pooled_acceptance)]
                     if settings.pooled else accept_prob.tolist())
            if divergent_iterations is not None and 0 < int((accept_prob == 0).sum()) < chains:
                divergent_iterations.append(i)
            expected = [st.learn(a) for st, a in zip(stan, stats)]
            if i == num_warmup - 1:
                expected = [math.exp(st.x_bar) for st in stan]
            torch.testing.assert_close(s["step"].cpu(), torch.tensor(expected, dtype=torch.float64),
                                       rtol=1e-12, atol=0, msg=f"step size after iteration {i}")
        else:
            assert torch.equal(s["step"], before["step"])

        window = next((w for w in slow if w[0] <= i < w[1]), None)
        if settings.adapt_mass_matrix and window is not None:
            draws.append(q.double().clone())
        if settings.adapt_mass_matrix and window is not None and i == window[1] - 1:
            block = torch.stack(draws, dim=1)  # [chains, n, d]
            n = block.shape[1]
            var = block.var(dim=1)
            if settings.pooled:  # the geometric mean of the chains' own window variances
                var = var.log().mean(0, keepdim=True)
                var, n = var.exp(), n * chains
            expected = (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))
            torch.testing.assert_close(s["inv"], expected.to(q.dtype), rtol=1e-11, atol=0)
            assert torch.equal(s["wm"], torch.zeros_like(s["wm"]))  # a fresh window follows
            draws = []
            updates.append(i)
            # Stan: set_mu(log(10 eps)), restart(); ours only where MIN_RUN iterations follow.
            for st, eps in zip(stan, s["step"].tolist()) if num_warmup - i - 1 >= MIN_RUN else ():
                st.set_mu(eps)
                if window == slow[-1] and chains_in_statistic == 1:  # the terminal run's gamma
                    st.gamma = TERMINAL_GAMMA
        else:
            assert torch.equal(s["inv"], before["inv"]), i
    expected_updates = [w[1] - 1 for w in slow] if settings.adapt_mass_matrix else []
    assert updates == expected_updates
    return q, s


def _diagonal(dim=3):
    return DiagonalGaussian(torch.linspace(-1, 1, dim), torch.logspace(-1, 1, dim))


def _q0(chains=6, dim=3, dtype=torch.float64, key=0):
    return torch.randn(chains, dim, generator=torch.Generator().manual_seed(key), dtype=dtype)


@pytest.mark.parametrize("pooled", [False, True])
def test_warmup_follows_stan(pooled, device):
    """Step size after every iteration, inverse mass at every window end (and nowhere else)."""
    replay(_diagonal(), _q0().to(device), settings=WarmupSettings(200, pooled=pooled))


@pytest.mark.parametrize("num_warmup, options, windows", [
    (1000, dict(adapt_trajectory_length=True), HARMONIC_WINDOWS),  # ChEES: pooled, harmonic mean
    (400, dict(pooled=True, pooled_acceptance="harmonic"), HARMONIC_WINDOWS),
    (399, dict(adapt_trajectory_length=True), STAN_WINDOWS),  # too short: Stan's first phase kept
    (1000, dict(adapt_trajectory_length=True, pooled_acceptance="mean"), STAN_WINDOWS),
    (1000, dict(adapt_trajectory_length=True, pooled=False), STAN_WINDOWS),  # per-chain steps
    (1000, dict(pooled=True), STAN_WINDOWS),
    (1000, dict(), STAN_WINDOWS),
    (1000, dict(adapt_trajectory_length=True, windows=(10, 20, 30)), (10, 20, 30)),  # given: kept
])
def test_default_windows_follow_the_pooled_statistic(num_warmup, options, windows):
    """windows=None resolves to Stan's, or to a 300-iteration terminal interval for a pooled step
    size on the harmonic mean when the three fit; the sampler's settings carry the resolved
    windows (saved with a result or a checkpoint, so a resume keeps them)."""
    assert WarmupSettings(num_warmup, **options).windows == windows
    sampler_options = {"adapt_windows" if k == "windows" else k: v for k, v in options.items()}
    sampler = fused_hmc.Sampler(torch.zeros(4, 2), num_warmup=num_warmup, **sampler_options)
    assert sampler.warmup.windows == windows
    assert HARMONIC_WINDOWS == (75, 25, 300) and STAN_WINDOWS == (75, 25, 50)


def _replay_harmonic(device, chees: bool) -> list[int]:
    """A pooled warm-up on the harmonic mean beside the oracle; the iterations where some of the
    chains diverged, not all."""
    settings = WarmupSettings(200, pooled=True, adapt_trajectory_length=chees,
                              pooled_acceptance="harmonic")
    divergent = []
    replay(_diagonal(), _q0(chains=7).to(device), eps0=0.8, steps=8 if chees else 5,
           settings=settings, divergent_iterations=divergent)
    return divergent


def test_pooled_warmup_on_the_harmonic_mean_follows_stan(device):
    """pooled_acceptance="harmonic": dual averaging on the harmonic mean of the chains'
    acceptance probabilities, divergent transitions left out. The restarts at 10x the step size
    make some chains diverge and not others; the test needs such iterations, where leaving the
    divergent chains out decides the statistic (counting them would give 0)."""
    divergent = _replay_harmonic(device, chees=False)
    assert len(divergent) >= 3, divergent


def test_chees_warmup_on_the_harmonic_mean_follows_stan():
    """The same with ChEES (CPU, as test_chees_warmup_follows_stan_beside_one_trajectory_length)."""
    divergent = _replay_harmonic(torch.device("cpu"), chees=True)
    assert len(divergent) >= 3, divergent


def test_warmup_of_one_chain_follows_stan_with_the_per_chain_terminal_gamma(device):
    """A batch of one chain (one shared state) adapts its step size from one chain's statistic, as
    a per-chain warm-up does: its terminal run takes the per-chain gamma too."""
    replay(_diagonal(), _q0(chains=1).to(device), settings=WarmupSettings(200, pooled=True))


@pytest.mark.parametrize("adapt_step_size, adapt_mass_matrix", [(True, False), (False, True),
                                                                (False, False)])
def test_warmup_parts(adapt_step_size, adapt_mass_matrix):
    settings = WarmupSettings(200, 0.7, adapt_step_size, adapt_mass_matrix, pooled=False)
    replay(_diagonal(), _q0(chains=3), settings=settings)


@pytest.mark.parametrize("num_warmup, windows", [(30, (75, 25, 50)), (12, (75, 25, 50)),
                                                 (60, (5, 10, 3)), (100, (75, 25, 50))])
@pytest.mark.parametrize("pooled", [False, True])
def test_warmup_short_and_custom_windows(num_warmup, windows, pooled, device):
    """Scaled and custom windows, with terminal intervals too short for a restart (30, 60) and
    the scaled windows' widened one (100)."""
    replay(_diagonal(), _q0(chains=3).to(device), num_warmup=num_warmup, windows=windows,
           settings=WarmupSettings(num_warmup, pooled=pooled))


@pytest.mark.parametrize("pooled", [False, True])
def test_warmup_float32_dense(pooled, device):
    """float32 chains (inverse mass rounded to float32) and the dense target."""
    target = make_target("dense", 4)
    replay(target, _q0(chains=4, dim=4, dtype=torch.float32).to(device), eps0=0.2,
           settings=WarmupSettings(200, pooled=pooled))


@pytest.mark.parametrize("pooled", [False, True])
def test_chees_warmup_follows_stan_beside_one_trajectory_length(pooled):
    """ChEES (CPU): pooled, or each chain with its own step size and inverse mass (pooled=False)
    while every chain runs the one adapted T: each chain's (or the pool's) step size and mass
    follow Stan's, transition by transition. 7 chains: the median is the middle one."""
    settings = WarmupSettings(200, pooled=pooled, adapt_trajectory_length=True)
    q, s = replay(_diagonal(), _q0(chains=7), steps=8, settings=settings)
    assert s["chees"][6] == 200  # one ChEES update a transition
    if not pooled:
        assert len(set(s["step"].tolist())) == 7  # each chain's own


def test_warmup_split_into_calls_is_identical(device):
    """Any split of the warm-up into calls leaves the same bits (the schedule is a function of the
    iteration index; the op carries everything else)."""
    target, q0 = _diagonal(4), _q0(chains=5, dim=4).to(device)
    for pooled in (False, True):
        settings = WarmupSettings(220, pooled=pooled)
        finals = []
        for split in ([220], [1, 99, 120], [74, 1, 25, 50, 70]):
            s = _ops_state(q0, 1 if pooled else 5, 0.3, torch.ones(4))
            q, first = q0.clone(), 0
            for n in split:
                _warmup_op(q, target, s, 0.1, 4, 5, first, n, 220, (75, 25, 50), settings)
                first += n
            finals.append((q, s))
        for q, s in finals[1:]:
            assert torch.equal(q, finals[0][0])
            for key in ("step", "inv", "da"):
                assert torch.equal(s[key], finals[0][1][key]), key


def test_warmup_per_chain_does_not_depend_on_the_batch_split(device):
    """One adaptation state per chain: chains [0, 3) and [3, 6) warmed up separately (chain_offset
    3 for the second part) equal the whole batch."""
    target, q0 = _diagonal(), _q0().to(device)

    def warm(q, offset):
        s = _ops_state(q, q.shape[0], 0.3, torch.ones(3))
        _warmup_op(q, target, s, 0.2, 3, 8, 0, 160, 160, (75, 25, 50), WarmupSettings(),
                   chain_offset=offset)
        return s

    whole_q = q0.clone()
    whole = warm(whole_q, 0)
    parts_q = [q0[:3].clone(), q0[3:].clone()]
    parts = [warm(parts_q[0], 0), warm(parts_q[1], 3)]
    assert torch.equal(torch.cat(parts_q), whole_q)
    for key in ("step", "inv"):
        assert torch.equal(torch.cat([p[key] for p in parts]), whole[key]), key


def test_warmup_op_checks_its_arguments():
    target = _diagonal()
    q = _q0(chains=2)
    s = _ops_state(q, 2, 0.3, torch.ones(3))

    def call(first=0, n=10, warmup_start=0, num_warmup=100, windows=(75, 25, 50),
             target_accept=0.8, da=None, wm=None):
        run_op(q, target.op_target, target.op_tensors(q.dtype, q.device), [], s["step"],
                s["inv"], 0.0, 2, 0, 0, first, n, dual_averaging=s["da"] if da is None else da,
                window_mean=s["wm"] if wm is None else wm, window_m2=s["wm2"],
                warmup_start=warmup_start, num_warmup=num_warmup, windows=list(windows),
                target_accept=target_accept, adapt_step_size=True, adapt_mass_matrix=True)

    call()
    with pytest.raises(ValueError, match="must lie in the warm-up"):
        call(first=95)
    with pytest.raises(ValueError, match="must lie in the warm-up"):
        call(first=3, warmup_start=5)
    with pytest.raises(ValueError, match="base_window >= 1"):
        call(windows=(75, 0, 50))
    with pytest.raises(ValueError, match="target_accept must be in"):
        call(target_accept=1.0)
    with pytest.raises(ValueError, match=r"dual_averaging must have shape \[2, 3\]"):
        call(da=torch.zeros(1, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="window_mean must be Double"):
        call(wm=torch.zeros(2, 3))


def test_pooled_inverse_mass_is_robust_to_late_chains(device):
    """The pooled inverse mass is the geometric mean of the chains' own window variances
    (csrc/math/hmc/mass_matrix.h). One chain of 256 still far away (its window mean 1e4 sd off, its
    variance 1e6 times the others') moves it by a factor 1e6^(1/256) = 1.055 at most; the variance
    of all the chains' draws together would be about 4e5 times too large. The window's last
    transition (iteration 99 of the window [75, 100)) runs on window moments of 24 draws set here,
    and the result is checked against the formula applied to the moments after that draw."""
    chains, dim, n = 256, 3, 25
    target = _diagonal(dim)
    sigma2 = (target.scale ** 2).double()
    q = (target.mean + target.scale * _q0(chains, dim)).to(device)
    s = _ops_state(q, 1, 0.3, sigma2)
    s["wm"] = q.double().clone()
    s["wm2"] = ((n - 2) * sigma2).expand(chains, dim).clone().to(device)
    s["wm"][0] += 1e4 * target.scale.to(device)
    s["wm2"][0] *= 1e6
    mean, m2 = s["wm"].clone(), s["wm2"].clone()
    settings = WarmupSettings(200, adapt_step_size=False, pooled=True)
    _warmup_op(q, target, s, 0.2, 4, 9, 99, 1, 200, (75, 25, 50), settings)

    delta = q.double() - mean  # the window's 25th draw, folded in as the op's Welford update does
    m2 = m2 + delta * (q.double() - (mean + delta / n))
    geometric = (m2 / (n - 1)).log().mean(0).exp()
    draws = n * chains
    expected = (draws / (draws + 5.0)) * geometric + 1e-3 * (5.0 / (draws + 5.0))
    torch.testing.assert_close(s["inv"][0].cpu(), expected.cpu(), rtol=1e-11, atol=0)
    ratio = s["inv"][0].cpu() / sigma2
    assert bool(((ratio > 0.9) & (ratio < 1.2)).all()), ratio
    assert torch.equal(s["wm2"], torch.zeros_like(s["wm2"]))  # a fresh window follows


@pytest.mark.parametrize("num_warmup", [20, 50])
def test_short_warmup_step_size_is_stable_and_lands_near_the_target(num_warmup, device):
    """Issue 32: Stan's scaled windows of a 20-iteration warm-up left a terminal interval of 2
    iterations; dual averaging restarted there at mu = log(10 eps) and ended near 5x the long
    warm-up's step size (median 5.3 here), and 95% of the sampling transitions diverged. Now a
    restart needs kMinDualAveragingRun iterations after it (none at 20: the step size keeps its
    run from iteration 0), and the scaled windows of 50 keep a terminal interval of 25.

    N(0, I_10), unit start mass, 64 chains, L = 8, jitter 0.2, fixed seeds (the draws are the same
    on every run and device). Thresholds:
    - Stability, the bound any correct warm-up must meet: leapfrog on the oscillator of frequency
      w = sqrt(inverse mass) is stable iff eps w < 2, so each chain's largest jittered step
      1.2 eps must satisfy 1.2 eps sqrt(max_j inv_mass_j) < 2; then the energy error stays a
      bounded multiple of the energy (about d = 10), far from the 1000 that counts a divergence:
      no divergence at all. The old warm-up's steps (median 5.3) broke the bound in every chain.
    - The long warm-up's 0.8 acceptance needs eps w near 0.95 here; a warm-up that stays
      conservative (acceptance up to 0.97 without a terminal restart) ends near half of it. The
      median over chains must lie in [0.25, 1.25] of the long warm-up's median: wider than the
      run-to-run spread of a median of 64 chains (q05..q95 of single chains: 0.85x .. 1.2x).
    - With the terminal interval of 25 (num_warmup=50) the pooled mean acceptance lies within
      the issue's 0.03 of the target, plus 5 standard errors of a mean of 64 chains (their sd,
      measured, about 0.05): a correct sampler exceeds it in fewer than 1e-6 of seeds.
    """
    chains, dim, jitter, target = 64, 10, 0.2, 0.8
    q0 = torch.randn(chains, dim, generator=torch.Generator().manual_seed(32),
                     dtype=torch.float64).to(device)

    def run(warmup):
        return fused_hmc.sample(q0, 200, num_warmup=warmup, seed=32, num_leapfrog_steps=8,
                                jitter=jitter, progress=False, keep_samples=False)

    long, short = run(1000), run(num_warmup)
    frequency = short.inverse_mass.amax(-1).sqrt()
    assert float(((1 + jitter) * short.step_size * frequency).max()) < 2.0
    assert int(short.chain_statistics["divergences"].sum()) == 0
    ratio = float(short.step_size.median() / long.step_size.median())
    assert 0.25 <= ratio <= 1.25, ratio
    if num_warmup == 50:
        acc = short.mean_accept_prob
        tolerance = 0.03 + 5 * float(acc.std()) / chains ** 0.5
        assert abs(float(acc.mean()) - target) < tolerance, (float(acc.mean()), tolerance)
