"""Shared test fixtures: one device-generic test body runs on every available device."""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, settings

# Property tests draw the same examples on every run (derandomized, no example database), so CI is
# deterministic; a failure prints the example to reproduce it.
settings.register_profile("fused_hmc", derandomize=True, database=None, deadline=None,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("fused_hmc")


def _cuda_ready() -> bool:
    if not torch.cuda.is_available():
        return False
    from fused_hmc._build import has_cuda_kernels

    return has_cuda_kernels()


CUDA_READY = _cuda_ready() if torch.cuda.is_available() else False
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU and fused_hmc's CUDA kernels")
    for item in items:
        if "cuda" in item.keywords and not CUDA_READY:
            item.add_marker(skip)


@pytest.fixture(params=[pytest.param(d, marks=[pytest.mark.cuda] if d == "cuda" else [])
                        for d in DEVICES])
def device(request) -> torch.device:
    """Every available device: cpu always, cuda (marked `cuda`) where there is a GPU."""
    return torch.device(request.param)
