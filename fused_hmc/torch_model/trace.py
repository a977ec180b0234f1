"""Tracing a one-chain log density and its reverse-mode gradient to an ATen graph.

``trace(lp, dim, data, fn)`` runs ``make_fx(grad_and_value(lp))`` at x = 0 in float64 (the
default dtype is float64 while tracing, so ``Normal(0.0, 5.0)`` holds float64 numbers, and
torch.distributions' argument validation is off: it branches on values). Core ATen
decompositions leave a small op set (fused_hmc/torch_model/ops.py lowers it). The graph is then
normalised: in-place ops become their functional forms (decompositions apply them only to fresh
temporaries, which is checked), and every node that does not depend on x is a constant, folded
here once in float64 (the data's logs, squares, index arithmetic...).

Errors name the user's line: a failure while tracing (a shape mismatch, a Python branch on a
parameter's value) by the traceback's frame in ``fn``'s file, a node by the stack trace
make_fx records for the user's function.
"""
from __future__ import annotations

import contextlib
import linecache
import traceback
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch._decomp
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx


class TorchModelError(ValueError):
    """The user's torch log density cannot be compiled (the message says where and why)."""


# Ops whose result does not depend on their tensor argument's values, only its shape/dtype.
SHAPE_ONLY = frozenset({"full_like", "zeros_like", "ones_like", "empty_like", "new_zeros",
                        "new_ones", "new_full", "new_empty"})


@contextlib.contextmanager
def tracing_defaults():
    """float64 default dtype and no distribution argument validation (it branches on values)."""
    dtype = torch.get_default_dtype()
    validate = torch.distributions.Distribution._validate_args
    torch.set_default_dtype(torch.float64)
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        torch.distributions.Distribution.set_default_validate_args(validate)


def op_name(n: torch.fx.Node) -> str:
    """'exp' for aten.exp.default, 'sum' for aten.sum.dim_IntList; '' for non-ATen nodes."""
    if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
        return ""
    return n.target.overloadpacket.__name__


@dataclass
class Traced:
    """The normalised graph: gm's nodes with x the placeholder; value and grad the outputs;
    constants: node -> its value (every node not depending on x); user_tensors: get_attr node ->
    the data key it reads."""

    gm: torch.fx.GraphModule
    x: torch.fx.Node
    value: torch.fx.Node
    grad: torch.fx.Node
    constants: dict = field(default_factory=dict)
    user_tensors: dict = field(default_factory=dict)
    from_data: set = field(default_factory=set)  # constants whose value depends on the data
    user_file: str | None = None

    def where(self, n: torch.fx.Node) -> str:
        """' (at file:line: code)' for a node traced in the user's function, else ' (in the
        gradient or a library function)'."""
        return user_line(n.meta.get("stack_trace") or "", self.user_file) or \
            " (in the gradient, or in a library function the density calls)"


def user_line(stack: str, user_file: str | None) -> str:
    best = None
    for line in stack.splitlines():
        line = line.strip()
        if line.startswith("File \"") and user_file and f"\"{user_file}\"" in line:
            best = line
    if best is None:
        return ""
    try:
        path = best.split("\"")[1]
        number = int(best.split(", line ")[1].split(",")[0])
    except (IndexError, ValueError):
        return ""
    code = linecache.getline(path, number).strip()
    return f" (at {path}:{number}: {code})" if code else f" (at {path}:{number})"


def _frame_in(exc: BaseException, user_file: str | None) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == user_file]
    if not frames:
        return ""
    f = frames[-1]
    return f" at {f.filename}:{f.lineno}: {(f.line or '').strip()}"


def _is_data_dependent(exc: BaseException) -> bool:
    text = str(exc)
    return ("data-dependent" in text or "_local_scalar_dense" in text
            or "data dependent" in text or type(exc).__name__.startswith("GuardOnDataDependent"))


def trace(lp: Callable, dim: int, data_tensors: dict, user_fn: Callable) -> Traced:
    """Traces lp (x [dim] float64 -> 0-d tensor) and its gradient; see the module docstring."""
    user_file = getattr(getattr(user_fn, "__code__", None), "co_filename", None)
    x0 = torch.zeros(dim, dtype=torch.float64)
    anchors = getattr(torch.fx.proxy, "_STACK_TRACE_ANCHORS", None)
    anchor = None
    if anchors is not None and user_file is not None:
        anchor = (user_fn.__code__.co_filename, user_fn.__code__.co_name)
        anchors.add(anchor)
    try:
        with tracing_defaults():
            gm = make_fx(torch.func.grad_and_value(lp),
                         decomposition_table=torch._decomp.core_aten_decompositions(),
                         record_stack_traces=True)(x0)
    except TorchModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - every tracing failure becomes the user's error
        where = _frame_in(exc, user_file)
        if _is_data_dependent(exc):
            raise TorchModelError(
                f"fn's Python control flow depends on a parameter's value{where}: a compiled "
                "density cannot branch on the chain's position in Python; write the choice as "
                "torch.where(condition, a, b)") from None
        raise TorchModelError(f"tracing fn failed{where}: {type(exc).__name__}: {exc}") from exc
    finally:
        if anchor is not None:
            anchors.discard(anchor)
    return _normalise(gm, data_tensors, user_file)


def _functional(n: torch.fx.Node, order: dict) -> None:
    """Rewrites an in-place op (add_, copy_, ...) as its functional form, after checking that
    nothing reads the overwritten tensor later (decompositions use them on fresh temporaries)."""
    name = op_name(n)
    if not name.endswith("_") or name.endswith("__"):
        return
    target = n.args[0]
    if isinstance(target, torch.fx.Node):
        later = [u for u in target.users if u is not n and order[u] > order[n]]
        if later:
            raise TorchModelError(f"in-place {name} on a tensor read afterwards "
                                  f"({later[0].name}): not supported")
    packet = getattr(torch.ops.aten, name[:-1])
    n.target = getattr(packet, n.target._overloadname)


def _normalise(gm: torch.fx.GraphModule, data_tensors: dict, user_file) -> Traced:
    nodes = list(gm.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    (x,) = [n for n in nodes if n.op == "placeholder"]
    (out,) = [n for n in nodes if n.op == "output"]
    grad, value = out.args[0]
    traced = Traced(gm, x, value, grad, user_file=user_file)
    by_id = {id(t): key for key, t in data_tensors.items()}
    for n in nodes:
        _functional(n, order)
        if n.op == "get_attr":
            t = getattr(gm, n.target)
            traced.constants[n] = t
            if id(t) in by_id:
                traced.user_tensors[n] = by_id[id(t)]
                traced.from_data.add(n)
        elif n.op == "call_function":
            _fold(n, traced)
    return traced


def _fold(n: torch.fx.Node, traced: Traced) -> None:
    """Evaluates n now when it does not depend on x (its value joins traced.constants)."""
    name = op_name(n)
    inputs = n.all_input_nodes
    if name in SHAPE_ONLY:
        inputs = inputs[1:]
    if any(i not in traced.constants for i in inputs):
        return
    if name in ("empty", "empty_permuted", "empty_like", "empty_strided"):
        meta = n.meta["val"]
        value = torch.zeros(meta.shape, dtype=meta.dtype)
    else:
        def concrete(a):
            if isinstance(a, torch.fx.Node):
                if a in traced.constants:
                    return traced.constants[a]
                meta = a.meta["val"]  # a shape-only argument
                return torch.zeros(meta.shape, dtype=meta.dtype)
            return a
        args = torch.fx.node.map_aggregate(n.args, concrete)
        kwargs = torch.fx.node.map_aggregate(n.kwargs, concrete)
        with tracing_defaults():
            value = n.target(*args, **kwargs)
    if not isinstance(value, torch.Tensor):
        return
    traced.constants[n] = value
    if any(i in traced.from_data for i in inputs):
        traced.from_data.add(n)
