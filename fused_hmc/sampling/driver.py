"""The long-chain driver: ``Sampler`` and ``sample`` run many chains for many transitions.

The kernels (``fused_hmc::run_chains``: K transitions of every chain per call, state, Welford moments
and acceptance counters updated in place on the device; for other targets, mass matrices and
warm-up the tuned ``fused_hmc::warmup_chains`` / ``run_chains_tuned``, see ``tuned.py``) are separate
from this driver, which only chooses chunks, keeps the books, shows progress and handles Ctrl-C (as
NumPyro keeps ``MCMCKernel`` apart from ``MCMC``).

Every random number comes from the native philox stream keyed by (seed, global chain id, global
transition index, draw), so results do not depend on the chunking, on how the chains are split
across calls (``chain_offset``) or on how a run is split into resumed runs.
"""
from __future__ import annotations

import contextlib
import math

import torch

from .._build import load_extension, require_cuda_kernels
from ..targets import StandardGaussian
from .arguments import (INT64_MAX, check_inverse_mass, check_jitter, check_mu, check_q0,
                        check_step_size, check_step_size_fits, check_target, count,
                        tuned_features)
from .resources import ChunkClock, ChunkPlanner, SigintDeferral, check_memory
from .result import SampleResult
from .tuned import PlainChains, TunedChains
from .warmup import WarmupSettings


def _draw_seed(generator: torch.Generator | None, device: torch.device) -> int:
    """A 63-bit key from `generator`, or from the default generator of the chains' device."""
    gen_device = generator.device if generator is not None else device
    return int(torch.randint(0, INT64_MAX, (1,), generator=generator, device=gen_device).item())


class Sampler:
    """Many HMC chains on a Gaussian target (N(mu, I) by default), run in resumable stretches.

    ``Sampler(q0, ...).run(n)`` runs n more transitions of every chain (after the warm-up, which
    the first run does first) and returns a :class:`SampleResult` covering everything since
    construction; two runs of n/2 give bit for bit the result of one run of n. Chain b follows
    transition t of the philox stream; on N(mu, I) with one step size, exactly as
    ``fused_hmc.hmc_step(q, mu, rng="philox", seed=seed, transition=t)`` would for chain
    ``chain_offset + b``.

    Args:
        q0: [chains, dim] float32/float64 starting states (CPU or CUDA); copied, never modified.
        step_size: leapfrog step eps > 0: a number, or a [chains] tensor of per-chain step sizes
            (e.g. ``result.step_size`` of an earlier run). With warm-up, the initial step size eps0
            (dual averaging starts at mu = log(10 eps0)). num_leapfrog_steps: L >= 1.
        mu: [dim] mean of the default target N(mu, I) (default zeros), converted to q0's dtype and
            device. Not together with ``target``.
        thin: keep the state after transition t when (t + 1) % thin == 0 (global index t).
        keep_samples: store the kept draws ([chains, kept, dim], q0's dtype, on q0's device). When
            False only the Welford mean/variance and acceptance statistics are kept.
        seed: the philox stream's seed, 0 <= seed < 2**64 (mixed into its key, so the stream is
            not the one torch's generator seeded with the same number draws). None draws a 63-bit
            seed once from `generator` (default: torch's default generator of q0's device), so
            torch.manual_seed makes runs repeatable. Not together with `generator`.
        progress: show a tqdm progress bar (updated between chunks).
        chunk_size: transitions per operator call; None grows chunks to about 30 ms each.
        chain_offset: global id of chain 0, so that a batch split across calls or devices
            (chain_offset = start of each part) draws the numbers of the unsplit batch.
        first_transition: global index of the first transition; a later call continues a stream
            with ``first_transition=result.next_transition`` and ``seed=result.seed`` (its Welford
            and acceptance statistics start afresh; pass ``step_size=result.step_size`` and
            ``inverse_mass=result.inverse_mass`` to keep adapted values). Warm-up takes transitions
            [first_transition, first_transition + num_warmup); sampling follows.
        num_warmup: warm-up transitions run before sampling and not returned as draws, adapting
            the step size and a diagonal inverse mass (see :mod:`fused_hmc.sampling.warmup`: dual
            averaging after Hoffman & Gelman 2014 with Stan's constants, Stan's windows).
        target: a :mod:`fused_hmc.targets` StandardGaussian, DiagonalGaussian or DenseGaussian
            (default N(mu, I)); its gradient is computed inside the kernel.
        target_accept: the average acceptance statistic warm-up aims for (default 0.8, as Stan's
            adapt_delta and NumPyro's target_accept_prob; see :mod:`fused_hmc.sampling.warmup`).
        adapt_step_size, adapt_mass_matrix: what warm-up adapts.
        pooled: one step size and one inverse mass for all chains, adapted from all chains'
            statistics (pooled inside the kernel, no host sync per transition), instead of one per
            chain. Needs a scalar step_size and an inverse_mass of shape [dim] (or None). Per-chain
            dual averaging ends above target_accept after a short final run (see
            :mod:`fused_hmc.sampling.warmup`); with many chains prefer pooled=True.
        jitter: each transition's step size is eps * (1 + jitter * (2 v - 1)), v ~ U[0, 1) from the
            chain's philox stream (reproducible), so trajectory lengths vary (default 0: none;
            e.g. 0.1 for [0.9, 1.1] eps). Jitter in warm-up and sampling alike.
        inverse_mass: the diagonal inverse mass matrix, [dim] (shared) or [chains, dim]; default
            the identity. With a mass matrix M = diag(1 / inverse_mass) the momentum is
            p ~ N(0, M) and the kinetic energy 0.5 p^T M^-1 p (Neal 2011, sec. 5.4.1).
        adapt_windows: (init_buffer, base_window, term_buffer) of the warm-up, Stan's
            (75, 25, 50): initial fast interval, first slow window (then doubling), terminal fast
            interval; scaled to 15% / 75% / 10% when they do not fit in num_warmup.

    Warm-up, targets other than N(mu, I), per-chain step sizes, inverse_mass and jitter run the
    tuned kernels (run_chains_tuned, warmup_chains; the same operations on CPU and CUDA). Without them
    the behaviour, on either device, is exactly the seed sampler's.
    """

    def __init__(self, q0: torch.Tensor, *, step_size: float = 0.1, num_leapfrog_steps: int = 10,
                 mu=None, thin: int = 1, keep_samples: bool = True, seed: int | None = None,
                 generator: torch.Generator | None = None, progress: bool = True,
                 chunk_size: int | None = None, chain_offset: int = 0,
                 first_transition: int = 0, num_warmup: int = 0, target=None,
                 target_accept: float = 0.8, adapt_step_size: bool = True,
                 adapt_mass_matrix: bool = True, pooled: bool = False, jitter: float = 0.0,
                 inverse_mass: torch.Tensor | None = None,
                 adapt_windows: tuple[int, int, int] = (75, 25, 50)):
        self._q = check_q0(q0)
        target = check_target(target, mu, self._q)
        self.step_size = check_step_size(step_size, self._q)
        self.num_leapfrog_steps = count("num_leapfrog_steps", num_leapfrog_steps, 1, 2**31 - 1)
        self.warmup = WarmupSettings(num_warmup, target_accept, adapt_step_size, adapt_mass_matrix,
                                     pooled, adapt_windows)
        self.jitter = check_jitter(jitter)
        check_step_size_fits(self.step_size, self.jitter, self.warmup, self._q)
        inverse_mass = check_inverse_mass(inverse_mass, self._q)
        self.thin = count("thin", thin, 1)
        self.keep_samples = bool(keep_samples)
        self.progress = bool(progress)
        self.chunk_size = None if chunk_size is None else count("chunk_size", chunk_size, 1)
        self.chain_offset = count("chain_offset", chain_offset, 0)
        self._next = count("first_transition", first_transition, 0)
        if seed is not None and generator is not None:
            raise ValueError("pass seed= (the stream's seed) or generator= (to draw one), not both")
        if seed is None:
            seed = _draw_seed(generator, self._q.device)
        self.seed = count("seed", seed, 0, 2**64 - 1)
        self._key = self.seed - 2**64 if self.seed > INT64_MAX else self.seed  # int64 for the op
        tuned = tuned_features(self.warmup, target, self.step_size, inverse_mass, self.jitter)
        if self._q.is_cuda:
            require_cuda_kernels()
        load_extension()  # build now, so that the first chunk's timing measures sampling
        if tuned:
            self._chains = self._tuned_chains(target, mu, inverse_mass)
        else:
            mean = check_mu(target.mu if target is not None else mu, self._q)
            self._chains = PlainChains(mean, self.step_size, self.num_leapfrog_steps, self._key,
                                       self.chain_offset)
        self._warmup_done = 0

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
        self._spent = False  # a last run handed the draws over

    def _tuned_chains(self, target, mu, inverse_mass) -> TunedChains:
        chains, dim = self._q.shape
        if target is None:
            target = StandardGaussian(check_mu(mu, self._q))
        per_chain_step = isinstance(self.step_size, torch.Tensor)
        per_chain_mass = inverse_mass is not None and inverse_mass.dim() == 2
        if self.warmup.pooled and (per_chain_step or per_chain_mass):
            raise ValueError("pooled=True adapts one step size and one inverse mass for all chains: "
                             "pass a scalar step_size and an inverse_mass of shape [dim]")
        shared = self.warmup.pooled or (self.warmup.num_warmup == 0 and not per_chain_step
                                        and not per_chain_mass)
        groups = 1 if shared else chains
        step = torch.as_tensor(self.step_size, dtype=torch.float64, device=self._q.device)
        if inverse_mass is None:
            inverse_mass = torch.ones(dim, dtype=self._q.dtype, device=self._q.device)
        return TunedChains(self._q, target, step.expand(groups),
                           inverse_mass.expand(groups, dim), self.jitter, self.num_leapfrog_steps,
                           self._key, self.chain_offset, self.warmup, self._next)

    @property
    def device(self) -> torch.device:
        return self._q.device

    @property
    def next_transition(self) -> int:
        """Global index of the next transition to run."""
        return self._next

    def run(self, num_transitions: int, *, last: bool = False) -> SampleResult:
        """Runs `num_transitions` more transitions of every chain and returns the result so far.

        The result shares no memory with the sampler, so its draws are a copy of the sampler's;
        ``last=True`` says this is the sampler's last run: the result then takes the draws without
        a copy (half the peak memory, as ``sample`` does), and the sampler cannot be used again.

        The first run does the warm-up first (its draws are discarded). Ctrl-C (SIGINT, whatever
        Python handler is installed) is held while a chunk runs and its books are kept, then handed
        to that handler; when it raises KeyboardInterrupt (Python's default does) the run stops and
        returns what was sampled, with ``interrupted=True``, and a later ``run`` carries on from
        there (within the warm-up too) exactly as if never interrupted. Once the run has stopped, a
        further Ctrl-C while the result is assembled does not lose it. Raises
        SamplesTooLargeError (a MemoryError) before any transition when the draws would not fit in
        free memory.
        """
        if not isinstance(last, bool):
            raise TypeError(f"last must be True or False, got {last!r}")
        self._check_not_spent()
        warmup = self._chains.warmup_left
        n = count("num_transitions", num_transitions, 1, INT64_MAX - self._next - warmup)
        kept_new = self._kept_in(self._next + warmup, n)
        # Checked (and allocated) before the warm-up, so that an absurd request costs nothing.
        buffer = (self._allocate_draws(kept_new, copy_for_result=not last)
                  if self.keep_samples else None)
        result = None
        try:
            with SigintDeferral() as sigint, self._on_device():
                completed = ((not warmup or self._run_warmup(sigint))
                             and self._run_chunks(n, buffer, sigint))
                self._interrupted = not completed  # Ctrl-C in the last chunk stopped nothing
                result = self._result(hand_over=last)
                self._spent = last
        except KeyboardInterrupt:  # a SIGINT held since the run stopped, delivered on leaving
            if result is None:
                raise
        return result  # the run is over: its result survives a further Ctrl-C

    def _check_not_spent(self) -> None:
        if self._spent:
            raise RuntimeError("this sampler's last run (run(..., last=True)) handed its draws to "
                               "that result; continue from it with a new Sampler (first_transition"
                               "=result.next_transition, seed=result.seed)")

    def _run_warmup(self, sigint: SigintDeferral) -> bool:
        """Runs the rest of the warm-up; False when Ctrl-C stopped it first."""
        left = self._chains.warmup_left

        def launch(size: int) -> None:
            self._chains.warmup(self._q, self._next, size)
            self._next += size
            self._warmup_done += size

        with self._progress_bar(left, "warm-up") as bar:
            return self._chunk_loop(left, launch, bar, sigint)

    def _run_chunks(self, n: int, buffer: torch.Tensor | None, sigint: SigintDeferral) -> bool:
        """Runs n sampling transitions, keeping draws in `buffer`; False when Ctrl-C stopped it."""
        drawn = 0  # draws of this run, stored in buffer[:, :drawn]

        def launch(size: int) -> None:
            nonlocal drawn
            kept = self._kept_in(self._next, size)
            draws = (buffer[:, drawn:drawn + kept] if buffer is not None and kept
                     else self._no_samples)
            self._chains.run(self._q, self._next, size, self.thin, draws, self._mean, self._m2,
                             self._accept_count, self._accept_prob_sum, self._num_kept)
            # The books of the call (SIGINT is held meanwhile), consistent after every chunk.
            self._next += size
            self._num_transitions += size
            self._num_kept += kept
            if buffer is not None and kept:
                if drawn == 0:
                    self._sample_parts.append(buffer[:, :kept])
                else:
                    self._sample_parts[-1] = buffer[:, :drawn + kept]
                drawn += kept

        with self._progress_bar(n) as bar:
            return self._chunk_loop(n, launch, bar, sigint)

    def _chunk_loop(self, total: int, launch, bar, sigint: SigintDeferral) -> bool:
        """Calls launch(size) for chunks covering `total` transitions; False when Ctrl-C (a
        KeyboardInterrupt) stopped it first. A SIGINT held during a chunk is delivered before the
        next one, after the chunk's books are kept."""
        planner = ChunkPlanner(self.chunk_size, first=1 if self._q.device.type == "cpu" else 8)

        def on_done(transitions: int, seconds: float) -> None:
            planner.record(transitions, seconds)
            bar.update(transitions)

        clock = ChunkClock(self._q.device, on_done)
        done = 0
        try:
            while done < total:
                sigint.deliver()
                size = planner.next_size(total - done)
                clock.before_launch()
                launch(size)
                done += size
                clock.after_launch(size)
        except KeyboardInterrupt:
            return False
        finally:
            clock.drain()
        return True

    def result(self) -> SampleResult:
        """The result of everything run so far. It shares no memory with the sampler: changing it
        changes neither later results nor the run, and later runs leave it unchanged."""
        self._check_not_spent()
        return self._result(hand_over=False)

    def _result(self, hand_over: bool) -> SampleResult:
        n, transitions = self._num_kept, self._num_transitions
        nan = torch.full_like(self._mean, math.nan)
        return SampleResult(
            samples=self._all_draws(hand_over) if self.keep_samples else None,
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
            step_size=self._chains.step_sizes(self._q),
            inverse_mass=self._chains.inverse_masses(self._q),
            num_warmup=self._warmup_done,
        )

    # ---- internals ------------------------------------------------------------------------------

    def _kept_in(self, first: int, count: int) -> int:
        return (first + count) // self.thin - first // self.thin

    def _draw_bytes(self, draws: int) -> int:
        chains, dim = self._q.shape
        return chains * draws * dim * self._q.element_size()

    def _allocate_draws(self, kept_new: int, copy_for_result: bool) -> torch.Tensor | None:
        if kept_new == 0:
            return None
        # This run's buffer, plus the result's copy (or concatenation) of all draws.
        needed = self._draw_bytes(kept_new)
        if copy_for_result or self._sample_parts:
            needed += self._draw_bytes(self._num_kept + kept_new)
        chains, dim = self._q.shape
        check_memory(needed, self._q.device,
                     f"keeping {kept_new} draws of {chains} chains x {dim} dims",
                     "pass keep_samples=False (mean, variance and acceptance are still computed), "
                     "thin more, or run fewer transitions or chains at a time")
        return torch.empty(chains, kept_new, dim, dtype=self._q.dtype, device=self._q.device)

    def _all_draws(self, hand_over: bool) -> torch.Tensor:
        """Every kept draw, in a tensor the sampler does not keep (a copy or concatenation of its
        parts); the one part itself when the sampler hands it over."""
        parts = self._sample_parts
        if not parts:
            return self._q.new_empty(self._q.shape[0], 0, self._q.shape[1])
        if len(parts) == 1:
            return parts[0] if hand_over else parts[0].clone()
        return torch.cat(parts, dim=1)

    def _on_device(self):
        if self._q.is_cuda:
            return torch.cuda.device(self._q.device)
        return contextlib.nullcontext()

    def _progress_bar(self, total: int, desc: str = "sampling"):
        try:
            from tqdm import tqdm
        except ImportError:  # tqdm is a dependency; without it, run silently
            return contextlib.nullcontext(_NoBar())
        return tqdm(total=total, disable=not self.progress, desc=desc, unit="transition",
                    dynamic_ncols=True, leave=False)


class _NoBar:
    def update(self, n: int) -> None:
        pass


def sample(q0: torch.Tensor, num_samples: int, *, step_size: float = 0.1,
           num_leapfrog_steps: int = 10, mu=None, thin: int = 1, keep_samples: bool = True,
           seed: int | None = None, generator: torch.Generator | None = None,
           progress: bool = True, chunk_size: int | None = None, chain_offset: int = 0,
           first_transition: int = 0, num_warmup: int = 0, target=None,
           target_accept: float = 0.8, adapt_step_size: bool = True,
           adapt_mass_matrix: bool = True, pooled: bool = False, jitter: float = 0.0,
           inverse_mass: torch.Tensor | None = None,
           adapt_windows: tuple[int, int, int] = (75, 25, 50)) -> SampleResult:
    """Runs every chain of q0 for `num_warmup` warm-up transitions (adapting step size and diagonal
    inverse mass; not returned) and then `num_samples` HMC transitions on the target (default
    N(mu, I)), and returns the result.

    ``num_samples`` counts transitions (as NumPyro's and Stan's sample counts do); with thinning,
    about ``num_samples // thin`` draws are kept (exactly that when sampling starts at a multiple of
    thin: thinning counts the global transition index). The other arguments are :class:`Sampler`'s;
    use a Sampler directly to continue a run later with identical results.
    """
    count("num_samples", num_samples, 1)
    sampler = Sampler(q0, step_size=step_size, num_leapfrog_steps=num_leapfrog_steps, mu=mu,
                      thin=thin, keep_samples=keep_samples, seed=seed, generator=generator,
                      progress=progress, chunk_size=chunk_size, chain_offset=chain_offset,
                      first_transition=first_transition, num_warmup=num_warmup, target=target,
                      target_accept=target_accept, adapt_step_size=adapt_step_size,
                      adapt_mass_matrix=adapt_mass_matrix, pooled=pooled, jitter=jitter,
                      inverse_mass=inverse_mass, adapt_windows=adapt_windows)
    return sampler.run(num_samples, last=True)  # the sampler ends here: its draws, no copy
