"""Power: the suite's checks catch realistic defects planted on top of the real kernel.

Each defect is a step with the suite's own signature (``fused_hmc.validation.draws``), built in
Python from the real kernel's traced noise (``ops.transition(..., trace=True)``), the kernel with
external noise, or a reference-style float64 integrator; the suite's check functions then run on its
draws at the suite's own per-check false-alarm rate, and the test asserts that the check meant to
see the defect fails. Controls run the same harnesses without a defect and must pass, so a failure
is the defect's doing. Sizes are small (a few seconds on two CPU cores each).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

import fused_hmc
from fused_hmc.validation import checks as ck
from fused_hmc.validation.draws import (KernelGeneratorStep, KernelStep, Transition,
                                        fresh_start_draws, generator_draws, run_chains,
                                        stationary_start)
from fused_hmc.validation.gaussian_exact import gaussian_hmc_exact
from fused_hmc.validation.suite import ALPHA, generator_checks, noise_checks, target_mean

CHAINS, DIM, EPS, L = 2048, 64, 0.1, 10
SEED = 7_000_003
KERNEL = KernelStep(EPS, L)
EXACT = gaussian_hmc_exact(DIM, EPS, L)


# ---- defects ---------------------------------------------------------------------------------

def external(q, mu, momentum, uniform) -> Transition:
    """The real kernel fed the given noise exactly (external-noise mode)."""
    q_new, accepted = fused_hmc.hmc_step(q, mu, step_size=EPS, num_leapfrog_steps=L,
                                         momentum=momentum.contiguous(), uniform=uniform.contiguous())
    return Transition(q_new, accepted, momentum, uniform)


def reference_style(q, mu, momentum, uniform, *, half_steps=True, grad_scale=1.0):
    """The spec's transition in float64 with two optional defects: the leading and trailing half
    momentum steps left out, and the gradient scaled by ``grad_scale``. H is always the true one."""
    q64, mu64, p = q.double(), mu.double(), momentum.double()
    x0 = q64 - mu64
    x = x0.clone()
    if half_steps:
        p = p - 0.5 * EPS * grad_scale * x
    for _ in range(L - 1):
        x = x + EPS * p
        p = p - EPS * grad_scale * x
    x = x + EPS * p
    if half_steps:
        p = p - 0.5 * EPS * grad_scale * x
    log_alpha = 0.5 * (x0.square().sum(-1) + momentum.double().square().sum(-1)
                       - x.square().sum(-1) - p.square().sum(-1))
    accepted = torch.log(uniform.double().clamp(min=1e-10)) < log_alpha
    q_new = torch.where(accepted.unsqueeze(-1), x + mu64, q64).to(q.dtype)
    return q_new, accepted


@dataclass
class ScaledMomentum:
    """Momentum variance off by a factor: the kernel's own momenta times sqrt(factor)."""
    factor: float = 1.05

    def __call__(self, q, mu, *, seed, transition):
        noise = KERNEL(q, mu, seed=seed, transition=transition)
        return external(q, mu, noise.momentum * math.sqrt(self.factor), noise.uniform)


@dataclass
class ReferenceIntegrator:
    """The kernel's noise through a reference-style integrator (optionally broken)."""
    half_steps: bool = True
    grad_scale: float = 1.0

    def __call__(self, q, mu, *, seed, transition):
        noise = KERNEL(q, mu, seed=seed, transition=transition)
        q_new, accepted = reference_style(q, mu, noise.momentum, noise.uniform,
                                          half_steps=self.half_steps, grad_scale=self.grad_scale)
        return Transition(q_new, accepted, noise.momentum, noise.uniform)


class SharedUniform:
    """One uniform per transition shared by all chains (chain 0's)."""

    def __call__(self, q, mu, *, seed, transition):
        noise = KERNEL(q, mu, seed=seed, transition=transition)
        return external(q, mu, noise.momentum, noise.uniform[:1].expand_as(noise.uniform))


class BoxMullerPartnerMixup:
    """Chain 2k+1 reads chain 2k's Philox block and takes each Box-Muller pair's other output:
    p[2k+1, j] = p[2k, j ^ 1] (lanes 0<->1, 2<->3 of curand_normal4)."""

    def __call__(self, q, mu, *, seed, transition):
        noise = KERNEL(q, mu, seed=seed, transition=transition)
        p = noise.momentum.clone()
        partner = torch.arange(p.shape[1], device=p.device) ^ 1
        p[1::2] = noise.momentum[0::2][: p[1::2].shape[0]][:, partner]
        return external(q, mu, p, noise.uniform)


class SharedAngleWord:
    """Chain 2k+1 takes its Box-Muller angle word from chain 2k's block (its radius stays its own):
    (s' sin v, s' cos v) next to chain 2k's (s sin v, s cos v)."""

    def __call__(self, q, mu, *, seed, transition):
        noise = KERNEL(q, mu, seed=seed, transition=transition)
        p = noise.momentum.clone()
        first, second = p[:, 0::2], p[:, 1::2]  # (s sin v, s cos v) per Box-Muller pair
        radius, angle = torch.hypot(first, second), torch.atan2(first, second)
        odd, even = slice(1, None, 2), slice(0, None, 2)
        n = p[odd].shape[0]
        p[odd, 0::2] = radius[odd] * torch.sin(angle[even][:n])
        p[odd, 1::2] = radius[odd] * torch.cos(angle[even][:n])
        return external(q, mu, p, noise.uniform)


class UniformFromMomentumWord:
    """The uniform read from word x of the last momentum block instead of the extra block: the
    same word gave that block's Box-Muller radius, s^2 = -2 ln u, so u = exp(-(p_a^2 + p_b^2) / 2)
    for the block's first pair (coordinates 60, 61 at d = 64). u itself stays exactly uniform."""

    def __call__(self, q, mu, *, seed, transition):
        noise = KERNEL(q, mu, seed=seed, transition=transition)
        a = 4 * ((q.shape[1] - 1) // 4)
        p = noise.momentum
        u = torch.exp(-0.5 * (p[:, a].double() ** 2 + p[:, a + 1].double() ** 2)).to(noise.uniform.dtype)
        return external(q, mu, p, u)


class NoMetropolis:
    """Every proposal accepted."""

    def __call__(self, q, mu, *, seed, transition):
        noise = KERNEL(q, mu, seed=seed, transition=transition)
        return external(q, mu, noise.momentum, torch.zeros_like(noise.uniform))


@dataclass
class ReusedCounters:
    """Generator-seeded calls whose key advances only every other call: calls 2k and 2k+1 both run
    (seed_k, transition 0), so consecutive calls repeat their numbers."""
    calls: int = 0
    seed: int = 0

    def __call__(self, q, mu, *, generator):
        if self.calls % 2 == 0:
            self.seed = int(torch.randint(0, 2 ** 62, (1,), generator=generator,
                                          device=generator.device))
        self.calls += 1
        return KERNEL(q, mu, seed=self.seed, transition=0)


class StaleGenerator:
    """Draws torch's numbers from the generator but leaves its offset where it was: the next RNG
    op (the following call, or a user's torch.randn) replays them."""

    def __call__(self, q, mu, *, generator):
        state = generator.get_state()
        p = torch.randn(q.shape, generator=generator, device=q.device, dtype=q.dtype)
        u = torch.rand(q.shape[0], generator=generator, device=q.device)
        generator.set_state(state)
        return external(q, mu, p, u)


# ---- harness ---------------------------------------------------------------------------------

def _gen(device, seed):
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def noise_results(step, device, transitions=32, momentum_transitions=16) -> dict:
    """The suite's NOISE_CHECKS on ``step``'s fresh-start draws, by name."""
    mu = target_mean(DIM, device)
    draws = fresh_start_draws(step, mu, CHAINS, transitions, momentum_transitions, SEED,
                              _gen(device, 1))
    other = fresh_start_draws(step, mu, CHAINS, 4, 4, SEED + 1, _gen(device, 2)).momentum
    results = noise_checks(draws.momentum, other, draws.uniform, draws.accepted,
                           EXACT.acceptance, ALPHA)
    return {r.name: r for r in results}


def generator_results(step, mode, device, calls=8) -> dict:
    mu = target_mean(DIM, device)
    q = stationary_start(mu, CHAINS, _gen(device, 3))
    draws = generator_draws(step, q, mu, calls, _gen(device, 4))
    return {r.name.split("] ", 1)[1]: r for r in generator_checks(mode, draws, ALPHA)}


def lag1_result(step, device, transitions=128):
    mu = target_mean(DIM, device)
    run = run_chains(step, stationary_start(mu, CHAINS, _gen(device, 5)), mu, transitions, SEED)
    return ck.across_chain_t("stationarity: lag-1 autocorrelation", run.lag1_per_chain,
                             EXACT.lag1_autocorrelation, ALPHA)


def caught(result) -> None:
    """Assert the check fired, and show by how much."""
    print(f"\n  {result.name}: statistic {result.statistic:.4g} vs {result.threshold} "
          f"(p={result.p_value:.2g}) -> {'PASS' if result.passed else 'FAIL'}; {result.detail}")
    assert not result.passed, f"defect not caught by {result.name}: {result}"


def missed(result) -> None:
    """Assert the check did not fire (a documented blind spot, or a control)."""
    print(f"\n  {result.name}: statistic {result.statistic:.4g} vs {result.threshold} -> "
          f"{'PASS' if result.passed else 'FAIL'}")
    assert result.passed, result


# ---- controls: the harnesses themselves pass -------------------------------------------------

@pytest.mark.parametrize("step", [ScaledMomentum(1.0), ReferenceIntegrator()],
                         ids=["external-noise", "reference-integrator"])
def test_harness_without_defect_passes(step, device):
    for result in noise_results(step, device).values():
        missed(result)
    missed(lag1_result(step, device, transitions=64))


def test_generator_harness_without_defect_passes(device):
    for name, result in generator_results(KernelGeneratorStep("philox", EPS, L), "philox",
                                          device).items():
        missed(result)


# ---- planted defects -------------------------------------------------------------------------

def test_momentum_variance_off_by_5_percent(device):
    results = noise_results(ScaledMomentum(1.05), device)
    caught(results["momentum: variance"])  # z ~ +70 at 2.1M momenta
    caught(results["momentum ~ N(0,1): KS"])


def test_half_steps_missing(device):
    results = noise_results(ReferenceIntegrator(half_steps=False), device)
    caught(results["acceptance: rejections ~ Binomial"])
    caught(lag1_result(ReferenceIntegrator(half_steps=False), device, transitions=64))


def test_counters_reused_on_next_call(device):
    results = generator_results(ReusedCounters(), "philox", device)
    caught(results["indep: consecutive calls"])  # half the consecutive pairs identical: r ~ 0.5


def test_one_uniform_shared_by_all_chains(device):
    results = noise_results(SharedUniform(), device)
    caught(results["indep: uniform, chain b vs b+1"])  # r = 1
    caught(results["uniform ~ U(0,1): KS"])  # only T distinct values


def test_box_muller_partner_mixup(device):
    results = noise_results(BoxMullerPartnerMixup(), device)
    caught(results["indep: momentum, chain b vs b+1, Box-Muller partner j^1"])  # r ~ 0.5
    # The two outputs of one Box-Muller pair are independent N(0, 1), so the same-coordinate
    # neighbour correlation cannot see this mix-up; only the partner-coordinate check does.
    missed(results["indep: momentum, chain b vs b+1"])


def test_box_muller_shared_angle_word(device):
    results = noise_results(SharedAngleWord(), device)
    caught(results["indep: momentum, chain b vs b+1"])  # r = pi/8 ~ 0.39 over all pairs


def test_off_by_one_leapfrog_count(device):
    result = lag1_result(KernelStep(EPS, L + 1), device)
    caught(result)  # exact lag-1 0.4561 instead of 0.5422
    assert result.statistic < -50


def test_gradient_scaled_by_1_05(device):
    results = noise_results(ReferenceIntegrator(grad_scale=1.05), device)
    caught(results["acceptance: rejections ~ Binomial"])  # acceptance ~0.876


def test_uniform_from_a_momentum_word(device):
    results = noise_results(UniformFromMomentumWord(), device)
    caught(results["indep: momentum^2 vs uniform"])
    missed(results["uniform ~ U(0,1): KS"])  # u is still exactly uniform
    missed(results["indep: momentum vs uniform"])  # and uncorrelated with p itself


def test_no_metropolis_step(device):
    results = noise_results(NoMetropolis(), device)
    caught(results["acceptance: rejections ~ Binomial"])  # 0 rejections


def test_generator_offset_not_advanced(device):
    results = generator_results(StaleGenerator(), "torch", device)
    caught(results["indep: kernel vs next torch.randn"])  # r = 1
    # The torch.randn in between advances the generator, so the next call draws fresh numbers.
    missed(results["indep: consecutive calls"])
