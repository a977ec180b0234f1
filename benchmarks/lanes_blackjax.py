"""bench_lanes.py's BlackJAX side: one process per dtype (float64 needs jax_enable_x64 before any
array exists), started beside the nvcc builds so that XLA compiles while they run.

BlackJAX 1.7.1 ChEES as bench_chees runs it: ``chees_adaptation(mass_matrix_estimation=
"diagonal")`` (target acceptance 0.651, initial step size 0.1, Adam(0.025)), then the vmapped
``dynamic_hmc`` step in a ``lax.scan``. float32 matrix products at full float32 precision
(``jax_default_matmul_precision="highest"``: XLA's default on this GPU is TF32, which fused_hmc
does not use and which would fail the value check).

The process compiles every function ahead of time (``jit(...).lower(...).compile()``), prints
``{"event": "ready"}`` and then answers one JSON line per command line on stdin:
- ``{"do": "rate", "model": m, "inputs": npz}``: the value check (the JAX log density against the
  TorchModel's compiled one at the npz's points: worst |jax - torch| / max(|torch|, 1)), then the
  gradient rate: warm-up (``--warmup`` transitions, untimed), sampling (``--transitions``) run
  once untimed and timed the second time; gradient evaluations per second = the sampling's
  integration steps summed over transitions and chains (its mean steps x transitions x chains) /
  its wall time.
- ``{"do": "ess", "model": m, "inputs": npz}``: warm-up + draws in one compiled call from the npz's
  starts, timed once (compiled ahead, so no compilation is timed), the draws' ESS (lanes_ess).
- ``{"do": "quit"}``.
The npz holds, per model, ``<m>/points`` and ``<m>/values`` (the check) and ``<m>/starts``
[chains, dim] (Stan's uniform(-2, 2)).

    python benchmarks/lanes_blackjax.py --dtype f64 --models earnings,diamonds --chains 4096
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET_ACCEPT, STEP_SIZE, LEARNING_RATE = 0.651, 0.1, 0.025
TOLERANCE = {"f32": 1e-5, "f64": 1e-10}


class Compiled:
    """One model's compiled functions at `chains` chains."""

    def __init__(self, model, dtype: str, chains: int, warmup: int, transitions: int,
                 ess: tuple[int, int] | None):
        import blackjax as bj
        import jax
        import optax

        np_dtype = np.float32 if dtype == "f32" else np.float64
        logdensity = model.jax(model.data, np_dtype)
        self.check = jax.jit(jax.vmap(logdensity))
        fns = {}  # the kernel's step-count functions, which chees_adaptation makes per run

        def adapt(key, q0, steps):
            warm = bj.chees_adaptation(logdensity, chains, target_acceptance_rate=TARGET_ACCEPT,
                                       mass_matrix_estimation="diagonal")
            (states, params), _ = warm.run(key, q0, step_size=STEP_SIZE,
                                           optim=optax.adam(LEARNING_RATE), num_steps=steps)
            fns["next"], fns["steps"] = params["next_random_arg_fn"], params["integration_steps_fn"]
            return states, (params["step_size"], params["inverse_mass_matrix"],
                            params["integration_steps_params"])

        def sample(key, states, tuned, transitions):
            step_size, inverse_mass, steps_params = tuned
            kernel = bj.dynamic_hmc(logdensity, step_size=step_size,
                                    inverse_mass_matrix=inverse_mass,
                                    next_random_arg_fn=fns["next"],
                                    integration_steps_fn=fns["steps"],
                                    integration_steps_params=steps_params).step

            def one(states, key):
                states, info = jax.vmap(kernel)(jax.random.split(key, chains), states)
                return states, (states.position, info.num_integration_steps)

            # (the last states, (positions, steps)): the rate keeps the last states, so that XLA
            # cannot drop the trajectories (the step counts alone do not depend on them)
            return jax.lax.scan(one, states, jax.random.split(key, transitions))

        key = jax.random.key(0)
        q0 = jax.ShapeDtypeStruct((chains, model_dim(model)), np_dtype)
        self.warm = jax.jit(lambda k, q: adapt(k, q, warmup)).lower(key, q0).compile()
        states, tuned = jax.eval_shape(lambda k, q: adapt(k, q, warmup), key, q0)
        def rate_run(k, s, t):
            last, (_, steps) = sample(k, s, t, transitions)
            return last.position, steps

        self.sample = jax.jit(rate_run).lower(key, states, tuned).compile()
        self.transitions = transitions
        self.ess = None
        if ess is not None:
            def whole(k, q):
                k_warm, k_sample = jax.random.split(k)
                states, tuned = adapt(k_warm, q, ess[0])
                return sample(k_sample, states, tuned, ess[1])[1][0]

            self.ess = jax.jit(whole).lower(key, q0).compile()

    def rate(self, starts: np.ndarray) -> dict:
        import jax

        states, tuned = jax.block_until_ready(self.warm(jax.random.key(1), starts))
        jax.block_until_ready(self.sample(jax.random.key(2), states, tuned))  # first run untimed
        start = time.perf_counter()
        _, steps = jax.block_until_ready(self.sample(jax.random.key(3), states, tuned))
        wall = time.perf_counter() - start
        chains, steps = starts.shape[0], np.asarray(steps)
        return {"chains": chains, "transitions": self.transitions, "sampling_s": wall,
                "mean_integration_steps": float(steps.mean()),
                "gradients_per_second": float(steps.sum()) / wall,
                "step_size": float(np.asarray(tuned[0]))}


def model_dim(model) -> int:
    from fused_hmc.torch_model import Parameters

    return Parameters(model.params).dim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=list(TOLERANCE), required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--chains", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--transitions", type=int, default=50)
    parser.add_argument("--ess", type=int, nargs=2, default=None, metavar=("WARMUP", "DRAWS"))
    parser.add_argument("--rows", type=int, default=None, help="synthetic data rows (bench_lanes)")
    args = parser.parse_args()
    import jax

    if args.dtype == "f64":
        jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_default_matmul_precision", "highest")
    import lanes_ess
    import lanes_models

    start = time.perf_counter()
    models, compiled = {}, {}
    for name in args.models.split(","):
        models[name] = lanes_models.make(name, args.rows)
        compiled[name] = Compiled(models[name], args.dtype, args.chains, args.warmup,
                                  args.transitions, tuple(args.ess) if args.ess else None)
    emit({"event": "ready", "compile_s": time.perf_counter() - start,
          "device": str(jax.devices()[0]), "jax": jax.__version__})
    for line in sys.stdin:
        command = json.loads(line)
        if command["do"] == "quit":
            return
        name = command["model"]
        inputs = np.load(command["inputs"])
        dtype = np.float32 if args.dtype == "f32" else np.float64
        starts = inputs[f"{name}/starts"].astype(dtype)
        try:
            if command["do"] == "rate":
                points, values = inputs[f"{name}/points"].astype(dtype), inputs[f"{name}/values"]
                jax_values = np.asarray(compiled[name].check(points), dtype=np.float64)
                worst = float(np.max(np.abs(jax_values - values) / np.maximum(np.abs(values), 1)))
                out = {"check_worst_relative": worst,
                       "check_passed": bool(worst <= TOLERANCE[args.dtype])}
                out |= compiled[name].rate(starts)
            else:
                key = jax.random.key(4)
                begin = time.perf_counter()
                positions = np.asarray(jax.block_until_ready(compiled[name].ess(key, starts)))
                wall = time.perf_counter() - begin
                out = lanes_ess.ess_summary(models[name], np.transpose(positions, (1, 0, 2)), wall)
        except Exception as exc:  # noqa: BLE001 - the parent records the failure and goes on
            out = {"error": repr(exc)}
        emit({"event": command["do"], "model": name} | out)


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
