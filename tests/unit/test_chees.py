"""ChEES through ``sample`` / ``Sampler`` (adapt_trajectory_length=True) and fixed trajectory
lengths (trajectory_length=): reproducibility and chunking bit for bit, the ChEES state's
contract, checkpoints and saved results, the step counts behind the gradient evaluations, the
report, and bad input. The statistical properties (moments, the adapted length against the
criterion's peak, posteriordb) are in tests/statistical/test_chees.py."""
from __future__ import annotations

import io
import math

import pytest
import torch

import fused_hmc
from fused_hmc import cli
from fused_hmc.sampling import far_starts
from fused_hmc.sampling.warmup import restart_chees_optimizer, slow_window_ends
from fused_hmc.targets import DiagonalGaussian

from .test_sampler import _run, assert_results_equal
from .test_sampler_ctrl_c import _sigint_after_call, sigint_handler  # noqa: F401 - a fixture

TARGET = DiagonalGaussian(torch.linspace(-1, 1, 4), torch.logspace(-1, 1, 4))
CHEES = dict(num_warmup=60, adapt_trajectory_length=True, jitter=0.1, target=TARGET,
             step_size=0.05, num_leapfrog_steps=4)


def _q0(chains=8, dim=4, dtype=torch.float64, key=0):
    return torch.randn(chains, dim, generator=torch.Generator().manual_seed(key), dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_chees_runs_are_reproducible_and_chunking_changes_no_bit(device, dtype):
    """The same seed gives the same bits; so does any split of the warm-up and sampling into op
    calls (the ChEES state persists across the warm-up's calls in a tensor on the device), and a
    Sampler run in two parts."""
    q0 = _q0(dtype=dtype).to(device)
    one_call = _run(q0, 20, chunk_size=60, **CHEES)  # the warm-up in one call, sampling in one
    assert_results_equal(_run(q0, 20, chunk_size=60, **CHEES), one_call)
    assert_results_equal(_run(q0, 20, chunk_size=7, **CHEES), one_call)
    assert_results_equal(_run(q0, 20, **CHEES), one_call)  # chunks grown by the planner
    sampler = fused_hmc.Sampler(q0, seed=1234, progress=False, chunk_size=13, **CHEES)
    sampler.run(5)
    assert_results_equal(sampler.run(15), one_call)
    assert one_call.trajectory_length is not None and one_call.interrupted is False


def test_the_chees_state_follows_the_op_contract(device):
    """Warm-up starts from [T0, 0, 0, 0, 1, 1, 0, 0] with T0 = num_leapfrog_steps * step_size;
    after W warm-up transitions (every gradient finite here) the op has made an Adam update
    after each pooled one (the first F = 9 run per chain: far_starts.py), and Adam restarted
    after the last slow window's end e (restart_chees_optimizer): k = W - 1 - e updates since,
    beta1^k and beta2^k formed by repeated float64 products as Python forms them. T = chees[0]
    lies in [eps, max_leapfrog_steps eps] at the final step size; sampling runs with it (the
    result's trajectory_length)."""
    sampler = fused_hmc.Sampler(_q0().to(device), seed=5, progress=False, **CHEES)
    state = sampler._chains.state
    assert state.chees.dtype == torch.float64 and state.chees.device == sampler.device
    expected = torch.tensor([4 * 0.05, 0, 0, 0, 1, 1, 0, 0], dtype=torch.float64)
    assert torch.equal(state.chees.cpu(), expected)
    res = sampler.run(10)
    chees = sampler._chains.state.chees.cpu()
    beta1, beta2 = 1.0, 1.0
    assert far_starts.first_phase_length(res.warmup) == 9
    ends = slow_window_ends(res.warmup)
    since = 60 - 1 - ends[-1]
    assert ends[0] > 9 and since == 25
    for _ in range(since):
        beta1, beta2 = beta1 * 0.9, beta2 * 0.999
    assert (chees[6].item(), chees[4].item(), chees[5].item()) == (since, beta1, beta2)
    eps = res.step_size[0].item()
    assert bool((res.step_size == eps).all())  # pooled: one step size
    assert eps <= res.trajectory_length <= 1000 * eps and res.trajectory_length == chees[0].item()
    assert sampler._chains.state.dual_averaging is None  # the rest of the warm-up state is spent
    assert res.warmup.pooled and res.warmup.target_accept == 0.651
    assert res.max_leapfrog_steps == 1000


def test_restarting_chees_starts_adam_afresh_from_the_average():
    """At a slow window's end: T = exp(mean log T) (not the clipped T of the transition that ended
    the window), Adam's moments 0, its bias powers 1 and the clock 0; the unused slot untouched.
    Before any update (k = 0) T stays the T0 given. Either is floored at one step."""
    chees = torch.tensor([0.5, math.log(2.0), 0.3, 0.04, 0.9 ** 7, 0.999 ** 7, 7.0, 0.0],
                         dtype=torch.float64)
    restart_chees_optimizer(chees, torch.tensor([0.3], dtype=torch.float64))
    assert chees.tolist() == [2.0, math.log(2.0), 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    fresh = torch.tensor([1.5, 0, 0, 0, 1, 1, 0, 0], dtype=torch.float64)
    restart_chees_optimizer(fresh, torch.tensor([0.3], dtype=torch.float64))
    assert fresh.tolist() == [1.5, 0, 0, 0, 1, 1, 0, 0]
    # Never below one step of the chains' median step size (the window's last, not the restarted
    # dual averaging's): T0 or an average below it would run one step all the same.
    for state in (chees, fresh):
        restart_chees_optimizer(state, torch.tensor([0.5, 2.5, 3.0], dtype=torch.float64))
        assert state[0].item() == 2.5


def test_a_chees_checkpoint_resumes_bit_for_bit(sigint_handler, monkeypatch,  # noqa: F811
                                                tmp_path):
    """Ctrl-C in the warm-up and again in sampling writes checkpoints (the ChEES state and the
    step counts in them) from which new samplers finish with the uninterrupted result."""
    q0, ck = _q0(), tmp_path / "run.ckpt"
    run = dict(CHEES, chunk_size=10)
    whole = _run(q0, 20, **run)
    # The first chunk of the warm-up is two op calls: the per-chain first phase (9 transitions,
    # fused_hmc.sampling.far_starts) and the pooled warm-up's first.
    for mode, call, done in (("warmup", 3, 20), ("sampling", 1, 70)):
        _sigint_after_call(monkeypatch, mode, call=call)
        res = _run(q0, 20, checkpoint=ck, checkpoint_every=3600, **run)
        assert res.interrupted and res.next_transition == done
        monkeypatch.undo()
        sampler = fused_hmc.Sampler.from_checkpoint(ck)
        assert_results_equal(sampler.result(), res)
        assert_results_equal(sampler.run(), whole)


def test_saved_results_keep_the_trajectory_fields(tmp_path):
    res = _run(_q0(), 12, **CHEES)
    res.save(tmp_path / "res.zarr")
    back = fused_hmc.load(tmp_path / "res.zarr")
    assert_results_equal(back, res)
    assert back.warmup.adapt_trajectory_length and back.trajectory_length == res.trajectory_length


def test_a_length_below_one_step_or_above_the_cap_is_that_many_fixed_steps(device):
    """T < eps gives ceil(w T / eps) <= 1: every transition one leapfrog step, the very draws of
    num_leapfrog_steps=1 (the jitter w is a word of its own in the stream, so nothing else
    moves); T above max_leapfrog_steps eps runs the cap, the draws of num_leapfrog_steps=3. The
    gradient evaluations are L + 1 per transition and chain, counted by the op."""
    q0, common = _q0().to(device), dict(step_size=0.3, target=TARGET)
    for steps, length in ((1, 0.2), (3, 1e6)):
        fixed = _run(q0, 30, num_leapfrog_steps=steps, **common)
        timed = _run(q0, 30, trajectory_length=length, max_leapfrog_steps=3, **common)
        assert torch.equal(timed.samples, fixed.samples) and timed.trajectory_length == length
        assert timed.sampling_gradient_evaluations == (steps + 1) * 8 * 30
        assert fixed.sampling_gradient_evaluations == (steps + 1) * 8 * 30
        assert fixed.trajectory_length is None and fixed.warmup_gradient_evaluations == 0


def test_the_jittered_step_counts_are_uniform_and_shared_by_the_chains():
    """T = 8 eps, no step jitter: L = max(1, ceil(8 w)), w on [0, 1) (float32 words on the 2^-24
    grid, which 8 divides), so a uniform w makes L uniform on 1..8, mean 4.5. Every chain shares
    a transition's w, so every chain runs the same steps. The w of n consecutive transitions are a
    rotated van der Corput sequence: star discrepancy D <= (log2(n) / 3 + 1) / n unrotated, and
    the rotation splits an interval in at most two, so the fraction of w above each j / 8 is
    within 4 D of 1 - j / 8, and mean L = 1 + sum_j=1..7 P(w > j / 8) within 28 D = 0.27 of 4.5
    at n = 400 (asserted: 0.27 rounded up to 0.3; iid uniform w would give 0.61 at z = 5.33,
    two-sided 1e-7). A w fixed across transitions puts every count at one value (1 or 8 for a w
    off (1/8, 7/8]: 3.5 off, else still >= 0.5 off); a w drawn per chain gives chains different
    counts."""
    chains, n = 16, 400
    res = _run(_q0(chains=chains), n, step_size=0.25, trajectory_length=2.0, target=TARGET,
               keep_samples=False)
    per_chain = res.chain_statistics["gradient_evaluations"]
    assert len(set(per_chain.tolist())) == 1, per_chain
    mean_steps = res.sampling_gradient_evaluations / (chains * n) - 1
    assert abs(mean_steps - 4.5) <= 28 * (math.log2(n) / 3 + 1) / n + 0.03, mean_steps


def test_summary_and_cli_report_the_trajectory_and_its_cost(capsys):
    res = _run(_q0(), 12, **CHEES)
    out = io.StringIO()
    res.summary(file=out)
    text = out.getvalue()
    assert f"trajectory length {res.trajectory_length:.4g} (adapted by ChEES)" in text, text
    assert (f"gradient evaluations {res.warmup_gradient_evaluations:,} warm-up + "
            f"{res.sampling_gradient_evaluations:,} sampling") in text, text
    code = cli.main(["sample", "--chains", "16", "--dim", "4", "--samples", "20", "--warmup", "60",
                     "--device", "cpu", "--no-progress", "--adapt-trajectory-length",
                     "--max-leapfrog-steps", "50"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "pooled adaptation toward harmonic mean acceptance 0.651" in out, out
    assert "ChEES-adapted length T =" in out and "at most 50" in out, out
    assert "gradients" in out and "in warm-up" in out, out


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(num_warmup=0), ValueError, "num_warmup > 0"),
    (dict(adapt_trajectory_length="yes"), TypeError, "adapt_trajectory_length must be"),
    (dict(max_leapfrog_steps=0), ValueError, "max_leapfrog_steps must be >= 1"),
    (dict(max_leapfrog_steps=2.5), TypeError, "max_leapfrog_steps must be an integer"),
    (dict(num_leapfrog_steps=20, max_leapfrog_steps=10), ValueError,
     "num_leapfrog_steps = 20 .* exceeds max_leapfrog_steps = 10"),
    (dict(trajectory_length=1.0), ValueError, "pass one or the other"),
    (dict(step_size=torch.full((8,), 0.1)), ValueError,
     "adapt_trajectory_length=True .* pass a scalar step_size"),
    (dict(inverse_mass=torch.ones(8, 4)), ValueError,
     "adapt_trajectory_length=True .* inverse_mass of shape"),
])
def test_bad_chees_input_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        _run(_q0(), 4, **(CHEES | kwargs))


def test_per_chain_chees_adapts_each_chains_step_size_beside_one_length():
    """pooled=False: every chain its own step size and inverse mass, one T for all (reported as
    the result's trajectory_length), reproducible and unchanged by the chunking; a per-chain
    step_size and inverse_mass are accepted as starts."""
    q0 = _q0(chains=9)
    run = CHEES | dict(pooled=False)
    one_call = _run(q0, 20, chunk_size=80, **run)
    assert_results_equal(_run(q0, 20, chunk_size=7, **run), one_call)
    assert one_call.step_size.shape == (9,) and len(set(one_call.step_size.tolist())) == 9
    assert one_call.inverse_mass.shape == (9, 4)
    eps = one_call.step_size.median().item()
    assert 0.5 * eps < one_call.trajectory_length <= 1000 * one_call.step_size.max().item()
    starts = _run(q0, 5, **(run | dict(step_size=torch.full((9,), 0.05),
                                       inverse_mass=torch.ones(9, 4))))
    assert starts.trajectory_length is not None


@pytest.mark.cuda
def test_per_chain_chees_is_refused_on_cuda():
    """The CUDA kernels run ChEES inside the pooled warm-up only (over ranks:
    test_distributed.py)."""
    with pytest.raises(ValueError, match="pooled=False .* runs on the CPU only"):
        _run(_q0().cuda(), 4, **(CHEES | dict(pooled=False)))


@pytest.mark.parametrize("length", [0.0, -1.0, math.nan, math.inf, True, "1"])
def test_a_bad_trajectory_length_is_named(length):
    with pytest.raises(ValueError, match="trajectory_length must be a finite number > 0"):
        _run(_q0(), 4, trajectory_length=length)


def test_bad_chees_flags_are_named(capsys):
    for argv, flag in ((["--max-leapfrog-steps", "0"], "--max-leapfrog-steps"),
                       (["--adapt-trajectory-length"], "--warmup")):
        code = cli.main(["sample", "--chains", "4", "--dim", "2", "--samples", "5", "--device",
                         "cpu", "--no-progress", *argv])
        err = capsys.readouterr().err
        assert code == 2 and flag in err, err


@pytest.mark.cuda
@pytest.mark.parametrize("dtype, rtol", [(torch.float64, 1e-9), (torch.float32, 2e-4)])
def test_cuda_chees_agrees_with_the_cpu(dtype, rtol):
    """The CUDA kernels adapt T as the CPU build does, to the rounding of the momentum normals
    (CUDA's Box-Muller takes sincos intrinsics: the last bits in float64, ~2^-21 in float32; see
    test_cuda_chain_kernels.py), and so run the same number of steps: the step counts and
    acceptances agree exactly. The step size is held, since dual averaging amplifies rounding
    (ibid.)."""
    q0 = _q0(dtype=dtype)
    runs = [_run(q0.to(device), 20, **(CHEES | dict(adapt_step_size=False)))
            for device in ("cpu", "cuda")]
    cpu, cuda = runs[0], runs[1].cpu()
    assert runs[1].samples.is_cuda
    assert math.isclose(cuda.trajectory_length, cpu.trajectory_length, rel_tol=rtol)
    torch.testing.assert_close(cuda.samples, cpu.samples, rtol=rtol, atol=rtol)
    torch.testing.assert_close(cuda.inverse_mass, cpu.inverse_mass, rtol=rtol, atol=0)
    assert torch.equal(cuda.accept_count, cpu.accept_count)
    assert (cuda.warmup_gradient_evaluations, cuda.sampling_gradient_evaluations) == (
        cpu.warmup_gradient_evaluations, cpu.sampling_gradient_evaluations)
