"""How each ATen op (after core decompositions) computes the element of its result at an index.

RULES[name](cg, n, idx, scope) -> Expr: the element of node n at idx (ints or C++ index strings),
its inputs read through ``cg.value`` (which places and CSEs them). VIEWS are pure index maps (never
stored, constants seen through them). ACCUMULATIONS[name](cg, n) -> Accumulation: ops computed by
adding contributions over a domain (sums, max/min, the scatter-adds of backward passes); those
with a data-length domain become the fused loops of codegen.py, a sum with a data-length result
is an inner loop at each use (RULES['sum']).
"""
from __future__ import annotations

import math

import torch
import torch.fx

from .cexpr import CTYPE, PER_CHAIN, Expr, add_to, as_kind, iadd, imul, literal, paren
from .trace import TorchModelError


def _dim(d: int, ndim: int) -> int:
    return d + ndim if d < 0 else d


def bcast(cg, a, out_shape, idx) -> tuple:
    """idx into out_shape mapped to a's (broadcast) shape."""
    shape = cg.shape(a)
    off = len(out_shape) - len(shape)
    return tuple(0 if shape[k] == 1 else idx[off + k] for k in range(len(shape)))


def arg(cg, n, a, idx, scope) -> Expr:
    """The element of operand a (node or number) broadcast to n's shape."""
    if isinstance(a, torch.fx.Node):
        return cg.value(a, bcast(cg, a, cg.shape(n), idx), scope)
    return cg.value(a, (), scope)


def _result_kind(cg, n) -> str:
    return cg.kind(n)


def _num(cg, n, e: Expr) -> Expr:
    """An operand of a floating result as a number (bools and ints converted)."""
    kind = _result_kind(cg, n)
    if kind == "m":  # per-chain bools combine as numbers: a pack's masks have no arithmetic
        kind = "T"
    if kind in ("T", "S") and e.kind in ("i", "b", "m", "j"):
        return as_kind(e, "S") if e.lit is not None else as_kind(e, kind)
    return e


def _lit_kind(cg, n) -> str:
    """The kind a rule computes in: T for a per-chain bool (as_kind makes it a mask)."""
    k = _result_kind(cg, n)
    return {"T": "S", "m": "T"}.get(k, k)


# -- pointwise ----------------------------------------------------------------------------------

def _add(a: Expr, b: Expr, kind: str, sign: str = "+") -> Expr:
    if a.lit is not None and b.lit is not None:
        return literal(a.lit + b.lit if sign == "+" else a.lit - b.lit, kind)
    if b.lit == 0:
        return a
    if a.lit == 0:
        return b if sign == "+" else Expr(f"-{paren(b)}", b.kind)
    return Expr(f"{a.code} {sign} {paren(b)}", kind)


def _mul(a: Expr, b: Expr, kind: str) -> Expr:
    if a.lit is not None and b.lit is not None:
        return literal(a.lit * b.lit, kind)
    if a.lit == 1:
        return b
    if b.lit == 1:
        return a
    if a.lit == -1:
        return Expr(f"-{paren(b)}", b.kind)
    if b.lit == -1:
        return Expr(f"-{paren(a)}", a.kind)
    return Expr(f"{paren(a)} * {paren(b)}", kind, factors=(a, b))


def _div(a: Expr, b: Expr, kind: str) -> Expr:
    if a.lit is not None and b.lit is not None and b.lit != 0:
        return literal(a.lit / b.lit, kind)
    if b.lit == 1:
        return a
    return Expr(f"{paren(a)} / {paren(b)}", kind)


def binary(combine):
    def rule(cg, n, idx, scope):
        a = _num(cg, n, arg(cg, n, n.args[0], idx, scope))
        b = _num(cg, n, arg(cg, n, n.args[1], idx, scope))
        return combine(cg, n, a, b)
    return rule


def _add_rule(cg, n, a, b):
    alpha = n.kwargs.get("alpha", 1)
    if alpha != 1:
        b = _mul(b, cg.value(alpha, (), None), _lit_kind(cg, n))
    return _add(a, b, _lit_kind(cg, n))


def _sub_rule(cg, n, a, b):
    alpha = n.kwargs.get("alpha", 1)
    if alpha != 1:
        b = _mul(b, cg.value(alpha, (), None), _lit_kind(cg, n))
    return _add(a, b, _lit_kind(cg, n), "-")


def _rsub_rule(cg, n, a, b):
    return _sub_rule(cg, n, b, a)


def _div_rule(cg, n, a, b):
    mode = n.kwargs.get("rounding_mode")
    if mode is not None:
        raise TorchModelError(f"div with rounding_mode={mode!r} is not supported"
                              f"{cg.t.where(n)}")
    if a.kind == "i":
        a = as_kind(a, "S")
    divisor = n.args[1]
    if (b.lit is None and isinstance(divisor, torch.fx.Node) and not cg.varying(divisor)
            and cg.varying(n)):
        # A divisor the same at every index (sigma^2 under the rows): one division, hoisted
        # where the divisor is (no loop: the root), and a product per element.
        kind = "T" if b.kind == "T" else "S"
        inverse = cg.temporary(Expr(f"Scalar(1) / {paren(b)}", kind), kind, cg.root)
        return _mul(a, inverse, _lit_kind(cg, n))
    return _div(a, b, _lit_kind(cg, n))


def unary(fmt, fold=None):
    def rule(cg, n, idx, scope):
        a = _num(cg, n, arg(cg, n, n.args[0], idx, scope))
        if a.kind in ("i",) and _result_kind(cg, n) in ("T", "S"):
            a = as_kind(a, "S")
        if a.lit is not None and fold is not None:
            return literal(fold(a.lit), _lit_kind(cg, n))
        return Expr(fmt(a), _result_kind(cg, n))
    return rule


def _call(name):
    return lambda a: f"{name}({a.code})"


def _ternary(cond: Expr, a: Expr, b: Expr, kind: str) -> Expr:
    if cond.lit is not None:
        return a if cond.lit else b
    if kind == "m":  # a choice between conditions, made between them as T values
        return as_kind(_ternary(cond, as_kind(a, "T"), as_kind(b, "T"), "T"), "m")
    ctype = CTYPE[kind]
    wrap = (lambda e: f"{ctype}({e.code})") if kind in PER_CHAIN else (lambda e: paren(e))
    if cond.kind == "m":  # lane by lane where T is a pack of chains (math/fp/lanes.h)
        return Expr(f"where({cond.code}, {wrap(a)}, {wrap(b)})", kind)
    return Expr(f"{paren(cond)} ? {wrap(a)} : {wrap(b)}", kind)


def _cond(a: Expr, op: str, b: Expr) -> Expr:
    """a op b: a mask (kind m) when it compares per-chain values, else a bool."""
    per_chain = a.kind in PER_CHAIN or b.kind in PER_CHAIN
    return Expr(f"{paren(a)} {op} {paren(b)}", "m" if per_chain else "b")


def _where(cg, n, idx, scope):
    kind = _result_kind(cg, n)
    c = arg(cg, n, n.args[0], idx, scope)
    if c.lit is not None:
        return _num(cg, n, arg(cg, n, n.args[1] if c.lit else n.args[2], idx, scope))
    a = _num(cg, n, arg(cg, n, n.args[1], idx, scope))
    b = _num(cg, n, arg(cg, n, n.args[2], idx, scope))
    return _ternary(c, a, b, kind)


def compare(op, fold):
    def rule(cg, n, idx, scope):
        a = arg(cg, n, n.args[0], idx, scope)
        b = arg(cg, n, n.args[1], idx, scope)
        if a.lit is not None and b.lit is not None:
            return literal(fold(a.lit, b.lit), "b")
        if "m" in (a.kind, b.kind):  # masks compare as numbers (a pack's have no ==)
            a, b = (as_kind(e, "T") if e.kind in ("b", "m") else e for e in (a, b))
        return _cond(a, op, b)
    return rule


def _logical(op):
    def rule(cg, n, idx, scope):
        a = as_kind(arg(cg, n, n.args[0], idx, scope), "b")
        b = as_kind(arg(cg, n, n.args[1], idx, scope), "b")
        if a.lit is not None and b.lit is not None:
            return literal(a.lit and b.lit if op == "&&" else a.lit or b.lit, "b")
        if "m" in (a.kind, b.kind):  # a pack's mask combines only with a mask
            a, b = as_kind(a, "m"), as_kind(b, "m")
        return Expr(f"{paren(a)} {op} {paren(b)}", a.kind)
    return rule


def _not(cg, n, idx, scope):
    a = as_kind(arg(cg, n, n.args[0], idx, scope), "b")
    return literal(not a.lit, "b") if a.lit is not None else Expr(f"!{paren(a)}", a.kind)


def _pow(cg, n, idx, scope):
    kind = _result_kind(cg, n)
    base = _num(cg, n, arg(cg, n, n.args[0], idx, scope))
    expo = _num(cg, n, arg(cg, n, n.args[1], idx, scope))
    if base.kind == "i":
        base = as_kind(base, "S")
    if base.lit is not None and expo.lit is not None:
        return literal(float(base.lit) ** float(expo.lit), _lit_kind(cg, n))
    p = expo.lit
    if p is not None:
        if p == 0:
            return literal(1.0, "S")
        if p == 1:
            return base
        if p == 2:
            return Expr(f"{paren(base)} * {paren(base)}", kind)
        if p == 3:
            return Expr(f"{paren(base)} * {paren(base)} * {paren(base)}", kind)
        if p == 0.5:
            return Expr(f"sqrt({base.code})", kind)
        if p == -1:
            return Expr(f"Scalar(1) / {paren(base)}", kind)
        if p == -2:
            return Expr(f"Scalar(1) / ({paren(base)} * {paren(base)})", kind)
        if p == -0.5:
            return Expr(f"Scalar(1) / sqrt({base.code})", kind)
    if base.kind == "T" or expo.kind == "T":
        return Expr(f"pow({base.code}, {as_kind(expo, 'S').code if expo.kind != 'T' else expo.code})",
                    kind)
    return Expr(f"pow({base.code}, {expo.code})", kind)


def _pow_scalar_base(cg, n, idx, scope):
    base = cg.value(n.args[0], (), scope)
    expo = _num(cg, n, arg(cg, n, n.args[1], idx, scope))
    return Expr(f"pow({as_kind(base, 'S').code}, {expo.code})", _result_kind(cg, n))


def _clamp(cg, n, idx, scope):
    kind = _result_kind(cg, n)
    x = _num(cg, n, arg(cg, n, n.args[0], idx, scope))
    lo = n.args[1] if len(n.args) > 1 else n.kwargs.get("min")
    hi = n.args[2] if len(n.args) > 2 else n.kwargs.get("max")
    if lo is not None:
        e = _num(cg, n, arg(cg, n, lo, idx, scope))
        x = _ternary(_cond(x, "<", e), e, x, kind)
        x = _temp(x, kind, scope, cg)
    if hi is not None:
        e = _num(cg, n, arg(cg, n, hi, idx, scope))
        x = _ternary(_cond(x, ">", e), e, x, kind)
    return x


def _clamp_bound(which):
    def rule(cg, n, idx, scope):
        kind = _result_kind(cg, n)
        x = _num(cg, n, arg(cg, n, n.args[0], idx, scope))
        e = _num(cg, n, arg(cg, n, n.args[1], idx, scope))
        op = "<" if which == "min" else ">"
        return _ternary(_cond(x, op, e), e, x, kind)
    return rule


def _extremum(op):
    def rule(cg, n, idx, scope):
        kind = _result_kind(cg, n)
        a = _num(cg, n, arg(cg, n, n.args[0], idx, scope))
        b = _num(cg, n, arg(cg, n, n.args[1], idx, scope))
        return _ternary(_cond(a, op, b), a, b, kind)
    return rule


def _temp(e: Expr, kind: str, scope, cg) -> Expr:
    if e.atomic:
        return e
    name = cg.new_name("t")
    scope.lines.append(f"const {CTYPE[kind]} {name} = {as_kind(e, kind).code};")
    return Expr(name, kind)


def _xlogy(cg, n, idx, scope):
    kind = _result_kind(cg, n)
    a = _num(cg, n, arg(cg, n, n.args[0], idx, scope))
    b = _num(cg, n, arg(cg, n, n.args[1], idx, scope))
    prod = _mul(a, Expr(f"log({b.code})", kind), kind)
    if a.lit is not None:
        return literal(0.0, "S") if a.lit == 0 else prod
    return _ternary(_cond(a, "==", literal(0, "i")), literal(0.0, "S"), prod, kind)


def _sign(cg, n, idx, scope):
    kind = _result_kind(cg, n)
    a = _num(cg, n, arg(cg, n, n.args[0], idx, scope))
    if kind in PER_CHAIN:
        t = CTYPE[kind]
        return Expr(f"where({paren(a)} > 0, {t}(1), where({paren(a)} < 0, {t}(-1), {t}(0)))", kind)
    return Expr(f"{paren(a)} > 0 ? 1 : ({paren(a)} < 0 ? -1 : 0)", kind)


def _isnan(cg, n, idx, scope):
    a = arg(cg, n, n.args[0], idx, scope)
    return _cond(a, "!=", a)


def _cast(cg, n, idx, scope):
    return as_kind(_num(cg, n, arg(cg, n, n.args[0], idx, scope)), _result_kind(cg, n))


def _copy(cg, n, idx, scope):  # copy(dst, src): src broadcast to dst's shape
    return as_kind(_num(cg, n, arg(cg, n, n.args[1], idx, scope)), _result_kind(cg, n))


def _fill_like(cg, n, idx, scope):  # full_like(x, v) when x is a parameter: v everywhere
    return as_kind(cg.value(n.args[1], (), scope), _lit_kind(cg, n))


# -- views (index maps) -------------------------------------------------------------------------

def _identity(cg, n, idx, scope):
    return cg.value(n.args[0], idx, scope)


def _select(cg, n, idx, scope):
    src = n.args[0]
    shape = cg.shape(src)
    d = _dim(n.args[1], len(shape))
    i = n.args[2] + shape[d] if n.args[2] < 0 else n.args[2]
    return cg.value(src, idx[:d] + (i,) + idx[d:], scope)


def _slice_start(shape, d, start, step):
    size = shape[d]
    start = 0 if start is None else start
    if start < 0:
        start += size
    return min(max(start, 0), size)


def _slice(cg, n, idx, scope):
    src = n.args[0]
    shape = cg.shape(src)
    d = _dim(n.args[1] if len(n.args) > 1 else 0, len(shape))
    step = n.args[4] if len(n.args) > 4 else 1
    start = _slice_start(shape, d, n.args[2] if len(n.args) > 2 else 0, step)
    i = iadd(start, imul(idx[d], step))
    return cg.value(src, idx[:d] + (i,) + idx[d + 1:], scope)


def _expand(cg, n, idx, scope):
    return cg.value(n.args[0], bcast(cg, n.args[0], cg.shape(n), idx), scope)


def _unsqueeze(cg, n, idx, scope):
    d = _dim(n.args[1], len(cg.shape(n)))
    return cg.value(n.args[0], idx[:d] + idx[d + 1:], scope)


def _squeeze(cg, n, idx, scope):
    src_shape = cg.shape(n.args[0])
    out = list(idx)
    src_idx = []
    dims = n.args[1] if len(n.args) > 1 else None
    if isinstance(dims, int):
        dims = [dims]
    dims = None if dims is None else {_dim(d, len(src_shape)) for d in dims}
    for k, size in enumerate(src_shape):
        if size == 1 and (dims is None or k in dims):
            src_idx.append(0)
        else:
            src_idx.append(out.pop(0))
    return cg.value(n.args[0], tuple(src_idx), scope)


def _permute(cg, n, idx, scope):
    perm = [_dim(p, len(idx)) for p in n.args[1]]
    src = [None] * len(idx)
    for k, p in enumerate(perm):
        src[p] = idx[k]
    return cg.value(n.args[0], tuple(src), scope)


def _transpose(cg, n, idx, scope):
    ndim = len(idx)
    if ndim < 2:
        return cg.value(n.args[0], idx, scope)
    a, b = (_dim(n.args[1], ndim), _dim(n.args[2], ndim)) if len(n.args) > 2 else (0, 1)
    src = list(idx)
    src[a], src[b] = src[b], src[a]
    return cg.value(n.args[0], tuple(src), scope)


def _view(cg, n, idx, scope):
    from .cexpr import flat, unflat
    src_shape = cg.shape(n.args[0])
    out_shape = cg.shape(n)
    squeezed_out = [(i, s) for i, s in zip(idx, out_shape) if s != 1]
    if [s for _, s in squeezed_out] == [s for s in src_shape if s != 1]:
        it = iter(i for i, _ in squeezed_out)  # only size-1 dims added or removed
        return cg.value(n.args[0], tuple(0 if s == 1 else next(it) for s in src_shape), scope)
    return cg.value(n.args[0], unflat(flat(idx, out_shape), src_shape), scope)


def _flip(cg, n, idx, scope):
    shape = cg.shape(n)
    dims = {_dim(d, len(shape)) for d in n.args[1]}
    src = tuple(iadd(shape[k] - 1, imul(i, -1)) if k in dims else i for k, i in enumerate(idx))
    return cg.value(n.args[0], src, scope)


# -- gathers --------------------------------------------------------------------------------------

def _index_value(cg, ind, idx, size, scope) -> object:
    """An index tensor's element as an int (a literal) or C++ int expression, in [0, size)."""
    e = cg.value(ind, idx, scope)
    if e.lit is not None:
        return int(e.lit) % size if -size <= int(e.lit) < size else int(e.lit)
    return e.code


def _check_indices(cg, n, ind, size):
    if ind in cg.t.constants:
        t = cg.t.constants[ind]
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= size):
            raise TorchModelError(f"index out of range: entries of an index tensor lie outside "
                                  f"[0, {size}){cg.t.where(n)} (negative indices are not "
                                  "supported either)")
    else:
        raise TorchModelError(f"indexing by a tensor that depends on the parameters is not "
                              f"supported{cg.t.where(n)}; index by data")


def _index(cg, n, idx, scope):
    src = n.args[0]
    shape = cg.shape(src)
    indices = list(n.args[1])
    pos = [k for k, t in enumerate(indices) if t is not None]
    if pos != list(range(pos[0], pos[0] + len(pos))):
        raise TorchModelError(f"advanced indexing with non-adjacent index tensors is not "
                              f"supported{cg.t.where(n)}")
    first = pos[0]
    b_shape = tuple(torch.broadcast_shapes(*[cg.shape(indices[k]) for k in pos]))
    nb = len(b_shape)
    b_idx = idx[first:first + nb]
    src_idx = list(idx[:first])
    for k in pos:
        _check_indices(cg, n, indices[k], shape[k])
        ind = indices[k]
        ishape = cg.shape(ind)
        off = nb - len(ishape)
        i_idx = tuple(0 if ishape[j] == 1 else b_idx[off + j] for j in range(len(ishape)))
        src_idx.append(_index_value(cg, ind, i_idx, shape[k], scope))
    src_idx += list(idx[first + nb:])
    return cg.value(src, tuple(src_idx), scope)


def _gather(cg, n, idx, scope):
    src, d, ind = n.args[0], _dim(n.args[1], len(cg.shape(n.args[0]))), n.args[2]
    _check_indices(cg, n, ind, cg.shape(src)[d])
    src_idx = list(idx)
    src_idx[d] = _index_value(cg, ind, idx, cg.shape(src)[d], scope)
    return cg.value(src, tuple(src_idx), scope)


def _embedding(cg, n, idx, scope):
    weight, ind = n.args[0], n.args[1]
    nb = len(cg.shape(ind))
    _check_indices(cg, n, ind, cg.shape(weight)[0])
    row = _index_value(cg, ind, idx[:nb], cg.shape(weight)[0], scope)
    return cg.value(weight, (row,) + tuple(idx[nb:]), scope)


# -- piecewise -----------------------------------------------------------------------------------

def _clamped(i, lo, hi):
    """A symbolic index kept inside [lo, hi] so an unselected piece never reads out of bounds."""
    return f"({i} < {lo} ? {lo} : ({i} > {hi} ? {hi} : {i}))"


def _cat(cg, n, idx, scope):
    tensors = [t for t in n.args[0] if math.prod(cg.shape(t)) > 0]
    ndim = len(cg.shape(n))
    d = _dim(n.args[1] if len(n.args) > 1 else 0, ndim)
    kind = _result_kind(cg, n)
    offsets, off = [], 0
    for t in tensors:
        offsets.append(off)
        off += cg.shape(t)[d]
    i = idx[d]
    if isinstance(i, int):
        for t, o in zip(tensors, offsets):
            if o <= i < o + cg.shape(t)[d]:
                return as_kind(cg.value(t, idx[:d] + (i - o,) + idx[d + 1:], scope), kind)
    out = None
    for t, o in reversed(list(zip(tensors, offsets))):
        size = cg.shape(t)[d]
        local = _clamped(iadd(i, -o), 0, size - 1)
        e = as_kind(cg.value(t, idx[:d] + (local,) + idx[d + 1:], scope), kind)
        out = e if out is None else _ternary(Expr(f"{i} < {o + size}", "b"), e, out, kind)
    return out


def _pad(cg, n, idx, scope):
    """constant_pad_nd(x, pad, value): pad = (left, right) pairs from the last dim back."""
    src = n.args[0]
    shape = cg.shape(src)
    pad = list(n.args[1])
    fill = n.args[2] if len(n.args) > 2 else 0.0
    kind = _result_kind(cg, n)
    src_idx, inside, literal_out = list(idx), [], False
    for k in range(len(pad) // 2):
        d = len(shape) - 1 - k
        left = pad[2 * k]
        i = iadd(idx[d], -left)
        if isinstance(i, int):
            if not 0 <= i < shape[d]:
                literal_out = True
            src_idx[d] = i
        else:
            inside.append(f"{i} >= 0 && {i} < {shape[d]}")
            src_idx[d] = _clamped(i, 0, shape[d] - 1)
    if literal_out:
        return literal(fill, "S")
    e = as_kind(cg.value(src, tuple(src_idx), scope), kind)
    if not inside:
        return e
    return _ternary(Expr(" && ".join(inside), "b"), e, literal(fill, "S"), kind)


def _select_scatter(cg, n, idx, scope):
    base, src = n.args[0], n.args[1]
    shape = cg.shape(n)
    d = _dim(n.args[2], len(shape))
    at = n.args[3] + shape[d] if n.args[3] < 0 else n.args[3]
    kind = _result_kind(cg, n)
    i = idx[d]
    if isinstance(i, int):
        if i == at:
            return as_kind(cg.value(src, idx[:d] + idx[d + 1:], scope), kind)
        return as_kind(cg.value(base, idx, scope), kind)
    a = as_kind(cg.value(src, idx[:d] + idx[d + 1:], scope), kind)
    b = as_kind(cg.value(base, idx, scope), kind)
    return _ternary(Expr(f"{i} == {at}", "b"), a, b, kind)


def _slice_scatter(cg, n, idx, scope):
    base, src = n.args[0], n.args[1]
    shape = cg.shape(n)
    d = _dim(n.args[2] if len(n.args) > 2 else 0, len(shape))
    step = n.args[5] if len(n.args) > 5 else 1
    start = _slice_start(shape, d, n.args[3] if len(n.args) > 3 else 0, step)
    count = cg.shape(src)[d]
    kind = _result_kind(cg, n)
    i = idx[d]
    if isinstance(i, int):
        j, r = divmod(i - start, step)
        if r == 0 and 0 <= j < count:
            return as_kind(cg.value(src, idx[:d] + (j,) + idx[d + 1:], scope), kind)
        return as_kind(cg.value(base, idx, scope), kind)
    j = _clamped(f"(({i}) - {start}) / {step}" if step != 1 else iadd(i, -start), 0, count - 1)
    inside = f"{i} >= {start} && {i} < {start + step * count}"
    if step != 1:
        inside += f" && (({i}) - {start}) % {step} == 0"
    a = as_kind(cg.value(src, idx[:d] + (j,) + idx[d + 1:], scope), kind)
    b = as_kind(cg.value(base, idx, scope), kind)
    return _ternary(Expr(inside, "b"), a, b, kind)


# -- reductions ------------------------------------------------------------------------------------

def _reduce_dims(n, ndim):
    dims = n.args[1] if len(n.args) > 1 else None
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({_dim(d, ndim) for d in dims})


def _keepdim(n):
    return bool(n.args[2]) if len(n.args) > 2 else bool(n.kwargs.get("keepdim", False))


def _reduction_parts(cg, n):
    src = n.args[0]
    shape = cg.shape(src)
    dims = _reduce_dims(n, len(shape))
    keep = _keepdim(n)

    def src_index(out_idx, red_idx):
        out, red = list(out_idx), list(red_idx)
        full = []
        for k in range(len(shape)):
            if k in dims:
                full.append(red.pop(0))
                if keep:
                    out.pop(0)
            else:
                full.append(out.pop(0))
        return tuple(full)

    def out_index(src_idx):
        return tuple((0 if k in dims else i) for k, i in enumerate(src_idx)
                     if keep or k not in dims)
    return src, shape, dims, src_index, out_index


def _init_value(combine):
    return {"+": 0.0, "*": 1.0, "max": -math.inf, "min": math.inf}[combine]


def reduce_inline(cg, scope, extents, term, combine, kind):
    """The reduction of term(r, scope) over r in extents, computed where it is needed."""
    acc = cg.new_name("a")
    start = as_kind(literal(_init_value(combine), "S"), kind)
    scope.lines.append(f"{CTYPE[kind]} {acc} = {start.code};")

    def body(r, s):
        s.lines.append(combine_into(acc, as_kind(term(r, s), kind), combine, kind))
    cg.for_each(extents, scope, body)
    return Expr(acc, kind)


def combine_into(acc: str, e: Expr, combine: str, kind: str) -> str:
    """One step of a reduction by combine ("+", "*", "max", "min"): acc += e (an fma where e is a
    product, cexpr.add_to), acc *= e, or acc = e where e beats acc, lane by lane per chain."""
    if combine == "+":
        return add_to(acc, e, kind)
    if combine == "*":
        return f"{acc} *= {e.code};"
    op = ">" if combine == "max" else "<"
    if kind in PER_CHAIN:
        return f"{acc} = where({paren(e)} {op} {acc}, {CTYPE[kind]}({e.code}), {acc});"
    return f"{acc} = ({e.code} {op} {acc}) ? {CTYPE[kind]}({e.code}) : {acc};"


def _reduce_rule(combine):
    def rule(cg, n, idx, scope):
        src, shape, dims, src_index, _ = _reduction_parts(cg, n)
        extents = tuple(shape[d] for d in dims)
        kind = _result_kind(cg, n)
        return reduce_inline(cg, scope, extents,
                             lambda r, s: cg.value(src, src_index(idx, r), s), combine, kind)
    return rule


def _outer(domain, dims):
    from .codegen import UNROLL
    big = tuple(d for d in dims if domain[d] > UNROLL)
    return big or tuple(dims)


def _reduce_acc(combine):
    def make(cg, n):
        from .codegen import Accumulation
        src, shape, dims, _, out_index = _reduction_parts(cg, n)
        return Accumulation(
            out_shape=cg.shape(n), init=lambda o, s: literal(_init_value(combine), "S"),
            domain=shape, outer=_outer(shape, dims),
            contributions=lambda d, s: [(out_index(d), cg.value(src, d, s))], combine=combine)
    return make


def _mean_rule(cg, n, idx, scope):
    _, shape, dims, _, _ = _reduction_parts(cg, n)
    total = _reduce_rule("+")(cg, n, idx, scope)
    return _div(total, literal(float(math.prod(shape[d] for d in dims)), "S"), "T")


def _matmul_rule(cg, n, idx, scope):
    """mm [i, j] / mv [i] / dot [] / bmm [b, i, j] with a data-length result: the element at idx
    as an inner sum over the shared dimension."""
    domain, (k,), _, a_index, b_index = _matmul_parts(cg, n)
    kind = _result_kind(cg, n)

    def term(r, s):
        d = tuple(idx[:k]) + (r[0],) + tuple(idx[k:])
        return _mul(_num(cg, n, cg.value(n.args[0], a_index(d), s)),
                    _num(cg, n, cg.value(n.args[1], b_index(d), s)), kind)
    return reduce_inline(cg, scope, (domain[k],), term, "+", kind)


def _matmul_parts(cg, n):
    """(domain, reduced dims, out index(d), a index(d), b index(d)) of mm / mv / dot / bmm: the
    product's terms a[..] * b[..] over domain, summed over the shared dimension."""
    a, b = n.args[0], n.args[1]
    sa, sb = cg.shape(a), cg.shape(b)
    if len(sa) == 1 and len(sb) == 1:  # dot: d = (r,)
        return (sa[0],), (0,), (lambda d: ()), (lambda d: d), (lambda d: d)
    if len(sa) == 2 and len(sb) == 1:  # mv: d = (i, r)
        return sa, (1,), (lambda d: d[:1]), (lambda d: d), (lambda d: d[1:])
    if len(sa) == 2 and len(sb) == 2:  # mm: d = (i, r, j)
        return ((sa[0], sa[1], sb[1]), (1,), (lambda d: (d[0], d[2])), (lambda d: d[:2]),
                (lambda d: d[1:]))
    if len(sa) == 3 and len(sb) == 3:  # bmm: d = (batch, i, r, j)
        return ((sa[0], sa[1], sa[2], sb[2]), (2,), (lambda d: (d[0], d[1], d[3])),
                (lambda d: d[:3]), (lambda d: (d[0], d[2], d[3])))
    raise TorchModelError(f"matrix product of shapes {sa} and {sb} is not supported"
                          f"{cg.t.where(n)}")


def _matmul_acc(cg, n):
    """A per-chain matrix product as an accumulation, so that a product over the data's rows
    (the backward pass's X^T r) joins the shared row loop instead of a loop per coefficient."""
    from .codegen import Accumulation
    domain, dims, out_index, a_index, b_index = _matmul_parts(cg, n)
    kind = _result_kind(cg, n)

    def contributions(d, s):
        a = _num(cg, n, cg.value(n.args[0], a_index(d), s))
        return [(out_index(d), _mul(a, _num(cg, n, cg.value(n.args[1], b_index(d), s)), kind))]
    return Accumulation(cg.shape(n), lambda o, s: literal(0.0, "S"), tuple(domain),
                        _outer(domain, dims), contributions)


def _mean_acc(cg, n):
    """mean as the sum of its terms over their count (one pass, fused like a sum)."""
    from .codegen import Accumulation
    src, shape, dims, _, out_index = _reduction_parts(cg, n)
    inverse = literal(1.0 / math.prod(shape[d] for d in dims), "S")
    kind = _result_kind(cg, n)
    return Accumulation(
        out_shape=cg.shape(n), init=lambda o, s: literal(0.0, "S"), domain=shape,
        outer=_outer(shape, dims),
        contributions=lambda d, s: [(out_index(d), _mul(_num(cg, n, cg.value(src, d, s)),
                                                        inverse, kind))])


def _scan(combine):
    """cumsum / cumprod along a dimension of at most small_limit entries: the element at i
    combines entries 0..i (a loop up to i when i is a loop variable)."""
    op, init = ("+", 0.0) if combine == "+" else ("*", 1.0)

    def rule(cg, n, idx, scope):
        shape = cg.shape(n)
        d = _dim(n.args[1], len(shape))
        if shape[d] > cg.small_limit:
            raise TorchModelError(f"{n.target.overloadpacket.__name__} over a data-length "
                                  f"dimension ({shape[d]} entries) is not supported"
                                  f"{cg.t.where(n)}")
        kind = _result_kind(cg, n)
        i = idx[d]
        acc = cg.new_name("a")
        scope.lines.append(f"{CTYPE[kind]} {acc} = {literal(init, 'S').code};")

        def add(e, s):
            s.lines.append(f"{acc} {op}= {as_kind(_num(cg, n, e), kind).code};")
        if isinstance(i, int):
            for r in range(i + 1):
                add(cg.value(n.args[0], idx[:d] + (r,) + idx[d + 1:], scope), scope)
            return Expr(acc, kind)
        from .codegen import Scope
        var = cg.new_name("k")
        child = Scope(scope, var)
        add(cg.value(n.args[0], idx[:d] + (var,) + idx[d + 1:], child), child)
        scope.lines.append(f"for (int64_t {var} = 0; {var} <= {i}; ++{var}) {{")
        scope.lines += ["  " + line for line in child.lines]
        scope.lines.append("}")
        return Expr(acc, kind)
    return rule


# -- scatter-adds (backward of indexing) ---------------------------------------------------------

def _index_put_acc(cg, n):
    from .codegen import Accumulation
    base, indices, values = n.args[0], list(n.args[1]), n.args[2]
    accumulate = n.args[3] if len(n.args) > 3 else n.kwargs.get("accumulate", False)
    if not accumulate or any(t is None for t in indices):
        raise TorchModelError(f"index_put without accumulate (an assignment into a tensor) is "
                              f"not supported{cg.t.where(n)}")
    shape = cg.shape(n)
    for k, t in enumerate(indices):
        _check_indices(cg, n, t, shape[k])
    b_shape = tuple(torch.broadcast_shapes(*[cg.shape(t) for t in indices]))
    domain = b_shape + shape[len(indices):]
    nb = len(b_shape)

    def contributions(d, s):
        o = []
        for k, t in enumerate(indices):
            ishape = cg.shape(t)
            off = nb - len(ishape)
            o.append(_index_value(cg, t, tuple(0 if ishape[j] == 1 else d[off + j]
                                               for j in range(len(ishape))), shape[k], s))
        o += list(d[nb:])
        vshape = cg.shape(values)
        off = len(domain) - len(vshape)
        v = cg.value(values, tuple(0 if vshape[j] == 1 else d[off + j]
                                   for j in range(len(vshape))), s)
        return [(tuple(o), v)]
    return Accumulation(shape, lambda o, s: cg.value(base, o, s), domain,
                        _outer(domain, range(nb)), contributions)


def _scatter_add_acc(cg, n):
    from .codegen import Accumulation
    base, d, ind, src = n.args[0], n.args[1], n.args[2], n.args[3]
    shape = cg.shape(n)
    d = _dim(d, len(shape))
    _check_indices(cg, n, ind, shape[d])
    domain = cg.shape(ind)

    def contributions(i, s):
        o = list(i)
        o[d] = _index_value(cg, ind, i, shape[d], s)
        return [(tuple(o), cg.value(src, i, s))]
    return Accumulation(shape, lambda o, s: cg.value(base, o, s), domain,
                        _outer(domain, range(len(domain))), contributions)


def _embedding_backward_acc(cg, n):
    from .codegen import Accumulation
    grad, ind, num_weights, padding_idx = n.args[0], n.args[1], n.args[2], n.args[3]
    if padding_idx != -1:
        raise TorchModelError(f"embedding with padding_idx is not supported{cg.t.where(n)}")
    shape = cg.shape(n)
    _check_indices(cg, n, ind, num_weights)
    domain = cg.shape(grad)
    nb = len(cg.shape(ind))

    def contributions(i, s):
        row = _index_value(cg, ind, i[:nb], num_weights, s)
        return [((row,) + tuple(i[nb:]), cg.value(grad, i, s))]
    return Accumulation(shape, lambda o, s: literal(0.0, "S"), domain,
                        _outer(domain, range(nb)), contributions)


def _eq_fold(a, b):
    return a == b


RULES = {
    "add": binary(_add_rule), "sub": binary(_sub_rule), "rsub": binary(_rsub_rule),
    "mul": binary(lambda cg, n, a, b: _mul(a, b, _lit_kind(cg, n))),
    "div": binary(_div_rule),
    "neg": unary(lambda a: f"-{paren(a)}", lambda v: -v),
    "exp": unary(_call("exp"), math.exp), "expm1": unary(_call("expm1"), math.expm1),
    "log": unary(_call("log"), math.log), "log1p": unary(_call("log1p"), math.log1p),
    "log2": unary(lambda a: f"log({a.code}) * Scalar({1 / math.log(2)!r})", math.log2),
    "log10": unary(lambda a: f"log({a.code}) * Scalar({1 / math.log(10)!r})", math.log10),
    "exp2": unary(lambda a: f"exp({paren(a)} * Scalar({math.log(2)!r}))", lambda v: 2.0 ** v),
    "sqrt": unary(_call("sqrt"), math.sqrt),
    "rsqrt": unary(lambda a: f"Scalar(1) / sqrt({a.code})", lambda v: 1 / math.sqrt(v)),
    "reciprocal": unary(lambda a: f"Scalar(1) / {paren(a)}", lambda v: 1 / v),
    "abs": unary(_call("abs"), abs), "tanh": unary(_call("tanh"), math.tanh),
    "sin": unary(_call("sin"), math.sin), "cos": unary(_call("cos"), math.cos),
    "sigmoid": unary(_call("sigmoid")), "lgamma": unary(_call("lgamma"), math.lgamma),
    "digamma": unary(_call("digamma")),
    "softplus": unary(_call("softplus")),
    "pow": _pow, "sign": _sign, "sgn": _sign,
    "where": _where, "clamp": _clamp, "clamp_min": _clamp_bound("min"),
    "clamp_max": _clamp_bound("max"), "maximum": _extremum(">"), "minimum": _extremum("<"),
    "xlogy": _xlogy,
    "eq": compare("==", _eq_fold), "ne": compare("!=", lambda a, b: a != b),
    "lt": compare("<", lambda a, b: a < b), "le": compare("<=", lambda a, b: a <= b),
    "gt": compare(">", lambda a, b: a > b), "ge": compare(">=", lambda a, b: a >= b),
    "logical_and": _logical("&&"), "logical_or": _logical("||"), "logical_not": _not,
    "bitwise_not": _not,
    "isnan": _isnan,
    "_to_copy": _cast, "convert_element_type": _cast, "copy": _copy,
    "full_like": _fill_like, "zeros_like": lambda cg, n, i, s: literal(0, _lit_kind(cg, n)),
    "ones_like": lambda cg, n, i, s: literal(1, _lit_kind(cg, n)),
    "alias": _identity, "clone": _identity, "lift_fresh_copy": _identity, "detach": _identity,
    "contiguous": _identity,
    "select": _select, "slice": _slice, "expand": _expand, "unsqueeze": _unsqueeze,
    "squeeze": _squeeze, "permute": _permute, "transpose": _transpose, "t": _transpose,
    "view": _view, "reshape": _view, "_unsafe_view": _view, "flip": _flip,
    "index": _index, "gather": _gather, "embedding": _embedding,
    "cat": _cat, "constant_pad_nd": _pad, "select_scatter": _select_scatter, "slice_scatter": _slice_scatter,
    "sum": _reduce_rule("+"), "prod": _reduce_rule("*"), "amax": _reduce_rule("max"), "amin": _reduce_rule("min"),
    "mean": _mean_rule, "mm": _matmul_rule, "mv": _matmul_rule, "dot": _matmul_rule,
    "bmm": _matmul_rule, "cumsum": _scan("+"), "cumprod": _scan("*"),
}
RULES["pow"] = lambda cg, n, idx, scope: (_pow_scalar_base(cg, n, idx, scope)
                                          if not isinstance(n.args[0], torch.fx.Node)
                                          else _pow(cg, n, idx, scope))

VIEWS = frozenset({"alias", "clone", "lift_fresh_copy", "detach", "contiguous", "select",
                   "slice", "expand", "unsqueeze", "squeeze", "permute", "transpose", "t", "view",
                   "reshape", "_unsafe_view", "flip"})

ACCUMULATIONS = {
    "sum": _reduce_acc("+"), "prod": _reduce_acc("*"), "amax": _reduce_acc("max"), "amin": _reduce_acc("min"),
    "mean": _mean_acc, "mm": _matmul_acc, "mv": _matmul_acc, "dot": _matmul_acc,
    "bmm": _matmul_acc,
    "index_put": _index_put_acc, "scatter_add": _scatter_add_acc,
    "embedding_dense_backward": _embedding_backward_acc,
}
