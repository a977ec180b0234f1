"""The pooled warm-up over the chains of several processes (``pooled=True`` with a
``process_group``).

The warmup op's pooled warm-up reduces over its own chains inside one launch; across processes
the statistics must meet outside it. Each warm-up transition is then three steps on every rank:

1. the sample op runs the transition for this rank's chains with the pooled step size and inverse
   mass (and with ChEES the pooled trajectory length, read on the device), keeping each chain's
   statistics of the transition (its acceptance statistic among them, added to the warm-up's
   statistics afterwards) and, inside a slow window, folding its state into the chain's window
   moments (the same transition, the same Welford update as the warmup op's); with ChEES it also
   records each chain's start, proposal, end velocity and jitter;
2. the chains' acceptance terms (csrc/math/adaptation/pooled_acceptance.h: the mean's or the
   harmonic mean's) are summed over the rank's chains and then over the ranks in rank order (one
   all-gather); at the end of a slow window each rank also sums its chains' log window
   variances and their count (the pooled variance of csrc/math/hmc/mass_matrix.h) and the ranks'
   sums are summed in rank order (a second all-gather);
3. the ``pooled_update`` op applies the warmup op's pooled update
(csrc/math/adaptation/warmup_update.h) to the step size, dual averaging, ChEES state and inverse
mass, identically on every rank.

A dense mass (``mass_matrix="dense"``, CPU chains only) folds each chain's state into its window co-moments
after the sample op (the warmup op's fold, csrc/math/hmc/dense_mass.h, through a binding), and at
a slow window's end every rank gathers every rank's window means and co-moments (B d (d + 1)
numbers) and forms the pooled covariance from them, as the one-process kernel forms it from the
same moments (its strays left out), which ``pooled_update`` regularises and factorises.

ChEES (``adapt_trajectory_length=True``) centres every chain on the ensemble's means
(csrc/math/adaptation/trajectory_adaptation.h), so its statistics take two reductions, the second
after the first: the column sums of the starts x0 and of the weighted proposals omega x1, and the
sum of the weights omega, travel with the acceptance sums in step 2's all-gather; each rank then
forms its chains' terms omega_c g_c around the means and a second all-gather sums them.

Cost per transition: a sample op launch, a few sums, an all-gather of two numbers (2 d + 3 with
ChEES, and a second of one number) and a one-block launch. With NCCL the gathers run on the GPU's
stream: no host round trip per transition (the ranks' failure flags are read every CHECK_EVERY
transitions and at the warm-up's end, the same transitions on every rank). With gloo the numbers
go through the host, one round trip per gather.

Deterministic for a given rank count and split of the chains: sums run over a rank's chains in
torch's order and over the ranks in rank order, so the bits depend on how many ranks hold which
chains (and differ, by rounding, from a one-process pooled warm-up, whose kernel sums pairwise
over all chains).
"""
from __future__ import annotations

import torch

from .. import _build, ops
from . import chain_statistics
from .distributed import ChainGroup
from .warmup import restart_chees_optimizer

# Warm-up transitions between the points where every rank reads the ranks' failure flags (a host
# round trip): a rank's error ends every rank at the next one, wherever the ranks' chunks end.
CHECK_EVERY = 64


def acceptance_terms(transition: dict, harmonic: bool) -> torch.Tensor:
    """This rank's sums [2] float64 of its chains' acceptance terms (x, w) at one transition, from
    the transition's statistics: csrc/math/adaptation/pooled_acceptance.h's terms (the mean's
    (a, 1), or the harmonic mean's (1 / a, 1) and (0, 0) for a divergent transition)."""
    a = transition["accept_prob_sum"]
    if not harmonic:
        return torch.stack([a.sum(), a.new_tensor(float(a.numel()))])
    kept = transition["divergences"] == 0
    return torch.stack([torch.where(kept, a.reciprocal(), 0.0).sum(), kept.sum().to(a.dtype)])


class RankPooledWarmup:
    """The warm-up transitions of a ChainKernel (`kernel`, G = 1) pooled over `group`'s ranks."""

    def __init__(self, kernel, group: ChainGroup):
        self.kernel, self.group = kernel, group
        chains, dim = kernel.chains, kernel.state.inverse_mass.shape[1]
        device = kernel.state.step_size.device
        f64 = dict(dtype=torch.float64, device=device)
        # One transition's statistics of this rank's chains.
        self._transition = chain_statistics.zeros(chains, device)
        self._scratch = (torch.zeros(chains, dim, **f64), torch.zeros(chains, dim, **f64))
        self._dense = kernel.dense
        if self._dense and device.type != "cpu":
            raise ValueError("mass_matrix='dense' with a pooled warm-up over a process_group runs "
                             f"on the CPU only for now; the chains are on {device}: warm up per "
                             "chain (pooled=False), or use mass_matrix='diagonal'")
        self._ok = torch.ones(1, **f64)
        self._failure: Exception | None = None  # this rank's, until the next check point
        self._chees = (ChEESRecord(chains, dim, device) if kernel.state.chees is not None
                       else None)

    def _window(self, i: int) -> tuple[int, int]:
        s = self.kernel.settings
        return _build.bindings().slow_window_of(s.num_warmup, list(s.windows), i)

    def run(self, q: torch.Tensor, first: int, n: int, length: dict) -> None:
        """Warm-up transitions [first, first + n) of this rank's chains q; `length`: the ops'
        trajectory arguments."""
        k, s, g = self.kernel, self.kernel.settings, self.group
        for t in range(first, first + n):
            i = t - k.warmup_start
            start, end = self._window(i)
            in_window = s.adapt_mass_matrix and start >= 0
            # The op folds a diagonal window's draws; a dense one's co-moments are folded below.
            mean, m2 = ((k.state.window_mean, k.state.window_m2) if in_window and not self._dense
                        else self._scratch)
            record = {} if self._chees is None else dict(trajectory_record=self._chees.rows)
            if self._failure is None:
                try:
                    statistics = list(self._transition.values())
                    torch._foreach_zero_(statistics)
                    k.run_op(ops.sample, q, t, 1, k.state.inverse_mass, length,
                             self._transition, kept_before=i - start if in_window else 0,
                             mean=mean, m2=m2, **record)
                    torch._foreach_add_(list(k.statistics.warmup.values()), statistics)
                    if in_window and self._dense:
                        _build.bindings().dense_fold_window(k.state.window_mean,
                                                            k.state.window_m2, q,
                                                            1.0 / (i - start + 1))
                except Exception as exc:  # noqa: BLE001 - raised at the next check point
                    self._failure = exc
                    self._ok.zero_()
            # A failed rank keeps joining the gathers until the next check point, so that none
            # waits for it there.
            harmonic = s.pooled_acceptance == "harmonic"
            local = [acceptance_terms(self._transition, harmonic), self._ok]
            if self._chees is not None:
                local.append(self._chees.column_sums())
            parts = g.gather_on_device(torch.cat(local))
            terms = parts[:, :2].sum(0)
            chees = {}
            if self._chees is not None:
                sums = self._chees.sums(parts[:, 3:].sum(0), g, k.state.chees[0])
                chees = dict(chees=k.state.chees, chees_sums=sums,
                             max_leapfrog_steps=k.max_leapfrog_steps)
            variance, draws = None, 0.0
            if in_window and i == end:
                window = (self._window_covariance if self._dense else self._window_variance)
                variance, draws = window(k.state.window_mean, k.state.window_m2, i - start + 1)
                k.state.window_mean.zero_()
                k.state.window_m2.zero_()
            if self._failure is None:
                before = k.state.inverse_mass.clone() if self._dense and variance is not None \
                    else None
                ops.pooled_update(k.state.step_size, k.state.dual_averaging, k.state.inverse_mass,
                                  terms, variance, draws, i, s.num_warmup, s.windows,
                                  s.target_accept, s.adapt_step_size, s.adapt_mass_matrix,
                                  harmonic_acceptance=harmonic, **chees)
                if before is not None:
                    k.count_kept_masses(before)
                if variance is not None and self._chees is not None:  # a slow window's end
                    restart_chees_optimizer(k.state.chees, k.state.step_size)
            if (i + 1) % CHECK_EVERY == 0 or i == s.num_warmup - 1:
                self._check(parts[:, 2].min())

    def _check(self, ok: torch.Tensor) -> None:
        """At a check point every rank reaches at the same transition (whatever its chunks):
        this rank's own error, or RuntimeError when another rank failed."""
        if float(ok) != 0.0:  # the host reads the flags here only
            return
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure
        raise RuntimeError("another rank of the process group failed during the pooled "
                           "warm-up (its own error says why); this rank stops too")

    def _window_covariance(self, mean: torch.Tensor, m2: torch.Tensor,
                           draws: int) -> tuple[torch.Tensor, float]:
        """The pooled covariance [d, d] of every rank's chains' windows of `draws` draws, from
        every rank's window means [B_r, d] and co-moments [B_r, d, d] gathered in rank order (as
        the one-process kernel pools them: csrc/math/hmc/dense_mass.h)."""
        g = self.group
        counts, d = g.chain_counts, mean.shape[1]
        most = max(counts)
        padded = torch.zeros(most, d * (d + 1), dtype=torch.float64, device=mean.device)
        padded[:mean.shape[0]] = torch.cat([mean, m2.flatten(1)], 1)
        parts = g.gather_on_device(padded)
        rows = torch.cat([parts[r, :c] for r, c in enumerate(counts)])
        covariance = _build.bindings().dense_pooled_covariance(
            rows[:, :d], rows[:, d:].reshape(-1, d, d), float(draws))
        return covariance.to(mean.device), float(draws * g.chains)

    def _window_variance(self, mean: torch.Tensor, m2: torch.Tensor,
                         draws: int) -> tuple[torch.Tensor, float]:
        """The pooled variance of every rank's chains' windows of `draws` draws: the geometric
        mean of the chains' own window variances (csrc/math/hmc/mass_matrix.h says why), from the
        ranks' sums of log variances and counts, summed in rank order."""
        g = self.group
        variance = m2 / (draws - 1)
        counted = (variance > 0) & torch.isfinite(variance)
        logs = torch.where(counted, variance, 1.0).log()
        parts = g.gather_on_device(torch.stack([logs.sum(0), counted.sum(0, dtype=m2.dtype)]))
        log_sum, count = parts.sum(0)
        # No chain of any rank moved in a coordinate: NaN, and pooled_update keeps its inverse mass.
        return (log_sum / count).exp(), float(draws * g.chains)


class ChEESRecord:
    """This rank's part of ChEES's statistics of one transition (the terms of
    csrc/math/adaptation/trajectory_adaptation.h, formed from the sample op's trajectory records):
    column_sums() after the sample op, then sums() with every rank's column sums."""

    def __init__(self, chains: int, dim: int, device: torch.device):
        self.dim = dim
        self.rows = torch.zeros(chains, 3 * dim + 2, dtype=torch.float64, device=device)
        self._floor = _build.bindings().chees_weight_floor
        self._parts = None  # (x0, x1, velocity, omega, jitter) of the transition, once read

    def column_sums(self) -> torch.Tensor:
        """[2 d + 1]: this rank's sums of x0 and of omega x1 over its chains, and of omega (a
        non-finite proposal weighs 0 and counts as 0)."""
        d, rows = self.dim, self.rows
        x1 = rows[:, d:2 * d]
        finite = torch.isfinite(x1).all(1)
        omega = torch.where(finite, rows[:, 3 * d], 0.0)
        x1 = torch.where(finite[:, None], x1, 0.0)
        x0 = rows[:, :d]
        self._parts = (x0, x1, rows[:, 2 * d:3 * d], omega, rows[:, 3 * d + 1])
        return torch.cat([x0.sum(0), (omega[:, None] * x1).sum(0), omega.sum().reshape(1)])

    def sums(self, every: torch.Tensor, group: ChainGroup, length: torch.Tensor) -> torch.Tensor:
        """[2]: the sums over every rank's chains of omega_c g_c and of omega_c, from `every`,
        the column sums of every rank's chains; `length`: the transition's T (a device scalar)."""
        d = self.dim
        x0, x1, velocity, omega, jitter = self._parts
        weight = every[2 * d]
        c0, c1 = x0 - every[:d] / group.chains, x1 - every[d:2 * d] / (weight + self._floor)
        term = (jitter * length) * ((c1 * c1 - c0 * c0).sum(1) * (c1 * velocity).sum(1))
        term = torch.where(torch.isfinite(term), term, 0.0)
        gradient = group.gather_on_device((omega * term).sum().reshape(1)).sum(0)
        return torch.cat([gradient, weight.reshape(1)])
