"""`mx.sym.npx` (MXNet's `mxnet.symbol.numpy_extension`): the npx operators on symbols, as F.npx
in a `hybrid_forward` traced under `npx.set_np()`. Each builds the registered operator that
`mx.npx` runs on arrays (`numpy_extension.names.NPX_OPS`) and returns a `_Symbol`."""
from __future__ import annotations

from typing import Callable

from ..numpy_extension.names import NPX_OPS
from . import op_function
from .symbol import Symbol
from .numpy import _Symbol, _op, as_np

__all__ = sorted(NPX_OPS) + ["reshape", "nonzero", "constraint_check", "image", "random"]


def _npx_function(py_name: str, op_name: str) -> Callable:
    build = op_function(op_name, hint=py_name)

    def fn(*args, **kwargs) -> _Symbol:
        return as_np(build(*args, **kwargs))
    fn.__name__ = py_name
    fn.__qualname__ = py_name
    fn.__doc__ = build.__doc__
    return fn


def reshape(a, newshape, reverse=False, order="C", name=None) -> _Symbol:
    """npx.reshape on a symbol (npx's special codes -1 .. -6, see mx.npx.reshape)."""
    if isinstance(newshape, int):
        newshape = (newshape,)
    return _op("_npx_reshape", [a], {"newshape": tuple(newshape), "reverse": reverse, "order": order},
               hint="reshape", name=name)


def nonzero(a, name=None) -> _Symbol:
    """The indices of the non-zero entries of `a`, one row each (int64)."""
    return _op("_npx_nonzero", [a], hint="nonzero", name=name)


def constraint_check(x, msg="Constraint violated.", name=None) -> _Symbol:
    """True when every entry of the bool symbol `x` is true, else ValueError with `msg` at run time."""
    return _op("_npx_constraint_check", [x], {"msg": msg}, hint="constraint_check", name=name)


for _py, _op_name in NPX_OPS.items():
    globals()[_py] = _npx_function(_py, _op_name)


class _ImageNamespace:
    """`mx.sym.npx.image`: the `_image_*` operators on symbols (to_tensor, normalize, ...)."""
    __name__ = "symjit.symbol.numpy_extension.image"

    def __getattr__(self, name: str) -> Callable:
        from . import image as _sym_image
        build = getattr(_sym_image, name)

        def fn(*args, **kwargs) -> _Symbol:
            return as_np(build(*args, **kwargs))
        fn.__name__ = name
        return fn

    def __dir__(self):
        from . import image as _sym_image
        return dir(_sym_image)


image = _ImageNamespace()


class _RandomNamespace:
    """`mx.sym.npx.random`: bernoulli, normal_n and uniform_n on symbols, as the operators MXNet
    1.9.1 writes (`_npi_normal_n`, `_npi_uniform_n`, `_npi_bernoulli`). Parameters are numbers
    (attributes) or symbols (inputs); the draws have shape `batch_shape` + the parameters'
    broadcast shape (`size` for bernoulli)."""
    __name__ = "symjit.symbol.numpy_extension.random"

    @staticmethod
    def _shape(shape):
        if shape is None:
            return None
        return (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)

    def _sample_n(self, op_name: str, names: tuple, params: tuple, batch_shape, dtype) -> _Symbol:
        attrs = {"size": self._shape(batch_shape), "dtype": dtype or "float32"}
        inputs = []
        for name, p in zip(names, params):
            if isinstance(p, Symbol):
                inputs.append(p)
                attrs[name] = None
            else:
                attrs[name] = float(p)
        return _op(op_name, inputs, attrs, hint=op_name[len("_npi_"):])

    def uniform_n(self, low=0.0, high=1.0, batch_shape=None, dtype=None, ctx=None) -> _Symbol:
        """Uniform draws on [low, high)."""
        return self._sample_n("_npi_uniform_n", ("low", "high"), (low, high), batch_shape, dtype)

    def normal_n(self, loc=0.0, scale=1.0, batch_shape=None, dtype=None, ctx=None) -> _Symbol:
        """Normal draws with mean `loc` and standard deviation `scale`."""
        return self._sample_n("_npi_normal_n", ("loc", "scale"), (loc, scale), batch_shape, dtype)

    def bernoulli(self, prob=None, logit=None, size=None, dtype=None, ctx=None) -> _Symbol:
        """0/1 draws that are 1 with probability `prob` (or sigmoid(`logit`))."""
        if (prob is None) == (logit is None):
            raise ValueError("sym.npx.random.bernoulli: Either `prob` or `logit` must be specified, but not both.")
        is_logit = logit is not None
        value = logit if is_logit else prob
        attrs = {"prob": None, "logit": None, "is_logit": is_logit, "size": self._shape(size),
                 "dtype": dtype or "float32"}
        if isinstance(value, Symbol):
            return _op("_npi_bernoulli", [value], attrs, hint="bernoulli")
        attrs["logit" if is_logit else "prob"] = float(value)
        return _op("_npi_bernoulli", [], attrs, hint="bernoulli")

    @staticmethod
    def current_context():
        """The current default context (MXNet's module exposes it here too)."""
        from ..context import current_context
        return current_context()

    def __dir__(self):
        return ["bernoulli", "current_context", "normal_n", "uniform_n"]


random = _RandomNamespace()
