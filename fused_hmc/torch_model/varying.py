"""Along which dimensions a node's value varies: the codegen's loop-invariant code motion.

A value broadcast along a dimension (``sigma`` expanded to the rows in ``Normal(mean, sigma)``,
then squared, logged, divided...) is the same at every index of that dimension. codegen.py reads
such a node at index 0 of those dimensions, so its temporary is placed (and CSE'd) outside the
loop over them: ``-1 / (2 sigma^2)`` once per evaluation, not once per row. Conservative: an op
not listed here varies along every dimension of size > 1.
"""
from __future__ import annotations

from .trace import SHAPE_ONLY, op_name

# Elementwise ops whose operands broadcast to the result (right-aligned), and views that keep
# the dimensions in place.
POINTWISE = frozenset({
    "add", "sub", "rsub", "mul", "div", "neg", "exp", "expm1", "log", "log1p", "log2", "log10",
    "exp2", "sqrt", "rsqrt", "reciprocal", "abs", "tanh", "sin", "cos", "sigmoid", "lgamma",
    "digamma", "softplus", "pow", "sign", "sgn", "where", "clamp", "clamp_min", "clamp_max",
    "maximum", "minimum", "xlogy", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
    "logical_or", "logical_not", "bitwise_not", "isnan", "_to_copy", "convert_element_type",
    "copy", "alias", "clone", "lift_fresh_copy", "detach", "contiguous", "expand", "slice"})


class Varying:
    """varying(n) -> frozenset of n's dimensions along which its value can change."""

    def __init__(self, cg):
        self.cg = cg
        self._memo: dict = {}

    def __call__(self, n) -> frozenset:
        if n not in self._memo:
            self._memo[n] = frozenset(self._compute(n))
        return self._memo[n]

    def _all(self, n):
        return {k for k, size in enumerate(self.cg.shape(n)) if size > 1}

    def _compute(self, n):
        cg = self.cg
        shape = cg.shape(n)
        if n in cg.t.constants:
            t = cg.t.constants[n]
            if tuple(t.shape) != shape or t.numel() == 0:
                return self._all(n)
            return {k for k in range(t.dim()) if t.shape[k] > 1
                    and not bool((t == t.narrow(k, 0, 1)).all())}
        if n.op != "call_function":
            return self._all(n)
        name = op_name(n)
        if name in SHAPE_ONLY:
            return set()
        if name in POINTWISE:
            out = set()
            for a in n.all_input_nodes:
                off = len(shape) - len(cg.shape(a))
                out |= {off + k for k in self(a) if off + k >= 0}
            return out
        args = n.args
        if name == "unsqueeze":
            d = args[1] + len(shape) if args[1] < 0 else args[1]
            return {k + (k >= d) for k in self(args[0])}
        if name == "select":
            src = len(cg.shape(args[0]))
            d = args[1] + src if args[1] < 0 else args[1]
            return {k - (k > d) for k in self(args[0]) if k != d}
        if name in ("permute",):
            perm = [p + len(shape) if p < 0 else p for p in args[1]]
            return {k for k, p in enumerate(perm) if p in self(args[0])}
        return self._all(n)


def canonical(idx: tuple, varying: frozenset) -> tuple:
    """idx with the dimensions along which the value does not vary read at 0."""
    return tuple(i if k in varying else 0 for k, i in enumerate(idx))
