"""The model library against independent references: scipy.stats densities, posteriordb's own data
and definitions, Gauss-Hermite quadrature for the exact moments, torch autograd for the
hand-written and dual gradients, and the C++ sources compiled with g++, against log_prob."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

import fused_hmc.models as models
from fused_hmc.models.posteriordb_files import load_posterior
from fused_hmc.validation.posteriordb import load_reference

from ._model_harness import compile_program, evaluate

ALL = sorted(models.MODELS)


def _points(model, n=6, seed=0, radius=None) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    r = model.init_radius if radius is None else radius
    return (2 * torch.rand(n, model.dim, generator=gen, dtype=torch.float64) - 1) * r


# Independent log densities (numpy/scipy, one point at a time, including the constants).

def _scipy_eight_schools(x):
    raw = load_posterior("eight_schools-eight_schools_noncentered")["data"]
    y, sigma = np.array(raw["y"], float), np.array(raw["sigma"], float)
    tt, mu, log_tau = x[:8], x[8], x[9]
    tau = math.exp(log_tau)
    return (stats.norm.logpdf(tt).sum() + stats.norm.logpdf(y, mu + tau * tt, sigma).sum()
            + stats.norm.logpdf(mu, 0, 5) + stats.halfcauchy.logpdf(tau, 0, 5) + log_tau)


def _diamonds_design():
    raw = load_posterior("diamonds-diamonds")["data"]
    X = np.array(raw["X"], float)
    means = np.array([np.mean(X[:, i]) for i in range(1, raw["K"])])  # Stan's transformed data
    return X[:, 1:] - means, np.array(raw["Y"], float), means


def _scipy_diamonds(x, model):
    """In b; the model's coordinates map to it linearly (b = B x: a constant Jacobian)."""
    Xc, Y, _ = _diamonds_design()
    b, intercept, log_sigma = model.data["B"].numpy() @ x[:24], x[24], x[25]
    sigma = math.exp(log_sigma)
    return (stats.norm.logpdf(b).sum() + stats.t.logpdf(intercept, 3, 8, 10)
            + stats.t.logpdf(sigma, 3, 0, 10) + log_sigma
            + stats.norm.logpdf(Y, intercept + Xc @ b, sigma).sum())


def _scipy_logistic(x, model):
    X, y = model.data["X"].numpy(), model.data["y"].numpy()
    eta = X @ x
    return ((y * special.log_expit(eta) + (1 - y) * special.log_expit(-eta)).sum()
            + stats.norm.logpdf(x, 0, model.data["prior_scale"]).sum())


def _scipy_funnel(x):
    return stats.norm.logpdf(x[0], 0, 3) + stats.norm.logpdf(x[1:], 0, math.exp(x[0] / 2)).sum()


def _scipy_rosenbrock(x, a, b, mu, n1, n2):
    lp = stats.norm.logpdf(x[0], mu, math.sqrt(1 / (2 * a)))
    for j in range(n2):
        parent = x[0]
        for i in range(n1 - 1):
            child = x[1 + j * (n1 - 1) + i]
            lp += stats.norm.logpdf(child, parent ** 2, math.sqrt(1 / (2 * b)))
            parent = child
    return lp


def _scipy_reference(key, model):
    if key == "eight_schools":
        return _scipy_eight_schools
    if key == "diamonds":
        return lambda x: _scipy_diamonds(x, model)
    if key == "logistic_regression":
        return lambda x: _scipy_logistic(x, model)
    if key == "funnel":
        return _scipy_funnel
    d = model.data
    return lambda x: _scipy_rosenbrock(x, d["a"], d["b"], d["mu"], d["n1"], d["n2"])


def _assert_equal_up_to_constant(ours: torch.Tensor, theirs: np.ndarray):
    """log densities at several points agree up to one additive constant: compare differences
    to the first point, to 1e-11 of the largest magnitude (float64 sums of up to 5000 terms)."""
    d_ours = (ours - ours[0]).numpy()
    d_theirs = theirs - theirs[0]
    tol = 1e-11 * max(np.abs(theirs).max(), 1.0)
    np.testing.assert_allclose(d_ours, d_theirs, rtol=0, atol=tol)


@pytest.mark.parametrize("key", ALL)
def test_log_prob_matches_scipy_up_to_a_constant(key):
    model = models.MODELS[key]()
    x = _points(model)
    theirs = np.array([_scipy_reference(key, model)(row.numpy()) for row in x])
    _assert_equal_up_to_constant(model.log_prob(x), theirs)


@pytest.mark.parametrize("key", ALL)
def test_log_prob_batched_and_single_agree_and_gradients_are_finite(key):
    model = models.MODELS[key]()
    x = _points(model, n=4, seed=1).requires_grad_()
    lp = model.log_prob(x)
    assert lp.shape == (4,)
    for i in range(4):
        assert torch.allclose(model.log_prob(x[i]), lp[i], rtol=1e-14, atol=0)
        assert model.log_prob(x[i]).shape == ()
    (grad,) = torch.autograd.grad(lp.sum(), x)
    assert torch.isfinite(grad).all()
    assert len(model.names) == model.dim == len(set(model.names))


@settings(max_examples=8)
@given(n=st.integers(2, 60), k=st.integers(2, 8), seed=st.integers(0, 2**31 - 1),
       prior_scale=st.floats(0.1, 10))
def test_logistic_regression_over_shapes_matches_scipy(n, k, seed, prior_scale):
    model = models.logistic_regression(n, k, seed, prior_scale)
    x = _points(model, n=4, seed=seed % 1000)
    theirs = np.array([_scipy_logistic(row.numpy(), model) for row in x])
    _assert_equal_up_to_constant(model.log_prob(x), theirs)


@settings(max_examples=8)
@given(n1=st.integers(2, 4), n2=st.integers(1, 3), a=st.floats(0.05, 2), b=st.floats(0.1, 10),
       mu=st.floats(-2, 2))
def test_rosenbrock_over_shapes_matches_scipy(n1, n2, a, b, mu):
    model = models.rosenbrock(a, b, mu, n1, n2)
    assert model.dim == 1 + n2 * (n1 - 1) == len(model.exact_mean)
    x = _points(model, n=4, radius=1.5)
    theirs = np.array([_scipy_rosenbrock(row.numpy(), a, b, mu, n1, n2) for row in x])
    _assert_equal_up_to_constant(model.log_prob(x), theirs)


def _hermite_moments(fn, num_vars, nodes=24):
    """E[f(Z)] and E[f(Z)^2] for Z ~ N(0, I_num_vars), by tensor Gauss-Hermite (probabilists')
    quadrature: exact when f is a polynomial of degree < nodes in each variable."""
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    grids = np.meshgrid(*([z] * num_vars), indexing="ij")
    weight = np.prod(np.meshgrid(*([w] * num_vars), indexing="ij"), axis=0)
    values = fn(*grids)
    return (weight * values).sum(), (weight * values ** 2).sum()


@pytest.mark.parametrize("a,b,mu", [(1 / 20, 5.0, 1.0), (0.5, 2.0, -0.7)])
def test_rosenbrock_exact_moments_match_quadrature(a, b, mu):
    """x1 = mu + s Z1, x2 = x1^2 + t Z2, x3 = x2^2 + t Z3 (s^2 = 1/(2a), t^2 = 1/(2b)): polynomials
    in independent normals, so quadrature gives their moments exactly."""
    s, t = math.sqrt(1 / (2 * a)), math.sqrt(1 / (2 * b))
    chain = [lambda z1, z2, z3: mu + s * z1,
             lambda z1, z2, z3: (mu + s * z1) ** 2 + t * z2,
             lambda z1, z2, z3: ((mu + s * z1) ** 2 + t * z2) ** 2 + t * z3]
    expected = [_hermite_moments(f, 3) for f in chain]
    model = models.rosenbrock(a, b, mu, n1=3, n2=2)  # layout x1, (x12, x13), (x22, x23)
    for coord, depth in enumerate([0, 1, 2, 1, 2]):
        m1, m2 = expected[depth]
        assert model.exact_mean[coord].item() == pytest.approx(m1, rel=1e-10)
        assert model.exact_var[coord].item() == pytest.approx(m2 - m1 ** 2, rel=1e-9)
    two_d = models.rosenbrock()
    assert two_d.exact_mean.tolist() == pytest.approx([1.0, 11.0], rel=1e-14)
    assert two_d.exact_var.tolist() == pytest.approx([10.0, 240.1], rel=1e-14)


def test_funnel_exact_moments_match_quadrature():
    """x_i = exp(v / 2) z with v = 3 z1: Var x_i = E[exp(3 z1) z^2], by quadrature."""
    model = models.funnel(dim=5)
    m1, m2 = _hermite_moments(lambda z1, z2: np.exp(3 * z1 / 2) * z2, 2, nodes=60)
    assert model.exact_mean.tolist() == [0.0] * 5
    assert model.exact_var[0].item() == 9.0
    assert m1 == pytest.approx(0, abs=1e-9)
    assert model.exact_var[1:].tolist() == pytest.approx([m2] * 4, rel=1e-10)


def test_eight_schools_constrain_and_reference_point():
    model = models.eight_schools()
    ref = load_reference(model.posteriordb)
    assert model.constrained_names == ref.parameters
    mean = dict(zip(ref.parameters, ref.mean))
    mu, tau = mean["mu"], mean["tau"]
    theta = np.array([mean[f"theta[{j}]"] for j in range(1, 9)])
    x = torch.tensor(list((theta - mu) / tau) + [mu, math.log(tau)], dtype=torch.float64)
    assert torch.isfinite(model.log_prob(x))
    back = model.constrained_values(x).numpy()
    np.testing.assert_allclose(back, ref.mean, rtol=1e-13)
    values = model.constrain(x[None].expand(3, -1))
    assert list(values) == list(model.constrained_names)
    assert values["tau"].shape == (3,)
    assert values["theta[3]"][0].item() == pytest.approx(mu + tau * x[2].item(), rel=1e-14)


def test_diamonds_direct_form_centring_names_and_constrain():
    model = models.diamonds(qr=False)
    Xc, Y, means = _diamonds_design()
    np.testing.assert_allclose(model.data["XT"].numpy().T, Xc, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(model.data["Y"].numpy(), Y)
    assert model.data["XT"].shape == (24, 5000) and model.data["XT"].is_contiguous()
    assert np.abs(model.data["XT"].numpy().mean(1)).max() < 1e-13  # centred columns
    assert torch.equal(model.data["B"], torch.eye(24, dtype=torch.float64))
    ref = load_reference(model.posteriordb)
    assert model.constrained_names == ref.parameters  # b[1..24], Intercept, sigma: no b_Intercept
    assert model.names[:2] == ("b[1]", "b[2]")
    x = _points(model, n=2)
    values = model.constrain(x)
    assert torch.equal(values["sigma"], torch.exp(x[:, 25]))
    assert torch.equal(values["Intercept"], x[:, 24]) and torch.equal(values["b[7]"], x[:, 6])
    x_ref = torch.tensor(list(ref.mean[:25]) + [math.log(ref.mean[25])], dtype=torch.float64)
    assert torch.isfinite(model.log_prob(x_ref))


def test_diamonds_qr_form_is_stans_scaled_qr_of_the_centred_predictors():
    """Q* R* = Xc with Q*^T Q* = (N - 1) I and R* upper triangular with a positive diagonal
    (Stan User's Guide's scaling); B = R*^-1; theta = R* b maps back to b exactly; the two forms'
    log densities differ by a constant (the map is linear)."""
    model, direct = models.diamonds(), models.diamonds(qr=False)
    Xc, _, _ = _diamonds_design()
    Q, B = model.data["XT"].numpy().T, model.data["B"].numpy()
    R = np.linalg.inv(B)
    np.testing.assert_allclose(Q @ R, Xc, rtol=0, atol=1e-10)
    np.testing.assert_allclose(Q.T @ Q, 4999 * np.eye(24), rtol=0, atol=1e-8)
    assert np.all(np.tril(B, -1) == 0) and np.all(np.diag(R) > 0)
    assert model.names[:2] == ("theta[1]", "theta[2]")
    assert model.constrained_names == direct.constrained_names
    b = _points(direct, n=5)
    theta = b.clone()
    theta[:, :24] = b[:, :24] @ torch.from_numpy(R).T
    values = model.constrain(theta)
    for k in (1, 7, 24):
        np.testing.assert_allclose(values[f"b[{k}]"].numpy(), b[:, k - 1].numpy(), rtol=0,
                                   atol=1e-12)
    d_qr = model.log_prob(theta) - model.log_prob(theta[:1])
    d_direct = direct.log_prob(b) - direct.log_prob(b[:1])
    np.testing.assert_allclose(d_qr.numpy(), d_direct.numpy(), rtol=1e-10)


def test_diamonds_qr_posterior_is_well_conditioned():
    """Why the QR form: at the reference sigma, the Gaussian part of the posterior over the
    coefficients has precision Xc^T Xc / sigma^2 + I in b and Q*^T Q* / sigma^2 + B^T B in theta.
    After a diagonal mass (unit diagonal of the covariance) the first keeps a condition number
    above 1e5, the second below 2."""
    model = models.diamonds()
    sigma = load_reference(model.posteriordb).mean[25]

    def diagonally_scaled_condition(precision):
        sd = np.sqrt(np.diag(np.linalg.inv(precision)))
        return np.linalg.cond(precision * np.outer(sd, sd))

    Xc, _, _ = _diamonds_design()
    Q, B = model.data["XT"].numpy().T, model.data["B"].numpy()
    assert diagonally_scaled_condition(Xc.T @ Xc / sigma ** 2 + np.eye(24)) > 1e5
    assert diagonally_scaled_condition(Q.T @ Q / sigma ** 2 + B.T @ B) < 2


def test_logistic_regression_data_is_deterministic_standardised_and_from_the_known_beta():
    X, y, beta = models.logistic_regression_data(1000, 25, seed=0)
    X2, y2, beta2 = models.logistic_regression_data(1000, 25, seed=0)
    assert torch.equal(X, X2) and torch.equal(y, y2) and torch.equal(beta, beta2)
    assert not torch.equal(models.logistic_regression_data(1000, 25, seed=1)[1], y)
    assert torch.equal(X[:, 0], torch.ones(1000, dtype=torch.float64))
    assert X[:, 1:].mean(0).abs().max() < 1e-14
    assert torch.allclose(X[:, 1:].std(0, correction=0), torch.ones(24, dtype=torch.float64))
    assert set(y.tolist()) == {0.0, 1.0}
    # Labels follow beta: sum_i (y_i - p_i) is a sum of 1000 independent centred Bernoulli terms;
    # |sum| <= 5.5 sd fails with probability < 1e-7 (normal approximation with 1000 terms).
    p = torch.sigmoid(X @ beta)
    assert (y - p).sum().abs() <= 5.5 * (p * (1 - p)).sum().sqrt()


def test_initial_point_is_stans_uniform_and_bad_inputs_are_named():
    model = models.eight_schools()
    q = model.initial_point(1000, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    assert q.shape == (1000, 10) and q.dtype == torch.float32
    assert q.abs().max() <= 2 and q.abs().max() > 1.99
    with pytest.raises(ValueError, match="num_chains"):
        model.initial_point(0)
    with pytest.raises(ValueError, match=r"\[\.\.\., 10\]"):
        model.log_prob(torch.zeros(9, dtype=torch.float64))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        model.constrain([0.0] * 10)
    with pytest.raises(ValueError, match="no hand-written gradient_source"):
        models.funnel().target(gradient=True)
    with pytest.raises(ValueError, match="dim"):
        models.funnel(dim=1)
    with pytest.raises(ValueError, match="n1"):
        models.rosenbrock(n1=1)
    with pytest.raises(ValueError, match="prior_scale"):
        models.logistic_regression(prior_scale=0.0)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Every model's C++ in one g++ build (about 2 s)."""
    folder = tmp_path_factory.mktemp("models_cpp")
    instances = {key: models.MODELS[key]() for key in ALL}
    return compile_program(instances, folder), instances, folder


@pytest.mark.parametrize("key", ALL)
def test_cpp_source_equals_torch_log_prob(compiled, key):
    """The C++ log_density (double) equals the torch log_prob, constants included; its gradient by
    the project's dual numbers, and the hand-written log_density_and_gradient, equal log_prob's
    autograd gradient (relative to the largest value: float64 sums of up to 5000 rows)."""
    exe, instances, folder = compiled
    model = instances[key]
    x = _points(model, n=8, seed=2).requires_grad_()
    lp_torch = model.log_prob(x)
    (grad_torch,) = torch.autograd.grad(lp_torch.sum(), x)
    lp_torch = lp_torch.detach()
    out = evaluate(exe, key, model, x, folder)
    value_tol = 1e-12 * lp_torch.abs().max().item()
    grad_tol = 1e-12 * grad_torch.abs().max().item()
    torch.testing.assert_close(out["lp"], lp_torch, rtol=0, atol=value_tol)
    torch.testing.assert_close(out["lp_dual"], lp_torch, rtol=0, atol=value_tol)
    torch.testing.assert_close(out["grad_dual"], grad_torch, rtol=0, atol=grad_tol)
    assert ("lp_hand" in out) == (key in ("eight_schools", "diamonds", "logistic_regression"))
    if "lp_hand" in out:
        torch.testing.assert_close(out["lp_hand"], lp_torch, rtol=0, atol=value_tol)
        torch.testing.assert_close(out["grad_hand"], grad_torch, rtol=0, atol=grad_tol)


@pytest.mark.parametrize("key", ALL)
def test_target_hands_the_model_to_cpp_target_without_compiling(key):
    """model.target() is a fused_hmc.CppTarget of the model's source, dim, names and data
    (constructing one compiles nothing; building and check() are the CppTarget tests' job)."""
    import fused_hmc

    model = models.MODELS[key]()
    for gradient in (False, True) if model.gradient_source else (False,):
        target = model.target(gradient=gradient)
        assert isinstance(target, fused_hmc.CppTarget)
        assert (target.dim, list(target.names), target.has_gradient) == (
            model.dim, list(model.names), gradient)
        assert model.source in target.source
        assert ("log_density_and_gradient" in target.source) == gradient
        assert target.log_prob is model.log_prob_fn
        assert sorted(target.data) == sorted(model.data)


@pytest.mark.cuda
@pytest.mark.parametrize("key", ALL)
def test_model_targets_pass_check_on_cuda(key):
    """Each model's CppTarget, compiled for CUDA, against log_prob's autograd (and the hand-written
    gradient against the dual one): CppTarget.check raises naming the worst point."""
    model = models.MODELS[key]()
    for gradient in (False, True) if model.gradient_source else (False,):
        report = model.target(gradient=gradient).check(n=16, dtype=torch.float64, device="cuda")
        assert report.points == 16 and report.dtype == torch.float64
        assert report.worst_value < 1 and report.worst_gradient < 1
        assert report.worst_dual_vs_hand < 1
