"""Users' data models at thousands of chains, lanes chosen automatically, against BlackJAX (issue 35).

Models (lanes_models.py): a linear regression like posteriordb's earnings (1,192 x 3), the library's
logistic regression (1,000 x 25), a two-component normal mixture through torch.logaddexp (1,000
rows) and the library's diamonds (5,000 x 24), each a fused_hmc.TorchModel with lanes="auto" (the
lanes of each run chosen from its chain count, the GPU's SMs and the data's rows,
fused_hmc.lanes.choose_lanes) and the same density in JAX (jax_models.py).

1. Builds: every CUDA module the run needs (one per model, dtype and lanes), compiled first by
   --jobs processes at once (as bench_torch_model.py does), while the BlackJAX processes compile
   their XLA programs (lanes_blackjax.py) and this one finds each model's mode; nothing is timed
   before all of them are done.
2. fused_hmc: gradient evaluations per second in the sampling kernel at a fixed step size, L = 8
   (bench_models.target_gradient_rate), at each --chains and dtype, from starts at the mode plus
   0.1 of the smallest posterior sd, with step size half the smallest sd (the leapfrog is then
   stable: every step finite; mean_accept_prob near 1 shows it). Recorded: the lanes the run took
   (target.lanes_for), transitions and gradients per second, and the fraction of the GPU's FMA
   limit in the row's dtype: gradients/s x rows x lanes_models.FMA_PER_ROW (its docstring gives
   the count) / (SMs x FMA units per SM x clock): on the H200 132 x 128 x 1.98 GHz = 33.5e12 FP32
   and 132 x 64 x 1.98 GHz = 16.7e12 FP64 multiply-adds per second (the datasheet's 67 and 34
   TFLOP/s; the clock is nvidia-smi's under load in /work/.library/device/KINDS.md).
3. BlackJAX 1.7.1 vmapped ChEES on the same model at --jax-chains in each dtype (one process per
   dtype): first the value check (the JAX density against the TorchModel's compiled one at 16 of
   Stan's starts, worst relative difference, tolerance 1e-5 in float32 and 1e-10 in float64), then
   its gradient evaluations per second = mean integration steps x transitions x chains / sampling
   wall time, after --jax-warmup warm-up transitions, the sampling's compiled program run once
   untimed and timed the second time.
4. With --ess: at --ess-chains chains in float64, fused_hmc's per-chain warm-up (--ess-warmup +
   --ess-draws, L = 8, jitter 0.2, as bench_models) against BlackJAX ChEES (the same numbers) from
   the same starts (Stan's uniform(-2, 2)): wall time (no compilation), smallest bulk ESS and ESS/s
   (lanes_ess.py, one estimator for both) and, for diamonds, the worst |mean - posteriordb| / sd.

Rows print as they finish and --out is rewritten after each (atomically: a cut run keeps what it
had); a table comes last. --budget SECONDS skips the points predicted not to fit (budget.py);
the points run in the order the budget should spare them: fused_hmc at --jax-chains and at the
largest --chains, BlackJAX, fused_hmc's other chain counts, the ESS part. Figures and commands:
benchmarks/results/lanes/README.md.

    python benchmarks/bench_lanes.py --out lanes.json                       # on the GPU
    python benchmarks/bench_lanes.py --ess --chains 4096 --out lanes_ess.json
    python benchmarks/bench_lanes.py --rows 262144 --models earnings,logistic_regression \
        --chains 132,1024,4096 --no-jax --out lanes_262144.json        # block lanes (256)
    FUSED_HMC_BENCH_DEVICE=cpu python benchmarks/bench_lanes.py --chains 8,32 --jax-chains 32 \\
        --ess --ess-chains 32 --ess-warmup 60 --ess-draws 40                # a CPU dry run
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import lanes_models
from bench_torch_model import build_all
from budget import Budget

DEVICE = os.environ.get("FUSED_HMC_BENCH_DEVICE", "cuda" if torch.cuda.is_available() else "cpu")
DTYPES = {"f32": torch.float32, "f64": torch.float64}
FMA_PER_SM_CLOCK = {"f32": 128, "f64": 64}  # a Hopper SM's FP32 and FP64 FMA units
CLOCK_HZ = 1.98e9  # the H200's SM clock under load (nvidia-smi, KINDS.md)
DEFAULT_CHAINS = {"cuda": "1024,4096,16384,65536", "cpu": "8,32"}
CHECK_POINTS = 16
# Predicted seconds of one point, for --budget (measured ones replace them as the run goes).
PREDICTED_S = {"rate": 3.0, "blackjax": 8.0, "ess_fused_hmc": 30.0, "ess_blackjax": 60.0}


def auto_lanes_target(model):
    """The model as a TorchModel whose lanes each run chooses (lanes="auto", the default)."""
    import fused_hmc

    target = fused_hmc.TorchModel(model.fn, model.params, data=model.data)
    assert target.lanes == "auto", "the model's density has no loop over data rows"
    return target


def sm_count() -> int | None:
    return torch.cuda.get_device_properties(0).multi_processor_count if DEVICE == "cuda" else None


def planned_lanes(chains: int, rows: int) -> int:
    """The lanes lanes_for will choose (the builds are started before the targets exist; the
    timing phase records lanes_for's own answer)."""
    from fused_hmc.lanes import choose_lanes

    return choose_lanes(chains, sm_count(), rows) if DEVICE == "cuda" else 1


def build_one(spec: str) -> None:
    """Child process: build one model:dtype:lanes:rows module (rows 0: the model's own data) and
    print its compile time."""
    name, dtype, lanes, rows = spec.split(":")
    start = time.perf_counter()
    target = auto_lanes_target(lanes_models.make(name, int(rows) or None))
    traced = time.perf_counter() - start
    target.module(DTYPES[dtype], torch.device(DEVICE), int(lanes))
    print(json.dumps({"spec": spec, "trace_s": traced, "compile_s": time.perf_counter() - start}),
          flush=True)


class Record:
    """The run's JSON, rewritten whole after each row (a temporary file renamed over the old)."""

    def __init__(self, path: str | None, meta: dict):
        self.path = Path(path) if path else None
        self.data = meta | {"builds": {}, "rates": [], "blackjax": [], "ess": [], "skipped": []}

    def add(self, section: str, row: dict) -> None:
        self.data[section].append(row)
        print(section, json.dumps(row), flush=True)
        self.save()

    def save(self) -> None:
        if self.path is None:
            return
        fd, tmp = tempfile.mkstemp(dir=self.path.parent or ".", prefix=self.path.name + ".")
        with os.fdopen(fd, "w") as f:
            json.dump(self.data, f, indent=1)
        os.replace(tmp, self.path)


class BlackJax:
    """One lanes_blackjax.py process (one dtype): started, then asked point by point."""

    def __init__(self, dtype: str, models: list[str], args):
        command = [sys.executable, str(HERE / "lanes_blackjax.py"), "--dtype", dtype,
                   "--models", ",".join(models), "--chains", str(args.jax_chains),
                   "--warmup", str(args.jax_warmup), "--transitions", str(args.jax_transitions)]
        if args.rows is not None:
            command += ["--rows", str(args.rows)]
        if args.ess and dtype == "f64":
            command += ["--ess", str(args.ess_warmup), str(args.ess_draws)]
        self.dtype = dtype
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.ready = None

    def wait_ready(self) -> dict:
        if self.ready is None:
            self.ready = self._read() | {"dtype": self.dtype}
        return self.ready

    def ask(self, do: str, model: str, inputs: Path) -> dict:
        self.proc.stdin.write(json.dumps({"do": do, "model": model, "inputs": str(inputs)}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def _read(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
        return {"error": f"lanes_blackjax.py ({self.dtype}) ended with {self.proc.wait()}"}

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"do": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait()


def fma_fraction(gradients_per_second: float, model, dtype: str) -> float | None:
    sms = sm_count()
    if sms is None:
        return None
    peak = sms * FMA_PER_SM_CLOCK[dtype] * CLOCK_HZ
    return gradients_per_second * model.rows * model.fma_per_row / peak


def jax_inputs(folder: Path, dtype: str, models: dict, targets: dict, chains: int) -> Path:
    """The BlackJAX process's npz: per model, Stan's starts [chains, dim] and the TorchModel's
    compiled log density in `dtype` at the first CHECK_POINTS of them."""
    arrays = {}
    for name, target in targets.items():
        starts = target.initial_point(chains, generator=torch.Generator().manual_seed(0))
        points = starts[:CHECK_POINTS].to(DEVICE, DTYPES[dtype])
        arrays[f"{name}/starts"] = starts.numpy()
        arrays[f"{name}/points"] = points.cpu().numpy()
        arrays[f"{name}/values"] = target.log_density(points).double().cpu().numpy()
    path = folder / f"inputs_{dtype}.npz"
    np.savez(path, **arrays)
    return path


def fused_ess(model, target, chains: int, warmup: int, draws: int) -> dict:
    import lanes_ess

    import fused_hmc

    q0 = target.initial_point(chains, generator=torch.Generator().manual_seed(0))
    q0 = q0.to(DEVICE, torch.float64)

    def run(num_warmup, num_draws):
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        res = fused_hmc.sample(q0, num_draws, target=target, num_warmup=num_warmup, seed=1,
                               num_leapfrog_steps=8, jitter=0.2, progress=False)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        return res, time.perf_counter() - start

    run(min(warmup, 20), min(draws, 10))  # loads the kernels (the module is built)
    res, wall = run(warmup, draws)
    out = lanes_ess.ess_summary(model, res.samples.double().cpu().numpy(), wall)
    return out | {"accept": float(res.mean_accept_prob.mean()),
                  "gradient_evaluations": res.warmup_gradient_evaluations
                  + res.sampling_gradient_evaluations,
                  "lanes": target.lanes_for(chains, DEVICE)}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", default=DEFAULT_CHAINS.get(DEVICE, "8,32"),
                        help="fused_hmc's chain counts, comma-separated (the largest is the "
                             "'saturated' one)")
    parser.add_argument("--models", default=None,
                        help=f"comma-separated (default: {','.join(lanes_models.MODELS)}, or "
                             f"with --rows {','.join(lanes_models.RESIZABLE)})")
    parser.add_argument("--rows", type=int, default=None,
                        help="synthetic data of this many rows for the resizable models (earnings, "
                             "logistic_regression, gauss_mix): 262144 benchmarks block lanes")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-jax", action="store_true", help="fused_hmc only")
    parser.add_argument("--jax-chains", type=int, default=4096)
    parser.add_argument("--jax-warmup", type=int, default=200)
    parser.add_argument("--jax-transitions", type=int, default=50)
    parser.add_argument("--ess", action="store_true", help="also the ESS/s comparison (float64)")
    parser.add_argument("--ess-chains", type=int, default=4096)
    parser.add_argument("--ess-warmup", type=int, default=1000)
    parser.add_argument("--ess-draws", type=int, default=1000)
    parser.add_argument("--budget", type=float, default=None, help="seconds for the whole run")
    parser.add_argument("--out", default=None)
    parser.add_argument("--build-one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_one:
        return args
    try:
        args.chain_list = [int(c) for c in args.chains.split(",")]
    except ValueError:
        parser.error(f"--chains must be comma-separated integers, got {args.chains!r}")
    if args.models is None:
        args.models = ",".join(lanes_models.MODELS if args.rows is None else
                               lanes_models.RESIZABLE)
    args.model_list = args.models.split(",")
    if args.rows is not None:
        if args.rows < 2:
            parser.error(f"--rows must be at least 2, got {args.rows}")
        fixed = [m for m in args.model_list if m not in lanes_models.RESIZABLE]
        if fixed:
            parser.error(f"--rows: {fixed} have fixed data; choose from "
                         f"{list(lanes_models.RESIZABLE)}")
    args.dtype_list = args.dtypes.split(",")
    for flag, values, known in (("--models", args.model_list, lanes_models.MODELS),
                                ("--dtypes", args.dtype_list, DTYPES)):
        unknown = [v for v in values if v not in known]
        if unknown:
            parser.error(f"{flag}: unknown {unknown}, choose from {list(known)}")
    counts = args.chain_list + [args.jax_chains, args.ess_chains]
    for flag, value in (("--chains", min(counts)), ("--jax-warmup", args.jax_warmup),
                        ("--jax-transitions", args.jax_transitions),
                        ("--ess-warmup", args.ess_warmup), ("--ess-draws", args.ess_draws),
                        ("--jobs", args.jobs)):
        if value < 1:
            parser.error(f"{flag} must be positive, got {value}")
    if args.budget is not None and not args.budget > 0:
        parser.error(f"--budget must be a positive number of seconds, got {args.budget}")
    return args


def main() -> None:
    args = parse_args()
    if args.build_one:
        build_one(args.build_one)
        return
    from bench_models import target_gradient_rate

    budget = Budget(args.budget if args.budget is not None else math.inf,
                    {"fused_hmc": 2.0, "blackjax": 1.0, "fused_hmc_more": 2.0}
                    | ({"ess": 3.0} if args.ess else {}))
    device_name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu"
    record = Record(args.out, {"device": device_name, "sm_count": sm_count(), "rows": args.rows,
                               "argv": sys.argv[1:], "torch": torch.__version__})
    models = {n: lanes_models.make(n, args.rows) for n in args.model_list}
    wanted = {(n, d, c) for n, d, c in itertools.product(models, args.dtype_list, args.chain_list)}
    if args.ess:
        wanted |= {(n, "f64", args.ess_chains) for n in models}
    specs = sorted({f"{n}:{d}:{planned_lanes(c, models[n].rows)}:{args.rows or 0}"
                    for n, d, c in wanted})
    builder = threading.Thread(target=build_all, args=(specs, args.jobs, __file__,
                                                      record.data["builds"]))
    builder.start()
    jax_dtypes = [] if args.no_jax else sorted(set(args.dtype_list) | ({"f64"} if args.ess else
                                                                        set()))
    children = {d: BlackJax(d, list(models), args) for d in jax_dtypes}
    targets = {n: auto_lanes_target(m) for n, m in models.items()}  # traced while nvcc runs
    modes = {n: lanes_models.mode_and_scale(m) for n, m in models.items()}
    builder.join()
    record.data["blackjax_ready"] = [child.wait_ready() for child in children.values()]
    print(f"builds and XLA compilation done at +{budget.elapsed():.1f}s", flush=True)
    folder = Path(tempfile.mkdtemp(prefix="bench_lanes_"))
    inputs = {d: jax_inputs(folder, d, models, targets, args.jax_chains) for d in children}

    def rates(section_name: str, chain_list: list[int]) -> None:
        with budget.section(section_name) as section:
            for name, dtype, chains in itertools.product(models, args.dtype_list, chain_list):
                point = {"model": name, "dtype": dtype, "chains": chains}
                if not section.allows(PREDICTED_S["rate"]):
                    section.skipped += 1
                    record.add("skipped", point)
                    continue
                mode, sd = modes[name]
                noise = torch.randn(chains, mode.numel(), dtype=torch.float64,
                                    generator=torch.Generator().manual_seed(0))
                q = (mode + 0.1 * sd * noise).to(DEVICE, DTYPES[dtype])
                start = time.perf_counter()
                rate = target_gradient_rate(targets[name], q, step_size=0.5 * sd)
                PREDICTED_S["rate"] = max(PREDICTED_S["rate"], time.perf_counter() - start)
                record.add("rates", point | rate | {
                    "lanes": targets[name].lanes_for(chains, DEVICE), "rows": models[name].rows,
                    "step_size": 0.5 * sd,
                    "fma_fraction": fma_fraction(rate["gradients_per_second"], models[name],
                                                 dtype)})

    # The Done-when figures first (BlackJAX's chain count and the saturated one), so that a
    # budget cuts the other chain counts.
    first = [c for c in args.chain_list if c in (args.jax_chains, max(args.chain_list))]
    rates("fused_hmc", first)
    with budget.section("blackjax") as section:
        for dtype, child in children.items():
            for name in models:
                point = {"model": name, "dtype": dtype, "chains": args.jax_chains,
                         "sampler": "blackjax"}
                if "error" in child.ready or not section.allows(PREDICTED_S["blackjax"]):
                    section.skipped += 1
                    record.add("skipped", point | {"why": child.ready.get("error", "budget")})
                    continue
                start = time.perf_counter()
                answer = child.ask("rate", name, inputs[dtype])
                PREDICTED_S["blackjax"] = max(PREDICTED_S["blackjax"], time.perf_counter() - start)
                record.add("blackjax", point | answer)

    rates("fused_hmc_more", [c for c in args.chain_list if c not in first])
    if args.ess:
        with budget.section("ess") as section:
            for name, model in models.items():
                point = {"model": name, "dtype": "f64", "chains": args.ess_chains,
                         "warmup": args.ess_warmup, "draws": args.ess_draws}
                for sampler, key in (("fused_hmc", "ess_fused_hmc"), ("blackjax", "ess_blackjax")):
                    child = children.get("f64")
                    if sampler == "blackjax" and (child is None or "error" in child.ready):
                        continue
                    if not section.allows(PREDICTED_S[key]):
                        section.skipped += 1
                        record.add("skipped", point | {"sampler": sampler})
                        continue
                    start = time.perf_counter()
                    if sampler == "fused_hmc":
                        answer = fused_ess(model, targets[name], args.ess_chains,
                                           args.ess_warmup, args.ess_draws)
                    else:
                        answer = child.ask("ess", name, inputs["f64"])
                    PREDICTED_S[key] = max(PREDICTED_S[key], time.perf_counter() - start)
                    record.add("ess", point | {"sampler": sampler} | answer)

    for child in children.values():
        child.close()
    record.data["sections"] = budget.report
    record.data["elapsed_s"] = budget.elapsed()
    record.save()
    print_tables(record.data, args)


def print_tables(data: dict, args) -> None:
    saturated = max(args.chain_list)
    rates = {(r["model"], r["dtype"], r["chains"]): r for r in data["rates"]}
    blackjax = {(r["model"], r["dtype"]): r for r in data["blackjax"]}
    print(f"\ngradient evaluations per second (lanes); x own = at {args.jax_chains} chains / at "
          f"{saturated}; x BlackJAX at {args.jax_chains} chains; FMA: fraction of the dtype's "
          f"FMA limit at {args.jax_chains} chains and at {saturated}; check: JAX vs TorchModel")
    heads = "".join(f"{c:>17d}" for c in args.chain_list)
    print(f"{'model':20s} {'dtype':5s}{heads} {'BlackJAX':>9s} {'x own':>6s} {'x BJ':>6s} "
          f"{'FMA':>13s} {'check':>8s}")
    for name in args.model_list:
        for dtype in args.dtype_list:
            cells = ""
            for c in args.chain_list:
                r = rates.get((name, dtype, c))
                cells += (f"{r['gradients_per_second']:10.3g} ({r['lanes']:3d})" if r
                          else f"{'-':>17s}")
            ours = rates.get((name, dtype, args.jax_chains))
            full = rates.get((name, dtype, saturated))
            bj = blackjax.get((name, dtype), {})
            bj_rate = bj.get("gradients_per_second")
            own = (ours["gradients_per_second"] / full["gradients_per_second"]
                   if ours and full else None)
            versus = ours["gradients_per_second"] / bj_rate if ours and bj_rate else None
            fma = "/".join(f"{r['fma_fraction']:.1%}" if r and r["fma_fraction"] is not None
                           else "-" for r in (ours, full))
            check = bj.get("check_worst_relative")
            print(f"{name:20s} {dtype:5s}{cells} {fmt(bj_rate, '9.3g')} {fmt(own, '6.2f')} "
                  f"{fmt(versus, '6.1f')} {fma:>13s} {fmt(check, '8.1e')}")
    if data["ess"]:
        print(f"\nESS at {args.ess_chains} chains, float64, {args.ess_warmup} + {args.ess_draws}: "
              "fused_hmc per-chain warm-up against BlackJAX ChEES")
        print(f"{'model':20s} {'sampler':10s} {'wall s':>8s} {'min ESS':>10s} {'ESS/s':>10s} "
              f"{'worst sd':>8s} {'fused/BJ':>9s}")
        per_second = {(r["model"], r["sampler"]): r.get("ess_per_second") for r in data["ess"]}
        for r in data["ess"]:
            ours, theirs = (per_second.get((r["model"], s)) for s in ("fused_hmc", "blackjax"))
            versus = ours / theirs if r["sampler"] == "blackjax" and ours and theirs else None
            print(f"{r['model']:20s} {r['sampler']:10s} {fmt(r.get('wall_s'), '8.2f')} "
                  f"{fmt(r.get('min_bulk_ess'), '10.3g')} {fmt(r.get('ess_per_second'), '10.3g')} "
                  f"{fmt(r.get('worst_mean_error_sd'), '8.3f')} {fmt(versus, '9.1f')}")
    if data["skipped"]:
        print(f"\nskipped (budget or a failed BlackJAX process): {len(data['skipped'])} points")


def fmt(value, spec: str) -> str:
    width = int(spec.split(".")[0])
    return format(value, spec) if value is not None else f"{'-':>{width}s}"


if __name__ == "__main__":
    main()
