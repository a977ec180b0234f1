"""The long-chain driver: ``Sampler`` and ``sample`` run many chains for many transitions.

The kernel (``fused_hmc::run_chains``: K transitions of every chain per call, state, Welford moments
and acceptance counters updated in place on the device) is separate from this driver, which only
chooses chunks, keeps the books, shows progress and handles Ctrl-C (as NumPyro keeps ``MCMCKernel``
apart from ``MCMC``).

Every random number comes from the native philox stream keyed by (seed, global chain id, global
transition index, draw), so results do not depend on the chunking, on how the chains are split
across calls (``chain_offset``) or on how a run is split into resumed runs.
"""
from __future__ import annotations

import contextlib
import math
import numbers

import torch

from .. import ops
from .._build import load_extension, require_cuda_kernels
from .resources import ChunkClock, ChunkPlanner, check_memory, ctrl_c_between_chunks
from .result import SampleResult

_INT64_MAX = 2**63 - 1


def _count(name: str, value, minimum: int, maximum: int = _INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if not minimum <= value <= maximum:
        upper = "" if maximum == _INT64_MAX else f" and <= {maximum}"
        raise ValueError(f"{name} must be >= {minimum}{upper}, got {value}")
    return int(value)


def _check_q0(q0) -> torch.Tensor:
    if not isinstance(q0, torch.Tensor):
        raise TypeError(f"q0 must be a torch.Tensor [chains, dim], got {type(q0).__name__}")
    if q0.dim() != 2 or q0.shape[0] < 1 or q0.shape[1] < 1:
        raise ValueError(f"q0 must have shape [chains, dim] with chains, dim >= 1, got "
                         f"{list(q0.shape)}")
    if q0.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"q0 must be float32 or float64, got {q0.dtype}")
    if not bool(torch.isfinite(q0).all()):
        raise ValueError("q0 has non-finite entries (NaN or inf); start the chains at finite "
                         "values")
    return q0.detach().contiguous().clone()


def _check_mu(mu, q: torch.Tensor) -> torch.Tensor:
    if mu is None:
        return torch.zeros(q.shape[1], dtype=q.dtype, device=q.device)
    mu = torch.as_tensor(mu).detach()
    if mu.shape != (q.shape[1],):
        raise ValueError(f"mu must have shape [{q.shape[1]}] to match q0's dim, got "
                         f"{list(mu.shape)}")
    mu = mu.to(dtype=q.dtype, device=q.device).contiguous()
    if not bool(torch.isfinite(mu).all()):
        raise ValueError("mu has non-finite entries")
    return mu


def _draw_seed(generator: torch.Generator | None, device: torch.device) -> int:
    """A 63-bit key from `generator`, or from the default generator of the chains' device."""
    gen_device = generator.device if generator is not None else device
    return int(torch.randint(0, _INT64_MAX, (1,), generator=generator, device=gen_device).item())


class Sampler:
    """Many HMC chains on N(mu, I), run in resumable stretches.

    ``Sampler(q0, ...).run(n)`` runs n more transitions of every chain and returns a
    :class:`SampleResult` covering everything since construction; two runs of n/2 give bit for bit
    the result of one run of n. Chain b follows transition t of the philox stream, exactly as
    ``fused_hmc.hmc_step(q, mu, rng="philox", seed=seed, transition=t)`` would for chain
    ``chain_offset + b``.

    Args:
        q0: [chains, dim] float32/float64 starting states (CPU or CUDA); copied, never modified.
        step_size: leapfrog step eps > 0. num_leapfrog_steps: L >= 1.
        mu: [dim] target mean (default zeros), converted to q0's dtype and device.
        thin: keep the state after transition t when (t + 1) % thin == 0 (global index t).
        keep_samples: store the kept draws ([chains, kept, dim], q0's dtype, on q0's device). When
            False only the Welford mean/variance and acceptance statistics are kept.
        seed: philox key, 0 <= seed < 2**64. None draws a 63-bit key once from `generator` (default:
            torch's default generator of q0's device), so torch.manual_seed makes runs repeatable.
        progress: show a tqdm progress bar (updated between chunks).
        chunk_size: transitions per operator call; None grows chunks to about 30 ms each.
        chain_offset: global id of chain 0, so that a batch split across calls or devices
            (chain_offset = start of each part) draws the numbers of the unsplit batch.
        first_transition: global index of the first transition; a later call continues a stream
            with ``first_transition=result.next_transition`` and ``seed=result.seed`` (its Welford
            and acceptance statistics start afresh).
    """

    def __init__(self, q0: torch.Tensor, *, step_size: float = 0.1, num_leapfrog_steps: int = 10,
                 mu=None, thin: int = 1, keep_samples: bool = True, seed: int | None = None,
                 generator: torch.Generator | None = None, progress: bool = True,
                 chunk_size: int | None = None, chain_offset: int = 0,
                 first_transition: int = 0):
        self._q = _check_q0(q0)
        self._mu = _check_mu(mu, self._q)
        if (isinstance(step_size, bool) or not isinstance(step_size, numbers.Real)
                or not math.isfinite(step_size) or step_size <= 0):
            raise ValueError(f"step_size must be a finite number > 0, got {step_size!r}")
        self.step_size = float(step_size)
        self.num_leapfrog_steps = _count("num_leapfrog_steps", num_leapfrog_steps, 1, 2**31 - 1)
        self.thin = _count("thin", thin, 1)
        self.keep_samples = bool(keep_samples)
        self.progress = bool(progress)
        self.chunk_size = None if chunk_size is None else _count("chunk_size", chunk_size, 1)
        self.chain_offset = _count("chain_offset", chain_offset, 0)
        self._next = _count("first_transition", first_transition, 0)
        if seed is None:
            seed = _draw_seed(generator, self._q.device)
        self.seed = _count("seed", seed, 0, 2**64 - 1)
        self._key = self.seed - 2**64 if self.seed > _INT64_MAX else self.seed  # int64 for the op
        if self._q.is_cuda:
            require_cuda_kernels()
        load_extension()  # build now, so that the first chunk's timing measures sampling

        chains, dim = self._q.shape
        f64 = dict(dtype=torch.float64, device=self._q.device)
        self._mean = torch.zeros(chains, dim, **f64)
        self._m2 = torch.zeros(chains, dim, **f64)
        self._accept_count = torch.zeros(chains, dtype=torch.int64, device=self._q.device)
        self._accept_prob_sum = torch.zeros(chains, **f64)
        self._no_samples = self._q.new_empty(0)
        self._sample_parts: list[torch.Tensor] = []
        self._num_transitions = 0
        self._num_kept = 0
        self._interrupted = False

    @property
    def device(self) -> torch.device:
        return self._q.device

    @property
    def next_transition(self) -> int:
        """Global index of the next transition to run."""
        return self._next

    def run(self, num_transitions: int) -> SampleResult:
        """Runs `num_transitions` more transitions of every chain and returns the result so far.

        Ctrl-C stops at the end of the current chunk and returns what was sampled, with
        ``interrupted=True``; a later ``run`` carries on from there. Raises SamplesTooLargeError
        (a MemoryError) before allocating draws that would not fit in free memory.
        """
        n = _count("num_transitions", num_transitions, 1, _INT64_MAX - self._next)
        kept_new = self._kept_in(self._next, n)
        buffer = self._allocate_draws(kept_new) if self.keep_samples else None
        ran = _Ran()
        try:
            with self._progress_bar(n) as bar, self._on_device(), \
                    ctrl_c_between_chunks() as stop:
                self._run_chunks(n, buffer, bar, stop, ran)
        finally:  # whatever stopped the run, the draws of the completed chunks are kept
            if buffer is not None and ran.draws:
                self._sample_parts.append(buffer if ran.draws == kept_new
                                          else buffer[:, :ran.draws])
            self._interrupted = ran.transitions < n  # Ctrl-C in the last chunk stopped nothing
        return self.result()

    def _run_chunks(self, n: int, buffer: torch.Tensor | None, bar, stop, ran: _Ran) -> None:
        planner = ChunkPlanner(self.chunk_size, first=1 if self._q.device.type == "cpu" else 8)

        def on_done(transitions: int, seconds: float) -> None:
            planner.record(transitions, seconds)
            bar.update(transitions)

        clock = ChunkClock(self._q.device, on_done)
        try:
            while ran.transitions < n and not stop.requested:
                size = planner.next_size(n - ran.transitions)
                kept = self._kept_in(self._next, size)
                draws = (buffer[:, ran.draws:ran.draws + kept] if buffer is not None and kept
                         else self._no_samples)
                clock.before_launch()
                ops.run_chains(self._q, self._mu, self.step_size, self.num_leapfrog_steps,
                               self._key, self.chain_offset, self._next, size, self.thin, draws,
                               self._mean, self._m2, self._accept_count, self._accept_prob_sum,
                               self._num_kept)
                # The books follow the call at once; Ctrl-C waits until between chunks.
                self._next += size
                self._num_transitions += size
                self._num_kept += kept
                ran.transitions += size
                ran.draws += kept
                clock.after_launch(size)
        except KeyboardInterrupt:  # raised outside the deferral (e.g. not the main thread)
            pass
        finally:
            clock.drain()

    def result(self) -> SampleResult:
        """The result of everything run so far; later runs leave it unchanged."""
        n, transitions = self._num_kept, self._num_transitions
        nan = torch.full_like(self._mean, math.nan)
        return SampleResult(
            samples=self._all_draws() if self.keep_samples else None,
            mean=self._mean.clone() if n > 0 else nan,
            var=self._m2 / (n - 1) if n > 1 else nan.clone(),
            accept_count=self._accept_count.clone(),
            accept_rate=self._accept_count.double() / transitions if transitions else
            torch.full_like(self._accept_prob_sum, math.nan),
            mean_accept_prob=self._accept_prob_sum / transitions if transitions else
            torch.full_like(self._accept_prob_sum, math.nan),
            num_transitions=transitions,
            num_kept=n,
            final_state=self._q.clone(),
            seed=self.seed,
            next_transition=self._next,
            interrupted=self._interrupted,
            thin=self.thin,
            chain_offset=self.chain_offset,
        )

    # ---- internals ------------------------------------------------------------------------------

    def _kept_in(self, first: int, count: int) -> int:
        return (first + count) // self.thin - first // self.thin

    def _draw_bytes(self, draws: int) -> int:
        chains, dim = self._q.shape
        return chains * draws * dim * self._q.element_size()

    def _allocate_draws(self, kept_new: int) -> torch.Tensor | None:
        if kept_new == 0:
            return None
        # This run's buffer, plus the concatenation of all runs when the result is assembled.
        needed = self._draw_bytes(kept_new)
        if self._sample_parts:
            needed += self._draw_bytes(self._num_kept + kept_new)
        chains, dim = self._q.shape
        check_memory(needed, self._q.device,
                     f"keeping {kept_new} draws of {chains} chains x {dim} dims",
                     "pass keep_samples=False (mean, variance and acceptance are still computed), "
                     "thin more, or run fewer transitions or chains at a time")
        return torch.empty(chains, kept_new, dim, dtype=self._q.dtype, device=self._q.device)

    def _all_draws(self) -> torch.Tensor:
        if not self._sample_parts:
            return self._q.new_empty(self._q.shape[0], 0, self._q.shape[1])
        if len(self._sample_parts) > 1:
            self._sample_parts = [torch.cat(self._sample_parts, dim=1)]
        return self._sample_parts[0]

    def _on_device(self):
        if self._q.is_cuda:
            return torch.cuda.device(self._q.device)
        return contextlib.nullcontext()

    def _progress_bar(self, total: int):
        try:
            from tqdm import tqdm
        except ImportError:  # tqdm is a dependency; without it, run silently
            return contextlib.nullcontext(_NoBar())
        return tqdm(total=total, disable=not self.progress, desc="sampling", unit="transition",
                    dynamic_ncols=True, leave=False)


class _Ran:
    """Transitions run and draws kept so far by one Sampler.run call."""

    def __init__(self) -> None:
        self.transitions = 0
        self.draws = 0


class _NoBar:
    def update(self, n: int) -> None:
        pass


def sample(q0: torch.Tensor, num_samples: int, *, step_size: float = 0.1,
           num_leapfrog_steps: int = 10, mu=None, thin: int = 1, keep_samples: bool = True,
           seed: int | None = None, generator: torch.Generator | None = None,
           progress: bool = True, chunk_size: int | None = None, chain_offset: int = 0,
           first_transition: int = 0) -> SampleResult:
    """Runs every chain of q0 for `num_samples` HMC transitions on N(mu, I) and returns the result.

    ``num_samples`` counts transitions (as NumPyro's and Stan's sample counts do); with thinning,
    ``num_samples // thin`` draws are kept (when starting at transition 0). The other arguments are
    :class:`Sampler`'s; use a Sampler directly to continue a run later with identical results.
    """
    _count("num_samples", num_samples, 1)
    sampler = Sampler(q0, step_size=step_size, num_leapfrog_steps=num_leapfrog_steps, mu=mu,
                      thin=thin, keep_samples=keep_samples, seed=seed, generator=generator,
                      progress=progress, chunk_size=chunk_size, chain_offset=chain_offset,
                      first_transition=first_transition)
    return sampler.run(num_samples)
