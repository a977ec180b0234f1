"""The model library: each function returns a :class:`Model` (C++ source, data, names, torch
log_prob, map to the constrained parameters); ``model.target()`` builds its ``fused_hmc.CppTarget``.

- :func:`eight_schools`: posteriordb's eight_schools_noncentered (hand-written gradient too);
- :func:`diamonds`: posteriordb's diamonds, brms linear regression, N = 5000, 26 parameters
  (hand-written gradient too);
- :func:`logistic_regression`: German-credit-shaped logistic regression on generated data
  (hand-written gradient too);
- :func:`funnel`: Neal's funnel; :func:`rosenbrock`: the hybrid Rosenbrock banana (exact moments).
"""
from .diamonds import diamonds
from .eight_schools import eight_schools
from .funnel import funnel
from .logistic_regression import logistic_regression, logistic_regression_data
from .model import Model
from .rosenbrock import rosenbrock

MODELS = {"eight_schools": eight_schools, "diamonds": diamonds,
          "logistic_regression": logistic_regression, "funnel": funnel, "rosenbrock": rosenbrock}

__all__ = ["Model", "MODELS", "eight_schools", "diamonds", "logistic_regression",
           "logistic_regression_data", "funnel", "rosenbrock"]
