"""SampleResult.plot: a PNG of trace and rank plots, 10 x 2.5 inches per parameter at dpi, panels
titled by the parameters' names with a legend of the chains; ``fused-hmc sample --plot-params``."""
from __future__ import annotations

import struct

import numpy as np
import pytest
import torch
from PIL import Image

import fused_hmc

from fused_hmc import cli
from fused_hmc.plots import trace_and_rank

from .test_sampler import _q0, _run
from .test_summary_output import NAMES, SOURCE, _iid, _result


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
                                 (dict(params=["a"]), ValueError, "params.*'a' is not"),
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


def _titles(plot) -> list[str]:
    return [ax.get_title() for ax in plot.viz["figure"].item().axes if ax.get_title()]


def test_panels_are_titled_by_the_chosen_parameters_names_with_a_legend_of_chains():
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    res = _result(_iid(chains=5, draws=100), fused_hmc.CppTarget(SOURCE, 10, names=NAMES))
    trace, rank = trace_and_rank(res, ["mu", "log_tau", 0])
    assert _titles(trace) == _titles(rank) == ["mu", "log_tau", "theta_tilde[0]"]
    legends = trace.viz["figure"].item().legends
    assert [t.get_text() for t in legends[0].get_texts()] == ["0", "1", "2", "3"]  # the chains
    lines = trace.viz["figure"].item().axes[0].get_lines()  # mu's trace: its own draws
    np.testing.assert_array_equal(lines[0].get_ydata(), res.samples[0, :, 8].numpy())
    trace_unnamed, _ = trace_and_rank(_result(_iid(dim=3)), [2, 0])
    assert _titles(trace_unnamed) == ["q[2]", "q[0]"]
    plt.close("all")


def test_cli_plot_params_by_index_and_their_errors(capsys, tmp_path):
    png = tmp_path / "p.png"
    small = ["sample", "--chains", "4", "--dim", "3", "--samples", "8", "--no-progress",
             "--device", "cpu"]
    assert cli.main([*small, "--plot", str(png), "--plot-params", "2,0"]) == 0
    out = capsys.readouterr().out
    assert f"trace and rank plots of q[2], q[0] (first 4 chains) in {png}" in out
    assert png_size(png) == (1000, 500)  # 2 parameters
    for argv, says in ((["--plot", str(tmp_path / "x.png"), "--plot-params", "3"],
                        "3 is not"),
                       (["--plot", str(tmp_path / "x.png"), "--plot-params", "mu"], "'mu' is not"),
                       (["--plot", str(tmp_path / "x.png"), "--plot-params", "0,,1"],
                        "comma-separated"),
                       (["--plot-params", "0"], "give --plot PNG too")):
        assert cli.main([*small, *argv]) == 2
        err = capsys.readouterr().err
        assert "argument --plot-params" in err and says in err and len(err.splitlines()) == 1
        assert not (tmp_path / "x.png").exists()


def test_version_flag_prints_the_package_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"fused-hmc {fused_hmc.__version__}\n"


@pytest.mark.slow  # eight envelope simulations before the fallback: about 10 s
def test_a_chain_count_without_a_valid_envelope_plots_the_rank_ecdfs_alone():
    """arviz-stats 0.8 draws a band of +-0.99 for 3 chains whatever the seed: the rank plot is
    drawn without it (and says so) instead of failing."""
    import matplotlib.pyplot as plt

    trace, rank = trace_and_rank(_result(_iid(chains=3, draws=100, dim=2)), [1], chains=3)
    assert "credible_interval" not in rank.viz.children and _titles(rank) == ["q[1]"]
    assert "no valid envelope" in rank.viz["figure"].item().get_suptitle()
    assert len(rank.viz["figure"].item().axes[0].get_lines()) >= 3  # one ECDF per chain
    plt.close("all")
