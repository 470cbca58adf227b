"""NumPy-semantics linear algebra (`mx.np.linalg`): `_npi_norm`, `_npi_inv`, `_npi_det`,
`_npi_slogdet`, `_npi_solve`, `_npi_cholesky`, `_npi_eigh`, `_npi_eigvalsh`, `_npi_eig`,
`_npi_eigvals`, `_npi_svd`, `_npi_pinv`. Batched over leading axes as numpy; gradients by the
standard matrix-calculus identities (eig/eigvals, which may be complex, have none)."""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Float, Param, Str
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


@register_numpy("_npi_norm")
class NpNorm(_Linalg):
    """numpy.linalg.norm: vector norms (ord None/2, 1, inf, -inf, 0, p) over one axis, matrix norms
    ('fro', 'nuc', 1, -1, 2, -2, inf, -inf) over two."""
    inputs = ("x",)
    params = {"ord": Param(Literal, None), "axis": Param(Axis, None), "keepdims": Param(Bool, False),
              "flag": Param(Literal, -1)}

    def forward(self, attrs, x):
        ord_ = attrs["ord"]
        if isinstance(ord_, str) and ord_ not in ("fro", "nuc", "inf", "-inf"):
            raise MXNetError(f"{self.name}: invalid norm order {ord_!r}")
        ord_ = {"inf": np.inf, "-inf": -np.inf}.get(ord_, ord_) if isinstance(ord_, str) else ord_
        axis = attrs["axis"]
        if axis is None and ord_ is None:
            y = np.sqrt(np.sum(np.square(x.astype(np.float64 if x.dtype == np.float64 else np.float32))))
            if attrs["keepdims"]:
                y = np.reshape(y, (1,) * x.ndim)
            return self._out(y, x)
        if axis is None and x.ndim > 2:
            raise MXNetError(f"{self.name}: improper number of dimensions to norm ({x.ndim}) without axis")
        try:
            return self._out(np.linalg.norm(x, ord_, axis, attrs["keepdims"]), x)
        except ValueError as e:
            raise MXNetError(f"{self.name}: {e}") from None

    def vjp(self, attrs, xs, ys, dys):
        x, y, g = xs[0], ys[0], dys[0]
        ord_ = attrs["ord"]
        axis = attrs["axis"]
        axes = reduce_axes(self.name, axis, x.ndim)
        vector = axis is None and ord_ is None or isinstance(axis, int) or (
            isinstance(axis, tuple) and len(axis) == 1) or (axis is None and x.ndim == 1)
        gb = expand_reduced(g, axes, x.shape, attrs["keepdims"])
        yb = expand_reduced(y, axes, x.shape, attrs["keepdims"])
        if ord_ in (None, "fro", 2) and (vector or ord_ in (None, "fro")):
            return [gb * x / np.where(yb == 0, 1, yb)]
        if vector and ord_ == 1:
            return [gb * np.sign(x)]
        if vector and ord_ in (np.inf, "inf", -np.inf, "-inf"):
            mask = np.abs(x) == yb
            return [gb * np.sign(x) * mask / np.maximum(mask.sum(axis=axes, keepdims=True), 1)]
        if vector and isinstance(ord_, (int, float)) and ord_ not in (0,):
            p = float(ord_)
            return [gb * np.sign(x) * np.abs(x) ** (p - 1) / np.where(yb == 0, 1, yb) ** (p - 1)]
        raise MXNetError(f"{self.name}: gradient of the norm with ord={ord_!r} over axis {axis} is not supported")


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


@register_numpy("_npi_pinv")
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
