"""NumPy-semantics products: `_np_dot`, `_npi_matmul`, `_npi_tensordot`, `_npi_einsum`,
`_np_kron`, `_np_trace`, `_npi_where`, `_npi_clip` (operators whose gradients are products too)."""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Count, Float, Int, Optional, Param, Str
from . import scalar as S
from .np_base import Literal, NumpyElementwise, NumpyOp, promote_mixed, register_numpy, unbroadcast

__all__ = []


def _prod_dtype(op, a, b):
    return promote_mixed(a, b)


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


class _Product(NumpyOp):
    """A product that is one row-major GEMM, possibly batched (`gemm_dims`): the LLVM code
    generator lowers it by its matrix-product kernel (the `gemm` lowering trait)."""
    inputs = ("a", "b")

    def out_types(self, attrs, in_types):
        return [_prod_dtype(self.name, *in_types)]

    def gemm_dims(self, attrs, a_shape: tuple, b_shape: tuple) -> tuple | None:
        """(batch, m, n, k, stride_a, stride_b, stride_c) such that output batch i is
        A_i (m x k) times B_i (k x n), the operands and the output read row-major at
        i * stride (a stride of 0 broadcasts an operand); None if it is not such a product."""
        return None


@register_numpy("_np_dot")
class NpDot(_Product):
    """numpy.dot (scalars, vectors, matrices, N-d with the last/second-to-last axes)."""

    def gemm_dims(self, attrs, a_shape, b_shape):
        """a (..., k) with b (k,) or (k, n); numpy sums b's second-to-last axis of a higher b."""
        if not a_shape or not b_shape or len(b_shape) > 2 or a_shape[-1] != b_shape[0]:
            return None
        n = b_shape[1] if len(b_shape) == 2 else 1
        return 1, _size(a_shape[:-1]), n, a_shape[-1], 0, 0, 0

    def forward(self, attrs, a, b):
        dt = promote_mixed(a.dtype, b.dtype)
        try:
            return np.asarray(np.dot(a.astype(dt, copy=False), b.astype(dt, copy=False)))
        except ValueError as e:
            raise MXNetError(f"{self.name}: shapes {a.shape} and {b.shape} not aligned: {e}") from None

    def vjp(self, attrs, xs, ys, dys):
        a, b = xs
        g = dys[0]
        if a.ndim == 0 or b.ndim == 0:
            return [np.sum(g * b) if a.ndim == 0 else g * b, np.sum(g * a) if b.ndim == 0 else g * a]
        if b.ndim == 1:
            return [np.multiply.outer(g, b), np.tensordot(a, g, axes=(list(range(a.ndim - 1)), list(range(g.ndim))))]
        # y[i..., j..., k] = sum_m a[i..., m] b[j..., m, k]
        na = a.ndim - 1
        b_axes = [d for d in range(b.ndim) if d != b.ndim - 2]
        ga = np.tensordot(g, b, axes=(list(range(na, g.ndim)), b_axes))
        g_axes = list(range(na))
        gb = np.tensordot(a, g, axes=(list(range(na)), g_axes))   # (m, j..., k)
        gb = np.moveaxis(gb, 0, -2) if b.ndim >= 2 else gb
        return [ga, gb]


@register_numpy("_npi_matmul")
class NpMatmul(_Product):
    """numpy.matmul (batched, broadcasting the batch axes; 1-D operands promoted and dropped)."""

    def gemm_dims(self, attrs, a_shape, b_shape):
        """Equal batch axes, a 2-D b (a's batch and rows are one matrix), or a 2-D a (broadcast)."""
        if not a_shape or not b_shape:
            return None
        a2 = tuple(a_shape) if len(a_shape) > 1 else (1,) + tuple(a_shape)
        b2 = tuple(b_shape) if len(b_shape) > 1 else tuple(b_shape) + (1,)
        (m, k), (k2, n) = a2[-2:], b2[-2:]
        if k != k2:
            return None
        if len(b2) == 2:
            return 1, _size(a2[:-1]), n, k, 0, 0, 0
        if a2[:-2] == b2[:-2]:
            return _size(a2[:-2]), m, n, k, m * k, k * n, m * n
        if len(a2) == 2:
            return _size(b2[:-2]), m, n, k, 0, k * n, m * n
        return None

    def forward(self, attrs, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise MXNetError(f"{self.name}: matmul does not accept zero-dim operands")
        dt = promote_mixed(a.dtype, b.dtype)
        try:
            return np.matmul(a.astype(dt, copy=False), b.astype(dt, copy=False))
        except ValueError as e:
            raise MXNetError(f"{self.name}: shapes {a.shape} and {b.shape}: {e}") from None

    def vjp(self, attrs, xs, ys, dys):
        a, b = xs
        g = dys[0]
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:
            g2 = np.expand_dims(g2, -2)
        if b.ndim == 1:
            g2 = np.expand_dims(g2, -1)
        ga = np.matmul(g2, np.swapaxes(b2, -1, -2))
        gb = np.matmul(np.swapaxes(a2, -1, -2), g2)
        ga = unbroadcast(ga, a2.shape).reshape(a.shape)
        gb = unbroadcast(gb, b2.shape).reshape(b.shape)
        return [ga, gb]


@register_numpy("_npi_tensordot")
class NpTensordot(_Product):
    """numpy.tensordot over `a_axes_summed` of a and `b_axes_summed` of b."""
    params = {"a_axes_summed": Param(Literal), "b_axes_summed": Param(Literal)}

    def gemm_dims(self, attrs, a_shape, b_shape):
        """Summing a's trailing axes with b's leading axes, in order."""
        sa, sb = self._axes(attrs)
        na, nb = len(a_shape), len(b_shape)
        if len(sa) != len(sb) or not all(isinstance(x, int) and -na <= x < max(na, 1) for x in sa) \
                or not all(isinstance(x, int) and -nb <= x < max(nb, 1) for x in sb):
            return None
        sa, sb = [x % max(na, 1) for x in sa], [x % max(nb, 1) for x in sb]
        j = len(sa)
        if sa != list(range(na - j, na)) or sb != list(range(j)) or a_shape[na - j:] != b_shape[:j]:
            return None
        return 1, _size(a_shape[:na - j]), _size(b_shape[j:]), _size(b_shape[:j]), 0, 0, 0

    def _axes(self, attrs):
        a, b = attrs["a_axes_summed"], attrs["b_axes_summed"]  # given or from _attrs
        return (list(a) if isinstance(a, tuple) else [a]), (list(b) if isinstance(b, tuple) else [b])

    def forward(self, attrs, a, b):
        dt = promote_mixed(a.dtype, b.dtype)
        try:
            return np.tensordot(a.astype(dt, copy=False), b.astype(dt, copy=False), axes=self._axes(attrs))
        except (ValueError, IndexError) as e:
            raise MXNetError(f"{self.name}: shapes {a.shape} and {b.shape}: {e}") from None

    def vjp(self, attrs, xs, ys, dys):
        a, b = xs
        g = dys[0]
        sa, sb = self._axes(attrs)
        sa = [x % a.ndim for x in sa]
        sb = [x % b.ndim for x in sb]
        fa = [d for d in range(a.ndim) if d not in sa]
        fb = [d for d in range(b.ndim) if d not in sb]
        # g has axes fa + fb
        # g has the axes fa + fb; what is left of b (of a) are its summed axes, increasing
        ga = np.tensordot(g, b, axes=(list(range(len(fa), g.ndim)), fb))
        ga = np.transpose(ga, np.argsort(fa + [sa[sb.index(d)] for d in sorted(sb)]))
        gb = np.tensordot(a, g, axes=(fa, list(range(len(fa)))))
        gb = np.transpose(gb, np.argsort([sb[sa.index(d)] for d in sorted(sa)] + fb))
        return [ga, gb]


@register_numpy("_npi_einsum")
class NpEinsum(NumpyOp):
    """numpy.einsum with a `subscripts` string over `num_args` operands."""
    params = {"subscripts": Param(Str), "num_args": Param(Count, 1), "optimize": Param(Int, 0)}

    def input_names(self, attrs):
        return [f"arg{i}" for i in range(self.positive_count(attrs, "num_args"))]

    def out_types(self, attrs, in_types):
        t = in_types[0]
        for u in in_types[1:]:
            t = promote_mixed(t, u)
        return [t]

    def forward(self, attrs, *xs):
        try:
            return np.asarray(np.einsum(attrs["subscripts"], *xs))
        except ValueError as e:
            raise MXNetError(f"{self.name}: {e}") from None

    def _parts(self, attrs, xs):
        sub = attrs["subscripts"].replace(" ", "")
        if "." in sub:
            raise MXNetError(f"{self.name}: gradients of einsum with '...' are not supported")
        ins, _, out = sub.partition("->")
        ins = ins.split(",")
        if not _:
            out = "".join(sorted(c for c in set("".join(ins)) if "".join(ins).count(c) == 1))
        return ins, out

    def vjp(self, attrs, xs, ys, dys):
        ins, out = self._parts(attrs, xs)
        sizes = {}
        for sub, arr in zip(ins, xs):
            sizes.update(zip(sub, arr.shape))
        grads = []
        for i, target in enumerate(ins):
            if len(set(target)) != len(target):
                raise MXNetError(f"{self.name}: gradients of einsum with a repeated subscript in one "
                                 f"operand ({target!r}) are not supported")
            others = [s for j, s in enumerate(ins) if j != i]
            operands = [dys[0]] + [x for j, x in enumerate(xs) if j != i]
            avail = set(out).union(*map(set, others))
            kept = "".join(c for c in target if c in avail)
            g = np.einsum(",".join([out] + others) + "->" + kept, *operands)
            missing = [k for k, c in enumerate(target) if c not in avail]
            if missing:       # summed away in this operand only: every element gets the same
                g = np.broadcast_to(np.expand_dims(g, missing), [sizes[c] for c in target])
            grads.append(g)
        return grads


@register_numpy("_np_trace")
class NpTrace(NumpyOp):
    """numpy.trace."""
    params = {"offset": Param(Int, 0), "axis1": Param(Int, 0), "axis2": Param(Int, 1)}

    def forward(self, attrs, a):
        if a.ndim < 2:
            raise MXNetError(f"{self.name}: input must be at least 2-D, got shape {a.shape}")
        return np.asarray(np.trace(a, attrs["offset"], attrs["axis1"], attrs["axis2"]), a.dtype)

    def vjp(self, attrs, xs, ys, dys):
        a = xs[0]
        g = np.zeros(a.shape, a.dtype)
        d = np.diagonal(g, attrs["offset"], attrs["axis1"], attrs["axis2"])
        d.setflags(write=True)
        d[...] = np.expand_dims(dys[0], -1)
        return [g]


def _condition_exact(cond_dtype, compute_dtype) -> bool:
    """Whether a condition converted to `compute_dtype` is nonzero exactly where it is true (a
    float condition such as 0.5 is not, in an integer dtype)."""
    return np.dtype(cond_dtype).kind != "f" or np.dtype(compute_dtype).kind == "f"


@register_numpy("_npi_where")
class NpWhere(NumpyElementwise):
    """numpy.where(condition, x, y) with broadcasting."""
    inputs = ("condition", "x", "y")

    def expr(self, attrs, c, x, y):
        return S.select(c, x, y)

    def compute_dtype(self, attrs, in_dtypes):
        out = promote_mixed(in_dtypes[1], in_dtypes[2])
        return out.name if out.kind != "b" and _condition_exact(in_dtypes[0], out) else None

    def out_types(self, attrs, in_types):
        return [promote_mixed(in_types[1], in_types[2])]

    def forward(self, attrs, c, x, y):
        return np.where(c.astype(bool), x, y).astype(promote_mixed(x.dtype, y.dtype), copy=False)

    def vjp(self, attrs, xs, ys, dys):
        c = xs[0].astype(bool)
        g = dys[0]
        return [None, np.where(c, g, 0), np.where(c, 0, g)]


@register_numpy("_npi_clip")
class NpClip(NumpyElementwise):
    """numpy.clip to [a_min, a_max] (either may be None)."""
    params = {"a_min": Param(Optional(Float), None), "a_max": Param(Optional(Float), None)}

    def expr(self, attrs, x):
        if attrs["a_min"] is not None:
            x = S.maximum(x, attrs["a_min"])
        return x if attrs["a_max"] is None else S.minimum(x, attrs["a_max"])

    def compute_dtype(self, attrs, in_dtypes):
        t = np.dtype(in_dtypes[0])
        bounds = [b for b in (attrs["a_min"], attrs["a_max"]) if b is not None]
        if not bounds or t.kind == "b" or (t.kind != "f" and not all(float(b).is_integer() for b in bounds)):
            return None
        return t.name

    def forward(self, attrs, a):
        if attrs["a_min"] is None and attrs["a_max"] is None:
            raise MXNetError(f"{self.name}: a_min and a_max cannot both be None")
        return np.clip(a, attrs["a_min"], attrs["a_max"]).astype(a.dtype, copy=False)

    def vjp(self, attrs, xs, ys, dys):
        a = xs[0]
        lo = -np.inf if attrs["a_min"] is None else attrs["a_min"]
        hi = np.inf if attrs["a_max"] is None else attrs["a_max"]
        return [dys[0] * ((a >= lo) & (a <= hi))]


@register_numpy("_np_kron")
class NpKron(NumpyOp):
    """numpy.kron."""
    inputs = ("a", "b")

    def out_types(self, attrs, in_types):
        return [promote_mixed(*in_types)]

    def forward(self, attrs, a, b):
        return np.kron(a, b).astype(promote_mixed(a.dtype, b.dtype), copy=False)

    def vjp(self, attrs, xs, ys, dys):
        a, b = xs
        nd = max(a.ndim, b.ndim)
        a2 = a.reshape((1,) * (nd - a.ndim) + a.shape)
        b2 = b.reshape((1,) * (nd - b.ndim) + b.shape)
        inter = []
        for da, db in zip(a2.shape, b2.shape):
            inter += [da, db]
        g = dys[0].reshape(inter)
        ga = np.einsum(g, list(range(2 * nd)), b2, list(range(1, 2 * nd, 2)), list(range(0, 2 * nd, 2)))
        gb = np.einsum(g, list(range(2 * nd)), a2, list(range(0, 2 * nd, 2)), list(range(1, 2 * nd, 2)))
        return [ga.reshape(a.shape), gb.reshape(b.shape)]


class _WhereScalar(NumpyElementwise):
    """numpy.where with a scalar for x (`_npi_where_lscalar`) or y (`_npi_where_rscalar`)."""
    inputs = ("condition", "x")
    params = {"scalar": Param(Float, 0.0)}
    scalar_is_x = True

    def out_types(self, attrs, in_types):
        return [in_types[1]]

    def expr(self, attrs, c, arr):
        s = S.Const(attrs["scalar"])
        return S.select(c, s, arr) if self.scalar_is_x else S.select(c, arr, s)

    def compute_dtype(self, attrs, in_dtypes):
        t, s = np.dtype(in_dtypes[1]), float(attrs["scalar"])
        if t.kind == "b" or (t.kind != "f" and not (np.isfinite(s) and s.is_integer())):
            return None
        return t.name if _condition_exact(in_dtypes[0], t) else None

    def forward(self, attrs, c, arr):
        s = np.asarray(attrs["scalar"], arr.dtype)
        x, y = (s, arr) if self.scalar_is_x else (arr, s)
        return np.where(c.astype(bool), x, y).astype(arr.dtype, copy=False)

    def vjp(self, attrs, xs, ys, dys):
        c = xs[0].astype(bool)
        keep = ~c if self.scalar_is_x else c
        return [None, np.where(keep, dys[0], 0)]


register_numpy("_npi_where_lscalar")(type("NpWhereL", (_WhereScalar,), {
    "inputs": ("condition", "y"), "__doc__": "numpy.where(condition, scalar, y)."}))
register_numpy("_npi_where_rscalar")(type("NpWhereR", (_WhereScalar,), {
    "scalar_is_x": False, "__doc__": "numpy.where(condition, x, scalar)."}))


@register_numpy("_npi_where_scalar2")
class NpWhereScalar2(NumpyOp):
    """numpy.where(condition, x, y) with scalars x and y (float32)."""
    inputs = ("condition",)
    params = {"x": Param(Float, 0.0), "y": Param(Float, 0.0)}
    no_gradient = True

    def out_types(self, attrs, in_types):
        return [np.dtype(np.float32)]

    def forward(self, attrs, c):
        return np.where(c.astype(bool), attrs["x"], attrs["y"]).astype(np.float32)


@register_numpy("_npi_tensordot_int_axes")
class NpTensordotInt(NpTensordot):
    """numpy.tensordot over the last `axes` axes of a and the first `axes` of b."""
    params = {"axes": Param(Int, 2)}

    def _attrs(self, attrs, a, b):
        n = attrs["axes"]
        return {"a_axes_summed": tuple(range(a.ndim - n, a.ndim)), "b_axes_summed": tuple(range(n))}

    def forward(self, attrs, a, b):
        return NpTensordot.forward(self, self._attrs(attrs, a, b), a, b)

    def gemm_dims(self, attrs, a_shape, b_shape):
        n, na = attrs["axes"], len(a_shape)
        if not 0 <= n <= min(na, len(b_shape)):
            return None
        summed = {"a_axes_summed": tuple(range(na - n, na)), "b_axes_summed": tuple(range(n))}
        return NpTensordot.gemm_dims(self, summed, a_shape, b_shape)

    def vjp(self, attrs, xs, ys, dys):
        return NpTensordot.vjp(self, self._attrs(attrs, *xs), xs, ys, dys)
