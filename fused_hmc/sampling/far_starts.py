"""A pooled warm-up that survives far starts: a per-chain first phase, then restarts of chains that
never moved.

One step size serves every chain of a pooled warm-up (``pooled=True``, and ChEES, pooled by
nature); dual averaging tunes it to the chains' mean acceptance. From Stan's uniform(-2, 2) starts
the chains begin in regions whose scales differ by orders of magnitude (kidiq: sigma near 0.2
against residuals near 100, a gradient near 1e8 in log sigma), and one step size fails them two
ways (benchmarks/results/far_starts):

- a chain where the density is far steeper than where the others are rejects every proposal at
  their step size and samples its start forever (kidiq: 28 of 256 chains with ``pooled=True``,
  70 of 256 with ChEES);
- the first transitions, at the initial step size, fling chains onto the plateau where sigma is
  huge; there the posterior's step size and mass move them a tiny fraction of their scale per
  transition, and with ChEES they do not come back (kidiq, the stuck chains restarted: 148 of
  256 chains still there after 1000 warm-up iterations, mean sigma 8,250 against 17.2, R-hat
  10.7).

So the warm-up's initial fast interval (Stan's init_buffer, 75 iterations; the scaled 15% of a
shorter warm-up) runs per chain: each chain adapts its own step size by dual averaging (fixed
``num_leapfrog_steps`` trajectories, the mass as given), as Stan's per-chain warm-up does, and
finds its way from wherever it starts. At its end the pooled step size starts at the median of
the chains' step sizes (robust to the chains still far away), its dual averaging continues as if
it had converged there, and the pooled adaptation (slow windows, ChEES from its T0) takes over as
before. This changes the bits of every pooled warm-up of at least 20 iterations that adapts the
step size (from its first iteration on).

A chain may still never move (a start where even a tiny step fails): at the end of the initial
interval and of every slow window (iterations 74, 99, 149, 249, 449 and 949 of 1000), every
chain whose state has not changed since the previous check point (at least :data:`MIN_STRETCH`
transitions, every one rejected) takes the state of a chain that moved, drawn uniformly from them
by a generator keyed by the seed and the check point. Warm-up's draws are discarded and any state
is a valid start for what follows; the restarted chains lose their own starts, which R-hat
otherwise uses. Never silent: the result's ``warmup_reseeded`` counts each chain's restarts and
``summary()`` says how many chains were restarted. A healthy chain at acceptance 0.65 rejects 20
transitions in a row with probability 0.35^20 = 7.6e-10, so healthy runs are all but never
touched by this.

Over a process group each rank runs its chains' first phase alone; at its end the ranks gather
the chains' step sizes (and a failure flag, so a rank's error stops every rank there), and at a
check point the stuck masks and then the donors' states, so every rank draws the same donors
among every rank's chains and the result does not depend on how the chains are split.
"""
from __future__ import annotations

import math

import torch

from .warmup import WarmupSettings, floor_chees_length, initial_interval, slow_window_ends

# The fewest transitions, all rejected, that make a chain stuck (see the module's docstring).
MIN_STRETCH = 20
# Mixed with the seed to key each check point's donor draw (any fixed odd 64-bit constant).
_KEY_MIX = 0x9E3779B97F4A7C15
_DUAL_AVERAGING_GAMMA = 0.05  # csrc/math/adaptation/dual_averaging.h's kDualAveragingGamma


def first_phase_length(settings: WarmupSettings) -> int:
    """The warm-up iterations run per chain before pooling: the initial fast interval, when the
    step size is adapted (else 0)."""
    return initial_interval(settings) if settings.adapt_step_size else 0


def check_points(settings: WarmupSettings) -> list[int]:
    """The warm-up iterations (0-based) after which stuck chains are restarted: the last of the
    initial fast interval and of every slow window, each at least MIN_STRETCH after the one
    before (a shorter stretch joins the next); none without slow windows (num_warmup < 20)."""
    if settings.num_warmup < 20:
        return []
    ends = [initial_interval(settings) - 1] + slow_window_ends(settings)
    points, last = [], -1
    for end in ends:
        if end - last >= MIN_STRETCH:
            points.append(end)
            last = end
    return points


def restarts_line(restarted: int, chains: int) -> str | None:
    """summary()'s line on the chains a pooled warm-up restarted (None when it restarted none)."""
    if not restarted:
        return None
    return (f"warm-up: {restarted} of {chains} chains never moved from their starts and were "
            "restarted from other chains' states (warmup_reseeded)")


class FarStarts:
    """The far-start handling of one pooled warm-up: the per-chain first phase and the restarts
    of `kernel` (a pooled ChainKernel of chains q [B, d] on `target`); group: a
    distributed.ChainGroup, or None."""

    def __init__(self, kernel, q: torch.Tensor, target, group=None):
        s = kernel.settings
        self.kernel, self.group = kernel, group
        self.first_phase = first_phase_length(s)
        self.points = check_points(s)
        self.anchor = q.clone()  # the states at the last check point (at first, the starts)
        self.reseeded = torch.zeros(q.shape[0], dtype=torch.int64, device=q.device)
        self._failure: Exception | None = None  # a rank's, until the first phase's end
        self.per_chain = None
        if self.first_phase:
            self.per_chain = self._per_chain_kernel(kernel, q, target)

    @staticmethod
    def _per_chain_kernel(kernel, q: torch.Tensor, target):
        """A per-chain kernel for the first phase: its own step sizes and dual averaging, the
        pooled kernel's inverse mass, trajectories (a trajectory_length given, else
        num_leapfrog_steps steps: ChEES's T is adapted later), window buffers (unused there) and
        counters."""
        chains, s = q.shape[0], kernel.settings
        mass_shape = kernel.state.inverse_mass.shape[1:]  # [d], or a dense mass's factor [d, d]
        settings = WarmupSettings(0, s.target_accept, True, False, False, s.windows,
                                  mass_estimator=s.mass_estimator)
        per_chain = type(kernel)(q, target, kernel.state.step_size.expand(chains),
                                 kernel.state.inverse_mass.expand(chains, *mass_shape),
                                 kernel.jitter,
                                 kernel.num_leapfrog_steps, kernel.key, kernel.chain_offset,
                                 settings, kernel.warmup_start, kernel.fixed_length,
                                 kernel.max_leapfrog_steps)
        length = first_phase_length(s)
        per_chain.settings = WarmupSettings(length, s.target_accept, True, False, False,
                                            s.windows, mass_estimator=s.mass_estimator)
        per_chain.warmup_left = length
        per_chain.state = per_chain.state._replace(
            dual_averaging=torch.zeros(chains, 3, dtype=torch.float64, device=q.device),
            window_mean=kernel.state.window_mean, window_m2=kernel.state.window_m2)
        per_chain.statistics = kernel.statistics  # its transitions count as the warm-up's
        return per_chain

    def split(self, first: int, n: int) -> list[tuple[int, int]]:
        """Warm-up iterations [first, first + n) as (first, count) parts, each ending at a check
        point, at the end of the first phase, or at the end."""
        ends = sorted(set(self.points) | ({self.first_phase - 1} if self.first_phase else set()))
        parts, end = [], first + n
        for point in ends:
            if first <= point < end - 1:
                parts.append((first, point + 1 - first))
                first = point + 1
        parts.append((first, end - first))
        return parts

    def runs(self, i: int) -> bool:
        """Whether warm-up iteration i belongs to the per-chain first phase."""
        return i < self.first_phase

    def warmup(self, q: torch.Tensor, first: int, n: int) -> None:
        """First-phase transitions [first, first + n) of this rank's chains (an error on a rank
        of a group waits for the phase's end, where every rank learns of it)."""
        if self._failure is not None:
            return
        try:
            self.per_chain.warmup(q, first, n)
        except Exception as exc:
            if self.group is None:
                raise
            self._failure = exc

    def after(self, q: torch.Tensor, i: int) -> None:
        """After warm-up iteration i: restarts the chains that have not moved since the last
        check point, at one; hands the first phase's step sizes to the pooled warm-up, at its
        end."""
        if i in self.points:
            self._restart_stuck(q, i)
            if i == self.points[-1]:
                self.anchor = None  # no check point follows
        if self.first_phase and i == self.first_phase - 1:
            self._pool()

    def _pool(self) -> None:
        """The pooled adaptation state from the first phase's per-chain step sizes."""
        k, steps = self.kernel, self.per_chain.state.step_size
        ok = 0.0 if self._failure is not None else 1.0
        rows = torch.cat([steps[:, None], torch.full_like(steps[:, None], ok)], 1)
        every = rows if self.group is None else self._gather_rows(rows)
        if bool((every[:, 1] == 0).any()):
            failure, self._failure = self._failure, None
            if failure is not None:
                raise failure
            raise RuntimeError("another rank of the process group failed during the pooled "
                               "warm-up's first phase (its own error says why); this rank stops "
                               "too")
        # The median of every chain's step size, as the float64 the op keeps.
        eps = float(torch.quantile(every[:, 0].double().cpu(), 0.5))
        self.per_chain = None  # its step sizes and dual averaging are spent
        # Dual averaging as if it had settled at eps after the phase's n transitions: mu =
        # log(10 eps) as at a (re)start, x_bar = log eps and s_bar such that x = log eps.
        n, mu = self.first_phase, math.log(10 * eps)
        k.state.step_size.fill_(eps)
        k.state.dual_averaging[0] = torch.tensor(
            [_DUAL_AVERAGING_GAMMA * (mu - math.log(eps)) / math.sqrt(n), math.log(eps), mu],
            dtype=torch.float64)
        # ChEES starts from the T0 given (num_leapfrog_steps step_size), not from that many of the
        # median step size: T0 above the criterion's first maximum climbs to a later one (eight
        # schools: T 8.2 instead of 2.0, 3x the gradients). Its clock starts here too, so its
        # moving average weighs the slow windows' updates more than without this phase; that is
        # safe only because the clip to the restarts' spiking step sizes no longer feeds the
        # average (csrc/math/adaptation/trajectory_adaptation.h, docs/FAR_STARTS.md). A T0 below
        # one step of eps starts at one step.
        if k.state.chees is not None:
            floor_chees_length(k.state.chees, k.state.step_size)

    def _restart_stuck(self, q: torch.Tensor, i: int) -> None:
        stuck = (q == self.anchor).all(1)
        if self.group is None:
            every = stuck.cpu()
        else:
            every = self._gather_rows(stuck[:, None].to(torch.int64))[:, 0].bool()
        donors = self._donors(every, i)
        if donors is not None:
            base = 0 if self.group is None else self.kernel.chain_offset  # every's row of chain 0
            take = every[base:base + q.shape[0]]  # this rank's stuck chains
            if self.group is None:
                q[take.to(q.device)] = q[donors[take].to(q.device)]
            else:
                states = self._donor_states(q, donors, every)
                q[take.to(q.device)] = states[base:base + q.shape[0]][take].to(q.device)
            self.reseeded += take.to(device=q.device, dtype=torch.int64)
        self.anchor.copy_(q)

    def _donors(self, stuck: torch.Tensor, i: int) -> torch.Tensor | None:
        """[every chain] int64: for each stuck chain the row of the chain whose state it takes,
        uniform over the chains that moved (a generator keyed by the seed and i); None when no
        chain is stuck or none moved."""
        moved = torch.nonzero(~stuck).flatten()
        count = int(stuck.sum())
        if count == 0 or moved.numel() == 0:
            return None
        key = (self.kernel.key ^ (_KEY_MIX * (i + 1))) % 2**63
        donors = torch.arange(stuck.shape[0])
        draw = torch.randint(moved.numel(), (count,), generator=torch.Generator().manual_seed(key))
        donors[stuck] = moved[draw]
        return donors

    def _gather_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """Every rank's rows [chains of that rank, k] in global chain order, on the CPU (gathered
        padded to the most chains a rank has)."""
        g = self.group
        padded = rows.new_zeros(max(g.chain_counts), rows.shape[1])
        padded[:rows.shape[0]] = rows
        parts = g.gather_on_device(padded).cpu()
        return torch.cat([parts[r, :c] for r, c in enumerate(g.chain_counts)])

    def _donor_states(self, q: torch.Tensor, donors: torch.Tensor,
                      stuck: torch.Tensor) -> torch.Tensor:
        """[every chain, d] on the CPU: the donors' states at the stuck chains' rows (a second
        gather, of only the rows some rank takes, each with its global row)."""
        wanted = torch.unique(donors[stuck])
        offset, chains = self.kernel.chain_offset, q.shape[0]
        local = wanted[(wanted >= offset) & (wanted < offset + chains)] - offset
        counts = self.group.gather_on_device(torch.tensor([local.numel()], device=q.device)).cpu()
        rows = torch.zeros(int(counts.max()), q.shape[1] + 1, dtype=torch.float64,
                           device=q.device)
        rows[:local.numel(), 0] = (local + offset).to(device=q.device, dtype=torch.float64)
        rows[:local.numel(), 1:] = q[local.to(q.device)].to(torch.float64)
        parts = self.group.gather_on_device(rows).cpu()
        states = torch.zeros(stuck.shape[0], q.shape[1], dtype=q.dtype)
        for r in range(parts.shape[0]):
            n = int(counts[r])
            states[parts[r, :n, 0].to(torch.int64)] = parts[r, :n, 1:].to(q.dtype)
        out = torch.zeros_like(states)
        out[stuck] = states[donors[stuck]]
        return out

    # ---- checkpoints ----------------------------------------------------------------------------

    def checkpoint_tensors(self, warmup_left: int) -> dict:
        """What a checkpoint keeps (name -> (tensor, dims)), with the warm-up iterations left."""
        tensors = {"warmup_reseeded": (self.reseeded, ("chain",))}
        if warmup_left and self.anchor is not None:
            tensors["reseed_anchor"] = (self.anchor, ("chain", "dim"))
        if self.per_chain is not None:
            s = self.per_chain.state
            tensors.update(first_phase_step_size=(s.step_size, ("chain",)),
                           first_phase_dual_averaging=(s.dual_averaging,
                                                       ("chain", "dual_averaging")))
        return tensors

    def load(self, tensors: dict, warmup_left: int) -> None:
        """Restores checkpoint_tensors' tensors (those present) into a FarStarts just built."""
        if "warmup_reseeded" in tensors:
            self.reseeded.copy_(tensors["warmup_reseeded"])
        done = self.kernel.settings.num_warmup - warmup_left
        if "reseed_anchor" in tensors:
            self.anchor.copy_(tensors["reseed_anchor"])
        elif self.points and done > self.points[-1]:
            self.anchor = None  # past the last check point
        if self.per_chain is not None and done >= self.first_phase:
            self.per_chain = None  # the pooled state in the checkpoint already took over
        elif self.per_chain is not None:
            s = self.per_chain.state
            s.step_size.copy_(tensors["first_phase_step_size"])
            s.dual_averaging.copy_(tensors["first_phase_dual_averaging"])
            self.per_chain.warmup_left = self.first_phase - done
