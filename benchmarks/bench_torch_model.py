"""Models written in PyTorch against the same models in C++ (issue 29), side by side in one run.

For eight schools, diamonds and logistic regression from the model library, in float32 and
float64 at --chains chains:
  torch  the model's torch form compiled by fused_hmc.TorchModel (reverse-mode gradient), over
         the library's lanes as the hand-written form;
  hand   the C++ form with its hand-written gradient (the library's lanes: diamonds uses 8);
  duals  the C++ form with the forward-mode dual-number gradient.
Each row: transitions and gradient evaluations per second in the sampling kernel at a fixed step
size (bench_models.target_gradient_rate), the ratio torch / hand, and the compile time of each
module (measured in its own process, all modules compiled at once by --jobs processes, so a time
includes the machine's contention). Then, for the torch form in float64, a short sampling run
(per-chain warm-up) compared with posteriordb's reference means (worst |mean - ref| / ref sd).

Usage: python benchmarks/bench_torch_model.py [--chains 4096] [--models a,b] [--variants torch,hand]
       [--dtypes f32,f64]
       [--out file.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

DEVICE = os.environ.get("FUSED_HMC_BENCH_DEVICE", "cuda" if torch.cuda.is_available() else "cpu")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
MODELS = ("eight_schools", "logistic_regression", "diamonds")
VARIANTS = ("torch", "hand", "duals")
DTYPES = {"f32": torch.float32, "f64": torch.float64}


def make_target(name: str, variant: str):
    from fused_hmc import models

    model = getattr(models, name)()
    if variant == "torch":
        return model, model.torch_form().model()  # over the library's lanes, as the C++ form
    return model, model.target(gradient=variant == "hand")


def build_one(spec: str) -> None:
    """Child process: build one (model, variant, dtype) module and print its compile time."""
    name, variant, dtype = spec.split(":")
    start = time.perf_counter()
    _, target = make_target(name, variant)
    traced = time.perf_counter() - start
    target.op_name(DTYPES[dtype], torch.device(DEVICE))
    print(json.dumps({"spec": spec, "construct_s": traced,
                      "compile_s": time.perf_counter() - start}), flush=True)


def build_all(specs: list[str], jobs: int, script: str = __file__,
              into: dict | None = None) -> dict:
    """Runs `script --build-one SPEC` for every spec, `jobs` processes at once; each child prints
    a JSON line last. Returns (and fills `into`, for a caller watching from another thread)
    spec -> that JSON, or {"failed": True}."""
    times = {} if into is None else into
    running, pending = [], list(specs)
    while pending or running:
        while pending and len(running) < jobs:
            spec = pending.pop(0)
            running.append((spec, subprocess.Popen(
                [sys.executable, script, "--build-one", spec], stdout=subprocess.PIPE,
                text=True)))
        spec, proc = running.pop(0)
        out, _ = proc.communicate()
        lines = [line for line in out.splitlines() if line.startswith("{")]
        times[spec] = json.loads(lines[-1]) if proc.returncode == 0 and lines else {"failed": True}
        print("built", spec, times[spec], flush=True)
    return times


def posterior_check(name: str, chains: int) -> dict:
    """The torch form sampled in float64 (500 + 500, per-chain warm-up), its draws mapped to the
    C++ form's coordinates (TorchForm.to_cpp) and reported as the model reports them."""
    import fused_hmc
    from bench_models import _reference, _summary

    model, target = make_target(name, "torch")
    q0 = target.initial_point(chains, generator=torch.Generator().manual_seed(0))
    start = time.perf_counter()
    res = fused_hmc.sample(q0.to(DEVICE, torch.float64), 500, target=target, num_warmup=500,
                           seed=1, num_leapfrog_steps=8, jitter=0.2, progress=False)
    wall = time.perf_counter() - start
    x_cpp = res.samples.double().cpu()[..., list(model.torch_form().to_cpp)]
    summary = _summary(model.constrained_values(x_cpp).numpy(), _reference(model))
    return {"wall_s": wall, "accept": float(res.mean_accept_prob.mean())} | summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, default=4096)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", default=None)
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--no-posterior", action="store_true")
    parser.add_argument("--build-one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_one:
        build_one(args.build_one)
        return
    from bench_models import target_gradient_rate

    names = args.models.split(",")
    variants = args.variants.split(",")
    dtypes = {d: DTYPES[d] for d in args.dtypes.split(",")}
    specs = [f"{n}:{v}:{d}" for n in names for v in variants for d in dtypes]
    builds = build_all(specs, args.jobs)
    rows = []
    for name in names:
        for dname, dtype in dtypes.items():
            row = {"model": name, "dtype": dname}
            for variant in variants:
                if builds[f"{name}:{variant}:{dname}"].get("failed"):
                    row[variant] = None
                    continue
                model, target = make_target(name, variant)
                starts = target if variant == "torch" else model
                q = starts.initial_point(args.chains, generator=torch.Generator().manual_seed(0))
                rate = target_gradient_rate(target, (q * 0.1).to(DEVICE, dtype))
                row[variant] = rate["transitions_per_second"]
                row[f"{variant}_compile_s"] = builds[f"{name}:{variant}:{dname}"]["compile_s"]
            if row.get("torch") and row.get("hand"):
                row["torch_over_hand"] = row["torch"] / row["hand"]
            rows.append(row)
            print(row, flush=True)
    from fused_hmc import models

    posterior = {} if args.no_posterior else {
        n: posterior_check(n, args.chains) for n in names
        if getattr(models, n)().posteriordb is not None}  # logistic regression has no reference
    print(f"\n{'model':20s} {'dtype':5s} {'torch T/s':>11s} {'hand T/s':>11s} {'duals T/s':>11s} "
          f"{'torch/hand':>10s} {'compile s (torch)':>17s}")
    for r in rows:
        def fmt(variant):  # not asked for: -, asked for and failed to build: failed
            v = r.get(variant)
            return f"{v:11.3g}" if v else f"{'failed' if variant in r else '-':>11s}"
        print(f"{r['model']:20s} {r['dtype']:5s} {fmt('torch')} {fmt('hand')} "
              f"{fmt('duals')} {r.get('torch_over_hand', float('nan')):10.2f} "
              f"{r.get('torch_compile_s', float('nan')):17.1f}")
    for n, p in posterior.items():
        print(f"{n}: torch form, float64, 500 + 500: worst |mean - ref| = "
              f"{p['worst_mean_error_sd']:.3f} sd, accept {p['accept']:.3f}, {p['wall_s']:.1f} s")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": DEVICE, "chains": args.chains,
                                              "rows": rows, "posterior": posterior,
                                              "builds": builds}, indent=1))


if __name__ == "__main__":
    main()
