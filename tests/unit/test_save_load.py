"""SampleResult.save / fused_hmc.load: every field round-trips bit for bit, in its dtype, and the
file is a zarr store that xarray (ArviZ's DataTree) opens, its posterior equal to to_arviz()."""
from __future__ import annotations

import pytest
import torch
import xarray as xr

import fused_hmc
from fused_hmc.sampling import saving

from .test_sampler import _q0, _run, assert_results_equal

DTYPES = [torch.float32, torch.float64]
DENSE = fused_hmc.DenseGaussian.from_covariance(
    torch.zeros(5), 0.5 * torch.eye(5, dtype=torch.float64) + 0.5)
CONFIGS = {
    "plain": dict(thin=3),
    "no samples": dict(keep_samples=False),
    "tuned warm-up": dict(target=fused_hmc.DiagonalGaussian(torch.linspace(-1, 1, 5),
                                                            torch.logspace(-1, 0, 5)),
                          num_warmup=40, jitter=0.2, seed=2**64 - 1),
    "dense, pooled": dict(target=DENSE, num_warmup=30, pooled=True),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_round_trip_is_exact(tmp_path, dtype, config):
    res = _run(_q0("cpu", dtype=dtype), 14, **CONFIGS[config])
    res.save(tmp_path / "run")
    back = fused_hmc.load(tmp_path / "run")
    assert_results_equal(back, res)  # every field: tensors bit for bit with their dtypes
    assert back.target == res.target and back.warmup == res.warmup and back.seed == res.seed
    assert (back.samples is None) == (config == "no samples")


def test_xarray_opens_the_posterior_as_to_arviz_gives_it(tmp_path):
    res = _run(_q0("cpu", dtype=torch.float32), 10, chain_offset=7)
    res.save(tmp_path / "run")
    tree = xr.open_datatree(tmp_path / "run", engine="zarr")
    expected = res.to_arviz()["posterior"].to_dataset()
    posterior = tree["posterior"].to_dataset()
    xr.testing.assert_identical(posterior.drop_attrs(), expected.drop_attrs())
    assert posterior["q"].dtype == "float32"
    assert {k: posterior.attrs[k] for k in res.posterior_attrs()} == res.posterior_attrs()
    stats = tree["fused_hmc"].to_dataset()  # the other fields are readable there too
    assert stats["accept_count"].values.tolist() == res.accept_count.tolist()


def test_save_refuses_an_existing_path_unless_overwrite(tmp_path):
    first, second = _run(_q0("cpu"), 4), _run(_q0("cpu"), 6)
    first.save(tmp_path / "run")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        second.save(tmp_path / "run")
    second.save(tmp_path / "run", overwrite=True)
    assert_results_equal(fused_hmc.load(tmp_path / "run"), second)
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no temporary left beside it


def test_load_reads_draws_into_memory_or_leaves_them_on_disk(tmp_path):
    res = _run(_q0("cpu"), 8)
    res.save(tmp_path / "run")
    lazy = fused_hmc.load(tmp_path / "run", samples=False)
    assert lazy.samples is None and lazy.samples_path == str(tmp_path / "run")
    assert torch.equal(torch.from_numpy(lazy.to_arviz()["posterior"]["q"].values), res.samples)
    with pytest.raises(ValueError, match="samples=True"):
        _run(_q0("cpu"), 4, keep_samples=False).save(tmp_path / "none")
        fused_hmc.load(tmp_path / "none", samples=True)


def test_load_names_what_is_wrong(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="no saved result"):
        fused_hmc.load(tmp_path / "missing")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device='cpu'"):
        saving.device_to_load("cuda:0", None)
    with pytest.raises(TypeError, match="samples"):
        fused_hmc.load(tmp_path, samples="yes")


def test_load_refuses_another_format(tmp_path, monkeypatch):
    _run(_q0("cpu", dtype=torch.float32), 4).save(tmp_path / "run")
    monkeypatch.setattr(saving, "FORMAT", saving.FORMAT + 1)
    with pytest.raises(ValueError, match="result of format 1; this fused_hmc reads format 2"):
        fused_hmc.load(tmp_path / "run")


def test_targets_compare_by_value():
    mu = torch.linspace(0, 1, 3)
    assert fused_hmc.StandardGaussian(mu) == fused_hmc.StandardGaussian(mu.clone())
    assert fused_hmc.StandardGaussian(mu) != fused_hmc.StandardGaussian(mu + 1)
    assert fused_hmc.StandardGaussian(mu) != fused_hmc.DiagonalGaussian(mu, torch.ones(3))
    assert len({fused_hmc.StandardGaussian(mu), fused_hmc.StandardGaussian(mu.clone())}) == 1


def test_a_cpp_target_round_trips_with_its_lanes(tmp_path):
    """A CppTarget's source, dim, names, gradient flag, lanes and data (without compiling it)."""
    import zarr

    from .test_lane_rows import DIM, GRADIENT, SHARE, _data

    target = fused_hmc.CppTarget(SHARE + GRADIENT, DIM, data=_data() | {"scale": 0.5, "n": 3},
                                 names=[f"x{j}" for j in range(DIM)], gradient=True, lanes=4)
    group = zarr.open_group(tmp_path / "t.zarr", mode="w")
    saving.write_target(group, target)
    back = saving.read_target(zarr.open_group(tmp_path / "t.zarr", mode="r"))
    assert (back.source, back.dim, back.names, back.has_gradient, back.lanes) == (
        target.source, DIM, target.names, True, 4)
    assert back.data.keys() == target.data.keys()
    for name, value in target.data.items():
        assert torch.equal(back.data[name], value) if isinstance(value, torch.Tensor) else (
            back.data[name] == value)



class Killed(BaseException):
    """Stands for a SIGKILL at that point (test_crash_consistency kills processes for real)."""


def _stopped_at(monkeypatch, module, name, call):
    """Makes the `call`-th call of module.name raise Killed (the earlier ones run)."""
    real, calls = getattr(module, name), []

    def stopping(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise Killed(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, stopping)


def test_a_save_over_a_result_stopped_between_its_renames_loads_the_old(tmp_path, monkeypatch):
    import os

    old, new = _run(_q0("cpu"), 4), _run(_q0("cpu"), 6)
    old.save(tmp_path / "run")
    _stopped_at(monkeypatch, os, "rename", 2)  # the old one moved aside, the new one not in
    with pytest.raises(Killed):
        new.save(tmp_path / "run", overwrite=True)
    monkeypatch.undo()
    assert_results_equal(fused_hmc.load(tmp_path / "run"), old)
    new.save(tmp_path / "run", overwrite=True)
    assert_results_equal(fused_hmc.load(tmp_path / "run"), new)
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # nothing left beside it


# Stopped in its first or second write of tensors (the fields, the target), or in a rename.
@pytest.mark.parametrize("stop", [("write_tensors", 1), ("write_tensors", 2), ("rename", 1),
                                  ("rename", 2)])
def test_a_stream_stopped_while_completing_a_later_run_loads_the_earlier(tmp_path, monkeypatch,
                                                                         stop):
    import os

    from fused_hmc.sampling import storage

    sampler = fused_hmc.Sampler(_q0("cpu"), seed=3, progress=False, out=tmp_path / "draws")
    first = sampler.run(4)
    name, call = stop
    _stopped_at(monkeypatch, storage if name == "write_tensors" else os, name, call)
    with pytest.raises(Killed):
        sampler.run(6)
    monkeypatch.undo()
    # Stopped before the new group took the old one's place: the old; after: the new, complete.
    second = _run(_q0("cpu"), 10, seed=3)._replace(samples=None, samples_path=first.samples_path)
    expected = second if stop == ("rename", 2) else first
    assert_results_equal(fused_hmc.load(tmp_path / "draws"), expected)
    first.save(first.samples_path)  # completes that store again, in place
    assert_results_equal(fused_hmc.load(tmp_path / "draws"), first)


def test_load_names_an_incomplete_store(tmp_path):
    import json
    import shutil

    res = _run(_q0("cpu"), 6)
    res.save(tmp_path / "run")
    shutil.rmtree(tmp_path / "run" / "fused_hmc" / "var")
    with pytest.raises(ValueError, match=f"{tmp_path / 'run'} is incomplete.*var"):
        fused_hmc.load(tmp_path / "run")
    res.save(tmp_path / "run2")
    meta = tmp_path / "run2" / "fused_hmc" / "zarr.json"
    document = json.loads(meta.read_text())
    del document["attributes"]["num_kept"]
    meta.write_text(json.dumps(document))
    with pytest.raises(ValueError, match="is incomplete.*num_kept"):
        fused_hmc.load(tmp_path / "run2")
    res.save(tmp_path / "run3")
    shutil.rmtree(tmp_path / "run3" / "posterior")
    with pytest.raises(ValueError, match="is incomplete.*posterior"):
        fused_hmc.load(tmp_path / "run3")
