"""Compiles every CUDA source of the extension (compile only, no GPU needed) and reports ptxas's
registers, spills and stack per kernel. Run it with a CUDA build of torch (.ci/compile_cuda.sh
makes one); exits non-zero on a compile error or on spills in a kernel not in the allowlist.

Sources and flags come from fused_hmc/_build.py, and the compile commands from torch's own
cpp_extension ninja file, so this compiles exactly what the lazy build compiles on a GPU machine,
plus -Xptxas=-v.
"""
from __future__ import annotations

import argparse
import fnmatch
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# -DTORCH_EXTENSION_NAME: only python_bindings.cpp (not compiled here) reads it. A fixed name, not
# _build.build_name's hash of every source, so one edit does not change every command line and
# recompile every file.
EXTENSION_NAME = "fused_hmc_cuda"


def set_cuda_home() -> None:
    """torch takes CUDA_HOME as nvcc's grandparent folder, wrong when nvcc on PATH is a wrapper."""
    if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"):
        return
    nvcc = shutil.which("nvcc")
    candidates = [Path(nvcc).resolve().parent.parent] if nvcc else []
    candidates.append(Path("/usr/local/cuda"))
    for home in candidates:
        if (home / "include" / "cuda_runtime.h").is_file() and (home / "bin" / "nvcc").is_file():
            os.environ["CUDA_HOME"] = str(home)
            return
    sys.exit("no CUDA toolkit found: install nvcc or set CUDA_HOME")


def import_build_module():
    """fused_hmc._build without running the package's __init__ (which needs numpy, scipy, ...)."""
    package = types.ModuleType("fused_hmc")
    package.__path__ = [str(ROOT / "fused_hmc")]
    sys.modules["fused_hmc"] = package
    from fused_hmc import _build

    return _build


def nvcc_release(cuda_home: str) -> str:
    out = subprocess.run([os.path.join(cuda_home, "bin", "nvcc"), "--version"], check=True,
                         capture_output=True, text=True).stdout
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else "unknown"


def ninja_commands(_build, build_dir: Path, name: str, sources: list[str],
                   include_paths: list[str], objects: list[str],
                   user_model: bool = False) -> list[str]:
    """The shell command compiling each of `objects`, from the ninja file torch's cpp_extension.load
    writes for `sources` (the extension's flags, plus -Xptxas=-v) in build_dir."""
    import torch
    from torch.utils import cpp_extension

    cuda_flags = _build.cuda_compile_flags(user_model)
    if _build.PTXAS_VERBOSE_FLAG not in cuda_flags:
        cuda_flags.append(_build.PTXAS_VERBOSE_FLAG)
    build_dir.mkdir(parents=True, exist_ok=True)
    try:
        cpp_extension._write_ninja_file_to_build_library(
            path=str(build_dir / "build.ninja"), name=name, sources=sources,
            extra_cflags=list(_build.HOST_FLAGS), extra_cuda_cflags=cuda_flags,
            extra_sycl_cflags=[], extra_ldflags=[], extra_include_paths=include_paths,
            with_cuda=True, with_sycl=False, is_standalone=False)
    except TypeError as exc:
        sys.exit(f"torch {torch.__version__}'s private ninja writer changed its signature ({exc}); "
                 "use torch==2.14.1 as .ci/compile_cuda.sh installs")
    return [subprocess.run(["ninja", "-C", str(build_dir), "-t", "commands", "-s", obj],
                           check=True, capture_output=True, text=True).stdout.strip()
            for obj in objects]


def object_name(source: str) -> str:
    stem = Path(source).stem
    return f"{stem}.cuda.o" if source.endswith(".cu") else f"{stem}.o"


def compile_commands(_build, build_dir: Path) -> list[tuple[str, str, str]]:
    """(source, object, shell command) per CUDA source of the extension; kernels first, larger
    files first, so two jobs finish close together."""
    sources = sorted(_build.cuda_sources(ROOT / "csrc"),
                     key=lambda s: (not s.endswith(".cu"), -os.path.getsize(s)))
    objects = [object_name(s) for s in sources]
    commands = ninja_commands(_build, build_dir, EXTENSION_NAME, sources, [str(ROOT / "csrc")],
                              objects)
    return list(zip(sources, objects, commands))


def user_kernel_commands(_build, folders: list[Path], build_dir: Path) -> list[tuple[str, str, str]]:
    """(source, object, command) for each folder's generated fused_hmc_user_kernels.cu (written by
    .ci/generate_user_kernels.py), with the include paths cpp_build.py compiles it with, each in
    its own subfolder of build_dir."""
    commands = []
    for folder in folders:
        source = folder.resolve() / "fused_hmc_user_kernels.cu"
        if not source.is_file():
            sys.exit(f"--user-kernels {folder}: no fused_hmc_user_kernels.cu there")
        out, obj = build_dir / f"user_{folder.name}", object_name(str(source))
        [command] = ninja_commands(_build, out, "fused_hmc_user", [str(source)],
                                   [str(ROOT / "csrc"), str(source.parent)], [obj],
                                   user_model=True)
        # The command names its output relative to its own build folder.
        commands.append((str(source), f"{out.name}/{obj}", f"cd {out} && {command}"))
    return commands


def up_to_date(build_dir: Path, target: str, command: str) -> bool:
    """The object, its compile log and command are newer than every file its depfile names."""
    obj, log, cmd, dep = (build_dir / (target + ext) for ext in ("", ".log", ".cmd", ".d"))
    if not all(p.is_file() for p in (obj, log, cmd, dep)) or cmd.read_text() != command:
        return False
    deps = dep.read_text().replace("\\\n", " ").split(":", 1)[-1].split()
    built = min(obj.stat().st_mtime, log.stat().st_mtime)
    return all(os.path.isfile(d) and os.path.getmtime(d) <= built for d in deps)


def compile_one(build_dir: Path, target: str, command: str, force: bool
                ) -> tuple[int, str, float | None, float]:
    """(exit code, output, wall s or None when reused, CPU s) of compiling one source; reuses the
    last output when nothing the source includes changed."""
    log = build_dir / (target + ".log")
    if not force and up_to_date(build_dir, target, command):
        return 0, log.read_text(), None, 0.0
    (build_dir / (target + ".cmd")).unlink(missing_ok=True)
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(command, shell=True, cwd=build_dir, stdout=out,
                                stderr=subprocess.STDOUT, text=True)
        # wait4: the CPU time of nvcc and its tools, which the wall time hides on a busy machine
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        output = out.read()
    if proc.returncode == 0:
        log.write_text(output)
        (build_dir / (target + ".cmd")).write_text(command)
    return (proc.returncode, output, time.monotonic() - start, usage.ru_utime + usage.ru_stime)


# ptxas -v prints, per function: "Compiling entry function 'NAME' for 'sm_90'" (kernels only), then
# "Function properties for NAME", "N bytes stack frame, N bytes spill stores, N bytes spill loads",
# then for kernels "Used N registers, ...".
ENTRY_RE = re.compile(r"Compiling entry function '([^']+)'")
PROPS_RE = re.compile(r"Function properties for (\S+)")
FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGS_RE = re.compile(r"Used (\d+) registers")


def parse_ptxas(source: str, log: str) -> list[dict]:
    rows, by_name, props_for, entry = [], {}, None, None

    def row(name):
        if name not in by_name:
            by_name[name] = {"source": Path(source).name, "name": name, "kernel": False,
                             "registers": None, "stack": 0, "spill_stores": 0, "spill_loads": 0}
            rows.append(by_name[name])
        return by_name[name]

    for line in log.splitlines():
        if m := ENTRY_RE.search(line):
            entry = m.group(1)
            row(entry)["kernel"] = True
        elif m := PROPS_RE.search(line):
            props_for = m.group(1)
        elif (m := FRAME_RE.search(line)) and props_for is not None:
            r = row(props_for)
            r["stack"], r["spill_stores"], r["spill_loads"] = map(int, m.groups())
            props_for = None
        elif (m := REGS_RE.search(line)) and entry is not None:
            row(entry)["registers"] = int(m.group(1))
            entry = None
    # Non-kernel functions (not inlined) are listed only when they have a frame or spills.
    return [r for r in rows if r["kernel"] or r["stack"] or r["spill_stores"] or r["spill_loads"]]


def demangle(names: list[str]) -> dict[str, str]:
    if not names or shutil.which("c++filt") is None:
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def spill_table(rows: list[dict]) -> str:
    lines = ["| registers | spill stores (B) | spill loads (B) | stack (B) | file | kernel |",
             "|---:|---:|---:|---:|---|---|"]
    for r in rows:
        regs = r["registers"] if r["registers"] is not None else "-"
        lines.append(f"| {regs} | {r['spill_stores']} | {r['spill_loads']} | {r['stack']} | "
                     f"{r['source']} | {r['pretty']} |")
    return "\n".join(lines)


def check_spills(rows: list[dict], allow: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(spilling kernels allowed, those not in the allowlist, patterns that matched none)."""
    allowed, new, used = [], [], set()
    for r in rows:
        if r["spill_stores"] or r["spill_loads"]:
            matches = [p for p in allow if fnmatch.fnmatchcase(r["pretty"], p)]
            used.update(matches)
            (allowed if matches else new).append(r["pretty"])
    return allowed, new, [p for p in allow if p not in used]


def read_allowlist(path: Path) -> list[str]:
    lines = path.read_text().splitlines() if path.is_file() else []
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / ".build-cuda")
    parser.add_argument("sources", nargs="*", type=Path,
                        help="compile only these CUDA sources (default: every one)")
    parser.add_argument("--force", action="store_true",
                        help="recompile every source (default: reuse unchanged ones' output)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                        help="parallel compiles (default: the CPU count)")
    parser.add_argument("--user-kernels", type=Path, nargs="+", default=[], metavar="DIR",
                        help="also compile these folders' generated CppTarget kernels (their "
                             "spills are the model's: reported, not failed)")
    parser.add_argument("--allowlist", type=Path, default=ROOT / ".ci" / "cuda_spill_allowlist.txt")
    parser.add_argument("--report", type=Path, default=None,
                        help="also write the table here (default: BUILD_DIR/ptxas_report.txt)")
    args = parser.parse_args()

    set_cuda_home()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # -gencode arch=compute_90,code=sm_90
    # Quiet, expected here: no numpy in this venv, no GPU ("No CUDA runtime is found").
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    import torch

    if torch.version.cuda is None:
        sys.exit(f"torch {torch.__version__} is a CPU build: run this with a CUDA build of torch")
    nvcc = nvcc_release(os.environ["CUDA_HOME"])
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), nvcc {nvcc} at "
          f"{os.environ['CUDA_HOME']}, arch {os.environ['TORCH_CUDA_ARCH_LIST']}")
    if nvcc.split(".")[0] != torch.version.cuda.split(".")[0]:
        print(f"warning: nvcc {nvcc} and torch's CUDA {torch.version.cuda} differ in major "
              "version; compiling against torch's headers anyway", file=sys.stderr)

    _build = import_build_module()
    commands = compile_commands(_build, args.build_dir)
    if args.sources:
        wanted = {p.resolve() for p in args.sources}
        unknown = wanted - {Path(s).resolve() for s, _, _ in commands}
        if unknown:
            sys.exit(f"not CUDA sources of the extension: {', '.join(map(str, sorted(unknown)))}")
        commands = [c for c in commands if Path(c[0]).resolve() in wanted]
    user_sources = set()
    if args.user_kernels:
        user = user_kernel_commands(_build, args.user_kernels, args.build_dir)
        user_sources = {s for s, _, _ in user}
        commands += user
    start = time.monotonic()
    failed, rows, reused = [], [], 0
    log_path = args.build_dir / "compile.log"
    with ThreadPoolExecutor(max_workers=args.jobs) as pool, open(log_path, "w") as log:
        jobs = [(s, pool.submit(compile_one, args.build_dir, t, c, args.force))
                for s, t, c in commands]
        for done, (source, job) in enumerate(jobs, 1):
            rc, output, seconds, cpu = job.result()
            name = (os.path.relpath(source, Path(source).parent.parent) if source in user_sources
                    else os.path.relpath(source, ROOT))
            took = (f"{seconds:.0f} s, {cpu:.0f} s CPU" if seconds is not None
                    else "unchanged, not recompiled")
            reused += seconds is None
            status = "ok" if rc == 0 else "FAILED"
            print(f"[{done}/{len(jobs)}] {name}: {status} ({took})", flush=True)
            log.write(f"==== {name} (exit {rc})\n{output}\n")
            if rc != 0:
                failed.append(name)
                print(output, file=sys.stderr)
            else:
                for line in output.splitlines():  # compiler warnings, not ptxas's info lines
                    if "warning" in line and "ptxas info" not in line:
                        print(f"  {line}")
                for r in parse_ptxas(source, output):
                    r["user"] = source in user_sources
                    if r["user"]:
                        r["source"] = name
                    rows.append(r)
    print(f"compiled {len(commands) - reused} CUDA sources ({reused} unchanged, reused) in "
          f"{time.monotonic() - start:.0f} s, {args.jobs} jobs; ptxas's output: "
          f"{os.path.relpath(log_path, ROOT)}")
    if failed:
        print(f"CUDA compile FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1

    names = demangle([r["name"] for r in rows])
    for r in rows:
        r["pretty"] = names[r["name"]]
    rows.sort(key=lambda r: (r["source"], r["pretty"]))
    allow = read_allowlist(args.allowlist)
    table = spill_table(rows)
    report = args.report or args.build_dir / "ptxas_report.txt"
    report.write_text(table + "\n")
    print(table)
    allowed, new, unused = check_spills([r for r in rows if not r["user"]], allow)
    user_spills = [r for r in rows if r["user"] and (r["spill_stores"] or r["spill_loads"])]
    if user_spills:
        print(f"note: {len(user_spills)} user-model kernels spill (the model's registers, "
              "not failed): " + ", ".join(sorted({r["source"] for r in user_spills})))
    kernels = sum(r["kernel"] for r in rows)
    print(f"{kernels} kernels; {len(allowed) + len(new)} spill "
          f"({len(allowed)} allowed by {os.path.relpath(args.allowlist, ROOT)}); "
          f"max registers {max((r['registers'] or 0) for r in rows) if rows else 0}")
    for pattern in unused if not args.sources else []:  # a subset need not show every kernel
        print(f"note: allowlist pattern matches no spilling kernel now (remove it?): {pattern}")
    if kernels == 0:
        print("no ptxas report found: was -Xptxas=-v passed?", file=sys.stderr)
        return 1
    if new:
        print("register spills in kernels that had none (fix them, or add them to the allowlist "
              "with a reason):\n  " + "\n  ".join(new), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
