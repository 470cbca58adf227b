"""NDArray: MXNet 1.x dense arrays, executed eagerly on numpy through the op registry.

Invariants
  * `_data` is a numpy array owned by (or, for views, shared with) this NDArray; in-place
    writes (`x[:] = v`, `+=`, `out=`) modify that buffer and keep the Python object.
  * Every computation goes through `invoke`, which parses attributes with the op's
    schema, runs the op's reference implementation, writes `out=` if given, and records
    an autograd node when recording.
  * NDArrays are never 0-d (MXNet 1.x): scalar results have shape (1,).
"""
from __future__ import annotations

import ctypes
import numbers
import weakref
from typing import Any, Mapping, Sequence

import numpy as np

from .. import autograd as _autograd
from ..base import MXNetError, MXNetTypeError, MXNetValueError, canonical_dtype, mx_real_t, real_array
from ..context import Context, current_context
from ..ops.attrs import abbreviate
from ..ops.registry import ComputeContext, Emitter, get_op
from ..ops.optimizer_multi import MultiUpdate
from ..ops.optimizer_ops import Update
from .fastpath import try_compiled_elementwise, try_compiled_op
from .write_guard import writable

__all__ = ["NDArray", "invoke", "array", "empty", "zeros", "ones", "full", "arange", "linspace", "eye",
           "concatenate", "waitall", "from_numpy", "eager_emitter"]

#: Python's slice type under the name MXNet's ndarray module gives it (`slice` is an operator there).
py_slice = slice

#: Storage type names and MXNet's numeric ids for them.
#: arrays by the handle value `_as_parameter_` gave out (MXNet's NDArrayHandle), while alive
_HANDLES: "weakref.WeakValueDictionary[int, NDArray]" = weakref.WeakValueDictionary()


def _from_handle(handle: ctypes.c_void_p, writable: bool) -> tuple:
    """(numpy data, context) of the array behind `handle`; a read-only view unless `writable`."""
    src = _HANDLES.get(handle.value or 0)
    if src is None:
        raise MXNetError(f"NDArray: {handle!r} is not the handle of a live NDArray")
    data = src._data
    if not writable:
        data = data.view()
        data.flags.writeable = False
    return data, src._ctx


_STORAGE_TYPE_STR_TO_ID = {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}
_STORAGE_TYPE_ID_TO_STR = {v: k for k, v in _STORAGE_TYPE_STR_TO_ID.items()}


def _check_ctx(ctx: Context) -> Context:
    ctx = current_context() if ctx is None else Context(ctx) if isinstance(ctx, str) else ctx
    if not isinstance(ctx, Context):
        raise MXNetError(f"expected a Context such as mx.cpu(), got {ctx!r}")
    if ctx.device_type == "gpu":
        from ..context import num_gpus
        if num_gpus() == 0:
            raise MXNetError(f"GPU is not enabled: {ctx} needs CuPy and a CUDA device")
        raise MXNetError(f"eager NDArray storage on {ctx} is not available in this build; "
                         "compile the graph for the GPU target instead")
    return ctx


class NDArray:
    """An n-dimensional array on a device context, with MXNet 1.x semantics."""

    __slots__ = ("_data", "_ctx", "_grad", "_grad_req", "_ag", "_fresh_grad", "__weakref__")
    __array_priority__ = 1000.0
    #: sparse storage (ndarray.sparse's containers): `invoke` offers such inputs to sparse kernels
    _is_sparse = False

    def __array__(self, dtype=None, copy=None):
        """numpy's view of the values (numpy functions such as np.all accept NDArrays)."""
        return self.asnumpy() if dtype is None else self.asnumpy().astype(dtype)

    def __init__(self, data: np.ndarray, ctx: Context | None = None, writable: bool = True):
        if data.__class__ is ctypes.c_void_p:   # MXNet's NDArray(handle, writable=...)
            data, ctx = _from_handle(data, writable)
        self._data = data
        self._ctx = ctx if ctx is not None else current_context()
        self._grad = None
        self._grad_req = "null"
        self._ag = None  # autograd entry (symjit.autograd.Entry) when part of a recorded graph
        self._fresh_grad = False  # a backward wrote the gradient since it was last consumed

    # ---- attributes ---------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return tuple(self._data.shape)

    @property
    def size(self) -> int:
        return int(self._data.size)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def dtype(self) -> type:
        return self._data.dtype.type

    @property
    def context(self) -> Context:
        return self._ctx

    ctx = context

    @property
    def stype(self) -> str:
        return "default"

    @property
    def handle(self):
        return self._data

    @property
    def _as_parameter_(self) -> ctypes.c_void_p:
        """This array as an NDArrayHandle (ctypes converts an NDArray through it)."""
        _HANDLES[id(self)] = self
        return ctypes.c_void_p(id(self))

    @property
    def grad(self):
        return self._grad

    @property
    def T(self) -> "NDArray":
        if self.ndim > 2:
            raise MXNetError(f"T only supports arrays with at most 2 dimensions, got shape {self.shape}")
        return invoke("transpose", [self], {})

    # ---- conversion ---------------------------------------------------------------
    def asnumpy(self) -> np.ndarray:
        return np.array(self._data, copy=True)

    def asscalar(self):
        if self.size != 1:
            raise MXNetError(f"asscalar: the array must have exactly one element, got shape {self.shape}")
        return self._data.reshape(-1)[0]

    def astype(self, dtype, copy: bool = True) -> "NDArray":
        dt = canonical_dtype(dtype)
        if not copy and self._data.dtype == dt:
            return self
        return invoke("Cast", [self], {"dtype": np.dtype(dt).name})

    def copy(self) -> "NDArray":
        return self.copyto(self._ctx)

    def copyto(self, other):
        if isinstance(other, NDArray):
            if other is self:
                return self
            if other.shape != self.shape:
                raise MXNetError(f"copyto: shape mismatch: source {self.shape}, target {other.shape}")
            writable(other._data)[...] = self._data
            return other
        if isinstance(other, Context):
            return invoke("_copy", [self], {}, ctx=_check_ctx(other))
        raise MXNetError(f"copyto: expected an NDArray or a Context, got {type(other).__name__}")

    def as_in_context(self, ctx: Context) -> "NDArray":
        return self if ctx == self._ctx else self.copyto(ctx)

    def as_np_ndarray(self):
        """This array as an `mx.np.ndarray` sharing its memory, gradient and autograd entry."""
        if self._is_sparse:
            raise MXNetError(f"as_np_ndarray: {self.stype} storage has no mx.np form; use tostype('default')")
        from ..numpy.multiarray import _view, ndarray
        return _view(self, ndarray)

    def as_nd_ndarray(self) -> "NDArray":
        return self

    as_in_ctx = as_in_context

    def wait_to_read(self):
        """Eager execution completes every op before returning, so data is always ready."""

    def wait_to_write(self):
        """See `wait_to_read`."""

    def tostype(self, stype: str) -> "NDArray":
        """This array in storage `stype`; 'csr' / 'row_sparse' give `ndarray.sparse` containers."""
        if stype != "default":
            from .sparse import cast_storage
            return cast_storage(self, stype)
        return self

    def __repr__(self) -> str:
        shape_info = "x".join(str(d) for d in self.shape)
        return f"\n{self._data}\n<{type(self).__name__} {shape_info} @{self._ctx}>"

    __str__ = __repr__

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self):
        for i in range(self.shape[0]):
            yield self[i]

    def __bool__(self) -> bool:
        if self.size == 1:
            return bool(self._data.reshape(-1)[0])
        if self.size == 0:
            return False
        raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")

    __hash__ = object.__hash__

    def __reduce__(self):
        return (_rebuild, (self.asnumpy(), str(self._ctx)))

    def to_dlpack_for_read(self):
        """A DLPack capsule over this array's memory (for reading; the capsule keeps it alive)."""
        return self._data.__dlpack__()

    def to_dlpack_for_write(self):
        """A DLPack capsule over this array's memory (writes through it change this array)."""
        return self._data.__dlpack__()

    def __getstate__(self) -> dict:
        """MXNet's state: {'handle': the array in the NDArray file layout}."""
        from .serialization import array_to_bytes
        return {"handle": bytearray(array_to_bytes(self))}

    def __setstate__(self, state) -> None:
        """Restore from `__getstate__`'s dict (also MXNet's, GPU-saved arrays load on the CPU)."""
        from .serialization import array_from_bytes
        handle = state.get("handle") if isinstance(state, dict) else None
        if handle is None:
            raise MXNetError("NDArray.__setstate__: expected a dict with a 'handle' entry")
        loaded = array_from_bytes(handle)
        self.__init__(loaded._data, loaded.context)

    # ---- autograd -------------------------------------------------------------------
    def attach_grad(self, grad_req: str = "write", stype=None) -> None:
        """Allocate a gradient buffer of storage `stype` (default: dense) and mark this array as
        a variable for autograd."""
        from .sparse import _attach_grad
        _attach_grad(self, grad_req, stype if stype is not None else "default")

    def detach(self) -> "NDArray":
        out = NDArray(self._data, self._ctx)
        return out

    def backward(self, out_grad=None, retain_graph: bool = False, train_mode: bool = True) -> None:
        from .. import autograd
        autograd.backward([self], None if out_grad is None else [out_grad], retain_graph, train_mode)

    # ---- shape views ------------------------------------------------------------------
    def reshape(self, *shape, **kwargs) -> "NDArray":
        """Reshape with MXNet's special codes (0, -1, -2, -3, -4); shares memory unless recording."""
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        if "shape" in kwargs:
            shape = kwargs.pop("shape")
        attrs = {"shape": tuple(shape), "reverse": kwargs.pop("reverse", False)}
        if kwargs:
            raise MXNetError(f"reshape: unexpected arguments {sorted(kwargs)}")
        return self._shape_view("Reshape", attrs)

    def _shape_view(self, op_name: str, attrs: dict) -> "NDArray":
        """The result of shape-only op `op_name` as a view sharing this array's memory (through
        the op itself while autograd records, so gradients flow)."""
        from .. import autograd
        if autograd.is_recording() and self._ag is not None:
            return invoke(op_name, [self], attrs)
        op = get_op(op_name)
        _, (new_shape,) = op.infer_shape(op.parse(attrs), [self.shape])
        return NDArray(self._data.reshape(new_shape), self._ctx)

    @staticmethod
    def _basic_indexing_slice_is_contiguous(slc_key, shape) -> bool:
        """Whether basic indexing of a C-contiguous array of `shape` by the tuple of slices
        `slc_key` gives a C-contiguous view (decided from the view's strides, without data)."""
        dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape=tuple(shape),
                                                strides=tuple(np.cumprod((1,) + tuple(shape[:0:-1]))[::-1]),
                                                writeable=False)
        return bool(dummy[tuple(slc_key)].flags.c_contiguous)

    def split_v2(self, indices_or_sections, axis=0, squeeze_axis=False):
        """`nd.split_v2(self, ...)`."""
        from . import split_v2
        return split_v2(self, indices_or_sections, axis, squeeze_axis)

    def flatten(self, inplace: bool = False) -> "NDArray":
        """Collapse every axis after the first; inplace=True returns a view sharing memory."""
        return self._shape_view("Flatten", {}) if inplace else invoke("Flatten", [self], {})

    def squeeze(self, axis=None, inplace: bool = False) -> "NDArray":
        """Remove size-1 axes (all, or `axis`); inplace=True returns a view sharing memory."""
        attrs = {"axis": axis}
        return self._shape_view("squeeze", attrs) if inplace else invoke("squeeze", [self], attrs)

    def expand_dims(self, axis, inplace: bool = False) -> "NDArray":
        """Insert a size-1 axis at `axis`; inplace=True returns a view sharing memory."""
        attrs = {"axis": axis}
        return self._shape_view("expand_dims", attrs) if inplace else invoke("expand_dims", [self], attrs)

    # ---- indexing -----------------------------------------------------------------------
    def __getitem__(self, key) -> "NDArray":
        from .indexing import getitem
        return getitem(self, key)

    def __setitem__(self, key, value) -> None:
        from .indexing import setitem
        setitem(self, key, value)

    # ---- arithmetic -----------------------------------------------------------------------
    def __add__(self, o): return _binary(self, o, "broadcast_add", "_plus_scalar")
    def __radd__(self, o): return _binary(self, o, "broadcast_add", "_plus_scalar")
    def __sub__(self, o): return _binary(self, o, "broadcast_sub", "_minus_scalar")
    def __rsub__(self, o): return _binary(self, o, "broadcast_sub", "_rminus_scalar", reverse=True)
    def __mul__(self, o): return _binary(self, o, "broadcast_mul", "_mul_scalar")
    def __rmul__(self, o): return _binary(self, o, "broadcast_mul", "_mul_scalar")
    def __truediv__(self, o): return _binary(self, o, "broadcast_div", "_div_scalar")
    def __rtruediv__(self, o): return _binary(self, o, "broadcast_div", "_rdiv_scalar", reverse=True)
    def __mod__(self, o): return _binary(self, o, "broadcast_mod", "_mod_scalar")
    def __rmod__(self, o): return _binary(self, o, "broadcast_mod", "_rmod_scalar", reverse=True)
    def __pow__(self, o): return _binary(self, o, "broadcast_power", "_power_scalar")
    def __rpow__(self, o): return _binary(self, o, "broadcast_power", "_rpower_scalar", reverse=True)
    def __neg__(self): return invoke("_mul_scalar", [self], {"scalar": -1.0})
    def __abs__(self): return invoke("abs", [self], {})
    def __eq__(self, o): return _binary(self, o, "broadcast_equal", "_equal_scalar")
    def __ne__(self, o): return _binary(self, o, "broadcast_not_equal", "_not_equal_scalar")
    def __gt__(self, o): return _binary(self, o, "broadcast_greater", "_greater_scalar")
    def __ge__(self, o): return _binary(self, o, "broadcast_greater_equal", "_greater_equal_scalar")
    def __lt__(self, o): return _binary(self, o, "broadcast_lesser", "_lesser_scalar")
    def __le__(self, o): return _binary(self, o, "broadcast_lesser_equal", "_lesser_equal_scalar")
    __div__ = __truediv__
    __rdiv__ = __rtruediv__

    def __iadd__(self, o): return _binary(self, o, "broadcast_add", "_plus_scalar", out=self)
    def __isub__(self, o): return _binary(self, o, "broadcast_sub", "_minus_scalar", out=self)
    def __imul__(self, o): return _binary(self, o, "broadcast_mul", "_mul_scalar", out=self)
    def __itruediv__(self, o): return _binary(self, o, "broadcast_div", "_div_scalar", out=self)
    def __imod__(self, o): return _binary(self, o, "broadcast_mod", "_mod_scalar", out=self)
    __idiv__ = __itruediv__

    # ---- fluent methods: x.sum(axis=1) == nd.sum(x, axis=1) ---------------------------------
    def __getattr__(self, name: str):
        if name.startswith("_") or name not in FLUENT_METHODS:
            raise AttributeError(f"'NDArray' object has no attribute {name!r}")
        op_name = FLUENT_METHODS[name]

        def method(*args, **kwargs):
            fn = _FLUENT_FUNCTIONS.get(op_name)
            if fn is None:
                from . import _op_function
                fn = _FLUENT_FUNCTIONS[op_name] = _op_function(op_name)
            return fn(self, *args, **kwargs)
        method.__name__ = name
        return method

    def zeros_like(self):
        return _filled(self.shape, 0, self._ctx, self._data.dtype, None)

    def ones_like(self):
        return _filled(self.shape, 1, self._ctx, self._data.dtype, None)


#: op name -> its `nd.<op>` function, built on first use by a fluent method
_FLUENT_FUNCTIONS: dict = {}

#: NDArray methods that apply an op to `self` (MXNet's fluent interface)
FLUENT_METHODS = {n: n for n in (
    "abs", "sign", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "square", "cbrt",
    "rcbrt", "reciprocal", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
    "arcsinh", "arccosh", "arctanh", "degrees", "radians", "floor", "ceil", "round", "rint", "trunc",
    "fix", "relu", "sigmoid", "softsign", "clip", "sum", "mean", "prod", "max", "min", "nansum",
    "nanprod", "argmax", "argmin", "norm", "transpose", "expand_dims", "squeeze", "flip", "tile",
    "repeat", "pad", "split", "slice", "slice_axis", "slice_like", "take", "pick", "one_hot",
    "broadcast_to", "broadcast_like", "softmax", "log_softmax", "topk", "sort", "argsort", "flatten",
    "diag", "swapaxes", "depth_to_space", "space_to_depth", "zeros_like", "ones_like", "argmax_channel",
    "shape_array", "size_array", "erf", "gamma", "gammaln", "negative", "broadcast_axes", "reshape_like")}
FLUENT_METHODS.update({"flatten": "Flatten", "swapaxes": "SwapAxis", "split": "SliceChannel",
                       "softmin": "softmin"})


def _rebuild(data, ctx):
    return NDArray(data, Context(ctx.split("(")[0], int(ctx.split("(")[1][:-1])))


def _is_scalar(x) -> bool:
    return isinstance(x, numbers.Number) or (isinstance(x, np.generic) and x.size == 1)


def _binary(lhs: NDArray, rhs, array_op: str, scalar_op: str, reverse: bool = False, out=None):
    if isinstance(rhs, NDArray):
        args = [rhs, lhs] if reverse else [lhs, rhs]
        return invoke(array_op, args, {}, out=out)
    if _is_scalar(rhs):
        if isinstance(rhs, complex) or np.iscomplexobj(rhs):
            raise MXNetError(f"{scalar_op}: complex scalar {rhs!r} is not supported (MXNet has no complex dtype)")
        return invoke(scalar_op, [lhs], {"scalar": float(rhs), "is_int": isinstance(rhs, numbers.Integral)},
                      out=out)
    if isinstance(rhs, np.ndarray):
        return _binary(lhs, array(rhs, lhs.context, rhs.dtype), array_op, scalar_op, reverse, out)
    raise TypeError(f"type {type(rhs).__name__} not supported for NDArray arithmetic")


# --------------------------------------------------------------------------------------------
# Invocation: the one path from the frontend into the op registry
# --------------------------------------------------------------------------------------------

#: observer of eager op calls (`set_op_observer`); None (the default) costs one test per op
_op_observer = None


def set_op_observer(observer):
    """Around every eager op `invoke` runs, call `token = observer.enter()` before it and
    `observer.leave(op_name, token)` after it, also when it raises (what `symjit.profiler`
    records); None removes it. Returns the previous observer. The optimizers' fused update
    kernels (`fastpath.run_updates`) report one call per kernel group the same way."""
    global _op_observer
    from . import fastpath
    previous, _op_observer = _op_observer, observer
    fastpath._op_observer = observer      # the optimizers' fused update kernels
    return previous


def invoke(op_name: str, inputs: Sequence[NDArray], attrs: Mapping[str, Any], out=None,
           ctx: Context | None = None, all_outputs: bool = False):
    """Apply a registered op eagerly.

    Returns one NDArray for single-output ops and a list otherwise (all outputs with
    `all_outputs`). With `out=` the results are written into the given arrays (same
    objects returned). Records an autograd node when recording and an input needs
    gradients. Aux-state inputs of ops that update them in training are updated in place.
    """
    observer = _op_observer
    if observer is not None:
        token = observer.enter()
    try:
        op = get_op(op_name)
        parsed = op.parse(attrs)
        names = op.input_names(parsed)
        if len(inputs) != len(names):
            raise MXNetError(f"{op.name}: expected {len(names)} inputs {names}, got {len(inputs)}")
        for name, x in zip(names, inputs):
            if not isinstance(x, NDArray):
                raise MXNetError(f"{op.name}: input {name!r} must be an NDArray, got {type(x).__name__}")
        if inputs:
            dev = inputs[0]._ctx
            for name, x in zip(names, inputs):
                if x._ctx != dev:
                    raise MXNetError(f"{op.name}: input {name!r} is on {x._ctx} but {names[0]!r} is on {dev}; "
                                     "all inputs must be on the same context")
            ctx = ctx or dev
        ctx = _check_ctx(ctx)
        if op.name in _SPARSE_RESULT_OPS or any(x._is_sparse for x in inputs):
            from .sparse_ops import deliver, run_sparse
            sparse_outputs = run_sparse(op, parsed, inputs, out)
            if sparse_outputs is not None:
                return _finish(op, parsed, inputs, deliver(sparse_outputs, out), all_outputs)
        cctx = ComputeContext(is_train=_autograd.is_training())
        arrays = [x._data for x in inputs]
        results = try_compiled_elementwise(op, parsed, arrays, _update_destinations(op, parsed, names, inputs, out))
        if results is None:
            results = try_compiled_op(op, parsed, arrays, cctx.is_train)
        if results is None:
            try:
                results = op.compute(parsed, arrays, cctx)
            except MXNetError:
                raise
            except (ArithmeticError, LookupError, ValueError, TypeError, MemoryError) as e:
                shapes = ", ".join(f"{n}: {a.shape}" for n, a in zip(names, arrays))
                raise MXNetError(f"{op.name}: invalid inputs {{{shapes}}} for attributes "
                                 f"{abbreviate(dict(attrs), 200)}: {type(e).__name__}: {e}") from None
        n_out = op.num_outputs(parsed)
        if len(results) > n_out:  # new values of mutated inputs (aux states, optimizer states)
            targets = [names.index(a) for a in op.state_targets(parsed) if a in names]
            for i, new in zip(targets, results[n_out:]):
                if new is not inputs[i]._data:
                    writable(inputs[i]._data)[...] = new
            results = results[:n_out]
        return _finish(op, parsed, inputs, _wrap_outputs(op.name, results, ctx, out), all_outputs)
    finally:
        if observer is not None:
            observer.leave(op_name, token)


#: ops whose sparse kernel may give a sparse result from dense inputs (`sparse_ops`)
_SPARSE_RESULT_OPS = frozenset({"_backward_Embedding"})


def _finish(op, parsed, inputs, outputs: list, all_outputs: bool):
    """`invoke`'s result: the outputs recorded for autograd when recording, the visible ones."""
    if _autograd.is_recording():
        _autograd.record_op(op, parsed, list(inputs), outputs)
    if all_outputs:
        return outputs
    nvis = op.num_visible_outputs(parsed)
    return outputs[0] if nvis == 1 else outputs[:nvis]


def _update_destinations(op, attrs, names, inputs, out) -> list | None:
    """For an optimizer update written with `out=weight`: the buffers its results end in (the
    weight, then the mutated states), so a compiled kernel can write them in place (kernels
    compute every output of an element before storing any). None otherwise."""
    if out is None or not isinstance(op, (Update, MultiUpdate)) or _autograd.is_recording():
        return None
    outs = [out] if isinstance(out, NDArray) else list(out)
    if isinstance(op, MultiUpdate):   # in place when out= are the weights (the states are inputs)
        if not all(isinstance(o, NDArray) for o in outs):
            return None
        pos = {n: i for i, n in enumerate(names)}
        for target in op.state_targets(attrs):
            writable(inputs[pos[target]]._data)
        return [writable(o._data) for o in outs]
    if len(outs) != 1 or not isinstance(outs[0], NDArray):
        return None
    states = [inputs[names.index(a)] for a in op.state_targets(attrs) if a in names]
    return [writable(outs[0]._data)] + [writable(t._data) for t in states]


def _wrap_outputs(op_name: str, results: list, ctx: Context, out) -> list:
    if out is None:
        return [NDArray(np.asarray(r), ctx) for r in results]
    outs = [out] if isinstance(out, NDArray) else list(out)
    if len(outs) > len(results):
        raise MXNetError(f"{op_name}: got {len(outs)} out= arrays for {len(results)} outputs")
    wrapped = []
    for i, r in enumerate(results):
        if i < len(outs):
            o = outs[i]
            if not isinstance(o, NDArray):
                raise MXNetError(f"{op_name}: out= must be NDArray, got {type(o).__name__}")
            if o.shape != tuple(r.shape):
                raise MXNetError(f"{op_name}: out= has shape {o.shape}, expected {tuple(r.shape)}")
            from .. import autograd
            if autograd.is_recording() and o._ag is not None:
                raise MXNetError(f"{op_name}: in-place writes to an array that is part of a recorded "
                                 "graph are not supported while recording")
            if r is not o._data:
                writable(o._data)[...] = r
            wrapped.append(o)
        else:
            wrapped.append(NDArray(np.asarray(r), ctx))
    return wrapped


def eager_emitter() -> Emitter:
    """Emitter over NDArrays (used by autograd to run gradient rules eagerly)."""
    return Emitter(lambda name, ins, attrs: invoke(name, ins, attrs, all_outputs=True))


# --------------------------------------------------------------------------------------------
# Creation
# --------------------------------------------------------------------------------------------

def from_numpy(a: np.ndarray, zero_copy: bool = True, ctx: Context | None = None) -> NDArray:
    """An NDArray over numpy array `a`. zero_copy (MXNet's default): the NDArray uses a's memory
    and `a` becomes read-only (writes go through the NDArray); `a` must be C-contiguous
    (ValueError otherwise). zero_copy=False copies."""
    if not isinstance(a, np.ndarray):
        raise MXNetTypeError(f"from_numpy: expected a numpy.ndarray, got {type(a).__name__}")
    if not zero_copy:
        return NDArray(np.array(a, copy=True, order="C"), _check_ctx(ctx))
    if not a.flags["C_CONTIGUOUS"]:
        raise MXNetValueError("from_numpy: zero_copy needs a C-contiguous numpy array; "
                              "use np.ascontiguousarray or zero_copy=False")
    # our own writable array over a's memory (through a buffer, so a's read-only flag set
    # next does not reach it)
    if not a.flags.writeable:   # e.g. already given to from_numpy: its memory is still ours
        try:
            a.flags.writeable = True
        except ValueError:
            raise MXNetValueError("from_numpy: zero_copy needs a numpy array whose memory can be "
                                  "written (this one is a read-only view); use zero_copy=False") from None
    data = np.ndarray(a.shape, a.dtype, buffer=a.data) if a.size else np.empty(a.shape, a.dtype)
    a.flags.writeable = False
    return NDArray(data, _check_ctx(ctx))


class _DLPackCapsule:
    """A producer object around a raw DLPack capsule (numpy's from_dlpack takes producers)."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, *args, **kwargs):
        if kwargs.get("max_version") is not None or args:
            raise TypeError("a legacy (unversioned) DLPack capsule")   # numpy then asks plainly
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)   # kDLCPU


def from_dlpack(dlpack) -> NDArray:
    """An NDArray with the values of a DLPack capsule (MXNet's to_dlpack_for_* output, or any
    CPU producer's) or of an object with `__dlpack__`. The memory is shared when numpy imports
    it writable; a tensor numpy marks read-only (legacy capsules) is copied, since NDArrays are
    writable."""
    producer = dlpack if hasattr(dlpack, "__dlpack__") else _DLPackCapsule(dlpack)
    try:
        data = np.from_dlpack(producer)
    except (TypeError, ValueError, BufferError, RuntimeError) as e:
        raise MXNetError(f"from_dlpack: cannot import the tensor: {e}") from None
    if not data.flags.writeable:
        data = np.array(data, copy=True, order="C")
    return NDArray(data, current_context())


def to_dlpack_for_read(data: NDArray):
    """`data.to_dlpack_for_read()`."""
    return data.to_dlpack_for_read()


def to_dlpack_for_write(data: NDArray):
    """`data.to_dlpack_for_write()`."""
    return data.to_dlpack_for_write()


def array(source_array, ctx: Context | None = None, dtype=None) -> NDArray:
    """An NDArray copied from an NDArray, numpy array or nested list; default dtype float32
    (an NDArray source keeps its dtype)."""
    ctx = _check_ctx(ctx)
    if isinstance(source_array, NDArray):
        dt = source_array._data.dtype if dtype is None else canonical_dtype(dtype)
        data = source_array._data
    else:
        dt = mx_real_t if dtype is None else canonical_dtype(dtype)
        try:
            data = real_array(source_array, "array")
        except (ValueError, TypeError) as e:
            raise MXNetError(f"array: cannot convert {type(source_array).__name__} to an array: {e}") from None
        if data.dtype == object:
            raise MXNetError("array: cannot convert a ragged or non-numeric sequence to an array")
    return NDArray(np.array(data, dtype=dt, copy=True, order="C"), ctx)   # 0-d stays 0-d


def _shape(shape) -> tuple:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        out = tuple(int(d) for d in shape)
    except TypeError:
        raise MXNetError(f"invalid shape {shape!r}") from None
    if any(d < 0 for d in out):
        raise MXNetError(f"invalid shape {shape!r}: dimensions must be >= 0")
    return out


def empty(shape, ctx: Context | None = None, dtype=None, stype=None) -> NDArray:
    return NDArray(np.empty(_shape(shape), dtype=canonical_dtype(dtype)), _check_ctx(ctx))


def _known_shape(op: str, shape) -> tuple:
    """`shape` checked as MXNet's creation operators check it: outside NumPy shape semantics
    (`mx.np_shape()`) a 0 dim or the empty shape means "unknown", which no creation can fill."""
    from ..util import is_np_shape
    shape = _shape(shape)
    if not is_np_shape() and (not shape or 0 in shape):
        raise MXNetError(f"{op}: shape {shape} is not fully known (outside mx.np_shape() semantics a 0 "
                         "dim or the empty shape means unknown)")
    return shape


def _filled(shape, value, ctx, dtype, out) -> NDArray:
    """An array of `shape` filled with `value`, or `out` filled with it (shapes must agree)."""
    if out is not None:
        if tuple(out.shape) != _shape(shape):
            raise MXNetValueError(f"out= has shape {tuple(out.shape)}, expected {_shape(shape)}")
        writable(out._data)[...] = value
        return out
    return NDArray(np.full(_shape(shape), value, dtype=canonical_dtype(dtype)), _check_ctx(ctx))


def zeros(shape, ctx: Context | None = None, dtype=None, stype=None, out=None, **kwargs) -> NDArray:
    """All zeros; `stype='csr'` / `'row_sparse'` give the sparse containers of `ndarray.sparse`."""
    if stype not in (None, "default"):
        from .sparse import zeros as sparse_zeros
        return sparse_zeros(stype, shape, ctx, dtype)
    shape = _known_shape("zeros", shape)
    if out is None:   # calloc'd: large zero arrays take no page until written (unused gradients)
        return NDArray(np.zeros(shape, dtype=canonical_dtype(dtype)), _check_ctx(ctx))
    return _filled(shape, 0, ctx, dtype, out)


def ones(shape, ctx: Context | None = None, dtype=None, out=None, **kwargs) -> NDArray:
    return _filled(_known_shape("ones", shape), 1, ctx, dtype, out)


def full(shape, val, ctx: Context | None = None, dtype=None, out=None) -> NDArray:
    return _filled(_known_shape("full", shape), val, ctx, dtype, out)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=None, ctx=None, dtype=None) -> NDArray:
    from ..ops.init_ops import arange_length, arange_values
    n = arange_length("arange", start, stop, step)
    first = 0 if stop is None else start
    return NDArray(arange_values(first, step, n, int(repeat), canonical_dtype(dtype)), _check_ctx(ctx))


def linspace(start, stop, num, endpoint=True, ctx=None, dtype=None) -> NDArray:
    data = np.linspace(start, stop, int(num), endpoint=endpoint)
    return NDArray(data.astype(canonical_dtype(dtype)), _check_ctx(ctx))


def eye(N, M=0, k=0, ctx=None, dtype=None) -> NDArray:
    return NDArray(np.eye(int(N), int(M) or None, int(k), dtype=canonical_dtype(dtype)), _check_ctx(ctx))


def concatenate(arrays: Sequence[NDArray], axis: int = 0, always_copy: bool = True) -> NDArray:
    return invoke("Concat", list(arrays), {"dim": axis, "num_args": len(arrays)})


def waitall() -> None:
    """Wait for all pending computation; eager execution has none pending."""
