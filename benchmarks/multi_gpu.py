"""Issue 17 in one command: the CLI under torchrun over G GPUs against one GPU.

    python benchmarks/multi_gpu.py --gpus 2 --out benchmarks/results/multi_gpu/run.json

1. identical: ``torchrun --nproc_per_node G -m fused_hmc sample --chains N --out DIR`` against
   ``fused_hmc sample --chains G*N --out ONE`` (the same seed, so the same chains): every chain's
   final state, acceptance, moments and adapted parameters bit for bit, the kept draws of a
   sample of chain ids bit for bit (both runs thinned to --draws draws per chain: all 1000 draws of
   2M chains would be 512 GB), and summary.json's merged moments against the one-GPU per-chain
   moments merged in one go, within float64 rounding (below).
2. warm-up pooled across the G GPUs (step size + mass, then ChEES): the mean acceptance
   probability of the sampling transitions against the target, and seconds per transition of a
   mostly-warm-up run against the same run of N chains on one GPU (whose pooled warm-up stays in
   one kernel call per transition).
3. scaling: transitions per second of G x N chains on G GPUs against N chains on one GPU
   (target >= 0.95 G), without kept draws; and bench_pooled_ranks.py's NCCL cost per pooled
   transition.

Every run is a fresh process, launched as a user would, and times itself (the CLI's "time"
line: the sampler's run, start and compilation excluded). Logs go to --work. With --device cpu
the same steps run on gloo ranks of this machine's cores (a check of the script, not of speed).
--baseline runs only the one-GPU runs (and bench_pooled_ranks.py over one NCCL rank): the
figures the G-GPU runs are set against, on a machine with one GPU.

Merged-moment tolerance: both sides sum the same float64 terms in a different order (per rank
first, then across ranks; against all chains at once). Pairwise summation of n terms errs by
about log2(n) ulp per term's magnitude, 21 ulp = 5e-15 relative at n = 2M; 1e-12 of the scale
(sd for the mean, var for the variance) leaves 200x room and still catches any lost or doubled
chain (which moves the mean by about sd / sqrt(draws) = 2e-4 sd here).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

import fused_hmc
from fused_hmc.sampling.distributed import merge_moments
from fused_hmc.sampling.rank_stores import read_summary

TOLERANCE = 1e-12
PER_CHAIN = ("final_state", "accept_count", "mean", "var", "mean_accept_prob", "step_size",
             "inverse_mass")


def torchrun() -> str:
    """The torchrun beside this interpreter (a venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "torchrun"
    return str(beside) if beside.exists() else shutil.which("torchrun") or "torchrun"


def run_cli(args, ranks: int, chains: int, flags: list[str], log: Path) -> dict:
    """One `fused_hmc sample` (under torchrun when ranks > 1); its figures from the report.
    None for a run over ranks under --baseline."""
    if ranks > 1 and args.baseline:
        return None
    common = ["--device", args.device, "--chains", str(chains), "--dim", str(args.dim),
              "--seed", str(args.seed), "--no-progress", *flags]
    command = ([torchrun(), "--standalone", "--nproc_per_node", str(ranks), "-m", "fused_hmc",
                "sample"] if ranks > 1
               else [sys.executable, "-m", "fused_hmc", "sample"]) + common
    env = dict(os.environ, OMP_NUM_THREADS="1") if args.device == "cpu" else None
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=args.timeout)
    log.write_text(" ".join(command) + "\n\n" + done.stdout + "\n--- stderr\n" + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}); see {log}")
    seconds = float(re.search(r"^time\s+([0-9.]+) s", done.stdout, re.M).group(1))
    accept = float(re.search(r"mean acceptance probability ([0-9.]+)", done.stdout).group(1))
    return {"command": " ".join(command), "seconds": seconds, "mean_accept_prob": accept,
            "wall_seconds": time.perf_counter() - started}


def compare_stores(one: Path, ranks_dir: Path, sample: int, seed: int) -> dict:
    """Step 1's checks; raises AssertionError on the first difference."""
    reference = fused_hmc.load(one, device="cpu", samples=False)
    summary = read_summary(ranks_dir)
    parts = [fused_hmc.load(ranks_dir / s["store"], device="cpu", samples=False)
             for s in summary["stores"]]
    for name in PER_CHAIN:
        mine = torch.cat([getattr(p, name) for p in parts])
        assert torch.equal(mine, getattr(reference, name)), f"{name} differs"
    chains = reference.final_state.shape[0]
    every = (np.random.default_rng(seed).choice(chains, min(sample, chains), replace=False)
             .tolist() + [0, chains - 1] + [s["first_chain"] for s in summary["stores"]])
    ids = np.unique(every)
    import zarr

    one_q = zarr.open_group(str(one), mode="r")["posterior"]["q"]
    expected = one_q.get_orthogonal_selection((ids, slice(None), slice(None)))
    for s in summary["stores"]:
        mine = ids[(ids >= s["first_chain"]) & (ids < s["first_chain"] + s["chains"])]
        q = zarr.open_group(str(ranks_dir / s["store"]), mode="r")["posterior"]["q"]
        got = q.get_orthogonal_selection((mine - s["first_chain"], slice(None), slice(None)))
        want = expected[np.searchsorted(ids, mine)]
        assert got.tobytes() == want.tobytes(), f"draws of chains {mine[:4]}.. differ"
    n = reference.num_kept
    _, mean, m2 = merge_moments(torch.full((chains,), n), reference.mean.double(),
                                reference.var.double() * (n - 1))
    var = (m2 / (chains * n - 1)).numpy()
    sd = np.sqrt(var)
    mean_error = float(np.max(np.abs(summary["mean"] - mean.numpy()) / sd))
    var_error = float(np.max(np.abs(summary["var"] - var) / var))
    assert mean_error <= TOLERANCE and var_error <= TOLERANCE, (mean_error, var_error)
    assert summary["accept_count"] == int(reference.accept_count.sum())
    return {"chains": chains, "draws_per_chain": n, "chain_ids_compared": len(ids),
            "per_chain_fields_equal": list(PER_CHAIN), "merged_mean_error_in_sd": mean_error,
            "merged_var_relative_error": var_error, "tolerance": TOLERANCE}


def identical(args, work: Path) -> dict:
    chains = args.chains_per_gpu
    flags = ["--samples", str(args.transitions), "--thin", str(args.transitions // args.draws)]
    one, ranks_dir = work / "one", work / "ranks"
    for path in (one, ranks_dir):
        shutil.rmtree(path, ignore_errors=True)
    runs = {"one": run_cli(args, 1, args.gpus * chains, flags + ["--out", str(one)],
                           work / "identical_one.log"),
            "ranks": run_cli(args, args.gpus, chains, flags + ["--out", str(ranks_dir)],
                             work / "identical_ranks.log")}
    checks = (None if runs["ranks"] is None
              else compare_stores(one, ranks_dir, args.sample, args.seed))
    runs["one"]["store_bytes"] = sum(f.stat().st_size for f in one.rglob("*") if f.is_file())
    for path in (one, ranks_dir):
        shutil.rmtree(path, ignore_errors=True)  # gigabytes at full size
    return {"runs": runs, "checks": checks}


def scaling(args, work: Path) -> dict:
    flags = ["--samples", str(args.transitions), "--no-keep-samples"]
    n = args.chains_per_gpu
    one = run_cli(args, 1, n, flags, work / "scaling_one.log")
    ranks = run_cli(args, args.gpus, n, flags, work / "scaling_ranks.log")
    whole = run_cli(args, 1, args.gpus * n, flags, work / "scaling_one_all_chains.log")
    return {"one_gpu": one, "gpus": ranks, "one_gpu_all_chains": whole, "target": 0.95 * args.gpus,
            "speedup_same_chains_per_gpu": ranks and one["seconds"] / ranks["seconds"] * args.gpus,
            "speedup_same_problem": ranks and whole["seconds"] / ranks["seconds"]}


def pooled_warmup(args, work: Path) -> dict:
    rows = {}
    for name, extra, target in (("step size + mass", ["--pooled"], 0.8),
                                ("ChEES", ["--adapt-trajectory-length"], 0.651)):
        flags = ["--warmup", str(args.warmup), "--samples", str(args.warmup_samples),
                 "--no-keep-samples", *extra]
        tag = "chees" if extra[0].endswith("length") else "pooled"
        one = run_cli(args, 1, args.chains_per_gpu, flags, work / f"warmup_{tag}_one.log")
        ranks = run_cli(args, args.gpus, args.chains_per_gpu, flags,
                        work / f"warmup_{tag}_ranks.log")
        total = args.warmup + args.warmup_samples
        rows[name] = {"target_accept": target, "one_gpu": one, "gpus": ranks,
                      "seconds_per_transition_one_gpu": one["seconds"] / total,
                      "seconds_per_transition_gpus": ranks and ranks["seconds"] / total}
    return rows


def nccl_cost(args, work: Path) -> str:
    script = Path(__file__).with_name("bench_pooled_ranks.py")
    launcher = ([sys.executable] if args.baseline else
                [torchrun(), "--standalone", "--nproc_per_node", str(args.gpus)])
    command = launcher + [str(script), "--device", args.device, "--chains",
                          str(min(args.chains_per_gpu, args.pooled_ranks_chains)), "--repeats",
                          "3"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    (work / "bench_pooled_ranks.log").write_text(" ".join(command) + "\n\n" + done.stdout
                                                 + "\n--- stderr\n" + done.stderr)
    return done.stdout if done.returncode == 0 else f"failed ({done.returncode})"


def _us(seconds) -> str:
    return "not run" if seconds is None else f"{seconds * 1e6:,.0f} us"


def table(result: dict, gpus: int) -> str:
    """The figures as a markdown table: one GPU, G GPUs, and what they make together."""
    lines = [f"| step | figure | 1 GPU | {gpus} GPUs | together |", "|---|---|---:|---:|---:|"]
    runs, checks = result["identical"]["runs"], result["identical"]["checks"]
    ranks = runs["ranks"]
    lines.append(f"| 1 | sampling with draws to disk ({runs['one']['store_bytes'] / 2**30:.2f} "
                 f"GiB), same chains in all | {runs['one']['seconds']:.2f} s | "
                 f"{'not run' if ranks is None else format(ranks['seconds'], '.2f') + ' s'} | |")
    if checks is not None:
        lines.append(f"| 1 | chain ids whose {checks['draws_per_chain']} draws are bit for bit "
                     f"equal; every chain's state, moments, adaptation | | | "
                     f"{checks['chain_ids_compared']:,} of {checks['chains']:,}, all |")
        lines.append(f"| 1 | merged mean error (sd) / variance error (relative), tolerance "
                     f"{checks['tolerance']:g} | | | {checks['merged_mean_error_in_sd']:.1e} / "
                     f"{checks['merged_var_relative_error']:.1e} |")
    for name, row in result["pooled_warmup"].items():
        gpus_row = row["gpus"]
        lines.append(f"| 2 | {name}: mean acceptance probability after warm-up (target "
                     f"{row['target_accept']}) | {row['one_gpu']['mean_accept_prob']:.3f} | "
                     f"{'not run' if gpus_row is None else format(gpus_row['mean_accept_prob'], '.3f')} | |")
        one_s, gpus_s = row["seconds_per_transition_one_gpu"], row["seconds_per_transition_gpus"]
        lines.append(f"| 2 | {name}: per transition, {result['settings']['chains_per_gpu']} "
                     f"chains per GPU, mostly warm-up | {_us(one_s)} | {_us(gpus_s)} | "
                     + ("" if gpus_s is None else f"{one_s / gpus_s:.2f}x") + " |")
    s = result["scaling"]
    transitions = int(result["settings"]["transitions"])
    for label, one, key in (("same chains per GPU", s["one_gpu"], "speedup_same_chains_per_gpu"),
                            ("same chains in all", s["one_gpu_all_chains"],
                             "speedup_same_problem")):
        lines.append(f"| 3 | {label}: per transition (target together >= {s['target']:.2f}x "
                     f"on the first) | {_us(one['seconds'] / transitions)} "
                     f"| {_us(s['gpus'] and s['gpus']['seconds'] / transitions)} | "
                     + ("" if s[key] is None else f"{s[key]:.2f}x") + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flag = parser.add_argument
    flag("--device", choices=["cuda", "cpu"], default="cuda")
    flag("--gpus", type=int, default=2, help="ranks (GPUs; processes on cpu)")
    flag("--chains-per-gpu", type=int, default=1 << 20)
    flag("--dim", type=int, default=64)
    flag("--transitions", type=int, default=1000)
    flag("--draws", type=int, default=10, help="kept draws per chain in step 1 (thinned)")
    flag("--sample", type=int, default=65536, help="chain ids whose draws step 1 compares")
    flag("--warmup", type=int, default=500)
    flag("--warmup-samples", type=int, default=20)
    flag("--pooled-ranks-chains", type=int, default=1 << 16)
    flag("--seed", type=int, default=17)
    flag("--timeout", type=int, default=300, help="seconds per launched run")
    flag("--work", type=Path, default=Path("multi_gpu_work"), help="logs and stores")
    flag("--out", type=Path, default=None, help="the figures as JSON")
    flag("--baseline", action="store_true", help="only the one-GPU runs (see above)")
    args = parser.parse_args()
    if args.transitions % args.draws:
        parser.error(f"--draws {args.draws} must divide --transitions {args.transitions}")
    if args.device == "cuda" and not args.baseline and torch.cuda.device_count() < args.gpus:
        parser.error(f"--gpus {args.gpus}: this machine has {torch.cuda.device_count()} GPU(s)")
    args.work.mkdir(parents=True, exist_ok=True)
    result = {"settings": {k: str(v) for k, v in vars(args).items()},
              "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
              "torch": torch.__version__}
    for name, step in (("identical", identical), ("scaling", scaling),
                       ("pooled_warmup", pooled_warmup), ("nccl", nccl_cost)):
        started = time.perf_counter()
        result[name] = step(args, args.work)
        print(f"{name}: done in {time.perf_counter() - started:.0f} s", flush=True)
        if args.out is not None:  # after every step: a later one may not finish
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1))
    print(result["nccl"])
    print(table(result, args.gpus))


if __name__ == "__main__":
    main()
