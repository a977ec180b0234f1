"""Shared pieces of the unit tests: seeded inputs, RNG state access, and the near-tie rule.

Near ties. Given identical float32 trajectories, fused_hmc and the reference can still disagree on
`accepted` for a chain whose log(max(u, 1e-10)) lies within rounding of log_alpha, because each forms
log_alpha = H0 - H1 with its own summation order (the kernel sums per-coordinate energy differences,
torch's reductions sum the energies themselves). We judge every disagreement against log_alpha
computed in float64 (`reference_log_accept_ratio`) with this per-chain tolerance, u_q and u_u being
the unit roundoffs (eps_machine / 2) of q's and the uniform's dtype:

    tol = u_q * (2 d + 4 L + 8) * (H0 + H1)  +  4 u_u * (|log u| + 1)

- Summation: a sum of n terms in any order has error <= (n - 1) u sum|terms| (Higham, Thm 4.4).
  The reference sums d nonnegative terms per energy and subtracts: <= (d + 1) u_q (H0 + H1).
  The kernel sums d terms (x1-x0)(x1+x0) + (p1-p0)(p1+p0) with |terms| <= x0^2+x1^2+p0^2+p1^2, halved:
  <= (d + 1) u_q (H0 + H1). Together: (2 d + 2) u_q (H0 + H1).
- Trajectory: the float64 oracle integrates in float64, the implementations in q's dtype; each of the
  L + 1 leapfrog stages rounds x and p with relative error <= 2 u_q, moving the energy by
  <= 4 u_q (H0 + H1) / 2 per stage in the worst case: <= (4 L + 6) u_q (H0 + H1) over-covers it
  (and also covers the philox mode's fused-FMA leapfrog, which rounds fewer times).
- log u: torch.log (vectorised) and the kernel's logf/log are each within 1 ulp: 4 u_u |log u|.
This is a worst-case bound, so the fraction of chains it flags is itself bounded: log u has density
e^t <= 1, hence P(|log u - log_alpha| < tol) <= 2 tol, which `assert_accepted_agree` checks too, so
the tolerance cannot silently grow wide enough to hide a wrong decision.
"""
from __future__ import annotations

import torch

from fused_hmc import _build, ops
from fused_hmc.reference import reference_log_accept_ratio
from fused_hmc.sampling import chain_statistics


def seeded_generator(*key) -> torch.Generator:
    """A CPU generator seeded from `key` (stable across runs, distinct per key)."""
    seed = 0
    for part in map(str, key):
        for ch in part.encode():
            seed = (seed * 131 + ch) % (2**61 - 1)
    return torch.Generator().manual_seed(seed)


def randn(gen: torch.Generator, *shape, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """Normal draws made on the CPU (same numbers on every device), then moved to `device`."""
    return torch.randn(*shape, generator=gen, dtype=dtype).to(device)


def rand(gen: torch.Generator, *shape, dtype=torch.float32, device="cpu") -> torch.Tensor:
    return torch.rand(*shape, generator=gen, dtype=dtype).to(device)


def rng_state(device: torch.device) -> torch.Tensor:
    """The default generator's state for `device` (CPU or the CUDA device's own)."""
    if device.type == "cuda":
        return torch.cuda.get_rng_state(device)
    return torch.get_rng_state()


def energies(q, mu, momentum, step_size, num_leapfrog_steps):
    """(log_alpha, H0, H1) per chain in float64, H1 = H0 - log_alpha along the float64 trajectory."""
    log_alpha = reference_log_accept_ratio(q, mu, step_size, num_leapfrog_steps, momentum)
    x0 = q.double() - mu.double()
    h0 = 0.5 * (x0 ** 2).sum(-1) + 0.5 * (momentum.double() ** 2).sum(-1)
    return log_alpha, h0, h0 - log_alpha


def near_tie_tolerance(q, mu, momentum, uniform, step_size, num_leapfrog_steps):
    """Per-chain tolerance on |log u - log_alpha| (see the module docstring for the derivation)."""
    _, h0, h1 = energies(q, mu, momentum, step_size, num_leapfrog_steps)
    u_q = torch.finfo(q.dtype).eps / 2
    u_u = torch.finfo(uniform.dtype).eps / 2
    d, L = q.shape[1], num_leapfrog_steps
    log_u = torch.log(uniform.double().clamp(min=1e-10))
    return u_q * (2 * d + 4 * L + 8) * (h0 + h1) + 4 * u_u * (log_u.abs() + 1)


def assert_accepted_agree(accepted, accepted_ref, q, mu, momentum, uniform, step_size,
                          num_leapfrog_steps, max_mismatches=None):
    """Every disagreement is a near tie; near ties and disagreements are both few.

    Returns the boolean mask of chains whose decisions agree.
    """
    accepted, accepted_ref = accepted.cpu(), accepted_ref.cpu()
    q, mu, momentum, uniform = q.cpu(), mu.cpu(), momentum.cpu(), uniform.cpu()
    assert accepted.dtype == torch.bool and accepted.shape == accepted_ref.shape
    log_alpha, _, _ = energies(q, mu, momentum, step_size, num_leapfrog_steps)
    tol = near_tie_tolerance(q, mu, momentum, uniform, step_size, num_leapfrog_steps)
    gap = (torch.log(uniform.double().clamp(min=1e-10)) - log_alpha).abs()
    near_tie = gap <= tol
    mismatch = accepted != accepted_ref
    far = mismatch & ~near_tie
    assert not far.any(), (
        f"{int(far.sum())} accept decisions differ away from a tie: chains "
        f"{far.nonzero().flatten()[:10].tolist()}, gaps {gap[far][:10].tolist()}, "
        f"tolerances {tol[far][:10].tolist()}")
    batch = accepted.shape[0]
    # P(near tie) <= 2 tol per chain; allow twice the expectation bound plus a few.
    expected_bound = float(2 * tol.clamp(max=0.5).sum())
    assert int(near_tie.sum()) <= 2 * expected_bound + 5, (
        f"{int(near_tie.sum())} near ties among {batch} chains (bound {2 * expected_bound + 5:.1f}):"
        " the tie tolerance is too wide to be a meaningful test")
    if max_mismatches is None:
        max_mismatches = 2 + batch // 512
    assert int(mismatch.sum()) <= max_mismatches, (
        f"{int(mismatch.sum())} near-tie decision flips among {batch} chains "
        f"(allowed {max_mismatches})")
    return ~mismatch


def assert_bitwise_where_agree(q_new, q_ref, agree):
    """q_new equals q_ref bit for bit (torch.equal) on the chains whose decisions agree."""
    agree = agree.to(q_new.device)
    assert q_new.dtype == q_ref.dtype and q_new.shape == q_ref.shape
    a, b = q_new[agree], q_ref.to(q_new.device)[agree]
    if not torch.equal(a, b):
        diff = (a != b) & ~(torch.isnan(a) & torch.isnan(b))
        rows = diff.any(-1).nonzero().flatten()[:5].tolist()
        raise AssertionError(f"q_new differs from the reference in {int(diff.sum())} elements "
                             f"(first rows {rows}); max |diff| {(a - b).abs().max().item():.3e}")


def as_int64(word: int) -> int:
    """An unsigned 64-bit value as the int64 with the same bits (schema `int` arguments)."""
    word &= (1 << 64) - 1
    return word - (1 << 64) if word >= (1 << 63) else word


def cuda_cpu_tolerance(dtype) -> dict:
    """How close the chain kernels' CUDA and CPU runs agree: their momenta differ in the last bits
    (Box-Muller's sincos intrinsics on the device, libm on the host; test_cuda_chain_kernels.py's
    docstring), so states and statistics agree within rtol 1e-9 (float64) / 2e-4 (float32)."""
    return dict(rtol=1e-9, atol=1e-9) if dtype == torch.float64 else dict(rtol=2e-4, atol=2e-4)


# The leading arguments the sample and warmup ops share, in their schemas' order.
_CHAIN_ARGUMENTS = ("q", "target", "target_tensors", "target_scalars", "step_size", "inv_mass",
                    "jitter", "num_leapfrog_steps", "seed", "chain_offset", "first_transition",
                    "num_transitions")


def run_op(*args, **kwargs) -> dict[str, torch.Tensor]:
    """The warmup op when `dual_averaging` is given, else the sample op: the shared leading
    arguments by position, the others by name; a chain statistic may be given by name
    (``accept_count=...``: that tensor takes its place in the op's `statistics` list, fresh
    zeros the others'), and arguments given as None that the op lacks are dropped. Returns the
    statistics by name."""
    arguments = dict(zip(_CHAIN_ARGUMENTS, args), **kwargs)
    q = arguments["q"]
    statistics = chain_statistics.zeros(q.shape[0], q.device)
    for name in chain_statistics.NAMES:
        given = arguments.pop(name, None)
        if given is not None:
            statistics[name] = given
    op = ops.warmup if arguments.get("dual_averaging") is not None else ops.sample
    _build.load_extension()
    known = ops.argument_names(getattr(torch.ops.fused_hmc, op.__name__).default)
    arguments = {k: v for k, v in arguments.items() if v is not None or k in known}
    op(statistics=chain_statistics.as_list(statistics), **arguments)
    return statistics


def run_op_state(chains: int, dim: int, mode: str, device, mass_dtype=torch.float64,
                 varied_steps: bool = False) -> dict:
    """The ops' in-place tensors besides q for `mode` ("sampling", "per_chain" or "pooled"
    warm-up): step size 0.15 and a unit inverse mass per adaptation group (one group, except one
    for each chain per chain), and zeroed gradient counts, moments or adaptation state.
    `varied_steps` (sampling): a step size of each chain's own, 0.1 to 0.2, so that chains sharing
    a transition's trajectory jitter still run different numbers of steps."""
    f64 = dict(dtype=torch.float64, device=device)
    groups = chains if mode == "per_chain" or varied_steps else 1
    steps = (0.1 + 0.1 * torch.rand(groups, generator=torch.Generator().manual_seed(groups),
                                    dtype=torch.float64)).to(device) if varied_steps else \
        torch.full((groups,), 0.15, **f64)
    state = dict(step_size=steps,
                 inv_mass=torch.ones(groups, dim, dtype=mass_dtype, device=device),
                 gradient_evaluations=torch.zeros(chains, dtype=torch.int64, device=device))
    if mode == "sampling":
        state.update(mean=torch.zeros(chains, dim, **f64), m2=torch.zeros(chains, dim, **f64),
                     accept_count=torch.zeros(chains, dtype=torch.int64, device=device),
                     accept_prob_sum=torch.zeros(chains, **f64))
    else:
        state.update(dual_averaging=torch.zeros(groups, 3, **f64),
                     window_mean=torch.zeros(chains, dim, **f64),
                     window_m2=torch.zeros(chains, dim, **f64))
    return state


def run_cli_sample(capsys, *argv) -> tuple[int, str, str]:
    """`fused-hmc sample ARGV` in this process: (exit code, stdout, stderr)."""
    from fused_hmc import cli

    code = cli.main(["sample", *argv])
    out, err = capsys.readouterr()
    return code, out, err
