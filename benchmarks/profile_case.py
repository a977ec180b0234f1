"""One launch of each of issue 13's chain-kernel workloads, bracketed by the CUDA profiler's
start/stop so that Nsight Compute profiles exactly those launches (a warm-up call of each comes
first, outside the bracket). Run it under ncu; benchmarks/profile_chain_kernels.sh does, and turns
the report into instructions per warp per transition.

Usage: ncu --profile-from-start off ... python benchmarks/profile_case.py [--cases a,b,...]
Cases: run_2048x64_f32 run_2048x64_f64 run_1Mx64_f32 run_1Mx64_f64 run_2048x1024_f32
       run_2048x1024_thin8_f32 step_1Mx64_f32 step_1Mx64_f64 (the transition op),
       diamonds_4096_f32 diamonds_4096_f64 (the diamonds model over 8 lanes a chain, the
       hand-written gradient: prebuild diamonds:hand:f32 / f64 first),
       pooled_1Mx64_f32 (the pooled warm-up's cooperative kernel: the 25 transitions of the
       first slow window of a 500-transition warm-up, its end's pooling included).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fused_hmc import _build, ops  # noqa: E402
from fused_hmc.sampling import chain_statistics  # noqa: E402

L, EPS, SEED = 10, 0.1, 7
# name: (kind, chains, dim, transitions, thin, dtype)
CASES = {
    "run_2048x64_f32": ("run", 2048, 64, 1000, 1, torch.float32),
    "run_2048x64_f64": ("run", 2048, 64, 1000, 1, torch.float64),
    "run_1Mx64_f32": ("run", 1 << 20, 64, 20, 1, torch.float32),
    "run_1Mx64_f64": ("run", 1 << 20, 64, 20, 1, torch.float64),
    "run_2048x1024_f32": ("run", 2048, 1024, 200, 1, torch.float32),
    "run_2048x1024_thin8_f32": ("run", 2048, 1024, 200, 8, torch.float32),
    "step_1Mx64_f32": ("step", 1 << 20, 64, 1, 1, torch.float32),
    "step_1Mx64_f64": ("step", 1 << 20, 64, 1, 1, torch.float64),
    "diamonds_4096_f32": ("diamonds", 4096, 26, 5, 1, torch.float32),
    "diamonds_4096_f64": ("diamonds", 4096, 26, 5, 1, torch.float64),
    "pooled_1Mx64_f32": ("pooled", 1 << 20, 64, 25, 1, torch.float32),
}
POOLED_WARMUP, POOLED_WINDOWS = 500, [75, 25, 50]  # Stan's windows, as the sampler scales them


def call_of(kind, chains, dim, transitions, thin, dtype):
    dev = torch.device("cuda")
    q = torch.randn(chains, dim, device=dev, dtype=dtype)
    mu = torch.zeros(dim, device=dev, dtype=dtype)
    if kind == "step":
        b = _build.bindings()
        return lambda: b.transition(q, mu, EPS, L, "philox", None, SEED, 0, None, None, False)
    f64 = dict(dtype=torch.float64, device=dev)
    mean, m2 = torch.zeros(chains, dim, **f64), torch.zeros(chains, dim, **f64)
    statistics = chain_statistics.as_list(chain_statistics.zeros(chains, dev))
    step = torch.full((1,), EPS, **f64)
    unit_mass = q.new_empty(0)
    target, tensors, scalars = "standard", [mu], []
    if kind == "diamonds":  # from the posterior's neighbourhood, at a step size it accepts
        from fused_hmc import models

        model = models.diamonds()
        cpp = model.target(gradient=True)
        target, tensors, scalars = (cpp.op_name(dtype, dev, chains=chains), cpp.op_tensors(dtype, dev),
                                    cpp.op_scalars())
        q.copy_(model.initial_point(chains, generator=torch.Generator().manual_seed(SEED)) * 0.01)
        q[:, dim - 2] += 7.8  # Intercept
        q[:, dim - 1] -= 2.1  # log sigma
        step.fill_(1e-3)
    if kind == "pooled":  # one adaptation state; the first slow window [75, 100)
        inv_mass = torch.ones(1, dim, dtype=dtype, device=dev)
        dual = torch.zeros(1, 3, **f64)
        return lambda: ops.warmup(
            q=q, target=target, target_tensors=tensors, target_scalars=scalars, step_size=step,
            inv_mass=inv_mass, jitter=0.0, num_leapfrog_steps=L, seed=SEED, chain_offset=0,
            first_transition=POOLED_WINDOWS[0], num_transitions=transitions,
            statistics=statistics, dual_averaging=dual, window_mean=mean, window_m2=m2,
            warmup_start=0, num_warmup=POOLED_WARMUP, windows=POOLED_WINDOWS, target_accept=0.8,
            adapt_step_size=True, adapt_mass_matrix=True)
    return lambda: ops.sample(
        q=q, target=target, target_tensors=tensors, target_scalars=scalars, step_size=step,
        inv_mass=unit_mass, jitter=0.0, num_leapfrog_steps=L, seed=SEED, chain_offset=0,
        first_transition=0, num_transitions=transitions, statistics=statistics, thin=thin,
        mean=mean, m2=m2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--manifest", help="write the cases' order and shapes here (JSON)")
    args = parser.parse_args()
    names = args.cases.split(",")
    manifest = []
    for name in names:
        kind, chains, dim, transitions, thin, dtype = CASES[name]
        call = call_of(*CASES[name])
        call()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        call()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        manifest.append({"case": name, "chains": chains, "dim": dim, "transitions": transitions,
                         "thin": thin})
        print(f"profiled {name}", flush=True)
    if args.manifest:
        Path(args.manifest).write_text(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
