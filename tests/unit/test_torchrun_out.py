"""``torchrun ... sample --out PATH``: every rank's store and summary.json (rank_stores.py).

The stores of a 2-rank run must hold, bit for bit, the rows of the store a one-process run of
every chain writes (same seed: the same chains); summary.json's merged moments must be those of
the one-process per-chain moments merged at once, to float64 rounding.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

import fused_hmc
from fused_hmc.cli import CliError, build_parser
from fused_hmc.cli.ranks import Ranks
from fused_hmc.sampling import rank_stores
from fused_hmc.sampling.distributed import merge_moments

FLAGS = ["--device", "cpu", "--dim", "3", "--samples", "40", "--thin", "4", "--warmup", "30",
         "--jitter", "0.2", "--seed", "5", "--no-progress"]
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def _sample(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=ENV)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    where = tmp_path_factory.mktemp("torchrun_out")
    one, ranks = where / "one", where / "ranks"
    _sample([sys.executable, "-m", "fused_hmc", "sample", "--chains", "6", "--out", str(one),
             *FLAGS])
    torchrun = Path(sys.executable).parent / "torchrun"
    stdout = _sample([str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "fused_hmc",
                      "sample", "--chains", "3", "--out", str(ranks), *FLAGS])
    return one, ranks, stdout


def test_rank_stores_are_the_one_process_store(runs):
    one, ranks, stdout = runs
    assert stdout.count(f"result            in {ranks}") == 1, stdout
    reference = fused_hmc.load(one, samples=True)
    summary = rank_stores.read_summary(ranks)
    assert [(s["store"], s["first_chain"], s["chains"]) for s in summary["stores"]] == \
        [("rank0", 0, 3), ("rank1", 3, 3)]
    parts = [fused_hmc.load(rank_stores.rank_store(ranks, r), samples=True) for r in range(2)]
    assert [p.chain_offset for p in parts] == [0, 3]
    for name in ("samples", "final_state", "accept_count", "mean", "var", "mean_accept_prob",
                 "step_size", "inverse_mass"):
        assert torch.equal(torch.cat([getattr(p, name) for p in parts]),
                           getattr(reference, name)), name
    # The recipe rank_stores' docstring gives: every rank's draws as one dataset.
    posterior = xr.concat([xr.open_zarr(ranks / s["store"], group="posterior")
                           for s in summary["stores"]], dim="chain")
    assert posterior["chain"].values.tolist() == list(range(6))
    assert np.array_equal(posterior["q"].values, reference.samples.numpy())


def test_summary_holds_the_merged_moments(runs):
    one, ranks, _ = runs
    reference, summary = fused_hmc.load(one), rank_stores.read_summary(ranks)
    n = reference.num_kept
    total, mean, m2 = merge_moments(torch.full((6,), n), reference.mean, reference.var * (n - 1))
    var = m2.numpy() / (total - 1)
    assert (summary["chains"], summary["ranks"], summary["draws"]) == (6, 2, total)
    # The same float64 terms summed in another order: a few ulp of the scale (64 ulp allowed).
    eps = np.finfo(np.float64).eps
    np.testing.assert_allclose(summary["mean"], mean.numpy(), rtol=0,
                               atol=64 * eps * np.sqrt(var).max())
    np.testing.assert_allclose(summary["var"], var, rtol=64 * eps)
    assert summary["accept_count"] == int(reference.accept_count.sum())
    assert summary["transitions"] == 6 * reference.num_transitions
    assert summary["mean_accept_prob"] == pytest.approx(
        reference.mean_accept_prob.double().mean().item(), rel=1e-12)


def test_loading_a_ranks_directory_names_its_stores(runs):
    _, ranks, _ = runs
    with pytest.raises(ValueError, match="one store per rank.*rank0"):
        fused_hmc.load(ranks)


def test_summary_of_another_format_is_refused(tmp_path):
    (tmp_path / rank_stores.SUMMARY).write_text(json.dumps({"fused_hmc_ranks_format": 99}))
    with pytest.raises(ValueError, match="format 99"):
        rank_stores.read_summary(tmp_path)


def test_existing_out_is_refused_before_joining(tmp_path):
    """Every rank checks --out before the process group exists, so none waits for the others."""
    (tmp_path / "taken").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "fused_hmc", "sample", "--chains", "4", "--out",
         str(tmp_path / "taken"), *FLAGS], capture_output=True, text=True, timeout=120,
        env=dict(ENV, WORLD_SIZE="2", RANK="0"))
    assert done.returncode != 0
    assert "--out" in done.stderr and "exists" in done.stderr, done.stderr


def test_a_rank_beyond_the_gpus_is_named(monkeypatch):
    """NCCL cannot put two ranks on one GPU: the rank says so instead of a CUDA ordinal error."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("RANK", "1")
    args = build_parser().parse_args(["sample", "--device", "cuda", "--chains", "4"])
    with pytest.raises(CliError, match="local rank 1 needs GPU 1.*has 1.*nproc_per_node"):
        Ranks(args, 2)
