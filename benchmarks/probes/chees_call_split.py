"""Where a pooled ChEES warm-up's state first depends on how its transitions are split into calls
(tests/unit/test_force_carry.py's question, asked transition by transition). On an H200 it showed
the pooled float32 kernel drifting at k = 3 (k = 2 without step-size adaptation) while one call
run twice was identical: nvcc had contracted the model's arithmetic into FMAs differently at the
force's two call sites. Users' models are now compiled with --fmad=false (_build.USER_CUDA_FLAGS),
after which it finds no difference.

For k = 1 .. 6: the eight-schools CppTarget's pooled ChEES warm-up, one call of k transitions
against k calls of one, from the same start, on the given device and dtype, in variants that
isolate a cause (the test's settings; no mass adaptation; a warm-up long enough that dual averaging
does not restart within the k transitions; no step-size adaptation). Prints which of the op's
in-place tensors differ (the chains' acceptance-probability sums among them: a difference there is
a trajectory that differs, not a sum over chains), and for `chees` each field's two values in hex.

    python3 benchmarks/probes/chees_call_split.py --device cuda --dtype float32
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.unit import test_force_carry as fc  # noqa: E402
from tests.unit._helpers import run_op  # noqa: E402

FIELDS = ["T", "log_T_average", "adam_m", "adam_v", "beta1_power", "beta2_power", "updates", "-"]
VARIANTS = {
    "as the test": {},
    "no mass adaptation": dict(adapt_mass_matrix=False),
    "warm-up of 50": dict(num_warmup=50),
    "no step-size adaptation": dict(adapt_step_size=False),
    "neither adaptation": dict(adapt_step_size=False, adapt_mass_matrix=False),
}


def _run(target, device, dtype, k: int, calls: list[int], variant: dict) -> dict:
    s = fc._state("pooled", device, dtype)
    q, step_size, inv_mass = s.pop("q"), s.pop("step_size"), s.pop("inv_mass")
    f64 = dict(dtype=torch.float64, device=device)
    s.update(accept_prob_sum=torch.zeros(fc.CHAINS, **f64),
             accept_count=torch.zeros(fc.CHAINS, dtype=torch.int64, device=device))
    name, tensors = target.op_name(dtype, q.device), target.op_tensors(dtype, q.device)
    options = dict(warmup_start=0, num_warmup=k, windows=[2, 2, 2], target_accept=0.651,
                   adapt_step_size=True, adapt_mass_matrix=True)
    options.update(variant)
    first = 0
    for n in calls:
        run_op(q, name, tensors, target.op_scalars(), step_size, inv_mass, 0.0, 3 * fc.STEPS,
               fc.SEED, 0, first, n, **s, **options)
        first += n
    return dict(q=q, step_size=step_size, inv_mass=inv_mass, **s)


def _differ(a: dict, b: dict) -> list[str]:
    return [key for key in a if key != "gradient_evaluations"
            and not torch.equal(a[key].cpu(), b[key].cpu())]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument("--max-k", type=int, default=fc.TRANSITIONS)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    from fused_hmc import CppTarget

    target = CppTarget(fc.SOURCE, fc.DIM, data=fc.data(), names=fc.NAMES, log_prob=fc.log_prob)
    for label in args.variants:
        print(f"== {args.device} {args.dtype}: {label}", flush=True)
        for k in range(1, args.max_k + 1):
            together = _run(target, args.device, dtype, k, [k], VARIANTS[label])
            apart = _run(target, args.device, dtype, k, [1] * k, VARIANTS[label])
            differ = _differ(together, apart)
            again = _differ(together, _run(target, args.device, dtype, k, [k], VARIANTS[label]))
            line = f"k={k}: differ {differ}; one call run twice differs in {again}"
            if args.device != "cpu":  # which of the two the CPU build's runs agree with
                cpu = _run(target, "cpu", dtype, k, [k], VARIANTS[label])
                line += (f"; the CPU differs from one call in {_differ(together, cpu)}, "
                         f"from {k} calls in {_differ(apart, cpu)}")
            print(line, flush=True)
            if "accept_prob_sum" in differ:
                gap = (together["accept_prob_sum"] - apart["accept_prob_sum"]).abs()
                print(f"   chains whose acceptance sums differ: {gap.nonzero().flatten().tolist()}"
                      f" (largest gap {gap.max().item():.3g})")
            if "chees" in differ:
                for field, a, b in zip(FIELDS, together["chees"].tolist(),
                                       apart["chees"].tolist()):
                    mark = "" if a == b else "   <-"
                    print(f"   {field:14s} {a.hex():>24s} {b.hex():>24s}{mark}")
                break


if __name__ == "__main__":
    main()
