"""fused_hmc.CppTarget (docs/TARGETS.md): a user's C++ log density, compiled and checked.

Reference: posteriordb's eight_schools_noncentered, written independently with torch.distributions
(normalised densities, so it differs from the C++ by a known constant) and differentiated by torch
autograd. Two modules are compiled for the whole file (module-scope fixtures): the TARGETS.md
source in float64 (duals), and a variant reading every kind of data (2-D, 0-d and integer tensors,
a float, an int) with a hand-written gradient in float32. The compile-error
tests stop at the syntax check (about a second each); the data errors need no compiler at all.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fused_hmc
from fused_hmc import CppTarget, cpp_build
from fused_hmc.cpp_target import CHECK_ULPS, CppCheckError, CppCompileError

from ._helpers import run_op

# posteriordb eight_schools data (shared/posteriordb/eight_schools-eight_schools_noncentered.json).
Y = [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]
SIGMA = [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]
DIM = 10
NAMES = [f"theta_trans[{j}]" for j in range(1, 9)] + ["mu", "log_tau"]

# TARGETS.md's example, verbatim.
SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) {
  const T mu = x[8], log_tau = x[9], tau = exp(log_tau);
  T lp = -0.5 * (mu / 5.0) * (mu / 5.0) - log1p((tau / 5.0) * (tau / 5.0)) + log_tau;
  for (int64_t j = 0; j < data.y_size; ++j) {
    const T z = (data.y[j] - (mu + tau * x[j])) / data.sigma[j];
    lp += -0.5 * x[j] * x[j] - 0.5 * z * z;
  }
  return lp;
}
"""

# The same model reading every kind of data: obs [2, J] (row 0 y, row 1 sigma), J (an int), mu_scale
# (a float), tau_scale (a 0-d tensor) and order (an int64 tensor: the schools in another order),
# with a hand-written gradient:
# with m = mu / mu_scale and r = tau / tau_scale: d/dt_j = -t_j + tau z_j / sigma_j,
# d/dmu = -m / mu_scale + sum_j z_j / sigma_j,
# d/dlog_tau = tau (sum_j t_j z_j / sigma_j - (2 r / tau_scale) / (1 + r^2)) + 1.
KINDS_SOURCE = r"""
template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) {
  const int64_t J = data.J;
  const T mu = x[J], log_tau = x[J + 1], tau = exp(log_tau);
  const T m = mu / data.mu_scale, r = tau / data.tau_scale[0];
  T lp = -0.5 * m * m - log1p(r * r) + log_tau;
  for (int64_t k = 0; k < data.order_size; ++k) {
    const int64_t j = data.order[k];
    const T z = (data.obs[j] - (mu + tau * x[j])) / data.obs[data.obs_shape[1] + j];
    lp += -0.5 * x[j] * x[j] - 0.5 * z * z;
  }
  return lp;
}

template <typename T, typename Data>
FUSED_HMC_HD T log_density_and_gradient(const T* x, T* grad, const Data& data) {
  const int64_t J = data.J;
  const T mu = x[J], log_tau = x[J + 1], tau = exp(log_tau);
  const T m = mu / data.mu_scale, r = tau / data.tau_scale[0];
  T lp = -0.5 * m * m - log1p(r * r) + log_tau;
  T d_mu = -m / data.mu_scale, d_tau = -(2.0 * r / data.tau_scale[0]) / (1.0 + r * r);
  for (int64_t k = 0; k < data.order_size; ++k) {
    const int64_t j = data.order[k];
    const T sigma = data.obs[data.obs_shape[1] + j];
    const T z = (data.obs[j] - (mu + tau * x[j])) / sigma;
    lp += -0.5 * x[j] * x[j] - 0.5 * z * z;
    grad[j] = -x[j] + tau * z / sigma;
    d_mu += z / sigma;
    d_tau += x[j] * z / sigma;
  }
  grad[J] = d_mu;
  grad[J + 1] = tau * d_tau + 1.0;
  return lp;
}
"""
MU_SCALE, TAU_SCALE = 4.0, 3.0


def kinds_data(y=Y, sigma=SIGMA) -> dict:
    return {"obs": torch.tensor([y, sigma], dtype=torch.float64), "J": 8, "mu_scale": MU_SCALE,
            "tau_scale": torch.tensor(TAU_SCALE, dtype=torch.float64),
            "order": torch.tensor([3, 1, 4, 0, 7, 5, 2, 6])}


def log_prob(x: torch.Tensor, data: dict) -> torch.Tensor:
    """posteriordb's model block with normalised densities, plus the Jacobian of tau = exp(log_tau);
    data: y, sigma (posteriordb's prior scales 5), or kinds_data's obs and scales."""
    d = torch.distributions
    theta_trans, mu, log_tau = x[:8], x[8], x[9]
    tau = log_tau.exp()
    y, sigma = (data["y"], data["sigma"]) if "y" in data else data["obs"]
    mu_scale, tau_scale = (torch.as_tensor(data.get(k, 5.0), dtype=x.dtype)  # not float32
                           for k in ("mu_scale", "tau_scale"))
    zero, one = torch.zeros((), dtype=x.dtype), torch.ones((), dtype=x.dtype)
    return (d.Normal(zero, one).log_prob(theta_trans).sum()
            + d.Normal(mu + tau * theta_trans, sigma).log_prob(y).sum()
            + d.Normal(zero, mu_scale).log_prob(mu) + d.HalfCauchy(tau_scale).log_prob(tau)
            + log_tau)


def normalising_offset(sigma, mu_scale=5.0, tau_scale=5.0) -> float:
    """log_prob - (the C++ log density): 17 Gaussian constants, the sigma_j and the prior scales."""
    return (-17 * 0.5 * math.log(2 * math.pi) - sum(math.log(s) for s in sigma)
            - math.log(mu_scale) - math.log(tau_scale) + math.log(2.0) - math.log(math.pi))


def data(y=Y, sigma=SIGMA) -> dict:
    return {"y": torch.tensor(y, dtype=torch.float64),
            "sigma": torch.tensor(sigma, dtype=torch.float64)}


def reference(x: torch.Tensor, d: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(log_prob [n], autograd gradient [n, dim]) in float64 at the rows of x."""
    d64 = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
           for k, v in d.items()}
    values, grads = [], []
    for row in x.double():
        row = row.clone().requires_grad_(True)
        lp = log_prob(row, d64)
        values.append(lp.detach())
        grads.append(torch.autograd.grad(lp, row)[0])
    return torch.stack(values), torch.stack(grads)


def points(n: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    return (1.5 * torch.randn(n, DIM, generator=torch.Generator().manual_seed(seed),
                              dtype=torch.float64)).to(dtype)


@pytest.fixture(scope="module")
def eight_schools() -> CppTarget:
    """TARGETS.md's source, float64, gradient by duals (compiled once here)."""
    target = CppTarget(SOURCE, DIM, data=data(), names=NAMES, log_prob=log_prob)
    target.log_density(points(1, 0))
    return target


@pytest.fixture(scope="module")
def eight_schools_hand32() -> CppTarget:
    """KINDS_SOURCE (every kind of data, a hand-written gradient), float32 (compiled once here)."""
    target = CppTarget(KINDS_SOURCE, DIM, data=kinds_data(), names=NAMES, log_prob=log_prob,
                       gradient=True)
    target.log_density(points(1, 0, torch.float32))
    return target


# -- values and gradients against torch autograd ---------------------------------------------


def test_float64_value_and_dual_gradient_equal_autograd(eight_schools):
    x = points(64, 1)
    value, grad = eight_schools.log_density_and_gradient(x)
    ref_value, ref_grad = reference(x, data())
    assert value.dtype == torch.float64 and value.shape == (64,) and grad.shape == (64, DIM)
    # The C++ drops the normalising constants, which are known exactly.
    offset = normalising_offset(SIGMA)
    assert torch.allclose(value + offset, ref_value, rtol=1e-13, atol=1e-12)
    assert torch.allclose(grad, ref_grad, rtol=1e-12, atol=1e-12)
    assert torch.equal(eight_schools.log_density(x), value)
    assert torch.equal(eight_schools.gradient(x), grad)


def _derived_tolerance(x64, ref_value, ref_grad, dtype):
    """check()'s bound: CHECK_ULPS eps(dtype) times the size of the summed terms,
    s = 1 + |lp| + sum_j |x_j g_j| (a float32 evaluation rounds a few dozen times per term)."""
    eps = torch.finfo(dtype).eps
    s = 1 + ref_value.abs() + (x64 * ref_grad).abs().sum(dim=1)
    return CHECK_ULPS * eps * s, CHECK_ULPS * eps * (1 + ref_grad.abs().amax(dim=1) + s)


def test_float32_hand_and_dual_gradients_within_the_derived_tolerance(eight_schools_hand32):
    x = points(64, 2, torch.float32)
    ref_value, ref_grad = reference(x, kinds_data())  # float64 at the float32 points; the data
    tol_value, tol_grad = _derived_tolerance(x.double(), ref_value, ref_grad, torch.float32)
    offset = normalising_offset(SIGMA, MU_SCALE, TAU_SCALE)  # are exact in float32
    for value, grad in (eight_schools_hand32.log_density_and_gradient(x),
                        eight_schools_hand32.dual_log_density_and_gradient(x)):
        assert value.dtype == torch.float32 and grad.dtype == torch.float32
        assert ((value.double() + offset - ref_value).abs() <= tol_value).all()
        assert ((grad.double() - ref_grad).abs() <= tol_grad[:, None]).all()
    # The bound is not vacuous: a wrong prior scale (4 -> 4.1 for mu) breaks it.
    wrong = ref_grad.clone()
    wrong[:, 8] += x[:, 8].double() * (1 / MU_SCALE**2 - 1 / 4.1**2)
    assert not ((eight_schools_hand32.gradient(x).double() - wrong).abs()
                <= tol_grad[:, None]).all()


@settings(max_examples=20)
@given(y=st.lists(st.floats(-50, 50), min_size=8, max_size=8),
       sigma=st.lists(st.floats(0.5, 30), min_size=8, max_size=8),
       seed=st.integers(0, 2**31 - 1))
def test_new_data_values_reuse_the_build_and_are_read(eight_schools, y, sigma, seed):
    target = CppTarget(SOURCE, DIM, data=data(y, sigma))
    x = points(8, seed)
    value, grad = target.log_density_and_gradient(x)
    ref_value, ref_grad = reference(x, data(y, sigma))
    assert target.module(torch.float64, torch.device("cpu")) is eight_schools.module(
        torch.float64, torch.device("cpu"))
    assert torch.allclose(value + normalising_offset(sigma), ref_value, rtol=1e-12, atol=1e-10)
    assert torch.allclose(grad, ref_grad, rtol=1e-11, atol=1e-11)


# -- check() -----------------------------------------------------------------------------------


def test_check_passes_with_the_normalising_offset(eight_schools, eight_schools_hand32):
    report = eight_schools.check(n=32, seed=1)
    assert report.points == 32 and report.dtype == torch.float64
    assert report.worst_value < 1 and report.worst_gradient < 1 and report.worst_dual_vs_hand == 0
    assert report.offset == pytest.approx(-normalising_offset(SIGMA), abs=1e-10)
    report = eight_schools_hand32.check(n=32, seed=1, dtype=torch.float32)
    assert max(report.worst_value, report.worst_gradient, report.worst_dual_vs_hand) < 1


def test_check_fails_on_a_value_that_disagrees(eight_schools):
    def wrong_prior(x, d):  # mu ~ N(0, 6) instead of N(0, 5): not a constant apart
        return log_prob(x, d) + 0.5 * (x[8] / 5.0) ** 2 - 0.5 * (x[8] / 6.0) ** 2

    target = CppTarget(SOURCE, DIM, data=data(), names=NAMES, log_prob=wrong_prior)
    with pytest.raises(CppCheckError, match=r"log_density disagrees with log_prob: at x\[\d+\] = "
                                            r"theta_trans\[1\]=.*mu=.*worst of 16 points"):
        target.check(n=16, seed=3)


def test_check_fails_on_a_gradient_that_disagrees(eight_schools):
    def wrong_gradient(x, d):  # the same value, d/dmu off by 1e-3
        bump = 1e-3 * x[8]
        return log_prob(x, d) + (bump - bump.detach())

    target = CppTarget(SOURCE, DIM, data=data(), names=NAMES, log_prob=wrong_gradient)
    with pytest.raises(CppCheckError, match=r"the gradient disagrees with log_prob's autograd "
                                            r"gradient: at x\[\d+\] = .* d log p / dx\[8\] \(mu\)"):
        target.check(n=8)


def test_check_compares_the_hand_written_gradient_with_the_duals(eight_schools_hand32,
                                                                monkeypatch):
    target = CppTarget(KINDS_SOURCE, DIM, data=kinds_data(), gradient=True)  # no log_prob
    assert target.check(n=8, dtype=torch.float32).worst_dual_vs_hand < 1
    duals = target.dual_log_density_and_gradient

    def shifted(x):  # as if the hand-written d/dlog_tau were off by 1e-2
        value, grad = duals(x)
        grad[:, 9] += 1e-2
        return value, grad

    monkeypatch.setattr(target, "dual_log_density_and_gradient", shifted)
    with pytest.raises(CppCheckError, match=r"dual-number gradient.*dx\[9\]"):
        target.check(n=8, dtype=torch.float32)


def test_check_needs_a_reference():
    with pytest.raises(ValueError, match="log_prob"):
        CppTarget(SOURCE, DIM, data=data()).check()


# -- the disk cache ----------------------------------------------------------------------------


def test_a_second_construction_loads_from_disk_without_compiling(eight_schools, monkeypatch,
                                                                 capfd):
    spec = eight_schools.build_spec(torch.float64, "cpu")
    name = cpp_build.build_name(spec, cpp_build.generated_files(spec))
    library = next(fused_hmc._build.build_directory(name).glob(f"{name}*.so"))
    mtime = library.stat().st_mtime_ns
    capfd.readouterr()
    monkeypatch.setattr(cpp_build, "_modules", {})  # as in a new process: only the disk cache
    target = CppTarget(SOURCE, DIM, data=data([y + 1 for y in Y], SIGMA))
    x = points(4, 5)
    assert torch.allclose(target.log_density(x) + normalising_offset(SIGMA),
                          reference(x, data([y + 1 for y in Y], SIGMA))[0], rtol=1e-12)
    assert "compiling" not in capfd.readouterr().err
    assert library.stat().st_mtime_ns == mtime


def test_the_build_name_hashes_the_signature_not_the_values():
    def name(**changes):
        fields = changes.pop("fields", CppTarget(SOURCE, DIM, data=data())._fields)
        args = dict(source=SOURCE, source_name="<source>", dim=DIM, scalar="double",
                    device_kind="cpu", fields=fields, user_gradient=False) | changes
        spec = cpp_build.BuildSpec(**args)
        return cpp_build.build_name(spec, cpp_build.generated_files(spec))

    base = name()
    assert name(fields=CppTarget(SOURCE, DIM, data=data([0.0] * 8, [1.0] * 8))._fields) == base
    more = CppTarget(SOURCE, DIM, data={**data(), "J": 8})._fields
    for other in (name(scalar="float"), name(device_kind="cuda"), name(dim=11), name(fields=more),
                  name(source=SOURCE + "\n// edited\n"), name(user_gradient=True)):
        assert other != base


# -- errors --------------------------------------------------------------------------------------

BROKEN_ON_LINE_3 = """template <typename T, typename Data>
FUSED_HMC_HD T log_density(const T* x, const Data& data) {
  T lp = -0.5 * x[0] * x[0] + undefined_thing;
  return lp;
}
"""


def test_a_compile_error_names_the_users_line_and_the_compilers_message():
    target = CppTarget(BROKEN_ON_LINE_3, 1)
    with pytest.raises(CppCompileError) as info:
        target.log_density(torch.zeros(2, 1, dtype=torch.float64))
    message = str(info.value)
    assert "<source>:3:" in message and "undefined_thing" in message
    assert "was not declared" in message
    assert "    3 |   T lp = -0.5 * x[0] * x[0] + undefined_thing;" in message
    assert info.value.log_path.is_file() and "undefined_thing" in info.value.log_path.read_text()
    with pytest.raises(CppCompileError) as again:  # remembered: no second compile
        CppTarget(BROKEN_ON_LINE_3, 1).log_density(torch.zeros(1, 1, dtype=torch.float64))
    assert again.value is info.value


def test_a_misspelt_data_member_lists_the_data():
    source = SOURCE.replace("data.sigma[j]", "data.sigmas[j]")
    with pytest.raises(CppCompileError, match=r"(?s)<source>:7:.*sigmas.*data members are: "
                                              r"sigma \(tensor\), y \(tensor\)"):
        CppTarget(source, DIM, data=data()).log_density(points(1, 0))


def test_missing_functions():
    with pytest.raises(ValueError, match="defines no log_density"):
        CppTarget("template <typename T> T f(T x) { return x; }", 1)
    with pytest.raises(ValueError, match="gradient=True, but source defines no "
                                         "log_density_and_gradient"):
        CppTarget(SOURCE, DIM, data=data(), gradient=True)
    misnamed = SOURCE.replace("T log_density(", "T logdensity(") + "// log_density\n"
    with pytest.raises(CppCompileError, match=r"(?s)log_density.*the source must define "
                                              r"template <typename T, typename Data>"):
        CppTarget(misnamed, DIM, data=data()).log_density(points(1, 0))
    only_mentioned = SOURCE + "// log_density_and_gradient: later\n"
    with pytest.raises(CppCompileError, match=r"(?s)gradient=True: the source must define"):
        CppTarget(only_mentioned, DIM, data=data(), gradient=True).log_density(points(1, 0))


@pytest.mark.parametrize("value, error, match", [
    (torch.tensor([1.0, math.nan]), ValueError, r"data\['v'\] has a non-finite entry nan at "
                                                r"index \[1\]"),
    (torch.tensor([[1.0], [math.inf]]), ValueError, r"non-finite entry inf at index \[1, 0\]"),
    (math.inf, ValueError, r"data\['v'\] = inf is not finite"),
    (torch.tensor([True, False]), TypeError, r"data\['v'\] has dtype torch.bool"),
    (torch.tensor([1j]), TypeError, r"data\['v'\] has dtype torch.complex64"),
    (True, TypeError, r"data\['v'\] is a bool"),
    ("text", TypeError, r"data\['v'\] must be a tensor, float or int"),
    (2**63, ValueError, r"does not fit in int64_t"),
])
def test_bad_data_values(value, error, match):
    with pytest.raises(error, match=match):
        CppTarget(SOURCE, DIM, data={"v": value})


@pytest.mark.parametrize("name, match", [
    ("1x", r"not a C\+\+ identifier"), ("my-name", r"not a C\+\+ identifier"),
    ("", r"not a C\+\+ identifier"), ("class", r"C\+\+ keyword"), ("int", r"C\+\+ keyword"),
    ("__x", "reserved"), ("_X", "reserved"),
    ("Data", "clashes with a name the generated"), ("FHMC_USER_DIM", "clashes"),
    ("NAN", "clashes"), ("y_size", "clashes with the generated member of tensor 'y'"),
    ("y_shape", "tensor 'y'"),
])
def test_bad_data_names(name, match):
    with pytest.raises(ValueError, match=match):
        CppTarget(SOURCE, DIM, data={**data(), name: 1.0})


def test_bad_arguments():
    with pytest.raises(TypeError, match="data names must be str"):
        CppTarget(SOURCE, DIM, data={1: 1.0})
    with pytest.raises(TypeError, match="data must be a dict"):
        CppTarget(SOURCE, DIM, data=[1.0])
    for dim, error in ((0, ValueError), (-3, ValueError), (2.5, TypeError), (True, TypeError),
                       ("10", TypeError)):
        with pytest.raises(error, match="dim"):
            CppTarget(SOURCE, dim)
    with pytest.raises(ValueError, match="names has 9 entries, dim is 10"):
        CppTarget(SOURCE, DIM, names=NAMES[:9])
    with pytest.raises(ValueError, match="duplicates"):
        CppTarget(SOURCE, DIM, names=["a"] * 10)
    with pytest.raises(TypeError, match="source must be a str"):
        CppTarget(b"int x;", DIM)
    with pytest.raises(ValueError, match="source is empty"):
        CppTarget("  \n", DIM)
    with pytest.raises(TypeError, match="log_prob must be callable"):
        CppTarget(SOURCE, DIM, log_prob=3)
    with pytest.raises(TypeError, match="gradient must be True or False"):
        CppTarget(SOURCE, DIM, gradient=1)


def test_bad_positions(eight_schools):
    with pytest.raises(ValueError, match=r"x must have shape \[n, 10\].*got \[3, 9\]"):
        eight_schools.log_density(torch.zeros(3, 9, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"x must have shape \[n, 10\]"):
        eight_schools.gradient(torch.zeros(10, dtype=torch.float64))
    with pytest.raises(TypeError, match="x must be float32 or float64, got torch.int64"):
        eight_schools.log_density(torch.zeros(3, 10, dtype=torch.int64))
    with pytest.raises(TypeError, match="x must be a tensor"):
        eight_schools.log_density([[0.0] * 10])
    # Non-contiguous rows are fine (copied).
    x = points(6, 7).t().contiguous().t()
    assert torch.equal(eight_schools.log_density(x), eight_schools.log_density(x.contiguous()))


def test_validate_start(eight_schools):
    q0 = points(5, 8)
    value, grad = eight_schools.validate_start(q0)
    assert torch.equal(value, eight_schools.log_density(q0))
    assert torch.equal(grad, eight_schools.gradient(q0))
    with pytest.raises(ValueError, match=r"q0 must have shape \[n, 10\] \(dim = 10\), got "
                                         r"\[5, 8\]"):
        eight_schools.validate_start(q0[:, :8])
    bad = q0.clone()
    bad[3, 2] = math.nan
    with pytest.raises(ValueError, match=r"log_density is NaN at 1 of 5 starting points \(chains "
                                         r"\[3\]\); q0\[3\] = "):
        eight_schools.validate_start(bad)
    bad = q0.clone()
    bad[1, 9] = 1000.0  # tau = inf: the Cauchy prior is -inf
    bad[1, :8] = 1.0
    with pytest.raises(ValueError, match=r"log_density is -inf \(zero density\) at 1 of 5.*"
                                         r"chains \[1\]"):
        eight_schools.validate_start(bad)


# -- CUDA: the same source, the same numbers ------------------------------------------------------


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cuda_equals_cpu(dtype):
    target = CppTarget(KINDS_SOURCE, DIM, data=kinds_data(), names=NAMES, log_prob=log_prob,
                       gradient=True)
    x = points(1000, 9, dtype)
    ref_value, ref_grad = reference(x, kinds_data())
    tol_value, tol_grad = _derived_tolerance(x.double(), ref_value, ref_grad, dtype)
    for entry in ("log_density_and_gradient", "dual_log_density_and_gradient"):
        cpu_value, cpu_grad = getattr(target, entry)(x)
        cuda_value, cuda_grad = getattr(target, entry)(x.cuda())
        assert cuda_value.is_cuda and cuda_grad.is_cuda and cuda_value.dtype == dtype
        assert ((cuda_value.cpu().double() - cpu_value.double()).abs() <= tol_value).all()
        assert ((cuda_grad.cpu().double() - cpu_grad.double()).abs() <= tol_grad[:, None]).all()
    assert torch.allclose(target.log_density(x.cuda()).cpu(), cpu_value.to(dtype))
    report = target.check(n=64, dtype=dtype, device="cuda")
    assert max(report.worst_value, report.worst_gradient, report.worst_dual_vs_hand) < 1


@pytest.mark.cuda
def test_a_dense_mass_on_cuda_builds_its_kernels_and_agrees_with_cpu():
    """A CUDA run with mass_matrix="dense" builds the module that has the dense kernels (the
    plain module has none, and its op says so); its warm-up of a pooled dense mass (two slow
    windows, the step size fixed) and draws agree with the CPU's to rounding (device and host
    libm round exp in their own last bits)."""
    target = CppTarget(SOURCE, DIM, data=data())
    q0 = torch.randn(64, DIM, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    kw = dict(target=target, mass_matrix="dense", num_warmup=40, adapt_windows=(5, 10, 5),
              adapt_step_size=False, step_size=0.3, pooled=True, seed=6, progress=False)
    cpu, cuda = [fused_hmc.sample(q0.to(device), 10, **kw) for device in ("cpu", "cuda")]
    torch.testing.assert_close(cuda.inverse_mass.cpu(), cpu.inverse_mass, rtol=1e-7, atol=1e-9)
    torch.testing.assert_close(cuda.samples.cpu(), cpu.samples, rtol=1e-7, atol=1e-9)
    assert not torch.equal(cpu.inverse_mass[0], torch.eye(DIM, dtype=torch.float64))
    cuda_device = torch.device("cuda")
    plain = target.op_name(torch.float64, cuda_device, chains=64)
    assert plain != target.op_name(torch.float64, cuda_device, chains=64, dense_mass=True)
    q = q0[:2].cuda()
    with pytest.raises(ValueError, match="has no CUDA kernels with a dense mass"):
        run_op(q, plain, target.op_tensors(q.dtype, q.device), target.op_scalars(),
               torch.full((1,), 0.3, dtype=torch.float64, device="cuda"),
               torch.eye(DIM, dtype=torch.float64, device="cuda")[None], 0.0, 4, 1, 0, 0, 1,
               mean=torch.zeros(2, DIM, dtype=torch.float64, device="cuda"),
               m2=torch.zeros(2, DIM, dtype=torch.float64, device="cuda"))
