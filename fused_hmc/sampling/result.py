"""``SampleResult``: everything a long run produced, with ArviZ export and a printed summary."""
from __future__ import annotations

import sys
from typing import NamedTuple, TextIO

import torch

from .. import diagnostics
from ..targets import BuiltInTarget
from .chain_statistics import RESULT_FIELDS, totals
from .warmup import WarmupSettings


def statistics_lines(totals: dict, transitions: int) -> list[str]:
    """The summary lines on the chain statistics beyond acceptance and gradient evaluations,
    from their sums over the chains (`totals`, chain_statistics.totals) and the sampling
    transitions of all chains: the divergent transitions (what :meth:`SampleResult.summary`,
    the distributed summary and the CLI print)."""
    if "divergences" not in totals or not transitions:
        return []
    count = totals["divergences"]
    return [f"divergences {count:,} of {transitions:,} sampling transitions "
            f"({100 * count / transitions:.3g}%)" + (": the step size is too large for part of "
                                                      "the target" if count else "")]


class SampleResult(NamedTuple):
    """The outcome of :func:`fused_hmc.sample` or :meth:`fused_hmc.Sampler.run`, since the sampler
    was created (a resumed run reports all its transitions, as one long run would).

    Thinning counts the global transition index t of the philox stream: the state after transition
    t is kept when (t + 1) % thin == 0. Per-chain tensors live on the chains' device and share no
    memory with the sampler: later runs do not change them, nor changing them the sampler.

    Attributes:
        samples: [chains, num_kept, d] in q0's dtype, the kept states in order; ``None`` when the
            sampler was made with ``keep_samples=False``.
        mean: [chains, d] float64, per-chain mean of the kept draws (Welford, accumulated on the
            device in float64 whatever q0's dtype). NaN before the first kept draw.
        var: [chains, d] float64, per-chain unbiased variance m2 / (num_kept - 1) of the kept draws
            (Welford). NaN while num_kept < 2.
        accept_count: [chains] int64, accepted transitions per chain.
        accept_rate: [chains] float64, accept_count / num_transitions.
        mean_accept_prob: [chains] float64, mean over transitions of min(1, exp(log_alpha)), the
            Metropolis acceptance probability (a lower-variance estimate of the acceptance rate).
        num_transitions: transitions each chain ran (not counting interrupted, unrun chunks).
        num_kept: draws kept per chain (= samples.shape[1] when samples are kept).
        final_state: [chains, d] in q0's dtype, the state after the last transition.
        seed: the philox key (0 <= seed < 2**64); with chain_offset and next_transition it
            continues the exact same chains in a later call.
        next_transition: the global transition index the next transition would have.
        interrupted: True when Ctrl-C (KeyboardInterrupt) stopped the run early; every field then
            describes the transitions that did complete, consistently.
        thin: keep every thin-th transition (by global index, see above).
        chain_offset: chain b of this batch is chain chain_offset + b of the philox stream.
        step_size: [chains] float64, the step size each chain samples with (after warm-up: the
            adapted one; before jitter). Pass it back as ``step_size=`` to continue.
        inverse_mass: [chains, d] in q0's dtype, each chain's diagonal inverse mass matrix (ones
            unless given or adapted); with ``mass_matrix="dense"`` [chains, d, d], each chain's
            dense inverse mass L L^T (:attr:`mass_matrix` says which). Pass it back as
            ``inverse_mass=`` (with ``mass_matrix``) to continue.
        num_warmup: warm-up transitions run (their draws are not in samples or the statistics;
            next_transition counts them).
        target: the target sampled (a :mod:`fused_hmc.targets` built-in one, or a CppTarget;
            N(mu, I) given as ``mu=`` is a StandardGaussian). num_leapfrog_steps, jitter: the
            trajectory settings
            (num_leapfrog_steps: with a trajectory length, the initial length in steps of ChEES,
            or unused).
        warmup: the warm-up's :class:`~fused_hmc.sampling.warmup.WarmupSettings` (asked for;
            num_warmup says how much of it ran).
        samples_path: where the draws are when they were streamed to disk (``out=``) instead of
            kept in memory: a zarr store whose ``posterior/q[:, :num_kept]`` are this result's
            draws (``samples`` is then None; :meth:`to_arviz`, :meth:`summary` and :meth:`plot`
            read them from there). None otherwise.
        superchains: K when the chains ran as K superchains (``superchains=K``: chains
            k M .. (k + 1) M - 1, M = chains / K, started from one point each), whose nested R-hat
            :meth:`summary` reports; None otherwise.
        trajectory_length: the trajectory length T the transitions run with (after a warm-up
            with ``adapt_trajectory_length=True``: the one ChEES adapted; or the one given):
            a transition runs min(max_leapfrog_steps, max(1, ceil(w T / eps))) leapfrog steps,
            w ~ U[0, 1) its jitter. Pass it back as ``trajectory_length=`` (with ``step_size``
            and ``inverse_mass``) to continue. None for a fixed num_leapfrog_steps.
        max_leapfrog_steps: the cap on a transition's steps when its length is a time.
        warmup_gradient_evaluations, sampling_gradient_evaluations: gradient evaluations of all
            chains together in the warm-up and in sampling, as the kernel counted them: L per
            transition of L leapfrog steps, plus one per kernel call for a target that carries
            the gradient at the chain's state from one transition to the next (a CppTarget and
            the models), or one per transition for the Gaussians (which evaluate it at each
            start).
        global_summary: with a ``process_group``, the statistics of every rank's chains (a
            :class:`fused_hmc.sampling.distributed.GlobalSummary`: merged moments, summed
            acceptance, the draws of the first global chains for ESS / R-hat), which
            :meth:`summary` then prints; None otherwise (not saved by :meth:`save`).
        constrained: the constrained draws read from a saved file, {name: [chains, num_kept,
            *shape]}; None otherwise (see :meth:`constrained_draws`).
        lanes: the CUDA threads each chain of a rows-form CppTarget took (lanes="auto" chooses
            them from the chain count and the GPU; 1 on the CPU); the draws do not depend on
            them. None for the other targets.
        warmup_reseeded: [chains] int64 after a pooled warm-up (``pooled=True`` or ChEES): how
            many times each chain, never having moved from its state over a stretch of the
            warm-up, was restarted from another chain's state (:mod:`fused_hmc.sampling.
            far_starts`; :meth:`summary` says how many chains were). None otherwise.
        chain_statistics: {name: [chains]} over the sampling transitions, one entry per
            per-chain statistic the kernels count (:data:`fused_hmc.sampling.chain_statistics.
            STATISTICS`, in its order, each in its dtype): ``accept_count``, ``accept_prob_sum``
            (the sum of min(1, exp(log_alpha))), ``gradient_evaluations``, ``divergences``
            (transitions whose energy error H_new - H_old exceeds 1000 or is not finite, as Stan
            counts them), and any statistic added to csrc/math/stats/chain_statistics.def. None
            in files saved before them.
        warmup_chain_statistics: the same over the warm-up's transitions.
        mass_factorization_failures: [chains] int64 with a dense mass: how many slow windows'
            ends kept the chain's previous inverse mass because the window's regularised
            covariance was not finite and positive definite (:meth:`summary` warns of them).
            None with a diagonal mass.

    :meth:`save` writes every field to a zarr store that :func:`fused_hmc.load` reads back bit for
    bit and xarray / ArviZ open (``xarray.open_datatree(path, engine="zarr")``).
    """
    samples: torch.Tensor | None
    mean: torch.Tensor
    var: torch.Tensor
    accept_count: torch.Tensor
    accept_rate: torch.Tensor
    mean_accept_prob: torch.Tensor
    num_transitions: int
    num_kept: int
    final_state: torch.Tensor
    seed: int
    next_transition: int
    interrupted: bool
    thin: int
    chain_offset: int
    step_size: torch.Tensor | None = None
    inverse_mass: torch.Tensor | None = None
    num_warmup: int = 0
    target: BuiltInTarget | object | None = None  # or a CppTarget (a StoredCppTarget, loaded)
    num_leapfrog_steps: int | None = None
    jitter: float | None = None
    warmup: WarmupSettings | None = None
    samples_path: str | None = None
    superchains: int | None = None
    global_summary: object = None  # a distributed.GlobalSummary
    trajectory_length: float | None = None
    max_leapfrog_steps: int | None = None
    warmup_gradient_evaluations: int | None = None
    sampling_gradient_evaluations: int | None = None
    constrained: dict | None = None
    lanes: int | None = None
    warmup_reseeded: torch.Tensor | None = None
    chain_statistics: dict[str, torch.Tensor] | None = None
    warmup_chain_statistics: dict[str, torch.Tensor] | None = None
    mass_factorization_failures: torch.Tensor | None = None

    @property
    def mass_matrix(self) -> str:
        """"dense" when ``inverse_mass`` holds dense matrices [chains, d, d], else "diagonal"."""
        dense = self.inverse_mass is not None and self.inverse_mass.dim() == 3
        return "dense" if dense else "diagonal"

    def cpu(self) -> SampleResult:
        """This result with every tensor on the CPU (e.g. for numpy or plotting)."""
        moved = {name: value.cpu() for name, value in self._asdict().items()
                 if isinstance(value, torch.Tensor)}
        moved.update({name: {k: t.cpu() for k, t in getattr(self, name).items()}
                      for name in RESULT_FIELDS if getattr(self, name) is not None})
        return self._replace(**moved)

    def to_arviz(self):
        """The draws as ArviZ data (an ``xarray.DataTree``, arviz-base's InferenceData).

        Group ``posterior`` holds variable ``q`` with dims (chain, draw, dim), and for a target
        with ``constrain`` one variable per constrained parameter with dims (chain, draw,
        <name>_dim_0, ...); chain coordinates are the global chain ids chain_offset + b. Needs
        the draws: kept in memory (``keep_samples=True``) or streamed to disk (``out=``; then read
        lazily from ``samples_path``), and arviz-base.
        """
        if self.samples is None and self.samples_path is None:
            raise ValueError("to_arviz() needs the draws, but this run was made with "
                             "keep_samples=False; sample again with keep_samples=True")
        if self.samples is None:
            from .storage import open_posterior

            return open_posterior(self.samples_path, self.num_kept)
        try:
            from arviz_base import from_dict
        except ImportError as exc:
            raise ImportError("to_arviz() needs arviz-base, a dependency of fused_hmc: "
                              "pip install arviz-base") from exc
        import warnings

        import numpy as np

        chains = self.samples.shape[0]
        constrained = self.constrained_draws() or {}
        with warnings.catch_warnings():
            # ArviZ guesses that more chains than draws means mislabelled axes; here it is the norm.
            warnings.filterwarnings("ignore", message="Found chain dimension to be longer")
            return from_dict(
                {"posterior": {"q": self.samples.detach().cpu().numpy()}
                 | {name: v.detach().cpu().numpy() for name, v in constrained.items()}},
                dims={"q": ["dim"]} | {name: [f"{name}_dim_{k}" for k in range(v.ndim - 2)]
                                       for name, v in constrained.items()},
                coords={"chain": np.arange(self.chain_offset, self.chain_offset + chains)}
                | ({"dim": list(self.parameter_names)} if self.parameter_names else {}),
                attrs={"posterior": self.posterior_attrs()},
            )

    @property
    def parameter_names(self) -> list[str] | None:
        """The target's parameter names (a CppTarget's ``names``), or None."""
        return getattr(self.target, "names", None)

    def constrained_draws(self) -> dict[str, torch.Tensor] | None:
        """The draws as the target's constrained parameters, {name: [chains, num_kept, *shape]}
        (the target's ``constrain`` of the draws, or those saved with the result); None when the
        target has no ``constrain`` or the draws were not kept."""
        from .constrained import of_result

        return of_result(self)

    def posterior_attrs(self) -> dict:
        """The attributes of the ``posterior`` group (in :meth:`to_arviz` and saved files)."""
        return {"sampler": "fused_hmc", "seed": str(self.seed), "thin": self.thin,
                "num_transitions": self.num_transitions}

    def save(self, path, *, overwrite: bool = False) -> None:
        """Writes every field to a zarr store (a directory) at `path`, which
        :func:`fused_hmc.load` reads back bit for bit (same dtypes) and xarray / ArviZ open.

        Layout (every array names its dimensions): group ``posterior`` holds the draws ``q``
        (chain, draw, dim) as :meth:`to_arviz` gives them (absent when no draws were kept); group
        ``fused_hmc`` the other tensors (their own dtypes), the scalars as attributes, and the
        target in ``fused_hmc/target``. Streamed draws (``samples_path``) are copied block by block
        (a save to ``samples_path`` itself completes that store in place). The store is written
        beside `path` and renamed into place, so `path` is never half written. Raises
        FileExistsError when `path` exists, unless ``overwrite=True``.
        """
        from .saving import save_result

        save_result(self, path, overwrite=overwrite)

    def plot(self, path, params=None, *, chains: int = 4, dpi: int = 100) -> None:
        """Writes a PNG to `path`: for each parameter (a dimension index of q or the target's
        name for it, one or a list; default the first 4), its trace (left, with a legend of the
        chains) and rank plot (right) over the first `chains` chains, each titled by the
        parameter's name, drawn with arviz-plots' matplotlib backend. Each row is 2.5 x 5 inches per plot at `dpi`: the image
        is 10 dpi wide and 2.5 dpi per parameter high. Chains longer than 500 draws are thinned
        evenly to at most 500 for the plots. See :func:`fused_hmc.plots.plot_trace_rank`.
        """
        from ..plots import plot_trace_rank

        plot_trace_rank(self, path, params=params, chains=chains, dpi=dpi)

    def trajectory_lines(self, gradients: bool = True) -> list[str]:
        """The header lines on the trajectory and its cost: the trajectory length and step size
        (when the length is a time), and the gradient evaluations (when counted and `gradients`;
        they are this result's chains')."""
        lines = []
        if self.trajectory_length is not None:
            how = ("adapted by ChEES" if self.warmup is not None
                   and self.warmup.adapt_trajectory_length else "given")
            step = self.step_size.double()
            eps = (f"step size {step[0].item():.4g}" if bool((step == step[0]).all())
                   else f"step sizes {step.min().item():.4g} .. {step.max().item():.4g}")
            lines.append(f"trajectory length {self.trajectory_length:.4g} ({how}), {eps}: "
                         f"ceil(w T / eps) leapfrog steps, w ~ U[0, 1), at most "
                         f"{self.max_leapfrog_steps}")
        if gradients and self.sampling_gradient_evaluations is not None:
            warm = (f"{self.warmup_gradient_evaluations:,} warm-up + " if self.num_warmup
                    else "")
            lines.append(f"gradient evaluations {warm}{self.sampling_gradient_evaluations:,} "
                         "sampling (all chains)")
        if gradients and self.chain_statistics is not None:
            lines += statistics_lines(totals(self.chain_statistics),
                                      self.num_transitions * self.final_state.shape[0])
        return lines

    def dense_mass_line(self) -> str:
        """summary()'s line on a dense mass: its kind, condition number, and the window ends
        that kept an old one."""
        c = self.inverse_mass[:256].double()  # (the first chains': pooled, they are one)
        eig = torch.linalg.eigvalsh(c)
        condition = (eig[..., -1] / eig[..., 0]).max().item()
        line = f"mass_matrix: dense (inverse mass condition number {condition:.4g})"
        failures = self.mass_factorization_failures
        if failures is not None and bool((failures > 0).any()):
            line += (f"; {int((failures > 0).sum())} chains kept an old inverse mass at "
                     f"{int(failures.max())} window ends (estimate not positive definite)")
        return line

    def _draws_for_diagnostics(self):
        """The draws to diagnose: the in-memory tensor, or the streamed store's array (which
        diagnostics.diagnose slices before reading)."""
        if self.samples is not None:
            return self.samples
        from .storage import posterior_draws

        return posterior_draws(self.samples_path, self.num_kept)

    def summary(self, *, var_names=None, max_rows: int = diagnostics.SUMMARY_ROWS,
                max_chains: int | None = None, unconstrained: bool = False,
                max_values: int | None = diagnostics.SUMMARY_VALUES,
                file: TextIO | None = None) -> None:
        """Prints per-parameter mean, sd, bulk/tail ESS and R-hat, and the minimum ESS / maximum
        R-hat over them; for chains run in superchains (``superchains=K``), also a line "max
        nested r_hat" (arviz-stats' ``rhat_nested``, see :mod:`fused_hmc.diagnostics`) over the
        same chains. An ESS at arviz-stats' cap N log10 N is marked, and a footnote names the cap.

        var_names: the parameters to show, in that order: names (a target's ``names``) or
        dimension indices, one or a list; default: every parameter, up to the first ``max_rows``
        (a line says how many more there are). For a target with ``constrain`` the rows are
        the constrained values by name (``mu``, ``tau``, ``theta_trans[0]``, ...; their mean and
        sd from the draws), unless ``unconstrained=True`` or the draws were not kept.

        Mean and sd pool every chain and draw (from the Welford statistics, so they need no draws).
        ESS and R-hat need the draws and cost about 2 s per million values on one core
        (:mod:`fused_hmc.diagnostics`), so they examine the first chains (at most ``max_chains``,
        at least 2) that fit in ``max_values`` values (chains x draws x parameters shown; the
        default is about 2 s; None: every chain), and say how many; with superchains, the first
        chains of every superchain (of the first superchains, at least 2, when fewer than one
        chain each fits), as many of each. Ctrl-C while they run prints the rest and raises
        KeyboardInterrupt.
        """
        out = file if file is not None else sys.stdout
        chains, dim = self.final_state.shape
        names = self.parameter_names
        values = None  # the constrained draws, flat [chains, num_kept, values]
        if not unconstrained and self.global_summary is None and self.num_kept > 0:
            from . import constrained

            values = self.constrained_draws()
            if values is not None:
                names, values = constrained.names_and_flat(values)
        rows = diagnostics.parameter_indices(var_names, len(names) if values is not None else dim,
                                             names,
                                             default=diagnostics.row_count(max_rows))
        if self.global_summary is not None:  # every rank's chains, not this shard's
            self.global_summary.print(self, rows=rows, file=out)
            return
        warm = f"{self.num_warmup} warm-up + " if self.num_warmup else ""
        print(f"fused_hmc: {chains} chains x {dim} dims, {warm}{self.num_transitions} transitions, "
              f"{self.num_kept} kept (thin {self.thin}), seed {self.seed}"
              + (" [interrupted]" if self.interrupted else ""), file=out)
        rate = self.accept_rate.double().mean().item()
        prob = self.mean_accept_prob.double().mean().item()
        print(f"acceptance rate {rate:.4f} (mean acceptance probability {prob:.4f})", file=out,
              flush=True)
        for line in self.trajectory_lines():
            print(line, file=out)
        if self.mass_matrix == "dense":
            print(self.dense_mass_line(), file=out)
        if self.warmup_reseeded is not None:
            from .far_starts import restarts_line

            line = restarts_line(int((self.warmup_reseeded > 0).sum()), chains)
            if line is not None:
                print(line, file=out)
        if self.num_kept == 0:
            print("no draws kept yet", file=out)
            return
        mean, sd = diagnostics.pooled_moments(self.mean.cpu().numpy(), self.var.cpu().numpy(),
                                              self.num_kept) if values is None else (
            constrained.pooled_moments(values))
        if (self.samples is None and self.samples_path is None) or self.num_kept < 4:
            print(diagnostics.format_table(mean, sd, None, rows, names=names), file=out)
            return
        try:
            draws = self._draws_for_diagnostics() if values is None else values
            diag = diagnostics.diagnose(draws, max_chains=max_chains,
                                        rows=rows, max_values=max_values,
                                        superchains=self.superchains)
        except KeyboardInterrupt:  # print what needs no draws, then stop as asked
            print(diagnostics.format_table(mean, sd, None, rows, names=names,
                                           missing="ESS and R-hat interrupted (Ctrl-C)"), file=out)
            raise
        print(diagnostics.format_table(mean, sd, diag, rows, chains=chains, names=names),
              file=out)
