"""Warm-up settings and Stan's adaptation windows (the schedule the chain ops' warm-up follows).

Warm-up adapts two things while the chains move towards the target; its draws are discarded.

- Step size: Nesterov dual averaging of log eps toward an average acceptance statistic
  min(1, exp(log_alpha)) of ``target_accept`` (Hoffman & Gelman 2014, "The No-U-Turn Sampler",
  JMLR 15, sec. 3.2), with Stan's constants gamma = 0.05, t0 = 10, kappa = 0.75 and
  mu = log(10 eps0), restarted after every slow window; warm-up ends at exp(x_bar). Per chain (the
  terminal run with gamma = 0.25, below), or pooled: one step size driven by the mean statistic
  of all chains.
- Diagonal inverse mass: the variances of the draws of each slow window, regularised as Stan does
  ((n / (n + 5)) var + 1e-3 (5 / (n + 5))), per chain or pooled over all chains' draws.

Windows (Stan Reference Manual, "HMC algorithm parameters", automatic parameter tuning): an initial
fast interval of ``init_buffer`` = 75 iterations, slow windows of ``base_window`` = 25, then 50,
100, ... (the last stretched to the start of the terminal interval when the next would overrun it),
a terminal fast interval of ``term_buffer`` = 50 (Stan's adapt init_buffer / window / term_buffer).
When the three do not fit in num_warmup they scale to 15% / 75% / 10% of it, the terminal interval
widened to 25 iterations from 35 on; dual averaging restarts only where 25 iterations follow
(issue 32: a restart at 10x eps needs them to come back down); with fewer than 20 warm-up
iterations there are no slow windows (step size only). The C++ twin is
csrc/math/adaptation/adaptation_windows.h (the tests' oracle is
tests/unit/_windows_reference.py).

Per chain or pooled. Dual averaging of one chain's step size is driven by that chain's acceptance
statistic, which for static HMC is noisy from transition to transition (sd about 0.3). With Stan's
gamma = 0.05 the iterates of log eps then scatter widely over the short terminal run, their mean
acceptance is driven to ``target_accept``, and since acceptance is concave in log eps there, the
averaged step size exp(x_bar) accepts more: 0.92 to 0.96 for target 0.8 on the library models and
0.94 on a 10-dimensional Gaussian (issue 32; benchmarks/probes/final_acceptance.py). So a chain's
own dual averaging over the terminal fast interval (after the last slow window, when the mass is
adapted) uses gamma = 0.25, which damps the scatter; the restart's pull toward mu = log(10 eps)
balances the rest. Sampling then accepts within about 0.03 of the target, median and mean over
chains (eight schools 0.803, logistic regression 0.792, the Gaussian 0.81 for 0.8); each chain's
own figure spreads around it (5% and 95% quantiles 0.69 and 0.88 on eight schools), the noise of
its 50 terminal transitions. For target 0.65 it lands near 0.69 (simulated). The pooled warm-up
averages the statistic over all chains, has no such scatter, keeps Stan's gamma and lands within
about 0.02 of the target (a batch of one chain, pooled or not, is one chain's statistic and takes
gamma = 0.25). Pooled ChEES can land higher, likely because every chain runs a transition's
shared trajectory jitter w, so the mean statistic varies from transition to transition with w, as
one chain's does (logistic regression, float32, diagonal mass, 1024 chains: 0.708 and 0.739 for
0.651, where a fixed L = 8 pooled lands at 0.660; the terminal gamma = 0.25 overcorrects it, to
0.61 and 0.62). ``pooled_acceptance="harmonic"`` (ChEES's default) drives a pooled step size
with the chains' harmonic mean acceptance instead, divergent transitions left out (the ChEES
paper's statistic, BlackJAX's; csrc/math/adaptation/pooled_acceptance.h): the chains that accept
least set the step size, so no region of the target keeps chains stuck (docs/FAR_STARTS.md), at
a smaller step size, and the chains' average acceptance lies above the target (0.83 to 0.998 for
0.651 on the library models). Its terminal fast interval is 300 iterations by default from 400
warm-up iterations on (HARMONIC_WINDOWS below), since its statistic jumps with the chain that
accepts least. On the mean, ChEES stranded 207 of 4,096 chains on the funnel and left the hybrid
Rosenbrock at R-hat 1.53 (means 0.30 and 4.5 against 1 and 11); on the harmonic
mean none, and R-hat 1.004. Per chain stays the default, as in Stan, NumPyro and BlackJAX: the
chains' different step sizes also spread their trajectory lengths, which on Gaussian targets
raised the smallest ESS (of the squares) 3x over pooled adaptation in benchmarks/bench_warmup.py
(d = 64, scales 0.01 .. 100: 185k vs 56k from 512 x 1000 draws, measured before the pooled mass
became the geometric mean below; not remeasured since). The pooled inverse mass is the
geometric mean over chains of each chain's own window variance (csrc/math/hmc/mass_matrix.h), not
the variance of all chains' draws together: chains that have not yet arrived from far starts would
inflate the latter for all, and the shared step size would collapse (on diamonds from Stan's
starts it fell to 1e-3 and 3 of 4 CPU runs failed; with the geometric mean the step size stays
near 0.3: benchmarks/results/time_to_answer/README.md). A pooled warm-up (ChEES too) runs its
initial fast interval per chain, starts the pooled step size at the chains' median and restarts
chains that never moved (:mod:`fused_hmc.sampling.far_starts`, docs/FAR_STARTS.md), so that far
starts strand no chain.

Static HMC on a Gaussian has resonances: with a fixed trajectory length eps * L the acceptance is
not monotone in eps (trajectories that return close to their start are accepted and mix badly),
which also misleads dual averaging. Jitter (``jitter=0.2``: eps drawn in [0.8, 1.2] eps each
transition) removes them and is recommended for these targets.

The default ``target_accept`` is 0.8 (0.651 with ChEES, below), Stan's ``adapt_delta`` and
NumPyro's ``target_accept_prob``. Beskos, Pillai, Roberts, Sanz-Serna & Stuart (2013, Bernoulli
19) find 0.651 optimal for static HMC as d -> infinity on product targets, with efficiency
varying slowly around it; 0.8 spends a few more leapfrog steps per effective draw there and keeps
a margin for targets whose curvature varies (and is what users of Stan and NumPyro expect).

Trajectory length (``adapt_trajectory_length=True``): ChEES (Hoffman, Radul & Sountsov 2021, "An
Adaptive MCMC Scheme for Setting Trajectory Lengths in Hamiltonian Monte Carlo", AISTATS), as
BlackJAX's ``chees_adaptation`` forms it, inside the op
(csrc/math/adaptation/trajectory_adaptation.h). Each transition runs L = min(max_leapfrog_steps,
max(1, ceil(w T / eps_t))) leapfrog steps, with w on [0, 1) one per transition shared by every
chain (van der Corput's sequence rotated by a word of the stream, as BlackJAX shares a Halton
sequence) and eps_t the transition's (jittered) step size. After every warm-up transition the op forms, from
all chains, the gradient of the ChEES criterion (the change in the ensemble's centred squared norm)
with respect to log T, weighted by the acceptance probabilities, takes one Adam step on log T
(learning rate 0.025, step clipped to +-0.35) from the moving average of log T (weight k^-1/2 after
k updates) and sets T to the exponential of that average, clipped to [eps, max_leapfrog_steps eps]
at the next step size. The clip bounds the transitions' T, not the average: after each slow window
the restarted dual averaging runs one transition at about 10x the step size, and a clipped T fed
back into the average kicked log T up at every window's end, past the criterion's first minimum
(docs/FAR_STARTS.md). At the end of every slow window (without slow windows, the mass not
adapted: once, at the initial fast interval's end) Adam restarts from the average (its moments
and the average's clock fresh: restart_chees_optimizer), because the gradient's scale changes by
orders of magnitude there (the criterion is a fourth power of the distances, which the new mass
rescales) and while chains come in from far starts; Adam's second moment, a memory of about 1,000
updates, kept the largest early gradient and shrank every later step until T stayed at T0.
Warm-up starts at T0 = num_leapfrog_steps * step_size and sampling runs with the final T (its
jitter too). ChEES defaults to ``pooled=True``. With ``pooled=False`` (the CPU
only, in one process) each chain adapts its own step size and inverse mass as in a per-chain
warm-up while T comes from every chain, so the chains run in lock step, one transition at a time,
and each runs ceil(w T / eps_b) steps at its own eps_b; T's clip uses the chains' median step size.
Its default ``target_accept`` is the paper's 0.651 (Beskos et al.'s optimum, above). On a Gaussian with the mass adapted the criterion peaks at T = 2.2467 (in the
preconditioned scale; tests/unit/test_chees.py derives it).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from .. import _build
from .._limits import LIMITS, STAN_WINDOWS

MAX_WARMUP = LIMITS["kMaxWarmupLength"]
TARGET_ACCEPT = 0.8  # Stan's adapt_delta, NumPyro's target_accept_prob
CHEES_TARGET_ACCEPT = 0.651  # the ChEES paper's (and BlackJAX's) default
MASS_ESTIMATORS = ("draws", "gradients")
POOLED_ACCEPTANCE = ("mean", "harmonic")
# A pooled step size on the harmonic mean (ChEES's default) gets a terminal fast interval of 300:
# the statistic is set by the chains that accept least, so it jumps from transition to transition,
# and 50 iterations of dual averaging after the restart at 10x the step size left exp(x_bar) low
# and seed-dependent. On the CPU (benchmarks/probes/harmonic_terminal.py, Stan's starts, ChEES)
# eight schools' step size went from 0.19-0.23 to 0.23-0.24 over six seeds and its ESS per
# sampling gradient up 15%, BlackJAX's step size; logistic regression's acceptance from 0.84 to
# 0.78 for 0.651 (ESS per gradient +4%; diamonds' -4%). The slow windows keep 625 of 1,000
# iterations, ample for a mass pooled over thousands of chains. A warm-up too short for the three
# (under 400) keeps Stan's: scaled, they would cut the initial fast interval, the per-chain first
# phase that far starts need (far_starts.py), from 75 iterations to 15%.
HARMONIC_WINDOWS = (STAN_WINDOWS[0], STAN_WINDOWS[1], 300)


@dataclass(frozen=True)
class WarmupSettings:
    """How warm-up adapts. num_warmup: iterations (0 = none); target_accept in (0, 1) (None:
    0.651 with adapt_trajectory_length, else 0.8); adapt_step_size, adapt_mass_matrix: what to
    adapt; pooled: one step size and one inverse mass for all chains (from all chains'
    statistics) instead of one per chain (None: True with adapt_trajectory_length, else False);
    windows: (init_buffer, base_window, term_buffer) (None: Stan's (75, 25, 50), or
    HARMONIC_WINDOWS for a pooled step size on the harmonic mean, ChEES's default, from 400
    warm-up iterations on);
    adapt_trajectory_length: ChEES adapts one trajectory length for all chains (needs
    num_warmup > 0); with pooled=False each chain still adapts its own step size and inverse
    mass, in lock step with the others (the CPU only); mass_estimator: "draws" (Stan's: the window draws'
    variances or covariance) or "gradients" (nutpie's: from the draws and the gradients of the
    log density at them, csrc/math/hmc/gradient_mass.h; the CPU only); pooled_acceptance: the
    statistic a pooled step size is adapted on, "mean" (the chains' mean acceptance statistic)
    or "harmonic" (their harmonic mean, divergent transitions left out: the ChEES paper's and
    BlackJAX's; csrc/math/adaptation/pooled_acceptance.h) (None: "harmonic" with
    adapt_trajectory_length, else "mean")."""

    num_warmup: int = 0
    target_accept: float | None = None
    adapt_step_size: bool = True
    adapt_mass_matrix: bool = True
    pooled: bool | None = None
    windows: tuple[int, int, int] | None = None
    adapt_trajectory_length: bool = False
    mass_estimator: str = "draws"
    pooled_acceptance: str | None = None

    def __post_init__(self):
        n = self.num_warmup
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise ValueError(f"num_warmup must be an integer >= 0, got {n!r}")
        chees = self.adapt_trajectory_length
        if not isinstance(chees, bool):
            raise TypeError(f"adapt_trajectory_length must be True or False, got {chees!r}")
        if chees and n == 0:
            raise ValueError("adapt_trajectory_length=True adapts the trajectory length during "
                             "warm-up: give num_warmup > 0")
        if self.pooled is None:
            object.__setattr__(self, "pooled", chees)
        if self.target_accept is None:
            object.__setattr__(self, "target_accept",
                               CHEES_TARGET_ACCEPT if chees else TARGET_ACCEPT)
        a = self.target_accept
        if (isinstance(a, bool) or not isinstance(a, numbers.Real) or not math.isfinite(a)
                or not 0 < a < 1):
            raise ValueError(f"target_accept must be a number in (0, 1), got {a!r}")
        for name in ("adapt_step_size", "adapt_mass_matrix", "pooled"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.pooled_acceptance is None:
            object.__setattr__(self, "pooled_acceptance", "harmonic" if chees else "mean")
        if self.pooled_acceptance not in POOLED_ACCEPTANCE:
            raise ValueError(f"pooled_acceptance must be one of {POOLED_ACCEPTANCE}, got "
                             f"{self.pooled_acceptance!r}")
        if self.windows is None:
            harmonic = (self.pooled and self.pooled_acceptance == "harmonic"
                        and n >= sum(HARMONIC_WINDOWS))
            object.__setattr__(self, "windows", HARMONIC_WINDOWS if harmonic else STAN_WINDOWS)
        w = self.windows
        if (not isinstance(w, (tuple, list)) or len(w) != 3
                or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in w)
                or not (0 <= w[0] <= MAX_WARMUP and 1 <= w[1] <= MAX_WARMUP
                        and 0 <= w[2] <= MAX_WARMUP)):
            raise ValueError("adapt_windows must be (init_buffer >= 0, base_window >= 1, "
                             f"term_buffer >= 0), Stan's (75, 25, 50); got {w!r}")
        if n > MAX_WARMUP:
            raise ValueError(f"num_warmup must be <= 2**40, got {n}")
        if self.mass_estimator not in MASS_ESTIMATORS:
            raise ValueError(f"mass_estimator must be one of {MASS_ESTIMATORS}, got "
                             f"{self.mass_estimator!r}")
        object.__setattr__(self, "num_warmup", int(n))
        object.__setattr__(self, "target_accept", float(a))
        object.__setattr__(self, "windows", tuple(int(v) for v in w))


def initial_interval(settings: WarmupSettings) -> int:
    """The iterations of the warm-up's initial fast interval (0 without slow windows)."""
    n = settings.num_warmup
    init, base, term = settings.windows
    if n < LIMITS["kMinWarmupForWindows"]:
        return 0
    if init + base + term > n:  # Stan's scaled windows (csrc/math/adaptation/adaptation_windows.h)
        return int(0.15 * n)
    return init


def restart_chees_optimizer(chees: torch.Tensor, step_size: torch.Tensor) -> None:
    """Restarts ChEES's Adam at a slow window's end (the module's docstring says why), in place on
    the op's state [T, mean log T, m, v, beta1^k, beta2^k, k, 0]: T becomes exp(mean log T)
    (before the first update, k = 0, the T0 given), where the op's first update after a restart
    starts Adam; m and v become 0, the bias powers 1 and the clock k 0.

    T restarts at one step at least (floor_chees_length). The window's last step size, not the
    restarted dual averaging's first (about 10x), is the floor."""
    started = chees[6] > 0
    chees[0] = torch.where(started, chees[1].exp(), chees[0])
    floor_chees_length(chees, step_size)
    chees[2:4] = 0.0
    chees[4:6] = 1.0
    chees[6] = 0.0


def chees_restarts(settings: WarmupSettings) -> set[int]:
    """The warm-up iterations (0-based) after which ChEES restarts its optimiser
    (restart_chees_optimizer): every slow window's end; without slow windows (the mass not
    adapted), once, at the initial fast interval's last, where the step sizes have left their
    start, so that T is floored at one of their steps there too (a T0 far below the adapted step
    size otherwise stayed at one step for the whole warm-up). A pooled warm-up's ChEES starts at
    that iteration anyway (far_starts.py), so this restart changes nothing for it."""
    if settings.adapt_mass_matrix:
        return set(slow_window_ends(settings))
    if settings.adapt_step_size and initial_interval(settings) > 0:
        return {initial_interval(settings) - 1}
    return set()


def floor_chees_length(chees: torch.Tensor, step_size: torch.Tensor) -> None:
    """ChEES's T (chees[0]) raised, in place, to one step of the chains' median step size where
    it is shorter: a shorter T runs one step all the same, and Adam moves the average by about
    k^-1/2 of a step each update, so a T0 far below one step stayed there for a whole warm-up.
    Where ChEES starts (far_starts.py) and restarts (restart_chees_optimizer)."""
    chees[0] = torch.maximum(chees[0], step_size.median().to(chees))


def slow_window_ends(settings: WarmupSettings) -> list[int]:
    """The warm-up iterations (0-based) that end a slow window, in order (the op's windows:
    csrc/math/adaptation/adaptation_windows.h); none with fewer than kMinWarmupForWindows."""
    n, i, ends = settings.num_warmup, initial_interval(settings), []
    if n < LIMITS["kMinWarmupForWindows"]:
        return ends
    window_of = _build.bindings().slow_window_of
    while i < n:
        start, end = window_of(n, list(settings.windows), i)
        if start < 0:
            break
        ends.append(end)
        i = end + 1
    return ends
