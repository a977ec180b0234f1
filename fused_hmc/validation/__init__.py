"""Statistical validation of the sampler: does the fast kernel sample the right distribution?

Modules, one job each: ``thresholds`` (critical values from a 1e-6 suite-wide false-failure budget),
``gaussian_exact`` (exact acceptance rate and autocorrelation on the Gaussian target), ``checks``
(pure test functions returning ``CheckResult``), ``draws`` (running the kernel and keeping its
noise), ``suite`` (all checks for one device), ``report`` (the printed table). Needs scipy.
"""
from .checks import CheckResult
from .suite import FULL, QUICK, SuiteConfig, SuiteResult, run_suite

__all__ = ["CheckResult", "SuiteConfig", "SuiteResult", "FULL", "QUICK", "run_suite"]
