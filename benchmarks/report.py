"""Markdown tables from run.py's JSON, no GPU needed.

    python benchmarks/report.py [--json PATH] [--table PATH] [--readme PATH] [--bench-readme PATH]
                                [--no-readme]

Writes benchmarks/results/TABLE.md (the ratio table, sweeps, limits, ESS/s, skipped points), puts
the ratio table in README.md between <!-- bench-table:start --> and <!-- bench-table:end -->, and
the limits table in benchmarks/README.md between <!-- limits:start --> and <!-- limits:end -->.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite_data as S  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
COMPILE = ["torch.compile default", "torch.compile reduce-overhead",
           "torch.compile max-autotune-no-cudagraphs"]
THREE = ["3-launch (randn_like + rand + fused)"]
COLUMNS = ["reference eager", "reference CUDA graph", "torch.compile", "3-launch", "JAX",
           "BlackJAX", "NumPyro"]
PER_CALL = {"reference eager": ["reference eager"], "reference CUDA graph": [],
            "torch.compile": COMPILE, "3-launch": THREE,
            "JAX": ["JAX jit, one transition per call"],
            "BlackJAX": ["BlackJAX jit, one step per call"], "NumPyro": []}
GRAPH = {"reference CUDA graph": ["reference CUDA graph"],
         "torch.compile": ["torch.compile reduce-overhead"]}
RUN = {"reference eager": ["reference eager"], "reference CUDA graph": ["reference CUDA graph"],
       "torch.compile": COMPILE, "3-launch": THREE, "JAX": ["JAX lax.scan"],
       "BlackJAX": ["BlackJAX vmap+scan"], "NumPyro": ["NumPyro vectorized"]}
SWEPT = {"reference eager": ["reference eager"], "reference CUDA graph": ["reference CUDA graph"],
         "torch.compile": COMPILE, "3-launch": THREE, "JAX": ["JAX lax.scan"],
         "BlackJAX": ["BlackJAX vmap+scan"], "NumPyro": ["NumPyro HMC kernel, vmap+scan"]}
MARKERS = {"bench-table": ("<!-- bench-table:start -->", "<!-- bench-table:end -->"),
           "limits": ("<!-- limits:start -->", "<!-- limits:end -->")}


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if seconds >= scale or unit == "ns":
            v = seconds / scale
            return f"{v:.0f} {unit}" if v >= 100 else f"{v:.1f} {unit}" if v >= 10 else \
                f"{v:.2f} {unit}"
    return "-"


def fmt_ratio(r: float) -> str:
    return f"{r:.0f}x" if r >= 10 else f"{r:.1f}x"


def rows(data: dict) -> list[tuple]:
    """(title, kind, shape, [(tag, fused method)], {column: anchor methods})."""
    c = S.centre(data)
    per = S.select(data, "per_transition")
    biggest = lambda axis: max((r[axis] for r in per if r["family"] != "floor"  # noqa: E731
                                and all(r[k] == v for k, v in c.items() if k != axis)),
                               default=c[axis])
    B, d, L = biggest("B"), biggest("d"), biggest("L")
    out = [("one transition, back-to-back calls", "per_transition", c,
            [("philox", "fused_hmc hmc_step, philox"), ("torch mode",
                                                        "fused_hmc HMC module, torch mode")],
            PER_CALL),
           ("one transition inside a CUDA graph", "per_transition", c,
            [("philox", "fused_hmc philox, CUDA graph"), ("torch mode",
                                                          "fused_hmc torch mode, CUDA graph")],
            GRAPH),
           (f"{_runs(data)} transitions, chained", "run", c,
            [("one launch", "fused_hmc sample op"), ("`sample()`", "fused_hmc sample()")], RUN)]
    for title, shape in ((f"one transition, {B:,} chains", {**c, "B": B}),
                         (f"one transition, d={d}", {**c, "d": d}),
                         (f"one transition, L={L}", {**c, "L": L})):
        if shape != c:
            out.append((title, "per_transition", shape,
                        [("philox", "fused_hmc op, philox"),
                         ("in the persistent kernel", "fused_hmc sample op")], SWEPT))
    return out


def _runs(data: dict) -> int:
    runs = S.select(data, "run")
    return runs[0].get("transitions", 1000) if runs else 1000


def ratio_table(data: dict) -> str:
    lines = ["| workload | fused_hmc | " + " | ".join(COLUMNS) + " |",
             "|---|---|" + "---:|" * len(COLUMNS)]
    notes = []
    for title, kind, shape, fused, anchors in rows(data):
        found = [(tag, S.best(data, kind, [m], **shape)) for tag, m in fused]
        found = [(tag, r) for tag, r in found if r]
        if not found:
            continue
        base = found[0][1]["seconds"]
        cells = [", ".join(f"**{fmt_time(r['seconds'])}** ({tag})" for tag, r in found)]
        for column in COLUMNS:
            r = S.best(data, kind, anchors.get(column, []), **shape)
            cells.append("n/a" if not anchors.get(column) else "-" if r is None else
                         f"{fmt_time(r['seconds'])} ({fmt_ratio(r['seconds'] / base)})")
            if r and column == "torch.compile":
                notes.append(f"{title}: {r['method'].removeprefix('torch.compile ')}")
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    env = data.get("environment", {})
    lines += ["", f"Ratios: anchor time / fused_hmc's first figure in the row (higher: fused_hmc "
              f"faster). `-`: not measured; n/a: no such variant. torch.compile: best mode "
              f"measured ({'; '.join(notes) or 'none'}). {_source(data)}"]
    if env:
        driver = f", driver {env['driver']}" if env.get("driver") else ""
        lines[-1] += (f" {env.get('gpu', 'CPU')}{driver}, torch {env.get('torch')}, "
                      f"{env.get('date')}.")
    return "\n".join(lines)


def _source(data: dict) -> str:
    if data.get("legacy"):
        return ("Source: the earlier bench_transition.py / bench_long_chains.py JSON (no sweeps) "
                "via benchmarks/report.py.")
    smoke = " SMOKE RUN ON THE CPU, not a measurement." if data["config"].get("smoke") else ""
    return f"Generated by benchmarks/report.py from `{data['environment'].get('command')}`.{smoke}"


def sweep_tables(data: dict) -> str:
    out = []
    c = S.centre(data)
    for axis, name in (("B", "chains"), ("d", "dimension"), ("L", "leapfrog steps")):
        lines = S.series(data, axis)
        if not lines:
            continue
        methods = sorted(lines, key=lambda m: (not m.startswith("fused_hmc"), m))
        xs = sorted({x for m in methods for x, _ in lines[m]})
        fixed = ", ".join(f"{k}={v}" for k, v in c.items() if k != axis)
        out += [f"### Time per transition against {name} ({fixed})", "",
                f"| method \\ {axis} | " + " | ".join(f"{x:,}" for x in xs) + " |",
                "|---|" + "---:|" * len(xs)]
        for m in methods:
            points = dict(lines[m])
            out.append(f"| {m} | " + " | ".join(fmt_time(points.get(x)) for x in xs) + " |")
        out.append("")
    return "\n".join(out)


def limits_table(data: dict, compact: bool) -> str:
    ceil = S.ceilings_of(data)
    c = S.centre(data)
    lines = [f"Ceilings ({ceil.get('source')}): copy bandwidth "
             f"{ceil['copy_bytes_per_s'] / 1e12:.2f} TB/s, issue rate "
             f"{ceil['lane_instructions_per_s'] / 1e12:.1f} T lane-instructions/s.", "",
             "| method | B | d | L | measured | bandwidth bound | issue bound | limited by | "
             "of the limit | element-transitions/s |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    records = [r for r in S.select(data, "per_transition") if r["method"] in S.PHILOX_METHODS]
    if compact:
        keep = {(c["B"], c["d"], c["L"])} | {max(((r["B"], r["d"], r["L"]) for r in records
                                                  if sum(r[k] != c[k] for k in c) == 1
                                                  and r[axis] != c[axis]),
                                                 key=lambda s: s["BdL".index(axis)], default=None)
                                             for axis in "BdL"}
        records = [r for r in records if (r["B"], r["d"], r["L"]) in keep]
    for r in sorted(records, key=lambda r: (r["method"], r["L"], r["d"], r["B"])):
        b = S.bounds(r, ceil)
        lines.append(f"| {r['method']} | {r['B']:,} | {r['d']} | {r['L']} | "
                     f"{fmt_time(r['seconds'])} | {fmt_time(b['bandwidth_s'])} | "
                     f"{fmt_time(b['issue_s'])} | {b['limit']} | "
                     f"{100 * b['bound_s'] / r['seconds']:.0f}% | "
                     f"{r['B'] * r['d'] / r['seconds']:.2e} |")
    lines += ["", "'of the limit': the larger bound / measured time (100% = at the limit). "
              f"Instructions per element: {S.INSTR_FIXED:g} + {S.INSTR_PER_LEAPFROG:g} L "
              f"(+ {S.INSTR_WELFORD:g} for the persistent kernel's Welford); bytes: q in + out, "
              "8 per element, for one-transition launches (see benchmarks/README.md)."]
    return "\n".join(lines)


def extras(data: dict) -> str:
    out = []
    ess = S.select(data, "ess")
    if ess:
        out += ["### ESS per second (N(0, I), chains started in equilibrium, no warm-up)", "",
                "| sampler | chains x draws diagnosed | min bulk ESS | min tail ESS | max R-hat | "
                "run time | ESS/s (all chains) |", "|---|---:|---:|---:|---:|---:|---:|"]
        for r in ess:
            out.append(f"| {r['method']} | {r['chains_diagnosed']} x {r['transitions']} | "
                       f"{r['min_ess_bulk']:.0f} | {r['min_ess_tail']:.0f} | {r['max_r_hat']:.3f} "
                       f"| {fmt_time(r['seconds'])} | {r['ess_per_second']:.3g} |")
        out.append("")
    costs = S.select(data, "warmup_cost")
    if costs:
        base = next((r["seconds"] for r in costs if r["method"].endswith("sample op, target")),
                    None)
        out += ["### Warm-up cost (2048 chains x 64, float32, L = 10, diagonal target, "
                "jitter 0.2; 1000 transitions per call)", "",
                "| kernel | per transition | vs the sample op on the target |", "|---|---:|---:|"]
        for r in costs:
            ratio = f"{r['seconds'] / base:.2f}x" if base else "-"
            out.append(f"| {r['method']} | {fmt_time(r['seconds'])} | {ratio} |")
        out.append("")
    warm = S.select(data, "ess_warmup")
    if warm:
        out += ["### ESS per second after warm-up (N(mu, diag(sigma^2)), sigma 0.01 .. 100, "
                "d = 64, 512 chains from N(0, I), 1000 warm-up + 1000 draws, L = 10)", "",
                "| sampler | wall time | min bulk ESS (x and x^2) | ESS/s | acceptance |",
                "|---|---:|---:|---:|---:|"]
        for r in warm:
            out.append(f"| {r['method']} | {fmt_time(r['seconds'])} | {r['min_ess']:.0f} | "
                       f"{r['ess_per_second']:.3g} | {r['accept_prob']:.3f} |")
        out.append("")
    for r in S.select(data, "run", "NumPyro vectorized"):
        if "seconds_one_transition_run" in r:
            out += [f"NumPyro vectorized (MCMC.run) compiles its sampling loop on every run: "
                    f"{r['transitions']} transitions took {fmt_time(r['seconds'])}, one transition "
                    f"{fmt_time(r['seconds_one_transition_run'])}. The sweeps time NumPyro's HMC "
                    f"kernel in a jitted lax.scan instead (NumPyro HMC kernel, vmap+scan).", ""]
    compiles = [r for r in S.select(data, "per_transition") if "compile_s" in r]
    if compiles:
        out += ["torch.compile compile times: " + "; ".join(
            f"{r['method'].removeprefix('torch.compile ')} at B={r['B']}, d={r['d']}, L={r['L']}: "
            f"{r['compile_s']:.1f} s" for r in compiles), ""]
    skipped = Counter((s["method"], s["reason"].split(":")[0]) for s in data.get("skipped", []))
    if skipped:
        out += ["### Points not measured", ""] + [f"- {m}: {n} point(s), {why}"
                                                    for (m, why), n in sorted(skipped.items())]
        out.append("")
    sections = data.get("sections") or {}
    if sections:
        out += ["Sections (seconds used / cap): " + "; ".join(
            f"{k} {v['seconds']:.0f}/{v['cap_s']:.0f}" for k, v in sections.items()), ""]
    return "\n".join(out)


def replace_between(path: Path, key: str, body: str) -> bool:
    start, end = MARKERS[key]
    text = path.read_text()
    if start not in text or end not in text:
        print(f"{path}: markers {start} ... {end} not found, left unchanged")
        return False
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{start}\n{body}\n{end}{tail}")
    print(f"updated {path} between {start} and {end}")
    return True


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=None, help="default: results/bench_suite.json, or the "
                        "earlier scripts' JSON when it does not exist yet")
    parser.add_argument("--table", default=str(S.RESULTS / "TABLE.md"))
    parser.add_argument("--readme", default=str(REPO / "README.md"))
    parser.add_argument("--bench-readme", default=str(REPO / "benchmarks" / "README.md"))
    parser.add_argument("--no-readme", action="store_true", help="write TABLE.md only")
    args = parser.parse_args(argv)
    data = S.load(args.json)
    table = ratio_table(data)
    full = "\n\n".join(part for part in (
        "# Benchmark tables (generated by benchmarks/report.py; do not edit)",
        "## fused_hmc against the anchors", table, "## Sweeps", sweep_tables(data),
        "## Distance from the compute and bandwidth limits", limits_table(data, compact=False),
        "## Other figures", extras(data)) if part)
    Path(args.table).parent.mkdir(parents=True, exist_ok=True)
    Path(args.table).write_text(full.rstrip() + "\n")
    print(f"wrote {args.table}")
    if not args.no_readme:
        replace_between(Path(args.readme), "bench-table", table)
        replace_between(Path(args.bench_readme), "limits", limits_table(data, compact=True))


if __name__ == "__main__":
    main()
