"""PNG plots from run.py's JSON, no GPU needed.

    python benchmarks/plots.py [--json PATH] [--out-dir DIR]

sweeps.png: time per transition against chains, dimension and leapfrog steps (log-log), one line
per method (fused_hmc solid, anchors dashed), with the limit of the fused kernel (the larger of
its copy-bandwidth and issue-rate bounds, suite_data.bounds) dotted. headline.png: every method at
the centre point, one transition and the 1000-transition run. Default: benchmarks/results/.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite_data as S  # noqa: E402

AXES = [("B", "chains (d=%(d)s, L=%(L)s)"), ("d", "dimension (B=%(B)s, L=%(L)s)"),
        ("L", "leapfrog steps (B=%(B)s, d=%(d)s)")]


def _style(method: str, index: int) -> dict:
    fused = method.startswith("fused_hmc")
    return {"linestyle": "-" if fused else "--", "marker": "o" if fused else "s",
            "linewidth": 2.0 if fused else 1.2, "markersize": 4,
            "color": plt.get_cmap("tab20")(index % 20)}


def sweeps(data: dict, path: Path) -> None:
    fig, panels = plt.subplots(1, 3, figsize=(18, 6))
    ceilings, c = S.ceilings_of(data), S.centre(data)
    methods = sorted({m for axis, _ in AXES for m in S.series(data, axis)},
                     key=lambda m: (not m.startswith("fused_hmc"), m))
    for ax, (axis, title) in zip(panels, AXES):
        lines = S.series(data, axis)
        for i, method in enumerate(methods):
            if method in lines:
                xs, ys = zip(*lines[method])
                ax.plot(xs, [y * 1e6 for y in ys], label=method, **_style(method, i))
        limit_points = sorted({x for m in lines for x, _ in lines[m]})
        if limit_points:
            limit = [S.bounds({"method": "fused_hmc op, philox", **c, axis: x}, ceilings)["bound_s"]
                     * 1e6 for x in limit_points]
            ax.plot(limit_points, limit, ":", color="gray",
                    label="limit of one fused philox transition")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(title % c)
        ax.set_ylabel("us per transition")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = panels[0].get_legend_handles_labels()
    for ax in panels[1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.suptitle(_title(data, "time per transition"))
    fig.tight_layout(rect=(0, 0.16, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def headline(data: dict, path: Path) -> None:
    c = S.centre(data)
    fig, panels = plt.subplots(1, 2, figsize=(16, 7))
    runs = S.select(data, "run", **c)
    T = runs[0].get("transitions", 1000) if runs else 1000
    for ax, kind, unit, scale, title in (
            (panels[0], "per_transition", "us", 1e6, "one transition"),
            (panels[1], "run", "ms", 1e3, f"{T} transitions (chained)")):
        rows = sorted((r for r in S.select(data, kind, **c)), key=lambda r: r["seconds"])
        rows = [r for r in rows if kind == "run" or r["family"] != "floor"]
        if not rows:
            ax.text(0.5, 0.5, f"{title}: not measured", ha="center", transform=ax.transAxes)
            ax.set_axis_off()
            continue
        names = [S.label(r) for r in rows]
        colors = ["C0" if r["family"] == "fused_hmc" else "C7" for r in rows]
        ax.barh(range(len(rows)), [r["seconds"] * scale for r in rows], color=colors)
        ax.set_yticks(range(len(rows)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(f"{unit} ({title}, B=%(B)s, d=%(d)s, L=%(L)s)" % c)
        for i, r in enumerate(rows):
            v = r["seconds"] * scale
            ax.text(v, i, f" {v:,.0f}" if v >= 100 else f" {v:.3g}", va="center", fontsize=7)
        ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.suptitle(_title(data, "fused_hmc (blue) and the anchors (grey)"))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _title(data: dict, what: str) -> str:
    env = data.get("environment", {})
    source = " (legacy JSON)" if data.get("legacy") else ""
    smoke = " SMOKE RUN, not a measurement" if data.get("config", {}).get("smoke") else ""
    return (f"{what}: {env.get('gpu', 'CPU')}, torch {env.get('torch')}, {env.get('date', '')}"
            f"{source}{smoke}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=None, help="default: results/bench_suite.json, or the "
                        "earlier scripts' JSON files when it does not exist yet")
    parser.add_argument("--out-dir", default=None, help="default: benchmarks/results/")
    args = parser.parse_args(argv)
    data = S.load(args.json)
    out = Path(args.out_dir) if args.out_dir else S.RESULTS
    out.mkdir(parents=True, exist_ok=True)
    for name, draw in (("sweeps.png", sweeps), ("headline.png", headline)):
        draw(data, out / name)
        print(f"wrote {out / name}")


if __name__ == "__main__":
    main()
