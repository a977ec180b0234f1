"""Trace and rank plots of a result's draws, drawn by arviz-plots with its matplotlib backend.

``SampleResult.plot(path)`` (and ``fused-hmc sample --plot``, ``--plot-params``) write one PNG:
for each chosen parameter (a dimension of q, by index or by the target's name) a row with its
trace, draw by draw for each chain (left), and its rank plot (right: the ECDF of each chain's
ranks among all chains' draws against the uniform, with a simultaneous envelope; Saeilynoja,
Buerkner & Vehtari 2022), which shows chains that disagree. Each panel is titled by the
parameter's name (``q[j]`` without names), and the trace plot has a legend of the chains. The two
arviz-plots figures are rendered side by side at the same size (matplotlib's Agg canvas, whatever
backend is selected), so the image is 10 x 2.5 inches per parameter at `dpi`. Chains of more than
MAX_DRAWS draws are thinned evenly to at most that many for the plots.
"""
from __future__ import annotations

import numbers
from pathlib import Path

import numpy as np

from .diagnostics import parameter_indices

# Inches: each of the two plots is this wide, and this high per parameter.
PLOT_WIDTH, ROW_HEIGHT = 5.0, 2.5
DEFAULT_PARAMS = 4
# Longer chains are thinned evenly to at most this many draws: a PNG shows no more, and
# arviz-plots' rank envelope costs a simulation of chains x draws per 1000 repeats (about 1 s here).
MAX_DRAWS = 500


def _render(plot_collection, dpi: int) -> np.ndarray:
    """The collection's matplotlib figure as RGBA pixels [height, width, 4]."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    import matplotlib.pyplot as plt

    figure = plot_collection.viz["figure"].item()
    figure.set_dpi(dpi)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    pixels = np.array(canvas.buffer_rgba())
    plt.close(figure)
    return pixels


def _envelope_is_degenerate(plot_collection, draws: int) -> bool:
    """Whether a rank plot's envelope is one of arviz-stats 0.8's broken ones: for some draw
    counts (356, 400, 454, ... with its default generator) its simulation yields a band half a
    unit wide even at the first rank 1/n, where a 99% simultaneous band spans a few ranks (its
    upper end is within 10/n of the uniform's)."""
    bands = plot_collection.viz["credible_interval"].to_dataset()
    for name in bands.data_vars:
        for band in np.ravel(bands[name].values):
            x, y = band.get_paths()[0].vertices.T
            if float(y[np.isclose(x, x.min())].max()) > max(0.25, 10 / draws):
                return True
    return False


def _rank_plot(arviz_plots, tree, draws: int, size: dict):
    """arviz-plots' rank plot, its envelope simulated again with other seeds while degenerate,
    and left out when 8 seeds gave none valid."""
    import matplotlib.pyplot as plt

    for seed in range(8):
        stats = {} if seed == 0 else {"ecdf_pit": {"rng": np.random.default_rng(seed)}}
        plot = arviz_plots.plot_rank(tree, backend="matplotlib", stats=stats, **size)
        if not _envelope_is_degenerate(plot, draws):
            return plot
        plt.close(plot.viz["figure"].item())
    # Some chain counts get no usable envelope from any seed (arviz-stats 0.8: 2 and 3 chains, a
    # band of +-0.99 everywhere): the chains' rank ECDFs alone, and a title that says so.
    plot = arviz_plots.plot_rank(tree, backend="matplotlib",
                                 visuals={"credible_interval": False}, **size)
    plot.viz["figure"].item().suptitle("rank ECDFs (arviz-stats drew no valid envelope)",
                                       fontsize="small")
    return plot


def parameter_labels(res) -> list[str]:
    """A title for each dimension of q: the target's parameter names, else q[j]."""
    names = res.parameter_names
    return [str(n) for n in names] if names is not None else [
        f"q[{j}]" for j in range(res.final_state.shape[1])]


def trace_and_rank(res, params=None, *, chains: int = 4):
    """The two arviz-plots PlotCollections (matplotlib) of :func:`plot_trace_rank`: the traces of
    the chosen parameters with a legend of the chains, and their rank plots; one panel per
    parameter, titled by its name. Arguments as :func:`plot_trace_rank`'s."""
    if isinstance(chains, bool) or not isinstance(chains, numbers.Integral) or chains < 1:
        raise ValueError(f"chains must be an integer >= 1, got {chains!r}")
    params = parameter_indices(params, res.final_state.shape[1], res.parameter_names,
                               default=DEFAULT_PARAMS, argument="params")
    if res.num_kept < 2:
        raise ValueError(f"plot() needs at least 2 kept draws, this result has {res.num_kept}")
    try:
        import arviz_plots
        import xarray as xr
    except ImportError as exc:
        raise ImportError("plots need arviz-plots and matplotlib, dependencies of fused_hmc: "
                          "pip install arviz-plots matplotlib") from exc
    every = -(-res.num_kept // MAX_DRAWS)
    q = res.to_arviz()["posterior"]["q"].isel(chain=slice(0, chains),
                                               draw=slice(None, None, every))
    labels = parameter_labels(res)
    # One variable per parameter, named by it: arviz-plots titles a panel by its variable.
    posterior = xr.Dataset({labels[j]: q.isel(dim=j, drop=True) for j in params}).load()
    tree = xr.DataTree.from_dict({"posterior": posterior})
    size = dict(figure_kwargs={"figsize": (PLOT_WIDTH, ROW_HEIGHT * len(params)),
                               "layout": "constrained"}, col_wrap=1)
    trace = arviz_plots.plot_trace(tree, backend="matplotlib", **size)
    trace.add_legend("chain")
    return trace, _rank_plot(arviz_plots, tree, posterior.sizes["draw"], size)


def plot_trace_rank(res, path, params=None, *, chains: int = 4, dpi: int = 100) -> None:
    """Writes the PNG described in the module docstring for result `res` to `path`.

    params: the parameters, by dimension index of q or by the target's name (one or a list;
    default the first 4); chains: how many of the first chains (at least 1; rank plots compare
    chains, 4 is ArviZ's usual); dpi: pixels per inch (the image is 10 dpi x 2.5 dpi len(params)).
    Needs the draws (in memory or streamed) and >= 2 of them; more than MAX_DRAWS are thinned
    evenly to at most that many.
    """
    if isinstance(dpi, bool) or not isinstance(dpi, numbers.Integral) or not 10 <= dpi <= 1000:
        raise ValueError(f"dpi must be an integer in [10, 1000], got {dpi!r}")
    trace, rank = trace_and_rank(res, params, chains=chains)
    pixels = np.concatenate([_render(trace, dpi), _render(rank, dpi)], axis=1)
    from PIL import Image

    Image.fromarray(pixels).save(Path(path), format="PNG")
