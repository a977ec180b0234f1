"""Wall time to a correct answer (issue 14 item 6, issue 15 item 5): fused_hmc, BlackJAX and
NumPyro on posteriordb's diamonds and eight schools.

A correct answer is the test suite's: every reported parameter's mean and mean of the square
within the Bonferroni-corrected Monte Carlo error of posteriordb's reference (family-wise alpha
1e-6), and the largest split R-hat below 1.01 (bench_chees.verdict). Each sampler climbs one
ladder of run lengths, (warm-up, draws) = LADDER, and stops at the first rung whose draws are
correct; its time to a correct answer is that rung's wall time (warm-up and sampling together,
timed after an untimed run of the same size that compiles everything). A sampler that is not
correct at the last rung, or whose rungs pass --time-cap seconds, reports "not reached".

Samplers (each with the chain count it is run at, --chains-* override them):
- fused_hmc, the model's hand-written gradient, float32, two ways (bench_chees.fused): Stan's
  warm-up per chain with L = 8 and step jitter 0.2 (`fused_hmc_per_chain`), and in-kernel ChEES
  pooled over all chains (`adapt_trajectory_length=True`: target acceptance 0.651, Stan's windows,
  diagonal mass; `fused_hmc_chees`);
- BlackJAX 1.7.1: `chees_adaptation(mass_matrix_estimation="diagonal")` + `dynamic_hmc`, float32
  (bench_chees.blackjax);
- NumPyro: NUTS (target acceptance 0.8, diagonal mass, Stan's windows, max tree depth 10), its
  chains vectorized (`chain_method="vectorized"`), float32, from the model's log density.
All start as Stan does (uniform in [-2, 2]) and get the same log density. Diamonds is the model
library's default QR form (models/diamonds.py); `--direct` samples its coefficients b instead.

    python benchmarks/prebuild_models.py diamonds:hand:f32 eight_schools:hand:f32   # on the GPU
    python benchmarks/bench_time_to_answer.py [--targets diamonds eight_schools] [--out f.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_chees  # noqa: E402  (after the path)

LADDER = ((250, 250), (500, 500), (1000, 1000), (2000, 2000))
DRY_LADDER = ((30, 10), (60, 20))  # FUSED_HMC_BENCH_DEVICE=cpu: a dry run of the script
TIME_CAP = 120.0  # seconds of timed runs per sampler and target (--time-cap)
CHAINS = {"fused_hmc_per_chain": 4096, "fused_hmc_chees": 4096, "blackjax": 512, "numpyro": 128}


def numpyro_nuts(problem: bench_chees.Problem, chains: int, warmup: int, draws: int) -> dict:
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS

    logdensity = problem.jax_logdensity()
    kernel = NUTS(potential_fn=lambda x: -logdensity(x), target_accept_prob=0.8)
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=draws, num_chains=chains,
                chain_method="vectorized", progress_bar=False)
    q0 = jnp.asarray(problem.starts(chains).float().numpy())

    def run(seed):
        start = time.perf_counter()
        mcmc.run(jax.random.key(seed), init_params=q0, extra_fields=("num_steps",))
        jax.block_until_ready(mcmc.get_samples())
        return time.perf_counter() - start

    run(1)  # compiles
    wall = run(2)
    x = np.asarray(mcmc.get_samples(group_by_chain=True), dtype=np.float64)  # [chain, draw, d]
    steps = int(np.asarray(mcmc.get_extra_fields()["num_steps"]).sum())
    # Only the sampling phase's gradients are counted: NumPyro keeps no warm-up step counts.
    return bench_chees.summarise(problem, x, wall, steps) | {"gradients_counted": "sampling"}


def climb(name: str, run_rung, ladder, time_cap: float) -> dict:
    """Runs the ladder's rungs until one is correct or time_cap seconds of timed runs are
    passed."""
    rungs, spent = [], 0.0
    for warmup, draws in ladder:
        try:
            row = run_rung(warmup, draws)
        except Exception as exc:  # noqa: BLE001 - report the sampler's failure, go on
            rungs.append({"warmup": warmup, "draws": draws, "error": repr(exc)})
            break
        rungs.append({"warmup": warmup, "draws": draws} | row)
        spent += row["wall_s"]
        print(f"  {name} {warmup}+{draws}: {row['wall_s']:.2f} s, correct={row.get('correct')}, "
              f"worst z {row.get('worst_posteriordb_z', float('nan')):.1f}, "
              f"R-hat {row['max_rhat']:.3f}", flush=True)
        if row.get("correct") or spent > time_cap:
            break
    hit = next((r for r in rungs if r.get("correct")), None)
    return {"time_to_correct_s": hit["wall_s"] if hit else None,
            "rung": [hit["warmup"], hit["draws"]] if hit else None, "rungs": rungs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", default=["diamonds", "eight_schools"],
                        choices=["diamonds", "eight_schools"])
    parser.add_argument("--samplers", nargs="+", default=list(CHAINS), choices=list(CHAINS))
    for sampler, chains in CHAINS.items():
        parser.add_argument(f"--chains-{sampler.replace('_', '-')}", type=int, default=chains)
    parser.add_argument("--direct", action="store_true",
                        help="diamonds in its coefficients b (models.diamonds(qr=False))")
    parser.add_argument("--time-cap", type=float, default=TIME_CAP,
                        help="seconds of timed runs after which a sampler climbs no further")
    parser.add_argument("--out", default=None, help="a JSON file for the results")
    args = parser.parse_args()
    ladder = DRY_LADDER if bench_chees.DEVICE == "cpu" else LADDER
    results = {}
    for target in args.targets:
        direct = target == "diamonds" and args.direct
        problem = bench_chees.Problem(target, **({"qr": False} if direct else {}))
        block = {}
        for sampler in args.samplers:
            chains = getattr(args, f"chains_{sampler}")
            run_rung = {
                "fused_hmc_per_chain": lambda w, n, c=chains: bench_chees.fused(
                    problem, c, w, n, torch.float32, warmup_alone=False, chees=False),
                "fused_hmc_chees": lambda w, n, c=chains: bench_chees.fused(
                    problem, c, w, n, torch.float32, warmup_alone=False),
                "blackjax": lambda w, n, c=chains: bench_chees.blackjax(problem, c, w, n),
                "numpyro": lambda w, n, c=chains: numpyro_nuts(problem, c, w, n),
            }[sampler]
            print(f"{target}: {sampler}, {chains} chains", flush=True)
            block[sampler] = {"chains": chains} | climb(sampler, run_rung, ladder, args.time_cap)
        results[target + ("_direct" if direct else "")] = block
    print(f"\n{'target':16s} {'sampler':19s} {'chains':>6s} {'rung':>11s} {'time s':>8s} "
          f"{'worst z':>8s} {'R-hat':>6s}")
    for target, block in results.items():
        for sampler, r in block.items():
            last = r["rungs"][-1] if r["rungs"] else {}
            rung = "x".join(map(str, r["rung"])) if r["rung"] else "not reached"
            t = f"{r['time_to_correct_s']:8.2f}" if r["time_to_correct_s"] else f"{'-':>8s}"
            print(f"{target:16s} {sampler:19s} {r['chains']:6d} {rung:>11s} {t} "
                  f"{last.get('worst_posteriordb_z', float('nan')):8.1f} "
                  f"{last.get('max_rhat', float('nan')):6.3f}")
    if args.out:
        from timing import environment

        with open(args.out, "w") as f:
            json.dump({"environment": environment("python benchmarks/bench_time_to_answer.py"),
                       "device": bench_chees.DEVICE, "ladder": ladder, "results": results},
                      f, indent=1)


if __name__ == "__main__":
    main()
