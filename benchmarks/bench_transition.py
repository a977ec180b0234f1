"""One transition at B=2048, d=64, L=10, eps=0.1 on CUDA: fused_hmc against the anchors, one run.

Anchors: the reference in eager mode, under torch.compile, captured in a CUDA graph, and the seed's
3-launch design (torch.randn_like + torch.rand + our fused external-noise kernel). Back-to-back time
is the median per call over many calls timed with CUDA events; the graph figure is per transition
with 100 transitions captured in one graph. Writes JSON to benchmarks/results/ (and $OUT if set).

    python benchmarks/bench_transition.py [--quick]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import environment, save, time_graph, time_per_call  # noqa: E402

import fused_hmc  # noqa: E402
from fused_hmc.reference import ReferenceModel  # noqa: E402

B, D, L, EPS = 2048, 64, 10, 0.1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="skip torch.compile anchors")
    args = parser.parse_args()
    torch.manual_seed(0)
    q = torch.randn(B, D, device="cuda")
    mu = torch.zeros(D, device="cuda")
    reference = ReferenceModel(D).cuda()
    ours = fused_hmc.HMC(D).cuda()

    def three_launch():
        p = torch.randn_like(q)
        u = torch.rand(B, device="cuda")
        return fused_hmc.ops.transition(q, mu, EPS, L, "given", momentum=p, uniform=u)

    def philox():
        return fused_hmc.ops.transition(q, mu, EPS, L, "philox")

    def philox_api():
        return fused_hmc.hmc_step(q, mu, step_size=EPS, num_leapfrog_steps=L, rng="philox")

    rows = {}
    rows["reference eager"] = time_per_call(lambda: reference(q), 200)
    rows["reference CUDA graph (100/graph)"] = time_graph(lambda: reference(q), 100)
    if not args.quick:
        for mode in ("default", "reduce-overhead"):
            compiled = torch.compile(reference, mode=mode)
            start = time.perf_counter()
            for _ in range(3):
                compiled(q)
            torch.cuda.synchronize()
            rows[f"reference torch.compile {mode} (compile {time.perf_counter() - start:.1f}s)"] = \
                time_per_call(lambda: compiled(q), 500)
    rows["3-launch design (randn_like + rand + fused)"] = time_per_call(three_launch, 2000)
    rows["fused_hmc HMC module, torch mode (1 launch)"] = time_per_call(lambda: ours(q), 5000)
    rows["fused_hmc hmc_step philox"] = time_per_call(philox_api, 5000)
    rows["fused_hmc op philox (no Python wrapper)"] = time_per_call(philox, 5000)
    rows["fused_hmc torch mode, CUDA graph (100/graph)"] = time_graph(lambda: ours(q), 100)
    rows["fused_hmc philox, CUDA graph (100/graph)"] = time_graph(philox, 100)
    one = torch.zeros(1, device="cuda")
    rows["floor: smallest torch op launch (add on 1 element)"] = time_per_call(
        lambda: torch.add(one, 1), 5000)
    rows["floor: smallest kernel in a CUDA graph"] = time_graph(lambda: torch.add(one, 1), 100)

    big = torch.randn(1 << 20, D, device="cuda")
    big_mu = torch.zeros(D, device="cuda")
    rows["1,048,576 chains x 64: fused_hmc philox"] = time_per_call(
        lambda: fused_hmc.ops.transition(big, big_mu, EPS, L, "philox"), 50)
    rows["1,048,576 chains x 64: fused_hmc torch mode"] = time_per_call(
        lambda: fused_hmc.ops.transition(big, big_mu, EPS, L, "torch"), 50)
    rows["1,048,576 chains x 64: reference eager"] = time_per_call(lambda: reference(big), 5)

    torch_mode = rows["fused_hmc HMC module, torch mode (1 launch)"]
    print(f"\n{'workload (B=2048, d=64, L=10 unless noted)':<72} {'us/transition':>14}")
    for name, seconds in rows.items():
        print(f"{name:<72} {seconds * 1e6:>14.2f}")
    print(f"torch mode / philox mode: {torch_mode / rows['fused_hmc hmc_step philox']:.2f}x")
    results = {"environment": environment("python benchmarks/bench_transition.py"
                                          + (" --quick" if args.quick else "")),
               "config": {"B": B, "d": D, "L": L, "eps": EPS},
               "seconds_per_transition": rows}
    save(results, "bench_transition.json")


if __name__ == "__main__":
    main()
