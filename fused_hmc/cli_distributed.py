"""``torchrun --nproc_per_node N -m fused_hmc sample ...``: the sample command over N processes.

With WORLD_SIZE > 1 in the environment (torchrun sets it, with RANK and LOCAL_RANK), each rank
runs --chains chains (per rank: N x --chains in all) in one process group (gloo on --device cpu;
nccl on cuda, rank r on GPU LOCAL_RANK). The start is the one of a single process running every
chain, each rank taking its rows, so the chains are those of ``fused-hmc sample --chains
<N x chains>`` bit for bit (see :mod:`fused_hmc.sampling.distributed`); rank 0 prints the report
of every rank's chains (``SampleResult.summary()`` of the global summary), the others nothing.
"""
from __future__ import annotations

import datetime
import os

import torch

from .cli import CliError

# Flags whose files (or warm-up) a distributed run does not support yet.
_UNSUPPORTED = (("out", "--out"), ("checkpoint", "--checkpoint"), ("resume", "--resume"),
                ("plot", "--plot"), ("superchains", "--superchains"))


class Ranks:
    """This process's place in a torchrun launch, and the process group it joined."""

    def __init__(self, args, world: int):
        for dest, flag in _UNSUPPORTED:
            if getattr(args, dest, None) is not None:
                raise CliError(flag, "is not supported under torchrun (WORLD_SIZE > 1) yet")
        import torch.distributed as dist

        self.world, self.rank = world, int(os.environ.get("RANK", "0"))
        cuda = (args.device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cuda"
        if cuda:
            self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        dist.init_process_group("nccl" if cuda else "gloo",
                                timeout=datetime.timedelta(seconds=600))
        self.group = dist.group.WORLD

    def rows(self, chains_per_rank: int) -> slice:
        return slice(self.rank * chains_per_rank, (self.rank + 1) * chains_per_rank)

    def report(self, res, elapsed: float) -> None:
        if self.rank != 0:
            return
        device = f"{self.device.type} x {self.world} ranks"
        print(f"fused-hmc sample on {device} (torchrun; --chains per rank)")
        res.summary()
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

    def close(self) -> None:
        import torch.distributed as dist

        dist.destroy_process_group()


def from_environment(args) -> Ranks | None:
    """The torchrun launch this process is part of, or None when it runs alone."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return Ranks(args, world) if world > 1 else None

