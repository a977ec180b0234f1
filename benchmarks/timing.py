"""Timing helpers shared by the benchmark scripts: CUDA events, medians, environment facts.

On CUDA, time is read with CUDA events around back-to-back calls after warm-up; on the CPU (the
smoke mode of run.py) with the host clock. Each figure is a median over repeats.
"""
from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from fused_hmc.timing import seconds_per_call


def _cuda(device) -> bool:
    return device is None or torch.device(device).type == "cuda"


def time_per_call(fn, calls: int, repeats: int = 5, warmup: int = 3, device=None) -> float:
    """Median over `repeats` of (time for `calls` back-to-back calls) / calls, in seconds."""
    for _ in range(warmup):
        fn()
    if _cuda(device):
        torch.cuda.synchronize()
    return statistics.median(seconds_per_call(fn, calls, device) for _ in range(repeats))


def calls_for(seconds_per_call: float, target_s: float, most: int = 5000) -> int:
    """How many back-to-back calls make one timed repeat last about target_s."""
    return max(1, min(most, round(target_s / max(seconds_per_call, 1e-9))))


def time_adaptive(fn, device=None, target_s: float = 0.02, repeats: int = 5,
                  most: int = 5000) -> tuple[float, int]:
    """(median seconds per call, calls per repeat); one timed call sizes repeats to ~target_s."""
    fn()
    first = time_per_call(fn, 1, repeats=1, warmup=1, device=device)
    calls = calls_for(first, target_s, most)
    return time_per_call(fn, calls, repeats=repeats, warmup=1, device=device), calls


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
    seconds = time_per_call(graph.replay, 1, repeats=repeats) / calls_per_graph
    del graph
    return seconds


def host_seconds(fn, repeats: int = 5, device=None) -> float:
    """Median wall time of fn() to completion (synchronised), after one warm-up call."""
    def sync():
        if _cuda(device) and torch.cuda.is_available():
            torch.cuda.synchronize()

    fn()
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def copy_bandwidth(nbytes: int = 2 << 30, repeats: int = 10) -> float:
    """Device-to-device copy rate in bytes/s, counting bytes read plus bytes written."""
    pair = [torch.empty(nbytes // 4, device="cuda") for _ in range(2)]
    seconds = time_per_call(lambda: pair[1].copy_(pair[0]), 1, repeats=repeats, warmup=3)
    pair.clear()
    torch.cuda.empty_cache()
    return 2 * nbytes / seconds


def gpu_clocks() -> dict:
    """SM and memory clocks (MHz) as nvidia-smi reads them now, with the SM clock's maximum."""
    fields = ("clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem")
    out = _nvidia_smi(",".join(fields))
    if not out:
        return {}
    values = [v.strip() for v in out.splitlines()[0].split(",")]
    result = {}
    for field, value in zip(fields, values):
        try:
            result[field.replace(".", "_") + "_mhz"] = float(value.split()[0])
        except (ValueError, IndexError):
            pass
    return result


def _nvidia_smi(query: str) -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=20)
        return out.stdout.strip() or None
    except Exception:  # noqa: BLE001 - informative only
        return None


def package_versions(names) -> dict:
    """Installed versions (None when missing), read from metadata without importing."""
    from importlib import metadata

    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


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
    return _nvidia_smi("driver_version")


def save(results: dict, name: str, directory: str | Path | None = None) -> list[Path]:
    """Writes the JSON to `directory` (default benchmarks/results/) and, on the device, to $OUT."""
    import os

    dirs = [Path(directory) if directory else Path(__file__).resolve().parent / "results"]
    if os.environ.get("OUT"):
        dirs.append(Path(os.environ["OUT"]))
    written = []
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(json.dumps(results, indent=2) + "\n")
        written.append(d / name)
    return written
