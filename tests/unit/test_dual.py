"""csrc/math/autodiff/dual.h and target_functions.h: forward-mode duals and the TARGETS.md functions
for float, double and Dual, against torch autograd (and scipy for digamma).

A small test extension (tests/unit/cpp/) evaluates, element by element, every function on plain T
and on Dual<T, 2> (unary: lanes seeded 1 and -0.5; binary: Dual/Dual, Dual/scalar, scalar/Dual),
and value_and_gradient of three user-style models (eight schools, logistic regression, one using
every function) at several W, including dims that are not multiples of W. On the CPU it also
evaluates every function on the duals of packs of chains (Dual<Pack, 2>), which must hold, lane by
lane, the bits of the scalar evaluation.

Tolerances. float64: 1e-12 (|ref| + scale) (the brief's tight bound: about 4500 ulp of slack over
the few-ulp errors of libm and of torch's own formulas). float32 (the reference is float64 at the
same float32 inputs, so only the float32 evaluation errs): 32 eps (|ref| + scale); each function
is at most 4 libm calls (<= 4 ulp each, CUDA's documented bounds; glibc's are tighter) and 4
roundings, under 32 ulp. `scale` is the size of terms that cancel where the result is small: 1 for
bounded results whose reference forms cancel (1 - tanh^2, s (1 - s), sin and cos near their
zeros), 4 for lgamma/digamma near their zeros (digamma's recurrence sums terms of size ~4 there),
|a| + |b| for log_sum_exp's value (max + log1p(.) can cancel), else 0.
Models: a sum of n terms in any order errs by <= (n - 1) u sum |terms| (Higham, Thm 4.4), each term
by <= 16 u more; so tol = 2 (n + 16) eps M, with M the sum of |terms| (value) or of |d term / dx_k|
(gradient) evaluated without cancellation ("absolute mode": differences become sums of absolute
values), the factor 2 covering the reference's own rounding. all_functions (products and
branches, not a sum) is checked in float64 at 1e-12 (1 + |ref|).
"""
from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.special
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from fused_hmc import _build

ROOT = Path(__file__).resolve().parents[2]
CPP = ROOT / "tests" / "unit" / "cpp"
EPS32 = float(np.finfo(np.float32).eps)


def _sources_hash() -> str:
    h = hashlib.sha256()
    headers = [*(ROOT / "csrc" / "math").rglob("*.h"),
               *(ROOT / "csrc" / "cpu" / "simd").glob("*.h")]
    for p in sorted([*headers, *CPP.iterdir()]):
        h.update(p.read_bytes())
    h.update(repr(_build.HOST_FLAGS).encode())
    return h.hexdigest()[:12]


def _load(kind: str, source: str):
    from torch.utils.cpp_extension import load

    return load(name=f"fused_hmc_dual_test_{kind}_{_sources_hash()}", sources=[str(CPP / source)],
                extra_include_paths=[str(ROOT / "csrc"), str(CPP)],
                extra_cflags=list(_build.HOST_FLAGS),  # the main build's (packs as wide)
                extra_cuda_cflags=["-O3"], verbose=False)


@pytest.fixture(scope="module")
def cpu_ext():
    return _load("cpu", "dual_test_cpu.cpp")


@pytest.fixture(scope="module")
def cuda_ext():
    return _load("cuda", "dual_test_cuda.cu")


# ---- element-wise functions: torch references, domains (float64, float32), scales ----
def reals(lo, hi, width):
    if width == 32:  # bounds must be float32 numbers
        lo, hi = float(np.float32(lo)), float(np.float32(hi))
    return st.floats(lo, hi, width=width, allow_nan=False, allow_infinity=False,
                     allow_subnormal=False)


def log_uniform(lo, hi, width, signed=False):
    mags = st.floats(math.log10(lo), math.log10(hi)).map(lambda e: 10.0 ** e)
    vals = st.tuples(st.sampled_from([1.0, -1.0]), mags).map(lambda s: s[0] * s[1]) if signed \
        else mags
    return vals.map(lambda v: float(np.float32(v)) if width == 32 else v)


def negative_nonintegers(width):
    return reals(-30.0, -1e-3, width).filter(lambda v: abs(v - round(v)) > 1e-3)


# name: (torch function, domain(width), value scale, derivative scale)
UNARY = {
    "neg": (torch.neg, lambda w: reals(-1e30, 1e30, w), 0, 0),
    "exp": (torch.exp, lambda w: reals(-700, 700, w) if w == 64 else reals(-80, 88, w), 0, 0),
    "log": (torch.log, lambda w: log_uniform(1e-300 if w == 64 else 1e-37, 1e300 if w == 64
                                             else 1e37, w), 0, 0),
    "log1p": (torch.log1p, lambda w: st.one_of(reals(-0.999, 1.0, w),
                                               log_uniform(1e-8, 1e30, w)), 0, 0),
    # torch's expm1' is expm1 + 1, which cancels for x << 0: checked against exp(x) instead.
    "expm1": (torch.expm1, lambda w: reals(-700, 700, w) if w == 64 else reals(-80, 88, w), 0, 0,
              torch.exp),
    "sqrt": (torch.sqrt, lambda w: log_uniform(1e-300 if w == 64 else 1e-37, 1e300 if w == 64
                                               else 1e37, w), 0, 0),
    "abs": (torch.abs, lambda w: st.one_of(reals(-1e30, 1e30, w), st.just(0.0)), 0, 0),
    "fabs": (torch.abs, lambda w: reals(-1e30, 1e30, w), 0, 0),
    "tanh": (torch.tanh, lambda w: reals(-400, 400, w) if w == 64 else reals(-40, 40, w), 1, 1),
    "sin": (torch.sin, lambda w: reals(-1e4, 1e4, w), 1, 1),
    "cos": (torch.cos, lambda w: reals(-1e4, 1e4, w), 1, 1),
    "lgamma": (torch.lgamma, lambda w: st.one_of(log_uniform(1e-3, 1e5, w), negative_nonintegers(w))
               if w == 64 else log_uniform(1e-3, 1e5, w), 4, 4),
    "sigmoid": (torch.sigmoid, lambda w: reals(-700, 700, w) if w == 64 else reals(-80, 80, w),
                1, 1),
    "log_sigmoid": (F.logsigmoid, lambda w: reals(-1e30, 1e30, w), 0, 1),
    "softplus": (lambda x: torch.logaddexp(x, torch.zeros_like(x)),
                 lambda w: reals(-1e30, 1e30, w), 0, 1),
}

BINARY = {
    "add": (torch.add, lambda w: (reals(-1e30, 1e30, w),) * 2),
    "sub": (torch.sub, lambda w: (reals(-1e30, 1e30, w),) * 2),
    "mul": (torch.mul, lambda w: (log_uniform(1e-15, 1e15, w, True),) * 2),
    "div": (torch.div, lambda w: (log_uniform(1e-6, 1e6, w, True),) * 2),
    "pow": (torch.pow, lambda w: (log_uniform(1e-3, 1e3, w), reals(-20, 20, w) if w == 64
                                  else reals(-5, 5, w))),
    "fmin": (torch.fmin, lambda w: (reals(-1e30, 1e30, w),) * 2),
    "fmax": (torch.fmax, lambda w: (reals(-1e30, 1e30, w),) * 2),
    "log_sum_exp": (torch.logaddexp, lambda w: (reals(-1e30, 1e30, w), reals(-60, 60, w))),
    # fma(a, b, a): a * b + a rounded once
    "fma": (lambda a, b: a * b + a, lambda w: (log_uniform(1e-15, 1e15, w, True),) * 2),
    "lt": (torch.lt, None), "le": (torch.le, None), "gt": (torch.gt, None),
    "ge": (torch.ge, None), "eq": (torch.eq, None), "ne": (torch.ne, None),
    "where": (lambda a, b: torch.where(a < b, a * b, b - a),
              lambda w: (log_uniform(1e-15, 1e15, w, True),) * 2),
    "pow_int": (torch.pow, lambda w: (st.one_of(log_uniform(1e-3, 1e3, w, True), st.just(0.0)),
                                      st.integers(-4, 4).map(float))),
}
COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
# fma's reference a * b + a rounds twice (float64): its error is relative to |a b| + |a|.
BINARY_SCALE = {"log_sum_exp": (lambda a, b: a.abs() + b.abs(), 1),
                "fma": (lambda a, b: (a * b).abs() + a.abs(), 0)}


def rtol(dtype) -> float:
    return 1e-12 if dtype == torch.float64 else 32 * EPS32


def assert_close(got, ref, tol, what):
    got, ref = got.double().cpu(), ref.double().cpu()
    same = (got == ref) | (got.isnan() & ref.isnan())
    bad = ~(same | ((got - ref).abs() <= tol))
    assert not bad.any(), (f"{what}: got {got[bad].tolist()[:4]} want {ref[bad].tolist()[:4]} "
                           f"tol {torch.as_tensor(tol).expand_as(got)[bad].tolist()[:4]}")


def assert_identical(got, ref, what):
    assert torch.equal(got.isnan(), ref.isnan()), what
    assert torch.equal(got.nan_to_num(), ref.nan_to_num()), what


def check_unary(ext, name, values, dtype, device, exact_values=True):
    fn, _, value_scale, slope_scale, *slope_fn = UNARY[name]
    x = torch.tensor(values, dtype=dtype)
    out = ext.unary(name, x.to(device)).cpu()
    xr = x.double().requires_grad_()
    ref = fn(xr)
    (slope,) = torch.autograd.grad(ref.sum(), xr)
    ref = ref.detach()
    if slope_fn:
        slope = slope_fn[0](x.double())
    tol = rtol(dtype)
    # A subnormal result keeps fewer significant bits (the device's libm rounds them its own way):
    # its error is measured against the smallest normal number, not against itself.
    tiny = torch.finfo(dtype).tiny
    value_tol = tol * (ref.abs().clamp_min(tiny) + value_scale)
    assert_close(out[1], ref, value_tol, f"{name} value")
    assert_close(out[2], slope, tol * (slope.abs().clamp_min(tiny) + slope_scale),
                 f"{name} derivative")
    assert_identical(out[3], -0.5 * out[2], f"{name}: lane 1 (seed -0.5)")
    if exact_values:  # the dual's value is the plain function's
        assert_identical(out[0], out[1], f"{name}: plain vs dual value")
    else:
        assert_close(out[0], ref, value_tol, f"{name} plain value")


def check_binary(ext, name, a_values, b_values, dtype, device, exact_values=True):
    fn = BINARY[name][0]
    a = torch.tensor(a_values, dtype=dtype)
    b = torch.tensor(b_values, dtype=dtype)
    out = ext.binary(name, a.to(device), b.to(device)).cpu()
    if name in COMPARISONS:
        ref = fn(a, b).to(dtype)
        for row in (0, 1, 4, 6):
            assert torch.equal(out[row], ref), f"{name}: row {row}"
        assert not out[[2, 3, 5, 7]].any(), f"{name}: comparisons carry no derivative"
        return
    ar = a.double().requires_grad_()
    br = b.double().requires_grad_(name != "pow_int")
    ref = fn(ar, br)
    grads = torch.autograd.grad(ref.sum(), [ar, br] if name != "pow_int" else [ar])
    da, db = grads[0], (grads[1] if name != "pow_int" else torch.zeros_like(a.double()))
    ref = ref.detach()
    # Forward mode: an infinite slope times the other argument's zero tangent is NaN (as in Stan's
    # fvar), where reverse mode gives the other partial alone.
    nan = torch.tensor(math.nan, dtype=torch.float64)
    da_dd, db_dd = torch.where(db.isinf(), nan, da), torch.where(da.isinf(), nan, db)
    scale_fn, slope_scale = BINARY_SCALE.get(name, (lambda a, b: 0, 0))
    tol = rtol(dtype)
    vtol = tol * (ref.abs() + scale_fn(a.double(), b.double()))
    assert_close(out[1], ref, vtol, f"{name} value")
    assert_close(out[2], da_dd, tol * (da.abs() + slope_scale), f"{name} d/da")
    assert_close(out[3], db_dd, tol * (db.abs() + slope_scale), f"{name} d/db")
    if exact_values:  # mixed forms and the plain function compute the same numbers
        for row in (0, 4, 6):
            assert_identical(out[row], out[1], f"{name}: row {row} vs the dual's value")
        assert_close(out[5], da, tol * (da.abs() + slope_scale), f"{name} Dual op scalar d/da")
        assert_close(out[7], db, tol * (db.abs() + slope_scale), f"{name} scalar op Dual d/db")
        finite = ~(da.isinf() | db.isinf())
        assert_identical(out[5][finite], out[2][finite], f"{name}: Dual op scalar d/da")
        assert_identical(out[7][finite], out[3][finite], f"{name}: scalar op Dual d/db")
    else:
        for row in (0, 4, 6):
            assert_close(out[row], ref, vtol, f"{name} row {row}")
        assert_close(out[5], da, tol * (da.abs() + slope_scale), f"{name} mixed d/da")
        assert_close(out[7], db, tol * (db.abs() + slope_scale), f"{name} mixed d/db")


def width_of(dtype):
    return 64 if dtype == torch.float64 else 32


DTYPES = [torch.float64, torch.float32]


def test_op_lists_match(cpu_ext):
    assert list(cpu_ext.unary_names()) == list(UNARY)
    assert list(cpu_ext.binary_names()) == list(BINARY)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(UNARY))
@settings(max_examples=20)
@given(data=st.data())
def test_unary_against_autograd(cpu_ext, name, dtype, data):
    domain = UNARY[name][1](width_of(dtype))
    values = data.draw(st.lists(domain, min_size=1, max_size=16))
    check_unary(cpu_ext, name, values, dtype, "cpu")


def comparison_pairs(width):  # ties and signed zeros often, as well as arbitrary pairs
    grid = st.sampled_from([-2.0, -0.0, 0.0, 0.5, 1.0, 3.0])
    return st.one_of(st.tuples(grid, grid), reals(-1e30, 1e30, width).map(lambda v: (v, v)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(BINARY))
@settings(max_examples=20)
@given(data=st.data())
def test_binary_against_autograd(cpu_ext, name, dtype, data):
    w = width_of(dtype)
    if name in COMPARISONS:
        pair = st.one_of(comparison_pairs(w), st.tuples(reals(-1e30, 1e30, w),
                                                        reals(-1e30, 1e30, w)))
    else:
        da, db = BINARY[name][1](w)
        pair = st.tuples(da, db)
        if name in ("fmin", "fmax", "log_sum_exp", "where"):  # ties: which derivative passes
            pair = st.one_of(pair, da.map(lambda v: (v, v)))
    pairs = data.draw(st.lists(pair, min_size=1, max_size=16))
    check_binary(cpu_ext, name, [p[0] for p in pairs], [p[1] for p in pairs], dtype, "cpu")


@pytest.mark.parametrize("dtype", DTYPES)
def test_stable_forms_at_large_arguments(cpu_ext, dtype):
    big = 1e300 if dtype == torch.float64 else 1e30  # exp(big) overflows: naive forms give inf/NaN
    xs = [-big, -1e4, -50.0, 50.0, 1e4, big]  # softplus(-50) is still a normal float32
    for name in ("softplus", "log_sigmoid", "sigmoid"):
        check_unary(cpu_ext, name, xs, dtype, "cpu")
    x = torch.tensor([-big, -1e4, 1e4, big], dtype=dtype)  # e^-|x| = 0: exact limits
    out = cpu_ext.unary("softplus", x)
    assert torch.equal(out[1], x.clamp(min=0)) and torch.equal(out[2], (x > 0).to(dtype))
    out = cpu_ext.unary("log_sigmoid", x)
    assert torch.equal(out[1], x.clamp(max=0)) and torch.equal(out[2], (x < 0).to(dtype))
    a = [big, -big, 1e4, -1e4, 1e4]
    b = [big * 0.5, -big * 0.5, 1e4 - 1.0, -1e4 + 2.0, -1e4]
    check_binary(cpu_ext, "log_sum_exp", a, b, dtype, "cpu")


@pytest.mark.parametrize("dtype", DTYPES)
def test_edge_conventions(cpu_ext, dtype):
    inf, nan = math.inf, math.nan
    rows = lambda name, a, b: cpu_ext.binary(name, torch.tensor(a, dtype=dtype),
                                             torch.tensor(b, dtype=dtype))
    # log_sum_exp: -inf is the identity; equal arguments (also +-inf) give a + log 2, weights 1/2.
    out = rows("log_sum_exp", [-inf, 3.0, -inf, inf, inf, nan], [3.0, -inf, -inf, inf, 1.0, 1.0])
    want = torch.tensor([3.0, 3.0, -inf, inf, inf, nan], dtype=dtype)
    assert_identical(out[1], want, "log_sum_exp values")
    assert_identical(out[2], torch.tensor([0.0, 1.0, 0.5, 0.5, 1.0, nan], dtype=dtype), "d/da")
    assert_identical(out[3], torch.tensor([1.0, 0.0, 0.5, 0.5, 0.0, nan], dtype=dtype), "d/db")
    # fmax/fmin with NaN, ties, and pow at 0: torch's conventions.
    for name in ("fmax", "fmin"):
        check_binary(cpu_ext, name, [nan, 1.0, 2.0, nan], [1.0, nan, 2.0, nan], dtype, "cpu")
    check_binary(cpu_ext, "pow", [0.0] * 5, [0.0, 0.5, 1.0, 2.0, 3.0], dtype, "cpu")
    check_binary(cpu_ext, "pow_int", [0.0] * 4 + [-2.0] * 3, [0.0, 1.0, 2.0, -1.0, 2.0, 3.0, -3.0],
                 dtype, "cpu")
    check_unary(cpu_ext, "abs", [0.0, -0.0], dtype, "cpu")
    assert cpu_ext.unary("abs", torch.tensor([nan], dtype=dtype)).isnan().all()  # NaN stays NaN


# ---- digamma ----
@settings(max_examples=50)
@given(xs=st.lists(st.one_of(log_uniform(1e-6, 1e8, 64), negative_nonintegers(64)), min_size=1,
                   max_size=8))
def test_digamma_against_scipy(cpu_ext, xs):
    for x in xs:
        ref = float(scipy.special.digamma(x))
        assert abs(cpu_ext.digamma(x) - ref) <= 1e-13 * (abs(ref) + 4), x
        x32 = float(np.float32(x))
        ref32 = float(scipy.special.digamma(x32))
        assert abs(cpu_ext.digamma_f32(x32) - ref32) <= 32 * EPS32 * (abs(ref32) + 4), x32


def test_digamma_poles_and_limits(cpu_ext):
    xs = [0.0, -0.0, -1.0, -7.0, -math.inf, math.inf, math.nan, 1.0, 1.4616321449683622]
    ref = torch.special.digamma(torch.tensor(xs, dtype=torch.float64))
    for x, r in zip(xs, ref.tolist()):
        for got in (cpu_ext.digamma(x), cpu_ext.digamma_f32(x)):
            assert (math.isnan(got) and math.isnan(r)) or got == r or \
                abs(got - r) <= 1e-6 * (1 + abs(r)), x


# ---- value_and_gradient on user-style models ----
Y = torch.tensor([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0], dtype=torch.float64)
SIGMA = torch.tensor([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0], dtype=torch.float64)


def logistic_data(p_cols: int, n_rows: int = 20):
    gen = torch.Generator().manual_seed(1000 + p_cols)
    X = torch.randn(n_rows, p_cols, generator=gen, dtype=torch.float64)
    labels = (torch.rand(n_rows, generator=gen) < 0.5).long()
    return X, labels


def eight_schools_terms(x, data, absolute=False):
    y, sigma = data["y"], data["sigma"]
    theta, mu, log_tau = x[:8], x[8], x[9]
    tau = torch.exp(log_tau)
    if absolute:  # x arrives as |x|; every term >= 0 and increasing in each coordinate
        z = (y.abs() + mu + tau * theta) / sigma
        head = torch.stack([0.5 * (mu / 5) ** 2, torch.log1p((tau / 5) ** 2), log_tau])
        return torch.cat([head, 0.5 * theta ** 2, 0.5 * z ** 2])
    z = (y - (mu + tau * theta)) / sigma
    head = torch.stack([-0.5 * (mu / 5) ** 2, -torch.log1p((tau / 5) ** 2), log_tau])
    return torch.cat([head, -0.5 * theta ** 2, -0.5 * z ** 2])


def logistic_terms(x, data, absolute=False):
    X, labels = data["X"], data["labels"]
    alpha, beta = x[0], x[1:]
    if absolute:  # x arrives as |x|; the row sums' rounding through log_sigmoid' and ''
        eta = alpha + X.abs() @ beta
        rows = -F.logsigmoid(-eta) + 0.125 * X.shape[1] * eta ** 2
        return torch.cat([(0.5 * (alpha / 2.5) ** 2).reshape(1), 0.5 * beta ** 2, rows])
    eta = alpha + X @ beta
    rows = torch.where(labels == 1, F.logsigmoid(eta), F.logsigmoid(-eta))
    return torch.cat([(-0.5 * (alpha / 2.5) ** 2).reshape(1), -0.5 * beta ** 2, rows])


def all_functions_ref(x, data):
    lp = (F.softplus(x[0], threshold=1e9) + torch.logaddexp(x[1], x[2])
          + torch.lgamma(torch.exp(x[3]) + 0.5) + torch.pow(torch.exp(x[4]), x[5]))
    lp = lp + torch.sqrt(1 + x[6] ** 2) + torch.tanh(x[7]) * torch.sin(x[8]) + torch.cos(x[9])
    lp = lp + torch.expm1(x[10] / 3) + torch.log1p(torch.exp(x[0]))
    lp = lp + torch.sigmoid(x[1]) * F.logsigmoid(x[2]) + torch.abs(x[3] - x[4])
    lp = lp + torch.fmax(x[5], x[6]) + torch.fmin(x[7], torch.tensor(0.5, dtype=x.dtype))
    lp = lp + x[8] ** 2 + torch.pow(2.0, x[9]) + torch.log(1 + x[10] ** 2) + x[0].abs() / 4
    lp = lp - x[1] / (2 + x[2] ** 2) + torch.logaddexp(x[3], torch.zeros((), dtype=x.dtype))
    lp = lp + torch.fmax(torch.ones((), dtype=x.dtype), x[4])
    lp = lp + 2 * torch.fmin(torch.tensor(0.25, dtype=x.dtype), x[5])
    lp = lp + x[7] * x[8] + x[9] + (x[0] * 0.5 + 1) + (2 * x[1] + x[2])
    if x[6] > 0.5:
        lp = lp * 1.5
    for i in range(11, x.shape[0]):
        lp = (lp + F.softplus(x[i], threshold=1e9) * x[i - 1] - 0.25 * x[i] ** 2) / 1.0625
    return lp


def model_data(name, dim):
    X, labels = logistic_data(dim - 1) if name == "logistic" else logistic_data(1)
    return {"y": Y, "sigma": SIGMA, "X": X, "labels": labels}


TERMS = {"eight_schools": eight_schools_terms, "logistic": logistic_terms}
MODELS = [("eight_schools", 10), ("logistic", 10), ("logistic", 16), ("all_functions", 16),
          ("all_functions", 19)]
# all_functions (no additive error bound) in float64 only.
MODEL_CASES = [(n, d, t) for n, d in MODELS for t in (torch.float64, torch.float32)
               if n != "all_functions" or t == torch.float64]


def run_gradient(ext, name, x, width, data, device):
    dtype = x.dtype
    return ext.gradient(name, x.to(device), width, data["y"].to(device, dtype),
                        data["sigma"].to(device, dtype), data["X"].to(device, dtype),
                        data["labels"].to(device)).cpu()


def check_gradient(ext, name, dim, points, dtype, device, exact=True):
    """points [n, dim]: each W's gradient and value against autograd (float64 at the same inputs,
    data rounded to dtype first); on the CPU all W agree bitwise (lanes do identical arithmetic)."""
    data = model_data(name, dim)
    ref_data = {k: (v.to(dtype).double() if v.is_floating_point() else v) for k, v in data.items()}
    x = points.to(dtype)
    widths = sorted({1, 3, 8, ext.dual_width(dim)})
    outs = [run_gradient(ext, name, x, w, data, device) for w in widths]
    n_terms = {"eight_schools": 19, "logistic": dim + data["X"].shape[0]}.get(name)
    for i, point in enumerate(x.double()):
        xr = point.clone().requires_grad_()
        if name in TERMS:
            value = TERMS[name](xr, ref_data).sum()
            # Absolute-mode terms are >= 0 and increasing, so sum_t |d term_t / dx_k| is the
            # gradient of their sum.
            xa = point.abs().requires_grad_()
            mag_value = TERMS[name](xa, ref_data, absolute=True).sum()
            (mag_grad,) = torch.autograd.grad(mag_value, xa)
            mag_value = mag_value.detach()
            c = 2 * (n_terms + 16) * (EPS32 if dtype == torch.float32 else 2.0 ** -52)
            value_tol, grad_tol = c * mag_value, c * mag_grad
        else:
            assert dtype == torch.float64
            value = all_functions_ref(xr, {"dim": dim})
        (grad,) = torch.autograd.grad(value, xr)
        value = value.detach()
        if name not in TERMS:
            value_tol = 1e-12 * (1 + value.abs())
            grad_tol = 1e-12 * (1 + grad.abs())
        for w, out in zip(widths, outs):
            assert_close(out[i, 1], value, value_tol, f"{name} dim {dim} W {w} value")
            assert_close(out[i, 2:], grad, grad_tol, f"{name} dim {dim} W {w} gradient")
            if exact:
                assert_identical(out[i, 2:], outs[0][i, 2:], f"{name}: W {w} vs W {widths[0]}")
                assert_identical(out[i, 1], outs[0][i, 1], f"{name}: W {w} value")
        if exact and dtype == torch.float64:  # plain T = double does the dual's value arithmetic
            assert_identical(outs[0][i, 0], outs[0][i, 1], f"{name}: plain vs dual value")
        elif name in TERMS:
            assert_close(outs[0][i, 0], value, value_tol, f"{name}: plain value")


@pytest.mark.parametrize("name,dim,dtype", MODEL_CASES, ids=lambda v: str(v).replace("torch.", ""))
@settings(max_examples=10)
@given(data=st.data())
def test_value_and_gradient_against_autograd(cpu_ext, name, dim, dtype, data):
    points = data.draw(arrays(np.float64, (3, dim), elements=reals(-2.0, 2.0, width_of(dtype))))
    check_gradient(cpu_ext, name, dim, torch.from_numpy(points), dtype, "cpu")


def test_dual_width_rule(cpu_ext):
    assert [cpu_ext.dual_width(d) for d in (0, 1, 10, 16, 17, 26, 1000)] == [1, 1, 10, 16, 8, 8, 8]


# ---- nvcc ----
def find_nvcc():
    for candidate in (shutil.which("nvcc"),
                      os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


@pytest.mark.skipif(find_nvcc() is None, reason="no nvcc (CUDA toolkit) on this machine")
def test_headers_compile_with_nvcc(tmp_path):
    """dual.h + target_functions.h in a __global__ kernel for float, double, Dual<float, 8> and
    Dual<double, 10>, with every warning an error (PTX only: the device front end is what the
    headers must pass; ptxas adds nothing about them)."""
    cmd = [find_nvcc(), "-std=c++20", "-arch=compute_90", "-code=compute_90",
           "--Werror", "all-warnings", f"-I{ROOT / 'csrc'}", f"-I{CPP}", "-c",
           str(CPP / "dual_device_check.cu"), "-o", str(tmp_path / "check.o")]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]


def fma_rounds_once(ext, device):
    """fma(a, b, a) at a = 1 + u, b = -(1 + u), u = 2^-12 (float) or 2^-27 (double): a * b is
    -(1 + 2u + u^2), so a * b + a is -(u + u^2), a number of the dtype, where rounding the product
    first (to -(1 + 2u), a tie to even) gives -u. Every form (plain, Dual, mixed) rounds once."""
    for dtype, u in ((torch.float32, 2.0 ** -12), (torch.float64, 2.0 ** -27)):
        a = torch.tensor([1 + u], dtype=dtype)
        out = ext.binary("fma", a.to(device), (-a).to(device)).cpu()
        assert float(a * -a + a) == -u  # the two roundings' answer, for contrast
        for row in (0, 1, 4, 6):
            assert float(out[row][0]) == -(u + u * u), (dtype, row, float(out[row][0]))


def test_fma_rounds_once(cpu_ext):
    fma_rounds_once(cpu_ext, "cpu")


# ---- packs of chains: Dual<Pack, 2> lane by lane is Dual<T, 2> (vector_chains=True) ----
# Inputs where the rules choose: zeros of both signs, ties, infinities, NaN, pow's x = 0, and
# ordinary values; every pair of them for binary operations. float32 packs compute exp, log and
# log1p by float_transcendentals.h where this extension's plain float calls libm (a CppTarget
# with vector_chains=True uses float_transcendentals.h for both), so in float32 only the functions
# that reach none of the three are compared.
PACK_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.5, 3.0, 1e-3, 40.0, -40.0, math.inf, -math.inf,
              math.nan]
FLOAT_TRANSCENDENTAL_FREE = {"neg", "sqrt", "abs", "fabs", "sin", "cos", "lgamma", "add", "sub",
                             "mul", "div", "fmin", "fmax", "log_sum_exp", "fma", "lt", "le", "gt",
                             "ge", "eq", "ne", "where"}


def assert_same_bits(got, want, what):
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), what
    ints = torch.int64 if got.dtype == torch.float64 else torch.int32
    assert torch.equal(got[~nan].view(ints), want[~nan].view(ints)), what  # -0 is not 0


def _pack_dtypes(name):
    return [torch.float64] + ([torch.float32] if name in FLOAT_TRANSCENDENTAL_FREE else [])


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_in_packs_holds_the_scalar_bits(cpu_ext, name):
    for dtype in _pack_dtypes(name):
        random = torch.randn(37, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        x = torch.cat([torch.tensor(PACK_EDGES, dtype=torch.float64), 3 * random]).to(dtype)
        assert_same_bits(cpu_ext.unary_packs(name, x), cpu_ext.unary(name, x)[:4], (name, dtype))


@pytest.mark.parametrize("name", [n for n in BINARY if n != "pow_int"])
def test_binary_in_packs_holds_the_scalar_bits(cpu_ext, name):
    for dtype in _pack_dtypes(name):
        edges = torch.tensor(PACK_EDGES, dtype=torch.float64)
        random = 3 * torch.randn(2, 41, generator=torch.Generator().manual_seed(2),
                                 dtype=torch.float64)
        a = torch.cat([edges.repeat_interleave(len(PACK_EDGES)), random[0]]).to(dtype)
        b = torch.cat([edges.repeat(len(PACK_EDGES)), random[1]]).to(dtype)
        assert_same_bits(cpu_ext.binary_packs(name, a, b), cpu_ext.binary(name, a, b)[:4],
                         (name, dtype))
    assert cpu_ext.pack_lanes(True) >= 2  # the lanes differ within a pack


@pytest.mark.cuda
def test_cuda_functions_and_gradients(cuda_ext):
    fma_rounds_once(cuda_ext, "cuda")
    """The same comparisons on the GPU (device libm: values against autograd, not bitwise)."""
    gen = np.random.default_rng(7)
    for dtype in DTYPES:
        w = width_of(dtype)
        for name, (lo, hi) in CUDA_UNARY_RANGES.items():
            xs = gen.uniform(lo, hi, 512)
            check_unary(cuda_ext, name, np.asarray(xs, np.float32 if w == 32 else np.float64)
                        .astype(np.float64).tolist(), dtype, "cuda", exact_values=False)
        for name, (ra, rb) in CUDA_BINARY_RANGES.items():
            a, b = gen.uniform(*ra, 512), gen.uniform(*rb, 512)
            if name == "pow_int":
                b = np.round(b)
            a, b = (np.asarray(v, np.float32 if w == 32 else np.float64).astype(np.float64)
                    for v in (a, b))
            check_binary(cuda_ext, name, a.tolist(), b.tolist(), dtype, "cuda", exact_values=False)
        for name, dim, _ in (c for c in MODEL_CASES if c[2] == dtype):
            points = torch.from_numpy(gen.uniform(-2, 2, (64, dim)))
            check_gradient(cuda_ext, name, dim, points, dtype, "cuda", exact=False)


CUDA_UNARY_RANGES = {"neg": (-1e3, 1e3), "exp": (-80, 80), "log": (1e-3, 1e6), "log1p": (-0.9, 1e3),
                     "expm1": (-80, 80), "sqrt": (1e-3, 1e6), "abs": (-5, 5), "fabs": (-5, 5),
                     "tanh": (-30, 30), "sin": (-100, 100), "cos": (-100, 100),
                     "lgamma": (1e-2, 1e3), "sigmoid": (-80, 80), "log_sigmoid": (-1e3, 1e3),
                     "softplus": (-1e3, 1e3)}
CUDA_BINARY_RANGES = {"add": ((-1e3, 1e3),) * 2, "sub": ((-1e3, 1e3),) * 2,
                      "mul": ((-1e3, 1e3),) * 2, "div": ((-1e3, 1e3), (0.5, 1e3)),
                      "pow": ((1e-2, 1e2), (-4, 4)), "pow_int": ((-1e2, 1e2), (-4, 4)),
                      "fmin": ((-5, 5),) * 2, "fmax": ((-5, 5),) * 2,
                      "log_sum_exp": ((-50, 50),) * 2, "fma": ((-1e3, 1e3),) * 2,
                      "lt": ((-1, 1),) * 2,
                      "ge": ((-1, 1),) * 2}
