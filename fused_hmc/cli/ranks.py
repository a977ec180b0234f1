"""``torchrun --nproc_per_node N -m fused_hmc sample ...``: the sample command over N processes.

With WORLD_SIZE > 1 in the environment (torchrun sets it, with RANK and LOCAL_RANK), each rank
runs --chains chains (per rank: N x --chains in all) in one process group (gloo on --device cpu;
nccl on cuda, rank r on GPU LOCAL_RANK). The start is the one of a single process running every
chain, each rank taking its rows, so the chains are those of ``fused-hmc sample --chains
<N x chains>`` bit for bit (see :mod:`fused_hmc.sampling.distributed`); rank 0 prints the report
of every rank's chains (``SampleResult.summary()`` of the global summary) and the warnings a
one-process run gives (R-hat above 1.1, chains that never moved), the others nothing. Every rank
must be given the same flags (one launch of several nodes runs a command on each): the ranks
compare them as they join, and all end naming a flag that differs.
With --out PATH, PATH becomes a directory of every rank's store and the global summary
(:mod:`fused_hmc.sampling.rank_stores`).
"""
from __future__ import annotations

import datetime
import os
from pathlib import Path

import torch

from .errors import CliError, warn
from .flag_types import default_device
from .report import warn_high_r_hat

# Flags a distributed run does not support yet.
_UNSUPPORTED = (("checkpoint", "--checkpoint"), ("resume", "--resume"), ("plot", "--plot"),
                ("plot_params", "--plot-params"), ("superchains", "--superchains"))


def world_size() -> int:
    """The processes torchrun launched (1 when this one runs alone)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def refuse_unsupported(args) -> None:
    """Under torchrun, the flags a distributed run cannot honour yet, named before any rank
    joins the process group (so nothing waits for the other ranks)."""
    if world_size() > 1:
        for dest, flag in _UNSUPPORTED:
            if getattr(args, dest, None) is not None:
                raise CliError(flag, "is not supported under torchrun (WORLD_SIZE > 1) yet")


class Ranks:
    """This process's place in a torchrun launch, and the process group it joined."""

    def __init__(self, args, world: int):
        import torch.distributed as dist

        self.world, self.rank = world, int(os.environ.get("RANK", "0"))
        self.chains_per_rank = args.chains
        cuda = (args.device or default_device()) == "cuda"
        if cuda:
            local, gpus = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
            if local >= gpus:  # NCCL cannot put two ranks on one GPU
                raise CliError("--device", f"cuda: local rank {local} needs GPU {local}, but "
                                           f"this machine has {gpus}; run at most {gpus} "
                                           "processes per node (torchrun --nproc_per_node)")
            self.device = torch.device("cuda", local)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        dist.init_process_group("nccl" if cuda else "gloo",
                                timeout=datetime.timedelta(seconds=600))
        self.group = dist.group.WORLD
        self._check_same_flags(args)
        self.out = None if args.out is None else Path(args.out).absolute()
        if self.out is not None:  # after every rank checked that it was new (joining waits)
            self.out.mkdir(exist_ok=True)

    def _check_same_flags(self, args) -> None:
        """Every rank was given the same sample flags, or every rank raises naming the first that
        differs (one all-gather of a digest per flag)."""
        import torch.distributed as dist

        from ..sampling.distributed import digest

        mine = [digest(repr(getattr(args, dest))) for dest, _, _ in args.sample_flags]
        every = [None] * self.world
        dist.all_gather_object(every, mine, group=self.group)
        for j, (dest, _, flag) in enumerate(args.sample_flags):
            ranks = [r for r in range(self.world) if every[r][j] != every[0][j]]
            if ranks:
                dist.destroy_process_group()
                raise CliError(flag, f"differs between the ranks (ranks {ranks} differ from "
                                     f"rank 0; this rank's: {getattr(args, dest)!r}): every rank "
                                     "of one run is given the same flags")

    def store(self) -> Path | None:
        """This rank's store under --out, or None."""
        from ..sampling.rank_stores import rank_store

        return None if self.out is None else rank_store(self.out, self.rank)

    def rows(self, chains_per_rank: int) -> slice:
        return slice(self.rank * chains_per_rank, (self.rank + 1) * chains_per_rank)

    def report(self, res, elapsed: float) -> None:
        if self.rank != 0:
            return
        device = f"{self.device.type} x {self.world} ranks"
        print(f"fused-hmc sample on {device} (torchrun; --chains per rank)")
        summary = res.global_summary
        diag = summary.print(res)  # res.summary() of every rank's chains
        if summary.stuck_count:
            from ..sampling import stuck_chains

            warn(stuck_chains.describe(res, list(summary.stuck_ids),
                                       stuck_chains.remedy(res, cli=True),
                                       count=summary.stuck_count, chains=summary.chains))
        if diag is not None:
            warn_high_r_hat(diag.max_r_hat)
        w = res.warmup
        if w.num_warmup and w.pooled:
            step, inv_mass = res.step_size.double(), res.inverse_mass.double()
            print(f"warm-up           pooled over every rank's chains toward acceptance "
                  f"{w.target_accept:g}: step size {step[0].item():.4g}, inverse mass "
                  f"{inv_mass.min().item():.4g} .. {inv_mass.max().item():.4g}")
        total = res.num_warmup + res.num_transitions
        per_s = total / elapsed if elapsed > 0 else float("inf")
        print(f"time              {elapsed:.3f} s on rank 0 ({per_s:,.0f} transitions/s, "
              f"{per_s * res.global_summary.chains:,.3g} chain-transitions/s over every rank)")
        if self.out is not None:
            from ..sampling import rank_stores

            rank_stores.write_summary(self.out, res.global_summary,
                                      [self.chains_per_rank] * self.world)
            print(f"result            in {self.out}: rank0 .. rank{self.world - 1}, each rank's "
                  f"chains (fused_hmc.load reads each; zarr stores xarray and ArviZ open), and "
                  f"{rank_stores.SUMMARY} (every chain's moments and acceptance)")

    def close(self) -> None:
        import torch.distributed as dist

        dist.destroy_process_group()


def from_environment(args) -> Ranks | None:
    """The torchrun launch this process is part of, or None when it runs alone."""
    world = world_size()
    return Ranks(args, world) if world > 1 else None

