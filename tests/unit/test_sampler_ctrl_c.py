"""Ctrl-C never splits an operator call from the driver's books of it, whatever SIGINT handler is
installed, and a second Ctrl-C while the result is assembled or reported does not lose it.

Signals are sent deterministically: a patched op sends SIGINT to this process right after the real
op returns, the spot where a Ctrl-C usually lands on CPU (the handler runs at the next bytecode).
"""
from __future__ import annotations

import io
import os
import signal

import pytest

import fused_hmc
from fused_hmc import diagnostics, ops

from .test_sampler import assert_results_equal
from .test_sampler_chain_kernels import WARM, _q0, _run


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


@pytest.fixture(params=["default", "custom"])
def sigint_handler(request):
    """Python's default SIGINT handler, or another one that raises KeyboardInterrupt (as
    frameworks install); restored afterwards."""
    handler = (signal.default_int_handler if request.param == "default"
               else _raise_keyboard_interrupt)
    previous = signal.signal(signal.SIGINT, handler)
    yield handler
    signal.signal(signal.SIGINT, previous)


MODES = ("sampling", "warmup")


def _sigint_after_call(monkeypatch, mode: str, call: int) -> list[int]:
    """Patches the op of `mode` (ops.sample for "sampling", ops.warmup for "warmup") to send
    SIGINT right after its `call`-th call returns."""
    assert mode in MODES
    name = "sample" if mode == "sampling" else "warmup"
    real, calls = getattr(ops, name), []

    def patched(**kwargs):
        real(**kwargs)
        calls.append(len(calls) + 1)
        if len(calls) == call:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(ops, name, patched)
    return calls


def test_ctrl_c_as_an_op_returns_keeps_the_books(sigint_handler, monkeypatch):
    q0 = _q0()
    whole = _run(q0, 20, thin=3)
    calls = _sigint_after_call(monkeypatch, "sampling", call=2)
    sampler = fused_hmc.Sampler(q0, seed=1234, thin=3, chunk_size=4, progress=False)
    res = sampler.run(20)
    assert calls == [1, 2] and res.interrupted
    assert (res.num_transitions, res.next_transition, res.num_kept) == (8, 8, 2)
    assert bool((res.accept_rate <= 1).all())
    assert signal.getsignal(signal.SIGINT) is sigint_handler  # restored
    monkeypatch.undo()
    assert_results_equal(res._replace(interrupted=False), _run(q0, 8, thin=3))
    resumed = sampler.run(12)  # repeats no transition: equals the uninterrupted run bit for bit
    assert bool((resumed.accept_rate <= 1).all())
    assert_results_equal(resumed, whole)


def test_ctrl_c_as_a_warmup_op_returns_keeps_the_books(sigint_handler, monkeypatch):
    q0 = _q0()
    whole = _run(q0, 10, **WARM)
    calls = _sigint_after_call(monkeypatch, "warmup", call=2)
    sampler = fused_hmc.Sampler(q0, seed=1234, chunk_size=50, progress=False, **WARM)
    res = sampler.run(10)
    assert calls == [1, 2] and res.interrupted
    assert (res.num_warmup, res.num_transitions, res.next_transition) == (100, 0, 100)
    monkeypatch.undo()
    assert_results_equal(sampler.run(10), whole)


def test_second_ctrl_c_while_the_result_is_assembled_keeps_it(sigint_handler, monkeypatch):
    q0 = _q0()
    _sigint_after_call(monkeypatch, "sampling", call=1)
    sampler = fused_hmc.Sampler(q0, seed=1234, chunk_size=4, progress=False)
    real_step_sizes = sampler._chains.step_sizes  # called while the result is assembled

    def hit_by_a_second_ctrl_c(q):
        os.kill(os.getpid(), signal.SIGINT)
        return real_step_sizes(q)

    monkeypatch.setattr(sampler._chains, "step_sizes", hit_by_a_second_ctrl_c)
    res = sampler.run(20)
    assert res.interrupted and res.num_transitions == 4
    monkeypatch.undo()
    assert_results_equal(res._replace(interrupted=False), _run(q0, 4))


def test_ctrl_c_during_the_summary_prints_the_moments_then_stops(monkeypatch):
    res = _run(_q0(), 12)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(diagnostics, "diagnose", interrupted)
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        res.summary(file=out)
    text = out.getvalue()
    assert "acceptance rate" in text and "ESS and R-hat interrupted" in text
    mean, _ = diagnostics.pooled_moments(res.mean.numpy(), res.var.numpy(), res.num_kept)
    assert f"{mean[0]:+.4f}" in text  # the table of means and SDs was printed


def test_handlers_that_do_not_raise_are_called_and_the_run_goes_on(monkeypatch):
    """A handler that only records the signal (a graceful-shutdown flag) is called once the
    chunk's books are kept, and the run continues."""
    seen = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        q0 = _q0()
        _sigint_after_call(monkeypatch, "sampling", call=1)
        res = fused_hmc.Sampler(q0, seed=1234, chunk_size=4, progress=False).run(12)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen == [signal.SIGINT] and not res.interrupted and res.num_transitions == 12
    monkeypatch.undo()
    assert_results_equal(res, _run(q0, 12))

