"""The pooled warm-up over the chains of several processes (``pooled=True`` with a
``process_group``).

The run op's pooled warm-up reduces over its own chains inside one launch; across processes the
statistics must meet outside it. Each warm-up transition is then three steps on every rank:

1. the run op runs the transition for this rank's chains with the pooled step size and inverse
   mass, keeping each chain's acceptance statistic and, inside a slow window, folding its state
   into the chain's window moments (the run op's sampling mode: the same transition, the same
   Welford update as its warm-up);
2. the acceptance statistics are summed over the rank's chains and then over the ranks in rank
   order (one all-gather); at the end of a slow window each rank also merges its chains' window
   moments (Chan et al., as for the global summary) and the ranks' merged moments are merged in
   rank order (a second all-gather);
3. the ``pooled_update`` op applies the run op's pooled update (csrc/math/warmup_update.h) to the
   step size, dual averaging and inverse mass, identically on every rank.

Cost per transition: a run op launch, a sum, an all-gather of two numbers and a one-block launch.
With NCCL the gather runs on the GPU's stream: no host round trip per transition (the ranks'
failure flags are read every CHECK_EVERY transitions and at the warm-up's end, the same
transitions on every rank). With gloo the numbers go through the host, one round trip per
transition.

Deterministic for a given rank count and split of the chains: sums run over a rank's chains in
torch's order and over the ranks in rank order, so the bits depend on how many ranks hold which
chains (and differ, by rounding, from a one-process pooled warm-up, whose kernel sums pairwise
over all chains). ChEES (``adapt_trajectory_length=True``) is not pooled across ranks yet: its
criterion centres every chain on the ensemble's means, a second reduction per transition.
"""
from __future__ import annotations

import torch

from .. import _build, ops
from .distributed import ChainGroup, merge_moments

# Warm-up transitions between the points where every rank reads the ranks' failure flags (a host
# round trip): a rank's error ends every rank at the next one, wherever the ranks' chunks end.
CHECK_EVERY = 64


class RankPooledWarmup:
    """The warm-up transitions of a ChainKernel (`kernel`, G = 1) pooled over `group`'s ranks."""

    def __init__(self, kernel, group: ChainGroup):
        self.kernel, self.group = kernel, group
        chains, dim = kernel.chains, kernel.state.inverse_mass.shape[1]
        device = kernel.state.step_size.device
        f64 = dict(dtype=torch.float64, device=device)
        self._accept = torch.zeros(chains, **f64)
        self._count = torch.zeros(chains, dtype=torch.int64, device=device)
        self._scratch = (torch.zeros(chains, dim, **f64), torch.zeros(chains, dim, **f64))
        self._ok = torch.ones(1, **f64)
        self._failure: Exception | None = None  # this rank's, until the next check point

    def _window(self, i: int) -> tuple[int, int]:
        s = self.kernel.settings
        return _build.bindings().slow_window_of(s.num_warmup, list(s.windows), i)

    def run(self, q: torch.Tensor, first: int, n: int, length: dict) -> None:
        """Warm-up transitions [first, first + n) of this rank's chains q; `length`: the run op's
        trajectory arguments."""
        k, s, g = self.kernel, self.kernel.settings, self.group
        for t in range(first, first + n):
            i = t - k.warmup_start
            start, end = self._window(i)
            in_window = s.adapt_mass_matrix and start >= 0
            mean, m2 = ((k.state.window_mean, k.state.window_m2) if in_window
                        else self._scratch)
            if self._failure is None:
                try:
                    self._accept.zero_()
                    k.run_op(q, t, 1, k.state.inverse_mass, length,
                             gradient_evaluations=k.gradients[0], kept_before=i - start
                             if in_window else 0, mean=mean, m2=m2, accept_count=self._count,
                             accept_prob_sum=self._accept)
                except Exception as exc:  # noqa: BLE001 - raised at the next check point
                    self._failure = exc
                    self._ok.zero_()
            # A failed rank keeps joining the gathers until the next check point, so that none
            # waits for it there.
            local = torch.cat([self._accept.sum().reshape(1), self._ok])
            parts = g.gather_on_device(local)
            accept_stat = parts[:, 0].sum(0, keepdim=True) / g.chains
            variance, draws = None, 0.0
            if in_window and i == end:
                variance, draws = self._window_variance(mean, m2, i - start + 1)
                mean.zero_()
                m2.zero_()
            if self._failure is None:
                ops.pooled_update(k.state.step_size, k.state.dual_averaging, k.state.inverse_mass,
                                  accept_stat, variance, draws, i, s.num_warmup, s.windows,
                                  s.target_accept, s.adapt_step_size, s.adapt_mass_matrix)
            if (i + 1) % CHECK_EVERY == 0 or i == s.num_warmup - 1:
                self._check(parts[:, 1].min())

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

    def _window_variance(self, mean: torch.Tensor, m2: torch.Tensor,
                         draws: int) -> tuple[torch.Tensor, float]:
        """The variance of every rank's chains' window of `draws` draws: this rank's chains merged
        (the law of total variance), then the ranks' merges, in rank order."""
        g = self.group
        chains = mean.shape[0]
        _, rank_mean, rank_m2 = merge_moments(torch.full((chains,), draws), mean, m2)
        # A rank without chains has NaN moments, which its zero count then weighs out.
        parts = g.gather_on_device(torch.stack([rank_mean, rank_m2]).nan_to_num())
        counts = torch.tensor(g.chain_counts) * draws
        total, _, pooled_m2 = merge_moments(counts, parts[:, 0], parts[:, 1])
        return pooled_m2 / (total - 1), float(total)
