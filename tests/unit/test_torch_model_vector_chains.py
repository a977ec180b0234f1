"""TorchModel on the CPU runs its chains W at a time in vector lanes (CppTarget's vector_chains):
the generated code chooses on per-chain values by ``where``, never ``?:``, so it compiles with T a
pack of chains. The property: the draws, final states, step sizes, inverse masses and per-chain
statistics are bit for bit those of the same generated source compiled with
vector_chains=False (test_vector_chains.py does the same for the library's hand-written models).

A robust regression exercising torch.where on a comparison of parameters and data, a data mask,
clamp, maximum, amax and sign (abs's gradient), sampled in the plain form in float32 and in the
rows form in float64 (with a positive scale, exp and log): four module builds. The float32 model
has no exp, log or log1p, whose float forms differ between modules with and without
vector_chains where FHMC_PORTABLE_FLOAT_MATH is defined (math/fp/scalar_functions.h). The
generated code of the test_torch_model kitchen sink (every covered op) is also compiled with
packs, syntax only (seconds).
"""
from __future__ import annotations

import os
import subprocess

import pytest
import torch
from torch.distributions import Normal, constraints

import fused_hmc
from fused_hmc import CppTarget, _build, cpp_build, cpp_data
from fused_hmc.torch_model import TorchModel

from .test_torch_model import KITCHEN_SINK_PARAMS, kitchen_sink_data, kitchen_sink_fn
from .test_vector_chains import _assert_same


def robust_fn(p, d):
    s = p["s"] if "s" in p else d["s"]
    r = (d["y"] - (p["a"] + p["b"] * d["x"])) / s
    huber = torch.where(torch.logical_and(r.abs() < 1.5, d["w"] > 0.2), -0.5 * r * r,
                        -1.5 * r.abs() + 1.125)
    lp = huber.sum() + Normal(0.0, 5.0).log_prob(p["a"]) + Normal(0.0, 5.0).log_prob(p["b"])
    if "s" in p:
        lp = lp - d["x"].shape[0] * torch.log(s)
    v = p["v"]
    lp = lp + torch.clamp(v, -1.0, 1.5).sum() - 0.5 * (v * v).sum()
    lp = lp + 0.2 * torch.maximum(v, p["a"]).sum() + 0.1 * v.amax()
    return lp + 0.1 * p["a"] * torch.sign(v).sum() - 0.05 * (v - 0.3).abs().sum()


ROBUST_PARAMS = {"a": (), "b": (), "v": (4,)}


def robust_data(n=100):  # more rows than small_limit (64): a row loop, the rows form
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, generator=g)
    y = 1.0 + 2.0 * x + 0.5 * torch.randn(n, generator=g)
    y[::9] += 4.0  # outliers on the linear arm
    return {"x": x, "y": y, "w": torch.rand(n, generator=g), "s": 0.5}


@pytest.fixture(scope="module", params=[(torch.float32, 40), (torch.float64, 100)],
                ids=["plain-float32", "rows-float64"])
def pair(request):
    """(the TorchModel, its generated source compiled with vector_chains=False, dtype): 40 rows
    are stored (no row loop: the plain form), 100 a row loop (the rows form)."""
    dtype, rows = request.param
    params = dict(ROBUST_PARAMS)
    if dtype == torch.float64:
        params["s"] = ((), constraints.positive)
    model = TorchModel(robust_fn, params, data=robust_data(rows))
    assert model.vector_chains and model.rows_form == (rows > 64)
    scalar = CppTarget(model.generated_source, model.dim, data=dict(model.data), gradient=True,
                       vector_chains=False)
    return model, scalar, dtype


def test_draws_are_those_of_one_chain_at_a_time(pair):
    """21 chains (whole packs and a remainder), per-chain warm-up with jitter, thin 2."""
    model, scalar, dtype = pair
    q0 = model.initial_point(21, generator=torch.Generator().manual_seed(4), dtype=dtype)
    a, b = [fused_hmc.sample(q0, 20, target=t, num_warmup=40, pooled=False, jitter=0.3, thin=2,
                             seed=7, chunk_size=8, progress=False) for t in (model, scalar)]
    assert a.accept_rate.mean() > 0.2  # the chains moved, so equality is not vacuous
    _assert_same(a, b)


def _pack_unit(source: str, fields, scalar: str) -> str:
    """The generated functions instantiated on float|double, a dual number and a pack, ordered
    as the module orders them (the pack functions after the user's source)."""
    lines = ["#include <cstdint>", '#include "math/targets/target.h"',
             '#include "math/targets/target_functions.h"', "namespace fused_hmc_user {",
             f"using Scalar = {scalar};", *cpp_build._data_struct(fields), source, "}",
             '#include "cpu/simd/pack_functions.h"', "using Data = fused_hmc_user::Data;",
             f"using P = fused_hmc::simd::Pack<{scalar}, fused_hmc::simd::kLanesOf<{scalar}>>;",
             f"using D = fused_hmc::Dual<{scalar}, 2>;"]
    for t in (scalar, "P", "D"):
        lines.append(f"template {t} fused_hmc_user::log_density<{t}, Data>(const {t}*, "
                     "const Data&);")
    for t in (scalar, "P"):
        lines.append(f"template {t} fused_hmc_user::log_density_and_gradient<{t}, Data>("
                     f"const {t}*, {t}*, const Data&);")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("scalar", ["float", "double"])
def test_every_op_compiles_on_packs(scalar, tmp_path):
    model = TorchModel(kitchen_sink_fn, KITCHEN_SINK_PARAMS, data=kitchen_sink_data(), lanes=1)
    fields, _ = cpp_data.prepare(dict(model.data))
    unit = tmp_path / "unit.cpp"
    unit.write_text(_pack_unit(model.generated_source, fields, scalar))
    done = subprocess.run([os.environ.get("CXX", "c++"), "-std=c++20", "-fsyntax-only",
                           f"-I{_build.csrc_dir()}", str(unit)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-4000:]
