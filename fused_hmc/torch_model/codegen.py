"""From the traced graph to the C++ of ``log_density`` and ``log_density_and_gradient``.

Each node is an indexed expression over its static shape (ops.py says how each op computes the
element at an index). Schedule, so that no per-chain array of the data's length exists:

- *small* nodes (numel <= ``small_limit``, tied to dim) that depend on x are materialised once
  as local scalars or arrays; constants are read from ``data`` (or are literals);
- *large* nodes (the data-length ones) are never stored: each use computes the element it needs,
  inside the loop that consumes it, CSE'd per loop iteration;
- the *accumulations* over a large domain (a sum over rows, a max, the scatter-adds of the
  backward pass) are grouped: those with the same outer extent whose inputs are ready at the same
  point (same *phase*) share ONE loop over the rows, so the forward sum and the backward
  accumulations that need the same per-row values compute them once (``eta_i = X_i . beta`` feeds
  ``lp`` and ``grad += X_i * (y_i - sigmoid(eta_i))``). A node's phase is the number of such
  loops on its longest path from x: a reduction needing another's result (logsumexp's max, then
  its sum) runs in a later pass.

Values are placed by scope: an element's temporary goes into the innermost open loop whose
variable its index mentions, so a per-row value is computed once per row even when an inner
loop over coefficients uses it, and a value not depending on any loop is hoisted out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.fx

from . import ops
from .cexpr import CTYPE, Expr, as_kind, fixed_factors, flat, literal, loop_vars, paren
from .rows import refuse_nested, refuse_row_loop, row_degrees
from .trace import Traced, TorchModelError, op_name
from .varying import Varying, canonical

UNROLL = 32  # loops of at most this many iterations are unrolled (literal indices fold)
# Elementwise ops cheap enough to redo per read on data constants (Codegen.recomputed).
CHEAP_DERIVED = frozenset({"add", "sub", "rsub", "mul", "neg", "_to_copy",
                           "convert_element_type", "expand"})


class Scope:
    """A block of generated lines: the function body, or a loop's body (var: its variable)."""

    def __init__(self, parent: "Scope | None", var: str | None = None):
        self.parent, self.var = parent, var
        self.lines: list[str] = []
        self.cache: dict = {}

    def chain(self):
        s = self
        while s is not None:
            yield s
            s = s.parent


@dataclass
class Accumulation:
    """A node computed by accumulating contributions over a domain (ops.py builds them).

    out_shape: the node's shape; init(o) -> Expr: the value before any contribution; domain: the
    shape iterated; outer: the domain dims the shared loop runs over when the domain is large;
    contributions(d, scope) -> [(out index, Expr)] at domain index d; combine: '+', '*', 'max',
    'min'.
    """

    out_shape: tuple
    init: Callable
    domain: tuple
    outer: tuple
    contributions: Callable
    combine: str = "+"


@dataclass
class Generated:
    source: str
    fields: dict = field(default_factory=dict)  # data field name -> tensor (float64 / int64)
    row_loops: int = 0  # with lanes > 1: the loops over data rows the lanes split


def numel(shape) -> int:
    return math.prod(shape)


class Codegen:
    def __init__(self, traced: Traced, user_data_names, small_limit: int, lanes: int = 1):
        self.t = traced
        self.small_limit = small_limit
        self.field_of: dict[torch.fx.Node, str] = {}
        self.fields: dict[str, torch.Tensor] = {}
        self._taken = set(user_data_names)
        self._count = 0
        self.varying = Varying(self)
        self._recomputed: dict = {}
        self.lanes = lanes
        self.row_accs: dict = {}  # with lanes: the row loops' accumulators -> Accumulation
        self.after_rows: set = set()  # the nodes depending on them (rows.py)
        self.empty_rows = False  # while generating F(acc_empty) (lane_shares)
        self._check_ops()

    # -- analysis --------------------------------------------------------------------------------

    def _check_ops(self) -> None:
        for n in self.t.gm.graph.nodes:
            if n.op != "call_function" or n in self.t.constants:
                continue
            name = op_name(n)
            if name not in ops.RULES and name not in ops.ACCUMULATIONS:
                target = getattr(n.target, "__name__", str(n.target))
                raise TorchModelError(
                    f"unsupported operation aten.{target}{self.t.where(n)}: the TorchModel "
                    "compiler has no C++ form for it (docs/TORCH_MODEL_COMPILER.md lists the "
                    "operations covered)")

    def shape(self, n) -> tuple:
        return tuple(n.meta["val"].shape) if isinstance(n, torch.fx.Node) else ()

    def kind(self, n) -> str:
        dtype = n.meta["val"].dtype
        if dtype == torch.bool:  # a per-chain one is a lane mask where T is a pack (cexpr.py)
            return "m" if self.depends(n) else "b"
        if not dtype.is_floating_point:
            return "j" if self.depends(n) else "i"
        return "T" if self.depends(n) else "S"

    def depends(self, n) -> bool:
        return isinstance(n, torch.fx.Node) and n not in self.t.constants

    def is_large(self, n) -> bool:
        return numel(self.shape(n)) > self.small_limit

    def accumulation(self, n) -> Accumulation | None:
        make = ops.ACCUMULATIONS.get(op_name(n))
        return make(self, n) if make is not None else None

    # -- values ----------------------------------------------------------------------------------

    def new_name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def value(self, a, idx: tuple, scope: Scope) -> Expr:
        """The element of a (node or Python number) at idx, as seen from scope."""
        if not isinstance(a, torch.fx.Node):
            if isinstance(a, bool):
                return literal(a, "b")
            return literal(a, "i" if isinstance(a, int) else "S")
        idx = canonical(tuple(idx), self.varying(a))
        if self.empty_rows and a in self.row_accs:  # F(acc_empty): no row added yet
            return as_kind(self.row_accs[a].init(idx, scope), self.kind(a))
        if a in self.stored:
            name, shape = self.stored[a]
            return Expr(name if numel(shape) == 1 else f"{name}[{flat(idx, shape)}]",
                        self.kind(a))
        if a is self.t.x:
            return Expr(f"x[{flat(idx, self.shape(a))}]", "T")
        if a in self.t.constants and op_name(a) not in ops.VIEWS and not self.recomputed(a):
            return self._constant(a, idx)
        used = loop_vars(idx)
        place = next((s for s in scope.chain() if s.var in used), None)
        if place is None:
            place = self.root
        key = (a, tuple(str(i) for i in idx), self.empty_rows and a in self.after_rows)
        for s in place.chain():
            if key in s.cache:
                return s.cache[key]
        rule = ops.RULES.get(op_name(a))
        if rule is None:  # an accumulation read where it was not scheduled (a large scatter)
            raise TorchModelError(f"{op_name(a)} producing a data-length tensor per chain is not "
                                  f"supported{self.t.where(a)}")
        e = rule(self, a, idx, place)
        if not e.atomic:
            e = self.temporary(e, self.kind(a), place)
        place.cache[key] = e
        return e

    def temporary(self, e: Expr, kind: str, place: Scope) -> Expr:
        """A local holding e in place, or the one an identical expression already has there
        (two graph nodes often compute the same thing: the forward's and the backward's
        (y - mu) / sigma^2)."""
        e = as_kind(e, kind)
        key = ("code", kind, e.code)
        for s in place.chain():
            if key in s.cache:
                return s.cache[key]
        name = self.new_name("t")
        place.lines.append(f"const {CTYPE[kind]} {name} = {e.code};")
        place.cache[key] = Expr(name, kind, factors=e.factors if fixed_factors(e) else None)
        return place.cache[key]

    def _constant(self, n, idx) -> Expr:
        t = self.t.constants[n]
        dtype = t.dtype
        kind = "b" if dtype == torch.bool else ("S" if dtype.is_floating_point else "i")
        if n not in self.t.from_data and all(isinstance(i, int) for i in idx):
            return literal(t[idx].item() if t.dim() else t.item(), kind)
        name = self._field(n)
        shape = tuple(t.shape)
        read = f"data.{name}[{flat(idx, shape)}]"
        return Expr(f"({read} != 0)" if kind == "b" else read, kind)

    def recomputed(self, n) -> bool:
        """Whether the constant n (derived from the user's data, like ``1 - y``) is formed
        where it is read, by a cheap elementwise op on the user's tensors and numbers, rather
        than stored as a field of the data's length: fewer bytes read per row."""
        if n not in self._recomputed:
            self._recomputed[n] = (
                n in self.t.from_data and n not in self.t.user_tensors
                and op_name(n) in CHEAP_DERIVED
                and all(i in self.t.user_tensors or self.recomputed(i)
                        or (i not in self.t.from_data and not self.varying(i))
                        for i in n.all_input_nodes))
        return self._recomputed[n]

    def _field(self, n) -> str:
        if n in self.field_of:
            return self.field_of[n]
        t = self.t.constants[n]
        if n in self.t.user_tensors:
            name = self.t.user_tensors[n]
        else:
            base = f"c{len(self.fields)}"
            name = base
            while name in self._taken:
                name += "_"
        self._taken.add(name)
        self.field_of[n] = name
        if t.dtype == torch.bool:
            t = t.to(torch.int64)
        self.fields[name] = t.detach().contiguous()
        return name

    # -- loops -----------------------------------------------------------------------------------

    def for_each(self, shape, scope: Scope, body: Callable, unroll: bool = True,
                 rows: bool = False) -> None:
        """Calls body(idx, scope) for every index of shape: unrolled (literal indices) when
        small, else in nested loops (each a child scope, closed into its parent)."""
        if unroll and numel(shape) <= UNROLL:
            for idx in _indices(shape):
                body(idx, scope)
            return
        self._loop_nest(list(shape), (), scope, body, rows)

    def _loop_nest(self, rest, idx, scope, body, rows=False):
        """rows: the outermost loop runs over this lane's rows (rows.first, += rows.step)."""
        if not rest:
            body(idx, scope)
            return
        n = rest[0]
        if n == 1:
            self._loop_nest(rest[1:], idx + (0,), scope, body, rows)
            return
        var = self.new_name("k")
        child = Scope(scope, var)
        self._loop_nest(rest[1:], idx + (var,), child, body)
        if rows:
            scope.lines.append(f"for (int64_t {var} = rows.first; {var} < {n}; "
                               f"{var} += rows.step) {{")
        else:
            scope.lines.append(f"for (int64_t {var} = 0; {var} < {n}; ++{var}) {{")
        scope.lines += ["  " + line for line in child.lines]
        scope.lines.append("}")

    # -- scheduling ------------------------------------------------------------------------------

    def function_body(self, outputs: list) -> list[str]:
        """Lines computing `outputs` (nodes) into locals (self.root); returns them. Read the
        outputs with self.value(node, idx, self.root) after."""
        self.root = Scope(None)
        self.stored: dict = {}
        self.row_accs, self.after_rows, self.empty_rows = {}, set(), False
        self.steps: list = []
        needed = _ancestors(outputs)
        nodes = [n for n in self.t.gm.graph.nodes if n in needed and n.op == "call_function"
                 and self.depends(n)]
        self.nodes = nodes
        phase: dict = {}
        grouped: dict = {}
        for n in nodes:
            p = max((phase.get(i, 0) for i in n.all_input_nodes), default=0)
            acc = None if self.is_large(n) else self.accumulation(n)
            if acc is not None and numel(acc.domain) > self.small_limit:
                p += 1
                key = tuple(acc.domain[d] for d in acc.outer)
                grouped.setdefault(p, {}).setdefault(key, []).append((n, acc))
            elif not self.is_large(n) and op_name(n) not in ops.VIEWS and (
                    n not in outputs or acc is not None):
                grouped.setdefault(p, {}).setdefault("small", []).append((n, acc))
            phase[n] = p
        for p in sorted(grouped):
            for key, members in grouped[p].items():
                if key != "small":
                    split = self.lanes > 1 and numel(key) > self.small_limit  # a row loop
                    if split:
                        self._check_row_loop(members)
                    self._fused_loop(key, members, split)
                    self.steps.append(("loop", key, members))
                    if split:
                        self.row_accs.update(dict(members))
            for n, acc in grouped[p].get("small", []):
                self._small_step(n, acc)
                self.steps.append(("small", n, acc))
        return self.root.lines

    def _small_step(self, n, acc) -> None:
        if acc is not None:
            self._accumulate_small(n, acc)
        else:
            self._materialise(n)

    # -- lanes (rows.py) ---------------------------------------------------------------------------

    def _check_row_loop(self, members) -> None:
        for n, acc in members:
            if acc.combine != "+":
                refuse_row_loop(self, n, acc.combine, self.lanes)
            if _ancestors(n.all_input_nodes) & set(self.row_accs):
                refuse_nested(self, n, self.lanes)

    def lane_shares(self, reads) -> list[Expr]:
        """The lane's share of each output read (node, idx) after function_body with lanes:
        F(acc_lane) - [rows.first != 0] F(acc_empty), F(acc_empty) being the code after the row
        loops run again with each row accumulator at its initial value (the nodes not depending
        on them are reused, so only the row-dependent part is computed twice, mostly folded)."""
        self.after_rows = row_degrees(self, self.nodes, self.row_accs, {n for n, _ in reads},
                                      self.lanes)
        full = [as_kind(self.value(n, idx, self.root), "T") for n, idx in reads]
        self.empty_rows = True
        self.stored = {n: v for n, v in self.stored.items() if n not in self.after_rows}
        for step in self.steps:
            if step[0] == "loop":
                members = [(n, acc) for n, acc in step[2]
                           if n in self.after_rows and n not in self.row_accs]
                if members:
                    self._fused_loop(step[1], members, False)
            elif step[1] in self.after_rows:
                self._small_step(step[1], step[2])
        empty = [as_kind(self.value(n, idx, self.root), "T") for n, idx in reads]
        self.empty_rows = False
        return [f if e.lit == 0 else _share(f, e) for f, e in zip(full, empty)]

    def _declare(self, n) -> str:
        name = self.new_name("v")
        shape = self.shape(n)
        kind = self.kind(n)
        suffix = "" if numel(shape) == 1 else f"[{numel(shape)}]"
        self.root.lines.append(f"{CTYPE[kind]} {name}{suffix};")
        return name

    def _store(self, name, shape, idx, e: Expr, kind) -> str:
        e = as_kind(e, kind)
        return f"{name if numel(shape) == 1 else f'{name}[{flat(idx, shape)}]'} = {e.code};"

    def _materialise(self, n) -> None:
        shape, kind = self.shape(n), self.kind(n)
        if numel(shape) == 1:
            e = self.value(n, (0,) * len(shape), self.root)
            self.stored[n] = (e.code, shape) if e.atomic and e.lit is None else \
                (self._scalar_local(e, kind), shape)
            return
        name = self._declare(n)

        def body(idx, scope):
            scope.lines.append(self._store(name, shape, idx, self.value(n, idx, scope), kind))
        self.for_each(shape, self.root, body)
        self.stored[n] = (name, shape)

    def _scalar_local(self, e: Expr, kind) -> str:
        name = self.new_name("t")
        self.root.lines.append(f"const {CTYPE[kind]} {name} = {as_kind(e, kind).code};")
        return name

    def _init_accumulator(self, n, acc: Accumulation) -> str:
        name = self._declare(n)
        shape, kind = self.shape(n), self.kind(n)

        def body(idx, scope):
            scope.lines.append(self._store(name, shape, idx, acc.init(idx, scope), kind))
        self.for_each(shape, self.root, body)
        return name

    def _add_contributions(self, name, n, acc, d, scope) -> None:
        shape, kind = self.shape(n), self.kind(n)
        for o, e in acc.contributions(d, scope):
            target = name if numel(shape) == 1 else f"{name}[{flat(o, shape)}]"
            scope.lines.append(ops.combine_into(target, as_kind(e, kind), acc.combine, kind))

    def _accumulate_small(self, n, acc: Accumulation) -> None:
        name = self._init_accumulator(n, acc)
        self.for_each(acc.domain, self.root,
                      lambda d, scope: self._add_contributions(name, n, acc, d, scope))
        self.stored[n] = (name, self.shape(n))

    def _fused_loop(self, extents, members, rows: bool = False) -> None:
        """One loop nest over the shared outer extents (rows: the outermost over this lane's
        rows); each member adds its contributions over the rest of its domain inside it."""
        names = [self._init_accumulator(n, acc) for n, acc in members]

        def body(outer_idx, scope):
            for name, (n, acc) in zip(names, members):
                inner = [d for d in range(len(acc.domain)) if d not in acc.outer]
                inner_shape = tuple(acc.domain[d] for d in inner)

                def inner_body(inner_idx, s, acc=acc, inner=inner, name=name, n=n):
                    d = [None] * len(acc.domain)
                    for k, v in zip(acc.outer, outer_idx):
                        d[k] = v
                    for k, v in zip(inner, inner_idx):
                        d[k] = v
                    self._add_contributions(name, n, acc, tuple(d), s)
                self.for_each(inner_shape, scope, inner_body)
        self.for_each(extents, self.root, body, unroll=False, rows=rows)
        for name, (n, _) in zip(names, members):
            self.stored[n] = (name, self.shape(n))


def _share(full: Expr, empty: Expr) -> Expr:
    """A lane's share of an output: all of it on the first lane; on the others its part from
    the rows (none at all for an output not depending on them, so that a -inf prior stays -inf
    in the sum instead of -inf - -inf)."""
    rest = "T(0)" if empty.code == full.code else f"T({full.code} - {paren(empty)})"
    return Expr(f"(rows.first == 0 ? T({full.code}) : {rest})", "T")


def _aliases(lines: list[str]) -> list[str]:
    """lines, after the declaration of the per-chain int type (cexpr.CTYPE) where they use it."""
    if not any("IntT" in line for line in lines):
        return lines
    return ["using IntT = typename fused_hmc::lane_traits<T>::template with_lane<int64_t>;"] + lines


def _indices(shape):
    if not shape:
        yield ()
        return
    for i in range(shape[0]):
        for rest in _indices(shape[1:]):
            yield (i,) + rest


def _ancestors(outputs) -> set:
    seen, stack = set(), list(outputs)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def generate(traced: Traced, user_data_names, small_limit: int, lanes: int = 1) -> Generated:
    """The C++ source of log_density and log_density_and_gradient for the traced graph; with
    lanes > 1 their rows forms, log_density_rows and log_density_and_gradient_rows (a lane's
    share: docs/TARGETS.md, "Data rows over lanes"; rows.py says when it is exact)."""
    cg = Codegen(traced, user_data_names, small_limit, lanes)
    value_node, grad_node = traced.value, traced.grad
    dim = cg.shape(traced.x)[0]
    suffix, rows_arg = ("_rows", ", fused_hmc::Rows rows") if lanes > 1 else ("", "")

    def outputs(reads):
        if lanes > 1:
            return cg.lane_shares(reads)
        return [as_kind(cg.value(n, idx, cg.root), "T") for n, idx in reads]

    cg.function_body([value_node])
    (value,) = outputs([(value_node, ())])
    density = (["template <typename T, typename Data>",
                f"FUSED_HMC_HD T log_density{suffix}(const T* x, const Data& data{rows_arg}) {{"]
               + ["  " + line for line in _aliases(cg.root.lines) + [f"return {value.code};"]]
               + ["}"])

    cg.function_body([value_node, grad_node])
    value, *grads = outputs([(value_node, ())] + [(grad_node, (j,)) for j in range(dim)])
    cg.root.lines += [f"grad[{j}] = {g.code};" for j, g in enumerate(grads)]
    both = (["template <typename T, typename Data>",
             f"FUSED_HMC_HD T log_density_and_gradient{suffix}(const T* x, T* grad, "
             f"const Data& data{rows_arg}) {{"]
            + ["  " + line for line in _aliases(cg.root.lines) + [f"return {value.code};"]]
            + ["}"])
    header = ["// Generated by fused_hmc.TorchModel from a torch log density "
              "(fused_hmc/torch_model)."]
    return Generated("\n".join(header + density + [""] + both) + "\n", dict(cg.fields),
                     len(cg.row_accs))
