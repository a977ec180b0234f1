"""`fused-hmc sample --model NAME` and `--target FILE.cpp --data FILE.json --dim D`: flag errors
before anything compiles, the JSON data rules, and two CPU runs whose printed summary, in named
(for a model, constrained) parameters, equals the library run of the same chains.

Builds: none of their own. The runs use float64 CPU modules other tests build too: the model
library's eight schools (tests/statistical/test_posteriordb.py) and TARGETS.md's example source
(tests/unit/test_cpp_target.py, README.md; the same text, dim, data kinds and dtype hash to the
same build directory).
"""
from __future__ import annotations

import json
import re

import pytest
import torch

import fused_hmc
from fused_hmc import cli, cpp_build, diagnostics, models
from fused_hmc.cli import data_file, diagnosed_draws, user_targets

from ._helpers import run_cli_sample
from .test_cpp_target import SIGMA, SOURCE, Y

SMALL = ["--chains", "4", "--samples", "8", "--device", "cpu", "--no-progress"]

# A summary row: name, mean, sd, ess_bulk, ess_tail (* marks arviz's cap), r_hat.
ROW = re.compile(r"^\s*(\S+)\s+([+-]\d+\.\d{4})\s+(\d+\.\d{4})\s+(\d+)\*?\s+(\d+)\*?\s+"
                 r"(\d+\.\d{4})$", re.M)


@pytest.fixture
def files(tmp_path):
    """A C++ file (TARGETS.md's example) and its data as JSON."""
    source, data = tmp_path / "eight_schools.cpp", tmp_path / "data.json"
    source.write_text(SOURCE)
    data.write_text(json.dumps({"y": Y, "sigma": SIGMA}))
    return source, data


@pytest.fixture
def no_compiling(monkeypatch):
    def compile_attempted(spec):
        raise AssertionError("a flag error must come before any compile")

    monkeypatch.setattr(cpp_build, "load", compile_attempted)


# ---- flag errors: one line naming the flag, exit 2, nothing compiled --------------------------

def _bad_data(tmp_path, text: str) -> str:
    path = tmp_path / "bad.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("argv, flag", [
    (["--model", "eight_schools", "--target", "standard"], "--target"),
    (["--model", "eight_schools", "--target", "{cpp}"], "--target"),
    (["--model", "eight_schools", "--dim", "10"], "--dim"),
    (["--model", "eight_schools", "--data", "{json}"], "--data"),
    (["--model", "eight_schools", "--mean", "1"], "--mean"),
    (["--model", "eight_schools", "--scale", "2"], "--scale"),
    (["--model", "eight_schools", "--correlation", "0.1"], "--correlation"),
    (["--model", "funnel", "--gradient"], "--gradient"),  # no hand-written gradient
    (["--model", "eight_school"], "--model"),
    (["--data", "{json}"], "--data"),  # a Gaussian has no data
    (["--target", "diagonal", "--data", "{json}"], "--data"),
    (["--gradient"], "--gradient"),
    (["--target", "model.py"], "--target"),
    (["--target", "{cpp}", "--data", "{json}"], "--dim"),  # required for a source
    (["--target", "missing.cpp", "--dim", "10"], "--target"),
    (["--target", "{cpp}", "--dim", "10", "--data", "missing.json"], "--data"),
    (["--target", "{cpp}", "--dim", "10", "--mean", "1"], "--mean"),
    (["--target", "{cpp}", "--dim", "10", "--scale", "1"], "--scale"),
    (["--target", "{cpp}", "--dim", "10", "--data", "{json}", "--gradient"], "--gradient"),
    (["--target", "{cpp}", "--dim", "10", "--data", "{not_json}"], "--data"),
    (["--target", "{cpp}", "--dim", "10", "--data", "{json_list}"], "--data"),
    (["--target", "{cpp}", "--dim", "10", "--data", "{json_bool}"], "--data"),
    (["--target", "{cpp}", "--dim", "10", "--data", "{json_text}"], "--data"),
    (["--target", "{cpp}", "--dim", "10", "--data", "{json_ragged}"], "--data"),
    (["--target", "{cpp}", "--dim", "10", "--data", "{json_keyword}"], "--data"),
    (["--target", "{cpp}", "--dim", "10", "--data", "{json_nan}"], "--data"),
    (["--target", "{no_density}", "--dim", "10"], "--target"),
    (["--model", "eight_schools", "--lanes", "4"], "--lanes"),  # a model brings its own
    (["--lanes", "4"], "--lanes"),  # a Gaussian
    (["--target", "{cpp}", "--dim", "10", "--data", "{json}", "--lanes", "4"], "--lanes"),
    (["--target", "{cpp}", "--dim", "10", "--lanes", "3"], "--lanes"),
])
def test_a_nonsensical_combination_is_one_line_naming_the_flag(capsys, tmp_path, files,
                                                               no_compiling, argv, flag):
    source, data = files
    no_density = tmp_path / "empty.cc"
    no_density.write_text("double f(double x) { return x; }\n")
    paths = {"cpp": str(source), "json": str(data), "no_density": str(no_density),
             "not_json": _bad_data(tmp_path, "{y: [1, 2]}"),
             "json_list": _bad_data(tmp_path, "[1.0, 2.0]"),
             "json_bool": _bad_data(tmp_path, '{"y": [1.0, true]}'),
             "json_text": _bad_data(tmp_path, '{"y": "28"}'),
             "json_ragged": _bad_data(tmp_path, '{"y": [[1.0, 2.0], [3.0]]}'),
             "json_keyword": _bad_data(tmp_path, '{"class": 1.0}'),
             "json_nan": _bad_data(tmp_path, '{"y": [1.0, NaN]}')}
    code, out, err = run_cli_sample(capsys, *SMALL, *(a.format(**paths) for a in argv))
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fused-hmc sample: error: "), err
    assert f"argument {flag}" in lines[0] and "Traceback" not in err, err
    assert out == ""


def test_a_compile_error_names_the_users_file_and_line(capsys, tmp_path):
    """Stops at the syntax check (a second or two): exit 1, the compiler's lines kept, the file's
    own name and line number."""
    broken = tmp_path / "broken.cpp"
    broken.write_text("template <typename T, typename Data>\n"
                      "FUSED_HMC_HD T log_density(const T* x, const Data& data) {\n"
                      "  return -0.5 * x[0] * x[0] + undefined_thing;\n"
                      "}\n")
    code, out, err = run_cli_sample(capsys, *SMALL, "--target", str(broken), "--dim", "1")
    assert code == 1, (out, err)
    assert f"{broken}:3:" in err and "undefined_thing" in err and "<source>" not in err, err
    assert len(err.strip().splitlines()) > 1  # the compiler's lines, not one squeezed line


# ---- data and targets from the flags, without compiling -------------------------------------

@pytest.mark.parametrize("value, expected", [
    (3, 3), (-2.5, -2.5), (1e300, 1e300),
    ([1, 2, 3], torch.tensor([1, 2, 3], dtype=torch.int64)),
    ([1, 2.5], torch.tensor([1.0, 2.5], dtype=torch.float64)),
    ([[1.0, 2], [3, 4]], torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)),
    ([[1, 2], [3, 4]], torch.tensor([[1, 2], [3, 4]], dtype=torch.int64)),
    ([], torch.zeros(0, dtype=torch.float64)),
])
def test_json_integers_stay_integers_and_other_numbers_are_float64(value, expected):
    got = data_file.data_value("v", value)
    assert type(got) is type(expected)
    if isinstance(expected, torch.Tensor):
        assert got.dtype == expected.dtype and torch.equal(got, expected)
    else:
        assert got == expected


def _resolved(*argv):
    args = cli.build_parser().parse_args(["sample", *argv])
    user_targets.resolve_flags(args)
    return args


def test_model_and_source_flags_make_the_targets_they_name(files, no_compiling):
    source, data = files
    args = _resolved("--model", "eight_schools", "--gradient")
    user = user_targets.user_target(args)
    model = models.eight_schools()
    assert user.model.name == "eight_schools" and user.target.has_gradient
    assert user.target.source == model.source + "\n" + model.gradient_source
    assert (args.dim, args.warmup, args.dtype) == (10, user_targets.MODEL_WARMUP, "float64")

    args = _resolved("--target", str(source), "--data", str(data), "--dim", "10")
    user = user_targets.user_target(args)
    assert user.model is None and user.target.source == SOURCE and user.target.dim == 10
    assert not user.target.has_gradient
    for name, values in (("y", Y), ("sigma", SIGMA)):
        assert torch.equal(user.target.data[name], torch.tensor(values, dtype=torch.float64))
    assert (args.warmup, args.dtype) == (user_targets.MODEL_WARMUP, "float64")

    args = _resolved()  # a Gaussian keeps its defaults
    assert (args.target, args.dim, args.warmup, args.dtype, args.mean) == (
        "standard", 64, 0, "float32", 0.0)


def test_stans_start_is_uniform_on_minus_two_two_from_the_seed(files, no_compiling):
    source, data = files
    user = user_targets.user_target(_resolved("--target", str(source), "--data", str(data),
                                            "--dim", "10"))
    q0 = user_targets.start(user, 4096, torch.float64, torch.device("cpu"), seed=7)
    assert q0.shape == (4096, 10) and q0.dtype == torch.float64
    assert torch.equal(q0, 4 * torch.rand(4096, 10, dtype=torch.float64,
                                          generator=torch.Generator().manual_seed(7)) - 2)
    model = models.eight_schools()
    from_model = user_targets.start(user_targets.UserTarget(None, model), 8, torch.float32,
                                  torch.device("cpu"), seed=7)
    assert torch.equal(from_model, model.initial_point(
        8, dtype=torch.float32, generator=torch.Generator().manual_seed(7)))


# ---- runs: the printed summary is the library's, in named parameters --------------------------

def _rows(out: str) -> dict[str, tuple[float, ...]]:
    return {m.group(1): tuple(float(v) for v in m.groups()[1:]) for m in ROW.finditer(out)}


def _assert_rows_equal(rows, names, mean, sd, draws) -> None:
    """Printed rows against values computed here: 4 decimals (rounding: 5e-5), ESS to the unit."""
    assert list(rows) == names
    ess, r_hat = diagnostics.ess_bulk(draws), diagnostics.rhat(draws)
    for k, name in enumerate(names):
        got = rows[name]
        assert abs(got[0] - mean[k]) <= 5.1e-5 and abs(got[1] - sd[k]) <= 5.1e-5, (name, got)
        assert abs(got[2] - ess[k]) <= 0.51 and abs(got[4] - r_hat[k]) <= 5.1e-5, (name, got)


def test_model_run_summarises_the_constrained_parameters(capsys):
    """`--model eight_schools`: theta[1..8], mu, tau (posteriordb's names), each row equal to the
    constrained draws of the same chains run through the library."""
    code, out, err = run_cli_sample(capsys, "--model", "eight_schools", "--chains", "16",
                                    "--samples", "100", "--warmup", "100", "--device", "cpu",
                                    "--no-progress")
    assert code == 0, (out, err)
    assert "model eight_schools" in out and "float64" in out and "100 warm-up" in out
    model = models.eight_schools()
    q0 = model.initial_point(16, generator=torch.Generator().manual_seed(0))
    res = fused_hmc.sample(q0, 100, target=model.target(), num_warmup=100, seed=0,
                           step_size=0.1, num_leapfrog_steps=10, progress=False)
    draws = model.constrained_values(res.samples).numpy()  # [16, 100, 10]
    flat = draws.reshape(-1, draws.shape[-1])
    _assert_rows_equal(_rows(out), list(model.constrained_names), flat.mean(0),
                       flat.std(0, ddof=1), draws)
    assert list(model.constrained_names)[-2:] == ["mu", "tau"] and _rows(out)["tau"][0] > 0


def test_model_run_warms_up_1000_transitions_by_default(capsys):
    code, out, err = run_cli_sample(capsys, "--model", "eight_schools", *SMALL)
    assert code == 0, (out, err)
    assert re.search(r"^transitions\s+1000 warm-up", out, re.M), out


def test_cpp_file_run_summarises_x0_to_x9(capsys, files):
    """`--target eight_schools.cpp --data data.json --dim 10`: rows x[0] .. x[9], equal to the
    library's CppTarget of the same source and data from Stan's start with the same seed."""
    source, data = files
    code, out, err = run_cli_sample(capsys, "--target", str(source), "--data", str(data),
                                    "--dim", "10", "--chains", "16", "--samples", "100",
                                    "--warmup", "100", "--seed", "3", "--device", "cpu",
                                    "--no-progress")
    assert code == 0, (out, err)
    assert "C++ eight_schools.cpp (data: sigma, y; dual-number gradient)" in out
    target = fused_hmc.CppTarget(SOURCE, 10, data={"y": torch.tensor(Y, dtype=torch.float64),
                                                   "sigma": torch.tensor(SIGMA,
                                                                         dtype=torch.float64)})
    q0 = 4 * torch.rand(16, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) - 2
    res = fused_hmc.sample(q0, 100, target=target, num_warmup=100, seed=3, step_size=0.1,
                           num_leapfrog_steps=10, progress=False)
    draws = res.samples.numpy()
    flat = draws.reshape(-1, 10)
    _assert_rows_equal(_rows(out), [f"x[{k}]" for k in range(10)], flat.mean(0),
                       flat.std(0, ddof=1), draws)


@pytest.mark.cuda
def test_model_run_on_cuda_summarises_the_constrained_parameters(capsys):
    """The same on the GPU: Stan's start drawn on the CPU and moved, the chains on CUDA."""
    code, out, err = run_cli_sample(capsys, "--model", "eight_schools", "--chains", "256",
                                    "--samples", "200", "--warmup", "200", "--device", "cuda",
                                    "--no-progress")
    assert code == 0, (out, err)
    model = models.eight_schools()
    q0 = model.initial_point(256, generator=torch.Generator().manual_seed(0)).cuda()
    res = fused_hmc.sample(q0, 200, target=model.target(), num_warmup=200, seed=0,
                           step_size=0.1, num_leapfrog_steps=10, progress=False)
    draws = model.constrained_values(res.samples.cpu()).numpy()
    window = diagnosed_draws.diagnostic_window(256, 200, 10, 10)
    flat = draws.reshape(-1, draws.shape[-1])
    rows = _rows(out)
    assert list(rows) == list(model.constrained_names)
    ess = diagnostics.ess_bulk(draws[:window[0], :window[1]])
    for k, name in enumerate(model.constrained_names):
        assert abs(rows[name][0] - flat.mean(0)[k]) <= 5.1e-5, (name, rows[name])
        assert abs(rows[name][2] - ess[k]) <= 0.51, (name, rows[name])
