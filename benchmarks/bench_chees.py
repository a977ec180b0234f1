"""ChEES side by side (issue 15 item 5): fused_hmc's in-kernel ChEES against BlackJAX 1.7.1's
``chees_adaptation(..., mass_matrix_estimation="diagonal")`` + ``dynamic_hmc`` on the same targets,
chains, starts, warm-up and draw counts.

Targets: an ill-conditioned diagonal Gaussian (d = 64, mean linspace(-3, 3), sd logspace 0.01 ..
100, chains started at N(0, I); for fused_hmc a CppTarget with its gradient written out, as a user
would bring it, so both samplers get a log density function), eight schools (posteriordb's non-centred form) and diamonds
(brms linear regression, 26 parameters, 5,000 rows), the models started as Stan does (uniform in
[-2, 2]).

Both samplers: target acceptance 0.651, initial step size 0.1, one step size, diagonal inverse mass
and trajectory length for all chains adapted over `warmup` transitions, then `draws` draws kept.
fused_hmc: ``sample(..., adapt_trajectory_length=True)`` (initial length num_leapfrog_steps *
step_size = 1.0, at most 1000 steps; dual averaging with Stan's windows; trajectory jitter from
each chain's philox stream), the chains in the fused kernels. BlackJAX: Adam(0.025) on log T, its
Halton jitter, the diagonal mass from the last half of warm-up, as its documentation runs it
(warm-up by ``run``, sampling a ``lax.scan`` of the vmapped ``dynamic_hmc`` step, the two in one
``jax.jit``, timed after a compiling call, so that no tracing or compilation is timed).

Reported per sampler: wall time of warm-up + sampling together (after one untimed run that compiles
everything; for fused_hmc also the warm-up's alone, from a run keeping one draw), gradient evaluations as each implementation spends them (fused_hmc: the kernel's count, L per
transition plus one per kernel call, the chains carrying the gradient at their state across
transitions; BlackJAX: L per transition plus one per chain, its state caching the gradient, from
its info's num_integration_steps), the smallest bulk ESS over the
reported parameters (arviz-stats, on the first ESS_CHAINS chains, scaled to all chains: the chains
are exchangeable), ESS per gradient evaluation and per second, the adapted step size and
trajectory length, and the worst |mean - reference| / reference sd (exact for the Gaussian,
posteriordb for the models).

    python benchmarks/prebuild_models.py eight_schools:hand:f32 diamonds:hand:f32   # on the GPU
    python benchmarks/bench_chees.py [--targets gaussian64 eight_schools diamonds] [--no-jax]
    python benchmarks/bench_chees.py --targets diamonds --starts reference   # near the posterior
    FUSED_HMC_BENCH_DEVICE=cpu python benchmarks/bench_chees.py --no-jax   # a CPU dry run

The CPU dry run uses tiny sizes (--chains etc. still override them) and skips nothing else.
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
DEVICE = os.environ.get("FUSED_HMC_BENCH_DEVICE", "cuda")  # "cpu": a dry run of this script
sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET_ACCEPT, STEP_SIZE, INITIAL_STEPS, MAX_STEPS = 0.651, 0.1, 10, 1000
ESS_CHAINS = 256
# (chains, warm-up, draws) per target on the GPU, and for the CPU dry run.
SIZES = {"gaussian64": (4096, 1000, 1000), "eight_schools": (4096, 1000, 1000),
         "diamonds": (512, 1000, 1000)}
DRY_SIZES = {"gaussian64": (16, 200, 50), "eight_schools": (16, 200, 50),
             "diamonds": (4, 30, 10)}


# The Gaussian as a user's C++ target (TARGETS.md), its gradient written out.
GAUSSIAN_SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) {
  T lp = 0.0;
  for (int64_t j = 0; j < data.mean_size; ++j) {
    const T z = (x[j] - data.mean[j]) * data.inv_scale[j];
    lp -= 0.5 * z * z;
  }
  return lp;
}

template <typename T, typename Data>
FUSED_HMC_HD T log_density_and_gradient(const T* x, T* grad, const Data& data) {
  T lp = 0.0;
  for (int64_t j = 0; j < data.mean_size; ++j) {
    const T z = (x[j] - data.mean[j]) * data.inv_scale[j];
    lp -= 0.5 * z * z;
    grad[j] = -z * data.inv_scale[j];
  }
  return lp;
}
"""


class Problem:
    """A target for both samplers: fused_hmc's target, a JAX log density, the starts, the
    reported parameters and their reference means and sds."""

    def __init__(self, name: str, starts: str = "stan", **model_options):
        """starts: "stan" (the Gaussian's N(0, I); a model's uniform on [-2, 2]) or "reference"
        (diamonds only: see reference_starts). model_options go to the library model's
        constructor (diamonds' qr=False)."""
        from fused_hmc import CppTarget, models

        if starts not in ("stan", "reference") or (starts == "reference" and name != "diamonds"):
            raise ValueError(f"starts={starts!r}: 'stan', or 'reference' for diamonds")
        self.name, self.start_kind = name, starts
        if name == "gaussian64":
            mean = torch.linspace(-3.0, 3.0, 64, dtype=torch.float64)
            scale = torch.logspace(-2, 2, 64, dtype=torch.float64)
            self.model = None
            self.target = CppTarget(GAUSSIAN_SOURCE, 64, gradient=True,
                                    data={"mean": mean, "inv_scale": 1.0 / scale})
            self.ref_mean, self.ref_sd = mean.numpy(), scale.numpy()
        else:
            from fused_hmc.validation.posteriordb import load_reference

            self.model = getattr(models, name)(**model_options)
            self.target = self.model.target(gradient=True)
            ref = load_reference(self.model.posteriordb)
            self.ref_mean, self.ref_sd = np.asarray(ref.mean), np.asarray(ref.sd)

    @property
    def dim(self) -> int:
        return self.target.dim

    def starts(self, chains: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(0)
        if self.model is None:
            return torch.randn(chains, self.dim, generator=gen, dtype=torch.float64)
        if self.start_kind == "reference":
            return self.reference_starts(chains, gen)
        return self.model.initial_point(chains, generator=gen)

    def reference_starts(self, chains: int, gen: torch.Generator) -> torch.Tensor:
        """Diamonds' chains started near the posterior, as from a Pathfinder-like approximation:
        each constrained parameter drawn independently from N(reference mean, (2 reference sd)^2)
        (sigma's folded to be positive), mapped to the model's coordinates (theta = B^-1 b,
        log sigma). From Stan's uniform starts ChEES strands chains at sigma ~ 10, 80 times the
        posterior's, in both samplers (results/time_to_answer): these starts measure the sampling
        efficiency the comparison is about, not the recovery from far starts."""
        mean = torch.as_tensor(self.ref_mean, dtype=torch.float64)
        sd = torch.as_tensor(self.ref_sd, dtype=torch.float64)
        values = mean + 2.0 * sd * torch.randn(chains, mean.numel(), generator=gen,
                                               dtype=torch.float64)
        K = self.model.data["B"].shape[0]
        theta = torch.linalg.solve(self.model.data["B"], values[:, :K].T).T  # b = theta B^T
        return torch.cat([theta, values[:, K:K + 1], values[:, K + 1:].abs().log()], dim=1)

    def reported(self, x: np.ndarray) -> np.ndarray:
        """Unconstrained draws [chain, draw, d] -> the reported parameters, in the reference's
        order (a model's constrained ones)."""
        if self.model is None:
            return x
        return self.model.constrained_values(torch.from_numpy(x)).numpy()

    def jax_logdensity(self):
        import jax.numpy as jnp

        if self.name == "gaussian64":
            mu = jnp.asarray(self.ref_mean, dtype=jnp.float32)
            scale = jnp.asarray(self.ref_sd, dtype=jnp.float32)
            return lambda x: -0.5 * jnp.sum(((x - mu) / scale) ** 2)
        import jax_models

        return getattr(jax_models, self.name)(self.model.data)


def summarise(problem: Problem, draws: np.ndarray, seconds: float, gradients: int) -> dict:
    """draws [chain, draw, d] unconstrained, float64."""
    from arviz_stats.base import array_stats

    x = problem.reported(draws)
    first = x[:ESS_CHAINS]
    ess = np.asarray(array_stats.ess(first, chain_axis=0, draw_axis=1, method="bulk"))
    ess = ess * x.shape[0] / first.shape[0]  # exchangeable chains: ESS grows with their number
    means = x.reshape(-1, x.shape[-1]).mean(0)
    worst = float(np.max(np.abs(means - problem.ref_mean) / problem.ref_sd))
    min_ess = float(ess.min())
    return {"wall_s": seconds, "gradient_evaluations": int(gradients), "min_bulk_ess": min_ess,
            "ess_per_gradient": min_ess / gradients, "ess_per_second": min_ess / seconds,
            "worst_mean_error_sd": worst} | verdict(problem, first)


def verdict(problem: Problem, x: np.ndarray) -> dict:
    """Is this a correct answer? For a posteriordb model: every reported mean and mean of the
    square within the Bonferroni-corrected Monte Carlo error of the reference (the test suite's
    rule, family-wise alpha 1e-6, validation/posteriordb.py) and the largest rank-normalised split
    R-hat below 1.01 (chains that have not mixed can pass the first with an ESS so small that
    its error bound is wide). x [chain, draw, P] in the reference's order: summarise hands it
    the first ESS_CHAINS chains, the check a run of that many gets (rank-normalised R-hat over
    all 4096 x 1000 x 64 Gaussian draws takes minutes of scipy's rankdata)."""
    from fused_hmc.diagnostics import rhat

    max_rhat = float(np.max(rhat(x)))
    if problem.model is None or problem.model.posteriordb is None:
        return {"max_rhat": max_rhat}
    from fused_hmc.validation.posteriordb import compare_draws

    report = compare_draws(x, problem.model.posteriordb, alpha=1e-6)
    return {"max_rhat": max_rhat, "posteriordb_passed": report.passed,
            "worst_posteriordb_z": float(report.worst.z),
            "correct": bool(report.passed and max_rhat < 1.01)}


def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


# fused_hmc's settings: in-kernel ChEES (pooled over all chains), or, with chees=False, a fixed
# L = 8 with step jitter 0.2 and Stan's warm-up per chain (dual averaging toward 0.8, windows,
# diagonal mass): each chain adapts alone, so one that converges late cannot spoil the others'
# mass matrix, as it can a pooled one.
CHEES = dict(adapt_trajectory_length=True, target_accept=TARGET_ACCEPT, step_size=STEP_SIZE,
             num_leapfrog_steps=INITIAL_STEPS, max_leapfrog_steps=MAX_STEPS)
PER_CHAIN = dict(num_leapfrog_steps=8, jitter=0.2)


def fused(problem: Problem, chains: int, warmup: int, draws: int, dtype: torch.dtype,
          warmup_alone: bool = True, chees: bool = True) -> dict:
    import fused_hmc

    q0 = problem.starts(chains).to(DEVICE, dtype)

    def run(seed, draws=draws):
        _sync()
        start = time.perf_counter()
        res = fused_hmc.sample(q0, draws, target=problem.target, num_warmup=warmup, seed=seed,
                               progress=False, **(CHEES if chees else PER_CHAIN))
        _sync()
        return res, time.perf_counter() - start

    run(1)  # compiles the target and loads everything
    res, wall = run(2)
    gradients = res.warmup_gradient_evaluations + res.sampling_gradient_evaluations
    out = summarise(problem, res.samples.double().cpu().numpy(), wall, gradients)
    if warmup_alone:  # where the time goes: the warm-up (and one draw) alone
        out["warmup_wall_s"] = run(2, draws=1)[1]
    return out | {"warmup_gradient_evaluations": res.warmup_gradient_evaluations,
                  "step_size": float(res.step_size[0]),
                  "trajectory_length": res.trajectory_length,
                  "accept": float(res.mean_accept_prob.mean())}


def blackjax(problem: Problem, chains: int, warmup: int, draws: int) -> dict:
    import blackjax as bj
    import jax
    import optax
    from blackjax.adaptation.base import get_filter_adapt_info_fn

    logdensity = problem.jax_logdensity()
    q0 = jax.numpy.asarray(problem.starts(chains).float().numpy())

    def go(key):  # warm-up and sampling, one jitted computation
        k_warm, k_sample = jax.random.split(key)
        warm = bj.chees_adaptation(logdensity, chains, target_acceptance_rate=TARGET_ACCEPT,
                                   max_leapfrog_steps=MAX_STEPS,
                                   mass_matrix_estimation="diagonal",
                                   # keep only the step counts of the warm-up's transitions
                                   adaptation_info_fn=get_filter_adapt_info_fn(
                                       info_keys={"num_integration_steps"}))
        (states, params), info = warm.run(k_warm, q0, step_size=STEP_SIZE,
                                          optim=optax.adam(0.025), num_steps=warmup,
                                          max_sampling_steps=draws)
        kernel = bj.dynamic_hmc(logdensity, **params).step

        def one(states, key):
            states, step_info = jax.vmap(kernel)(jax.random.split(key, chains), states)
            return states, (states.position, step_info.num_integration_steps,
                            step_info.acceptance_rate)

        _, (positions, steps, accept) = jax.lax.scan(one, states,
                                                     jax.random.split(k_sample, draws))
        return (positions, info.info.num_integration_steps, steps, accept, params["step_size"],
                params["integration_steps_params"][0])

    run = jax.jit(go)
    start = time.perf_counter()
    jax.block_until_ready(run(jax.random.key(1)))  # compiles
    print(f"{problem.name}: BlackJAX compiled and ran once in {time.perf_counter() - start:.1f} s",
          flush=True)
    start = time.perf_counter()
    out = jax.block_until_ready(run(jax.random.key(2)))
    wall = time.perf_counter() - start
    positions, warm_steps, steps, accept, step_size, mean_steps = (np.asarray(v) for v in out)
    x = np.transpose(positions, (1, 0, 2)).astype(np.float64)  # [chain, draw, d]
    warm_gradients = int(warm_steps.sum()) + chains  # + each chain's initial gradient
    gradients = warm_gradients + int(steps.sum())
    result = summarise(problem, x, wall, gradients)
    return result | {"warmup_gradient_evaluations": warm_gradients,
                     "step_size": float(step_size),
                     "trajectory_length": float(mean_steps) * float(step_size),
                     "accept": float(accept.mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--chains", type=int, default=None, help="every target's (default: SIZES)")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                        help="fused_hmc's chains (BlackJAX runs float32)")
    parser.add_argument("--no-jax", action="store_true", help="fused_hmc only")
    parser.add_argument("--no-fused", action="store_true",
                        help="BlackJAX only (its runs can take minutes: a device call of its own)")
    parser.add_argument("--starts", choices=["stan", "reference"], default="stan",
                        help="diamonds' starts: Stan's uniform on [-2, 2], or near the posterior "
                             "(Problem.reference_starts); the other targets take 'stan'")
    parser.add_argument("--out", default=None, help="a JSON file for the results")
    args = parser.parse_args()
    sizes = DRY_SIZES if DEVICE == "cpu" else SIZES
    dtype = getattr(torch, args.dtype)
    results = {}
    for name in args.targets:
        chains, warmup, draws = sizes[name]
        chains, warmup, draws = (args.chains or chains, args.warmup or warmup,
                                 args.draws or draws)
        problem = Problem(name, starts=args.starts if name == "diamonds" else "stan")
        rows = {}
        if not args.no_fused:
            rows[f"fused_hmc ChEES {args.dtype}"] = fused(problem, chains, warmup, draws, dtype)
            print(name, rows, flush=True)
        if not args.no_jax:
            import jax

            key = ("blackjax 1.7.1 chees_adaptation(diagonal) + dynamic_hmc float32 on "
                   + jax.default_backend())
            try:
                rows[key] = blackjax(problem, chains, warmup, draws)
            except Exception as exc:  # noqa: BLE001 - report the anchor's failure, keep ours
                rows[key] = {"error": repr(exc)}
            print(name, key, rows[key], flush=True)
        results[name] = {"chains": chains, "warmup": warmup, "draws": draws,
                         "starts": problem.start_kind, "rows": rows}
        save(args.out, results)  # after every target: a call cut short keeps what it measured
    print(f"\n{'target':14s} {'sampler':22s} {'wall s':>8s} {'gradients':>10s} {'min ESS':>9s} "
          f"{'ESS/grad':>9s} {'ESS/s':>9s} {'eps':>7s} {'T':>7s} {'worst':>6s}")
    for name, block in results.items():
        for sampler, r in block["rows"].items():
            if "wall_s" not in r:
                print(f"{name:14s} {short(sampler):22s} {r}")
                continue
            print(f"{name:14s} {short(sampler):22s} {r['wall_s']:8.3f} "
                  f"{r['gradient_evaluations']:10.3g} {r['min_bulk_ess']:9.3g} "
                  f"{r['ess_per_gradient']:9.2e} {r['ess_per_second']:9.3g} "
                  f"{r['step_size']:7.3g} {r['trajectory_length']:7.3g} "
                  f"{r['worst_mean_error_sd']:6.3f}")


def short(sampler: str) -> str:
    """A row's sampler in the table's 22 columns: BlackJAX's keeps its backend."""
    if sampler.startswith("blackjax"):
        return "blackjax on " + sampler.rsplit(" on ", 1)[-1]
    return sampler[:22]


def save(path: str | None, results: dict) -> None:
    if path:
        from timing import environment

        with open(path, "w") as f:
            json.dump({"environment": environment("python benchmarks/bench_chees.py"),
                       "device": DEVICE, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
