"""Bad arguments raise ValueError/TypeError naming the argument, and leave every input untouched."""
from __future__ import annotations

import math

import pytest
import torch

import fused_hmc

from ._helpers import rng_state


def _inputs(device, batch=6, dim=4, dtype=torch.float32):
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(batch, dim, generator=gen, dtype=dtype).to(device)
    mu = torch.randn(dim, generator=gen, dtype=dtype).to(device)
    p = torch.randn(batch, dim, generator=gen, dtype=dtype).to(device)
    u = torch.rand(batch, generator=gen).to(device)
    return q, mu, p, u


def _step(q, mu=None, **kw):
    return fused_hmc.hmc_step(q, mu, **kw)


# (id, call(q, mu, p, u, device), exception, message pattern naming the argument)
CASES = [
    ("q-rank-1", lambda q, mu, p, u, dev: _step(q[0], mu), ValueError, r"\bq must be a 2-D"),
    ("q-rank-3", lambda q, mu, p, u, dev: _step(q[None], mu), ValueError, r"\bq must be a 2-D"),
    ("q-rank-1-noise", lambda q, mu, p, u, dev: _step(q[0], mu, momentum=p[0], uniform=u[:1]),
     ValueError, r"\bq must be a 2-D"),
    ("q-int", lambda q, mu, p, u, dev: _step(q.to(torch.int64)), TypeError, r"\bq must be float"),
    ("q-int-with-mu", lambda q, mu, p, u, dev: _step(q.to(torch.int32), mu), TypeError,
     r"\bq must be float"),
    ("q-bool", lambda q, mu, p, u, dev: _step(q > 0), TypeError, r"\bq must be float"),
    ("q-half", lambda q, mu, p, u, dev: _step(q.half()), TypeError, r"\bq must be float"),
    ("q-empty-dim", lambda q, mu, p, u, dev: _step(q[:, :0]), ValueError, r"\bq must have dim"),
    ("mu-dtype", lambda q, mu, p, u, dev: _step(q, mu.double()), TypeError, r"\bmu must have q's"),
    ("mu-shape", lambda q, mu, p, u, dev: _step(q, mu[:-1]), ValueError, r"\bmu must have shape"),
    ("mu-rank", lambda q, mu, p, u, dev: _step(q, mu[None]), ValueError, r"\bmu must have shape"),
    ("momentum-dtype", lambda q, mu, p, u, dev: _step(q, mu, momentum=p.double(), uniform=u),
     TypeError, r"\bmomentum must have q's dtype"),
    ("momentum-shape", lambda q, mu, p, u, dev: _step(q, mu, momentum=p[:, :-1], uniform=u),
     ValueError, r"\bmomentum must have q's shape"),
    ("momentum-rank", lambda q, mu, p, u, dev: _step(q, mu, momentum=p[:, 0], uniform=u),
     ValueError, r"\bmomentum must have q's shape"),
    ("uniform-dtype-half", lambda q, mu, p, u, dev: _step(q, mu, momentum=p, uniform=u.half()),
     TypeError, r"\buniform must be float32 or float64"),
    ("uniform-dtype-int", lambda q, mu, p, u, dev: _step(q, mu, momentum=p, uniform=u.long()),
     TypeError, r"\buniform must be float32 or float64"),
    ("uniform-shape", lambda q, mu, p, u, dev: _step(q, mu, momentum=p, uniform=u[:-1]),
     ValueError, r"\buniform must have shape"),
    ("uniform-rank", lambda q, mu, p, u, dev: _step(q, mu, momentum=p, uniform=u[:, None]),
     ValueError, r"\buniform must have shape"),
    ("only-momentum", lambda q, mu, p, u, dev: _step(q, mu, momentum=p), ValueError,
     r"momentum and uniform"),
    ("only-uniform", lambda q, mu, p, u, dev: _step(q, mu, uniform=u), ValueError,
     r"momentum and uniform"),
    ("rng-foo", lambda q, mu, p, u, dev: _step(q, mu, rng="foo"), ValueError, r"\brng must be"),
    ("rng-foo-op", lambda q, mu, p, u, dev: fused_hmc.ops.hmc_step(q, mu, 0.1, 10, "foo"),
     ValueError, r"\brng must be"),
    ("seed-with-torch-rng", lambda q, mu, p, u, dev: _step(q, mu, rng="torch", seed=1), ValueError,
     r"\bseed="),
    ("transition-without-seed", lambda q, mu, p, u, dev: _step(q, mu, rng="philox", transition=3),
     ValueError, r"\btransition="),
    ("transition-negative", lambda q, mu, p, u, dev: _step(q, mu, rng="philox", seed=1,
                                                          transition=-1),
     ValueError, r"\btransition must be"),
    ("module-dim-mismatch", lambda q, mu, p, u, dev: fused_hmc.HMC(q.shape[1] + 1).to(dev)(q),
     ValueError, r"\bq must have shape \[batch, 5\]"),
    ("module-dim-64-given-63", lambda q, mu, p, u, dev: fused_hmc.HMC(64).to(dev)(
        torch.zeros(q.shape[0], 63, device=dev)), ValueError, r"\bq must have shape \[batch, 64\]"),
    ("module-rank", lambda q, mu, p, u, dev: fused_hmc.HMC(q.shape[1]).to(dev)(q[0]), ValueError,
     r"\bq must have shape"),
    ("module-int-q", lambda q, mu, p, u, dev: fused_hmc.HMC(q.shape[1]).to(dev)(q.long()),
     TypeError, r"\bq must be float"),
]
for _steps in (0, -1):
    CASES.append((f"L={_steps}", lambda q, mu, p, u, dev, s=_steps: _step(q, mu,
                                                                         num_leapfrog_steps=s),
                  ValueError, r"\bnum_leapfrog_steps must be"))
    CASES.append((f"L={_steps}-noise", lambda q, mu, p, u, dev, s=_steps: _step(
        q, mu, momentum=p, uniform=u, num_leapfrog_steps=s), ValueError,
        r"\bnum_leapfrog_steps must be"))
for _eps in (0.0, -0.1, math.inf, -math.inf, math.nan):
    CASES.append((f"eps={_eps}", lambda q, mu, p, u, dev, e=_eps: _step(q, mu, step_size=e),
                  ValueError, r"\bstep_size must be finite"))
    CASES.append((f"eps={_eps}-philox", lambda q, mu, p, u, dev, e=_eps: _step(
        q, mu, step_size=e, rng="philox", seed=1), ValueError, r"\bstep_size must be finite"))
    CASES.append((f"eps={_eps}-noise", lambda q, mu, p, u, dev, e=_eps: _step(
        q, mu, momentum=p, uniform=u, step_size=e), ValueError, r"\bstep_size must be finite"))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_call_raises_naming_the_argument(device, case):
    _, call, exc, pattern = case
    q, mu, p, u = _inputs(device)
    originals = [t.clone() for t in (q, mu, p, u)]
    state = rng_state(device)
    with pytest.raises(exc, match=pattern):
        call(q, mu, p, u, device)
    for after, before in zip((q, mu, p, u), originals):
        assert torch.equal(after, before), "a failed call modified an input"
    assert torch.equal(rng_state(device), state), "a failed call consumed random numbers"


@pytest.mark.parametrize("kwargs,pattern", [
    ({"dim": 0}, r"\bdim must be"),
    ({"dim": 2.0}, r"\bdim must be"),
    ({"dim": True}, r"\bdim must be"),
    ({"dim": 4, "num_leapfrog_steps": 0}, r"\bnum_leapfrog_steps must be"),
    ({"dim": 4, "num_leapfrog_steps": -3}, r"\bnum_leapfrog_steps must be"),
    ({"dim": 4, "num_leapfrog_steps": 2.0}, r"\bnum_leapfrog_steps must be"),
    ({"dim": 4, "step_size": 0.0}, r"\bstep_size must be"),
    ({"dim": 4, "step_size": -0.1}, r"\bstep_size must be"),
    ({"dim": 4, "step_size": math.inf}, r"\bstep_size must be"),
    ({"dim": 4, "step_size": math.nan}, r"\bstep_size must be"),
    ({"dim": 4, "rng": "foo"}, r"\brng must be"),
])
def test_module_constructor_rejects(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        fused_hmc.HMC(**kwargs)


@pytest.mark.cuda
@pytest.mark.parametrize("which", ["mu", "momentum", "uniform"])
def test_device_mismatch_names_the_argument(which):
    q, mu, p, u = _inputs("cuda")
    parts = {"mu": mu, "momentum": p, "uniform": u}
    parts[which] = parts[which].cpu()
    with pytest.raises(ValueError, match=rf"\b{which} must be on q's device"):
        fused_hmc.hmc_step(q, parts["mu"], momentum=parts["momentum"], uniform=parts["uniform"])
    q_cpu = q.cpu()
    with pytest.raises((ValueError, RuntimeError), match=r"\b(mu|q)\b"):
        fused_hmc.hmc_step(q_cpu, mu)  # CPU q, CUDA mu
