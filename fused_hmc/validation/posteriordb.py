"""Posterior means and standard deviations against posteriordb's reference summaries.

The rule (posteriordb README in the package data): a sampler is right when, for every reported
parameter,

    |m_ours - m_ref| <= z sqrt(sd^2 / ESS_ours + sd^2 / N_ref)                                (1)

and likewise for the standard deviation, checked through the mean of the square q = E[x^2]
(q_ours = sd_ours^2 + m_ours^2, an average of x^2 whose Monte Carlo error is known):

    |q_ours - q_ref| <= z sqrt(V / ESS_sq + V / N_ref),   V = Var(x^2) = E x^4 - (E x^2)^2.     (2)

- sd in (1) is the reference's sd (10,000 draws: the better estimate of the posterior sd); both
  estimates are averages, normal by the CLT, independent of each other, so under a correct sampler
  the z-score has variance 1 (the reference's own error is the second term). N_ref = 10,000, the
  reference's draw count (its bulk ESS is about that, README).
- V in (2) needs the fourth moment. With ``sq_var`` (Var(x^2) of our own draws) V is the larger of
  it and the Gaussian value 4 m^2 sd^2 + 2 sd^4 (reference moments; exact for a normal marginal):
  conservative. Without ``sq_var`` V is the Gaussian value alone, which is too small for
  heavy-tailed marginals (eight schools' tau): pass ``sq_var`` there (``compare_draws`` does).
- z is Bonferroni-corrected over the m = 2 P comparisons (P parameters, mean and square each):
  P(any false failure) <= m * alpha / m = alpha, so z = Phi^-1(1 - alpha / (2 m)).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .thresholds import per_check_alpha, z_critical


class PosteriorMismatchError(AssertionError):
    """Our posterior summary disagrees with posteriordb's beyond the Monte Carlo error."""


@dataclass(frozen=True)
class Reference:
    """posteriordb's reference summary of one posterior: per parameter [P] float64 arrays."""

    name: str
    parameters: tuple[str, ...]
    mean: np.ndarray
    sd: np.ndarray
    sq_mean: np.ndarray
    num_draws: int


@dataclass(frozen=True)
class Comparison:
    """One test: ``statistic`` is "mean" (rule 1) or "sq_mean" (rule 2, the sd's check)."""

    parameter: str
    statistic: str
    ours: float
    reference: float
    mc_error: float   # sd of (ours - reference) under a correct sampler
    z: float          # (ours - reference) / mc_error
    bound: float      # z_critical * mc_error: the largest |ours - reference| that passes
    passed: bool


@dataclass(frozen=True)
class ComparisonReport:
    """All comparisons of one posterior at suite-wide false-failure rate ``alpha``."""

    posterior: str
    alpha: float
    z_critical: float
    rows: tuple[Comparison, ...]

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows)

    @property
    def worst(self) -> Comparison:
        """The comparison with the largest |z|."""
        return max(self.rows, key=lambda row: abs(row.z))

    def table(self) -> str:
        lines = [f"{'parameter':<14}{'stat':>8}{'ours':>14}{'reference':>14}{'z':>9}  pass"]
        lines += [f"{r.parameter:<14}{r.statistic:>8}{r.ours:>14.6g}{r.reference:>14.6g}"
                  f"{r.z:>9.2f}  {'yes' if r.passed else 'NO'}" for r in self.rows]
        return "\n".join(lines)

    def message(self) -> str:
        w = self.worst
        verdict = "agrees with" if self.passed else "DISAGREES with"
        failed = sum(not row.passed for row in self.rows)
        return (f"{self.posterior}: {verdict} posteriordb ({failed} of {len(self.rows)} "
                f"comparisons fail at |z| > {self.z_critical:.3f}, alpha = {self.alpha:g}); worst: "
                f"{w.statistic} of {w.parameter}: ours {w.ours:.6g}, reference {w.reference:.6g}, "
                f"z = {w.z:.2f} (|difference| {abs(w.ours - w.reference):.3g} vs bound "
                f"{w.bound:.3g})")

    def raise_if_failed(self) -> None:
        if not self.passed:
            raise PosteriorMismatchError(self.message() + "\n" + self.table())


def load_reference(name: str) -> Reference:
    """The reference summary of a shipped posteriordb posterior, by its posteriordb name
    (``"eight_schools-eight_schools_noncentered"``, ``"diamonds-diamonds"``)."""
    from fused_hmc.models.posteriordb_files import load_posterior

    ref = load_posterior(name)["reference"]
    summary = ref["summary"]
    params = tuple(summary)
    column = lambda key: np.array([summary[p][key] for p in params], dtype=np.float64)  # noqa: E731
    return Reference(name=name, parameters=params, mean=column("mean"), sd=column("sd"),
                     sq_mean=column("sq_mean"),
                     num_draws=int(ref["chains"]) * int(ref["draws_per_chain"]))


def bonferroni_z(alpha: float, num_comparisons: int) -> float:
    """z = Phi^-1(1 - alpha / (2 m)): m two-sided z tests that together fail falsely with
    probability at most alpha."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return z_critical(per_check_alpha(num_comparisons, alpha))


def _per_parameter(arg: str, values, params: Sequence[str], *, positive: bool) -> np.ndarray:
    if isinstance(values, Mapping):
        missing = [p for p in params if p not in values]
        extra = [k for k in values if k not in params]
        if missing or extra:
            raise ValueError(f"{arg}: keys must be the reference's parameters; missing {missing}, "
                             f"unknown {extra}")
        values = [values[p] for p in params]
    if hasattr(values, "detach"):
        values = values.detach().cpu().double().numpy()
    out = np.asarray(values, dtype=np.float64).reshape(-1)
    if out.shape != (len(params),):
        raise ValueError(f"{arg} must have one value per reference parameter ({len(params)}), got "
                         f"shape {np.shape(values)}")
    if not np.all(np.isfinite(out)) or (positive and not np.all(out > 0)):
        bad = params[int(np.argmax(~np.isfinite(out) | (positive & ~(out > 0))))]
        raise ValueError(f"{arg} must be finite{' and positive' if positive else ''}; "
                         f"{bad} is not")
    return out


def compare(means, sds, ess, reference: Reference | str, alpha: float = 1e-6, *, sq_var=None,
            ess_sq=None) -> ComparisonReport:
    """Our posterior means, sds and ESS (each [P] array-like in the reference's parameter order, or
    a dict parameter -> value) against posteriordb's ``reference`` (a Reference or its name).

    ``sq_var``: Var(x^2) of our draws per parameter (makes the sd check valid for heavy tails);
    ``ess_sq``: the ESS of x^2 (default ``ess``). Returns the report; ``report.passed`` is False
    with probability <= alpha for a correct sampler (module docstring)."""
    ref = load_reference(reference) if isinstance(reference, str) else reference
    if not isinstance(ref, Reference):
        raise TypeError(f"reference must be a Reference or a posterior name, got "
                        f"{type(reference).__name__}")
    params = ref.parameters
    m = _per_parameter("means", means, params, positive=False)
    s = _per_parameter("sds", sds, params, positive=False)
    n = _per_parameter("ess", ess, params, positive=True)
    n_sq = n if ess_sq is None else _per_parameter("ess_sq", ess_sq, params, positive=True)
    var_sq = 4 * ref.mean ** 2 * ref.sd ** 2 + 2 * ref.sd ** 4  # Var(x^2) of a normal marginal
    if sq_var is not None:
        var_sq = np.maximum(var_sq, _per_parameter("sq_var", sq_var, params, positive=False))
    z_c = bonferroni_z(alpha, 2 * len(params))
    mean_err = np.sqrt(ref.sd ** 2 / n + ref.sd ** 2 / ref.num_draws)
    sq_err = np.sqrt(var_sq / n_sq + var_sq / ref.num_draws)
    rows = []
    for i, p in enumerate(params):
        for stat, ours, theirs, err in (("mean", m[i], ref.mean[i], mean_err[i]),
                                        ("sq_mean", s[i] ** 2 + m[i] ** 2, ref.sq_mean[i],
                                         sq_err[i])):
            z = (ours - theirs) / err
            rows.append(Comparison(p, stat, float(ours), float(theirs), float(err), float(z),
                                   float(z_c * err), bool(abs(z) <= z_c)))
    return ComparisonReport(ref.name, alpha, z_c, tuple(rows))


def compare_draws(draws, reference: Reference | str, alpha: float = 1e-6) -> ComparisonReport:
    """``compare`` from constrained draws (chain, draw, P) in the reference's parameter order:
    means, sds, the mean-ESS of x and of x^2 (diagnostics.ess_mean, the ESS that gives the Monte
    Carlo error of an average) and Var(x^2), all from the draws."""
    from fused_hmc.diagnostics import as_draws, ess_mean

    x = as_draws(draws)
    flat = x.reshape(-1, x.shape[-1])
    return compare(flat.mean(0), flat.std(0), ess_mean(x), reference, alpha,
                   sq_var=(flat ** 2).var(0), ess_sq=ess_mean(x ** 2))
