"""Where a pooled ChEES warm-up's state first depends on how its transitions are split into calls
(issue 32: tests/unit/test_force_carry.py's pooled float32 case fails on CUDA only).

For k = 1 .. 6: the eight-schools CppTarget's pooled ChEES warm-up, one call of k transitions
against k calls of one, from the same start, on the given device and dtype; prints which of the
op's in-place tensors differ and, for `chees`, each field's two values in hex.

    python3 benchmarks/probes/chees_call_split.py --device cuda --dtype float32
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.unit import test_force_carry as fc  # noqa: E402

FIELDS = ["T", "log_T_average", "adam_m", "adam_v", "beta1_power", "beta2_power", "updates", "-"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    from fused_hmc import CppTarget

    target = CppTarget(fc.SOURCE, fc.DIM, data=fc.data(), names=fc.NAMES, log_prob=fc.log_prob)
    for k in range(1, fc.TRANSITIONS + 1):
        saved = fc.TRANSITIONS
        fc.TRANSITIONS = k  # _run reads it for num_warmup
        together = fc._run(target, "pooled", args.device, dtype, [k])
        apart = fc._run(target, "pooled", args.device, dtype, [1] * k)
        fc.TRANSITIONS = saved
        differ = [key for key in together if key != "gradient_evaluations"
                  and not torch.equal(together[key], apart[key])]
        print(f"k={k}: differ {differ}", flush=True)
        if "chees" in differ:
            for name, a, b in zip(FIELDS, together["chees"].tolist(), apart["chees"].tolist()):
                mark = "" if a == b else "   <-"
                print(f"   {name:14s} {a.hex():>24s} {b.hex():>24s}{mark}")
            break


if __name__ == "__main__":
    main()
