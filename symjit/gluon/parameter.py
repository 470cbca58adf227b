"""Gluon parameters: `Parameter`, `Constant` and `ParameterDict` with MXNet 1.x semantics.

A Parameter owns one copy of its value per context (`list_data()`), and, unless its grad_req
is 'null', one gradient buffer per context, marked as autograd variables so that
`loss.backward()` writes them. A shape with 0 dims (unknown) defers initialization: the
initializer and contexts are remembered and applied once a Block's first forward has inferred
the full shape through the ops' `infer_shape` rules (`_finish_deferred_init`).

Initialization follows MXNet: the parameter's own `init` if it has one, else the initializer
given to `initialize`; the value is drawn once on cpu and copied to every context, so all
replicas start identical. Errors are MXNetError (a RuntimeError) with MXNet's messages, e.g.
"Parameter 'weight' was not initialized on context gpu(0). It was only initialized on [cpu(0)]."
"""
from __future__ import annotations

import itertools
import re
import warnings
from collections import OrderedDict

import numpy as np

from .. import autograd, initializer
from ..base import MXNetError, MXNetTypeError, mx_real_t
from ..context import Context, cpu, current_context
from .. import ndarray as nd
from ..ndarray import NDArray
from ..ndarray.sparse import BaseSparseNDArray
from ..ndarray.write_guard import writable
from ..util import is_np_array, is_np_shape

__all__ = ["Parameter", "Constant", "ParameterDict", "DeferredInitializationError",
           "tensor_types", "shape_is_known"]

tensor_types = (NDArray,)

#: Source of Parameter generations (`next()` is atomic under the GIL).
_GENERATIONS = itertools.count(1)


class DeferredInitializationError(MXNetError):
    """A Parameter's value was requested before its deferred initialization finished."""


class ParameterValueError(MXNetError, ValueError):
    """Invalid argument to a Parameter method (MXNet raises ValueError here)."""


class ParameterRuntimeError(MXNetError, RuntimeError):
    """An operation not allowed in the Parameter's state (MXNet raises RuntimeError here)."""


class ParameterAssertionError(MXNetError, AssertionError):
    """A consistency check failed (MXNet asserts here, raising AssertionError)."""


def shape_is_known(shape) -> bool:
    """True when `shape` is given and has no unknown (0 or -1) dims (MXNet 1.x semantics)."""
    if shape is None:
        return False
    return all(int(d) > 0 for d in shape)


def _brief_print_list(lst, limit=7) -> str:
    """MXNet's abbreviated list printing for error messages."""
    lst = list(lst)
    if len(lst) > limit:
        return _brief_print_list(lst[:limit // 2], limit) + ", ..., " + \
            _brief_print_list(lst[-limit // 2:], limit)
    return ", ".join(["'%s'" % str(i) for i in lst])


def _indent(s_: str, num_spaces: int) -> str:
    """Indent every line but the first (MXNet's helper for nested reprs)."""
    lines = s_.split("\n")
    if len(lines) == 1:
        return s_
    first = lines.pop(0)
    return first + "\n" + "\n".join((num_spaces * " ") + line for line in lines)


def _as_ctx_list(ctx) -> list:
    if ctx is None:
        return [current_context()]
    if isinstance(ctx, Context):
        return [ctx]
    if isinstance(ctx, str):
        return [Context(ctx)]
    out = list(ctx)
    for c in out:
        if not isinstance(c, Context):
            raise ParameterValueError(f"expected a Context or a list of Contexts, got {c!r}")
    return out


class Parameter:
    """A trainable value of a Block (weight, bias, running statistics, ...).

    `shape` may contain 0 for dims to be inferred; `init` overrides the initializer given to
    `initialize`; `grad_req` is 'write', 'add' or 'null' (forced to 'null' when not
    `differentiable`); lr_mult / wd_mult scale the optimizer's learning rate / weight decay.
    """

    def __init__(self, name, grad_req="write", shape=None, dtype=mx_real_t, lr_mult=1.0, wd_mult=1.0,
                 init=None, allow_deferred_init=False, differentiable=True, stype="default",
                 grad_stype="default"):
        self._var = None
        self._data = None
        self._grad = None
        self._ctx_list = None
        self._ctx_map = None
        self._trainer = None
        self._deferred_init = ()
        self._differentiable = differentiable
        self._allow_deferred_init = allow_deferred_init
        self._grad_req = None
        if isinstance(shape, int):
            shape = (shape,)
        self._shape = None if shape is None else tuple(shape)
        self.name = name
        self._dtype = dtype
        self.lr_mult = lr_mult
        self.wd_mult = wd_mult
        self.grad_req = grad_req
        self.init = init
        for what, st in (("stype", stype), ("grad_stype", grad_stype)):
            if st not in ("default", "row_sparse", "csr"):
                raise ParameterAssertionError(f"{what} for Parameter '{name}' must be one of 'default', "
                                          f"'row_sparse' or 'csr', but got '{st}'")
        self._stype = stype
        self._grad_stype = grad_stype

    def __repr__(self):
        return f"Parameter {self.name} (shape={self.shape}, dtype={self.dtype})"

    #: Changes (to a value never used before) whenever ANY Parameter's list of value arrays is
    #: replaced: initialize, force_reinit, deferred init finishing, cast, reset_ctx, loading into
    #: an uninitialized Parameter, grad_req set to 'null'. Values overwritten in place (set_data,
    #: load into an initialized Parameter, optimizer updates) keep their arrays and do not change
    #: it: each NDArray's buffer is fixed for its lifetime, so code reading it by pointer sees them.
    #: Caches of gathered parameter arrays (hybridized blocks' inference fast path) are valid
    #: exactly while this equals the value read when they were built.
    _generation = 0

    @property
    def _data(self):
        """The value on each context (a list of NDArrays, in `_ctx_list` order), or None."""
        return self._data_list

    @_data.setter
    def _data(self, value):
        self._data_list = value
        Parameter._generation = next(_GENERATIONS)

    # ---- attributes ------------------------------------------------------------------------
    @property
    def grad_req(self):
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req):
        if req not in ("write", "add", "null"):
            raise ParameterAssertionError(
                f"grad_req must be one of 'write', 'add', or 'null', but got '{req}'")
        if not self._differentiable:
            req = "null"
        if self._grad_req == req:
            return
        self._grad_req = req
        if req == "null" and self._grad is not None:
            self._grad = None
            self._data = [i.detach() for i in self._data]
        elif self._data is not None:
            self._init_grad()

    @property
    def dtype(self):
        """The element type; assigning it casts the value and gradient (`cast`), as MXNet's."""
        return self._dtype

    @dtype.setter
    def dtype(self, dtype):
        self.cast(dtype)

    @property
    def shape(self):
        """The shape; an unknown dim is 0, or -1 under NumPy shape semantics (as MXNet)."""
        if self._shape is not None and is_np_shape():
            return tuple(d if d != 0 else -1 for d in self._shape)
        return self._shape

    @shape.setter
    def shape(self, new_shape):
        new_shape = None if new_shape is None else tuple(int(d) for d in new_shape)
        if self._shape is None:
            self._shape = new_shape
            return
        if new_shape is None or len(self._shape) != len(new_shape) or \
                not all(j in (-1, 0, i) for i, j in zip(new_shape, self._shape)):
            raise ParameterAssertionError(
                f"Expected shape {new_shape} is incompatible with given shape {self._shape}.")
        self._shape = new_shape

    @property
    def stype(self):
        return self._stype

    @property
    def differentiable(self):
        return self._differentiable

    # ---- lookup ------------------------------------------------------------------------------
    def _check_and_get(self, arr_list, ctx):
        if arr_list is not None:
            if ctx is list:
                return arr_list
            if ctx is None:
                if len(arr_list) == 1:
                    return arr_list[0]
                ctx = current_context()
            ctx_list = self._ctx_map[ctx.device_typeid & 1]
            if ctx.device_id < len(ctx_list):
                idx = ctx_list[ctx.device_id]
                if idx is not None:
                    return arr_list[idx]
            raise MXNetError(
                f"Parameter '{self.name}' was not initialized on context {ctx}. "
                f"It was only initialized on {self._ctx_list}.")
        if self._deferred_init:
            raise DeferredInitializationError(
                f"Parameter '{self.name}' has not been initialized yet because initialization was "
                "deferred. Actual initialization happens during the first forward pass. Please pass "
                "one batch of data through the network before accessing Parameters. You can also "
                "avoid deferred initialization by specifying in_units, num_features, etc., for "
                "network layers.")
        raise MXNetError(
            f"Parameter '{self.name}' has not been initialized. Note that you should initialize "
            "parameters and create Trainer with Block.collect_params() instead of Block.params "
            "because the later does not include Parameters of nested child Blocks")

    # ---- initialization -----------------------------------------------------------------------
    def _set_trainer(self, trainer):
        """Attach the Trainer updating this Parameter; a sparse Parameter takes only one."""
        if self._stype != "default" and self._trainer and trainer and self._trainer is not trainer:
            raise ParameterRuntimeError(
                f"Failed to set the trainer for Parameter '{self.name}' because it was already set. "
                f"More than one trainers for a {self._stype} Parameter is not supported.")
        self._trainer = trainer

    def initialize(self, init=None, ctx=None, default_init=initializer.Uniform(), force_reinit=False):
        """Allocate and initialize the value (and gradient) on `ctx` (a Context or a list).

        Deferred when the shape is not fully known and `allow_deferred_init`; re-initializing an
        initialized Parameter only warns unless `force_reinit`.
        """
        if self._data is not None and not force_reinit:
            warnings.warn(f"Parameter '{self.name}' is already initialized, ignoring. "
                          "Set force_reinit=True to re-initialize.", stacklevel=2)
            return
        self._data = self._grad = None
        ctx = _as_ctx_list(ctx)
        if init is None:
            init = default_init if self.init is None else self.init
        if not shape_is_known(self.shape):
            if self._allow_deferred_init:
                self._deferred_init = (init, ctx, default_init, None)
                return
            raise ParameterValueError(f"Cannot initialize Parameter '{self.name}' because it has "
                                      f"invalid shape: {self.shape}.")
        self._deferred_init = (init, ctx, default_init, None)
        self._finish_deferred_init()

    def _finish_deferred_init(self):
        """Draw the initial value now that the shape is known, and place it on every context."""
        if not self._deferred_init:
            return
        init, ctx, default_init, data = self._deferred_init
        self._deferred_init = ()
        if not shape_is_known(self.shape):
            raise MXNetError(
                f"Cannot initialize Parameter '{self.name}' because it has invalid shape: "
                f"{self.shape}. Please specify in_units, in_channels, etc for `Block`s.")
        with autograd.pause():
            if data is None:
                data = nd.zeros(self.shape, ctx=cpu(), dtype=self.dtype)
                _run_initializer(self.name, init, default_init, data)
            self._init_impl(data, ctx)

    def _init_impl(self, data, ctx_list, owned=False):
        """Set the value on every context of `ctx_list` from `data` (copied; with `owned`, data
        that nothing else references, the first context may take `data` itself)."""
        self._ctx_list = list(ctx_list)
        self._ctx_map = [[], []]
        for i, ctx in enumerate(self._ctx_list):
            dev_list = self._ctx_map[ctx.device_typeid & 1]
            while len(dev_list) <= ctx.device_id:
                dev_list.append(None)
            dev_list[ctx.device_id] = i
        self._data = _np_mode([_own_or_copy(data, c, owned and i == 0).tostype(self._stype)
                               for i, c in enumerate(self._ctx_list)])
        self._init_grad()

    def _init_grad(self):
        """Allocate zero gradients and mark the values as autograd variables."""
        if self.grad_req == "null":
            self._grad = None
            return
        self._grad = _np_mode([nd.zeros(i.shape, ctx=i.context, dtype=i.dtype, stype=self._grad_stype)
                               for i in self._data])
        autograd.mark_variables(self._check_and_get(self._data, list), self._grad, self.grad_req)

    def _reduce(self):
        """The value on cpu: the average over contexts when replicated."""
        block = self._check_and_get(self._data, list)
        if len(block) > 1:
            total = _copy_to(block[0], cpu())
            for w in block[1:]:
                total._data[...] += w._data
            total._data[...] /= len(block)
            return total
        return _copy_to(block[0], cpu())

    def _load_init(self, data, ctx, cast_dtype=False, dtype_source="current", owned=False):
        """Initialize (or overwrite) the value from a loaded array, checking shape and dtype.
        `owned`: nothing else references `data` (read from a file here), so a first
        initialization may take it as the value instead of copying it."""
        if cast_dtype and dtype_source not in ("current", "saved"):
            raise ParameterAssertionError(f"dtype_source must be 'current' or 'saved', got {dtype_source!r}")
        if self.shape:
            for self_dim, data_dim in zip(self.shape, data.shape):
                if self_dim not in (0, -1, data_dim) or len(self.shape) != len(data.shape):
                    raise ParameterAssertionError(
                        f"Failed loading Parameter '{self.name}' from saved params: shape incompatible "
                        f"expected {self.shape} vs saved {data.shape}")
            self.shape = tuple(i if i > 0 else j for i, j in zip(self.shape, data.shape))
        else:
            self.shape = data.shape
        if self.dtype is not None:
            if cast_dtype and np.dtype(self.dtype).type != data.dtype:
                if dtype_source == "current":
                    data = data.astype(self.dtype, copy=False)
                else:
                    self.dtype = data.dtype
            elif np.dtype(self.dtype).type != data.dtype:
                raise ParameterAssertionError(
                    f"Failed loading Parameter '{self.name}' from saved params: dtype incompatible "
                    f"expected {np.dtype(self.dtype).type} vs saved {data.dtype}. Set cast_dtype=True "
                    "to cast the dtype of saved params.")
        if isinstance(ctx, Context):
            ctx = [ctx]
        if self._data is None:
            if self._deferred_init:
                if ctx is not None and set(ctx) != set(self._deferred_init[1]):
                    raise ParameterAssertionError(
                        f"Failed to load Parameter '{self.name}' on {ctx} because it was previous "
                        f"initialized on {self.list_ctx()}.")
                ctx = self._deferred_init[1]
            elif ctx is None:
                ctx = [cpu()]
            self._init_impl(data, ctx, owned)
        else:
            if ctx is not None and set(ctx) != set(self.list_ctx()):
                raise ParameterAssertionError(
                    f"Failed to load Parameter '{self.name}' on {ctx} because it was previous "
                    f"initialized on {self.list_ctx()}.")
            self.set_data(data)
        self._deferred_init = ()

    # ---- access --------------------------------------------------------------------------------
    def data(self, ctx=None) -> NDArray:
        """The value on `ctx` (default: the only context, or the current one)."""
        if self._stype != "default":
            raise ParameterRuntimeError(f"Cannot return a copy of Parameter '{self.name}' on ctx {ctx} via data() "
                             f"because its storage type is {self._stype}. Please use row_sparse_data() "
                             "instead.")
        return self._check_and_get(self._data, ctx)

    def list_data(self) -> list:
        if self._stype != "default":
            raise ParameterRuntimeError(
                f"Cannot return copies of Parameter '{self.name}' on all contexts via list_data() because "
                f"its storage type is {self._stype}. Please use row_sparse_data() instead.")
        return self._check_and_get(self._data, list)

    def grad(self, ctx=None) -> NDArray:
        if self._data is not None and self._grad is None:
            raise MXNetError(f"Cannot get gradient array for Parameter '{self.name}' because "
                             "grad_req='null'")
        return self._check_and_get(self._grad, ctx)

    def list_grad(self) -> list:
        if self._data is not None and self._grad is None:
            raise MXNetError(f"Cannot get gradient array for Parameter '{self.name}' because "
                             "grad_req='null'")
        return self._check_and_get(self._grad, list)

    def list_ctx(self) -> list:
        if self._data is None:
            if self._deferred_init:
                return self._deferred_init[1]
            raise MXNetError(f"Parameter '{self.name}' has not been initialized")
        return self._ctx_list

    def set_data(self, data) -> None:
        """Overwrite the value on every context (or the pending value of a deferred init)."""
        self.shape = data.shape
        if self._data is None:
            if not self._deferred_init:
                raise ParameterAssertionError(f"Parameter '{self.name}' has not been initialized")
            self._deferred_init = self._deferred_init[:3] + (data,)
            return
        trainer = self._trainer
        if trainer is not None:
            trainer._on_set_data(self)
        src = data._data if isinstance(data, NDArray) else np.asarray(data)
        for arr in self._check_and_get(self._data, list):
            writable(arr._data)[...] = src

    def zero_grad(self) -> None:
        """Set the gradient buffers to 0 (needed with grad_req='add')."""
        if self._grad is None:
            return
        for g in self._grad:
            g._data[...] = 0

    def reset_ctx(self, ctx) -> None:
        """Move the value (averaged over the old contexts) onto new contexts."""
        ctx = _as_ctx_list(ctx)
        if self._data:
            data = self._reduce()
            with autograd.pause():
                self._init_impl(data, ctx)
        elif self._deferred_init:
            init, _, default_init, data = self._deferred_init
            self._deferred_init = (init, ctx, default_init, data)
        else:
            raise ParameterValueError(f"Cannot reset context for Parameter '{self.name}' because it "
                                      "has not been initialized.")

    def cast(self, dtype) -> None:
        """Cast the value and gradient to `dtype`."""
        self._dtype = dtype
        self._var = None
        if self._data is None:
            return
        with autograd.pause():
            self._data = [i.astype(dtype) for i in self._data]
            if self._grad is None:
                return
            self._grad = [i.astype(dtype) for i in self._grad]
            autograd.mark_variables(self._data, self._grad, self.grad_req)

    def var(self):
        """The Symbol variable standing for this parameter in traced graphs (created once, carrying
        shape, dtype, lr_mult, wd_mult, init and storage type as MXNet's `__x__` attributes)."""
        from .. import symbol
        if self._var is None:
            self._var = symbol.var(self.name, shape=self.shape, dtype=self.dtype, lr_mult=self.lr_mult,
                                   wd_mult=self.wd_mult, init=self._var_init(), stype=self._stype)
        return self._var.as_np_ndarray() if is_np_array() else self._var

    def _var_init(self):
        return self.init

    def row_sparse_data(self, row_id):
        """The value on `row_id`'s context holding (at least) the rows `row_id`, fetched through
        the Trainer's KVStore (a row_sparse Parameter only)."""
        self._check_row_sparse("row_sparse_data", "data()")
        return self._get_row_sparse(row_id.context if isinstance(row_id, NDArray) else None, row_id)

    def list_row_sparse_data(self, row_id):
        """`row_sparse_data` on every context."""
        self._check_row_sparse("list_row_sparse_data", "list_data()")
        return self._get_row_sparse(list, row_id)

    def _check_row_sparse(self, what: str, instead: str) -> None:
        if self._stype != "row_sparse":
            raise ParameterRuntimeError(
                f"Cannot return a copy of Parameter '{self.name}' via {what}() because its storage type "
                f"is {self._stype}. Please use {instead} instead.")

    def _get_row_sparse(self, ctx, row_id):
        """The values on `ctx` (or all contexts with `list`) after the Trainer pulled rows `row_id`."""
        if not isinstance(row_id, NDArray):
            raise MXNetTypeError(f"row_id must have NDArray type, but {type(row_id).__name__} is given")
        if not self._trainer:
            raise ParameterRuntimeError(f"Cannot get row_sparse data for Parameter '{self.name}' when no "
                                        "Trainer is created with it.")
        results = self._check_and_get(self._data, ctx)
        self._trainer._row_sparse_pull(self, results, row_id)
        return results


def _np_mode(arrays: list) -> list:
    """`arrays` as `mx.np.ndarray`s when NumPy array semantics are on (`npx.set_np()`: MXNet
    then creates a Parameter's value and gradient as np arrays), else unchanged."""
    if not is_np_array():
        return arrays
    from ..numpy_extension._op import as_np
    return [as_np(a) for a in arrays]


def _own_or_copy(data, ctx: Context, owned: bool) -> NDArray:
    """`data` itself when the caller hands it over (`owned`) and it is a plain dense NDArray on
    `ctx` owning its writable buffer, else `_copy_to(data, ctx)`."""
    if owned and type(data) is NDArray and data.context == ctx and data._data.flags.owndata \
            and data._data.flags.writeable and data._ag is None:
        return data
    return _copy_to(data, ctx)


def _copy_to(data, ctx: Context) -> NDArray:
    """A fresh NDArray on `ctx` holding `data`'s values (never shares memory, never recorded)."""
    from ..ndarray.ndarray import _check_ctx
    if isinstance(data, BaseSparseNDArray):
        return data.copyto(_check_ctx(ctx))
    src = data._data if isinstance(data, NDArray) else np.asarray(data)
    return NDArray(np.array(src, copy=True), _check_ctx(ctx))


def _run_initializer(name: str, init, default_init, data: NDArray) -> None:
    """Fill `data` as MXNet does: `create(default_init)(InitDesc(name, {'__init__': init}), data)`.

    Initializers that are plain callables (e.g. `Mixed`) are called with the bare description."""
    if not isinstance(init, (initializer.Initializer, str)) and callable(init):
        init(initializer.InitDesc(name), data)
        return
    if isinstance(default_init, initializer.Initializer) or isinstance(default_init, str):
        initializer.create(default_init)(initializer.InitDesc(name, {"__init__": init}), data)
        return
    if callable(default_init):
        default_init(initializer.InitDesc(name, {"__init__": init}), data)
        return
    raise ParameterValueError(f"Parameter '{name}': cannot initialize with {default_init!r}")


class Constant(Parameter):
    """A non-trainable Parameter holding a fixed value (grad_req is always 'null')."""

    def __init__(self, name, value):
        if not isinstance(value, NDArray):
            value = nd.array(value)
        self.value = value
        const = value

        class _ConstInit(initializer.Initializer):
            def _init_weight(self, _, arr):
                arr[:] = const.asnumpy()

            def dumps(self):
                return self._name

        init = _ConstInit()
        init._name = f"Constant_{id(self)}"
        super().__init__(name, grad_req="null", shape=value.shape, dtype=value.dtype, init=init)

    def __repr__(self):
        return f"Constant {self.name} (shape={self.shape}, dtype={self.dtype})"

    @property
    def grad_req(self):
        return "null"

    @grad_req.setter
    def grad_req(self, req):
        if req != "null":
            warnings.warn(f'Constant parameter "{self.name}" does not support grad_req other than '
                          f'"null", and new value "{req}" is ignored.')
        self._grad_req = "null"


class ParameterDict:
    """An ordered name -> Parameter mapping with a name prefix, shared lookups and bulk operations."""

    def __init__(self, prefix="", shared=None):
        self._prefix = prefix
        self._params = OrderedDict()
        self._shared = shared

    def __repr__(self):
        name = self._prefix + " " if self._prefix else ""
        content = "\n".join(_indent(f"  {v}", 2) for v in self.values())
        return f"{name}(\n{content}\n)"

    def __getitem__(self, key):
        return self._params[key]

    def __iter__(self):
        return iter(self._params)

    def __len__(self):
        return len(self._params)

    def __contains__(self, key):
        return key in self._params

    def items(self):
        return self._params.items()

    def keys(self):
        return self._params.keys()

    def values(self):
        return self._params.values()

    @property
    def prefix(self):
        return self._prefix

    def _get_impl(self, name):
        if name in self._params:
            return self._params[name]
        if self._shared is not None and name in self._shared._params:
            self._params[name] = self._shared._params[name]
            return self._shared._params[name]
        return None

    def get(self, name, **kwargs) -> Parameter:
        """The Parameter `prefix + name`, created with `kwargs` if missing; an existing one must
        agree with `kwargs` (0 dims of a shape merge with known ones)."""
        name = self.prefix + name
        param = self._get_impl(name)
        if param is None:
            param = Parameter(name, **kwargs)
            self._params[name] = param
            return param
        for k, v in kwargs.items():
            if hasattr(param, k) and getattr(param, k) is not None:
                existing = getattr(param, k)
                if k == "shape" and v is not None and len(v) == len(existing):
                    inferred, matched = [], True
                    for d1, d2 in zip(v, existing):
                        if d1 != d2 and d1 > 0 and d2 > 0:
                            matched = False
                            break
                        inferred.append(d2 if d1 in (0, -1) else d1)
                    if matched:
                        param._shape = tuple(inferred)
                        continue
                elif k == "dtype" and v is not None and np.dtype(v) == np.dtype(existing):
                    continue
                if v is not None and v != existing:
                    raise ParameterAssertionError(
                        f"Cannot retrieve Parameter '{name}' because desired attribute does not match "
                        f"with stored for attribute '{k}': desired '{v}' vs stored '{existing}'.")
            else:
                setattr(param, k, v)
        return param

    def get_constant(self, name, value=None) -> Constant:
        name = self.prefix + name
        param = self._get_impl(name)
        if param is None:
            if value is None:
                raise KeyError(f"No constant named '{name}'. Please specify value if you want to "
                               "create a new constant.")
            param = Constant(name, value)
            self._params[name] = param
        elif value is not None:
            if not isinstance(param, Constant):
                raise ParameterAssertionError(f"Parameter '{name}' already exists but it is not a "
                                              "constant.")
            if isinstance(value, NDArray):
                value = value.asnumpy()
            if param.shape != np.shape(value) or not np.array_equal(param.value.asnumpy(), value):
                raise ParameterAssertionError(f"Constant '{name}' already exists but it's value doesn't "
                                              "match new value")
        return param

    def update(self, other) -> None:
        """Copy all Parameters of `other` (a name clash with a different Parameter is an error)."""
        for k, v in other.items():
            if k in self._params and self._params[k] is not v:
                raise ParameterAssertionError(
                    "Cannot update self with other because they have different Parameters with the "
                    f"same name '{k}'")
        for k, v in other.items():
            self._params[k] = v

    def initialize(self, init=initializer.Uniform(), ctx=None, verbose=False, force_reinit=False):
        """Initialize every Parameter (each one's own `init` wins over `init`)."""
        if verbose and hasattr(init, "set_verbosity"):
            init.set_verbosity(verbose=verbose)
        for _, v in self.items():
            v.initialize(None, ctx, init, force_reinit=force_reinit)

    def zero_grad(self):
        for v in self.values():
            v.zero_grad()

    def reset_ctx(self, ctx):
        for v in self.values():
            v.reset_ctx(ctx)

    def list_ctx(self):
        s = set()
        for v in self.values():
            s.update(v.list_ctx())
        return list(s)

    def setattr(self, name, value):
        """Set attribute `name` (e.g. 'grad_req', 'lr_mult') on every Parameter."""
        for v in self.values():
            setattr(v, name, value)

    def save(self, filename, strip_prefix=""):
        """Write every value (averaged over contexts) to `filename` in MXNet's .params format,
        names with `strip_prefix` removed."""
        arg_dict = {}
        for param in self.values():
            weight = param._reduce()
            if not param.name.startswith(strip_prefix):
                raise ParameterValueError(
                    f"Prefix '{strip_prefix}' is to be striped before saving, but Parameter's name "
                    f"'{param.name}' does not start with '{strip_prefix}'. this may be due to your Block "
                    "shares parameters from other Blocks or you forgot to use 'with name_scope()' when "
                    "creating child blocks.")
            arg_dict[param.name[len(strip_prefix):]] = weight
        nd.save(filename, arg_dict)

    def load(self, filename, ctx=None, allow_missing=False, ignore_extra=False, restore_prefix="",
             cast_dtype=False, dtype_source="current"):
        """Load values saved by `save` (or an MXNet `arg:`/`aux:` .params file)."""
        if restore_prefix:
            for name in self.keys():
                if not name.startswith(restore_prefix):
                    raise ParameterAssertionError(
                        f"restore_prefix is '{restore_prefix}' but Parameters name '{name}' does not "
                        f"start with '{restore_prefix}'")
        loaded = nd.load(filename)   # arrays nothing else references: parameters may take them
        self._load_arrays(loaded, ctx, allow_missing, ignore_extra, restore_prefix, filename, cast_dtype,
                          dtype_source, owned=True)

    def load_dict(self, param_dict, ctx=None, allow_missing=False, ignore_extra=False, restore_prefix="",
                  filename=None, cast_dtype=False, dtype_source="current"):
        self._load_arrays(param_dict, ctx, allow_missing, ignore_extra, restore_prefix, filename, cast_dtype,
                          dtype_source, owned=False)

    def _load_arrays(self, param_dict, ctx, allow_missing, ignore_extra, restore_prefix, filename,
                     cast_dtype, dtype_source, owned):
        """`load_dict`; `owned`: the arrays are this call's own (copied values may be taken)."""
        lprefix = len(restore_prefix)
        if isinstance(param_dict, dict):
            loaded = [(k[4:] if k.startswith(("arg:", "aux:")) else k, v) for k, v in param_dict.items()]
        else:
            loaded = list(param_dict)
        arg_dict = {restore_prefix + k: v for k, v in loaded}
        error_str = f"file: {filename}" if filename else "param_dict"
        if not allow_missing:
            for name in self.keys():
                if name not in arg_dict:
                    raise ParameterAssertionError(
                        f"Parameter '{name[lprefix:]}' is missing in {error_str}, which contains "
                        f"parameters: {_brief_print_list(arg_dict.keys())}. Please make sure source and "
                        "target networks have the same prefix.")
        for name in arg_dict:
            if name not in self._params:
                if not ignore_extra:
                    raise ParameterAssertionError(
                        f"Parameter '{name[lprefix:]}' loaded from {error_str} is not present in "
                        f"ParameterDict, choices are: {_brief_print_list(self._params.keys())}. Set "
                        "ignore_extra to True to ignore. Please make sure source and target networks "
                        "have the same prefix.")
                continue
            self[name]._load_init(arg_dict[name], ctx, cast_dtype=cast_dtype, dtype_source=dtype_source,
                                  owned=owned)

    def _select(self, select):
        pattern = re.compile(select)
        return {name: value for name, value in self.items() if pattern.match(name)}
