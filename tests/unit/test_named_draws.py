"""Named constrained draws: a target with ``constrain`` (the library's eight schools; a CppTarget
made with ``constrain=``) shows its draws by parameter name in summary(), to_arviz(), save/load.

Every figure is checked against the constrained transform of the unconstrained draws computed
here, independently: mu = x[8], tau = exp(x[9]), theta_j = mu + tau x[j].
"""
import re

import numpy as np
import pytest
import torch

import fused_hmc
from fused_hmc.models import eight_schools

CHAINS, DRAWS = 4, 40
pytestmark = pytest.mark.slow  # samples eight schools (compiled C++) several times


@pytest.fixture(scope="module")
def model():
    return eight_schools()


@pytest.fixture(scope="module")
def result(model):
    q0 = model.initial_point(CHAINS, generator=torch.Generator().manual_seed(1))
    return fused_hmc.sample(q0, DRAWS, target=model.target(gradient=True), num_warmup=50,
                            seed=29, progress=False)


def by_hand(samples: torch.Tensor) -> dict[str, torch.Tensor]:
    mu, tau = samples[..., 8], torch.exp(samples[..., 9])
    return {"mu": mu, "tau": tau, "theta[1]": mu + tau * samples[..., 0]}


def table(text: str) -> dict[str, tuple[float, float]]:
    """name -> (mean, sd) from a printed summary."""
    rows = re.findall(r"^\s*(\S+)\s+([+-][\d.]+)\s+([\d.]+)\s", text, flags=re.M)
    return {name: (float(mean), float(sd)) for name, mean, sd in rows}


def test_summary_rows_are_constrained_values(result, capsys):
    result.summary()
    rows = table(capsys.readouterr().out)
    assert list(rows)[-2:] == ["mu", "tau"] and "theta[1]" in rows
    for name, values in by_hand(result.samples).items():
        flat = values.reshape(-1)
        mean, sd = rows[name]
        assert mean == pytest.approx(flat.mean().item(), abs=1e-4 * (1 + abs(mean)))
        assert sd == pytest.approx(flat.std().item(), abs=1e-4 * (1 + sd))
    result.summary(unconstrained=True)
    rows = table(capsys.readouterr().out)
    assert list(rows)[-2:] == ["mu", "log_tau"]
    assert rows["log_tau"][0] == pytest.approx(result.samples[..., 9].mean().item(), abs=2e-4)


def test_to_arviz_one_variable_per_parameter(result):
    posterior = result.to_arviz()["posterior"]
    assert posterior["tau"].dims == ("chain", "draw")
    assert posterior["q"].dims == ("chain", "draw", "dim")  # the unconstrained draws stay
    for name, values in by_hand(result.samples).items():
        np.testing.assert_array_equal(posterior[name].values, values.numpy())


def test_save_load_keeps_constrained_draws_as_data(result, tmp_path):
    path = tmp_path / "run.zarr"
    result.save(path)
    loaded = fused_hmc.load(path)
    assert not getattr(loaded.target, "has_constrain", False)  # the code is not in the file
    expected = by_hand(result.samples)
    for name, values in expected.items():
        assert torch.equal(loaded.constrained[name], values)
    on_disk = fused_hmc.load(path, samples=False)
    assert on_disk.constrained is None
    posterior = on_disk.to_arviz()["posterior"]
    np.testing.assert_array_equal(posterior["tau"].values, expected["tau"].numpy())
    assert torch.equal(on_disk.constrained_draws()["mu"], expected["mu"])
    again = tmp_path / "again.zarr"
    loaded.save(again)  # a loaded result (no constrain code) saves what it loaded
    assert torch.equal(fused_hmc.load(again).constrained["tau"], expected["tau"])


def test_cpp_target_constrain_with_shaped_parameters(model, result, tmp_path):
    def constrain(x):
        return {"theta_trans": x[..., :8], "mu": x[..., 8], "tau": torch.exp(x[..., 9])}

    target = fused_hmc.CppTarget(model.source + model.gradient_source, model.dim,
                                 data=dict(model.data), gradient=True, constrain=constrain)
    assert target.constrained_shapes == {"theta_trans": (8,), "mu": (), "tau": ()}
    res = result._replace(target=target)
    posterior = res.to_arviz()["posterior"]
    assert posterior["theta_trans"].dims == ("chain", "draw", "theta_trans_dim_0")
    np.testing.assert_array_equal(posterior["theta_trans"].values, result.samples[..., :8].numpy())
    path = tmp_path / "shaped.zarr"
    res.save(path)
    assert fused_hmc.load(path).constrained["theta_trans"].shape == (CHAINS, DRAWS, 8)


def test_streamed_store_gets_constrained_draws(model, tmp_path):
    path = tmp_path / "streamed.zarr"
    q0 = model.initial_point(2, generator=torch.Generator().manual_seed(2))
    res = fused_hmc.sample(q0, 10, target=model.target(gradient=True), num_warmup=10, seed=3,
                           out=path, progress=False)
    assert res.samples is None
    loaded = fused_hmc.load(path, samples=True)
    torch.testing.assert_close(loaded.constrained["tau"], torch.exp(loaded.samples[..., 9]))


def test_bad_constrain_is_refused(model):
    source = model.source + model.gradient_source
    with pytest.raises(TypeError, match="constrain must be callable"):
        fused_hmc.CppTarget(source, model.dim, data=dict(model.data), constrain=3)
    target = fused_hmc.CppTarget(source, model.dim, data=dict(model.data),
                                 constrain=lambda x: {"q": x[..., 0]})
    with pytest.raises(ValueError, match="'q'"):
        target.constrained_shapes
    target = fused_hmc.CppTarget(source, model.dim, data=dict(model.data),
                                 constrain=lambda x: {"mu": x[0]})
    with pytest.raises(ValueError, match="'mu' shaped"):
        target.constrain(torch.zeros(3, model.dim, dtype=torch.float64))
