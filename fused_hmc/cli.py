"""Command line: ``fused-hmc sample|validate`` (also ``python -m fused_hmc``)."""
from __future__ import annotations

import argparse
import time

import torch


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


# Exact stationary acceptance rate of the default configuration (d=64, L=10, eps=0.1), from
# shared/notes/hmc_gaussian_stats.md; other configurations use validation.gaussian_exact (scipy).
_DEFAULT_EXACT_ACCEPTANCE = 0.9933021193
_DIAGNOSTIC_DIMS = 8
_DIAGNOSTIC_VALUES = 500_000  # ESS/R-hat cost ~1 s per million values per estimator


def _exact_acceptance(dim: int, step_size: float, num_leapfrog_steps: int) -> float | None:
    if (dim, num_leapfrog_steps, step_size) == (64, 10, 0.1):
        return _DEFAULT_EXACT_ACCEPTANCE
    try:
        from .validation.gaussian_exact import gaussian_hmc_exact

        return gaussian_hmc_exact(dim, step_size, num_leapfrog_steps).acceptance
    except (ImportError, ValueError):
        return None


def _sample(args: argparse.Namespace) -> int:
    from . import diagnostics
    from .sampling import Sampler, sample

    device = torch.device(args.device or default_device())
    generator = torch.Generator(device=device).manual_seed(args.seed)
    # Start every chain from the target N(0, I) itself, so the chains are at stationarity.
    q0 = torch.randn(args.chains, args.dim, device=device, generator=generator)
    settings = dict(step_size=args.step_size, num_leapfrog_steps=args.leapfrog, seed=args.seed,
                    progress=not args.no_progress)
    first = 0
    if args.warmup > 0:  # no adaptation yet: warm-up transitions are run and discarded
        warm = sample(q0, args.warmup, keep_samples=False, **settings)
        q0, first = warm.final_state, warm.next_transition
    sampler = Sampler(q0, thin=args.thin, first_transition=first, **settings)
    start = time.perf_counter()
    res = sampler.run(args.samples)  # returns once the device has finished
    elapsed = time.perf_counter() - start

    print(f"fused-hmc sample on {device}: {args.chains} chains x {args.dim} dims, "
          f"L={args.leapfrog}, eps={args.step_size}, seed {res.seed}")
    print(f"transitions       {args.warmup} warm-up (discarded) + {res.num_transitions} "
          f"sampling, thin {res.thin}: {res.num_kept} draws kept per chain"
          + ("  [interrupted]" if res.interrupted else ""))
    exact = _exact_acceptance(args.dim, args.step_size, args.leapfrog)
    rate = res.accept_rate.mean().item()
    print(f"acceptance rate   {rate:.4f}  (mean acceptance probability "
          f"{res.mean_accept_prob.mean().item():.4f}; exact at stationarity "
          + (f"{exact:.4f})" if exact is not None else "unknown)"))
    if res.num_kept >= 2:
        mean, sd = diagnostics.pooled_moments(res.mean.cpu().numpy(), res.var.cpu().numpy(),
                                              res.num_kept)
        print(f"mean              {mean.mean():+.4f}  (truth 0; largest |mean| over dims "
              f"{abs(mean).max():.4f})")
        var = sd ** 2
        print(f"variance          {var.mean():.4f}   (truth 1; range over dims "
              f"{var.min():.4f} .. {var.max():.4f})")
    if res.num_kept >= 4:
        dims = min(args.dim, _DIAGNOSTIC_DIMS)
        chains = max(2, min(args.chains, _DIAGNOSTIC_VALUES // (res.num_kept * dims)))
        diag = diagnostics.diagnose(res.samples, max_chains=chains, max_dims=dims)
        print(f"ESS bulk / tail   min {diag.min_ess_bulk:.0f} / {diag.min_ess_tail:.0f}   "
              f"R-hat max {diag.max_r_hat:.4f}  (first {diag.chains} chains x {diag.draws} "
              f"draws, first {dims} dims)")
    rate = res.num_transitions / elapsed if elapsed > 0 else float("inf")
    print(f"time              {elapsed:.3f} s ({rate:,.0f} transitions/s, "
          f"{rate * args.chains:,.3g} chain-transitions/s)")
    return 130 if res.interrupted else 0


def _validate(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from .validation import report
    from .validation.suite import FULL, QUICK, describe_budget, run_suite

    device = torch.device(args.device or default_device())
    config = QUICK if args.quick else FULL
    if args.seed is not None:
        config = replace(config, seed=args.seed)
    print(f"fused_hmc validate: {'quick' if args.quick else 'full'} suite on {device} "
          f"(torch {torch.__version__}), seed {config.seed}", flush=True)
    start = time.perf_counter()
    result = run_suite(device, config=config,
                       progress=lambda name: print(f"  running {name} ...", flush=True))
    print(report.format_table(result.results, details=args.details))
    print(describe_budget(result))
    print(f"time {time.perf_counter() - start:.1f} s ("
          + ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items()) + ")")
    print(report.format_summary(result.results))
    return 0 if result.passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fused-hmc", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sample = sub.add_parser("sample", help="run many chains on N(0, I) and report")
    sample.add_argument("--chains", type=int, default=2048)
    sample.add_argument("--dim", type=int, default=64)
    sample.add_argument("--samples", type=int, default=1000,
                        help="sampling transitions per chain (draws kept: samples / thin)")
    sample.add_argument("--warmup", type=int, default=0,
                        help="transitions run and discarded first (no adaptation yet)")
    sample.add_argument("--thin", type=int, default=1)
    sample.add_argument("--leapfrog", type=int, default=10)
    sample.add_argument("--step-size", type=float, default=0.1)
    sample.add_argument("--seed", type=int, default=0,
                        help="seeds the N(0, I) start and keys the philox stream")
    sample.add_argument("--device", choices=["cpu", "cuda"], default=None)
    sample.add_argument("--no-progress", action="store_true", help="no progress bar")
    sample.set_defaults(run=_sample)
    validate = sub.add_parser("validate", help="statistical validation of the sampler; exit 1 on "
                              "any failure (a correct sampler fails < once per 10^6 runs)")
    validate.add_argument("--device", choices=["cpu", "cuda"], default=None)
    validate.add_argument("--quick", action="store_true",
                          help="smaller samples (thresholds derived for them); minutes on a CPU")
    validate.add_argument("--seed", type=int, default=None,
                          help="base seed of the suite's streams (default: the suite's fixed seed)")
    validate.add_argument("--details", action="store_true", help="a detail line under every check")
    validate.set_defaults(run=_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)
