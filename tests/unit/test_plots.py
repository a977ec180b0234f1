"""SampleResult.plot: a PNG of trace and rank plots, 10 x 2.5 inches per parameter at dpi."""
from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
from PIL import Image

from .test_sampler import _q0, _run


def png_size(path) -> tuple[int, int]:
    """(width, height) from the PNG signature and IHDR chunk."""
    with open(path, "rb") as f:
        header = f.read(24)
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR"
    return struct.unpack(">II", header[16:24])


def test_plot_writes_trace_and_rank_png_of_the_expected_size(tmp_path):
    res = _run(_q0("cpu", chains=5, dtype=torch.float32), 60, jitter=0.2)
    res.plot(tmp_path / "plot.png", params=[0, 2], dpi=40)
    assert png_size(tmp_path / "plot.png") == (400, 200)  # 10 x 40, 2 rows x 2.5 x 40
    pixels = np.asarray(Image.open(tmp_path / "plot.png").convert("RGB"))
    left, right = pixels[:, :200], pixels[:, 200:]
    # Both halves are drawn on (lines of several chain colours, not a blank canvas).
    for half in (left, right):
        assert len(np.unique(half.reshape(-1, 3), axis=0)) > 20


def test_plot_names_bad_arguments(tmp_path):
    res = _run(_q0("cpu"), 6)
    for kwargs, error, match in ((dict(params=[5]), ValueError, r"params.*\[0, 5\)"),
                                 (dict(params=[1, 1]), ValueError, "distinct"),
                                 (dict(params=["a"]), TypeError, "params"),
                                 (dict(chains=0), ValueError, "chains"),
                                 (dict(dpi=5), ValueError, "dpi")):
        with pytest.raises(error, match=match):
            res.plot(tmp_path / "x.png", **kwargs)
    with pytest.raises(ValueError, match="keep_samples=False"):
        _run(_q0("cpu"), 6, keep_samples=False).plot(tmp_path / "x.png")


class _Plot:
    """What plots._envelope_is_degenerate reads of an arviz-plots PlotCollection: the envelope's
    fill_between artists (credible_interval) and the figure."""

    def __init__(self, upper_at_first_rank: float, draws: int):
        import matplotlib.pyplot as plt
        import xarray as xr

        figure, ax = plt.subplots()
        x = np.arange(1, draws) / draws
        upper = 3 * np.sqrt(x * (1 - x) / draws) + 2 / draws
        upper[0] = upper_at_first_rank
        band = ax.fill_between(x, -upper, upper)
        self.viz = {"credible_interval": xr.DataTree(xr.Dataset(
            {"q": ("dim", np.array([band], dtype=object))})),
            "figure": xr.DataArray(np.array(figure, dtype=object))}


def test_a_degenerate_rank_envelope_is_simulated_again(monkeypatch):
    """arviz-stats 0.8 draws a band half a unit wide at the first rank for some draw counts (400
    with its default generator); the rank plot is then redrawn with another seed."""
    from fused_hmc import plots

    assert plots._envelope_is_degenerate(_Plot(0.4975, 400), 400)
    assert not plots._envelope_is_degenerate(_Plot(0.01, 400), 400)
    seeds = []

    class FakeArvizPlots:
        @staticmethod
        def plot_rank(tree, backend, stats, **size):
            seeds.append(stats.get("ecdf_pit", {}).get("rng"))
            return _Plot(0.4975 if len(seeds) == 1 else 0.01, 400)

    plot = plots._rank_plot(FakeArvizPlots, None, 400, {})
    assert len(seeds) == 2 and seeds[0] is None and seeds[1] is not None
    assert not plots._envelope_is_degenerate(plot, 400)
