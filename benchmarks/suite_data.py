"""Reading run.py's JSON for plots.py and report.py (no GPU needed), and the model of the limits.

`load()` reads benchmarks/results/bench_suite.json, or, before the suite has run on a GPU, converts
the earlier scripts' bench_transition.json and bench_long_chains.json into the same records.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SUITE = RESULTS / "bench_suite.json"

# Ceilings used when a JSON holds none (the legacy files): this workplace's H200, read on 2026-11-04
# (device-to-device copy ~4.3 TB/s counting read + write) and its 1980 MHz maximum SM clock.
DEFAULT_CEILINGS = {"copy_bytes_per_s": 4.3e12, "sm_count": 132,
                    "lane_instructions_per_s": 132 * 4 * 32 * 1980e6,
                    "source": "not measured in this run: earlier H200 readings "
                              "(4.3 TB/s, 1980 MHz)"}

# Instructions per element per transition (philox-mode kernel), counted from the source as in
# benchmarks/results/README.md: Philox4x32-10 ~23, Box-Muller ~20, energy and reduction ~6, each
# leapfrog step ~2.2 (x += eps p; p -= eps (x - mu)); Welford in float64 ~10 (the sample op only).
INSTR_FIXED, INSTR_PER_LEAPFROG, INSTR_WELFORD = 49.0, 2.2, 10.0
PHILOX_METHODS = ("fused_hmc op, philox", "fused_hmc hmc_step, philox",
                  "fused_hmc philox, CUDA graph", "fused_hmc sample op")


def instructions_per_element(method: str, L: int) -> float:
    extra = INSTR_WELFORD if method == "fused_hmc sample op" else 0.0
    return INSTR_FIXED + INSTR_PER_LEAPFROG * L + extra


def bytes_per_transition(record: dict) -> float:
    """DRAM bytes one transition must move: q in and q_new out (float32) plus the accept flags,
    for one-transition launches; the sample op keeps the state in registers, so only its launch's
    q in/out and float64 mean/m2 in/out, spread over the launch's transitions."""
    B, d = record["B"], record["d"]
    if record["method"] == "fused_hmc sample op":
        return (8 + 32) * B * d / record.get("transitions_per_launch", 1000) + 16 * B
    return 8 * B * d + B


def bounds(record: dict, ceilings: dict) -> dict:
    """Seconds the copy-bandwidth and the issue-rate limits allow for the record's transition."""
    elements = record["B"] * record["d"]
    instr = elements * instructions_per_element(record["method"], record["L"])
    t_bw = bytes_per_transition(record) / ceilings["copy_bytes_per_s"]
    t_issue = instr / ceilings["lane_instructions_per_s"]
    return {"bandwidth_s": t_bw, "issue_s": t_issue, "bound_s": max(t_bw, t_issue),
            "limit": "issue" if t_issue >= t_bw else "bandwidth"}


def load(path: str | Path | None = None) -> dict:
    if path is not None:
        return json.loads(Path(path).read_text())
    if SUITE.exists():
        return json.loads(SUITE.read_text())
    return legacy()


def ceilings_of(data: dict) -> dict:
    ceil = data.get("ceilings") or {}
    if "copy_bytes_per_s" in ceil and "lane_instructions_per_s" in ceil:
        return {**ceil, "source": "measured in this run"}
    return DEFAULT_CEILINGS


def centre(data: dict) -> dict:
    return data["config"]["center"]


def select(data: dict, kind: str, method: str | None = None, **shape) -> list[dict]:
    return [r for r in data["records"] if r["kind"] == kind
            and (method is None or r["method"] == method)
            and all(r.get(k) == v for k, v in shape.items())]


def best(data: dict, kind: str, methods, **shape) -> dict | None:
    rows = [r for m in methods for r in select(data, kind, m, **shape)]
    return min(rows, key=lambda r: r["seconds"], default=None)


def series(data: dict, axis: str) -> dict[str, list[tuple[int, float]]]:
    """Per-transition seconds along one axis (B, d or L), the other two at the centre."""
    fixed = {k: v for k, v in centre(data).items() if k != axis}
    out: dict[str, dict[int, float]] = {}
    for r in select(data, "per_transition", **fixed):
        if r["family"] == "floor":
            continue
        points = out.setdefault(r["method"], {})
        points[r[axis]] = min(r["seconds"], points.get(r[axis], float("inf")))
    return {m: sorted(p.items()) for m, p in out.items()}


def label(record: dict) -> str:
    """The method's name, with how a per-transition figure was obtained where the name hides it."""
    T = record.get("transitions_per_launch") or record.get("transitions_per_call")
    if record["kind"] == "per_transition" and T:
        return f"{record['method']} (1/{T} of a {T}-transition call)"
    return record["method"]


def legacy() -> dict:
    """The earlier scripts' two JSON files as suite records (centre B=2048, d=64, L=10)."""
    one = json.loads((RESULTS / "bench_transition.json").read_text())
    long = json.loads((RESULTS / "bench_long_chains.json").read_text())
    records = []

    def add(kind, method, seconds, B=2048, d=64, L=10, **extra):
        family = ("fused_hmc" if method.startswith("fused_hmc")
                  else "floor" if method.startswith("floor") else "anchor")
        records.append(dict(kind=kind, method=method, family=family, B=B, d=d, L=L,
                            seconds=seconds, **extra))

    names = {"reference eager": "reference eager",
             "reference CUDA graph (100/graph)": "reference CUDA graph",
             "3-launch design (randn_like + rand + fused)": "3-launch (randn_like + rand + fused)",
             "fused_hmc HMC module, torch mode (1 launch)": "fused_hmc HMC module, torch mode",
             "fused_hmc hmc_step philox": "fused_hmc hmc_step, philox",
             "fused_hmc op philox (no Python wrapper)": "fused_hmc op, philox",
             "fused_hmc torch mode, CUDA graph (100/graph)": "fused_hmc torch mode, CUDA graph",
             "fused_hmc philox, CUDA graph (100/graph)": "fused_hmc philox, CUDA graph",
             "1,048,576 chains x 64: fused_hmc philox": "fused_hmc op, philox",
             "1,048,576 chains x 64: fused_hmc torch mode": "fused_hmc HMC module, torch mode",
             "1,048,576 chains x 64: reference eager": "reference eager"}
    for name, seconds in one["seconds_per_transition"].items():
        B = 2**20 if name.startswith("1,048,576") else 2048
        compiled = re.match(r"reference torch\.compile (\S+) \(compile ([\d.]+)s\)", name)
        if compiled:
            add("per_transition", f"torch.compile {compiled[1]}", seconds,
                compile_s=float(compiled[2]))
        elif name.startswith("floor"):
            add("per_transition", name, seconds, B=1, d=1, L=0)
        elif name in names:
            add("per_transition", names[name], seconds, B=B)
    runs = {"fused_hmc sample op kernel": "fused_hmc sample op",
            "fused_hmc.sample API": "fused_hmc sample()",
            "reference eager": "reference eager",
            "reference torch.compile default": "torch.compile default",
            "JAX jit/lax.scan": "JAX lax.scan", "BlackJAX vmap+scan": "BlackJAX vmap+scan",
            "NumPyro vectorized": "NumPyro vectorized"}
    for name, seconds in long["seconds_1000_transitions_2048x64"].items():
        method = runs[name.removesuffix(", 1000 transitions")]
        add("run", method, seconds, transitions=1000)
        if method in ("fused_hmc sample op", "JAX lax.scan", "BlackJAX vmap+scan"):
            add("per_transition", method, seconds / 1000, transitions_per_launch=1000)
    per = long["seconds_per_transition"]
    add("per_transition", "fused_hmc sample op",
        per["fused_hmc sample op, 1,048,576 chains x 64, per transition"], B=2**20,
        transitions_per_launch=20)
    add("per_transition", "fused_hmc sample op",
        per["fused_hmc sample op, 2048 chains x 1024, per transition"], d=1024,
        transitions_per_launch=200)
    env = one["environment"]
    env["command"] = f"{one['environment']['command']}; {long['environment']['command']}"
    return {"environment": env, "legacy": True, "ceilings": {}, "records": records, "skipped": [],
            "config": {"eps": 0.1, "center": {"B": 2048, "d": 64, "L": 10}, "smoke": False},
            "sections": {}}
