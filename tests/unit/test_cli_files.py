"""`fused-hmc sample --out/--checkpoint/--resume/--plot` and `fused-hmc bench`, in-process on CPU:
a run stopped by Ctrl-C and resumed ends with the uninterrupted run's store bit for bit, the plot
is a PNG of the expected size, bad paths are one-line flag errors, and the bench prints its table."""
from __future__ import annotations

import math
import re

import pytest
import torch

import fused_hmc
from fused_hmc import bench, cli
from fused_hmc.reference import ReferenceModel

from .test_plots import png_size
from .test_sampler import assert_results_equal
from .test_sampler_ctrl_c import _sigint_after_call, sigint_handler  # noqa: F401 - a fixture

SMALL = ["--chains", "8", "--dim", "2", "--samples", "40", "--device", "cpu", "--no-progress",
         "--jitter", "0.1"]


def _sample(capsys, *argv):
    code = cli.main(["sample", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_out_checkpoint_and_plot(capsys, tmp_path):
    out, ck, png = tmp_path / "draws", tmp_path / "run.ckpt", tmp_path / "plot.png"
    code, text, err = _sample(capsys, *SMALL, "--out", str(out), "--checkpoint", str(ck),
                              "--plot", str(png))
    assert code == 0, err
    assert str(out) in text and str(png) in text
    res = fused_hmc.load(out)
    assert res.num_kept == 40 and res.samples is None and res.samples_path == str(out)
    assert_results_equal(fused_hmc.Sampler.from_checkpoint(ck).run(), res)  # finished there
    assert png_size(png) == (1000, 500)  # 10 x 100 dpi; 2 dims x 2.5 x 100


def test_ctrl_c_then_resume_ends_with_the_uninterrupted_store(sigint_handler, capsys,  # noqa: F811
                                                              monkeypatch, tmp_path):
    whole, out, ck = tmp_path / "whole", tmp_path / "draws", tmp_path / "run.ckpt"
    assert _sample(capsys, *SMALL, "--out", str(whole))[0] == 0
    _sigint_after_call(monkeypatch, "sampling", call=2)
    code, text, _ = _sample(capsys, *SMALL, "--out", str(out), "--checkpoint", str(ck))
    assert code == 130 and "[interrupted]" in text
    monkeypatch.undo()
    code, text, err = _sample(capsys, "--resume", str(ck), "--no-progress")
    assert code == 0, err
    assert "40 sampling" in text and "8 chains x 2 dims" in text and "jitter 0.1" in text
    resumed, expected = fused_hmc.load(out, samples=True), fused_hmc.load(whole, samples=True)
    assert_results_equal(resumed, expected)


@pytest.mark.parametrize("argv, flag", [
    (["--resume", "{ck}", "--samples", "5"], "--samples"),
    (["--resume", "{ck}", "--checkpoint", "{tmp}/other"], "--checkpoint"),
    (["--resume", "{tmp}/missing.ckpt"], "--resume"),
    (["--out", "{tmp}"], "--out"),  # exists
    (["--out", "{tmp}/no/such/dir"], "--out"),
    (["--checkpoint", "{tmp}/no/such/file"], "--checkpoint"),
    (["--plot", "{tmp}/no/plot.png"], "--plot"),
    (["--plot", "{tmp}/p.png", "--no-keep-samples"], "--plot"),
    (["--out", "{tmp}/new", "--no-keep-samples"], "--out"),
    (["--checkpoint-every", "-1"], "--checkpoint-every"),
])
def test_bad_file_flags_are_one_line_errors(capsys, tmp_path, argv, flag):
    ck = tmp_path / "run.ckpt"
    fused_hmc.sample(torch.zeros(1, 1), 2, seed=0, progress=False, checkpoint=ck)
    argv = [a.format(ck=ck, tmp=tmp_path) for a in argv]
    code, out, err = _sample(capsys, *SMALL, *argv) if "--resume" not in argv else \
        _sample(capsys, "--no-progress", *argv)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fused-hmc sample: error: "), err
    assert flag in lines[0] and "Traceback" not in err, err


def test_bench_prints_both_workloads_with_ratios(capsys):
    code = cli.main(["bench", "--device", "cpu", "--chains", "8", "--dim", "4",
                     "--transitions", "5", "--seconds", "0.1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = re.findall(r"^(one transition|5 transitions, chained \(sample\))\s+(.+?)\s{2,}(.+?)"
                      r"\s+([\d.e+]+)x$", out, re.M)
    assert [r[0] for r in rows] == ["one transition", "5 transitions, chained (sample)"], out
    assert all(math.isfinite(float(r[3])) and float(r[3]) > 0 for r in rows)
    assert "8 chains x 4 dims" in out


def test_bench_refuses_to_time_outputs_that_disagree(monkeypatch):
    real = ReferenceModel.forward
    monkeypatch.setattr(ReferenceModel, "forward", lambda self, q: (real(self, q)[0] + 1, None))
    with pytest.raises(RuntimeError, match="disagree"):
        bench.run_bench(torch.device("cpu"), 4, 3, 2, 2, budget_s=0.01)
