"""The CI CUDA compile check (.ci/compile_cuda.py): ptxas -v parsing and the spill allowlist.

The compile itself needs a CUDA build of torch and runs in .ci/run; these check, on ptxas output
copied from a real nvcc 13.0 sm_90 build of csrc/cuda, that spills are read right and that only
kernels outside .ci/cuda_spill_allowlist.txt fail the check.
"""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("compile_cuda", ROOT / ".ci" / "compile_cuda.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_ZN9fused_hmc63_GLOBAL__N__db9846d0_24_run_chains_tuned_cuda_cu_84d134ab_1072323run_chains_tuned_kernelIdLi128ELi4EEEvNS_14RunTunedParamsIT_EE' for 'sm_90'
ptxas info    : Function properties for _ZN9fused_hmc63_GLOBAL__N__db9846d0_24_run_chains_tuned_cuda_cu_84d134ab_1072323run_chains_tuned_kernelIdLi128ELi4EEEvNS_14RunTunedParamsIT_EE
    544 bytes stack frame, 1424 bytes spill stores, 1572 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 544 bytes cumulative stack size, 144 bytes smem
ptxas info    : Compile time = 12459.146 ms
ptxas info    : Function properties for _Z9helper_fnPd
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Function properties for _Z10inlined_fnv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_ZN9fused_hmc59_GLOBAL__N__594a65c7_21_warmup_pooled_cuda_cu_84d134ab_896720warmup_pooled_kernelIdLi256ELi1EEEvNS_12WarmupParamsIT_EE' for 'sm_90'
ptxas info    : Function properties for _ZN9fused_hmc59_GLOBAL__N__594a65c7_21_warmup_pooled_cuda_cu_84d134ab_896720warmup_pooled_kernelIdLi256ELi1EEEvNS_12WarmupParamsIT_EE
    400 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 156 registers, used 1 barriers, 400 bytes cumulative stack size, 160 bytes smem
"""


def test_parse_ptxas_reads_registers_spills_and_stack(tool):
    rows = {r["name"]: r for r in tool.parse_ptxas("csrc/cuda/x.cu", PTXAS_LOG)}
    tuned = rows["_ZN9fused_hmc63_GLOBAL__N__db9846d0_24_run_chains_tuned_cuda_cu_84d134ab_"
                 "1072323run_chains_tuned_kernelIdLi128ELi4EEEvNS_14RunTunedParamsIT_EE"]
    assert (tuned["kernel"], tuned["registers"], tuned["spill_stores"], tuned["spill_loads"],
            tuned["stack"], tuned["source"]) == (True, 255, 1424, 1572, 544, "x.cu")
    pooled = next(r for n, r in rows.items() if "warmup_pooled" in n)
    assert (pooled["registers"], pooled["spill_stores"], pooled["stack"]) == (156, 0, 400)
    # A non-inlined device function is listed for its frame; one with nothing to report is not.
    assert rows["_Z9helper_fnPd"]["kernel"] is False and rows["_Z9helper_fnPd"]["stack"] == 16
    assert "_Z10inlined_fnv" not in rows and len(rows) == 3


def row(pretty, stores=0, loads=0):
    return {"pretty": pretty, "spill_stores": stores, "spill_loads": loads}


ANON = "void fused_hmc::(anonymous namespace)::"
CHAIN = "void fused_hmc::chain_kernels::"
POOLED = "void fused_hmc::pooled_warmup::"


def _kernel(prefix, name, target, group, chunks, params, *flags):
    """A demangled name as ptxas prints it, with the kernel's flags after the shape (the sampling
    kernel's unit mass; the warm-up kernels' dense mass)."""
    flag = "".join(f", {str(f).lower()}" for f in flags)
    return (f"{prefix}{name}<fused_hmc::{target}, {group}, {chunks}{flag}>(fused_hmc::{target}, "
            f"fused_hmc::{params})")


def test_allowlist_admits_only_the_known_spilling_kernels(tool):
    """The allowlist names the float64 four-chunk shapes of the chain kernels on the built-in
    Gaussians (templates over the Target since issue 13); float32, one-chunk shapes (a dense
    mass's too), compiled user targets and the transition kernel are not admitted."""
    allow = tool.read_allowlist(ROOT / ".ci" / "cuda_spill_allowlist.txt")
    known = [_kernel(CHAIN, "sampling_kernel", "DiagonalGaussian<double>", 128, 4,
                     "SamplingParams<double>", False),
             _kernel(CHAIN, "sampling_kernel", "StandardGaussian<double>", 256, 4,
                     "SamplingParams<double>", True),
             _kernel(CHAIN, "warmup_per_chain_kernel", "StandardGaussian<double>", 256, 4,
                     "WarmupParams<double>", False),
             _kernel(POOLED, "warmup_pooled_kernel", "DiagonalGaussian<double>", 128, 4,
                     "WarmupParams<double>", False)]
    fresh = [_kernel(CHAIN, "sampling_kernel", "DiagonalGaussian<float>", 256, 4,
                     "SamplingParams<float>", True),
             _kernel(POOLED, "warmup_pooled_kernel", "DenseGaussian<float>", 256, 4,
                     "WarmupParams<float>", False),
             _kernel(POOLED, "warmup_pooled_kernel", "DiagonalGaussian<float>", 32, 1,
                     "WarmupParams<float>", True),
             _kernel(CHAIN, "sampling_kernel", "DiagonalGaussian<double>", 128, 1,
                     "SamplingParams<double>", False),
             _kernel(CHAIN, "sampling_kernel", "ChainTarget<double>", 1, 4,
                     "SamplingParams<double>", False),
             f"{ANON}hmc_transition_kernel<double, (fused_hmc::NoiseSource)0, 128, 4>"
             "(fused_hmc::TransitionParams<double>)"]
    rows = [row(k, 1424, 1572) for k in known] + [row(k, 8, 0) for k in fresh]
    rows.append(row(_kernel(POOLED, "warmup_pooled_kernel", "DiagonalGaussian<double>", 256, 1,
                            "WarmupParams<double>", False)))
    allowed, new, unused = tool.check_spills(rows, allow)
    assert allowed == known and new == fresh
    assert unused == []  # every pattern still stands for a kernel that spills


def test_allowlist_pattern_that_matches_nothing_is_reported(tool):
    allowed, new, unused = tool.check_spills([row("void k<float>()", 0, 4)], ["*other*"])
    assert (allowed, new, unused) == ([], ["void k<float>()"], ["*other*"])
