"""The validation suite: draws from the kernel on one device and runs every check on the draws.

Target N(mu, I) with d = 64, L = 10, eps = 0.1 (the seed configuration), mu non-zero. Sections:

noise        fresh-start transitions 0..T-1 of one philox stream: the kernel's own momenta and
             uniforms (distribution, moments, independence across chains, coordinates, transitions,
             seeds, and between momentum and uniform), and the acceptance of B*T independent
             transitions from exact stationary starts against the exact expectation.
generator    consecutive generator-seeded calls (rng="philox" and rng="torch"): distribution and
             independence between calls and from the ``torch.randn`` drawn right after.
stationarity B chains started at q ~ N(mu, I) and run T transitions: the final time slice must still
             be N(mu, I) (radius, every value, every coordinate's mean and variance); the lag-1
             autocorrelation must match its exact value.
convergence  the same time-slice checks after chains started at mu + 20 have run T transitions.
reproduce    bit equality for equal seeds, differences for different ones (no false alarms).

Every statistical check gets the same false-alarm rate alpha = 1e-6 / K (K = the number of
statistical checks; Bonferroni), so a correct sampler fails the whole suite with probability
below 1e-6 per run (``thresholds``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, NamedTuple

import torch

from . import checks as ck
from .checks import CheckResult
from .draws import (GeneratorStep, KernelGeneratorStep, KernelStep, SeededStep, fresh_start_draws,
                    generator_draws, run_chains, stationary_start)
from .gaussian_exact import gaussian_hmc_exact
from .thresholds import SUITE_FALSE_FAILURE_RATE, per_check_alpha


@dataclass(frozen=True)
class SuiteConfig:
    """Sizes of one suite run. B = chains, d = dim; every count below is per run.

    noise_transitions: fresh-start transitions traced (B*T uniforms, B*T acceptance trials).
    momentum_transitions: of those, how many keep their momenta (B*d each) for the momentum checks.
    seed_pair_transitions: transitions of seeds S and S+1 compared.
    generator_calls: consecutive generator-seeded calls per rng mode.
    stationarity_transitions / convergence_transitions: lengths of the two chain runs.
    far_start: the convergence run starts at q0 = mu + far_start. Each accepted transition maps
        the mean of x = q - mu to M00 x with M00 = cos(L theta) = 0.540 (rejections, < 1% near
        stationarity, leave it), so after t transitions the bias is below
        far_start * 0.55^t: 2e-25 at t = 100, far below the per-coordinate mean's standard error
        (1/sqrt(B) = 0.022); the variance converges at the same geometric rate. The final slice
        is then N(mu, I) for all the checks can tell, and is tested as the stationarity slice is.
    seed: the suite's base seed (philox streams seed, seed+1, ...; start generators seed+10...).
    """
    chains: int = 2048
    dim: int = 64
    step_size: float = 0.1
    num_leapfrog_steps: int = 10
    noise_transitions: int = 1024
    momentum_transitions: int = 256
    seed_pair_transitions: int = 16
    generator_calls: int = 32
    stationarity_transitions: int = 1024
    convergence_transitions: int = 200
    far_start: float = 20.0
    seed: int = 20261129


# Full: 33.5M momenta, 2.1M uniforms and acceptance trials, 1024-transition chain run: about 3 s
# of suite time on an H200 (9 s with start-up); on CPU about 100 s of CPU time (`fused-hmc
# validate` on two cores: user + sys 104 s).
FULL = SuiteConfig()
# Quick: 8.4M momenta, 1.0M uniforms and acceptance trials, 512-transition chain run: about 45 s
# of CPU time (user + sys 45 s on two cores; about 25 s of wall time when they are idle).
QUICK = replace(FULL, noise_transitions=512, momentum_transitions=64, seed_pair_transitions=8,
                generator_calls=16, stationarity_transitions=512, convergence_transitions=100)

# The statistical checks, in order; their number K fixes alpha = 1e-6 / K for each of them.
NOISE_CHECKS = (
    "momentum ~ N(0,1): KS",
    "momentum: mean",
    "momentum: variance",
    "momentum: skewness",
    "momentum: kurtosis (Anscombe-Glynn)",
    "uniform ~ U(0,1): KS",
    "indep: momentum, chain b vs b+1",
    "indep: momentum, chain b vs b+1, Box-Muller partner j^1",
    "indep: momentum^2, chain b vs b+1",
    "indep: momentum, coordinate j vs j+1",
    "indep: momentum, transition t vs t+1",
    "indep: momentum, seed S vs S+1",
    "indep: uniform, chain b vs b+1",
    "indep: uniform, transition t vs t+1",
    "indep: momentum vs uniform",
    "indep: momentum^2 vs uniform",
    "acceptance: rejections ~ Binomial",
)
GENERATOR_MODES = ("philox", "torch")
GENERATOR_CHECKS = tuple(
    name for mode in GENERATOR_MODES for name in (
        f"[{mode}+generator] momentum ~ N(0,1): KS",
        f"[{mode}+generator] uniform ~ U(0,1): KS",
        f"[{mode}+generator] indep: consecutive calls",
        f"[{mode}+generator] indep: kernel vs next torch.randn",
    ))
SLICE_CHECKS = ("|x|^2 ~ chi2(d): KS", "x ~ N(0,1): time-slice KS", "per-coordinate means",
                "per-coordinate variances")
STATIONARITY_CHECKS = tuple(f"stationarity: {n}" for n in SLICE_CHECKS) + (
    "stationarity: lag-1 autocorrelation",)
CONVERGENCE_CHECKS = tuple(f"convergence: {n}" for n in SLICE_CHECKS)
STATISTICAL_CHECKS = NOISE_CHECKS + GENERATOR_CHECKS + STATIONARITY_CHECKS + CONVERGENCE_CHECKS
ALPHA = per_check_alpha(len(STATISTICAL_CHECKS))  # 1e-6 / 34 = 2.9e-8 -> |z| < 5.54


class SuiteResult(NamedTuple):
    """results: every check in order; seconds: wall time per section; alpha: per-check rate."""
    device: torch.device
    config: SuiteConfig
    results: list[CheckResult]
    seconds: dict[str, float]
    alpha: float

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.passed]


def target_mean(dim: int, device: torch.device) -> torch.Tensor:
    """A non-zero target mean, mu_j spread over [-1.5, 2.5]."""
    return torch.linspace(-1.5, 2.5, dim, device=device, dtype=torch.float32)


def _generator(device: torch.device, seed: int) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


def _pairs_adjacent_chains(p: torch.Tensor):
    """p [..., B, d] -> the values of chains b and b+1 at the same coordinate, b = 0..B-2."""
    return p[..., :-1, :], p[..., 1:, :]


def noise_checks(momentum: torch.Tensor, momentum_other_seed: torch.Tensor,
                 uniform: torch.Tensor, accepted: torch.Tensor, expected_acceptance: float,
                 alpha: float) -> list[CheckResult]:
    """The NOISE_CHECKS on one stream's draws.

    momentum [Tm, B, d] of transitions 0..Tm-1; momentum_other_seed [Ts, B, d] transitions
    0..Ts-1 of seed S+1 (Ts <= Tm); uniform and accepted [T, B], fresh stationary starts.

    Acceptance: every transition starts from its own exact draw q ~ N(mu, I), so the B*T
    decisions are independent Bernoulli(exact acceptance) and the rejection count is exactly
    binomial. Decisions along one chain are not independent (a chain's |x|^2 is autocorrelated
    and shifts its acceptance probability), which is why the chain run's acceptance rate is
    reported, not tested.
    """
    names = iter(NOISE_CHECKS)
    ts = momentum_other_seed.shape[0]
    u_rows = uniform[: momentum.shape[0]].unsqueeze(-1).expand_as(momentum)
    partner = torch.arange(momentum.shape[-1], device=momentum.device) ^ 1
    partner = partner.clamp(max=momentum.shape[-1] - 1)
    rejections = int((~accepted).sum())
    return [
        ck.ks_normal(next(names), momentum, alpha),
        ck.mean_z(next(names), momentum, alpha),
        ck.variance_chi2(next(names), momentum, alpha),
        ck.skewness_z(next(names), momentum, alpha),
        ck.kurtosis_z(next(names), momentum, alpha),
        ck.ks_uniform(next(names), uniform, alpha),
        ck.correlation_z(next(names), *_pairs_adjacent_chains(momentum), alpha),
        ck.correlation_z(next(names), momentum[..., :-1, :], momentum[..., 1:, partner], alpha),
        ck.correlation_z(next(names), *_pairs_adjacent_chains(momentum.square()), alpha),
        ck.correlation_z(next(names), momentum[..., :-1], momentum[..., 1:], alpha),
        ck.correlation_z(next(names), momentum[:-1], momentum[1:], alpha),
        ck.correlation_z(next(names), momentum[:ts], momentum_other_seed, alpha),
        ck.correlation_z(next(names), uniform[:, :-1], uniform[:, 1:], alpha),
        ck.correlation_z(next(names), uniform[:-1], uniform[1:], alpha),
        ck.correlation_z(next(names), momentum, u_rows, alpha),
        ck.correlation_z(next(names), momentum.square(), u_rows, alpha),
        ck.binomial_count(next(names), rejections, accepted.numel(), 1.0 - expected_acceptance,
                          alpha, what="rejections"),
    ]


def generator_checks(mode: str, draws, alpha: float) -> list[CheckResult]:
    """KS and independence checks on ``GeneratorDraws`` of one rng mode."""
    names = iter(GENERATOR_CHECKS[4 * GENERATOR_MODES.index(mode):])
    return [
        ck.ks_normal(next(names), draws.momentum, alpha),
        ck.ks_uniform(next(names), draws.uniform, alpha),
        ck.correlation_z(next(names), draws.momentum[:-1], draws.momentum[1:], alpha),
        ck.correlation_z(next(names), draws.momentum, draws.randn_after, alpha),
    ]


def time_slice_checks(prefix: str, q: torch.Tensor, mu: torch.Tensor,
                      alpha: float) -> list[CheckResult]:
    """q [B, d] at one time of chains whose state should be exactly N(mu, I): B*d iid N(0, 1)
    values of x = q - mu, B iid chi2(d) radii |x|^2."""
    x = (q - mu).to(torch.float64)
    d = q.shape[1]
    names = iter(SLICE_CHECKS)
    return [
        ck.ks_chi2(f"{prefix}: {next(names)}", x.square().sum(-1), d, alpha),
        ck.ks_normal(f"{prefix}: {next(names)}", x, alpha),
        ck.per_coordinate_means(f"{prefix}: {next(names)}", x, torch.zeros(d), alpha),
        ck.per_coordinate_variances(f"{prefix}: {next(names)}", x, torch.zeros(d), alpha),
    ]


def reproducibility_checks(step: SeededStep, gen_steps: dict[str, GeneratorStep],
                           mu: torch.Tensor, chains: int, seed: int) -> list[CheckResult]:
    """Exact checks: same seed -> same bits; different seed or transition -> different numbers;
    a chain's philox stream independent of the batch size; generator reseeding reproduces."""
    device = mu.device
    q = stationary_start(mu, chains, _generator(device, seed + 20))
    a = step(q, mu, seed=seed, transition=3)
    b = step(q.clone(), mu, seed=seed, transition=3)
    other_seed = step(q, mu, seed=seed + 1, transition=3)
    other_t = step(q, mu, seed=seed, transition=4)
    half = chains // 2 + 1
    part = step(q[:half].clone(), mu, seed=seed, transition=3)
    results = [
        ck.bits_equal("repro: same seed and transition, same bits", a, b, True),
        ck.bits_equal("repro: seed S vs S+1 differ", a[2:], other_seed[2:], False),
        ck.bits_equal("repro: transition t vs t+1 differ", a[2:], other_t[2:], False),
        ck.bits_equal(f"repro: chain streams independent of batch size ({chains} vs {half})",
                      [t[:half] for t in a], part, True),
    ]
    for mode, gen_step in gen_steps.items():
        runs = []
        for gen_seed in (seed + 30, seed + 30, seed + 31):
            gen = _generator(device, gen_seed)
            runs.append(list(gen_step(q, mu, generator=gen)) + list(gen_step(q, mu, generator=gen)))
        results.append(ck.bits_equal(f"repro[{mode}+generator]: same generator seed, same bits",
                                     runs[0], runs[1], True))
        results.append(ck.bits_equal(f"repro[{mode}+generator]: different generator seeds differ",
                                     runs[0][2:4], runs[2][2:4], False))
    return results


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_suite(device: torch.device | str, quick: bool = False, config: SuiteConfig | None = None,
              step: SeededStep | None = None,
              generator_steps: dict[str, GeneratorStep] | None = None,
              progress: Callable[[str], None] | None = None) -> SuiteResult:
    """Draws from the kernel on ``device`` and runs every check.

    config: sizes (default QUICK if ``quick`` else FULL); a different seed gives an independent
    run. step / generator_steps: the sampler under test (default: the real kernel).
    progress: called with each section's name before it runs.
    """
    device = torch.device(device)
    cfg = config or (QUICK if quick else FULL)
    step = step or KernelStep(cfg.step_size, cfg.num_leapfrog_steps)
    generator_steps = generator_steps or {
        mode: KernelGeneratorStep(mode, cfg.step_size, cfg.num_leapfrog_steps)
        for mode in GENERATOR_MODES}
    exact = gaussian_hmc_exact(cfg.dim, cfg.step_size, cfg.num_leapfrog_steps)
    mu = target_mean(cfg.dim, device)
    alpha = ALPHA
    results: list[CheckResult] = []
    seconds: dict[str, float] = {}

    def section(name: str, run: Callable[[], list[CheckResult]]) -> None:
        if progress:
            progress(name)
        start = time.perf_counter()
        results.extend(run())
        _sync(device)
        seconds[name] = time.perf_counter() - start

    def noise() -> list[CheckResult]:
        draws = fresh_start_draws(step, mu, cfg.chains, cfg.noise_transitions,
                                  cfg.momentum_transitions, cfg.seed,
                                  _generator(device, cfg.seed + 10))
        other = fresh_start_draws(step, mu, cfg.chains, cfg.seed_pair_transitions,
                                  cfg.seed_pair_transitions, cfg.seed + 1,
                                  _generator(device, cfg.seed + 11)).momentum
        return noise_checks(draws.momentum, other, draws.uniform, draws.accepted,
                            exact.acceptance, alpha)

    def generators() -> list[CheckResult]:
        out = []
        q = stationary_start(mu, cfg.chains, _generator(device, cfg.seed + 12))
        for i, mode in enumerate(GENERATOR_MODES):
            draws = generator_draws(generator_steps[mode], q, mu, cfg.generator_calls,
                                    _generator(device, cfg.seed + 13 + i))
            out += generator_checks(mode, draws, alpha)
        return out

    def stationarity() -> list[CheckResult]:
        q0 = stationary_start(mu, cfg.chains, _generator(device, cfg.seed + 15))
        run = run_chains(step, q0, mu, cfg.stationarity_transitions, cfg.seed + 2)
        lag = ck.across_chain_t("stationarity: lag-1 autocorrelation", run.lag1_per_chain,
                                exact.lag1_autocorrelation, alpha)
        lag = lag._replace(detail=lag.detail + f"; acceptance {float(run.acceptance_per_chain.mean()):.5f}")
        return time_slice_checks("stationarity", run.final, mu, alpha) + [lag]

    def convergence() -> list[CheckResult]:
        q0 = mu + cfg.far_start * torch.ones(cfg.chains, cfg.dim, device=device)
        run = run_chains(step, q0, mu, cfg.convergence_transitions, cfg.seed + 3)
        return time_slice_checks("convergence", run.final, mu, alpha)

    section("noise", noise)
    section("generator", generators)
    section("stationarity", stationarity)
    section("convergence", convergence)
    section("reproducibility",
            lambda: reproducibility_checks(step, generator_steps, mu, cfg.chains, cfg.seed + 4))
    statistical = [r.name for r in results if r.alpha > 0]
    if statistical != list(STATISTICAL_CHECKS):  # the Bonferroni count must be the checks run
        raise AssertionError(f"suite ran {statistical}, expected {STATISTICAL_CHECKS}")
    return SuiteResult(device, cfg, results, seconds, alpha)


def describe_budget(result: SuiteResult) -> str:
    """One line: how the false-failure budget is split."""
    k = len(STATISTICAL_CHECKS)
    exact_checks = sum(1 for r in result.results if r.alpha == 0)
    return (f"{k} statistical checks at alpha = {SUITE_FALSE_FAILURE_RATE:g} / {k} = "
            f"{result.alpha:.2e} each (Bonferroni: a correct sampler fails the suite with "
            f"probability < {SUITE_FALSE_FAILURE_RATE:g}), plus {exact_checks} exact checks")


__all__ = ["SuiteConfig", "SuiteResult", "FULL", "QUICK", "STATISTICAL_CHECKS", "ALPHA",
           "run_suite", "noise_checks", "generator_checks", "time_slice_checks",
           "reproducibility_checks", "target_mean", "describe_budget"]
