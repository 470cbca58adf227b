"""NumPy-semantics linear algebra (`mx.np.linalg`): `_npi_norm`, `_npi_inv`, `_npi_det`,
`_npi_slogdet`, `_npi_solve`, `_npi_cholesky`, `_npi_eigh`, `_npi_eigvalsh`, `_npi_eig`,
`_npi_eigvals`, `_npi_svd`, `_npi_pinv`. Batched over leading axes as numpy; gradients by the
standard matrix-calculus identities (eig/eigvals, which may be complex, have none)."""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Float, Int, Param, Str
from .np_base import Axis, Literal, NumpyOp, register_numpy
from .np_reduce import expand_reduced, reduce_axes

__all__ = []


def _mT(a):
    return np.swapaxes(a, -1, -2)


def _square(op: str, a: np.ndarray) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise MXNetError(f"{op}: expected a (batch of) square matrices, got shape {a.shape}")


def _float_types(self, attrs, in_types):
    return [t if np.dtype(t).kind == "f" else np.dtype(np.float32) for t in in_types[:1]] * self.num_outputs(attrs)


class _Linalg(NumpyOp):
    inputs = ("A",)
    out_types = _float_types

    def _out(self, y, a):
        return np.asarray(y).astype(a.dtype if a.dtype.kind == "f" else np.float32, copy=False)


def _ord(v):
    """A norm order: a number, inf / -inf, or None (strings 'inf' / '-inf' accepted)."""
    v = Literal(v)
    if isinstance(v, str):
        if v in ("inf", "-inf"):
            return float(v)
        raise ValueError(f"invalid norm order {v!r}")
    return None if v is None else float(v)


@register_numpy("_npi_norm")
class NpNorm(_Linalg):
    """MXNet's norm operator; `flag` selects the kind (as MXNet's frontend sets it): -2 the 2-norm
    of the flattened array, 1 Frobenius over `axis` (all axes for None), 2 nuclear and 0 the
    matrix norm of order `ord` (2 or -2) over two axes, -1 the vector norm of order `ord` over
    `axis` (of the flattened array for None)."""
    inputs = ("x",)
    params = {"ord": Param(_ord, 2.0), "axis": Param(Axis, None), "keepdims": Param(Bool, False),
              "flag": Param(Int, -1)}

    def _axes(self, attrs, x):
        axis = attrs["axis"]
        return tuple(range(x.ndim)) if axis is None else (axis,) if isinstance(axis, int) else axis

    def _matrix_axes(self, attrs, x):
        axes = reduce_axes(self.name, attrs["axis"], x.ndim)
        if len(axes) != 2:
            raise MXNetError(f"{self.name}: a matrix norm needs two axes, got {attrs['axis']} for shape {x.shape}")
        return axes

    def forward(self, attrs, x):
        flag, keep = attrs["flag"], attrs["keepdims"]
        xf = x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)
        if flag == -2:
            y = np.sqrt(np.sum(np.square(xf)))
            return self._out(np.reshape(y, (1,) * x.ndim) if keep else y, x)
        if flag == 1:
            axes = reduce_axes(self.name, attrs["axis"], x.ndim)
            return self._out(np.sqrt(np.sum(np.square(xf), axis=axes, keepdims=keep)), x)
        if flag in (0, 2):
            axes = self._matrix_axes(attrs, x)
            return self._out(np.linalg.norm(xf, "nuc" if flag == 2 else attrs["ord"], axes, keep), x)
        ord_ = attrs["ord"]
        if attrs["axis"] is None:
            y = np.linalg.norm(xf.reshape(-1), ord_)
            return self._out(np.reshape(y, (1,) * x.ndim) if keep else y, x)
        axes = reduce_axes(self.name, attrs["axis"], x.ndim)
        if len(axes) != 1:
            raise MXNetError(f"{self.name}: a vector norm needs one axis, got {attrs['axis']}")
        return self._out(np.linalg.norm(xf, ord_, axes[0], keep), x)

    def vjp(self, attrs, xs, ys, dys):
        x, y, g = xs[0], ys[0], dys[0]
        flag = attrs["flag"]
        axes = reduce_axes(self.name, None if flag == -2 else attrs["axis"], x.ndim)
        gb = expand_reduced(g, axes, x.shape, attrs["keepdims"])
        yb = expand_reduced(y, axes, x.shape, attrs["keepdims"])
        if flag in (-2, 1) or (flag == -1 and attrs["ord"] == 2):
            return [gb * x / np.where(yb == 0, 1, yb)]
        if flag in (0, 2):
            a = np.moveaxis(x, axes, (-2, -1))
            u, _, vh = np.linalg.svd(a, full_matrices=False)
            if flag == 2:
                d = u @ vh
            else:
                k = 0 if attrs["ord"] > 0 else -1
                d = u[..., :, k:k + 1 if k == 0 else None] @ vh[..., k:k + 1 if k == 0 else None, :]
            return [gb * np.moveaxis(d, (-2, -1), axes)]
        p = attrs["ord"]
        if p == 1:
            return [gb * np.sign(x)]
        if np.isinf(p):
            mask = np.abs(x) == yb
            return [gb * np.sign(x) * mask / np.maximum(mask.sum(axis=axes, keepdims=True), 1)]
        if p == 0:
            return [np.zeros_like(x)]
        return [gb * np.sign(x) * np.abs(x) ** (p - 1) / np.where(yb == 0, 1, yb) ** (p - 1)]


@register_numpy("_npi_inv")
class NpInv(_Linalg):
    """numpy.linalg.inv."""

    def forward(self, attrs, a):
        _square(self.name, a)
        return self._out(np.linalg.inv(a), a)

    def vjp(self, attrs, xs, ys, dys):
        y = ys[0]
        return [-_mT(y) @ dys[0] @ _mT(y)]


@register_numpy("_npi_det")
class NpDet(_Linalg):
    """numpy.linalg.det."""

    def forward(self, attrs, a):
        _square(self.name, a)
        return self._out(np.linalg.det(a), a)

    def vjp(self, attrs, xs, ys, dys):
        a = xs[0]
        return [(dys[0] * ys[0])[..., None, None] * _mT(np.linalg.inv(a))]


@register_numpy("_npi_slogdet")
class NpSlogdet(_Linalg):
    """numpy.linalg.slogdet: (sign, log|det|)."""
    n_outputs = 2

    def forward(self, attrs, a):
        _square(self.name, a)
        sign, logdet = np.linalg.slogdet(a)
        return self._out(sign, a), self._out(logdet, a)

    def vjp(self, attrs, xs, ys, dys):
        return [dys[1][..., None, None] * _mT(np.linalg.inv(xs[0]))]


@register_numpy("_npi_solve")
class NpSolve(_Linalg):
    """numpy.linalg.solve(a, b): x with a @ x = b (b a vector or a batch of matrices)."""
    inputs = ("a", "b")

    def forward(self, attrs, a, b):
        _square(self.name, a)
        vec = b.ndim == a.ndim - 1
        x = np.linalg.solve(a, b[..., None] if vec else b)
        return self._out(x[..., 0] if vec else x, a)

    def vjp(self, attrs, xs, ys, dys):
        a, b = xs
        vec = b.ndim == a.ndim - 1
        g = dys[0][..., None] if vec else dys[0]
        x = ys[0][..., None] if vec else ys[0]
        gb = np.linalg.solve(_mT(a), g)
        ga = -gb @ _mT(x)
        return [ga, gb[..., 0] if vec else gb]


@register_numpy("_npi_cholesky")
class NpCholesky(_Linalg):
    """numpy.linalg.cholesky (lower factor; `lower`=False gives the upper one)."""
    params = {"lower": Param(Bool, True)}

    def forward(self, attrs, a):
        _square(self.name, a)
        lo = np.linalg.cholesky(a)
        return self._out(lo if attrs["lower"] else _mT(lo), a)

    def vjp(self, attrs, xs, ys, dys):
        lo = ys[0] if attrs["lower"] else _mT(ys[0])
        g = dys[0] if attrs["lower"] else _mT(dys[0])
        phi = np.tril(_mT(lo) @ g)
        n = lo.shape[-1]
        phi[..., range(n), range(n)] *= 0.5
        inv_lt = np.linalg.inv(_mT(lo))
        s = inv_lt @ phi @ _mT(inv_lt)
        return [0.5 * (s + _mT(s))]


@register_numpy("_npi_eigh")
class NpEigh(_Linalg):
    """numpy.linalg.eigh: (eigenvalues ascending, eigenvectors as columns) of the symmetric part
    named by UPLO."""
    n_outputs = 2
    params = {"UPLO": Param(Str, "L")}

    def forward(self, attrs, a):
        _square(self.name, a)
        w, v = np.linalg.eigh(a, attrs["UPLO"])
        return self._out(w, a), self._out(v, a)

    def vjp(self, attrs, xs, ys, dys):
        w, v = ys
        gw, gv = dys
        diff = w[..., None, :] - w[..., :, None]
        n = w.shape[-1]
        eye = np.eye(n, dtype=bool)
        f = np.where(eye, 0.0, 1.0 / np.where(eye, 1.0, diff))
        inner = np.zeros(v.shape, np.float64)
        inner[..., range(n), range(n)] = gw
        inner = inner + f * (_mT(v) @ gv)
        ga = v @ inner @ _mT(v)
        # the result reads only one triangle: fold the other triangle's share onto it
        ga = 0.5 * (ga + _mT(ga))
        if attrs["UPLO"] == "L":
            return [np.tril(ga) + np.tril(_mT(ga), -1)]
        return [np.triu(ga) + np.triu(_mT(ga), 1)]


@register_numpy("_npi_eigvalsh")
class NpEigvalsh(NpEigh):
    """numpy.linalg.eigvalsh."""
    n_outputs = 1

    def forward(self, attrs, a):
        _square(self.name, a)
        return self._out(np.linalg.eigvalsh(a, attrs["UPLO"]), a)

    def vjp(self, attrs, xs, ys, dys):
        w, v = np.linalg.eigh(xs[0], attrs["UPLO"])
        return NpEigh.vjp(self, attrs, xs, [w, v], [dys[0], np.zeros_like(v)])


class _Eig(_Linalg):
    no_gradient = True

    def _eig(self, a):
        _square(self.name, a)
        w, v = np.linalg.eig(a)
        if np.iscomplexobj(w) and np.any(np.abs(w.imag) > 0):
            raise MXNetError(f"{self.name}: the eigenvalues are complex (MXNet has no complex dtype)")
        return np.real(w), np.real(v)


@register_numpy("_npi_eig")
class NpEig(_Eig):
    """numpy.linalg.eig (real eigenvalues only)."""
    n_outputs = 2

    def forward(self, attrs, a):
        w, v = self._eig(a)
        return self._out(w, a), self._out(v, a)


@register_numpy("_npi_eigvals")
class NpEigvals(_Eig):
    """numpy.linalg.eigvals (real eigenvalues only)."""

    def forward(self, attrs, a):
        return self._out(self._eig(a)[0], a)


@register_numpy("_npi_svd")
class NpSvd(_Linalg):
    """numpy.linalg.svd as MXNet returns it: (ut, l, v) with a = ut @ diag(l) @ v (reduced)."""
    n_outputs = 3

    def forward(self, attrs, a):
        if a.ndim < 2:
            raise MXNetError(f"{self.name}: expected a (batch of) matrices, got shape {a.shape}")
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return self._out(u, a), self._out(s, a), self._out(vh, a)

    def vjp(self, attrs, xs, ys, dys):
        u, s, vh = ys
        gu, gs, gvh = dys
        v, gv = _mT(vh), _mT(gvh)
        k = s.shape[-1]
        eye = np.eye(k, dtype=bool)
        s2 = s[..., None, :] ** 2 - s[..., :, None] ** 2
        f = np.where(eye, 0.0, 1.0 / np.where(eye, 1.0, s2))
        sm = s[..., :, None] * np.eye(k)
        ut_gu = _mT(u) @ gu
        vt_gv = _mT(v) @ gv
        j = f * (ut_gu - _mT(ut_gu))
        kk = f * (vt_gv - _mT(vt_gv))
        inner = j @ sm + sm @ kk + gs[..., :, None] * np.eye(k)
        ga = u @ inner @ vh
        m, n = xs[0].shape[-2], xs[0].shape[-1]
        sinv = 1.0 / np.where(s == 0, 1, s)
        if m > k:
            ga = ga + (np.eye(m) - u @ _mT(u)) @ gu @ (sinv[..., :, None] * vh)
        if n > k:
            ga = ga + (u * sinv[..., None, :]) @ _mT(gv) @ (np.eye(n) - v @ vh)
        return [ga]


@register_numpy("_npi_pinv_scalar_rcond")
class NpPinv(_Linalg):
    """numpy.linalg.pinv with cut-off `rcond` (relative to the largest singular value)."""
    params = {"rcond": Param(Float, 1e-15), "hermitian": Param(Bool, False)}

    def forward(self, attrs, a):
        return self._out(np.linalg.pinv(a, attrs["rcond"], attrs["hermitian"]), a)

    def vjp(self, attrs, xs, ys, dys):
        a, p, g = xs[0], ys[0], dys[0]
        pt = _mT(p)
        m, n = a.shape[-2], a.shape[-1]
        term = -pt @ g @ pt
        term = term + (np.eye(m) - a @ p) @ _mT(g) @ p @ pt
        term = term + pt @ p @ _mT(g) @ (np.eye(n) - p @ a)
        return [term]


@register_numpy("_npi_pinv")
class NpPinvArray(NpPinv):
    """numpy.linalg.pinv with the cut-offs `rcond` given as an array (one per matrix)."""
    inputs = ("A", "rcond")
    params = {"hermitian": Param(Bool, False)}

    def forward(self, attrs, a, rcond):
        return self._out(np.linalg.pinv(a, rcond, attrs["hermitian"]), a)

    def vjp(self, attrs, xs, ys, dys):
        return NpPinv.vjp(self, attrs, xs[:1], ys, dys) + [None]


@register_numpy("_npi_tensorinv")
class NpTensorinv(_Linalg):
    """numpy.linalg.tensorinv: the inverse of a as a map from its first `ind` axes to the rest."""
    inputs = ("a",)
    params = {"ind": Param(Int, 2)}

    def forward(self, attrs, a):
        if attrs["ind"] <= 0:
            raise MXNetError(f"{self.name}: ind must be positive, got {attrs['ind']}")
        return self._out(np.linalg.tensorinv(a, attrs["ind"]), a)

    def vjp(self, attrs, xs, ys, dys):
        a, y, g = xs[0], ys[0], dys[0]
        n = int(np.prod(a.shape[:attrs["ind"]]))
        ym, gm = y.reshape(-1, n), g.reshape(-1, n)
        return [(-ym.T @ gm @ ym.T).reshape(a.shape)]


@register_numpy("_npi_tensorsolve")
class NpTensorsolve(_Linalg):
    """numpy.linalg.tensorsolve(a, b, a_axes): x with tensordot(a, x, x.ndim) = b."""
    inputs = ("a", "b")
    params = {"a_axes": Param(Axis, None)}

    def _perm(self, attrs, a):
        axes = attrs["a_axes"]
        if not axes:
            return list(range(a.ndim))
        axes = [x % a.ndim for x in ((axes,) if isinstance(axes, int) else axes)]
        return [d for d in range(a.ndim) if d not in axes] + axes

    def forward(self, attrs, a, b):
        return self._out(np.linalg.tensorsolve(np.transpose(a, self._perm(attrs, a)), b), a)

    def vjp(self, attrs, xs, ys, dys):
        a, b = xs
        perm = self._perm(attrs, a)
        at = np.transpose(a, perm)
        n = b.size
        am = at.reshape(n, n)
        gb = np.linalg.solve(am.T, dys[0].reshape(n))
        ga = -np.outer(gb, ys[0].reshape(n)).reshape(at.shape)
        return [np.transpose(ga, np.argsort(perm)), gb.reshape(b.shape)]
