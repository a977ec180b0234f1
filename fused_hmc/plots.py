"""Trace and rank plots of a result's draws, drawn by arviz-plots with its matplotlib backend.

``SampleResult.plot(path)`` (and ``fused-hmc sample --plot``) write one PNG: for each chosen
parameter (a dimension of q) a row with its trace, draw by draw for each chain (left), and its
rank plot (right: the ECDF of each chain's ranks among all chains' draws against the uniform, with
a simultaneous envelope; Saeilynoja, Buerkner & Vehtari 2022), which shows chains that disagree.
The two arviz-plots figures are rendered side by side at the same size (matplotlib's Agg canvas,
whatever backend is selected), so the image is 10 x 2.5 inches per parameter at `dpi`.
"""
from __future__ import annotations

import numbers
from pathlib import Path

import numpy as np

# Inches: each of the two plots is this wide, and this high per parameter.
PLOT_WIDTH, ROW_HEIGHT = 5.0, 2.5
DEFAULT_PARAMS = 4


def _index_list(name: str, values, size: int) -> list[int]:
    if values is None:
        return list(range(min(DEFAULT_PARAMS, size)))
    if isinstance(values, numbers.Integral) and not isinstance(values, bool):
        values = [values]
    values = list(values)
    if not values or any(isinstance(v, bool) or not isinstance(v, numbers.Integral)
                         for v in values):
        raise TypeError(f"{name} must be dimension indices (integers), got {values!r}")
    if any(not 0 <= v < size for v in values) or len(set(values)) != len(values):
        raise ValueError(f"{name} must be distinct dimension indices in [0, {size}), got "
                         f"{values}")
    return [int(v) for v in values]


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


def plot_trace_rank(res, path, params=None, *, chains: int = 4, dpi: int = 100) -> None:
    """Writes the PNG described in the module docstring for result `res` to `path`.

    params: dimension indices of q (default the first 4); chains: how many of the first chains
    (at least 1; rank plots compare chains, 4 is ArviZ's usual); dpi: pixels per inch (the image
    is 10 dpi x 2.5 dpi len(params)). Needs the draws (in memory or streamed) and >= 2 of them.
    """
    if isinstance(chains, bool) or not isinstance(chains, numbers.Integral) or chains < 1:
        raise ValueError(f"chains must be an integer >= 1, got {chains!r}")
    if isinstance(dpi, bool) or not isinstance(dpi, numbers.Integral) or not 10 <= dpi <= 1000:
        raise ValueError(f"dpi must be an integer in [10, 1000], got {dpi!r}")
    dim = res.final_state.shape[1]
    params = _index_list("params", params, dim)
    if res.num_kept < 2:
        raise ValueError(f"plot() needs at least 2 kept draws, this result has {res.num_kept}")
    try:
        import arviz_plots
        import xarray as xr
    except ImportError as exc:
        raise ImportError("plots need arviz-plots and matplotlib, dependencies of fused_hmc: "
                          "pip install arviz-plots matplotlib") from exc
    posterior = res.to_arviz()["posterior"].to_dataset()
    posterior = posterior.isel(chain=slice(0, chains), dim=params).load()
    tree = xr.DataTree.from_dict({"posterior": posterior})
    size = dict(figure_kwargs={"figsize": (PLOT_WIDTH, ROW_HEIGHT * len(params)),
                               "layout": "constrained"}, col_wrap=1)
    trace = _render(arviz_plots.plot_trace(tree, backend="matplotlib", **size), dpi)
    rank = _render(arviz_plots.plot_rank(tree, backend="matplotlib", **size), dpi)
    from PIL import Image

    Image.fromarray(np.concatenate([trace, rank], axis=1)).save(Path(path), format="PNG")
