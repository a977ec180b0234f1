r"""ChEES side by side (issue 15 item 5): fused_hmc against BlackJAX 1.7.1's ChEES and NumPyro's
NUTS in one run, on the same targets and starts, with the same warm-up and draw counts: ESS per
gradient evaluation and per second.

Targets (--targets, default all but gaussian64): gaussian64, an ill-conditioned diagonal Gaussian
(d = 64, mean linspace(-3, 3), sd logspace 0.01 .. 100, chains started at N(0, I); for fused_hmc a
CppTarget with its gradient written out, as a user would bring it); and fused_hmc.models, started
as Stan starts them (uniform(-2, 2) on the unconstrained scale): eight_schools (posteriordb's
non-centred form), logistic_regression (1,000 generated rows, 25 coefficients, no reference),
funnel (Neal's, d = 10, its exact moments as reference, dual-number gradients; the other models'
are hand-written), diamonds (posteriordb's brms regression, 26 parameters, 5,000 rows, QR form)
and diamonds_direct (the same in its coefficients b, ``diamonds(qr=False)``). All samplers get the
same starts and log density (fused_hmc the model's C++, the others jax_models.py's).

Rows per target:
- fused_hmc (one per --fused-configs entry, default all; float32 unless --dtype):
  ``chees_diagonal``, ``sample(..., adapt_trajectory_length=True)``: ChEES in the kernels, pooled
  over all chains (target acceptance 0.651, initial step size 0.1 and length 10 steps, at most
  1000 steps, Stan's windows, diagonal inverse mass, trajectory jitter from each chain's philox
  stream; the step size on the chains' harmonic mean acceptance, ChEES's default, as BlackJAX);
  ``chees_dense``, the same with ``mass_matrix="dense"``; ``chees_mean``, the diagonal's on the
  chains' mean acceptance (``pooled_acceptance="mean"``); ``per_chain``, Stan's warm-up
  per chain (``pooled=False``: dual averaging toward 0.8, diagonal mass), L = 8, step jitter 0.2.
- BlackJAX (unless --no-jax or --no-blackjax):
  ``chees_adaptation(..., mass_matrix_estimation="diagonal")`` with
  the same acceptance target, initial step size and step cap, Adam(0.025) on log T, its Halton
  jitter and the diagonal mass from the last half of warm-up, then the vmapped ``dynamic_hmc``
  step in a ``lax.scan``, as its documentation runs it; float32.
- NumPyro (unless --no-jax or --no-numpyro; on the --numpyro-targets, with at most
  --numpyro-chains of the starts): ``NUTS(potential_fn=-log density, target_accept_prob=0.8)``,
  otherwise its defaults (diagonal mass, Stan's windows, tree depth 10), float32, the kernel's
  init and sample vmapped over the chains as ``MCMC(chain_method="vectorized")`` runs them (the
  same draws as MCMC.run from the same key, to float32 rounding), warm-up and sampling a
  ``lax.scan`` each. Not MCMC.run itself: it compiles its loop again at every call (NumPyro 0.22
  on the CPU: 5 s of a 6.5 s run), so a compiling call first would not keep that out of the time.

Wall time is warm-up and sampling together. fused_hmc: after an untimed short run (100 + 10) that
builds or loads the target's module; with --warmup-alone also the warm-up's alone, from a run
keeping one draw. BlackJAX and NumPyro: one ``jax.jit`` of warm-up and sampling, compiled ahead of
time (compile_s), then one timed call. Their rows come after every target's fused_hmc rows,
target by target, each in a child process of this script that is stopped after --jax-time-cap
seconds or at --deadline seconds from the script's start (none starts with under 20 s left).

Reported per row: wall_s; gradient_evaluations as each implementation spends them (fused_hmc: the
kernel's count, L per transition plus one per kernel call, the chains carrying the gradient across
transitions; BlackJAX: L per transition plus one per chain, from its info's num_integration_steps;
NumPyro: the states' num_steps in warm-up and sampling plus one per chain, its step-size searches
at the start and at each window's end not counted); the smallest bulk ESS over the reported
parameters (arviz-stats on the first ESS_CHAINS chains, scaled to all: the chains are
exchangeable); ESS per gradient evaluation and per second; the worst |mean - reference| /
reference sd (null without a reference); the largest R-hat and, for posteriordb's models, its
verdict; the (median) step size, the trajectory length (ChEES's T, L eps, NUTS's mean steps times
eps), the mean acceptance, and the chains that never moved in sampling (fused_hmc: accepted no
transition; BlackJAX and NumPyro: every draw the same).

    python benchmarks/prebuild_models.py {eight_schools,logistic_regression,diamonds}:hand:f32 \
        {eight_schools,logistic_regression,diamonds}:hand:f32:dense funnel:duals:f32{,:dense}
    python benchmarks/bench_chees.py [--targets eight_schools funnel ...] [--no-jax] [--no-numpyro]
        [--no-blackjax] [--fused-configs chees_dense ...] [--deadline 330] [--out f.json]  # GPU
    python benchmarks/bench_chees.py --targets diamonds --starts reference   # near the posterior
    FUSED_HMC_BENCH_DEVICE=cpu python benchmarks/bench_chees.py --no-jax   # a CPU dry run

The CPU dry run uses tiny sizes (--chains etc. still override them) and skips nothing else.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
DEVICE = os.environ.get("FUSED_HMC_BENCH_DEVICE", "cuda")  # "cpu": a dry run of this script
sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET_ACCEPT, STEP_SIZE, INITIAL_STEPS, MAX_STEPS = 0.651, 0.1, 10, 1000
NUTS_TARGET_ACCEPT = 0.8
ESS_CHAINS = 256
# (chains, warm-up, draws) per target on the GPU, and for the CPU dry run.
SIZES = {name: (4096, 1000, 1000) for name in ("gaussian64", "eight_schools",
                                               "logistic_regression", "funnel", "diamonds",
                                               "diamonds_direct")}
DRY_SIZES = {"gaussian64": (16, 200, 50), "eight_schools": (16, 200, 50),
             "logistic_regression": (16, 200, 50), "funnel": (16, 200, 50),
             "diamonds": (4, 20, 10), "diamonds_direct": (4, 20, 10)}
# Targets that are a library model under another name: (the model, its constructor's options).
MODELS = {"diamonds_direct": ("diamonds", {"qr": False})}
# fused_hmc's untimed first run, (warm-up, draws) at most the timed run's: on the GPU long enough to
# load every kernel the timed run launches, on the CPU (a dry run) only the build matters.
COMPILE_RUN = (100, 10) if DEVICE == "cuda" else (2, 2)
MIN_ROW_S = 20.0  # a BlackJAX or NumPyro row is not started with less time than this left


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
    """A target for every sampler: fused_hmc's target, a JAX log density, the starts, the
    reported parameters and their reference means and sds (None where there is no reference)."""

    def __init__(self, name: str, starts: str = "stan", **model_options):
        """name: a SIZES key (a library model, or one under MODELS' other name). starts: "stan"
        (the Gaussian's N(0, I); a model's uniform on [-2, 2]) or "reference" (diamonds in
        either form only: see reference_starts). model_options go to the library model's
        constructor (diamonds' qr=False)."""
        from fused_hmc import CppTarget, models

        model_name, options = MODELS.get(name, (name, {}))
        if starts not in ("stan", "reference") or (starts == "reference"
                                                   and model_name != "diamonds"):
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
            self.model = getattr(models, model_name)(**(options | model_options))
            # the hand-written gradient where the model has one (the funnel: dual numbers)
            self.target = self.model.target(gradient=self.model.gradient_source is not None)
            self.ref_mean, self.ref_sd = reference(self.model)

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

        return getattr(jax_models, self.model.name)(self.model.data)


def reference(model) -> tuple[np.ndarray | None, np.ndarray | None]:
    """A model's reference means and sds of its reported parameters: posteriordb's, or its exact
    moments where it reports its unconstrained coordinates (the funnel), else (None, None)."""
    if model.posteriordb is not None:
        from fused_hmc.validation.posteriordb import load_reference

        ref = load_reference(model.posteriordb)
        return np.asarray(ref.mean), np.asarray(ref.sd)
    if model.exact_mean is not None and model.constrained_names == model.names:
        return model.exact_mean.numpy(), model.exact_var.sqrt().numpy()
    return None, None


def summarise(problem: Problem, draws: np.ndarray, seconds: float, gradients: int) -> dict:
    """draws [chain, draw, d] unconstrained, float64."""
    from arviz_stats.base import array_stats

    x = problem.reported(draws)
    first = x[:ESS_CHAINS]
    ess = np.asarray(array_stats.ess(first, chain_axis=0, draw_axis=1, method="bulk"))
    ess = ess * x.shape[0] / first.shape[0]  # exchangeable chains: ESS grows with their number
    worst = None
    if problem.ref_mean is not None:
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


def never_moved(x: np.ndarray) -> int:
    """The chains of draws x [chain, draw, d] whose every draw is the same."""
    return int(np.all(x == x[:, :1], axis=(1, 2)).sum())


def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


# fused_hmc's settings by name: in-kernel ChEES (pooled over all chains) with a diagonal or a
# dense mass, or a fixed L = 8 with step jitter 0.2 and Stan's warm-up per chain (dual averaging
# toward 0.8, windows, diagonal mass): each chain adapts alone, so one that converges late cannot
# spoil the others' mass matrix, as it can a pooled one.
CHEES = dict(adapt_trajectory_length=True, target_accept=TARGET_ACCEPT, step_size=STEP_SIZE,
             num_leapfrog_steps=INITIAL_STEPS, max_leapfrog_steps=MAX_STEPS)
PER_CHAIN = dict(pooled=False, num_leapfrog_steps=8, jitter=0.2)
FUSED_CONFIGS = {"chees_diagonal": CHEES, "chees_dense": CHEES | dict(mass_matrix="dense"),
                 "chees_mean": CHEES | dict(pooled_acceptance="mean"),
                 "per_chain": PER_CHAIN}


def fused(problem: Problem, chains: int, warmup: int, draws: int, dtype: torch.dtype,
          warmup_alone: bool = True, chees: bool = True, config: str | None = None) -> dict:
    """config: a FUSED_CONFIGS name (default chees_diagonal, or per_chain with chees=False)."""
    import fused_hmc

    config = config or ("chees_diagonal" if chees else "per_chain")
    q0 = problem.starts(chains).to(DEVICE, dtype)

    def run(seed, warmup=warmup, draws=draws):
        _sync()
        start = time.perf_counter()
        res = fused_hmc.sample(q0, draws, target=problem.target, num_warmup=warmup, seed=seed,
                               progress=False, **FUSED_CONFIGS[config])
        _sync()
        return res, time.perf_counter() - start

    run(1, min(warmup, COMPILE_RUN[0]), min(draws, COMPILE_RUN[1]))  # builds or loads the module
    res, wall = run(2)
    gradients = res.warmup_gradient_evaluations + res.sampling_gradient_evaluations
    out = summarise(problem, res.samples.double().cpu().numpy(), wall, gradients)
    if warmup_alone:  # where the time goes: the warm-up (and one draw) alone
        out["warmup_wall_s"] = run(2, draws=1)[1]
    step_size = float(res.step_size.double().median())  # one for all chains, unless per chain
    length = res.trajectory_length
    if length is None:  # a fixed L: its nominal length
        length = res.num_leapfrog_steps * step_size
    if res.chain_statistics is not None and "divergences" in res.chain_statistics:
        out["divergences"] = int(res.chain_statistics["divergences"].sum())
    if res.mass_factorization_failures is not None:
        out["mass_factorization_failures"] = int(res.mass_factorization_failures.sum())
    return out | {"sampler": "fused_hmc", "config": config, "chains": chains,
                  "warmup_gradient_evaluations": res.warmup_gradient_evaluations,
                  "step_size": step_size, "trajectory_length": length,
                  "accept": float(res.mean_accept_prob.mean()),
                  "never_accepted": int((res.accept_count == 0).sum())}


def compile_and_time(go, what: str, note=None) -> tuple[list[np.ndarray], float, float]:
    """go(key) jitted, compiled ahead of time and called once, that call timed: (its outputs as
    numpy arrays, the call's seconds, the compilation's). note(dict), where given, gets the
    compilation's seconds first (a child process stopped later still reports them)."""
    import jax

    start = time.perf_counter()
    compiled = jax.jit(go).lower(jax.random.key(1)).compile()
    compile_s = time.perf_counter() - start
    print(f"{what}: compiled in {compile_s:.1f} s on {jax.default_backend()}", flush=True)
    if note is not None:
        note({"compile_s": compile_s})
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(jax.random.key(2)))
    wall = time.perf_counter() - start
    return [np.asarray(v) for v in out], wall, compile_s


def blackjax(problem: Problem, chains: int, warmup: int, draws: int, note=None) -> dict:
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

    out, wall, compile_s = compile_and_time(go, f"{problem.name}: BlackJAX", note)
    positions, warm_steps, steps, accept, step_size, mean_steps = out
    x = np.transpose(positions, (1, 0, 2)).astype(np.float64)  # [chain, draw, d]
    warm_gradients = int(warm_steps.sum()) + chains  # + each chain's initial gradient
    gradients = warm_gradients + int(steps.sum())
    return summarise(problem, x, wall, gradients) | {
        "sampler": "blackjax", "version": bj.__version__, "backend": jax.default_backend(),
        "chains": chains, "compile_s": compile_s,
        "warmup_gradient_evaluations": warm_gradients, "step_size": float(step_size),
        "trajectory_length": float(mean_steps) * float(step_size),
        "accept": float(accept.mean()), "never_accepted": never_moved(x)}


def numpyro_nuts(problem: Problem, chains: int, warmup: int, draws: int, note=None) -> dict:
    import jax
    import numpyro
    from numpyro.infer import NUTS

    logdensity = problem.jax_logdensity()
    q0 = jax.numpy.asarray(problem.starts(chains).float().numpy())

    def go(key):  # the kernel as MCMC(chain_method="vectorized") runs it, in one computation
        kernel = NUTS(potential_fn=lambda x: -logdensity(x),
                      target_accept_prob=NUTS_TARGET_ACCEPT)
        states = kernel.init(jax.random.split(key, chains), warmup, q0, (), {})

        def warm(states, _):
            states = kernel.sample(states, (), {})
            return states, states.num_steps

        def one(states, _):
            states = kernel.sample(states, (), {})
            return states, (states.z, states.num_steps, states.accept_prob)

        states, warm_steps = jax.lax.scan(warm, states, length=warmup)
        _, (positions, steps, accept) = jax.lax.scan(one, states, length=draws)
        return positions, warm_steps, steps, accept, states.adapt_state.step_size

    out, wall, compile_s = compile_and_time(go, f"{problem.name}: NumPyro", note)
    positions, warm_steps, steps, accept, step_size = out
    x = np.transpose(positions, (1, 0, 2)).astype(np.float64)  # [chain, draw, d]
    warm_gradients = int(warm_steps.sum()) + chains  # + each chain's initial gradient
    gradients = warm_gradients + int(steps.sum())
    eps = float(np.median(step_size))
    return summarise(problem, x, wall, gradients) | {
        "sampler": "numpyro", "version": numpyro.__version__, "backend": jax.default_backend(),
        "chains": chains, "compile_s": compile_s,
        "warmup_gradient_evaluations": warm_gradients, "step_size": eps,
        "trajectory_length": float(steps.mean()) * eps, "mean_steps": float(steps.mean()),
        "at_max_tree_depth": float((steps >= 1023).mean()),
        "accept": float(accept.mean()), "never_accepted": never_moved(x)}


JAX_SAMPLERS = {"blackjax": blackjax, "numpyro": numpyro_nuts}
JAX_ROWS = {"blackjax": "blackjax chees_adaptation(diagonal) + dynamic_hmc float32",
            "numpyro": "numpyro NUTS, chains vectorized, float32"}


def jax_row(sampler: str, name: str, chains: int, warmup: int, draws: int, starts: str,
            seconds: float) -> dict:
    """A JAX_SAMPLERS row in a child process of this script (--row), stopped after `seconds`:
    a run longer than the budget reports so instead of holding up the rest."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "row.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--row", sampler,
                   "--targets", name, "--chains", str(chains), "--warmup", str(warmup),
                   "--draws", str(draws), "--starts", starts, "--row-out", str(path)]
        try:
            subprocess.run(command, timeout=seconds, check=False)
        except subprocess.TimeoutExpired:
            partial = json.loads(path.read_text()) if path.exists() else {}
            if "wall_s" not in partial and "error" not in partial:  # stopped before its end
                return {"error": f"stopped after {seconds:.0f} s (imports, compilation and "
                                 "run)"} | partial
        if not path.exists():
            return {"error": "the child process wrote no result (its output is above)"}
        return json.loads(path.read_text())


def child_row(args) -> None:
    """--row: one JAX_SAMPLERS row, written to --row-out (first the compilation's seconds)."""
    path = Path(args.row_out)

    def note(partial: dict) -> None:  # whole or not at all, should the parent stop this process
        path.with_suffix(".part").write_text(json.dumps(partial))
        os.replace(path.with_suffix(".part"), path)

    problem = Problem(args.targets[0], starts=args.starts)
    try:
        row = JAX_SAMPLERS[args.row](problem, args.chains, args.warmup, args.draws, note)
    except Exception as exc:  # noqa: BLE001 - report the anchor's failure, keep the others
        row = {"error": repr(exc)}
    note(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", default=list(SIZES)[1:], choices=list(SIZES))
    parser.add_argument("--chains", type=int, default=None, help="every target's (default: SIZES)")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                        help="fused_hmc's chains (BlackJAX and NumPyro run float32)")
    parser.add_argument("--fused-configs", nargs="+", default=list(FUSED_CONFIGS),
                        choices=list(FUSED_CONFIGS), help="fused_hmc's rows")
    parser.add_argument("--warmup-alone", action="store_true",
                        help="also time fused_hmc's warm-up alone (one more run per row)")
    parser.add_argument("--no-fused", action="store_true", help="BlackJAX and NumPyro only")
    parser.add_argument("--no-jax", action="store_true", help="fused_hmc only")
    parser.add_argument("--no-numpyro", action="store_true", help="no NumPyro rows")
    parser.add_argument("--no-blackjax", action="store_true",
                        help="no BlackJAX rows (NumPyro's alone, in a call of their own)")
    parser.add_argument("--numpyro-targets", nargs="+", default=None, choices=list(SIZES),
                        help="the targets of NumPyro's rows (default: all --targets)")
    parser.add_argument("--numpyro-chains", type=int, default=1024,
                        help="NumPyro's chains, the first of the others' starts (at most theirs)")
    parser.add_argument("--jax-time-cap", type=float, default=120.0,
                        help="seconds after which a BlackJAX or NumPyro row is stopped")
    parser.add_argument("--deadline", type=float, default=330.0,
                        help="seconds from this script's start after which no BlackJAX or NumPyro "
                             "row runs (0: none)")
    parser.add_argument("--starts", choices=["stan", "reference"], default="stan",
                        help="diamonds' starts (both forms): Stan's uniform on [-2, 2], or near "
                             "the posterior (Problem.reference_starts); the others take 'stan'")
    parser.add_argument("--out", default=None, help="a JSON file for the results")
    parser.add_argument("--row", choices=list(JAX_SAMPLERS), help=argparse.SUPPRESS)
    parser.add_argument("--row-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row:
        return child_row(args)
    began = time.perf_counter()
    sizes = DRY_SIZES if DEVICE == "cpu" else SIZES
    dtype = getattr(torch, args.dtype)
    results = {}
    for name in args.targets:
        chains, warmup, draws = sizes[name]
        chains, warmup, draws = (args.chains or chains, args.warmup or warmup,
                                 args.draws or draws)
        starts = args.starts if MODELS.get(name, (name,))[0] == "diamonds" else "stan"
        rows = {}
        results[name] = {"chains": chains, "warmup": warmup, "draws": draws, "starts": starts,
                         "rows": rows}
        if args.no_fused:
            continue
        problem = Problem(name, starts=starts)
        for config in args.fused_configs:
            key = f"fused_hmc {config} {args.dtype}"
            rows[key] = fused(problem, chains, warmup, draws, dtype,
                              warmup_alone=args.warmup_alone, config=config)
            print(name, key, rows[key], flush=True)
            save(args.out, results)  # after every row: a call cut short keeps what it measured
    if not args.no_jax:
        if DEVICE == "cuda":
            torch.cuda.empty_cache()  # the device's memory to the child processes
        numpyro = [] if args.no_numpyro else (args.numpyro_targets or args.targets)
        # target by target, so that what --deadline leaves out is the last targets' rows
        jobs = [(name, sampler) for name in args.targets for sampler in ("blackjax", "numpyro")
                if (sampler == "blackjax" and not args.no_blackjax) or
                (sampler == "numpyro" and name in numpyro)]
        for name, sampler in jobs:
            block = results[name]
            chains = block["chains"]
            if sampler == "numpyro":
                chains = min(chains, args.numpyro_chains)
            left = (args.deadline - (time.perf_counter() - began) if args.deadline
                    else float("inf"))
            row = ({"skipped": f"{max(left, 0):.0f} s left before --deadline"}
                   if left < MIN_ROW_S else
                   jax_row(sampler, name, chains, block["warmup"], block["draws"],
                           block["starts"], min(args.jax_time_cap, left)))
            block["rows"][JAX_ROWS[sampler]] = row
            print(name, JAX_ROWS[sampler], row, flush=True)
            save(args.out, results)
    table(results)


def table(results: dict) -> None:
    print(f"\n{'target':19s} {'sampler':21s} {'chains':>6s} {'wall s':>8s} {'gradients':>9s} "
          f"{'min ESS':>9s} {'ESS/grad':>9s} {'ESS/s':>9s} {'eps':>8s} {'T':>7s} "
          f"{'accept':>6s} {'stuck':>5s} {'worst':>8s} {'correct':>7s}")
    for name, block in results.items():
        for key, r in block["rows"].items():
            words = key.split()
            label = {"blackjax": "blackjax ChEES", "numpyro": "numpyro NUTS"}.get(
                words[0], f"fused {words[1]}")
            if "wall_s" not in r:
                print(f"{name:19s} {label[:21]:21s} {r}")
                continue
            worst, correct = r["worst_mean_error_sd"], r.get("correct")
            print(f"{name:19s} {label[:21]:21s} {r['chains']:6d} {r['wall_s']:8.3f} "
                  f"{r['gradient_evaluations']:9.3g} {r['min_bulk_ess']:9.3g} "
                  f"{r['ess_per_gradient']:9.2e} {r['ess_per_second']:9.3g} "
                  f"{r['step_size']:8.3g} {r['trajectory_length']:7.3g} {r['accept']:6.3f} "
                  f"{r['never_accepted']:5d} {'-' if worst is None else f'{worst:.3g}':>8s} "
                  f"{'-' if correct is None else str(correct):>7s}")


def save(path: str | None, results: dict) -> None:
    if path:
        from timing import environment

        with open(path, "w") as f:
            json.dump({"environment": environment("python " + " ".join(sys.argv)),
                       "device": DEVICE, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
