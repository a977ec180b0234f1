"""`fused-hmc sample --model path/to/model.py[:NAME] --data FILE.json`: a TorchModel from a user's
file. Flag and file errors come before anything compiles; one CPU run's summary is in the
model's constrained parameters (mu, sigma) and equals the library run of the same chains.

Builds: one float64 CPU module of a two-parameter TorchModel (location and scale of 5 points).
"""
from __future__ import annotations

import json
import re

import pytest
import torch

import fused_hmc
from fused_hmc.cli import data_file
from fused_hmc.cli import model_file as cli_model_file

from ._helpers import run_cli_sample

SMALL = ["--chains", "4", "--samples", "20", "--warmup", "30", "--device", "cpu", "--no-progress",
         "--seed", "5"]
Y = [1.0, 2.5, 0.3, 1.9, 2.2]
MODEL_FILE = '''
import torch
from torch.distributions import Normal, constraints

import fused_hmc


def location_scale(p, data):
    return (Normal(0.0, 10.0).log_prob(p["mu"]) + Normal(0.0, 5.0).log_prob(p["sigma"])
            + Normal(p["mu"], p["sigma"]).log_prob(data["y"]).sum())


PARAMS = {"mu": (), "sigma": ((), constraints.positive)}


def model(data):
    return location_scale, PARAMS


def built(data):
    return fused_hmc.TorchModel(location_scale, PARAMS, data=data)


def not_a_model(data):
    return 3
'''
ROW = re.compile(r"^\s*(\S+)\s+([+-]\d+\.\d{4})\s+(\d+\.\d{4})\s", re.M)


@pytest.fixture
def files(tmp_path):
    path, data = tmp_path / "model.py", tmp_path / "data.json"
    path.write_text(MODEL_FILE)
    data.write_text(json.dumps({"y": Y, "n": 5}))
    return path, data


@pytest.fixture
def no_compiling(monkeypatch):
    def compile_attempted(spec):
        raise AssertionError("compiled before the flags were checked")

    monkeypatch.setattr(fused_hmc.cpp_build, "load", compile_attempted)


def test_model_file_spec_parsing():
    assert cli_model_file.is_model_file("a/b.py") and cli_model_file.is_model_file("b.py:NAME")
    assert not cli_model_file.is_model_file("eight_schools")
    assert not cli_model_file.is_model_file("b.py:1x")


@pytest.mark.parametrize("suffix, extra, flag, message", [
    ("", [], "--model", r"defines 4 functions \(built, location_scale, model, not_a_model\): "
                        "name one"),
    (":nope", [], "--model", "defines no 'nope'"),
    (":PARAMS", [], "--model", "is a dict, not a TorchModel"),
    (":not_a_model", [], "--model", "returned a int"),
    (":model", ["--dim", "3"], "--dim", "leave --dim out"),
    (":model", ["--gradient"], "--gradient", "always compiled"),
])
def test_errors_before_compiling(files, capsys, no_compiling, suffix, extra, flag, message):
    path, data = files
    code, out, err = run_cli_sample(capsys, "--model", f"{path}{suffix}", "--data", str(data),
                                    *SMALL, *extra)
    assert code == 2 and "Traceback" not in err
    assert re.search(f"{flag}.*{message}", err), err


def test_file_errors_are_named(tmp_path, capsys, no_compiling):
    code, _, err = run_cli_sample(capsys, "--model", str(tmp_path / "missing.py"), *SMALL)
    assert code == 2 and "no file" in err
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    code, _, err = run_cli_sample(capsys, "--model", str(broken), *SMALL)
    assert code == 2 and "running" in err and "RuntimeError: boom" in err
    code, _, err = run_cli_sample(capsys, "--model", "not_a_model_or_file", *SMALL)
    assert code == 2 and "model.py[:NAME]" in err


def test_data_json_reaches_the_function_ints_as_int64(files, tmp_path):
    path, data_path = files
    data = data_file.load_data(str(data_path))
    assert data["n"] == 5 and isinstance(data["n"], int) and data["y"].dtype == torch.float64
    counts = tmp_path / "counts.json"
    counts.write_text(json.dumps({"k": [1, 2, 3]}))
    assert data_file.load_data(str(counts))["k"].dtype == torch.int64
    model = cli_model_file.load(f"{path}:built", data)
    assert model.dim == 2 and model.constrained_names == ("mu", "sigma")
    assert model.names == ("mu", "sigma__unconstrained")
    assert torch.equal(model.torch_model.user_data["y"], data["y"])
    x = torch.tensor([[0.5, 0.0]], dtype=torch.float64)
    assert model.constrained_values(x).tolist() == [[0.5, 1.0]]


@pytest.mark.slow  # compiles a TorchModel (minutes on 2 cores, cached after)
def test_sample_model_file_matches_the_library(files, capsys):
    path, data = files
    code, out, err = run_cli_sample(capsys, "--model", f"{path}:model", "--data", str(data), *SMALL)
    assert code == 0, err
    assert "TorchModel model.py:model" in out
    rows = {name: (float(mean), float(sd)) for name, mean, sd in ROW.findall(out)}
    assert set(rows) >= {"mu", "sigma"}
    namespace = {}
    exec(compile(MODEL_FILE, str(path), "exec"), namespace)
    target = fused_hmc.TorchModel(namespace["location_scale"], namespace["PARAMS"],
                                  data={"y": torch.tensor(Y, dtype=torch.float64), "n": 5})
    q0 = target.initial_point(4, generator=torch.Generator().manual_seed(5))
    res = fused_hmc.sample(q0, 20, target=target, num_warmup=30, seed=5, progress=False)
    draws = res.constrained_draws()
    for name in ("mu", "sigma"):
        flat = draws[name].reshape(-1)
        mean = rows[name][0]
        assert mean == pytest.approx(flat.mean().item(), abs=1e-4 * (1 + abs(mean)))
        assert rows[name][1] == pytest.approx(flat.std().item(), abs=1e-4 * (1 + rows[name][1]))
