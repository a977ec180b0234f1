"""The hybrid Rosenbrock ("banana") of Pagani, Wiegand & Nadarajah (2022), "An n-dimensional
Rosenbrock distribution for Markov chain Monte Carlo testing", Scand. J. Statist. 49(2).

A root x_1 and n2 blocks of n1 - 1 coordinates, x_{j,i} (i = 2..n1), each the child of the one
before it (x_{j,1} = x_1); dim = 1 + n2 (n1 - 1):

    log p = -a (x_1 - mu)^2 - b sum_j sum_{i=2..n1} (x_{j,i} - x_{j,i-1}^2)^2     (up to a constant)

so x_1 ~ N(mu, 1 / (2a)) and x_{j,i} | x_{j,i-1} ~ N(x_{j,i-1}^2, 1 / (2b)): the normalising
constant is known and the moments are exact (:func:`exact_moments`, a recursion on raw moments).
Defaults a = 1/20, b = 5, mu = 1, n1 = 2, n2 = 1 are the paper's 2-d banana:
E x_1 = 1, Var x_1 = 10, E x_2 = 11, Var x_2 = 1/10 + 4 * 10 + 2 * 100 = 240.1.
Layout: x[0] = x_1, block j (0-based) at x[1 + j (n1 - 1) + (i - 2)].
"""
from __future__ import annotations

import functools
import math

import torch
from torch.distributions import Normal

from .model import Model, TorchForm

# data.a, data.b, data.mu (chains' dtype), data.n1, data.n2 (int64).
SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) {
  const int64_t m = data.n1 - 1;
  const T root = x[0] - data.mu;
  T lp = -data.a * root * root;
  for (int64_t j = 0; j < data.n2; ++j) {
    const T* block = x + 1 + j * m;
    T r = block[0] - x[0] * x[0];
    lp += -data.b * r * r;
    for (int64_t i = 1; i < m; ++i) {
      r = block[i] - block[i - 1] * block[i - 1];
      lp += -data.b * r * r;
    }
  }
  return lp;
}
"""


def _check(a, b, n1, n2):
    for arg, value in (("a", a), ("b", b)):
        if not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{arg} must be a positive number, got {value!r}")
    for arg, value in (("n1", n1), ("n2", n2)):
        if not isinstance(value, int) or value < (2 if arg == "n1" else 1):
            raise ValueError(f"{arg} must be an int >= {2 if arg == 'n1' else 1}, got {value!r}")


def _gaussian_raw_moments(mean: float, var: float, order: int) -> list[float]:
    """E[X^m] for X ~ N(mean, var), m = 0..order: sum over even k of C(m, k) mean^(m-k) E[Z^k]
    var^(k/2), E[Z^k] = (k - 1)!!."""
    def double_factorial(k):
        return math.prod(range(k - 1, 0, -2)) if k > 0 else 1
    return [sum(math.comb(m, k) * mean ** (m - k) * double_factorial(k) * var ** (k // 2)
                for k in range(0, m + 1, 2)) for m in range(order + 1)]


def exact_moments(a: float = 1 / 20, b: float = 5.0, mu: float = 1.0, n1: int = 2, n2: int = 1
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact (mean [dim], var [dim]) float64 of the hybrid Rosenbrock.

    x_i = x_{i-1}^2 + e_i with e_i ~ N(0, 1 / (2b)) independent of x_{i-1}, so
    E[x_i^m] = sum_k C(m, k) E[x_{i-1}^(2k)] E[e^(m-k)]: the mean and variance at depth i need
    raw moments up to order 2^(n1 - i + 1) at depth i - 1, down to 2^n1 for the Gaussian root."""
    _check(a, b, n1, n2)
    moments = _gaussian_raw_moments(mu, 1 / (2 * a), 2 ** n1)
    noise = _gaussian_raw_moments(0.0, 1 / (2 * b), 2 ** n1)
    depth = [moments]
    for i in range(2, n1 + 1):
        order = 2 ** (n1 - i + 1)
        prev = depth[-1]
        depth.append([sum(math.comb(m, k) * prev[2 * k] * noise[m - k] for k in range(m + 1))
                      for m in range(order + 1)])
    mean = [depth[0][1]] + [depth[i][1] for _ in range(n2) for i in range(1, n1)]
    var = [depth[0][2] - depth[0][1] ** 2] + [depth[i][2] - depth[i][1] ** 2
                                             for _ in range(n2) for i in range(1, n1)]
    return torch.tensor(mean, dtype=torch.float64), torch.tensor(var, dtype=torch.float64)


def _log_prob(x: torch.Tensor, data) -> torch.Tensor:
    n1, n2 = data["n1"], data["n2"]
    root = x[..., :1]
    blocks = x[..., 1:].reshape(*x.shape[:-1], n2, n1 - 1)
    parents = torch.cat([root[..., None, :].expand(*x.shape[:-1], n2, 1), blocks[..., :-1]], -1)
    r = blocks - parents * parents
    return -data["a"] * (x[..., 0] - data["mu"]) ** 2 - data["b"] * (r * r).sum((-2, -1))


def _names(n1: int, n2: int) -> tuple[str, ...]:
    return ("x[1]",) + tuple(f"x[{j},{i}]" for j in range(1, n2 + 1) for i in range(2, n1 + 1))


def _constrain(x: torch.Tensor, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    return {name: x[..., j] for j, name in enumerate(names)}


def _torch_fn(p, data):
    """The torch form: x1 ~ N(mu, 1 / (2a)), each block's x_i ~ N(x_{i-1}^2, 1 / (2b)) (x_0 =
    x1); p["x"] [n2, n1 - 1] holds the blocks."""
    blocks = p["x"]
    parents = torch.cat([p["x1"].expand(blocks.shape[0], 1), blocks[:, :-1]], dim=1)
    return (Normal(data["mu"], (0.5 / data["a"]) ** 0.5).log_prob(p["x1"])
            + Normal(parents * parents, (0.5 / data["b"]) ** 0.5).log_prob(blocks).sum())


def _torch_form(a: float, b: float, mu: float, n1: int, n2: int) -> TorchForm:
    params = {"x1": (), "x": (n2, n1 - 1)}
    data = {"a": float(a), "b": float(b), "mu": float(mu)}
    return TorchForm(_torch_fn, params, data, tuple(range(1 + n2 * (n1 - 1))))


def rosenbrock(a: float = 1 / 20, b: float = 5.0, mu: float = 1.0, n1: int = 2, n2: int = 1
               ) -> Model:
    """The hybrid Rosenbrock (defaults: Pagani et al.'s 2-d banana), with its exact moments."""
    _check(a, b, n1, n2)
    names = _names(n1, n2)
    mean, var = exact_moments(a, b, mu, n1, n2)
    return Model(
        name="rosenbrock", dim=1 + n2 * (n1 - 1), source=SOURCE,
        data={"a": float(a), "b": float(b), "mu": float(mu), "n1": n1, "n2": n2}, names=names,
        constrained_names=names, log_prob_fn=_log_prob,
        constrain_fn=functools.partial(_constrain, names=names), exact_mean=mean, exact_var=var,
        torch_form=functools.partial(_torch_form, a, b, mu, n1, n2))
