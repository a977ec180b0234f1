"""Diagnose: raising an argument error from the extension, per device and entry point."""
import sys

import torch

import fused_hmc
from fused_hmc import ops

device, entry = sys.argv[1], sys.argv[2]
fused_hmc.load_extension()
q = torch.randn(3, device=device)  # wrong rank
mu = torch.zeros(3, device=device)
try:
    if entry == "ops":
        torch.ops.fused_hmc.hmc_step.default(q, mu, 0.1, 10, "philox", None, None, 0)
    elif entry == "noise":
        torch.ops.fused_hmc.hmc_step_noise.default(q, mu, q, q, 0.1, 10)
    elif entry == "philox":
        torch.ops.fused_hmc.philox4x32.default(torch.zeros(3, 3, dtype=torch.int32, device=device), 1)
    else:
        ops.hmc_step(q, mu, 0.1, 10, "philox")
except (ValueError, TypeError) as exc:
    print(device, entry, "OK:", type(exc).__name__, str(exc).splitlines()[0])
