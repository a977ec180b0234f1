"""Inputs refused up front with a message naming them (issue 30, item 12): data names the C/C++
headers define as macros, non-bool flags, q0 that requires grad, data or a --mean that overflows
float32, before anything compiles or runs."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

import fused_hmc
from fused_hmc import cli, cpp_build, cpp_data, cpp_macros

SOURCE = ("template <typename T, typename Data>\n"
          "FUSED_HMC_HD T log_density(const T* x, const Data& data) { return -x[0] * x[0]; }\n")


@pytest.mark.parametrize("name", ["M_PI", "EXIT_SUCCESS", "SIZE_MAX", "INT_MAX", "NULL", "errno",
                                  "stdout", "INFINITY", "RAND_MAX", "EDOM", "_Reserved", "a__b",
                                  "__x", "CUDA_VERSION"])
def test_a_data_name_the_headers_define_is_refused_naming_it(name):
    with pytest.raises(ValueError, match=rf"data name '{name}' (is|clashes)"):
        fused_hmc.CppTarget(SOURCE, 1, data={"y": 1.0, name: 1.0})


@pytest.mark.parametrize("name", ["J", "N", "K", "E", "M", "PI", "y", "sigma", "x_obs", "tau_",
                                  "CHECK", "LOG"])
def test_ordinary_data_names_pass(name):
    """Capitals, single letters, and function-like macros' names (a member is never followed
    by "(", so they cannot expand) are fine."""
    cpp_data.check_name(name)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("c++") is None, reason="needs the C++ compiler")
def test_the_macro_list_comes_from_the_compiler_and_its_cache_is_checked(tmp_path, monkeypatch):
    """Macros beyond the fixed list (pyconfig.h's HAVE_*, <climits>' LINE_MAX via POSIX) are
    found by asking the compiler; a cache file that is not a list of names is not believed."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(cpp_macros, "_cached", {})
    names = cpp_macros.object_like_macros()
    assert {"M_PI", "EXIT_SUCCESS", "SIZE_MAX", "stdout"} <= names
    beyond = names - cpp_macros.FALLBACK
    assert "HAVE_FORK" in beyond and "CHECK" not in names  # object-like only
    [cache] = tmp_path.glob("fused_hmc_macros_*.txt")
    assert set(cache.read_text().split()) | cpp_macros.FALLBACK == names
    cache.write_text("M_PI\nnot a name; system('x')\n")
    monkeypatch.setattr(cpp_macros, "_cached", {})
    assert cpp_macros.object_like_macros() == names  # computed again, not read
    assert set(cache.read_text().split()) | cpp_macros.FALLBACK == names


def test_without_a_compiler_the_fixed_list_stands_in(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setattr(cpp_macros, "_cached", {})
    assert cpp_macros.object_like_macros() == cpp_macros.FALLBACK
    assert list(tmp_path.iterdir()) == []  # nothing cached on disk
    with pytest.raises(ValueError, match=r"data name 'M_PI' is a macro"):
        cpp_data.check_name("M_PI")


def test_data_that_overflows_float32_is_reported_before_compiling(monkeypatch):
    target = fused_hmc.CppTarget(SOURCE, 1, data={"big": torch.tensor([1.0, 1e39],
                                                                     dtype=torch.float64)})
    monkeypatch.setattr(cpp_build, "load", lambda spec: pytest.fail("compiled first"))
    with pytest.raises(ValueError, match=r"data\['big'\] has entries that overflow torch.float32"):
        target.log_density(torch.zeros(2, 1))
    scalar = fused_hmc.CppTarget(SOURCE, 1, data={"big": 1e39})
    with pytest.raises(ValueError, match=r"data\['big'\] = 1e\+39 overflows torch.float32"):
        scalar.log_density(torch.zeros(2, 1))


@pytest.mark.parametrize("value", ["no", 0, 1, None, "False"])
def test_keep_samples_must_be_a_bool(value):
    with pytest.raises(TypeError, match=r"^keep_samples must be True or False, got "):
        fused_hmc.sample(torch.zeros(2, 3), 1, keep_samples=value, progress=False)


def test_keep_samples_accepts_numpy_bools():
    res = fused_hmc.sample(torch.zeros(2, 3), 2, keep_samples=np.bool_(False), progress=False,
                           seed=0)
    assert res.samples is None


def test_sample_refuses_q0_that_requires_grad_as_hmc_does():
    q0 = torch.zeros(2, 3, requires_grad=True)
    with pytest.raises(ValueError, match=r"^q0 requires grad.*pass q0.detach\(\)"):
        fused_hmc.sample(q0, 1, progress=False)
    with pytest.raises(ValueError, match=r"\bq requires grad.*pass q.detach\(\)"):
        fused_hmc.HMC(3)(q0)
    with torch.no_grad():  # as HMC: no graph is being recorded
        assert fused_hmc.sample(q0, 1, progress=False, seed=0).num_kept == 1


def test_cli_mean_beyond_float32_says_it_overflows(capsys):
    assert cli.main(["sample", "--mean", "1e39", "--chains", "2", "--dim", "2", "--samples", "2",
                     "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("fused-hmc sample: error: argument --mean: 1e+39 overflows float32, the "
                   "chains' dtype (it holds magnitudes up to 3.4e+38); use --dtype float64")
