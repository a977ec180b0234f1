"""Chains over several processes (``process_group=``, a ``torch.distributed`` process group).

Each rank runs its own chains (its ``q0``) and returns its own shard; chain b of rank r is the
global chain ``offset_r + b`` of the philox stream (offset_r: the chains of lower ranks), so every
per-chain quantity (draws, final state, acceptance, per-chain warm-up and its adaptation) is bit
for bit the one a single process running every chain in rank order gives, whatever the rank count.

Collectives, and what each costs:

- construction: an all-reduce of an "ok" flag, then one all-gather of each rank's chain count,
  dim, dtype, seed and a digest of each of its other settings (:func:`run_settings`: the target,
  warm-up, step size, trajectory, thinning...), all checked equal (``seed=None``: every rank takes
  rank 0's draw), so that ranks given different settings raise, naming them, instead of mixing
  two runs into one summary (or waiting on each other in a pooled warm-up's collectives);
- the end of every ``run``: the "ok" flag, one all-gather of each rank's moments and acceptance
  sums, and one ``all_gather_object`` of the draws the ESS / R-hat look at (below) and of the
  chains that accepted no transition (their count and first ids);
- a pooled warm-up (``pooled=True``): one all-gather of two numbers per warm-up transition (with
  ChEES, of 2 d + 3 numbers and then a second of one), and one of 2 d numbers at each slow
  window's end (a dense mass: every chain's window mean and co-moments, B d (d + 1) numbers;
  :mod:`fused_hmc.sampling.pooled_ranks`).

A rank that raises before one of these points contributes "failed" to its flag, and every other
rank then raises RuntimeError instead of waiting for it (an error after the constructor's
collectives and before the run, on one rank only, is caught at the end of that rank's next run;
one that kills a process ends the others at the process group's timeout).

Global statistics (:class:`GlobalSummary`, ``result.global_summary`` on every rank): the mean and
variance over every draw of every chain, merged from each rank's Welford statistics with Chan,
Golub & LeVeque's parallel formula; the acceptance summed over every chain; ESS and R-hat of the
first global chains within :data:`fused_hmc.diagnostics.SUMMARY_VALUES` (first
:data:`DIAGNOSTIC_DIMS` dims), the same chains a one-process ``summary()`` examines, their draws
gathered to every rank (at most that many values; ESS / R-hat are computed when printed).

Pooled warm-up (``pooled=True``) pools over every rank's chains: each transition's statistics
meet in an all-gather (:mod:`fused_hmc.sampling.pooled_ranks` says how, what it costs, and how
the result depends on the rank count), ChEES's trajectory length included. Not yet: checkpoints
of a distributed run.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import sys
from dataclasses import dataclass, field
from typing import NoReturn, TextIO

import numpy as np
import torch

from .. import diagnostics
from .chain_statistics import totals
from .result import statistics_lines

# The dims whose ESS / R-hat the global summary holds: the rows summary() shows by default.
DIAGNOSTIC_DIMS = diagnostics.SUMMARY_ROWS


def _canonical(value) -> bytes:
    """Bytes that are equal across processes exactly when the values are (Python's hash() is
    salted per process): tensors by dtype, shape and contents; targets by their kind and
    parameters (a C++ target by its source, data and build options)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().contiguous()
        return f"tensor {value.dtype} {tuple(value.shape)} ".encode() + value.numpy().tobytes()
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join(_canonical(v) for v in value) + b"]"
    if isinstance(value, dict):
        return b"{" + b",".join(_canonical(k) + b":" + _canonical(value[k])
                                for k in sorted(value, key=str)) + b"}"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value).encode()
    kind = type(value).__name__.encode() + b" "
    if hasattr(value, "parameters"):  # the built-in targets (fused_hmc.targets)
        return kind + _canonical(value.parameters())
    if hasattr(value, "source"):  # a CppTarget (or one made from a torch model)
        return kind + _canonical([value.source, value.dim, value.data, value.names,
                                  value.has_gradient, value.lanes])
    raise TypeError(f"no digest for a {type(value).__name__} setting")


class _Any:
    """A setting this rank cannot tell apart from any other rank's (its digest 0 matches all)."""

    def __repr__(self) -> str:
        return "any (one chain)"


_ANY = _Any()


def digest(value) -> int:
    """An int64 digest of _canonical(value); 0 for _ANY (2**-64 odds of a clash otherwise)."""
    if value is _ANY:
        return 0
    return int.from_bytes(hashlib.blake2b(_canonical(value), digest_size=8).digest(), "little",
                          signed=True)


def run_settings(sampler, target, mu, inverse_mass) -> dict:
    """The settings every rank of one run must share, by their argument names: what a rank's
    Sampler was given besides q0, seed, out, progress and chunk_size (which do not change the
    chains). Per-chain step sizes and inverse masses are each rank's rows, different by design:
    they count by their kind only; on a rank of one chain, where one for all chains and one per
    chain look alike, not at all."""
    warmup = dataclasses.asdict(sampler.warmup)
    warmup["adapt_windows"] = warmup.pop("windows")
    one_chain = sampler.global_chains == 1  # this rank's chains, before the layout
    step = sampler.step_size
    step = _ANY if one_chain else "per chain" if isinstance(step, torch.Tensor) else step
    if inverse_mass is not None and (one_chain or inverse_mass.dim() == 2):
        inverse_mass = _ANY if one_chain else "per chain"
    mu = None if mu is None else torch.as_tensor(mu, dtype=torch.float64)
    return dict(target=target, mu=mu, step_size=step,
                num_leapfrog_steps=sampler.num_leapfrog_steps, thin=sampler.thin,
                keep_samples=sampler.keep_samples, jitter=sampler.jitter,
                inverse_mass=inverse_mass, trajectory_length=sampler.trajectory_length,
                max_leapfrog_steps=sampler.max_leapfrog_steps, superchains=sampler.superchains,
                first_transition=sampler.next_transition, **warmup)


def _describe(value) -> str:
    """A setting's value in a message, short."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (_Any, type(None), bool, int, float, str, tuple, list)):
        return repr(value)
    return f"a {type(value).__name__}"


def merge_moments(counts: torch.Tensor, means: torch.Tensor, m2s: torch.Tensor):
    """(count, mean, M2) of the union of k parts, each given by its count n_i, mean m_i [dim] and
    sum of squared deviations M2_i [dim] (float64): Chan, Golub & LeVeque (1979)'s update for k
    parts, N = sum n_i, mean = sum n_i m_i / N, M2 = sum M2_i + sum n_i (m_i - mean)^2.
    Empty parts (n_i = 0) count for nothing; with N = 0 the mean and M2 are NaN. counts: a CPU
    tensor; means and m2s on any one device."""
    counts = counts.to(torch.float64)
    total = counts.sum()
    if total == 0:
        nan = torch.full_like(means[0], float("nan"))
        return 0, nan, nan.clone()
    weights = counts.to(means.device)[:, None]  # counts on the host: no device sync
    mean = (weights * means).sum(0) / total
    m2 = m2s.sum(0) + (weights * (means - mean) ** 2).sum(0)
    return int(total), mean, m2


@dataclass(frozen=True)
class GlobalSummary:
    """Statistics of every rank's chains (see the module's docstring).

    chains: all chains; ranks: the process group's size; draws: kept draws of every chain in all;
    mean, var: [dim] float64 over those draws (var unbiased: M2 / (draws - 1)); accept_count and
    transitions: summed over every chain; accept_rate = accept_count / transitions;
    mean_accept_prob: over every transition of every chain; statistics: each chain statistic
    (:mod:`fused_hmc.sampling.chain_statistics`) summed over every chain; diagnostic_draws: (chains, draws,
    dims) of the first global chains (None without kept draws, or when the ranks kept different
    numbers of draws, e.g. one was interrupted); stuck_count, stuck_ids: how many chains
    accepted no transition (:mod:`fused_hmc.sampling.stuck_chains`) and the first ids of them;
    restarted_count: how many chains a pooled warm-up restarted
    (:mod:`fused_hmc.sampling.far_starts`).
    """
    chains: int
    ranks: int
    draws: int
    mean: np.ndarray
    var: np.ndarray
    accept_count: int
    transitions: int
    mean_accept_prob: float
    diagnostic_draws: np.ndarray | None
    stuck_count: int = 0
    stuck_ids: tuple[int, ...] = ()
    restarted_count: int = 0
    statistics: dict = field(default_factory=dict)

    @property
    def accept_rate(self) -> float:
        return self.accept_count / self.transitions if self.transitions else float("nan")

    def diagnose(self, rows=None) -> diagnostics.Diagnostics | None:
        """Bulk / tail ESS and R-hat of diagnostic_draws (None without them): of the dimensions
        `rows` (default: every one gathered), NaN for those beyond the ones gathered."""
        if self.diagnostic_draws is None:
            return None
        gathered = self.diagnostic_draws.shape[2]
        rows = list(range(gathered)) if rows is None else list(rows)
        held = [j for j in rows if j < gathered]
        if not held:
            return None
        diag = diagnostics.diagnose(self.diagnostic_draws, rows=held)
        if len(held) == len(rows):
            return diag
        at = [rows.index(j) for j in held]

        def spread(values):
            full = np.full(len(rows), np.nan)
            full[at] = values
            return full
        return diag._replace(ess_bulk=spread(diag.ess_bulk), ess_tail=spread(diag.ess_tail),
                             r_hat=spread(diag.r_hat))

    def print(self, result, rows=None,
              file: TextIO | None = None) -> diagnostics.Diagnostics | None:
        """SampleResult.summary() of a distributed run: every chain's statistics, the dimensions
        `rows` shown (default: the first SUMMARY_ROWS). Returns their ESS / R-hat (None
        without)."""
        out = file if file is not None else sys.stdout
        local, dim = result.final_state.shape
        first = result.chain_offset
        warm = f"{result.num_warmup} warm-up + " if result.num_warmup else ""
        print(f"fused_hmc: {self.chains} chains on {self.ranks} ranks (this rank: chains {first} "
              f".. {first + local - 1}) x {dim} dims, {warm}{result.num_transitions} transitions, "
              f"{result.num_kept} kept (thin {result.thin}), seed {result.seed}"
              + (" [interrupted]" if result.interrupted else ""), file=out)
        print(f"acceptance rate {self.accept_rate:.4f} (mean acceptance probability "
              f"{self.mean_accept_prob:.4f})", file=out, flush=True)
        for line in result.trajectory_lines(gradients=False):  # the same on every rank
            print(line, file=out)
        for line in statistics_lines(self.statistics, self.transitions):
            print(line, file=out)
        from .far_starts import restarts_line

        line = restarts_line(self.restarted_count, self.chains)
        if line is not None:
            print(line, file=out)
        if self.draws == 0:
            print("no draws kept yet", file=out)
            return None
        sd = np.sqrt(self.var) if self.draws > 1 else np.full_like(self.var, np.nan)
        diag = self.diagnose(rows) if result.num_kept >= 4 else None
        print(diagnostics.format_table(self.mean, sd, diag, rows, chains=self.chains,
                                       names=result.parameter_names,
                                       missing="ESS and R-hat need the draws of every rank "
                                               "(kept, and as many on each)"), file=out)
        return diag


def spreads_errors(method):
    """Decorates a method of an object whose ``_group`` is a ChainGroup (or None): an error it
    raises while a collective is pending is contributed to that collective as "failed", so that
    the other ranks raise too instead of waiting for this one."""
    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            group = getattr(self, "_group", None)
            if group is not None:
                try:
                    group.abort()
                except Exception:  # noqa: BLE001 - e.g. a rank gone: this rank's error is the one
                    pass
            raise
    return wrapped


def end_rank_process(code: int) -> NoReturn:
    """Ends a rank's process once its work is done and its process group destroyed, skipping the
    interpreter's finalization. A gloo rank aborts there now and then ("terminate called without
    an active exception", SIGABRT, no Python frame left): torch's C++ statics are destroyed while
    a thread of theirs still runs (pytorch/pytorch issue 190489, the abandoned PR 179291). Seen in
    about 1 of 5 loaded torchrun runs of the CLI (0 of 26 with this) and 1 of 12 spawned test
    ranks. The streams are flushed first; os._exit skips those destructors."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class ChainGroup:
    """A process group over which ranks split the chains, and its collective points."""

    def __init__(self, group, stage: str):
        import torch.distributed as dist

        if not isinstance(group, dist.ProcessGroup):
            raise TypeError("process_group must be a torch.distributed ProcessGroup (e.g. "
                            f"torch.distributed.group.WORLD) or None, got {type(group).__name__}")
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        # NCCL reduces CUDA tensors only; gloo (and the rest) CPU ones.
        self._device = (torch.device("cuda", torch.cuda.current_device())
                        if dist.get_backend(group) == "nccl" else torch.device("cpu"))
        self._pending: str | None = stage  # the collective point every rank is heading for
        self.chains = 0  # every rank's chains, once layout() has run
        self.chain_counts: list[int] = []  # each rank's, likewise

    @staticmethod
    def check_arguments(chain_offset: int, checkpoint) -> None:
        if chain_offset != 0:
            raise ValueError("chain_offset must be 0 with process_group: each rank's offset is "
                             "the chains of the lower ranks")
        if checkpoint is not None:
            raise ValueError("checkpoint= is not supported with process_group yet")

    def expect(self, stage: str) -> None:
        """Every rank is heading for a collective point now (an error on the way is spread)."""
        self._pending = stage

    def meet(self, then: str) -> None:
        """Every rank has come this far (raises if another failed on its way here), and heads for
        `then` next: before collectives of another kind, which a failed rank's vote would meet."""
        self._proceed()
        self._pending = then

    def abort(self) -> None:
        """This rank failed: the collective point pending, if any, learns so."""
        if self._pending is not None:
            stage, self._pending = self._pending, None
            self._vote(False, stage)

    def _proceed(self) -> None:
        stage, self._pending = self._pending, None
        self._vote(True, stage)

    def _vote(self, ok: bool, stage: str) -> None:
        import torch.distributed as dist

        flag = torch.tensor([int(ok)], dtype=torch.int64, device=self._device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self.group)
        if ok and int(flag.item()) == 0:
            raise RuntimeError(f"another rank of the process group failed while {stage} (its own "
                               "error says why); this rank stops too")

    def _all_gather(self, values: torch.Tensor) -> torch.Tensor:
        import torch.distributed as dist

        values = values.to(self._device)
        parts = [torch.empty_like(values) for _ in range(self.size)]
        dist.all_gather(parts, values, group=self.group)
        return torch.stack(parts).cpu()

    def gather_on_device(self, values: torch.Tensor) -> torch.Tensor:
        """Every rank's `values` stacked in rank order [ranks, ...], on values' device (NCCL
        gathers on the GPU's stream, with no host round trip; gloo through the host)."""
        import torch.distributed as dist

        local = values.to(self._device)
        parts = [torch.empty_like(local) for _ in range(self.size)]
        dist.all_gather(parts, local, group=self.group)
        return torch.stack(parts).to(values.device)

    def layout(self, q: torch.Tensor, seed: int, seed_given: bool,
               settings: dict | None = None) -> tuple[int, int, int]:
        """(this rank's chain offset, the seed every rank uses, the chains of every rank).
        settings: name -> value (:func:`run_settings`), checked equal on every rank."""
        self._proceed()
        settings = settings or {}
        key = seed - 2**64 if seed >= 2**63 else seed  # int64
        dtype = 0 if q.dtype == torch.float32 else 1
        mine = torch.tensor([q.shape[0], q.shape[1], dtype, int(seed_given), key]
                            + [digest(v) for v in settings.values()], dtype=torch.int64)
        every = self._all_gather(mine)
        chains, dims, dtypes, given, keys = every[:, :5].T.tolist()
        for name, values in (("dim", dims), ("dtype", dtypes)):
            if len(set(values)) > 1:
                raise ValueError(f"the ranks' q0 differ in {name}: one run's chains share it "
                                 f"(by rank: {values})")
        differ = []
        for j, name in enumerate(settings):
            column = every[:, 5 + j].tolist()
            known = [(r, d) for r, d in enumerate(column) if d != 0]  # 0: any (_ANY)
            if len({d for _, d in known}) > 1:
                first, reference = known[0]
                differ.append((name, first, [r for r, d in known if d != reference]))
        if differ:
            raise ValueError(
                "the ranks were given different settings, which one run's ranks share: "
                + "; ".join(f"{name} (ranks {ranks} differ from rank {first}; this rank's: "
                            f"{_describe(settings[name])})" for name, first, ranks in differ))
        if len(set(given)) > 1:
            raise ValueError("seed is given on some ranks and None on others: give the same seed "
                             "on every rank, or None on every rank (rank 0 then draws it)")
        if given[0] and len(set(keys)) > 1:
            raise ValueError(f"the ranks were given different seeds ({[k % 2**64 for k in keys]}): "
                             "give every rank the same seed")
        self.chains, self.chain_counts = sum(chains), chains
        return sum(chains[:self.rank]), keys[0] % 2**64, self.chains

    def merge(self, result, mean: torch.Tensor, m2: torch.Tensor,
              max_values: int | None = diagnostics.SUMMARY_VALUES):
        """`result` (this rank's shard) with its ``global_summary``; mean, m2: [chains, dim],
        this rank's float64 Welford sums; the chain statistics from the result."""
        import torch.distributed as dist

        self._proceed()
        chains, dim = mean.shape
        n = result.num_kept
        _, rank_mean, rank_m2 = merge_moments(torch.full((chains,), n), mean.cpu(), m2.cpu())
        mine = totals(result.chain_statistics)
        books = torch.tensor([chains * n, chains * result.num_transitions, n, *mine.values()],
                             dtype=torch.float64)
        width = len(books)
        every = self._all_gather(torch.cat([books, rank_mean.nan_to_num(), rank_m2.nan_to_num()]))
        counts, transitions, kept = every[:, :3].T  # (exact below 2**53)
        statistics = {name: type(value)(every[:, 3 + i].sum())
                      for i, (name, value) in enumerate(mine.items())}
        total, grand, grand_m2 = merge_moments(counts, every[:, width:width + dim],
                                               every[:, width + dim:])
        from .stuck_chains import SHOWN, stuck_chain_ids

        stuck = stuck_chain_ids(result)
        restarted = (0 if result.warmup_reseeded is None
                     else int((result.warmup_reseeded > 0).sum()))
        gathered = [None] * self.size
        dist.all_gather_object(gathered, (self._diagnostic_draws(result, max_values),
                                          len(stuck), stuck[:SHOWN], restarted),
                               group=self.group)
        parts = [p for p, _, _, _ in gathered]
        diagnosable = len(set(kept.tolist())) == 1 and all(p is not None for p in parts)
        transitions = int(transitions.sum())
        summary = GlobalSummary(
            chains=self.chains, ranks=self.size, draws=total, mean=grand.numpy(),
            var=(grand_m2 / (total - 1)).numpy() if total > 1 else np.full(dim, np.nan),
            accept_count=statistics["accept_count"], transitions=transitions,
            mean_accept_prob=statistics["accept_prob_sum"] / transitions if transitions
            else float("nan"),
            diagnostic_draws=np.concatenate([p for p in parts if len(p)]) if diagnosable
            else None, stuck_count=sum(n for _, n, _, _ in gathered),
            stuck_ids=tuple([i for _, _, ids, _ in gathered for i in ids][:SHOWN]),
            restarted_count=sum(r for _, _, _, r in gathered), statistics=statistics)
        return result._replace(global_summary=summary)

    def _diagnostic_draws(self, result, max_values: int | None) -> np.ndarray | None:
        """This rank's part of the first global chains that a one-process summary() diagnoses
        (diagnostics.diagnose with max_dims=DIAGNOSTIC_DIMS and max_values), or None."""
        if result.num_kept < 4 or (result.samples is None and result.samples_path is None):
            return None
        chains, dim = result.final_state.shape
        dims = min(dim, DIAGNOSTIC_DIMS)
        wanted = self.chains
        if max_values is not None:
            wanted = min(wanted, max(2, max_values // max(1, result.num_kept * dims)))
        mine = max(0, min(chains, wanted - result.chain_offset))
        if result.samples is not None:
            draws = result.samples
        else:
            from .storage import posterior_draws

            draws = posterior_draws(result.samples_path, result.num_kept)
        return diagnostics.as_draws(draws[:mine, :, :dims]) if mine else np.empty((0, 0, dims))
