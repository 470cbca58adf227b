"""The `linalg_*` family of MXNet 1.9.1 (`src/operator/tensor/la_op.*`): matrix operators over the
last two axes, batched over the leading ones (`nd.linalg.*`, `sym.linalg.*`).

gemm (alpha op(A) op(B) + beta C), potrf (Cholesky factor), potri (inverse from a Cholesky factor),
trmm / trsm (triangular multiply / solve), syrk (alpha A A^T), gelqf (A = L Q), syevd (A = U^T
diag(lam) U, eigenvalues ascending, each eigenvector's largest-magnitude entry positive), inverse,
det, slogdet, sumlogdiag, extractdiag / makediag, extracttrian / maketrian.

Invariants: inputs are float32 or float64 (computed in float64, returned in the input dtype);
triangular inputs are read only in their `lower` (or upper) triangle, so the gradients of those
inputs are zero outside it; the gradient rules are MXNet's (potrf's and syevd's are symmetric, as
their inputs are meant to be symmetric). Every op's gradient is one hidden `_backward_<op>` node
whose inputs are the output gradients, the op's inputs and its outputs.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Float, Int, Param
from .linalg import LinalgGemm2
from .registry import Op, register

_FLOATS = ("float32", "float64")


def _t(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def _tri(x: np.ndarray, lower: bool, offset: int = 0) -> np.ndarray:
    return np.tril(x, offset) if lower else np.triu(x, offset)


def _copy_lower_to_upper(m: np.ndarray) -> np.ndarray:
    """tril(m) mirrored onto the upper triangle (a symmetric matrix)."""
    low = np.tril(m)
    return low + _t(np.tril(m, -1))


def _solve_tri(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a^-1 b for batched square `a` (triangular here; a general solve is exact enough)."""
    return np.linalg.solve(a, b)


class _LaOp(Op):
    """A linalg op: float inputs of rank >= 2 (matrices on the last two axes), one backward node."""
    inputs = ("A",)
    square: tuple = ()            # indices of inputs that must be square matrices

    def infer_type(self, attrs, in_types):
        ins, outs = super().infer_type(attrs, in_types)
        t = outs[0] if outs else None
        if t is not None and t not in _FLOATS:
            raise MXNetError(f"{self.name}: only supports float32/float64 inputs, got {t}")
        return ins, [t] * self.num_outputs(attrs)

    def check(self, shapes) -> None:
        for i, s in enumerate(shapes):
            if s is None:
                continue
            if len(s) < 2:
                raise MXNetError(f"{self.name}: input {self.inputs[i]!r} must have at least 2 dims "
                                 f"(a matrix), got shape {tuple(s)}")
            if i in self.square and s[-1] and s[-2] and s[-1] != s[-2]:
                raise MXNetError(f"{self.name}: input {self.inputs[i]!r} must be square matrices, "
                                 f"got shape {tuple(s)}")
        known = [s for s in shapes if s is not None]
        for s in known[1:]:
            if len(s) != len(known[0]) or any(x and y and x != y for x, y in zip(s[:-2], known[0][:-2])):
                raise MXNetError(f"{self.name}: batch dimensions of the inputs differ: "
                                 + ", ".join(str(tuple(k)) for k in known))

    def out_shapes(self, attrs, shapes) -> list:
        return [shapes[0]]

    def infer_shape(self, attrs, in_shapes):
        self.check(in_shapes)
        if any(s is None for s in in_shapes):
            return list(in_shapes), [None] * self.num_outputs(attrs)
        return list(in_shapes), [tuple(o) for o in self.out_shapes(attrs, [tuple(s) for s in in_shapes])]

    def compute(self, attrs, inputs, ctx):
        self.check([x.shape for x in inputs])
        dtype = inputs[0].dtype
        if dtype.name not in _FLOATS:
            raise MXNetError(f"{self.name}: only supports float32/float64 inputs, got {dtype.name}")
        outs = self.forward(attrs, *[x.astype(np.float64) for x in inputs])
        return [np.ascontiguousarray(np.asarray(o).astype(dtype)) for o in outs]

    def forward(self, attrs, *mats) -> list:
        raise MXNetError(f"{self.name}: no forward defined")

    def backward(self, attrs, ins: list, outs: list, ograds: list) -> list:
        raise MXNetError(f"{self.name}: no backward defined")

    def grad(self, F, attrs, inputs, outputs, ograds):
        return F.apply(f"_backward_{self.name}", [*ograds, *inputs, *outputs], **attrs)


def _register_la(name: str, aliases=()):
    """Register a `_LaOp` subclass and its hidden backward op `_backward_<name>`."""
    def deco(cls):
        register(name, (name[1:],) + tuple(aliases))(cls)
        fwd = cls()   # a private instance to evaluate the rule (the registered one is the same class)

        class Backward(Op):
            hidden = True
            params = cls.params
            __doc__ = f"Gradients of {name} from (output gradients, inputs, outputs)."

            def input_names(self, attrs):
                n_out = fwd.num_outputs(attrs)
                return ([f"ograd{i}" for i in range(n_out)] + list(fwd.input_names(attrs))
                        + [f"out{i}" for i in range(n_out)])

            def num_outputs(self, attrs):
                return len(fwd.input_names(attrs))

            def output_names(self, attrs):
                return [f"{n}_grad" for n in fwd.input_names(attrs)]

            def infer_shape(self, attrs, in_shapes):
                n_out = fwd.num_outputs(attrs)
                n_in = len(fwd.input_names(attrs))
                return list(in_shapes), list(in_shapes[n_out:n_out + n_in])

            def infer_type(self, attrs, in_types):
                n_out = fwd.num_outputs(attrs)
                n_in = len(fwd.input_names(attrs))
                return list(in_types), list(in_types[n_out:n_out + n_in])

            def compute(self, attrs, inputs, ctx):
                n_out = fwd.num_outputs(attrs)
                n_in = len(fwd.input_names(attrs))
                dtype = inputs[n_out].dtype
                f64 = [x.astype(np.float64) for x in inputs]
                ograds, ins, outs = f64[:n_out], f64[n_out:n_out + n_in], f64[n_out + n_in:]
                grads = fwd.backward(attrs, ins, outs, ograds)
                return [np.ascontiguousarray(np.broadcast_to(g, x.shape).astype(dtype))
                        for g, x in zip(grads, ins)]

        register(f"_backward_{name}")(type(f"Backward{cls.__name__}", (Backward,), {}))
        return cls
    return deco


_GEMM2 = LinalgGemm2()   # the product rule gemm adds C to


@register("_linalg_gemm", aliases=("linalg_gemm",))
class LinalgGemm(Op):
    """alpha * op(A) op(B) + beta * C (rows on `axis`, as linalg_gemm2)."""
    inputs = ("A", "B", "C")
    params = {**LinalgGemm2.params, "beta": Param(Float, 1.0, "scale of C")}
    kernel = "gemm"

    def _gemm2_attrs(self, attrs) -> dict:
        return {k: v for k, v in attrs.items() if k != "beta"}

    def infer_type(self, attrs, in_types):
        ins, outs = _GEMM2.infer_type(attrs, in_types[:2])
        t = outs[0] or in_types[2]
        if in_types[2] is not None and t is not None and in_types[2] != t:
            raise MXNetError(f"{self.name}: dtype mismatch for input 'C': expected {t}, got {in_types[2]}")
        return [t, t, t], [t]

    def infer_shape(self, attrs, in_shapes):
        ins, outs = _GEMM2.infer_shape(self._gemm2_attrs(attrs), in_shapes[:2])
        c = in_shapes[2]
        out = outs[0]
        if out is not None and c is not None:
            if len(c) != len(out) or any(x and y and x != y for x, y in zip(c, out)):
                raise MXNetError(f"{self.name}: shape mismatch for input 'C': expected {tuple(out)}, got {tuple(c)}")
        return ins + [out if out is not None else c], [out if out is not None else c]

    def compute(self, attrs, inputs, ctx):
        prod = _GEMM2.compute(self._gemm2_attrs(attrs), inputs[:2], ctx)[0]
        c = inputs[2]
        if c.shape != prod.shape:
            raise MXNetError(f"{self.name}: shape mismatch for input 'C': expected {prod.shape}, got {c.shape}")
        return [np.ascontiguousarray(prod + c.dtype.type(attrs["beta"]) * c)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        da, db = _GEMM2.grad(F, self._gemm2_attrs(attrs), inputs[:2], outputs, ograds)
        return [da, db, F._mul_scalar(ograds[0], scalar=attrs["beta"])]


_LOWER = {"lower": Param(Bool, True, "use the lower triangle (else the upper)")}


@_register_la("_linalg_potrf")
class Potrf(_LaOp):
    """Cholesky factor: L with A = L L^T (lower) or U with A = U^T U (upper)."""
    params = _LOWER
    square = (0,)

    def forward(self, attrs, a):
        sym = _copy_lower_to_upper(a) if attrs["lower"] else _t(_copy_lower_to_upper(_t(a)))
        try:
            low = np.linalg.cholesky(sym)
        except np.linalg.LinAlgError:
            raise MXNetError(f"{self.name}: the matrix is not positive definite") from None
        return [low if attrs["lower"] else _t(low)]

    def backward(self, attrs, ins, outs, ograds):
        low, dl = outs[0], ograds[0]
        if not attrs["lower"]:
            low, dl = _t(low), _t(dl)
        # dA = 0.5 * L^-T copyLTU(L^T dL) L^-1
        m = _copy_lower_to_upper(_t(low) @ dl)
        linv = np.linalg.inv(low)
        return [0.5 * _t(linv) @ m @ linv]


@_register_la("_linalg_potri")
class Potri(_LaOp):
    """(L L^T)^-1 from a Cholesky factor L (lower), or (U^T U)^-1 from U (upper)."""
    params = _LOWER
    square = (0,)

    def forward(self, attrs, a):
        f = _tri(a, attrs["lower"])
        s = f @ _t(f) if attrs["lower"] else _t(f) @ f
        return [np.linalg.inv(s)]

    def backward(self, attrs, ins, outs, ograds):
        f = _tri(ins[0], attrs["lower"])
        b, db = outs[0], ograds[0]
        g = b @ db @ b
        g = g + _t(g)
        return [_tri(-(g @ f) if attrs["lower"] else -(f @ g), attrs["lower"])]


_TRI_PARAMS = {"transpose": Param(Bool, False, "use op(A) = A^T"),
               "rightside": Param(Bool, False, "multiply/solve from the right"),
               **_LOWER, "alpha": Param(Float, 1.0, "scale of the result")}


class _Triangular(_LaOp):
    """trmm / trsm: triangular A (square) with B; op(A) meets B's rows, or its columns with
    `rightside`."""
    inputs = ("A", "B")
    params = _TRI_PARAMS
    square = (0,)

    def infer_shape(self, attrs, in_shapes):
        a, b = in_shapes
        if a is not None and b is not None and len(a) >= 2 and len(b) >= 2:
            self.match(attrs, a, b)
        return super().infer_shape(attrs, in_shapes)

    def match(self, attrs, a, b) -> None:
        dim = b[-1] if attrs["rightside"] else b[-2]
        if a[-1] and dim and a[-1] != dim:
            raise MXNetError(f"{self.name}: shape mismatch: A {tuple(a)} and B {tuple(b)} "
                             f"(rightside={attrs['rightside']})")

    def out_shapes(self, attrs, shapes):
        return [shapes[1]]

    def op_a(self, attrs, a):
        t = _tri(a, attrs["lower"])
        return _t(t) if attrs["transpose"] else t


@_register_la("_linalg_trmm")
class Trmm(_Triangular):
    """alpha op(A) B, or alpha B op(A) with `rightside`; A triangular."""

    def forward(self, attrs, a, b):
        self.match(attrs, a.shape, b.shape)
        oa = self.op_a(attrs, a)
        return [attrs["alpha"] * (b @ oa if attrs["rightside"] else oa @ b)]

    def backward(self, attrs, ins, outs, ograds):
        a, b = ins
        dy, alpha = ograds[0], attrs["alpha"]
        oa = self.op_a(attrs, a)
        if attrs["rightside"]:
            db = alpha * dy @ _t(oa)
            doa = alpha * _t(b) @ dy
        else:
            db = alpha * _t(oa) @ dy
            doa = alpha * dy @ _t(b)
        da = _t(doa) if attrs["transpose"] else doa
        return [_tri(da, attrs["lower"]), db]


@_register_la("_linalg_trsm")
class Trsm(_Triangular):
    """alpha op(A)^-1 B, or alpha B op(A)^-1 with `rightside`; A triangular."""

    def forward(self, attrs, a, b):
        self.match(attrs, a.shape, b.shape)
        oa = self.op_a(attrs, a)
        if attrs["rightside"]:
            return [attrs["alpha"] * _t(_solve_tri(_t(oa), _t(b)))]
        return [attrs["alpha"] * _solve_tri(oa, b)]

    def backward(self, attrs, ins, outs, ograds):
        a, _ = ins
        x, dy, alpha = outs[0], ograds[0], attrs["alpha"]
        oa = self.op_a(attrs, a)
        if attrs["rightside"]:      # X = alpha B oa^-1: dB = alpha dY oa^-T, d oa = -X^T dY oa^-T
            db = alpha * _t(_solve_tri(oa, _t(dy)))
            doa = -_t(x) @ _t(_solve_tri(oa, _t(dy)))
        else:                       # X = alpha oa^-1 B: dB = alpha oa^-T dY, d oa = -oa^-T dY X^T
            g = _solve_tri(_t(oa), dy)
            db = alpha * g
            doa = -g @ _t(x)
        da = _t(doa) if attrs["transpose"] else doa
        return [_tri(da, attrs["lower"]), db]


@_register_la("_linalg_syrk")
class Syrk(_LaOp):
    """alpha A A^T, or alpha A^T A with `transpose`."""
    params = {"transpose": Param(Bool, False), "alpha": Param(Float, 1.0)}

    def out_shapes(self, attrs, shapes):
        s = shapes[0]
        n = s[-1] if attrs["transpose"] else s[-2]
        return [tuple(s[:-2]) + (n, n)]

    def forward(self, attrs, a):
        return [attrs["alpha"] * (_t(a) @ a if attrs["transpose"] else a @ _t(a))]

    def backward(self, attrs, ins, outs, ograds):
        a, dy = ins[0], ograds[0]
        s = dy + _t(dy)
        return [attrs["alpha"] * (a @ s if attrs["transpose"] else s @ a)]


@_register_la("_linalg_gelqf")
class Gelqf(_LaOp):
    """LQ factorization A = L Q of an (m, n) matrix, m <= n: Q (m, n) with orthonormal rows,
    L (m, m) lower triangular."""
    outputs = ("Q", "L")

    def check(self, shapes):
        super().check(shapes)
        s = shapes[0]
        if s is not None and s[-1] and s[-2] and s[-2] > s[-1]:
            raise MXNetError(f"{self.name}: needs rows <= columns, got shape {tuple(s)}")

    def out_shapes(self, attrs, shapes):
        s = shapes[0]
        return [s, tuple(s[:-2]) + (s[-2], s[-2])]

    def forward(self, attrs, a):
        q, r = np.linalg.qr(_t(a))             # A^T = Q' R'  =>  A = R'^T Q'^T
        # LAPACK's gelqf leaves L's diagonal with the signs Householder gives; make it
        # non-negative, which fixes the factorization uniquely
        sign = np.where(np.diagonal(r, axis1=-2, axis2=-1) < 0, -1.0, 1.0)
        q = q * sign[..., None, :]
        r = r * sign[..., :, None]
        return [_t(q), _t(r)]

    def backward(self, attrs, ins, outs, ograds):
        q, low = outs
        dq, dl = ograds
        m = _t(low) @ dl - dq @ _t(q)
        rhs = dq + _copy_lower_to_upper(m) @ q
        return [np.linalg.solve(_t(low), rhs)]


@_register_la("_linalg_syevd")
class Syevd(_LaOp):
    """Eigendecomposition of a symmetric A = U^T diag(lam) U: eigenvector rows U, ascending lam."""
    outputs = ("U", "L")
    square = (0,)

    def out_shapes(self, attrs, shapes):
        s = shapes[0]
        return [s, tuple(s[:-1])]

    def forward(self, attrs, a):
        lam, vecs = np.linalg.eigh(_copy_lower_to_upper(a))
        u = _t(vecs)
        idx = np.argmax(np.abs(u), axis=-1)
        big = np.take_along_axis(u, idx[..., None], axis=-1)
        u = np.where(big < 0, -u, u)
        return [u, lam]

    def backward(self, attrs, ins, outs, ograds):
        u, lam = outs
        du, dlam = ograds
        n = lam.shape[-1]
        temp = du @ _t(u)
        diff = lam[..., :, None] - lam[..., None, :]           # lam_i - lam_j
        off = ~np.eye(n, dtype=bool)
        with np.errstate(divide="ignore", invalid="ignore"):
            elem = np.where(off, (temp - _t(temp)) / np.where(off, 2.0 * diff, 1.0), 0.0)
        low = np.tril(elem, -1)
        mid = low + _t(low)
        mid = mid + dlam[..., :, None] * np.eye(n)
        return [_t(u) @ mid @ u]


@_register_la("_linalg_inverse")
class Inverse(_LaOp):
    """A^-1."""
    square = (0,)

    def forward(self, attrs, a):
        try:
            return [np.linalg.inv(a)]
        except np.linalg.LinAlgError:
            raise MXNetError(f"{self.name}: the matrix is singular") from None

    def backward(self, attrs, ins, outs, ograds):
        b = outs[0]
        return [-_t(b) @ ograds[0] @ _t(b)]


def _per_matrix(shape) -> tuple:
    """The shape of one value per matrix of `shape`: the batch axes; for a single matrix () under
    NumPy shape semantics (MXNet's np mode), else (1,)."""
    from ..util import is_np_shape
    return tuple(shape[:-2]) or (() if is_np_shape() else (1,))


@_register_la("_linalg_det")
class Det(_LaOp):
    """det(A), one value per matrix."""
    square = (0,)

    def out_shapes(self, attrs, shapes):
        return [_per_matrix(shapes[0])]

    def forward(self, attrs, a):
        return [np.linalg.det(a).reshape(_per_matrix(a.shape))]

    def backward(self, attrs, ins, outs, ograds):
        a = ins[0]
        d = (ograds[0] * outs[0]).reshape(a.shape[:-2] + (1, 1))
        return [d * _t(np.linalg.inv(a))]


@_register_la("_linalg_slogdet")
class Slogdet(_LaOp):
    """(sign(det A), log|det A|), one pair per matrix."""
    outputs = ("sign", "logdet")
    square = (0,)

    def out_shapes(self, attrs, shapes):
        s = _per_matrix(shapes[0])
        return [s, s]

    def forward(self, attrs, a):
        sign, logdet = np.linalg.slogdet(a)
        shape = _per_matrix(a.shape)
        return [sign.reshape(shape), logdet.reshape(shape)]

    def backward(self, attrs, ins, outs, ograds):
        a = ins[0]
        d = ograds[1].reshape(a.shape[:-2] + (1, 1))
        return [d * _t(np.linalg.inv(a))]


@_register_la("_linalg_sumlogdiag")
class Sumlogdiag(_LaOp):
    """sum(log(diag(A))), one value per matrix."""
    square = (0,)

    def out_shapes(self, attrs, shapes):
        return [_per_matrix(shapes[0])]

    def forward(self, attrs, a):
        diag = np.diagonal(a, axis1=-2, axis2=-1)
        return [np.log(diag).sum(axis=-1).reshape(_per_matrix(a.shape))]

    def backward(self, attrs, ins, outs, ograds):
        a = ins[0]
        n = a.shape[-1]
        diag = np.diagonal(a, axis1=-2, axis2=-1)
        dy = ograds[0].reshape(a.shape[:-2] + (1,))
        return [(dy / diag)[..., None] * np.eye(n)]


_OFFSET = {"offset": Param(Int, 0, "diagonal offset (> 0 above, < 0 below the main one)")}


def _diag_len(op: str, rows: int, cols: int, offset: int) -> int:
    n = min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols)
    if n <= 0:
        raise MXNetError(f"{op}: offset {offset} selects no diagonal of a {rows}x{cols} matrix")
    return n


@_register_la("_linalg_extractdiag")
class Extractdiag(_LaOp):
    """The diagonal `offset` of each matrix."""
    params = _OFFSET

    def out_shapes(self, attrs, shapes):
        s = shapes[0]
        return [tuple(s[:-2]) + (_diag_len(self.name, s[-2], s[-1], attrs["offset"]),)]

    def forward(self, attrs, a):
        _diag_len(self.name, a.shape[-2], a.shape[-1], attrs["offset"])
        return [np.diagonal(a, attrs["offset"], axis1=-2, axis2=-1)]

    def backward(self, attrs, ins, outs, ograds):
        a = ins[0]
        out = np.zeros(a.shape)
        d = np.diagonal(out, attrs["offset"], axis1=-2, axis2=-1)
        d.setflags(write=True)
        d[...] = ograds[0]
        return [out]


def _makediag(v: np.ndarray, offset: int) -> np.ndarray:
    n = v.shape[-1] + abs(offset)
    out = np.zeros(v.shape[:-1] + (n, n))
    d = np.diagonal(out, offset, axis1=-2, axis2=-1)
    d.setflags(write=True)
    d[...] = v
    return out


@_register_la("_linalg_makediag")
class Makediag(_LaOp):
    """Square matrices with the input vectors on diagonal `offset`, zeros elsewhere."""
    params = _OFFSET

    def check(self, shapes):
        s = shapes[0]
        if s is not None and len(s) < 1:
            raise MXNetError(f"{self.name}: input must have at least 1 dim, got shape {tuple(s)}")

    def out_shapes(self, attrs, shapes):
        s = shapes[0]
        n = s[-1] + abs(attrs["offset"]) if s[-1] else 0
        return [tuple(s[:-1]) + (n, n)]

    def forward(self, attrs, a):
        return [_makediag(a, attrs["offset"])]

    def backward(self, attrs, ins, outs, ograds):
        return [np.diagonal(ograds[0], attrs["offset"], axis1=-2, axis2=-1)]


def _trian_index(op: str, n: int, offset: int, lower: bool):
    """Row/column indices (row-major order) of the packed triangle of an n x n matrix."""
    if abs(offset) >= n:
        raise MXNetError(f"{op}: offset {offset} is out of range for {n}x{n} matrices")
    lower = lower if offset == 0 else offset < 0
    return np.tril_indices(n, offset) if lower else np.triu_indices(n, offset)


@_register_la("_linalg_extracttrian")
class Extracttrian(_LaOp):
    """The triangle of each square matrix (lower or upper, from diagonal `offset`), packed row-major."""
    params = {**_OFFSET, **_LOWER}
    square = (0,)

    def out_shapes(self, attrs, shapes):
        s = shapes[0]
        rows, _ = _trian_index(self.name, s[-1], attrs["offset"], attrs["lower"])
        return [tuple(s[:-2]) + (len(rows),)]

    def forward(self, attrs, a):
        rows, cols = _trian_index(self.name, a.shape[-1], attrs["offset"], attrs["lower"])
        return [a[..., rows, cols]]

    def backward(self, attrs, ins, outs, ograds):
        a = ins[0]
        rows, cols = _trian_index(self.name, a.shape[-1], attrs["offset"], attrs["lower"])
        out = np.zeros(a.shape)
        out[..., rows, cols] = ograds[0]
        return [out]


def _trian_size(op: str, packed: int, offset: int) -> int:
    """n such that the packed triangle of an n x n matrix from diagonal `offset` has `packed` values."""
    k = abs(offset)
    m = int(round((np.sqrt(8 * packed + 1) - 1) / 2))   # packed = m (m + 1) / 2 with m = n - k
    if m * (m + 1) // 2 != packed:
        raise MXNetError(f"{op}: {packed} values do not form a packed triangle")
    return m + k


@_register_la("_linalg_maketrian")
class Maketrian(_LaOp):
    """Square matrices with the packed triangles of the input (extracttrian's inverse)."""
    params = {**_OFFSET, **_LOWER}

    def check(self, shapes):
        s = shapes[0]
        if s is not None and len(s) < 1:
            raise MXNetError(f"{self.name}: input must have at least 1 dim, got shape {tuple(s)}")

    def out_shapes(self, attrs, shapes):
        s = shapes[0]
        n = _trian_size(self.name, s[-1], attrs["offset"]) if s[-1] else 0
        return [tuple(s[:-1]) + (n, n)]

    def forward(self, attrs, a):
        n = _trian_size(self.name, a.shape[-1], attrs["offset"])
        rows, cols = _trian_index(self.name, n, attrs["offset"], attrs["lower"])
        out = np.zeros(a.shape[:-1] + (n, n))
        out[..., rows, cols] = a
        return [out]

    def backward(self, attrs, ins, outs, ograds):
        dy = ograds[0]
        rows, cols = _trian_index(self.name, dy.shape[-1], attrs["offset"], attrs["lower"])
        return [dy[..., rows, cols]]
