"""The CPU build side by side (issue 33), in one run on the machine at hand.

1. N(0, I), 2048 chains x 64, L = 10, step 0.1, 1000 chained transitions (philox noise, no draws
   kept): fused_hmc.sample on 1 and on 2 threads (torch.set_num_threads) against the pure-torch
   reference transition (fused_hmc.reference) called in a Python loop at torch's default threads.
   Each figure is the median wall time over --repeats runs, the runs of the three interleaved so
   that a busy spell of a shared machine falls on all of them alike; the process's CPU time (all
   its threads) beside it, which a shared machine's load does not inflate.
2. Eight schools (posteriordb's non-centred form) and logistic regression (German-credit shape)
   from fused_hmc.models, --chains chains, 1000 warm-up + 1000 draws: fused_hmc (the model's
   CppTarget, hand-written gradient, jitter 0.2, float32, torch's default threads; per-chain
   warm-up with L = 8, per-chain warm-up with ChEES's trajectory length, and ChEES with the pooled
   dense mass) against NumPyro's vectorized NUTS on the CPU (bench_cpu_numpyro.py, in the
   interpreter --numpyro-python names: jax and numpyro are not this project's dependencies), from
   the same starts. Both ESS figures are arviz-stats' bulk ESS (the smallest over the reported
   parameters) of the same code here; ESS/s divides it by the wall time of warm-up and sampling
   together, after an untimed run that compiles everything (fused_hmc: 2 + 2 transitions, which
   compile and load the model; NumPyro: the whole run, whose compiled sampler the timed run
   reuses). Two more fused_hmc rows: the dual numbers' gradient (gradient=False, L = 8) in place
   of the hand-written one, as a user's C++ model without a gradient runs; and the model written
   in PyTorch (the library model's torch_form, fused_hmc.TorchModel's generated reverse-mode
   gradient) with the per-chain ChEES warm-up.
3. Chains in vector lanes for either gradient: both models, 256 chains, L = 10 at a fixed step
   size, --gradient-transitions transitions at torch's default threads, with the hand-written
   gradient and the duals', each with vector_chains=True and False (median wall time over
   --repeats interleaved runs). In float64 (eight schools) the draws of a pair are the same bits,
   which is checked. Beside them the model written in PyTorch (TorchModel, in packs): its time
   over the hand-written gradient's.

OMP_WAIT_POLICY defaults to PASSIVE here (both fused_hmc and the reference run OpenMP regions).

Usage: python benchmarks/bench_cpu.py [--numpyro-python /tmp/jaxenv/bin/python] [--out f.json]
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Threads that finish a parallel region wait for the next one asleep, not spinning: on a machine
# shared with other work a spinning thread burns the core another thread of the run needs (on this
# 2-core machine, 3x the CPU time at 2 threads). Read once, when torch loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent


GAUSSIAN_STEP = 0.1


def _gaussian_starts(chains: int, dim: int) -> torch.Tensor:
    return torch.randn(chains, dim, generator=torch.Generator().manual_seed(0))


def _fused_gaussian(q: torch.Tensor, steps: int, transitions: int, threads: int):
    """fused_hmc.sample's chained transitions on N(0, I) from q, on `threads` threads."""
    import fused_hmc

    def go():
        default_threads = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            fused_hmc.sample(q, transitions, seed=0, progress=False, keep_samples=False,
                             num_leapfrog_steps=steps, step_size=GAUSSIAN_STEP)
        finally:
            torch.set_num_threads(default_threads)
    return go


def one_thread_child(chains: int, dim: int, steps: int, transitions: int) -> None:
    """--one-thread-child: one 1-thread run, started when the parent writes a line (so that two
    such processes start together); prints its wall seconds."""
    go = _fused_gaussian(_gaussian_starts(chains, dim), steps, transitions, 1)
    go()  # loads the extension
    print("ready", flush=True)
    sys.stdin.readline()
    began = time.perf_counter()
    go()
    print(time.perf_counter() - began, flush=True)


def two_processes_at_once(chains: int, dim: int, steps: int, transitions: int) -> list[float]:
    """The machine's own ceiling for 2 threads: two independent 1-thread processes of the same run
    started together, each one's wall seconds. 2 x (1 thread alone) / max(these) is the scaling
    that 2 cores give work that shares nothing (no memory, no synchronisation): a core slowed by
    its neighbour's work (a shared cache, power and clocks, a hypervisor) lowers it below 2."""
    command = [sys.executable, str(Path(__file__).resolve()), "--one-thread-child",
               f"{chains},{dim},{steps},{transitions}"]
    children = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for _ in range(2)]
    for child in children:
        assert child.stdout.readline().strip() == "ready"
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    seconds = [float(child.stdout.readline()) for child in children]
    for child in children:
        child.wait()
    return seconds


def chained_transitions(chains: int, dim: int, steps: int, transitions: int, repeats: int) -> dict:
    from fused_hmc.reference import reference_hmc_step

    q = _gaussian_starts(chains, dim)
    mu = torch.zeros(dim)
    default_threads = torch.get_num_threads()

    def fused(threads: int):
        return _fused_gaussian(q, steps, transitions, threads)

    def reference(threads: int):
        def go():
            torch.set_num_threads(threads)
            try:
                x = q
                for _ in range(transitions):
                    x, _ = reference_hmc_step(x, mu, GAUSSIAN_STEP, steps)
            finally:
                torch.set_num_threads(default_threads)
        return go

    # the reference at torch's default threads (what a user gets) and at 1 thread (its least CPU
    # time: at 2048 x 64 each torch op is too small to gain from a second thread)
    runs = {"fused_hmc 1 thread": fused(1), "fused_hmc 2 threads": fused(2),
            f"reference ({default_threads} threads)": reference(default_threads),
            "reference (1 thread)": reference(1)}
    fused(1)()  # builds/loads the extension
    times = {name: [] for name in runs}
    cpu_times = {name: [] for name in runs}  # the process's CPU time, every thread's
    pairs = []  # two_processes_at_once, interleaved with the rest
    for _ in range(repeats):
        for name, fn in runs.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - began)
            cpu_times[name].append(time.process_time() - began_cpu)
            print(f"  {name}: {times[name][-1]:.3f} s wall, {cpu_times[name][-1]:.3f} s CPU",
                  flush=True)
        pairs.append(two_processes_at_once(chains, dim, steps, transitions))
        print(f"  two 1-thread processes at once: {pairs[-1][0]:.3f} s and {pairs[-1][1]:.3f} s",
              flush=True)
    medians = {name: statistics.median(t) for name, t in times.items()}
    pair_median = statistics.median(max(pair) for pair in pairs)
    ref = medians[f"reference ({default_threads} threads)"]
    return {"chains": chains, "dim": dim, "num_leapfrog_steps": steps,
            "transitions": transitions, "repeats": repeats, "seconds": times,
            "cpu_seconds": cpu_times, "median_s": medians,
            "median_cpu_s": {name: statistics.median(t) for name, t in cpu_times.items()},
            "speedup_vs_reference_1_thread": ref / medians["fused_hmc 1 thread"],
            "speedup_vs_best_reference_2_threads":
                min(ref, medians["reference (1 thread)"]) / medians["fused_hmc 2 threads"],
            "speedup_vs_reference_2_threads": ref / medians["fused_hmc 2 threads"],
            "scaling_1_to_2_threads": medians["fused_hmc 1 thread"] / medians["fused_hmc 2 threads"],
            "two_processes_at_once_s": pairs,
            "machine_ceiling_1_to_2": 2 * medians["fused_hmc 1 thread"] / pair_median,
            # the same ratios repeat by repeat (its runs minutes apart at most), then the median:
            # a slow spell of a shared machine then falls on both sides of a ratio
            "scaling_1_to_2_threads_per_repeat": statistics.median(
                one / two for one, two in zip(times["fused_hmc 1 thread"],
                                              times["fused_hmc 2 threads"])),
            "machine_ceiling_1_to_2_per_repeat": statistics.median(
                2 * one / max(pair) for one, pair in zip(times["fused_hmc 1 thread"], pairs))}


def _min_bulk_ess(draws: np.ndarray) -> float:
    """draws [chain, draw, P]."""
    from arviz_stats.base import array_stats

    return float(np.min(array_stats.ess(draws, chain_axis=0, draw_axis=1, method="bulk")))


def _row(model, positions: np.ndarray, wall: float) -> dict:
    x = model.constrained_values(torch.from_numpy(positions)).numpy()
    ess = _min_bulk_ess(x)
    return {"wall_s": wall, "min_bulk_ess": ess, "ess_per_s": ess / wall,
            "means": x.reshape(-1, x.shape[-1]).mean(0).tolist()}


# fused_hmc's configurations: the (per-chain warm-up, 8 leapfrog steps); the per-chain
# warm-up adapting its trajectory as NUTS does (each chain its own step size and diagonal mass,
# one ChEES trajectory length for all); and ChEES pooled with the pooled dense mass.
FUSED_CONFIGS = {
    "fused_hmc": dict(pooled=False, num_leapfrog_steps=8),
    "fused_hmc_per_chain_chees": dict(pooled=False, adapt_trajectory_length=True),
    "fused_hmc_chees_dense": dict(adapt_trajectory_length=True, mass_matrix="dense"),
    "fused_hmc_duals": dict(pooled=False, num_leapfrog_steps=8, gradient=False),
    "fused_hmc_torch_model_per_chain_chees": dict(pooled=False, adapt_trajectory_length=True,
                                                  torch_model=True),
}


def fused_model(model, start: torch.Tensor, warmup: int, draws: int, config: dict) -> dict:
    import fused_hmc

    config = dict(config)
    # the C++ coordinates x_cpp = x_torch[..., to_cpp]: the same starts, draws compared alike
    to_cpp = None
    if config.pop("torch_model", False):
        form = model.torch_form()
        target, to_cpp = form.model(), torch.tensor(form.to_cpp)
        start = start[..., torch.argsort(to_cpp)]
    else:
        target = model.target(gradient=config.pop("gradient", True))

    def run(seed: int, warmup: int, draws: int):
        began = time.perf_counter()
        res = fused_hmc.sample(start, draws, target=target, num_warmup=warmup, seed=seed,
                               jitter=0.2, progress=False, **config)
        return res, time.perf_counter() - began

    run(1, 2, 2)  # compiles and loads the model (nothing else to warm up)
    res, wall = run(2, warmup, draws)
    samples = res.samples if to_cpp is None else res.samples[..., to_cpp]
    return _row(model, samples.double().numpy(), wall) | {
        "accept": float(res.mean_accept_prob.mean()), "threads": torch.get_num_threads(),
        "gradient_evaluations": res.warmup_gradient_evaluations
        + res.sampling_gradient_evaluations}


def numpyro_model(model, start: torch.Tensor, warmup: int, draws: int, python: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path_in, path_out = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        data = {k: (v.numpy() if isinstance(v, torch.Tensor) else np.asarray(v))
                for k, v in model.data.items()}
        np.savez(path_in, model=model.name, warmup=warmup, draws=draws,
                 initial_point=start.numpy(), **data)
        subprocess.run([python, str(HERE / "bench_cpu_numpyro.py"), str(path_in), str(path_out)],
                       check=True)
        out = np.load(path_out)
        return _row(model, out["draws"], float(out["wall_s"])) | {
            "jax": str(out["jax_version"]), "numpyro": str(out["numpyro_version"])}


def models_side_by_side(chains: int, warmup: int, draws: int, python: str | None) -> dict:
    from fused_hmc import models

    rows = {}
    for model in (models.eight_schools(), models.logistic_regression()):
        start = model.initial_point(chains, dtype=torch.float32,
                                    generator=torch.Generator().manual_seed(0))
        rows[model.name] = {}
        for name, config in FUSED_CONFIGS.items():
            rows[model.name][name] = fused_model(model, start, warmup, draws, config)
            print(f"  {model.name} {name}: {rows[model.name][name]}", flush=True)
        if python is not None:
            rows[model.name]["numpyro"] = numpyro_model(model, start, warmup, draws, python)
            print(f"  {model.name} numpyro: {rows[model.name]['numpyro']}", flush=True)
    return rows


def vector_lanes(transitions: int, repeats: int) -> dict:
    import fused_hmc
    from fused_hmc import CppTarget, models

    rows = {}
    for model, dtype, step in ((models.eight_schools(), torch.float64, 0.1),
                               (models.logistic_regression(), torch.float32, 0.02)):
        start = (0.3 * torch.randn(256, model.dim, generator=torch.Generator().manual_seed(0),
                                   dtype=torch.float64)).to(dtype)
        runs = {}
        for gradient, label in ((True, "hand"), (False, "duals")):
            source = model.source + ("\n" + model.gradient_source if gradient else "")
            for vector in (True, False):
                target = CppTarget(source, model.dim, data=dict(model.data), gradient=gradient,
                                   vector_chains=vector)
                runs[f"{label}, vector_chains={vector}"] = functools.partial(
                    fused_hmc.sample, start, target=target, step_size=step,
                    num_leapfrog_steps=10, seed=1, progress=False)
        # The model written in PyTorch (TorchModel: its reverse-mode gradient, always in packs),
        # from the same starts in its own coordinates' order.
        form = model.torch_form()
        runs["torch model, vector_chains=True"] = functools.partial(
            fused_hmc.sample, start[..., torch.argsort(torch.tensor(form.to_cpp))],
            target=form.model(), step_size=step, num_leapfrog_steps=10, seed=1, progress=False)
        for run in runs.values():
            run(2)  # compiles and loads the module
        times = {name: [] for name in runs}
        draws = {}
        for _ in range(repeats):
            for name, run in runs.items():
                began = time.perf_counter()
                draws[name] = run(transitions).samples
                times[name].append(time.perf_counter() - began)
        medians = {name: statistics.median(t) for name, t in times.items()}
        row = {"dtype": str(dtype), "chains": 256, "transitions": transitions,
               "num_leapfrog_steps": 10, "seconds": times, "median_s": medians}
        for label in ("hand", "duals"):
            packs, alone = f"{label}, vector_chains=True", f"{label}, vector_chains=False"
            row[f"{label}_speedup_from_packs"] = medians[alone] / medians[packs]
            if dtype == torch.float64:
                assert torch.equal(draws[packs], draws[alone]), f"{model.name} {label}: bits"
        row["torch_model_time_over_hand"] = (medians["torch model, vector_chains=True"]
                                             / medians["hand, vector_chains=True"])
        rows[model.name] = row
        print(f"  {model.name}: {medians}; packs gain "
              f"{row['hand_speedup_from_packs']:.2f}x (hand), "
              f"{row['duals_speedup_from_packs']:.2f}x (duals); the torch model takes "
              f"{row['torch_model_time_over_hand']:.2f}x the hand-written time", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transitions", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chains", type=int, default=32, help="chains of the model runs")
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--numpyro-python", default=None,
                        help="an interpreter with jax and numpyro (omit: no NumPyro rows)")
    parser.add_argument("--skip-gaussian", action="store_true")
    parser.add_argument("--skip-models", action="store_true")
    parser.add_argument("--gradient-transitions", type=int, default=100,
                        help="transitions of each run of part 3 (0: skip it)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--one-thread-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_thread_child:
        return one_thread_child(*map(int, args.one_thread_child.split(",")))
    result = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
              "machine": {"cpu": platform.processor() or platform.machine(),
                          "cores": os.cpu_count(), "torch": torch.__version__,
                          "torch_threads": torch.get_num_threads(),
                          "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                          "OMP_WAIT_POLICY": os.environ["OMP_WAIT_POLICY"],
                          "load_average_at_start": os.getloadavg()}}
    if not args.skip_gaussian:
        print("N(0, I) 2048 x 64, L = 10, chained transitions:", flush=True)
        result["gaussian"] = chained_transitions(2048, 64, 10, args.transitions, args.repeats)
        g = result["gaussian"]
        print(f"  medians {g['median_s']}\n  speed-up vs reference: "
              f"{g['speedup_vs_reference_1_thread']:.2f}x (1 thread), "
              f"{g['speedup_vs_reference_2_threads']:.2f}x (2 threads), "
              f"{g['speedup_vs_best_reference_2_threads']:.2f}x (2 threads vs the reference's best); "
              f"scaling 1 -> 2 threads {g['scaling_1_to_2_threads']:.2f}x (the machine's ceiling, "
              f"two 1-thread processes at once: {g['machine_ceiling_1_to_2']:.2f}x); repeat by "
              f"repeat {g['scaling_1_to_2_threads_per_repeat']:.2f}x (ceiling "
              f"{g['machine_ceiling_1_to_2_per_repeat']:.2f}x)", flush=True)
    if not args.skip_models:
        print(f"models, {args.chains} chains, {args.warmup} + {args.draws}:", flush=True)
        result["models"] = models_side_by_side(args.chains, args.warmup, args.draws,
                                               args.numpyro_python)
        result["models_settings"] = {"chains": args.chains, "warmup": args.warmup,
                                     "draws": args.draws}
    if args.gradient_transitions > 0:
        print("vector lanes for either gradient, 256 chains, L = 10:", flush=True)
        result["vector_lanes"] = vector_lanes(args.gradient_transitions, args.repeats)
    result["machine"]["load_average_at_end"] = os.getloadavg()
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
