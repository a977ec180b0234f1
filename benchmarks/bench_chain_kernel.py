"""The chain kernels of two trees side by side on one GPU (issue 31's table).

Run with ``--tree DIR``, the checkout whose ``fused_hmc`` to time (this one, or an export of an
older commit), and ``--api run|sample``: the op that tree's chains run through (``run``, before the
sampling and warm-up ops were split, e.g. 24b6070; ``sample`` now). Each tree runs in its own
process (``benchmarks/chain_kernel_ab.sh`` runs both and joins the tables). Each figure is the
median of 5 repeats of CUDA-event-timed back-to-back calls (benchmarks/timing.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", required=True)
    parser.add_argument("--api", choices=("run", "sample"), required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.tree).resolve()))
    sys.path.insert(1, str(Path(__file__).resolve().parent))
    import torch

    import fused_hmc
    from fused_hmc import ops
    from timing import time_adaptive

    assert Path(fused_hmc.__file__).resolve().is_relative_to(Path(args.tree).resolve())
    dev = torch.device("cuda")
    rows = []

    def buffers(B, d, dtype):
        f64 = dict(dtype=torch.float64, device=dev)
        g = torch.Generator(device=dev).manual_seed(0)
        q = torch.randn(B, d, generator=g, device=dev, dtype=dtype)
        return (q, torch.zeros(d, device=dev, dtype=dtype), torch.zeros(B, d, **f64),
                torch.zeros(B, d, **f64), torch.zeros(B, dtype=torch.int64, device=dev),
                torch.zeros(B, **f64))

    def persistent(B, d, T, dtype=torch.float32, thin=1, L=10, eps=0.1):
        q, mu, mean, m2, count, prob = buffers(B, d, dtype)
        step = torch.full((1,), eps, dtype=torch.float64, device=dev)
        inv_mass = torch.ones(1, d, dtype=dtype, device=dev)
        if args.api == "run":
            def call():
                ops.run(q, "standard", [mu], [], step, inv_mass, 0.0, L, 7, 0, 0, T, thin=thin,
                        mean=mean, m2=m2, accept_count=count, accept_prob_sum=prob)
        else:
            from fused_hmc.sampling import chain_statistics

            statistics = chain_statistics.as_list(chain_statistics.zeros(B, dev))

            def call():
                ops.sample(q=q, target="standard", target_tensors=[mu], target_scalars=[],
                           step_size=step, inv_mass=inv_mass, jitter=0.0, num_leapfrog_steps=L,
                           seed=7, chain_offset=0, first_transition=0, num_transitions=T,
                           thin=thin, mean=mean, m2=m2, statistics=statistics)
        seconds, _ = time_adaptive(call, dev, target_s=0.05)
        return seconds

    def one_transition(B, d, dtype=torch.float32, L=10, eps=0.1):
        q = buffers(B, d, dtype)[0]
        mu = torch.zeros(d, device=dev, dtype=dtype)
        b = fused_hmc._build.bindings()

        def call():
            b.transition(q, mu, eps, L, "philox", None, 7, 0, None, None, False)
        seconds, _ = time_adaptive(call, dev, target_s=0.05)
        return seconds

    def row(workload, seconds, per):
        rows.append({"workload": workload, "seconds": seconds, "per": per})
        print(f"{workload:58s} {seconds * 1e6:10.2f} us {per}", flush=True)

    for dtype, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
        row(f"2048x64 L=10 1000 transitions, moments [{tag}]", persistent(2048, 64, 1000, dtype),
            "call")
        row(f"1048576x64 persistent, per transition [{tag}]",
            persistent(1 << 20, 64, 20, dtype) / 20, "transition")
        row(f"1048576x64 one transition (philox op) [{tag}]", one_transition(1 << 20, 64, dtype),
            "call")
    row("2048x1024 persistent thin=1, per transition [f32]",
        persistent(2048, 1024, 200) / 200, "transition")
    row("2048x1024 persistent thin=8, per transition [f32]",
        persistent(2048, 1024, 200, thin=8) / 200, "transition")
    row("2048x64 one transition back-to-back (philox) [f32]", one_transition(2048, 64), "call")
    Path(args.out).write_text(json.dumps({"api": args.api, "tree": args.tree, "rows": rows,
                                          "device": torch.cuda.get_device_name()}, indent=1))


if __name__ == "__main__":
    main()
