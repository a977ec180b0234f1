"""The Gaussian target family: pure-torch targets, and the chain ops' transition against its
reference.

The sample and warmup ops draw their noise from the philox stream; the tests recover that very
noise (momentum and uniform through the transition op's trace, the jitter word through the
test-only philox4x32 op) and feed it to the pure-torch reference ``reference_target_step``.
"""
from __future__ import annotations

import math

import pytest
import torch

from fused_hmc import ops, philox_numpy
from fused_hmc.reference import reference_log_accept_ratio, reference_target_step
from fused_hmc.targets import MAX_DENSE_DIM, DenseGaussian, DiagonalGaussian, StandardGaussian

from ._helpers import as_int64, randn, run_op, seeded_generator

DTYPES = [torch.float32, torch.float64]
KINDS = ["standard", "diagonal", "dense"]


def make_target(kind: str, dim: int, key="target"):
    gen = seeded_generator("targets", kind, dim, key)
    mu = torch.randn(dim, generator=gen, dtype=torch.float64)
    if kind == "standard":
        return StandardGaussian(mu)
    if kind == "diagonal":
        return DiagonalGaussian(mu, 0.5 + 1.5 * torch.rand(dim, generator=gen, dtype=torch.float64))
    basis, _ = torch.linalg.qr(torch.randn(dim, dim, generator=gen, dtype=torch.float64))
    eigen = torch.logspace(-0.5, 0.5, dim, dtype=torch.float64)  # condition number 10
    return DenseGaussian(mu, basis @ torch.diag(eigen) @ basis.T)


STATISTICS = ("mean", "m2", "accept_count", "accept_prob_sum")


def stat_buffers(chains, dim, device="cpu"):
    """The sampling statistics (mean, m2, accept_count, accept_prob_sum), zeroed."""
    f64 = dict(dtype=torch.float64, device=device)
    return (torch.zeros(chains, dim, **f64), torch.zeros(chains, dim, **f64),
            torch.zeros(chains, dtype=torch.int64, device=device), torch.zeros(chains, **f64))


def run_sample_op(q, target, step_size, inv_mass, jitter, num_steps, seed, first, n, samples,
                  chain_offset=0, trajectory_length=0.0):
    """The sample op on q in place; returns (mean, m2, accept_count, accept_prob_sum)."""
    buffers = stat_buffers(*q.shape, device=q.device)
    run_op(q, target.op_target, target.op_tensors(q.dtype, q.device), target.op_scalars(),
            step_size, inv_mass, jitter, num_steps, seed, chain_offset, first, n, samples=samples,
            trajectory_length=trajectory_length, **dict(zip(STATISTICS, buffers)))
    return buffers


def transition_loop(q0, mu, step_size, num_steps, seed, chain_offset, first, n):
    """Transitions first .. first + n - 1 of N(mu, I) through the transition op (noise="philox",
    seed=seed, transition=t), an independent implementation of the chain ops' standard-target path:
    chain b is stream chain chain_offset + b (the chains below it are computed and dropped; a
    chain's noise does not depend on the batch). Returns (q, draws [B, n, d], accept_count [B],
    accept_prob_sum [B], the latter min(1, exp(log_alpha)) of the float64 reference)."""
    q = torch.cat([q0.new_zeros(chain_offset, q0.shape[1]), q0])
    draws, count, prob = [], torch.zeros(q0.shape[0], dtype=torch.int64, device=q0.device), 0
    for t in range(first, first + n):
        q_new, accepted, momentum, _ = ops.transition(q, mu, step_size, num_steps, "philox",
                                                      seed=seed, transition=t, trace=True)
        log_alpha = reference_log_accept_ratio(q, mu, step_size, num_steps, momentum)
        prob = prob + log_alpha.clamp(max=0).exp()[chain_offset:]
        count += accepted[chain_offset:]
        q = q_new
        draws.append(q[chain_offset:])
    return q[chain_offset:], torch.stack(draws, 1), count, prob


def jitter_uniform(chains: int, dim: int, dtype, seed: int, transition: int) -> torch.Tensor:
    """Word y of the transition's last philox block as torch_uniform_from_word makes it: float32
    fma(w, 2^-32, 2^-33) (exact product, so a plain float32 add), with 1.0 mapped to 0.0."""
    per_block = 4 if dtype == torch.float32 else 2
    blocks_per_transition = -(-dim // per_block) + 1
    block = transition * blocks_per_transition + blocks_per_transition - 1
    chain = torch.arange(chains, dtype=torch.int64)
    counters = torch.stack([torch.full_like(chain, block), torch.zeros_like(chain), chain,
                            torch.zeros_like(chain)], dim=1).to(torch.int32)
    key = as_int64(philox_numpy.philox_key_from_seed(seed))
    word = ops.philox4x32(counters, key)[:, 1].to(torch.int64) & 0xFFFFFFFF
    u = word.to(torch.float32) * torch.tensor(2.0**-32, dtype=torch.float32) + \
        torch.tensor(2.0**-33, dtype=torch.float32)
    return torch.where(u == 1.0, torch.zeros_like(u), u)


def test_targets_log_prob_grad_and_moments():
    for kind in KINDS:
        target = make_target(kind, 5)
        q = torch.randn(4, 5, dtype=torch.float64, generator=seeded_generator("lp", kind),
                        requires_grad=True)
        lp = target.log_prob(q)
        (auto,) = torch.autograd.grad(lp.sum(), q)
        torch.testing.assert_close(target.grad(q.detach()), auto, rtol=1e-12, atol=1e-12)
        # normalised: the log density matches torch.distributions
        ref = torch.distributions.MultivariateNormal(target.mean, target.covariance)
        torch.testing.assert_close(lp.detach(), ref.log_prob(q.detach()), rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(target.variance, torch.diagonal(target.covariance))


def test_target_validation():
    with pytest.raises(ValueError, match="mu must have shape"):
        StandardGaussian(torch.zeros(2, 2))
    with pytest.raises(ValueError, match="scale must have shape"):
        DiagonalGaussian(torch.zeros(3), torch.ones(2))
    with pytest.raises(ValueError, match="scale must be > 0"):
        DiagonalGaussian(torch.zeros(2), torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="non-finite"):
        DiagonalGaussian(torch.zeros(2), torch.tensor([1.0, math.inf]))
    with pytest.raises(ValueError, match="symmetric"):
        DenseGaussian(torch.zeros(2), torch.tensor([[2.0, 1.0], [0.0, 2.0]]))
    with pytest.raises(ValueError, match="positive definite"):
        DenseGaussian(torch.zeros(2), torch.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match=r"shape \[3, 3\]"):
        DenseGaussian(torch.zeros(3), torch.eye(2))
    with pytest.raises(ValueError, match=f"dim <= {MAX_DENSE_DIM}"):
        DenseGaussian(torch.zeros(MAX_DENSE_DIM + 1), torch.eye(MAX_DENSE_DIM + 1))
    # rounding-level asymmetry (an inverted covariance) is symmetrised away, exactly
    cov = make_target("dense", 6).covariance
    target = DenseGaussian.from_covariance(torch.zeros(6), cov)
    assert torch.equal(target.precision, target.precision.T)
    torch.testing.assert_close(target.covariance, cov)


def test_dense_limit_in_the_op():
    d = MAX_DENSE_DIM + 1
    q = torch.zeros(1, d)
    with pytest.raises(ValueError, match=f"supports dim <= {MAX_DENSE_DIM}"):
        run_op(q, "dense", [torch.zeros(d), torch.eye(d)], [], torch.ones(1, dtype=torch.float64),
                torch.ones(1, d), 0.0, 1, 0, 0, 0, 1, **dict(zip(STATISTICS, stat_buffers(1, d))))


def test_dense_at_the_limit_runs():
    """d = 256 (the supported maximum) runs, and a diagonal matrix written densely gives the
    diagonal target's bits."""
    d, chains = MAX_DENSE_DIM, 2
    target = DiagonalGaussian(torch.zeros(d), torch.linspace(0.5, 2.0, d))
    dense = DenseGaussian(torch.zeros(d), torch.diag(target.precision))
    q0 = randn(seeded_generator("dense-limit"), chains, d)
    step, inv_mass = torch.full((1,), 0.2, dtype=torch.float64), torch.ones(1, d)
    outs = []
    for t in (target, dense):
        q = q0.clone()
        outs.append((q, run_sample_op(q, t, step, inv_mass, 0.1, 3, 5, 0, 2, q.new_empty(0))))
    assert torch.equal(outs[0][0], outs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(outs[0][1], outs[1][1]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_standard_unit_mass_equals_the_transition_op(dtype):
    """The sample op on N(mu, I), shared step size, unit inverse mass, no jitter, is the transition
    op's philox transitions bit for bit (q, kept draws, acceptance counts; the moments and
    acceptance probabilities to rounding, the latter against the float64 reference's); and every
    target kind written as N(mu, I) (identity precision), shared (G = 1) or per chain (G = B),
    gives exactly those bits (q, samples, Welford, acceptance)."""
    chains, dim, offset, first, n = 9, 7, 3, 2, 10
    gen = seeded_generator("tuned-vs-plain", dtype)
    q0 = randn(gen, chains, dim, dtype=dtype)
    mu = randn(gen, dim, dtype=dtype)
    q_loop, draws, count, prob = transition_loop(q0, mu, 0.7, 4, 55, offset, first, n)
    q_plain, s_plain = q0.clone(), torch.empty(chains, n, dim, dtype=dtype)
    b_plain = run_sample_op(q_plain, StandardGaussian(mu),
                            torch.full((1,), 0.7, dtype=torch.float64),
                            torch.ones(1, dim, dtype=dtype), 0.0, 4, 55, first, n, s_plain,
                            chain_offset=offset)
    assert torch.equal(q_plain, q_loop) and torch.equal(s_plain, draws)
    mean, m2, accept_count, accept_prob = b_plain
    assert torch.equal(accept_count, count)
    assert 0 < int(count.sum()) < chains * n  # both decisions occur
    torch.testing.assert_close(mean, draws.double().mean(1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(m2, draws.double().var(1) * (n - 1), rtol=1e-10, atol=1e-10)
    tol = 1e-10 if dtype == torch.float64 else 1e-4  # the float32 trajectory's energy rounding
    torch.testing.assert_close(accept_prob, prob, rtol=tol, atol=tol)
    for target in (StandardGaussian(mu), DiagonalGaussian(mu, torch.ones(dim)),
                   DenseGaussian(mu, torch.eye(dim))):
        for groups in (1, chains):
            q, samples = q0.clone(), torch.empty(chains, n, dim, dtype=dtype)
            buffers = run_sample_op(q, target, torch.full((groups,), 0.7, dtype=torch.float64),
                                    torch.ones(groups, dim, dtype=dtype), 0.0, 4, 55, first, n,
                                    samples, chain_offset=offset)
            assert torch.equal(q, q_plain) and torch.equal(samples, s_plain)
            assert all(torch.equal(a, b) for a, b in zip(buffers, b_plain))
        # an empty inv_mass (the unit mass compiled away) gives the same bits
        q, samples = q0.clone(), torch.empty(chains, n, dim, dtype=dtype)
        buffers = run_sample_op(q, target, torch.full((1,), 0.7, dtype=torch.float64),
                                torch.empty(0, dtype=dtype), 0.0, 4, 55, first, n, samples,
                                chain_offset=offset)
        assert torch.equal(q, q_plain) and torch.equal(samples, s_plain)
        assert all(torch.equal(a, b) for a, b in zip(buffers, b_plain))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_transition_matches_reference(kind, dtype, device):
    """One transition of the sample op (per-chain step sizes and inverse masses, jitter 0.15)
    against reference_target_step fed the same momentum, uniform and jittered step size (the
    momentum and uniform traced by the transition op on the same device, whose normals are that
    build's Box-Muller).

    The reference runs in float64. Decisions must agree except at near ties |log u - log_alpha|
    below the rounding of the kernel's dtype (1e-9 in float64; 2e-4 in float32, about 2^-23 times
    the chain energies here, which are below 100); proposals agree to the dtype's rounding.
    """
    chains, dim, steps, seed, t = 256, 7, 5, 2**63 + 12345, 3
    target = make_target(kind, dim)
    gen = seeded_generator("parity", kind, dtype)
    cov_chol = torch.linalg.cholesky(target.covariance)
    q0 = (target.mean + torch.randn(chains, dim, generator=gen, dtype=torch.float64) @ cov_chol.T
          ).to(dtype)
    eps = 0.3 + 0.5 * torch.rand(chains, generator=gen, dtype=torch.float64)
    inv_mass = (0.5 + torch.rand(chains, dim, generator=gen, dtype=torch.float64)).to(dtype)
    jitter = 0.15

    q = q0.to(device, copy=True)
    samples = torch.empty(chains, 1, dim, dtype=dtype, device=device)
    _, _, accept_count, accept_prob = [
        b.cpu() for b in run_sample_op(q, target, eps.to(device), inv_mass.to(device), jitter,
                                       steps, as_int64(seed), t, 1, samples)]
    q, accepted = q.cpu(), accept_count.bool()

    _, _, normal, uniform = [
        x.cpu() for x in ops.transition(q0.to(device), torch.zeros(dim, dtype=dtype,
                                        device=device), 0.1, 1, "philox", None,
                                        as_int64(seed), t, trace=True)]
    v = jitter_uniform(chains, dim, dtype, seed, t).double()
    eps_t = eps * (1 + jitter * (2 * v - 1))
    q_ref, acc_ref, log_alpha = reference_target_step(
        q0.double(), target.log_prob, target.grad, eps_t, steps, inv_mass.double(),
        normal.double(), uniform)

    tie = 1e-9 if dtype == torch.float64 else 2e-4
    gap = (torch.log(uniform.double().clamp(min=1e-10)) - log_alpha).abs()
    mismatch = accepted != acc_ref
    assert not (mismatch & (gap > tie)).any(), gap[mismatch]
    assert int(mismatch.sum()) <= 2
    assert 0 < int(accepted.sum()) < chains  # both decisions occur
    rtol, atol = (1e-11, 1e-11) if dtype == torch.float64 else (2e-5, 2e-5)
    both = accepted & acc_ref
    torch.testing.assert_close(q[both].double(), q_ref[both], rtol=rtol, atol=atol)
    assert torch.equal(q[~accepted], q0[~accepted])
    torch.testing.assert_close(accept_prob, log_alpha.clamp(max=0).exp(), rtol=10 * rtol,
                               atol=10 * atol)


def test_jitter_zero_is_no_jitter_and_jitter_changes_the_path():
    target = make_target("diagonal", 5)
    q0 = randn(seeded_generator("jit"), 16, 5, dtype=torch.float64)
    step, inv_mass = torch.full((1,), 0.5, dtype=torch.float64), torch.ones(1, 5,
                                                                             dtype=torch.float64)
    runs = {}
    for jitter in (0.0, 0.3):
        q = q0.clone()
        run_sample_op(q, target, step, inv_mass, jitter, 3, 9, 0, 6, q.new_empty(0))
        runs[jitter] = q
    plain = q0.clone()
    run_op(plain, target.op_target, target.op_tensors(torch.float64, "cpu"), [], step, inv_mass,
            0.0, 3, 9, 0, 0, 6, **dict(zip(STATISTICS, stat_buffers(16, 5))))
    assert torch.equal(runs[0.0], plain)
    assert not torch.equal(runs[0.3], plain)


def test_op_checks_the_sample_arguments():
    q = torch.zeros(3, 4)
    mu = torch.zeros(4)
    one = torch.ones(1, dtype=torch.float64)

    def call(target="diagonal", tensors=None, step=one, inv_mass=torch.ones(1, 4), jitter=0.0):
        tensors = [mu, torch.ones(4)] if tensors is None else tensors
        run_op(q, target, tensors, [], step, inv_mass, jitter, 2, 0, 0, 0, 1,
                **dict(zip(STATISTICS, stat_buffers(3, 4))))

    call()
    with pytest.raises(ValueError, match='unknown target "nope"; the known targets are .*"dense"'):
        call(target="nope")
    with pytest.raises(ValueError, match='target "standard" takes 1 target_tensors, got 2'):
        call(target="standard")
    with pytest.raises(ValueError, match=r"precision of the diagonal target must have shape \[4\]"):
        call(tensors=[mu, torch.ones(3)])
    with pytest.raises(TypeError, match="precision must have q's dtype"):
        call(tensors=[mu, torch.ones(4, dtype=torch.float64)])
    with pytest.raises(ValueError, match=r"step_size must have shape \[1\] \(shared\) or \[3\]"):
        call(step=torch.ones(2, dtype=torch.float64))
    with pytest.raises(TypeError, match="step_size must be Double"):
        call(step=torch.ones(1))
    with pytest.raises(ValueError, match=r"inv_mass must have shape \[1, 4\]"):
        call(inv_mass=torch.ones(3, 4))
    with pytest.raises(ValueError, match="jitter must be in"):
        call(jitter=1.0)
