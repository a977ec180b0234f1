"""Parameters: the unconstrained coordinates' map to declared constrained values.

Each constraint's constrain and log|det J| are checked against torch autograd's Jacobian matrix
(slogdet; for the simplex, over the K - 1 free coordinates, and against the stick-breaking
formula written out), inverse round trips, values landing in the support, names and errors.
"""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch.autograd.functional import jacobian
from torch.distributions import constraints
from torch.fx.experimental.proxy_tensor import make_fx

from fused_hmc.constraints import ordered
from fused_hmc.torch_model import Parameters

SHAPES = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
VECTOR_SHAPES = st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple)
BOUNDS = st.floats(-5, 5, allow_nan=False)


@st.composite
def bijective_parameter(draw):
    """(shape, constraint) of every supported kind but the simplex."""
    kind = draw(st.sampled_from(["real", "positive", "greater", "less", "interval", "unit",
                                 "ordered"]))
    shape = draw(VECTOR_SHAPES if kind == "ordered" else SHAPES)
    a = draw(BOUNDS)
    c = {"real": constraints.real, "positive": constraints.positive,
         "greater": constraints.greater_than(a), "less": constraints.less_than(a),
         "interval": constraints.interval(a, a + draw(st.floats(0.1, 10))),
         "unit": constraints.unit_interval, "ordered": ordered}[kind]
    return shape, c


def declared(specs):
    return Parameters({f"p{i}": spec for i, spec in enumerate(specs)})


def flat_constrained(spec: Parameters, x: torch.Tensor) -> torch.Tensor:
    return spec.flatten(spec.constrain(x))


@settings(max_examples=60, deadline=None)
@given(st.lists(bijective_parameter(), min_size=1, max_size=3), st.integers(0, 2**31 - 1))
def test_log_abs_det_jacobian_is_autograd_slogdet(specs, seed):
    spec = declared(specs)
    x = (torch.rand(spec.dim, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(seed)) - 0.5) * 6
    J = jacobian(lambda x: flat_constrained(spec, x), x)
    assert J.shape == (spec.dim, spec.dim)
    sign, logabsdet = torch.linalg.slogdet(J)
    assert sign != 0
    torch.testing.assert_close(spec.log_abs_det_jacobian(x), logabsdet, rtol=1e-9, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(bijective_parameter(), min_size=1, max_size=3), st.integers(0, 2**31 - 1))
def test_values_in_support_and_round_trip(specs, seed):
    spec = declared(specs)
    x = torch.randn(5, spec.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    values = spec.constrain(x)
    for name, (shape, c) in zip(spec.names, specs):
        assert values[name].shape == (5, *shape)
        assert bool(c.check(values[name]).all()), (name, c, values[name])
    torch.testing.assert_close(spec.unconstrain(values), x, rtol=1e-7, atol=1e-7)
    assert spec.log_abs_det_jacobian(x).shape == (5,)


def stick_breaking_log_det(x: torch.Tensor) -> torch.Tensor:
    """Stan's stick-breaking Jacobian over the first K - 1 simplex entries, written out:
    z_k = sigmoid(x_k - log(K - k)), y_k = z_k (1 - sum_{j<k} y_j), k = 1..K-1, and
    log J = sum_k log z_k + log(1 - z_k) + log(1 - sum_{j<k} y_j)."""
    km1 = x.shape[-1]
    total, remaining = x.new_zeros(()), x.new_ones(())
    for k in range(km1):
        z = torch.sigmoid(x[k] - math.log(km1 - k))
        total = total + torch.log(z) + torch.log1p(-z) + torch.log(remaining)
        remaining = remaining - z * remaining
    return total


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(0, 2**31 - 1))
def test_simplex_jacobian_over_free_coordinates(K, seed):
    spec = Parameters({"w": ((K,), constraints.simplex)})
    assert spec.dim == K - 1
    x = torch.randn(K - 1, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    w = spec.constrain(x)["w"]
    assert bool(constraints.simplex.check(w))
    J = jacobian(lambda x: spec.constrain(x)["w"][:K - 1], x)
    _, logabsdet = torch.linalg.slogdet(J)
    torch.testing.assert_close(spec.log_abs_det_jacobian(x), logabsdet, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(spec.log_abs_det_jacobian(x), stick_breaking_log_det(x),
                               rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(spec.unconstrain({"w": w}), x, rtol=1e-7, atol=1e-7)


def test_simplex_rows_sum_per_row():
    spec = Parameters({"w": ((2, 3), constraints.simplex), "s": ((), constraints.positive)})
    assert spec.dim == 5
    x = torch.randn(7, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    w = spec.constrain(x)["w"]
    torch.testing.assert_close(w.sum(-1), torch.ones(7, 2, dtype=torch.float64))
    row = Parameters({"w": ((3,), constraints.simplex)})
    by_row = sum(row.log_abs_det_jacobian(x[:, 2 * r:2 * r + 2]) for r in range(2))
    torch.testing.assert_close(spec.log_abs_det_jacobian(x), by_row + x[:, 4])


def test_ordered_is_stans_transform():
    spec = Parameters({"c": (4, ordered)})
    x = torch.tensor([0.5, -1.0, 0.0, 2.0], dtype=torch.float64)
    expected = torch.tensor([0.5, 0.5 + math.exp(-1), 0.5 + math.exp(-1) + 1,
                             0.5 + math.exp(-1) + 1 + math.exp(2)], dtype=torch.float64)
    torch.testing.assert_close(spec.constrain(x)["c"], expected)
    torch.testing.assert_close(spec.log_abs_det_jacobian(x), torch.tensor(1.0, dtype=torch.float64))


def test_tensor_bounds_broadcast_per_entry():
    lo = torch.tensor([0.0, 10.0])
    spec = Parameters({"b": ((2,), constraints.interval(lo, 20.0)),
                       "g": ((2, 2), constraints.greater_than(torch.tensor([1.0, -1.0])))})
    x = torch.randn(3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    v = spec.constrain(x)
    assert bool((v["b"] > lo.double()).all() and (v["b"] < 20).all())
    assert bool((v["g"] > torch.tensor([1.0, -1.0], dtype=torch.float64)).all())
    J = jacobian(lambda x: flat_constrained(spec, x), x[0])
    torch.testing.assert_close(spec.log_abs_det_jacobian(x[0]), torch.linalg.slogdet(J)[1])


def test_names_dim_and_slices():
    spec = Parameters({"mu": (), "tau": ((), constraints.positive), "theta_trans": (8,),
                       "L": (2, 2), "w": ((3,), constraints.simplex)})
    assert spec.dim == 1 + 1 + 8 + 4 + 2
    assert spec.names == ["mu", "tau", "theta_trans", "L", "w"]
    assert spec.shapes["theta_trans"] == (8,) and spec.shapes["mu"] == ()
    assert spec.slices["L"] == slice(10, 14)
    c = spec.constrained_names()
    assert c[:3] == ["mu", "tau", "theta_trans[0]"] and c[9] == "theta_trans[7]"
    assert c[10:14] == ["L[0,0]", "L[0,1]", "L[1,0]", "L[1,1]"]
    assert c[14:] == ["w[0]", "w[1]", "w[2]"]
    u = spec.unconstrained_names()
    assert len(u) == spec.dim and len(set(u)) == spec.dim
    assert u[:3] == ["mu", "tau__unconstrained", "theta_trans[0]"]
    assert u[-2:] == ["w__unconstrained[0]", "w__unconstrained[1]"]
    x = torch.randn(spec.dim, dtype=torch.float64)
    assert spec.constrain(x)["L"][0, 1] == x[11]


def test_traceable_by_make_fx():
    spec = Parameters({"mu": (), "tau": ((), constraints.positive), "c": (3, ordered),
                       "p": ((), constraints.unit_interval), "w": ((3,), constraints.simplex)})

    def f(x):
        v = spec.constrain(x)
        return spec.log_abs_det_jacobian(x) + sum(t.sum() for t in v.values())

    g = make_fx(f)(torch.zeros(spec.dim, dtype=torch.float64))
    x = torch.randn(spec.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(g(x), f(x))


@pytest.mark.parametrize("params, match", [
    ({"L": ((2, 2), constraints.lower_cholesky)}, "'L'.*not supported"),
    ({"a": "3"}, "'a'.*shape"),
    ({"a": 2.5}, "'a'.*shape"),
    ({"a": (0,)}, "'a'.*at least 1"),
    ({"a": True}, "'a'.*shape"),
    ({1: ()}, "names must be"),
    ({"a b": ()}, "names must be"),
    ({"s": ((), constraints.simplex)}, "'s'.*shape"),
    ({"s": ((1,), constraints.simplex)}, "'s'.*at least 2"),
    ({"o": ((), ordered)}, "'o'.*shape"),
    ({"i": ((), constraints.interval(2.0, 1.0))}, "'i'.*lower bound < upper"),
    ({"g": ((), constraints.greater_than(math.inf))}, "'g'.*finite"),
    ({"g": ((2,), constraints.greater_than(torch.zeros(3)))}, "'g'.*broadcast"),
    ({"g": ((), constraints.greater_than)}, "'g'.*constraint object"),
    ({"g": constraints.positive}, "'g'.*constraint alone"),
    ({}, "empty"),
    ([("a", ())], "dict"),
])
def test_bad_declarations_name_the_parameter(params, match):
    with pytest.raises((TypeError, ValueError), match=match):
        Parameters(params)


def test_unconstrain_errors_name_the_parameter():
    spec = Parameters({"mu": (), "tau": ((), constraints.positive)})
    with pytest.raises(ValueError, match=r"values\['tau'\] lies outside"):
        spec.unconstrain({"mu": 0.0, "tau": -1.0})
    with pytest.raises(ValueError, match=r"unknown \['nu'\], missing \['tau'\]"):
        spec.unconstrain({"mu": 0.0, "nu": 1.0})
    with pytest.raises(ValueError, match=r"values\['mu'\] must be shaped"):
        Parameters({"mu": (2,)}).unconstrain({"mu": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match=r"values\['tau'\] has leading dims"):
        spec.unconstrain({"mu": [0.0, 1.0], "tau": [1.0]})
    torch.testing.assert_close(spec.unconstrain({"mu": [0.0, 1.0], "tau": [1.0, math.e]}),
                               torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64))


def test_bad_x_is_named():
    spec = Parameters({"mu": (2,)})
    with pytest.raises(ValueError, match=r"x must be shaped \[\.\.\., 2\]"):
        spec.constrain(torch.zeros(3))
    with pytest.raises(TypeError, match="x must be floating"):
        spec.log_abs_det_jacobian(torch.zeros(2, dtype=torch.int64))
