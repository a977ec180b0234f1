"""Whether generated code can be split over a chain's lanes (``TorchModel(..., lanes=G)``).

With lanes, each row loop runs over the rows ``rows.first, rows.first + rows.step, ...`` and the
lanes' shares are summed (docs/TARGETS.md, "Data rows over lanes"). The code after the row loops
is a function F of their accumulators; the split is exact when F is affine in them: then

    sum over lanes of  F(acc_lane) - [rows.first != 0] F(acc_empty)  =  F(acc_all rows),

acc_empty being an accumulator with no row added (its initial value). :func:`row_degrees` is the
degree analysis that decides it: a row accumulator has degree 1, a value not depending on one
degree 0; linear ops take the largest degree of their operands, products the sum, and a
nonlinear function (or a division by) of a degree-1 value is not affine.
"""
from __future__ import annotations

import torch.fx

from .ops import VIEWS
from .trace import SHAPE_ONLY, TorchModelError, op_name

NOT_AFFINE = 2  # any degree above 1

LINEAR = VIEWS | {
    "add", "sub", "rsub", "neg", "copy", "_to_copy", "convert_element_type", "cat", "index",
    "gather", "embedding", "select_scatter", "slice_scatter", "constant_pad_nd", "sum", "mean",
    "index_put", "scatter_add", "embedding_dense_backward", "cumsum"}
PRODUCTS = frozenset({"mul", "mm", "mv", "dot", "bmm"})

WHY = "the density must be a sum over the data's rows, each lane's share added"


def refuse_row_loop(cg, n, combine: str, lanes: int) -> None:
    """A row loop the lanes cannot split: a max, min or product over the rows."""
    what = {"max": "a max", "min": "a min", "*": "a product"}[combine]
    raise TorchModelError(
        f"lanes={lanes} cannot split this density over the lanes: {WHY}, but aten."
        f"{op_name(n)} takes {what} over the rows{cg.t.where(n)} (logsumexp over the rows does "
        "so); use lanes=1")


def refuse_nested(cg, n, lanes: int) -> None:
    """A row loop that needs another row loop's result."""
    raise TorchModelError(
        f"lanes={lanes} cannot split this density over the lanes: {WHY}, but aten.{op_name(n)} "
        f"over the rows uses the result of another reduction over the rows{cg.t.where(n)} "
        "(as logsumexp over the rows does); use lanes=1")


def _degree(n: torch.fx.Node, deg) -> int:
    name = op_name(n)
    if name in SHAPE_ONLY:
        return 0
    args = [a for a in n.args]
    if name == "where":
        if deg(args[0]) > 0:
            return NOT_AFFINE
        return max(deg(args[1]), deg(args[2]))
    if name == "div":
        return deg(args[0]) if deg(args[1]) == 0 else NOT_AFFINE
    if name == "pow":
        e = args[1]
        if isinstance(e, (int, float)) and float(e).is_integer() and e >= 0:
            return min(deg(args[0]) * int(e), NOT_AFFINE)
        return NOT_AFFINE
    inputs = n.all_input_nodes
    if name in PRODUCTS:
        return min(sum(deg(a) for a in inputs), NOT_AFFINE)
    if name in LINEAR:
        return max((deg(a) for a in inputs), default=0)
    return NOT_AFFINE


def row_degrees(cg, nodes, row_accs, outputs, lanes: int) -> set:
    """The nodes (in graph order) whose value depends on a row accumulator; raises
    TorchModelError naming the first op that makes an output not affine in them."""
    degree: dict = {}

    def deg(a) -> int:
        return degree.get(a, 0) if isinstance(a, torch.fx.Node) else 0

    for n in nodes:
        if n in row_accs:
            degree[n] = 1
        elif any(deg(i) for i in n.all_input_nodes):
            degree[n] = _degree(n, deg)
    if all(deg(o) <= 1 for o in outputs):
        return {n for n, d in degree.items() if d}
    first = next(n for n in nodes if deg(n) > 1 and all(deg(i) <= 1 for i in n.all_input_nodes))
    raise TorchModelError(
        f"lanes={lanes} cannot split this density over the lanes: {WHY}, but aten."
        f"{op_name(first)} is not affine in a sum over the rows{cg.t.where(first)} (as the log "
        "of a row sum is not); use lanes=1")
