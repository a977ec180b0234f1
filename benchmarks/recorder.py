"""Records run.py's measurements: runs a point unless it is unavailable or would overrun its
section's cap, records it or the reason it was skipped (or failed), saves the JSON."""
from __future__ import annotations

import gc
import shlex
import sys
import time
import traceback

import torch

import methods as M
from timing import environment, package_versions, save

RESULT_NAME = "bench_suite.json"
EPS = 0.1
JAX_ANCHORS = {"JAX lax.scan": "jax_scan", "BlackJAX vmap+scan": "blackjax_scan",
               "NumPyro HMC kernel, vmap+scan": "numpyro_kernel_scan",
               "NumPyro vectorized": "numpyro_vectorized"}  # the last: MCMC.run, see anchors_jax


class Suite:
    """Measures points, records them (or why they were skipped) and saves the JSON."""

    def __init__(self, args, plan: dict, config: dict):
        self.args, self.plan = args, plan
        self.ctx = M.Ctx(args.device, EPS, args.rotate)
        self.records: list[dict] = []
        self.skipped: list[dict] = []
        self.cost: dict[tuple, tuple[float, int]] = {}  # (kind, method) -> (wall s, L)
        self.jax_problem = None if not args.no_jax else "--no-jax"
        self.result = {"environment": environment("python " + shlex.join(sys.argv)),
                       "config": {"eps": EPS, "center": {k: plan[k] for k in "BdL"},
                                  "device": args.device, "smoke": args.smoke,
                                  "inputs_rotated": args.rotate, "budget_s": args.budget,
                                  "plan": plan, **config},
                       "ceilings": {}, "sections": {}, "records": self.records,
                       "skipped": self.skipped}
        self.result["environment"]["packages"] = package_versions(
            ["torch", "jax", "jaxlib", "blackjax", "numpyro", "arviz-stats"])

    # --- one point -----------------------------------------------------------------------------
    def point(self, section, kind: str, method: str, B: int, d: int, L: int, measure,
              predicted: float | None = None) -> dict | None:
        where = dict(kind=kind, method=method, B=B, d=d, L=L, section=section.name)
        reason = self._unavailable(method)
        if reason is None:
            guess = self._predict(kind, method, L) if predicted is None else predicted
            if not section.allows(guess):
                reason = f"time cap: ~{guess:.0f}s predicted, {max(section.left(), 0):.0f}s left"
        if reason:
            section.skipped += 1
            self.skipped.append({**where, "reason": reason})
            print(f"  skip {method:<44} B={B:<8} d={d:<5} L={L:<4} ({reason})", flush=True)
            return None
        start = time.perf_counter()
        try:
            info = measure()
        except Exception as exc:  # noqa: BLE001 - a point that fails is recorded, the run goes on
            section.skipped += 1
            self.skipped.append({**where, "reason": f"error: {type(exc).__name__}: {exc}"[:400]})
            print(f"  FAIL {method} B={B} d={d} L={L}: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(limit=3)
            self._cleanup()
            return None
        wall = time.perf_counter() - start
        self.cost[kind, method] = (wall, L)
        family = ("fused_hmc" if method.startswith("fused_hmc")
                  else "floor" if method.startswith("floor") else "anchor")
        record = {**where, "family": family, **info, "wall_s": round(wall, 3)}
        self.records.append(record)
        ess = ("ESS/s", info.get("ess_per_second", float("nan")))
        unit, value = {"run": ("s/run", info["seconds"]), "ess": ess, "ess_warmup": ess}.get(
            kind, ("us/transition", info["seconds"] * 1e6))
        print(f"  {method:<49} B={B:<8} d={d:<5} L={L:<4} {value:>12.4g} {unit}"
              f"  ({wall:.1f}s)", flush=True)
        self._cleanup()
        return record

    def _predict(self, kind: str, method: str, L: int) -> float:
        """The method's last point's wall time (compile time grows with the unrolled L)."""
        wall, last_L = self.cost.get((kind, method), (0.5, L))
        if method.startswith("torch.compile"):
            return wall * max(1.0, L / max(last_L, 1)) ** 0.5  # the unrolled loop grows
        return wall

    def _unavailable(self, method: str) -> str | None:
        if "CUDA graph" in method or "reduce-overhead" in method:
            if not self.ctx.cuda:
                return "needs CUDA (skipped in CPU smoke mode)"
        if method.startswith("torch.compile") and self.args.smoke and not self.args.compile:
            return "torch.compile skipped in smoke mode (pass --compile to include it)"
        if method.startswith(("JAX", "BlackJAX", "NumPyro")):
            return self._jax_unavailable(method)
        return None

    def _jax_unavailable(self, method: str) -> str | None:
        if self.jax_problem is None:
            try:
                import jax

                backend = jax.default_backend()
                self.result["environment"]["jax_backend"] = backend
                if self.ctx.cuda and backend not in ("gpu", "cuda"):
                    self.jax_problem = f"JAX runs on {backend}, not the GPU"
                else:
                    self.jax_problem = ""
            except Exception as exc:  # noqa: BLE001
                self.jax_problem = f"JAX unavailable: {type(exc).__name__}: {exc}"
        if self.jax_problem:
            return self.jax_problem
        module = {"BlackJAX": "blackjax", "NumPyro": "numpyro"}.get(method.split()[0])
        if module:
            try:
                __import__(module)
            except Exception as exc:  # noqa: BLE001
                return f"{module} unavailable: {type(exc).__name__}: {exc}"
        return None

    def _cleanup(self) -> None:
        gc.collect()
        if self.ctx.cuda:
            torch.cuda.empty_cache()

    def save(self, budget) -> None:
        self.result["sections"] = budget.report
        self.result["elapsed_s"] = round(budget.elapsed(), 1)
        for path in save(self.result, RESULT_NAME, self.args.results_dir):
            print(f"  saved {path}", flush=True)

    # --- measurements --------------------------------------------------------------------------
    def per_transition(self, section, method: str, B: int, d: int, L: int):
        if method in JAX_ANCHORS:
            T = self._scan_length(method, B, d, L)
            return self.point(section, "per_transition", method, B, d, L,
                              lambda: self._jax_run(method, B, d, L, T, per_transition=True))
        return self.point(section, "per_transition", method, B, d, L,
                          lambda: M.per_transition(method, self.ctx, B, d, L))

    def _jax_run(self, method: str, B: int, d: int, L: int, T: int, per_transition: bool) -> dict:
        import anchors_jax

        repeats = 1 if method == "NumPyro vectorized" else 3
        seconds = getattr(anchors_jax, JAX_ANCHORS[method])(B, d, L, EPS, T, repeats=repeats)
        mode = ("MCMC.run: compile, run, collect draws; host clock" if method == "NumPyro vectorized"
                else "one jitted call of T transitions, host clock")
        info = {"mode": mode, "transitions_per_call": T}
        return {"seconds": seconds / T if per_transition else seconds, **info}

    def _scan_length(self, method: str, B: int, d: int, L: int) -> int:
        """T so that a scan anchor's call lasts ~0.1 s, predicted from its centre point."""
        c = self.plan
        centre = [r for r in self.records if r["method"] == method and r["kind"] == "run"]
        per = centre[0]["seconds"] / c["T"] if centre else 1e-3
        per *= max(1.0, B * d * L / (c["B"] * c["d"] * c["L"]))
        return max(5, min(200, round((0.02 if self.args.smoke else 0.1) / per)))
