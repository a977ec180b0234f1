"""The long-chain sampler (the chain ops and the driver): contract, exactness, invariances."""
from __future__ import annotations

import math
import signal

import numpy as np
import pytest
import torch

import fused_hmc
from fused_hmc import ops
from fused_hmc.sampling import resources

from ._helpers import randn, run_op, seeded_generator

DTYPES = [torch.float32, torch.float64]


def _q0(device, chains=6, dim=5, dtype=torch.float64, key="q0"):
    return randn(seeded_generator("sampler", key, chains, dim), chains, dim, dtype=dtype,
                 device=device)


def _run(q0, n, **kw):
    kw.setdefault("seed", 1234)
    kw.setdefault("progress", False)
    return fused_hmc.sample(q0, n, **kw)


def _assert_equal(x, y, name):
    if isinstance(x, torch.Tensor):
        assert isinstance(y, torch.Tensor), name
        assert x.shape == y.shape and x.dtype == y.dtype, name
        assert torch.equal(x.nan_to_num(7.0), y.nan_to_num(7.0)), name
        assert torch.equal(x.isnan(), y.isnan()), name
    elif isinstance(x, dict) and any(isinstance(v, torch.Tensor) for v in x.values()):
        assert isinstance(y, dict) and list(x) == list(y), name  # the same names, in order
        for key in x:
            _assert_equal(x[key], y[key], f"{name}[{key!r}]")
    else:
        assert x == y, name


def assert_results_equal(a, b):
    """Bitwise equality of every field (NaNs equal; chain statistics name by name)."""
    for name in a._fields:
        _assert_equal(getattr(a, name), getattr(b, name), name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_result_contract(device, dtype):
    q0 = _q0(device, chains=4, dim=3, dtype=dtype)
    res = _run(q0, 10, thin=3)
    assert res.samples.shape == (4, 3, 3) and res.samples.dtype == dtype
    assert res.samples.device == q0.device
    for name in ("mean", "var"):
        t = getattr(res, name)
        assert t.shape == (4, 3) and t.dtype == torch.float64 and t.device == q0.device
    assert res.accept_count.shape == (4,) and res.accept_count.dtype == torch.int64
    for name in ("accept_rate", "mean_accept_prob"):
        t = getattr(res, name)
        assert t.shape == (4,) and t.dtype == torch.float64
        assert bool(((t >= 0) & (t <= 1)).all())
    assert res.final_state.shape == (4, 3) and res.final_state.dtype == dtype
    assert (res.num_transitions, res.num_kept, res.next_transition) == (10, 3, 10)
    assert (res.seed, res.thin, res.chain_offset, res.interrupted) == (1234, 3, 0, False)
    assert torch.equal(res.accept_rate, res.accept_count.double() / 10)
    assert isinstance(res, tuple) and res.samples is res[0]
    # q0 is copied, never modified.
    assert torch.equal(q0, _q0(device, chains=4, dim=3, dtype=dtype))


def test_var_is_nan_until_two_draws(device):
    res = _run(_q0(device), 1)
    assert res.num_kept == 1 and bool(res.var.isnan().all()) and not bool(res.mean.isnan().any())
    res = _run(_q0(device), 2, thin=5)
    assert res.num_kept == 0 and res.samples.shape == (6, 0, 5) and bool(res.mean.isnan().all())


@pytest.mark.parametrize("dtype", DTYPES)
def test_transitions_equal_hmc_step(device, dtype):
    """Transition t of the sampler is hmc_step(rng="philox", seed, transition=t), bit for bit."""
    q0 = _q0(device, chains=7, dim=9, dtype=dtype)
    mu = randn(seeded_generator("sampler-mu"), 9, dtype=dtype, device=device)
    for seed in (77, 2**64 - 3):  # keys above 2^63 reach the op as negative int64
        res = _run(q0, 8, mu=mu, seed=seed, step_size=1.3, num_leapfrog_steps=3)
        key = seed - 2**64 if seed >= 2**63 else seed
        q, accepted = q0, torch.zeros(7, dtype=torch.int64, device=device)
        for t in range(8):
            q, acc = ops.transition(q, mu, 1.3, 3, "philox", None, key, t)
            accepted += acc
            assert torch.equal(res.samples[:, t], q), t
        assert torch.equal(res.final_state, q)
        assert torch.equal(res.accept_count, accepted)
        assert 0 < int(accepted.sum()) < 7 * 8  # both decisions occur


@pytest.mark.parametrize("thin", [1, 3])
@pytest.mark.parametrize("keep", [True, False])
def test_resume_equals_one_run(device, thin, keep):
    q0 = _q0(device)
    whole = _run(q0, 20, thin=thin, keep_samples=keep)
    for split in ([10, 10], [7, 13], [1, 5, 14]):
        sampler = fused_hmc.Sampler(q0, seed=1234, thin=thin, keep_samples=keep, progress=False)
        for n in split:
            res = sampler.run(n)
        assert_results_equal(res, whole)


@pytest.mark.parametrize("thin", [1, 4])
def test_chunking_invariance(device, thin):
    q0 = _q0(device)
    n = 23
    results = [_run(q0, n, thin=thin, chunk_size=c) for c in (1, 7, n, None)]
    for res in results[1:]:
        assert_results_equal(res, results[0])


def test_batch_split_invariance(device):
    """Chains [0:B] in one call equal [0:B/2] (chain_offset 0) plus [B/2:B] (chain_offset B/2)."""
    q0 = _q0(device, chains=8)
    whole = _run(q0, 12, thin=2)
    parts = [_run(q0[:4], 12, thin=2), _run(q0[4:], 12, thin=2, chain_offset=4)]
    for name in ("samples", "mean", "var", "accept_count", "mean_accept_prob", "final_state"):
        joined = torch.cat([getattr(p, name) for p in parts])
        assert torch.equal(joined, getattr(whole, name)), name
    assert parts[1].chain_offset == 4


def test_first_transition_continues_the_stream(device):
    q0 = _q0(device)
    whole = _run(q0, 12, thin=2)
    first = _run(q0, 5, thin=2)
    rest = _run(first.final_state, 7, thin=2, seed=first.seed,
                first_transition=first.next_transition)
    assert torch.equal(torch.cat([first.samples, rest.samples], dim=1), whole.samples)
    assert torch.equal(rest.final_state, whole.final_state)
    assert rest.next_transition == 12 and rest.num_transitions == 7


@pytest.mark.parametrize("dtype", DTYPES)
def test_welford_matches_numpy(device, dtype):
    q0 = _q0(device, chains=5, dim=4, dtype=dtype)
    res = _run(q0, 60, thin=2)
    draws = res.samples.double().cpu().numpy()
    np.testing.assert_allclose(res.mean.cpu().numpy(), draws.mean(axis=1), rtol=0, atol=1e-13)
    np.testing.assert_allclose(res.var.cpu().numpy(), draws.var(axis=1, ddof=1), rtol=1e-12,
                               atol=1e-14)


def test_keep_samples_false_gives_identical_statistics(device):
    q0 = _q0(device)
    kept = _run(q0, 15, thin=2)
    bare = _run(q0, 15, thin=2, keep_samples=False)
    assert bare.samples is None
    assert_results_equal(bare._replace(samples=kept.samples), kept)


def test_seed_from_generator(device):
    q0 = _q0(device)
    gen = torch.Generator(device=device)
    seeds = []
    for _ in range(2):
        gen.manual_seed(5)
        seeds.append(fused_hmc.Sampler(q0, generator=gen, progress=False).seed)
    assert seeds[0] == seeds[1] and 0 <= seeds[0] < 2**63
    torch.manual_seed(5)
    if device.type == "cuda":
        torch.cuda.manual_seed_all(5)
    a = fused_hmc.sample(q0, 3, progress=False)
    torch.manual_seed(5)
    if device.type == "cuda":
        torch.cuda.manual_seed_all(5)
    b = fused_hmc.sample(q0, 3, progress=False)
    assert a.seed == b.seed and torch.equal(a.samples, b.samples)
    assert fused_hmc.sample(q0, 3, progress=False).seed != a.seed  # the generator advanced


def test_acceptance_rate_at_stationarity(device):
    """d=64, L=10, eps=0.1 from q0 ~ N(0, I): the acceptance rate is exactly 0.9933021193
    (validation.gaussian_exact.gaussian_hmc_exact(64, 0.1, 10)) at every transition.

    8192 independent chains x 32 transitions: rejections R have mean N p = 1755.8 (p = 6.698e-3,
    N = 262144) and, were all indicators independent, SD sqrt(N p (1 - p)) = 41.8. Within a chain
    consecutive rejections are slightly correlated (lag-1 correlation 0.004 by simulation of the
    closed-form rotation; variance ratio 1.009), so we allow a variance 1.05 times the binomial
    one. |R - N p| < 5.3 SD then fails with probability < 1e-7 per tail even with the Poisson-like
    skew (Cornish-Fisher shift ~0.1 SD), well under 1e-6 in total. The sum of acceptance
    probabilities min(1, exp(-dH)) has the same mean and a smaller variance ([0, 1]-valued), so the
    same bound holds for it. A gradient off by 5% (acceptance 0.876) or a reused uniform fail by
    hundreds of SDs.
    """
    chains, transitions, p_reject = 8192, 32, 1 - 0.9933021193
    q0 = randn(seeded_generator("acceptance"), chains, 64, device=device)
    res = _run(q0, transitions, keep_samples=False, seed=20261129)
    n = chains * transitions
    bound = 5.3 * math.sqrt(1.05 * n * p_reject * (1 - p_reject))
    rejections = n - int(res.accept_count.sum())
    assert abs(rejections - n * p_reject) < bound, (rejections, n * p_reject, bound)
    prob_rejections = n - float(res.mean_accept_prob.sum()) * transitions
    assert abs(prob_rejections - n * p_reject) < bound, (prob_rejections, n * p_reject, bound)


def test_progress_bar_without_terminal(device, capfd):
    q0 = _q0(device)
    shown = _run(q0, 9, progress=True, chunk_size=2)
    out, err = capfd.readouterr()
    assert "sampling" in err and out == ""
    assert_results_equal(shown, _run(q0, 9, progress=False))


def _patch_run(monkeypatch, on_call):
    """Wraps the sample op; records each call's first_transition."""
    real = ops.sample
    calls = []

    def patched(**kwargs):
        calls.append(kwargs["first_transition"])
        on_call(len(calls))
        return real(**kwargs)

    monkeypatch.setattr(ops, "sample", patched)
    return calls


def test_keyboard_interrupt_returns_what_was_sampled(device, monkeypatch):
    q0 = _q0(device)
    whole = _run(q0, 20, thin=3)

    def raise_on_third(call):
        if call == 3:
            raise KeyboardInterrupt

    calls = _patch_run(monkeypatch, raise_on_third)
    sampler = fused_hmc.Sampler(q0, seed=1234, thin=3, chunk_size=4, progress=True)
    res = sampler.run(20)
    assert calls == [0, 4, 8] and res.interrupted
    assert (res.num_transitions, res.next_transition, res.num_kept) == (8, 8, 2)
    assert res.samples.shape == (6, 2, 5)
    monkeypatch.undo()
    assert_results_equal(res._replace(interrupted=False), _run(q0, 8, thin=3))
    # The sampler carries on from where it stopped, as if never interrupted.
    assert_results_equal(sampler.run(12), whole)


@pytest.fixture
def python_sigint_handler():
    """Python's own SIGINT handler for the test, whatever an earlier test or library left (the
    deferral leaves a C handler alone, and one may swallow the signal); restored after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_between_chunks(device, monkeypatch, python_sigint_handler):
    """A real SIGINT during a chunk lets the chunk finish, then the run stops."""
    q0 = _q0(device)

    def sigint_on_third(call):
        if call == 3:
            # raise_signal sends it to this thread before it returns; os.kill may hand it to
            # another thread (OpenMP's workers) and the run can end before it is seen.
            signal.raise_signal(signal.SIGINT)

    calls = _patch_run(monkeypatch, sigint_on_third)
    res = _run(q0, 20, chunk_size=4)
    assert calls == [0, 4, 8] and res.interrupted and res.num_transitions == 12
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    monkeypatch.undo()
    assert_results_equal(res._replace(interrupted=False), _run(q0, 12))


def test_memory_estimate_refuses_absurd_requests(device, monkeypatch):
    q0 = _q0(device, chains=4, dim=2)
    with pytest.raises(fused_hmc.SamplesTooLargeError, match="keep_samples=False") as info:
        _run(q0, 10**15)
    assert isinstance(info.value, MemoryError)
    monkeypatch.setattr(resources, "available_memory", lambda device: 1000)
    _run(q0, 15)  # 4 chains x 15 draws x 2 dims x 8 bytes = 960 bytes fit in 1000 ...
    with pytest.raises(MemoryError, match="needs"):
        _run(q0, 16)  # ... 1024 do not,
    _run(q0, 100, keep_samples=False)  # and statistics alone need no room for draws.


def test_memory_check_comes_before_the_warmup(monkeypatch):
    """An absurd request is refused before any op runs, not after a whole warm-up."""
    def must_not_run(*args, **kwargs):
        raise AssertionError("an op ran before the memory check")

    for name in ("sample", "warmup", "transition"):
        monkeypatch.setattr(ops, name, must_not_run)
    q0 = _q0("cpu", chains=4, dim=2)
    with pytest.raises(fused_hmc.SamplesTooLargeError, match="keep_samples=False"):
        _run(q0, 10**12, num_warmup=3000)
    sampler = fused_hmc.Sampler(q0, seed=0, progress=False, num_warmup=3000)
    with pytest.raises(fused_hmc.SamplesTooLargeError):
        sampler.run(10**12)
    assert sampler.next_transition == 0


def _first_draws_buffer(monkeypatch) -> list[int]:
    """Records the data pointer of the draws buffer of each call of the sample op."""
    real, pointers = ops.sample, []

    def patched(**kwargs):
        pointers.append(kwargs["samples"].data_ptr())
        return real(**kwargs)

    monkeypatch.setattr(ops, "sample", patched)
    return pointers


@pytest.mark.parametrize("tuned", [False, True])
def test_results_do_not_alias_the_sampler(device, tuned):
    """Mutating every tensor of a result changes neither a later result nor the run's future
    (tuned: warm-up, a diagonal target and jitter, whose step sizes and inverse masses the
    sampler adapts and keeps)."""
    q0 = _q0(device)
    kw = dict(thin=2)
    if tuned:
        kw.update(num_warmup=30, jitter=0.1, target=fused_hmc.DiagonalGaussian(
            torch.zeros(5), torch.linspace(0.5, 2.0, 5)))
    whole = _run(q0, 10, **kw)
    sampler = fused_hmc.Sampler(q0, seed=1234, progress=False, **kw)
    first = sampler.run(4)
    for value in first:
        if isinstance(value, torch.Tensor):
            value.zero_()
    assert_results_equal(sampler.result(), _run(q0, 4, **kw))
    again = sampler.result()
    again.samples.add_(1.0)
    assert_results_equal(sampler.run(6), whole)
    later = sampler.result()
    later.samples.mul_(3.0)
    later.final_state.add_(1.0)
    assert_results_equal(sampler.result(), whole)


def test_a_last_run_hands_over_its_draws_without_a_copy(monkeypatch):
    """sample() (one run, its sampler then gone) and run(..., last=True) return the very buffer
    the op wrote, so peak memory is one copy of the draws; a Sampler's other results are copies,
    as the sampler keeps its draws to continue."""
    q0 = _q0("cpu")
    pointers = _first_draws_buffer(monkeypatch)
    res = _run(q0, 9, chunk_size=3)
    assert res.samples.data_ptr() == pointers[0]
    pointers.clear()
    sampler = fused_hmc.Sampler(q0, seed=1234, progress=False, chunk_size=3)
    copied = sampler.run(5)
    assert copied.samples.data_ptr() != pointers[0]
    last = sampler.run(4, last=True)
    assert_results_equal(last, res)
    pointers.clear()
    last_only = fused_hmc.Sampler(q0, seed=1234, progress=False, chunk_size=3).run(9, last=True)
    assert last_only.samples.data_ptr() == pointers[0]
    with pytest.raises(RuntimeError, match="last run"):
        sampler.run(1)
    with pytest.raises(RuntimeError, match="last run"):
        sampler.result()


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(num_samples=0), ValueError, "num_samples"),
    (dict(num_samples=2.5), TypeError, "num_samples"),
    (dict(thin=0), ValueError, "thin"),
    (dict(step_size=float("nan")), ValueError, "step_size"),
    (dict(step_size=float("inf")), ValueError, "step_size"),
    (dict(step_size=-0.1), ValueError, "step_size"),
    (dict(num_leapfrog_steps=0), ValueError, "num_leapfrog_steps"),
    (dict(mu=torch.zeros(4)), ValueError, "mu must have shape"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(seed=2**64), ValueError, "seed"),
    (dict(chain_offset=-2), ValueError, "chain_offset"),
    (dict(chunk_size=0), ValueError, "chunk_size"),
    (dict(q0=torch.zeros(3)), ValueError, "q0 must have shape"),
    (dict(q0=torch.zeros(2, 3, 4)), ValueError, "q0 must have shape"),
    (dict(q0=torch.zeros(2, 3, dtype=torch.int64)), TypeError, "float32 or float64"),
    (dict(q0=torch.zeros(2, 3, dtype=torch.float16)), TypeError, "float32 or float64"),
    (dict(q0=torch.full((2, 3), float("nan"))), ValueError, "non-finite"),
    (dict(q0=[[0.0, 1.0]]), TypeError, "torch.Tensor"),
])
def test_bad_input_is_named(kwargs, error, match):
    args = dict(q0=torch.zeros(2, 3), num_samples=4, progress=False)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        fused_hmc.sample(args.pop("q0"), args.pop("num_samples"), **args)


def test_run_rejects_bad_counts():
    sampler = fused_hmc.Sampler(torch.zeros(2, 3), seed=0, progress=False)
    with pytest.raises(ValueError, match="num_transitions"):
        sampler.run(0)


def test_op_checks_its_buffers():
    q = torch.zeros(2, 3)
    mu = torch.zeros(3)
    good = dict(samples=torch.empty(2, 4, 3), mean=torch.zeros(2, 3, dtype=torch.float64),
                m2=torch.zeros(2, 3, dtype=torch.float64),
                accept_count=torch.zeros(2, dtype=torch.int64),
                accept_prob_sum=torch.zeros(2, dtype=torch.float64))

    def call(**over):
        run_op(q, "standard", [mu], [], torch.full((1,), 0.1, dtype=torch.float64),
                torch.ones(1, 3), 0.0, 3, 0, 0, 0, 4, **{**good, **over})

    call()
    call(samples=None)
    call(samples=torch.empty(0))
    with pytest.raises(ValueError, match="samples must be None, empty, or have shape"):
        call(samples=torch.empty(2, 3, 3))
    with pytest.raises(TypeError, match="mean must be"):
        call(mean=torch.zeros(2, 3))
    with pytest.raises(TypeError, match=r"statistics\[0\] \(accept_count\) must be Long"):
        call(accept_count=torch.zeros(2))
    with pytest.raises(ValueError, match="m2 must have shape"):
        call(m2=torch.zeros(3, 2, dtype=torch.float64))


def test_to_arviz_and_summary(device, capsys):
    q0 = _q0(device, chains=4, dim=10)
    res = _run(q0, 12, chain_offset=3)
    tree = res.to_arviz()
    q = tree.posterior["q"]
    assert q.dims == ("chain", "draw", "dim") and q.shape == (4, 12, 10)
    assert list(q.coords["chain"].values) == [3, 4, 5, 6]
    np.testing.assert_array_equal(q.values, res.samples.cpu().numpy())
    capsys.readouterr()
    res.summary(max_rows=3)
    out = capsys.readouterr().out
    assert "ess_bulk" in out and "r_hat" in out and "(7 more dims not shown)" in out
    assert "first 3 of 10 dims (4 chains x 12 draws)" in out and "max r_hat" in out
    bare = _run(q0, 12, keep_samples=False)
    with pytest.raises(ValueError, match="keep_samples"):
        bare.to_arviz()
    bare.summary()
    assert "ESS and R-hat need the draws" in capsys.readouterr().out


def test_chunk_clock_keeps_two_cuda_chunks_in_flight(monkeypatch):
    """The CUDA bookkeeping, with stand-in events: a chunk is reported once its end event has been
    waited on, at most two chunks are in flight, and drain() reports the rest in order."""
    log = []

    class FakeEvent:
        count = 0

        def __init__(self, enable_timing=False):
            assert enable_timing
            FakeEvent.count += 1
            self.id = FakeEvent.count

        def record(self):
            log.append(("record", self.id))

        def synchronize(self):
            log.append(("wait", self.id))

        def elapsed_time(self, end):
            return 1000.0 * (end.id - self.id)  # milliseconds

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    done = []
    clock = resources.ChunkClock(torch.device("cuda"), lambda n, s: done.append((n, s)))
    for size in (3, 5, 7):
        clock.before_launch()
        clock.after_launch(size)
    assert done == [(3, 1.0), (5, 1.0)]  # the third chunk is still in flight
    assert log[-1] == ("wait", 4)
    clock.drain()
    assert done == [(3, 1.0), (5, 1.0), (7, 1.0)] and not clock.in_flight


def test_chunk_planner_grows_towards_the_target():
    planner = resources.ChunkPlanner(None, first=1, target_seconds=0.03)
    sizes = []
    for _ in range(6):
        size = planner.next_size(10**6)
        sizes.append(size)
        planner.record(size, 0.001 * size)  # 1 ms per transition
    assert sizes == [1, 4, 16, 30, 30, 30]
    fixed = resources.ChunkPlanner(7, first=1)
    fixed.record(7, 100.0)
    assert [fixed.next_size(100), fixed.next_size(3)] == [7, 3]


def _op_buffers(chains, dim, device):
    f64 = dict(dtype=torch.float64, device=device)
    return dict(mean=torch.zeros(chains, dim, **f64), m2=torch.zeros(chains, dim, **f64),
                accept_count=torch.zeros(chains, dtype=torch.int64, device=device),
                accept_prob_sum=torch.zeros(chains, **f64))


def _op_run(q, first, n, samples, buf, kept_before, thin=1):
    mu = torch.zeros(q.shape[1], dtype=q.dtype, device=q.device)
    run_op(q, "standard", [mu], [], torch.full((1,), 1.1, dtype=torch.float64, device=q.device),
            torch.ones(1, q.shape[1], dtype=q.dtype, device=q.device), 0.0, 3, 99, 0, first, n,
            thin=thin, kept_before=kept_before, samples=samples, **buf)


def test_op_writes_kept_draws_into_a_strided_view(device):
    """samples may be a view big[:, k0:k0 + K] of a larger buffer (the driver passes these)."""
    q0 = _q0(device, chains=5, dim=8, dtype=torch.float32)
    q, big, buf = q0.clone(), torch.full((5, 10, 8), -1.0, device=device), _op_buffers(5, 8, device)
    _op_run(q, 0, 4, big[:, 0:4], buf, 0)
    _op_run(q, 4, 6, big[:, 4:10], buf, 4)
    whole_q, whole, whole_buf = q0.clone(), torch.empty(5, 10, 8, device=device), _op_buffers(
        5, 8, device)
    _op_run(whole_q, 0, 10, whole, whole_buf, 0)
    assert torch.equal(big, whole) and torch.equal(q, whole_q)


def test_op_statistics_do_not_depend_on_the_split(device):
    """Acceptance probabilities are added to the stored sum one transition at a time, and Welford
    counts continue from kept_before, so a split call leaves the very same bits."""
    q0 = _q0(device, chains=16, dim=3)
    empty = q0.new_empty(0)
    split_q, split = q0.clone(), _op_buffers(16, 3, device)
    for first, n in ((0, 3), (3, 1), (4, 8)):
        _op_run(split_q, first, n, empty, split, kept_before=first // 2, thin=2)
    whole_q, whole = q0.clone(), _op_buffers(16, 3, device)
    _op_run(whole_q, 0, 12, empty, whole, kept_before=0, thin=2)
    assert torch.equal(split_q, whole_q)
    for name in whole:
        assert torch.equal(split[name], whole[name]), name
    assert bool((whole["accept_prob_sum"] % 1 != 0).any())  # not a sum of exact ones
