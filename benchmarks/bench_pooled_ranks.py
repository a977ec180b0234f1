"""The cost per warm-up transition of a warm-up pooled across ranks (issue 16 item 2;
fused_hmc/sampling/pooled_ranks.py) against the same warm-up pooled inside one kernel call, side by
side in one process: the same chains, target and settings, with and without ChEES.

Over one rank (a gloo or NCCL process group of size 1) the difference is the per-transition
machinery alone: a sample op call, the statistics' small torch ops, the all-gathers (one, two with
ChEES) and the pooled_update launch. With more ranks, launch it under torchrun (each rank runs
`--chains`; the one-process row is then rank 0's chains alone).

    python benchmarks/bench_pooled_ranks.py --device cpu
    torchrun --nproc_per_node 2 benchmarks/bench_pooled_ranks.py --device cuda   # two GPUs

Prints one table (median of --repeats runs); the per-transition figure is
(time(warmup = W + 10) - time(warmup = 10)) / W, so the sampling and the start cost cancel.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist

import fused_hmc
from fused_hmc.sampling.distributed import end_rank_process


def _seconds(q0, warmup, repeats, **kw) -> float:
    def once():
        if q0.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fused_hmc.sample(q0, 10, num_warmup=warmup, progress=False, seed=1, **kw)
        if q0.is_cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start
    once()  # builds and warms up
    return statistics.median(once() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--chains", type=int, default=256)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--across", action=argparse.BooleanOptionalAction, default=True,
                        help="also the warm-up driven across ranks (--no-across: the kernel's)")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    if "WORLD_SIZE" in os.environ:
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if cuda else "gloo")
    else:
        rendezvous = os.path.join(tempfile.mkdtemp(), "rendezvous")
        dist.init_process_group("nccl" if cuda else "gloo", init_method=f"file://{rendezvous}",
                                rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    torch.set_num_threads(1)
    q0 = torch.randn(args.chains, args.dim, generator=torch.Generator().manual_seed(0)).to(device)
    ranks = dist.get_world_size()
    rows = []
    for chees in (False, True):
        kw = dict(pooled=True, adapt_trajectory_length=chees, num_leapfrog_steps=4)
        costs = {}
        paths = [("one kernel call", {})]
        if args.across:
            paths.append((f"across {ranks} rank(s)", dict(process_group=dist.group.WORLD)))
        for name, extra in paths:
            long = _seconds(q0, args.warmup + 10, args.repeats, **kw, **extra)
            short = _seconds(q0, 10, args.repeats, **kw, **extra)
            costs[name] = (long - short) / args.warmup
        rows.append(("ChEES" if chees else "step size + mass", costs))
    if dist.get_rank() == 0:
        print(f"warm-up pooled over {ranks} rank(s) x {args.chains} chains x {args.dim} dims on "
              f"{args.device} ({dist.get_backend()}), fused_hmc {fused_hmc.__version__}, torch "
              f"{torch.__version__}; per warm-up transition, median of {args.repeats}:")
        print("| adaptation | one kernel call | across ranks | difference |")
        print("|---|---:|---:|---:|")
        for what, costs in rows:
            inside, across = (*costs.values(), None)[:2]
            print(f"| {what} | {inside * 1e6:.0f} us | " + (
                "not run | |" if across is None else
                f"{across * 1e6:.0f} us | {(across - inside) * 1e6:+.0f} us |"))
    dist.destroy_process_group()
    end_rank_process(0)  # not through the interpreter's finalization, where gloo ranks can abort


if __name__ == "__main__":
    main()
