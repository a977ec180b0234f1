"""The long-chain driver: ``Sampler`` and ``sample`` run many chains for many transitions.

The kernel (``fused_hmc::sample`` / ``fused_hmc::warmup`` through ``kernel.ChainKernel``: K transitions of every chain per call,
state, Welford moments, acceptance counters and the warm-up's adaptation state updated in place on
the device, for every target) is separate from this driver, which only chooses chunks, keeps the books, shows progress and handles Ctrl-C (as
NumPyro keeps ``MCMCKernel`` apart from ``MCMC``).

Every random number comes from the native philox stream keyed by (seed, global chain id, global
transition index, draw), so results do not depend on the chunking, on how the chains are split
across calls (``chain_offset``) or on how a run is split into resumed runs.
"""
from __future__ import annotations

import contextlib
import inspect
import math
import uuid

import torch

from .._build import load_extension, require_cuda_kernels
from ..targets import StandardGaussian
from .arguments import INT64_MAX, check_q0, count
from .checkpoint import Checkpointer, read_checkpoint
from . import distributed, resources
from .resources import ChunkClock, ChunkPlanner, SigintDeferral, check_memory
from .result import SampleResult
from .stuck_chains import warn_if_stuck
from .settings import SamplerOptions, check_settings, signature
from .superchains import superchain_starts
from .kernel import ChainKernel, dense_factor


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

    Args (the keyword arguments and their defaults are listed once, by
    :class:`~fused_hmc.sampling.settings.SamplerOptions`; checked once into ``sampler.settings``):
        q0: [chains, dim] float32/float64 starting states (CPU or CUDA); copied, never modified.
        step_size: leapfrog step eps > 0: a number, or a [chains] tensor of per-chain step sizes
            (e.g. ``result.step_size`` of an earlier run). With warm-up, the initial step size eps0
            (dual averaging starts at mu = log(10 eps0)). num_leapfrog_steps: L >= 1 (with
            adapt_trajectory_length: the initial length in steps, T0 = L step_size; with
            trajectory_length: unused).
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
        target: a built-in target of :mod:`fused_hmc.targets` (StandardGaussian, DiagonalGaussian,
            DenseGaussian, ...: targets.BUILT_IN) or a fused_hmc.CppTarget (default N(mu, I)); its
            gradient is computed inside the kernel.
        target_accept: the average acceptance statistic warm-up aims for (default None: 0.8, as
            Stan's adapt_delta and NumPyro's target_accept_prob; 0.651, the ChEES paper's, with
            adapt_trajectory_length; see :mod:`fused_hmc.sampling.warmup`).
        adapt_step_size, adapt_mass_matrix: what warm-up adapts.
        pooled: one step size and one inverse mass for all chains, adapted from all chains'
            statistics (pooled inside the kernel, no host sync per transition), instead of one per
            chain. The inverse mass is the geometric mean of the chains' own window variances,
            so a few chains far from the rest cannot inflate it. Needs a scalar step_size and an
            inverse_mass of shape [dim] (or None). Per-chain dual averaging ends above target_accept after a short final run (see
            :mod:`fused_hmc.sampling.warmup`); with many chains prefer pooled=True. Default None:
            True with adapt_trajectory_length, else False.
        pooled_acceptance: what a pooled step size is adapted on: "mean" (the chains' mean
            acceptance statistic) or "harmonic" (their harmonic mean, divergent transitions left
            out, as the ChEES paper and BlackJAX form it). The harmonic mean follows the chains
            that accept least, so a step size too large for some region of the target cannot
            strand the chains there: smaller steps, no stuck chains, the chains' own acceptance
            above target_accept (:mod:`fused_hmc.sampling.warmup`). Default None: "harmonic"
            with adapt_trajectory_length, else "mean".
        adapt_trajectory_length: warm-up also adapts one trajectory length T for all chains by
            ChEES (Hoffman, Radul & Sountsov 2021; BlackJAX's chees_adaptation), inside the
            kernel, with the pooled step size and inverse mass; with pooled=False (the CPU only,
            one process) each chain adapts its own step size and inverse mass beside the one T,
            and T's clip uses the median step size. Each transition then runs min(max_leapfrog_steps, max(1, ceil(w T / eps))) leapfrog
            steps, w ~ U[0, 1) from the chain's philox stream, in warm-up and sampling alike,
            starting from T0 = num_leapfrog_steps * step_size. Needs num_warmup > 0. See
            :mod:`fused_hmc.sampling.warmup`; the result reports T (``trajectory_length``) and
            the gradient evaluations spent.
        max_leapfrog_steps: the cap on a transition's leapfrog steps when its length is a time
            (adapt_trajectory_length or trajectory_length; default 1000, as BlackJAX's); ChEES
            also keeps T <= max_leapfrog_steps * eps.
        trajectory_length: a fixed trajectory length T > 0, jittered as above, instead of
            num_leapfrog_steps steps (e.g. ``result.trajectory_length`` of a ChEES run, with its
            ``step_size`` and ``inverse_mass``, to continue it). Not with adapt_trajectory_length.
        jitter: each transition's step size is eps * (1 + jitter * (2 v - 1)), v ~ U[0, 1) from the
            chain's philox stream (reproducible), so trajectory lengths vary (default 0: none;
            e.g. 0.1 for [0.9, 1.1] eps). Jitter in warm-up and sampling alike.
        inverse_mass: the inverse mass matrix M^-1: diagonal, [dim] (shared) or [chains, dim]; or
            with mass_matrix="dense", [dim, dim] or [chains, dim, dim], symmetric positive
            definite; default the identity. The momentum is p ~ N(0, M) and the kinetic energy
            0.5 p^T M^-1 p (Neal 2011, sec. 5.4.1).
        mass_matrix: "diagonal" (default) or "dense": what warm-up adapts (Stan's diag_e or
            dense_e: each slow window's regularised covariance, per chain or pooled) and what
            inverse_mass is (docs/MASS_MATRIX.md). Dense: dim <= 128, CPU chains.
        mass_estimator: "draws" (default, Stan's: the window draws' variances or covariance) or
            "gradients" (nutpie's: from the draws and the log density's gradients at them, the
            Fisher-divergence estimate, exact for a Gaussian whatever the draws;
            docs/MASS_MATRIX.md). Gradients: CPU chains, one process.
        adapt_windows: (init_buffer, base_window, term_buffer) of the warm-up: initial fast
            interval, first slow window (then doubling), terminal fast interval; scaled to
            15% / 75% / 10% when they do not fit in num_warmup (the terminal interval at least 25
            where that fits). None (default): Stan's (75, 25, 50), or (75, 25, 300) for a pooled
            step size on the harmonic mean (ChEES's default) when num_warmup >= 400: its
            noisier statistic needs the longer terminal interval
            (:mod:`fused_hmc.sampling.warmup`).
        out: a path (a new zarr store, a directory) to stream the kept draws to as they come,
            instead of keeping them in memory (see :mod:`fused_hmc.sampling.streaming`): only a few
            chunk buffers stay resident, so a run may keep more draws than memory holds. Results
            then have ``samples=None`` and ``samples_path=out``; at the end of each run the store
            also gets every other field, so that ``fused_hmc.load(out)`` reads the result.
        checkpoint: a path (one file) to which the sampler's whole state is written between
            chunks, every `checkpoint_every` seconds, when a run ends and when Ctrl-C stops it
            (atomically: a temporary file renamed over it); ``Sampler.from_checkpoint(path)``
            continues from it in any process with results bit-identical to an uninterrupted run.
            Draws kept in memory are part of every checkpoint (use `out` for long runs).
        checkpoint_every: seconds between checkpoints (0: after every chunk).
        process_group: a ``torch.distributed`` ProcessGroup to split the chains over processes
            (see :mod:`fused_hmc.sampling.distributed`), or None (default: this process alone).
            Construct on every rank (a collective): q0 is this rank's chains, which are the global
            chains chain_offset .. chain_offset + chains - 1, chain_offset being the chains of the
            lower ranks (so chain_offset= must stay 0); the seed must be the same on every rank
            (None on every rank: rank 0's draw). Every rank's results are its own chains' (bit for
            bit those of one process running every rank's chains in rank order, per-chain warm-up
            included), with ``global_summary`` (moments, acceptance, ESS / R-hat of every rank's
            chains) from each ``run``, which every rank must call alike. pooled=True pools the
            warm-up (and with adapt_trajectory_length=True ChEES's trajectory length) over every
            rank's chains (:mod:`fused_hmc.sampling.pooled_ranks`). Not with checkpoint= (yet).
        superchains: K, to run the chains as K superchains for nested R-hat (Margossian et al.
            2024; see :mod:`fused_hmc.sampling.superchains`): chains k M .. (k + 1) M - 1
            (M = chains / K, which must be whole) all start at q0's row k M, the first of their
            group, and ``summary()`` reports their nested R-hat besides split R-hat. An integer
            >= 2 dividing the chains; None (default): every chain starts at its own row. The
            groups are this batch's rows (chain_offset plays no part).

    Every configuration runs the one chain kernel (the same operations on CPU and CUDA); N(mu, I)
    with one step size, no mass matrix, jitter or warm-up is exactly the seed sampler's.
    """

    @distributed.spreads_errors
    def __init__(self, q0: torch.Tensor, **options):
        options = SamplerOptions.of("Sampler", options)
        self._group = (None if options.process_group is None
                       else distributed.ChainGroup(options.process_group,
                                                   "constructing the Sampler"))
        self._q = check_q0(q0)
        self.settings = settings = check_settings(options, self._q)
        if self._group is not None and settings.warmup.mass_estimator == "gradients":
            raise ValueError("mass_estimator='gradients' runs in one process for now: pass no "
                             "process_group, or mass_estimator='draws'")
        w = settings.warmup
        if self._group is not None and w.adapt_trajectory_length and not w.pooled:
            raise ValueError("adapt_trajectory_length=True with pooled=False runs in one process "
                             "for now (its trajectory length comes from every chain): pass no "
                             "process_group, or pooled=True")
        self.superchains = settings.superchains
        if self.superchains is not None:
            self._q = superchain_starts(self._q, self.superchains)
        self._out = settings.out
        self._checkpointer = (Checkpointer(settings.checkpoint, settings.checkpoint_every)
                              if settings.checkpoint is not None else None)
        self.chain_offset = settings.chain_offset
        if self._group is not None:
            self._group.check_arguments(self.chain_offset, settings.checkpoint)
        self._next = settings.first_transition
        seed_given = settings.seed is not None
        self.seed = (settings.seed if seed_given
                     else _draw_seed(settings.generator, self._q.device))
        self.global_chains = self._q.shape[0]  # every rank's chains
        if self._group is not None:  # the constructor's collectives
            self.chain_offset, self.seed, self.global_chains = self._group.layout(
                self._q, self.seed, seed_given,
                distributed.run_settings(self, settings.target, options.mu,
                                         settings.inverse_mass))
        self._key = self.seed - 2**64 if self.seed > INT64_MAX else self.seed  # int64 for the op
        if self._q.is_cuda:
            require_cuda_kernels()
        load_extension()  # build now, so that the first chunk's timing measures sampling
        self._chains = self._chain_kernel()
        # The target as given (float64: mu is rounded to the chains' dtype where it is used).
        self.target = settings.target if settings.target is not None else StandardGaussian(
            torch.zeros(self._q.shape[1]) if options.mu is None else torch.as_tensor(options.mu))
        # What a checkpoint records to build this sampler again (then its state is restored).
        self._arguments = settings.checkpoint_arguments(self.target, self.seed, self.chain_offset,
                                                        self._next)

        chains, dim = self._q.shape
        f64 = dict(dtype=torch.float64, device=self._q.device)
        self._mean = torch.zeros(chains, dim, **f64)
        self._m2 = torch.zeros(chains, dim, **f64)
        self._no_samples = self._q.new_empty(0)
        self._sample_parts: list[torch.Tensor] = []
        self._num_transitions = 0
        self._num_kept = 0
        self._interrupted = False
        self._spent = False  # a last run handed the draws over
        self._remaining: int | None = None  # sampling transitions left of the run begun last
        self._run_id = uuid.uuid4().hex  # in the out= store and the checkpoint: they must match
        self._draw_store = None  # the out= store, once opened
        self._stream_resumes = False  # the out= store exists: cut back to _num_kept on opening
        self._stream = None  # the DrawStream of the run in progress

    def _chain_kernel(self) -> ChainKernel:
        chains, dim = self._q.shape
        target, inverse_mass = self.settings.target, self.settings.inverse_mass
        if target is None:
            target = StandardGaussian(self.settings.mu)
        per_chain_step = isinstance(self.step_size, torch.Tensor)
        dense = self.settings.mass_matrix == "dense"
        per_chain_mass = inverse_mass is not None and inverse_mass.dim() == (3 if dense else 2)
        shared = self.warmup.pooled or (self.warmup.num_warmup == 0 and not per_chain_step
                                        and not per_chain_mass)
        groups = 1 if shared else chains
        step = torch.as_tensor(self.step_size, dtype=torch.float64, device=self._q.device)
        if dense:  # the op takes the Cholesky factors (kernel.dense_factor)
            if inverse_mass is None:
                inverse_mass = torch.eye(dim, dtype=self._q.dtype, device=self._q.device)
            inverse_mass = dense_factor(inverse_mass.expand(groups, dim, dim), self._q.dtype)
        elif inverse_mass is not None:
            inverse_mass = inverse_mass.expand(groups, dim)
        return ChainKernel(self._q, target, step.expand(groups), inverse_mass, self.jitter,
                           self.num_leapfrog_steps, self._key, self.chain_offset, self.warmup,
                           self._next, self.trajectory_length, self.max_leapfrog_steps,
                           pool_over=self._group if self.warmup.pooled else None)

    # The checked settings under their arguments' names (result fields and checks read them).
    step_size = property(lambda self: self.settings.step_size)
    num_leapfrog_steps = property(lambda self: self.settings.num_leapfrog_steps)
    warmup = property(lambda self: self.settings.warmup)
    trajectory_length = property(lambda self: self.settings.trajectory_length)
    max_leapfrog_steps = property(lambda self: self.settings.max_leapfrog_steps)
    jitter = property(lambda self: self.settings.jitter)
    thin = property(lambda self: self.settings.thin)
    keep_samples = property(lambda self: self.settings.keep_samples)
    progress = property(lambda self: self.settings.progress)
    chunk_size = property(lambda self: self.settings.chunk_size)

    @property
    def _warmup_done(self) -> int:
        """Warm-up transitions run so far: the one count is the kernel's warm-up left."""
        return self.warmup.num_warmup - self._chains.warmup_left

    @property
    def device(self) -> torch.device:
        return self._q.device

    @property
    def next_transition(self) -> int:
        """Global index of the next transition to run."""
        return self._next

    @classmethod
    def from_checkpoint(cls, path, *, target=None, trust_source: bool = False, device=None,
                        progress: bool | None = None) -> Sampler:
        """The sampler whose checkpoint is at `path` (``checkpoint=path``), in any process: its
        ``run()`` continues the run that was checkpointed (a run stopped by Ctrl-C, killed or
        still going when the checkpoint was written) with results bit-identical to that run left
        alone; ``run(n)`` runs n more. It keeps checkpointing to `path` (and streaming to its
        ``out=`` store, cut back to the draws the checkpoint counted). device: where to continue
        (default: the device it ran on; another device gives the same chains up to rounding);
        progress: show a progress bar (default: as the checkpointed sampler did).

        A checkpoint is data: the C++ source of a CppTarget in it is not compiled unless `target`
        gives the target again (it must be the one the checkpoint ran) or ``trust_source=True``
        says the file is trusted (fused_hmc.sampling.stored_target).
        """
        from .stored_target import resupplied

        arguments, tensors, integers, draws = read_checkpoint(path, device)
        arguments["target"] = resupplied(arguments["target"], target, trust_source, path)
        if progress is not None:
            arguments["progress"] = progress
        # The checkpoint's q is the chains' state, not their start: not grouped again.
        superchains = arguments.pop("superchains", None)
        sampler = cls(tensors.pop("q"), checkpoint=path, **arguments)
        sampler.superchains = sampler._arguments["superchains"] = superchains
        sampler._restore(tensors, integers, draws)
        return sampler

    @distributed.spreads_errors
    def run(self, num_transitions: int | None = None, *, last: bool = False) -> SampleResult:
        """Runs `num_transitions` more transitions of every chain and returns the result so far.

        ``run()`` (no count) runs what is left of the run begun last: one stopped by Ctrl-C, or
        the checkpointed one of a sampler made by :meth:`from_checkpoint` (nothing, when it had
        finished: the result is returned as it is).

        The result shares no memory with the sampler, so its draws are a copy of the sampler's;
        ``last=True`` says this is the sampler's last run: the result then takes the draws without
        a copy (half the peak memory, as ``sample`` does), and the sampler cannot be used again.

        The first run does the warm-up first (its draws are discarded). Ctrl-C (SIGINT, whatever
        Python handler is installed) is held while a chunk runs and its books are kept, then handed
        to that handler; when it raises KeyboardInterrupt (Python's default does) the run stops and
        returns what was sampled, with ``interrupted=True`` (writing a last checkpoint when the
        sampler has one), and a later ``run`` carries on from there (within the warm-up too)
        exactly as if never interrupted. Once the run has stopped, a further Ctrl-C while the
        result is assembled does not lose it. Raises SamplesTooLargeError (a MemoryError) before
        any transition when the draws kept in memory (or, with ``out=``, the stream's buffers)
        would not fit in free memory.

        With a process_group, every rank calls run alike (a collective at the end gives the
        result's ``global_summary``; an error on one rank makes the others raise there too).
        """
        if self._group is not None:
            self._group.expect("running")
        if not isinstance(last, bool):
            raise TypeError(f"last must be True or False, got {last!r}")
        self._check_not_spent()
        warmup = self._chains.warmup_left
        n = self._transitions_to_run(num_transitions, warmup)
        kept_new = self._kept_in(self._next + warmup, n)
        # Checked (and allocated) before the warm-up, so that an absurd request costs nothing.
        buffer = (self._allocate_draws(kept_new, copy_for_result=not last)
                  if self.keep_samples and self._out is None else None)
        result = None
        if warmup and self._group is not None and self.warmup.pooled:
            # The pooled warm-up's gathers follow (one per transition, whatever the chunks): a
            # rank that failed on its way here stops the others at this vote instead.
            self._group.meet("running")
        try:
            capacity = self._open_stream(kept_new) if self._out is not None else 0
            with SigintDeferral() as sigint, self._on_device():
                self._remaining = n
                if self._checkpointer is not None:
                    self._checkpointer.start()
                completed = ((not warmup or self._run_warmup(sigint))
                             and (n == 0 or self._run_chunks(n, buffer, capacity, sigint)))
                self._interrupted = not completed  # Ctrl-C in the last chunk stopped nothing
                self._close_stream()  # every kept draw is in the out= store
                result = self._result(hand_over=last)
                self._publish(result)
                self._spent = last
        except KeyboardInterrupt:  # a SIGINT held since the run stopped, delivered on leaving
            if result is None:
                raise
        finally:
            self._abandon_stream()  # only when an error left it open
        if self._group is not None:  # every rank's statistics
            result = self._group.merge(result, self._mean, self._m2)
        return result  # the run is over: its result survives a further Ctrl-C

    def _transitions_to_run(self, num_transitions: int | None, warmup: int) -> int:
        if num_transitions is not None:
            return count("num_transitions", num_transitions, 1, INT64_MAX - self._next - warmup)
        if self._remaining is None:
            raise ValueError("num_transitions is needed: this sampler has no run to continue "
                             "(run() without it continues an interrupted or checkpointed run)")
        return self._remaining

    def _restore(self, tensors: dict, integers: dict, draws: torch.Tensor | None) -> None:
        """The state of a checkpoint (see _checkpoint_state), into a sampler just built with the
        checkpoint's arguments."""
        for name in ("mean", "m2"):
            getattr(self, f"_{name}").copy_(tensors[name])
        self._chains.load_checkpoint_state({name[len("chains_"):]: t for name, t in tensors.items()
                                            if name.startswith("chains_")}, integers)
        self._next = integers["next_transition"]
        self._num_transitions = integers["num_transitions"]
        self._num_kept = integers["num_kept"]
        self._interrupted = integers["interrupted"]
        self._remaining = integers["remaining"]
        self._run_id = integers["run_id"]
        self._sample_parts = [draws] if draws is not None and draws.shape[1] else []
        self._stream_resumes = self._out is not None

    def _checkpoint_state(self) -> dict:
        """Everything a checkpoint holds (checkpoint.py writes it): the constructor's arguments,
        the books (tensors with their dimension names, integers), the chains' state, and the
        draws kept in memory (a list of [chains, k, dim] parts, or None)."""
        chain_tensors, chain_integers = self._chains.checkpoint_state()
        tensors = {"q": (self._q, ("chain", "dim")), "mean": (self._mean, ("chain", "dim")),
                   "m2": (self._m2, ("chain", "dim"))}
        tensors.update({f"chains_{name}": value for name, value in chain_tensors.items()})
        integers = dict(chain_integers, next_transition=self._next,
                        warmup_done=self._warmup_done, num_transitions=self._num_transitions,
                        num_kept=self._num_kept, interrupted=self._interrupted,
                        remaining=self._remaining, run_id=self._run_id)
        draws = list(self._sample_parts) if self.keep_samples and self._out is None else None
        return {"arguments": self._arguments, "tensors": tensors, "integers": integers,
                "draws": draws}

    def _write_checkpoint(self) -> None:
        if self._stream is not None:
            self._stream.flush()  # the out= store holds every draw the checkpoint counts
            from .storage import consolidate

            consolidate(self._out)  # so xarray reads those draws, should the run be killed
        self._checkpointer.write(self._checkpoint_state())

    def _publish(self, result: SampleResult) -> None:
        """At the end of a run: the out= store gets the result's other fields, then the last
        checkpoint is written (so a finished checkpoint means a complete store)."""
        if self._out is not None:
            from .saving import complete_stream_store

            complete_stream_store(self._out, result)
        if self._checkpointer is not None:
            self._write_checkpoint()

    # ---- the out= stream ------------------------------------------------------------------------

    def _open_stream(self, kept_new: int) -> int:
        """Opens the out= store (made on the first run, cut back to the checkpoint's draws on a
        resumed one) and, when the run keeps draws, a DrawStream whose buffers fit in memory;
        returns the draws per buffer (0: none kept)."""
        from .streaming import SLOTS, DrawStream, create_store, reopen_store, slot_capacity

        chains, dim = self._q.shape
        if self._draw_store is None:
            if self._stream_resumes:
                self._draw_store = reopen_store(self._out, self._run_id, self._num_kept)
            else:
                self._draw_store = create_store(
                    self._out, self._run_id, chains, dim, self._q.dtype, self.chain_offset,
                    {"sampler": "fused_hmc", "seed": str(self.seed), "thin": self.thin})
        if kept_new == 0:
            return 0
        draw_bytes = self._draw_bytes(1)
        capacity = slot_capacity(draw_bytes, kept_new,
                                 resources.available_memory(self._q.device))
        what = (f"streaming {kept_new} draws of {chains} chains x {dim} dims through {SLOTS} "
                f"buffers of {capacity} draws")
        advice = "run fewer chains at a time"
        check_memory(SLOTS * capacity * draw_bytes, self._q.device, what, advice)
        if self._q.is_cuda:  # and as many pinned host buffers
            check_memory(SLOTS * capacity * draw_bytes, torch.device("cpu"), what, advice)
        self._stream = DrawStream(self._draw_store, chains, dim, self._q.dtype, self._q.device,
                                  capacity)
        return capacity

    def _close_stream(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            stream.close()

    def _abandon_stream(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - the run's own error is the one to report
                pass

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

        with self._progress_bar(left, "warm-up") as bar:
            return self._chunk_loop(left, launch, bar, sigint)

    def _run_chunks(self, n: int, buffer: torch.Tensor | None, capacity: int,
                    sigint: SigintDeferral) -> bool:
        """Runs n sampling transitions, keeping draws in `buffer` (or, with out=, streaming them
        through buffers of `capacity` draws); False when Ctrl-C stopped it."""
        drawn = 0  # draws of this run, stored in buffer[:, :drawn]
        stream, streamed = self._stream, None  # streamed: the stream's buffer for the next chunk

        def wait_for_a_buffer(size: int) -> None:  # (not timed: the disk's pace, not the op's)
            nonlocal streamed
            kept = self._kept_in(self._next, size)
            streamed = stream.buffer(kept) if kept else None

        def launch(size: int) -> None:
            nonlocal drawn
            kept = self._kept_in(self._next, size)
            if stream is not None and kept:
                draws = streamed
            elif buffer is not None and kept:
                draws = buffer[:, drawn:drawn + kept]
            else:
                draws = self._no_samples
            self._chains.sample(self._q, self._next, size, self.thin, draws, self._mean,
                                self._m2, self._num_kept)
            if stream is not None and kept:
                stream.submit(self._num_kept, kept)
            # The books of the call (SIGINT is held meanwhile), consistent after every chunk.
            self._next += size
            self._num_transitions += size
            self._num_kept += kept
            self._remaining -= size
            if buffer is not None and kept:
                if drawn == 0:
                    self._sample_parts.append(buffer[:, :kept])
                else:
                    self._sample_parts[-1] = buffer[:, :drawn + kept]
                drawn += kept

        def fits_a_buffer(size: int) -> int:  # a chunk keeps at most `capacity` draws
            first = self._next
            return min(size, (first // self.thin + capacity + 1) * self.thin - 1 - first)

        with self._progress_bar(n) as bar:
            if stream is None:
                return self._chunk_loop(n, launch, bar, sigint)
            return self._chunk_loop(n, launch, bar, sigint, fits_a_buffer, wait_for_a_buffer)

    def _chunk_loop(self, total: int, launch, bar, sigint: SigintDeferral, limit=None,
                    prepare=None) -> bool:
        """Calls launch(size) for chunks covering `total` transitions (each at most limit(size)
        and after prepare(size), untimed, when given); False when Ctrl-C (a KeyboardInterrupt)
        stopped it first. A SIGINT held during a chunk is delivered before the next one, after the
        chunk's books are kept; a checkpoint due is written there too."""
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
                if limit is not None:
                    size = limit(size)
                if prepare is not None:
                    prepare(size)
                clock.before_launch()
                launch(size)
                done += size
                clock.after_launch(size)
                if self._checkpointer is not None and self._checkpointer.due():
                    self._write_checkpoint()
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
        warm, sampling = self._chains.chain_statistics()
        accepted, prob = sampling["accept_count"], sampling["accept_prob_sum"]
        return SampleResult(
            samples=self._all_draws(hand_over) if self.keep_samples and self._out is None
            else None,
            mean=self._mean.clone() if n > 0 else nan,
            var=self._m2 / (n - 1) if n > 1 else nan.clone(),
            accept_count=accepted,
            accept_rate=accepted.double() / transitions if transitions else
            torch.full_like(prob, math.nan),
            mean_accept_prob=prob / transitions if transitions else torch.full_like(prob, math.nan),
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
            target=self.target,
            num_leapfrog_steps=self.num_leapfrog_steps,
            jitter=self.jitter,
            warmup=self.warmup,
            samples_path=None if self._out is None else str(self._out),
            superchains=self.superchains,
            trajectory_length=self._chains.trajectory_length(),
            max_leapfrog_steps=self.max_leapfrog_steps,
            warmup_gradient_evaluations=int(warm["gradient_evaluations"].sum()),
            sampling_gradient_evaluations=int(sampling["gradient_evaluations"].sum()),
            chain_statistics=sampling,
            warmup_chain_statistics=warm,
            lanes=self._chains.lanes,
            warmup_reseeded=self._chains.warmup_reseeded(),
            mass_factorization_failures=self._chains.mass_factorization_failures(),
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


def sample(q0: torch.Tensor, num_samples: int, **options) -> SampleResult:
    """Runs every chain of q0 for `num_warmup` warm-up transitions (adapting step size and diagonal
    inverse mass, and with ``adapt_trajectory_length=True`` the trajectory length by ChEES; not
    returned) and then `num_samples` HMC transitions on the target (default N(mu, I)), and
    returns the result.

    ``num_samples`` counts transitions (as NumPyro's and Stan's sample counts do); with thinning,
    about ``num_samples // thin`` draws are kept (exactly that when sampling starts at a multiple of
    thin: thinning counts the global transition index). The other arguments are :class:`Sampler`'s;
    use a Sampler directly to continue a run later with identical results. With ``checkpoint=``,
    ``Sampler.from_checkpoint(checkpoint).run()`` finishes a run that was killed or stopped, in
    any process, with the result this call would have returned; with ``out=``, the draws stream
    to that zarr store instead of memory. Warns (:class:`StuckChainsWarning`) when some chains
    accepted none of at least 20 sampling transitions (:mod:`fused_hmc.sampling.stuck_chains`).
    """
    count("num_samples", num_samples, 1)
    SamplerOptions.of("sample", options)  # an unknown keyword named as sample's
    sampler = Sampler(q0, **options)
    result = sampler.run(num_samples, last=True)  # the sampler ends here: its draws, no copy
    warn_if_stuck(result)
    return result


# The keyword arguments as SamplerOptions lists them, for help() and inspect.
_POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD
_Q0 = inspect.Parameter("q0", _POSITIONAL, annotation="torch.Tensor")
Sampler.__init__.__signature__ = signature(inspect.Parameter("self", _POSITIONAL), _Q0)
sample.__signature__ = signature(_Q0, inspect.Parameter("num_samples", _POSITIONAL,
                                                        annotation="int")).replace(
    return_annotation="SampleResult")
