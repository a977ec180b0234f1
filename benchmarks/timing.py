"""Timing helpers shared by the benchmark scripts: CUDA events, medians, environment facts."""
from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch


def time_per_call(fn, calls: int, repeats: int = 5, warmup: int = 3) -> float:
    """Median over `repeats` of (time for `calls` back-to-back calls) / calls, in seconds."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / calls)
    return statistics.median(samples)


def time_graph(fn, calls_per_graph: int, repeats: int = 20) -> float:
    """Median time per call of `fn` when `calls_per_graph` calls are captured in one CUDA graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls_per_graph):
            fn()
    return time_per_call(graph.replay, 1, repeats=repeats) / calls_per_graph


def environment(command: str) -> dict:
    info = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "command": command,
            "python": sys.version.split()[0], "torch": torch.__version__,
            "cuda": torch.version.cuda, "platform": platform.platform()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, sm_count=props.multi_processor_count,
                    driver=_driver_version())
    return info


def _driver_version() -> str | None:
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip() or None
    except Exception:  # noqa: BLE001 - the driver version is informative only
        return None


def save(results: dict, name: str) -> None:
    """Writes the JSON to benchmarks/results/ and, on the device machine, to $OUT."""
    import os

    dirs = [Path(__file__).resolve().parent / "results"]
    if os.environ.get("OUT"):
        dirs.append(Path(os.environ["OUT"]))
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(json.dumps(results, indent=2) + "\n")
