"""The benchmark suite: fused_hmc against every anchor, side by side, in one process.

    python benchmarks/run.py [--budget SECONDS] [--only SECTIONS] [--no-jax]   # on a CUDA GPU
    python benchmarks/run.py --smoke                                           # tiny, on the CPU

Sections, in order, each with a time cap (its share of the time left; a point that would not fit
is skipped and recorded as such): ceilings (copy bandwidth, clocks), one transition (B=2048, d=64,
L=10: every method, torch.compile in three modes with compile time), 1000 transitions (chained),
sweeps over chains, dimension and leapfrog steps, and ESS/s. Writes one JSON (timing.save: to
benchmarks/results/ and, on the device, $OUT) after every section; plots.py and report.py turn it
into PNGs, TABLE.md and the README's table without a GPU.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX shares the GPU with torch

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import methods as M  # noqa: E402
from budget import Budget  # noqa: E402
from recorder import EPS, JAX_ANCHORS, Suite  # noqa: E402
from timing import copy_bandwidth, gpu_clocks  # noqa: E402

FUSED = ["fused_hmc op, philox", "fused_hmc HMC module, torch mode", "fused_hmc sample op",
         "fused_hmc philox, CUDA graph"]
CHEAP_ANCHORS = ["3-launch (randn_like + rand + fused)", "reference eager", "reference CUDA graph"]
SLOW_ANCHORS = ["JAX lax.scan", "torch.compile default", "BlackJAX vmap+scan",
                "NumPyro HMC kernel, vmap+scan"]
SHARES = {"ceilings": 1, "one transition": 22, "1000 transitions": 12, "chains sweep": 23,
          "dimension sweep": 15, "leapfrog sweep": 12, "ESS/s": 5, "warm-up": 10}
PLANS = {  # full (H200) and smoke (CPU) sizes; *_anchors: points where SLOW_ANCHORS run too
    "full": dict(B=2048, d=64, L=10, T=1000,
                 chains=[2**8, 2**10, 2**11, 2**12, 2**14, 2**16, 2**17, 2**18, 2**20],
                 chains_anchors=[2**8, 2**11, 2**14, 2**17, 2**20],
                 dims=[8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096],
                 dims_anchors=[8, 64, 512, 4096],
                 steps=[1, 2, 5, 10, 20, 50, 100], steps_anchors=[1, 10, 100], ess_chains=64),
    "smoke": dict(B=64, d=8, L=10, T=50, chains=[16, 64, 256], chains_anchors=[16, 64],
                  dims=[4, 8, 16], dims_anchors=[4, 8], steps=[1, 3, 10], steps_anchors=[1, 10],
                  ess_chains=16),
}
def ceilings(suite: Suite, section) -> None:
    if not suite.ctx.cuda:
        section.note("no GPU: copy bandwidth and clocks not measured")
        return
    props = torch.cuda.get_device_properties(0)
    ceil = suite.result["ceilings"]
    ceil.update(sm_count=props.multi_processor_count,
                l2_bytes=getattr(props, "L2_cache_size", None), clocks_idle=gpu_clocks())
    ceil["copy_bytes_per_s"] = copy_bandwidth(2 << 30)
    ceil["copy_note"] = "torch copy_ of 2 GiB device to device, bytes read + written / time"
    clocks = gpu_clocks()
    ceil["clocks_after_copy"] = clocks
    mhz = clocks.get("clocks_max_sm_mhz") or clocks.get("clocks_sm_mhz")
    if mhz:
        ceil["lane_instructions_per_s"] = props.multi_processor_count * 4 * 32 * mhz * 1e6
        ceil["issue_note"] = "SMs x 4 schedulers x 32 lanes x max SM clock (one warp instr./cycle)"
    print(f"  copy {ceil['copy_bytes_per_s'] / 1e12:.2f} TB/s, clocks {clocks}", flush=True)


def one_transition(suite: Suite, section) -> None:
    B, d, L = (suite.plan[k] for k in "BdL")
    for method in FUSED + ["fused_hmc hmc_step, philox", "fused_hmc torch mode, CUDA graph"] \
            + CHEAP_ANCHORS:
        suite.per_transition(section, method, B, d, L)
    for name, info in M.floors(suite.ctx).items():
        suite.records.append(dict(kind="per_transition", method=name, family="floor", B=1, d=1,
                                  L=0, section=section.name, **info))
        print(f"  {name:<67} {info['seconds'] * 1e6:>12.4g} us/call", flush=True)
    for method, module in (("JAX jit, one transition per call", "jax_per_call"),
                           ("BlackJAX jit, one step per call", "blackjax_per_call")):
        def measure(module=module):
            import anchors_jax

            return {"seconds": getattr(anchors_jax, module)(B, d, L, EPS),
                    "mode": "back-to-back jitted calls, state chained, host clock"}
        suite.point(section, "per_transition", method, B, d, L, measure, predicted=3.0)
    for mode in M.COMPILE_MODES:  # slowest to compile last
        method = f"torch.compile {mode}"

        def measure(mode=mode, method=method):
            compile_s = M.compile_seconds(suite.ctx, mode, B, d, L)
            return {**M.per_transition(method, suite.ctx, B, d, L), "compile_s": compile_s}
        suite.point(section, "per_transition", method, B, d, L, measure,
                    predicted=60.0 if mode.startswith("max-autotune") else 10.0)
    if suite.ctx.cuda:
        suite.result["ceilings"]["clocks_after_one_transition"] = gpu_clocks()


def best_compile_mode(suite: Suite) -> str:
    rows = [r for r in suite.records if r["method"].startswith("torch.compile")
            and r["kind"] == "per_transition"]
    best = min(rows, key=lambda r: r["seconds"], default=None)
    return best["method"].removeprefix("torch.compile ") if best else "default"


def long_runs(suite: Suite, section) -> None:
    B, d, L, T = (suite.plan[k] for k in "BdLT")
    mode = best_compile_mode(suite)
    names = ["fused_hmc sample op", "fused_hmc sample()", "fused_hmc philox, CUDA graph",
             "fused_hmc op, philox", "fused_hmc HMC module, torch mode",
             "3-launch (randn_like + rand + fused)", "reference CUDA graph", "torch.compile",
             "reference eager"]
    for name in names:
        if name == "torch.compile" and not any(r["method"] == f"torch.compile {mode}"
                                               for r in suite.records):
            suite.skipped.append(dict(kind="run", method="torch.compile", B=B, d=d, L=L, T=T,
                                      section=section.name, reason="not compiled above"))
            continue
        method = f"torch.compile {mode}" if name == "torch.compile" else name
        record = suite.point(section, "run", method, B, d, L,
                             lambda name=name: M.run_of(name, suite.ctx, B, d, L, T, mode),
                             predicted=0.0 if name != "reference eager" else 4 * T * 1e-3)
        if record:
            record["transitions"] = T
    for method in JAX_ANCHORS:
        record = suite.point(section, "run", method, B, d, L,
                             lambda method=method: suite._jax_run(method, B, d, L, T, False),
                             predicted=5.0)
        if not record:
            continue
        record["transitions"] = T
        if method == "NumPyro vectorized":  # recompiles every run: how much of it is fixed
            try:
                short = suite._jax_run(method, B, d, L, 1, False)["seconds"]
                record.update(seconds_one_transition_run=short)
            except Exception as exc:  # noqa: BLE001
                section.note(f"NumPyro one-transition run failed: {exc}")
        else:
            suite.records.append({**record, "kind": "per_transition",
                                  "seconds": record["seconds"] / T, "transitions_per_call": T})


def sweep(suite: Suite, section, axis: str) -> None:
    c = suite.plan
    values, anchor_values = c[axis], c[axis + "_anchors"]
    centre = dict(B=c["B"], d=c["d"], L=c["L"])
    key = {"chains": "B", "dims": "d", "steps": "L"}[axis]
    section.note(f"{', '.join(SLOW_ANCHORS)} only at {key} in {anchor_values}; the centre "
                 f"point ({key}={centre[key]}) comes from the one-transition and 1000-transition "
                 f"sections")
    for value in spread(values):
        shape = {**centre, key: value}
        if shape == centre:
            continue
        for method in FUSED + CHEAP_ANCHORS + SLOW_ANCHORS:
            if method in SLOW_ANCHORS and value not in anchor_values:
                continue
            if method.startswith("torch.compile"):
                torch._dynamo.reset()
                suite.ctx.compiled.clear()

                def measure(method=method, shape=shape):
                    compile_s = M.compile_seconds(suite.ctx, "default", **shape)
                    return {**M.per_transition(method, suite.ctx, **shape), "compile_s": compile_s}
                suite.point(section, "per_transition", method, **shape, measure=measure)
            else:
                suite.per_transition(section, method, **shape)


def spread(values: list[int]) -> list[int]:
    """Both ends first, then the points halving the gaps: a sweep cut short still spans it."""
    values = sorted(values)
    order, gaps = [values[-1], values[0]], [(0, len(values) - 1)]
    while gaps:
        lo, hi = gaps.pop(0)
        if hi - lo >= 2:
            mid = (lo + hi) // 2
            order.append(values[mid])
            gaps += [(lo, mid), (mid, hi)]
    return list(dict.fromkeys(order))


def ess_per_second(suite: Suite, section) -> None:
    """ESS/s on N(0, I) at the centre: fused_hmc.sample and the JAX scan, same sampler settings.

    Chains start at N(0, I) draws, i.e. in equilibrium, so there is no warm-up; ESS (bulk, min over
    the first 8 dims) comes from the first `ess_chains` chains, ESS/s scales it to all B chains over
    the 1000-transition time of the same sampler measured above (no draws kept there).
    """
    import fused_hmc
    from fused_hmc import diagnostics

    B, d, L, T, n = (suite.plan[k] for k in ("B", "d", "L", "T", "ess_chains"))
    times = {r["method"]: r["seconds"] for r in suite.records if r["kind"] == "run"}

    def fused():
        q0 = torch.randn(n, d, device=suite.ctx.device)
        res = fused_hmc.sample(q0, T, step_size=EPS, num_leapfrog_steps=L, progress=False, seed=5)
        return _ess_info(diagnostics.diagnose(res.samples, max_dims=8), n, B,
                         times["fused_hmc sample()"])

    def jax_anchor():
        import anchors_jax

        draws = anchors_jax.jax_scan_draws(B, d, L, EPS, T, n, 8)
        return _ess_info(diagnostics.diagnose(draws), n, B, times["JAX lax.scan"])

    for method, timed, measure in (("fused_hmc sample()", "fused_hmc sample()", fused),
                                   ("JAX lax.scan", "JAX lax.scan", jax_anchor)):
        if timed not in times:
            section.note(f"ESS/s of {method}: its 1000-transition time was not measured")
            continue
        record = suite.point(section, "ess", method, B, d, L, measure, predicted=10.0)
        if record:
            record["transitions"] = T


def warmup(suite: Suite, section) -> None:
    """Warm-up (bench_warmup.py): the cost of a warm-up transition against a sampling transition,
    and ESS/s after 1000 warm-up transitions on the ill-conditioned diagonal target (sigma 0.01 ..
    100, d = 64, 512 chains started at N(0, I)) against BlackJAX's window_adaptation + hmc."""
    if not suite.ctx.cuda:
        section.note("warm-up: needs CUDA (bench_warmup.py times CUDA kernels)")
        return
    import bench_warmup as W

    costs = W.transition_costs()
    for method, ms in costs.items():
        suite.point(section, "warmup_cost", f"fused_hmc {method}", 2048, 64, W.L,
                    lambda ms=ms: {"seconds": ms / 1e3}, predicted=1.0)
    chains, d = 512, 64
    runs = [("fused_hmc sample(num_warmup=1000, pooled, jitter 0.2)",
             lambda: W.fused_run(chains, d, torch.float32, True)),
            ("fused_hmc sample(num_warmup=1000, per chain, jitter 0.2)",
             lambda: W.fused_run(chains, d, torch.float32, False)),
            ("fused_hmc sample(num_warmup=1000, pooled, no jitter)",
             lambda: W.fused_run(chains, d, torch.float32, True, jitter=0.0)),
            ("BlackJAX window_adaptation + hmc, vmap+jit", lambda: W.blackjax_run(chains, d))]
    for method, measure in runs:
        suite.point(section, "ess_warmup", method, chains, d, W.L, measure, predicted=15.0)


def _ess_info(diag, chains_diagnosed: int, chains: int, run_seconds: float) -> dict:
    per_chain = diag.min_ess_bulk / chains_diagnosed
    return {"seconds": run_seconds, "min_ess_bulk": diag.min_ess_bulk,
            "min_ess_tail": diag.min_ess_tail, "max_r_hat": diag.max_r_hat,
            "chains_diagnosed": chains_diagnosed, "dims_diagnosed": len(diag.ess_bulk),
            "ess_per_second": per_chain * chains / run_seconds}


SECTIONS = [("ceilings", ceilings), ("one transition", one_transition),
            ("1000 transitions", long_runs),
            ("chains sweep", lambda s, sec: sweep(s, sec, "chains")),
            ("dimension sweep", lambda s, sec: sweep(s, sec, "dims")),
            ("leapfrog sweep", lambda s, sec: sweep(s, sec, "steps")),
            ("ESS/s", ess_per_second), ("warm-up", warmup)]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes on the CPU; CUDA-only methods are skipped with a note")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds for the whole run (default 480; 120 with --smoke)")
    parser.add_argument("--only", default=None,
                        help="comma-separated section names to run, e.g. 'ceilings,one transition'")
    parser.add_argument("--no-jax", action="store_true", help="skip JAX, BlackJAX and NumPyro")
    parser.add_argument("--compile", action="store_true",
                        help="with --smoke: include torch.compile")
    parser.add_argument("--rotate", type=int, default=8,
                        help="input tensors rotated among back-to-back calls (default 8)")
    parser.add_argument("--device", default=None, help="default: cuda, or cpu with --smoke")
    parser.add_argument("--results-dir", default=None,
                        help="where the JSON goes (default benchmarks/results/; with --smoke a "
                             "temporary folder, so smoke figures never replace real ones)")
    args = parser.parse_args(argv)
    args.device = args.device or ("cpu" if args.smoke else "cuda")
    args.budget = args.budget or (120.0 if args.smoke else 480.0)
    if args.smoke and args.results_dir is None:
        args.results_dir = str(Path(tempfile.gettempdir()) / "fused_hmc_bench_smoke")
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device: run on a GPU, or pass --smoke for the CPU smoke run")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    for limit in ("recompile_limit", "cache_size_limit"):  # one compiled reference per shape
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, 256)
    plan = PLANS["smoke" if args.smoke else "full"]
    only = {s.strip() for s in args.only.split(",")} if args.only else None
    shares = {name: share for name, share in SHARES.items() if not only or name in only}
    budget = Budget(args.budget, shares)
    suite = Suite(args, plan, {"fused": FUSED, "cheap_anchors": CHEAP_ANCHORS,
                               "slow_anchors": SLOW_ANCHORS})
    print(f"fused_hmc benchmark suite on {args.device}, budget {args.budget:.0f}s, "
          f"sections: {', '.join(shares)}", flush=True)
    for name, run in SECTIONS:
        if name not in shares:
            continue
        with budget.section(name) as section:
            try:
                run(suite, section)
            except Exception as exc:  # noqa: BLE001 - later sections still run
                section.note(f"section failed: {type(exc).__name__}: {exc}")
                traceback.print_exc()
        suite.save(budget)
    print(f"\ndone in {budget.elapsed():.1f}s: {len(suite.records)} records, "
          f"{len(suite.skipped)} skipped", flush=True)


if __name__ == "__main__":
    main()
