"""Gluon blocks: `Block`, `HybridBlock` and `SymbolBlock` with MXNet 1.x semantics.

Naming (exactly as MXNet 1.x): a Block created outside any `name_scope()` gets the prefix
`<classname><n>_` from the global NameManager (`dense0_`, `sequential0_`); inside a parent's
`with self.name_scope():` it gets `<parent prefix><classname><n>_` counted per parent
(`hybridsequential0_dense0_`), and its parameters are named prefix + name
(`hybridsequential0_dense0_weight`). Inside `name_scope()` symbols created without a name are
prefixed too (`mlp_dense0_fwd`).

HybridBlock runs `hybrid_forward(F, x, *args, **params)` with `F = symjit.ndarray` on arrays;
`hybridize()` makes the block trace `hybrid_forward` with `F = symjit.symbol` into one Symbol
and run it through a `CachedOp`: compiled per input signature by the backend
`symjit.executor.select_backend()` chooses, with one autograd tape node per call whose
backward runs the compiled backward graph. Deferred parameter shapes are inferred from the
traced Symbol on the first forward (ops' `infer_shape` fills weight shapes).

Inference fast path: after a hybridized call in inference (not recording, not training) on
plain NDArray inputs, the block keeps a plan for that input signature (`_inference_fast_call`):
the compiled function and the parameter arrays gathered in its argument order. The next calls
with the same signature check it cheaply (autograd state, `Parameter._generation`, input types,
shapes, dtypes, context) and call the compiled graph directly; anything else takes the general
path, which rebuilds the plan. Forward hooks still run around `forward` (`Block.__call__`).

Bound parameters: an inference plan binds the block's parameters (and aux states) as
compile-time constants (`CachedOp.bound_runner`: the pipeline of `symjit.compile(...,
params=...)`, so weights are packed, BatchNorm folded into them, filters Winograd-transformed).
The buffers it read are frozen (`symjit.ndarray.write_guard`): set_data, load_parameters,
Trainer.step, `param.data()[:] = ...` and every other write through symjit thaw them, which
makes the plan stale at its next call (it then recompiles), and `Parameter._generation` covers
arrays replaced. Training (recording, or `autograd.train_mode()`) never uses these plans:
parameters stay graph inputs there.
  * Memory: the copies a block's bound plans hold (`BoundRunner.const_bytes`) are at most
    `hybridize(bound_bytes_limit=N)` bytes together (default `_default_bound_limit`: 4 times
    the block's parameter bytes plus 64 MiB); a new bound plan evicts the least recently used
    other bound plans of the block until the total fits, and a signature whose bound plan
    alone exceeds the limit runs with parameters as inputs (transient peak during a compile:
    one more plan). `hybridize(bind_params=False)` never binds.
  * Weights changing between inference calls (a train step between single inference calls):
    a bound plan that went stale before its second call makes the block plan with
    parameters as inputs until the weights stay unchanged for `backoff` consecutive calls
    (2, doubled on each such demotion up to 1024; reset once a bound plan lives two calls),
    so recompiles stay a small share of the calls.
"""
from __future__ import annotations

import threading
import warnings
import weakref
from collections import OrderedDict, defaultdict

from .. import autograd
from .. import ndarray as _nd
from .. import symbol as _sym
from ..base import MXNetError
from ..context import Context
from ..ndarray import NDArray
from ..ndarray import write_guard
from ..ndarray.ndarray import _STORAGE_TYPE_STR_TO_ID
from ..symbol import Symbol
from ..symbol.naming import NameManager, Prefix
from ..numpy.multiarray import ndarray as _NpArray
from ..numpy_extension._op import as_np
from ..util import is_np_array
from .cached_op import CachedOp
from .parameter import (DeferredInitializationError, Parameter, ParameterAssertionError, ParameterDict,
                        ParameterValueError, _brief_print_list, _indent)

__all__ = ["Block", "HybridBlock", "SymbolBlock", "HookHandle"]


class _BlockScope:
    """The naming scope of a Block (`with block.name_scope():`)."""
    _current = threading.local()

    def __init__(self, block):
        self._block_ref = weakref.ref(block)   # weak: a block owns its scope (no reference cycle)
        self._counter: dict[str, int] = {}
        self._old_scope = None
        self._name_scope = None

    @property
    def _block(self):
        return self._block_ref()

    @staticmethod
    def create(prefix, params, hint):
        """(prefix, ParameterDict) for a new block created in the current scope."""
        current = getattr(_BlockScope._current, "value", None)
        if current is None:
            if prefix is None:
                prefix = NameManager.current.get(None, hint) + "_"
            if params is None:
                params = ParameterDict(prefix)
            else:
                params = ParameterDict(params.prefix, params)
            return prefix, params
        if prefix is None:
            count = current._counter.get(hint, 0)
            prefix = "%s%d_" % (hint, count)
            current._counter[hint] = count + 1
        if params is None:
            parent = current._block.params
            params = ParameterDict(parent.prefix + prefix, parent._shared)
        else:
            params = ParameterDict(params.prefix, params)
        return current._block.prefix + prefix, params

    def __enter__(self):
        if self._block._empty_prefix:
            return self
        self._old_scope = getattr(_BlockScope._current, "value", None)
        _BlockScope._current.value = self
        self._name_scope = Prefix(self._block.prefix)
        self._name_scope.__enter__()
        return self

    def __exit__(self, ptype, value, trace):
        if self._block._empty_prefix:
            return
        self._name_scope.__exit__(ptype, value, trace)
        self._name_scope = None
        _BlockScope._current.value = self._old_scope


class HookHandle:
    """Detaches a forward (pre-)hook: `handle.detach()` or `with handle:`."""

    def __init__(self):
        self._hooks_dict_ref = None
        self._id = None

    def attach(self, hooks_dict, hook):
        if self._hooks_dict_ref is not None:
            raise MXNetError("The same handle cannot be attached twice.")
        self._id = id(hook)
        hooks_dict[self._id] = hook
        self._hooks_dict_ref = weakref.ref(hooks_dict)

    def detach(self):
        hooks_dict = self._hooks_dict_ref() if self._hooks_dict_ref is not None else None
        if hooks_dict is not None and self._id in hooks_dict:
            del hooks_dict[self._id]

    def __enter__(self):
        return self

    def __exit__(self, ptype, value, trace):
        self.detach()


# --------------------------------------------------------------------------------------------
# Nested input/output formats (MXNet's _flatten / _regroup)
# --------------------------------------------------------------------------------------------

def _flatten(args, inout_str):
    """Flatten nested lists/tuples of arrays or symbols into a list plus a format to regroup."""
    if isinstance(args, NDArray):
        return [args], 0
    if isinstance(args, Symbol):
        length = len(args.list_outputs())
        length = length if length > 1 else 0
        return [args], length
    if args is None:
        return [None], -1
    if not isinstance(args, (list, tuple)):
        raise ParameterValueError(f"When hybridized, the {inout_str} of HybridBlock must be (nested) list "
                                  f"of Symbol or NDArray, but got {args} of type {type(args)}")
    flat, fmts = [], []
    for i in args:
        arg, fmt = _flatten(i, inout_str)
        flat.extend(arg)
        fmts.append(fmt)
    return flat, fmts


def _gather_type_ctx_info(args):
    """(has a Symbol, has an NDArray, contexts of the NDArrays, first NDArray's context) of
    (nested) inputs; other values (numbers, None) are ignored, as in MXNet."""
    if isinstance(args, NDArray):
        return False, True, {args.context}, args.context
    if isinstance(args, Symbol):
        return True, False, set(), None
    if isinstance(args, (list, tuple)):
        has_symbol = has_ndarray = False
        ctx_set, first_ctx = set(), None
        for ele in args:
            s, n, cs, fc = _gather_type_ctx_info(ele)
            has_symbol, has_ndarray = has_symbol or s, has_ndarray or n
            ctx_set |= cs
            if first_ctx is None:
                first_ctx = fc
        return has_symbol, has_ndarray, ctx_set, first_ctx
    return False, False, set(), None


def _compatible_format(fmt, stored) -> bool:
    """MXNet accepts an input structure that differs from the cached one only by trailing
    None inputs (arguments left to their defaults)."""
    if not isinstance(fmt, list) or not isinstance(stored, list):
        return False
    short, long_ = (fmt, stored) if len(fmt) < len(stored) else (stored, fmt)
    if len(short) == len(long_):
        return False
    return long_[:len(short)] == short and all(f == -1 for f in long_[len(short):])


def _regroup(args, fmt):
    """Inverse of `_flatten`."""
    if isinstance(fmt, int):
        if fmt == 0:
            return args[0], args[1:]
        if fmt == -1:
            if args[0] is not None:
                raise MXNetError("HybridBlock output must be (nested) list of Symbol or NDArray")
            return None, args[1:]
        return args[:fmt], args[fmt:]
    if not isinstance(args, (list, tuple)):
        raise MXNetError("HybridBlock output must be (nested) list of Symbol or NDArray")
    ret = []
    for i in fmt:
        res, args = _regroup(args, i)
        ret.append(res)
    return ret, args


# --------------------------------------------------------------------------------------------
# Block
# --------------------------------------------------------------------------------------------

class Block:
    """Base class of all layers and models (imperative `forward`)."""

    def __init__(self, prefix=None, params=None):
        self._empty_prefix = prefix == ""
        self._prefix, self._params = _BlockScope.create(prefix, params, self._alias())
        self._name = self._prefix[:-1] if self._prefix.endswith("_") else self._prefix
        self._scope = _BlockScope(self)
        self._children = OrderedDict()
        self._reg_params = {}
        self._forward_hooks = OrderedDict()
        self._forward_pre_hooks = OrderedDict()

    def __repr__(self):
        modstr = "\n".join(f"  ({key}): {_indent(block.__repr__(), 2)}"
                           for key, block in self.__dict__.items() if isinstance(block, Block))
        return f"{self.__class__.__name__}(\n{modstr}\n)"

    def __setattr__(self, name, value):
        """Registers child blocks and parameters assigned as attributes."""
        if hasattr(self, name):
            existing = getattr(self, name)
            if isinstance(existing, (Parameter, Block)) and not isinstance(value, type(existing)):
                raise TypeError(f"Changing attribute type for {name} from {type(existing)} to "
                                f"{type(value)}is not allowed.")
        if isinstance(value, Block):
            self.register_child(value, name)
        elif isinstance(value, Parameter):
            if name in self._reg_params:
                raise ParameterAssertionError(
                    f"Overriding Parameter attribute {name} is not allowed. If you want to share "
                    "parameters between blocks, please set 'params' at Block construction instead.")
            self._reg_params[name] = value
        super().__setattr__(name, value)

    def _check_container_with_block(self):
        children = set(self._children.values())

        def _find_unregistered_block_in_container(data):
            if isinstance(data, (list, tuple)):
                return any(_find_unregistered_block_in_container(ele) for ele in data)
            if isinstance(data, dict):
                return any(_find_unregistered_block_in_container(v) for v in data.values())
            if isinstance(data, Block):
                return data not in children
            return False
        for k, v in self.__dict__.items():
            if isinstance(v, (list, tuple, dict)) and not (k.startswith("__") or k == "_children"):
                if _find_unregistered_block_in_container(v):
                    warnings.warn(f'"{self.name}.{k}" is an unregistered container with Blocks. Note '
                                  "that Blocks inside the list, tuple or dict will not be registered "
                                  "automatically. Make sure to register them using register_child() or "
                                  "switching to nn.Sequential/nn.HybridSequential instead. ", stacklevel=3)

    def _alias(self):
        return self.__class__.__name__.lower()

    @property
    def prefix(self):
        """Prefix of this Block's names (its own and its children's)."""
        return self._prefix

    @property
    def name(self):
        return self._name

    def name_scope(self):
        """A scope in which child blocks and symbols get this block's prefix."""
        return self._scope

    @property
    def params(self):
        """This Block's own ParameterDict (children's parameters are not included)."""
        return self._params

    def collect_params(self, select=None):
        """A ParameterDict of this Block's and all its children's Parameters; `select` is a regex
        over full names (e.g. '.*weight|.*bias')."""
        self._check_container_with_block()
        ret = ParameterDict(self._params.prefix)
        if not select:
            ret.update(self.params)
        else:
            ret.update(self.params._select(select))
        for cld in self._children.values():
            ret.update(cld.collect_params(select=select))
        return ret

    def _collect_params_with_prefix(self, prefix=""):
        if prefix:
            prefix += "."
        ret = {prefix + key: val for key, val in self._reg_params.items()}
        for name, child in self._children.items():
            ret.update(child._collect_params_with_prefix(prefix + name))
        return ret

    def save_parameters(self, filename, deduplicate=False):
        """Save parameters under their attribute paths ('0.weight', 'hidden.bias', ...)."""
        params = self._collect_params_with_prefix()
        if deduplicate:
            reverse = defaultdict(list)
            for k, v in params.items():
                reverse[v].append(k)
            params = {v[0]: k for k, v in reverse.items()}
        arg_dict = {key: val._reduce() for key, val in params.items()}
        _nd.save(filename, arg_dict)

    def save_params(self, filename):
        warnings.warn("save_params is deprecated. Please use save_parameters. Note that if you want "
                      "load from SymbolBlock later, please use export instead.")
        self.collect_params().save(filename, strip_prefix=self.prefix)

    def load_parameters(self, filename, ctx=None, allow_missing=False, ignore_extra=False,
                        cast_dtype=False, dtype_source="current"):
        """Load parameters saved by `save_parameters` (or, for names without '.', the legacy
        `collect_params().save(strip_prefix=prefix)` format)."""
        loaded = _nd.load(filename)
        if isinstance(loaded, list):
            raise MXNetError(f"load_parameters: {filename!r} holds a list of arrays, not a dict of named "
                             "parameters")
        params = self._collect_params_with_prefix()
        if not loaded and not params:
            return
        if not any("." in i for i in loaded.keys()):
            self.collect_params().load(filename, ctx, allow_missing, ignore_extra, self.prefix,
                                       cast_dtype=cast_dtype, dtype_source=dtype_source)
            return
        if not allow_missing:
            params_inv = defaultdict(list)
            for k, v in params.items():
                params_inv[v].append(k)
            for name, param in params.items():
                if not any(p in loaded for p in params_inv[param]):
                    raise ParameterAssertionError(
                        f"Parameter '{name}' is missing in file '{filename}', which contains parameters: "
                        f"{_brief_print_list(loaded.keys())}. Set allow_missing=True to ignore missing "
                        "parameters.")
        for name in loaded:
            if not ignore_extra and name not in params:
                raise ParameterValueError(
                    f"Parameter '{name}' loaded from file '{filename}' is not present in ParameterDict, "
                    f"which contains parameters {_brief_print_list(self._params.keys())}. Set "
                    "ignore_extra=True to ignore. ")
            if name in params:
                params[name]._load_init(loaded[name], ctx, cast_dtype=cast_dtype, dtype_source=dtype_source)

    def load_params(self, filename, ctx=None, allow_missing=False, ignore_extra=False):
        warnings.warn("load_params is deprecated. Please use load_parameters.")
        self.load_parameters(filename, ctx, allow_missing, ignore_extra)

    def register_child(self, block, name=None):
        """Register `block` as a child (named by position when `name` is None)."""
        if name is None:
            name = str(len(self._children))
        self._children[name] = block

    def register_forward_pre_hook(self, hook):
        """`hook(block, inputs)` runs before each forward; returns a HookHandle."""
        handle = HookHandle()
        handle.attach(self._forward_pre_hooks, hook)
        return handle

    def register_forward_hook(self, hook):
        """`hook(block, inputs, outputs)` runs after each forward; returns a HookHandle."""
        handle = HookHandle()
        handle.attach(self._forward_hooks, hook)
        return handle

    def register_op_hook(self, callback, monitor_all=False):
        """Install an operator hook on the hybridized blocks inside (see
        `HybridBlock.register_op_hook`): a plain Block runs no graph of its own."""
        for cld in self._children.values():
            cld.register_op_hook(callback, monitor_all)

    def apply(self, fn):
        """Apply `fn` to every child (recursively) and then to this block."""
        for cld in self._children.values():
            cld.apply(fn)
        fn(self)
        return self

    def initialize(self, init=None, ctx=None, verbose=False, force_reinit=False):
        """Initialize all Parameters of this block and its children (default init Uniform(0.07))."""
        from .. import initializer
        if init is None:
            init = initializer.Uniform()
        self.collect_params().initialize(init, ctx, verbose, force_reinit)

    def hybridize(self, active=True, **kwargs):
        """Hybridize the HybridBlock children (a plain Block itself stays imperative)."""
        for cld in self._children.values():
            cld.hybridize(active, **kwargs)

    def cast(self, dtype):
        """Cast this block's and its children's parameters to `dtype`."""
        for child in self._children.values():
            child.cast(dtype)
        for _, param in self.params.items():
            param.cast(dtype)

    def __call__(self, *args):
        if self._forward_pre_hooks or self._forward_hooks:
            return self._call_with_hooks(args)
        return self.forward(*args)

    def _call_with_hooks(self, args):
        """`forward` between the forward pre-hooks and the forward hooks (each list is read when
        it runs, so a hook may add or detach hooks)."""
        for hook in list(self._forward_pre_hooks.values()):
            hook(self, args)
        out = self.forward(*args)
        for hook in list(self._forward_hooks.values()):
            hook(self, args, out)
        return out

    def forward(self, *args):
        raise NotImplementedError

    def summary(self, *inputs):
        """Print each layer's output shape and parameter count for a forward on `inputs`."""
        summary = OrderedDict()
        seen = set()
        hooks = []

        def _get_shape_str(args):
            def flatten(args):
                if not isinstance(args, (list, tuple)):
                    return [args], 0
                flat, fmts = [], []
                for i in args:
                    arg, fmt = flatten(i)
                    flat.extend(arg)
                    fmts.append(fmt)
                return flat, fmts

            def regroup(args, fmt):
                if isinstance(fmt, int):
                    if fmt == 0:
                        return args[0], args[1:]
                    return args[:fmt], args[fmt:]
                ret = []
                for i in fmt:
                    res, args = regroup(args, i)
                    ret.append(res)
                return ret, args

            flat_args, fmts = flatten(args)
            flat_arg_shapes = [x.shape if isinstance(x, NDArray) else x for x in flat_args]
            shapes = regroup(flat_arg_shapes, fmts)[0]
            shape_str = str(shapes)[1:-1] if isinstance(shapes, list) else str(shapes)
            return shape_str.replace("L", "")

        def _register_summary_hook(block):
            if isinstance(block, HybridBlock) and block._active:
                raise ParameterAssertionError(f'"{block.name}" must not be hybridized to print summary.')

            def _summary_hook(block, _, outputs):
                class_name = block.__class__.__name__
                block_idx = len(summary) - 1
                m_key = "%s-%i" % (class_name, block_idx + 1)
                summary[m_key] = OrderedDict()
                summary[m_key]["output_shape"] = _get_shape_str(outputs)
                params = 0
                summary[m_key]["trainable"] = 0
                summary[m_key]["shared"] = 0
                for p in block.params.values():
                    params += p.data().size
                    summary[m_key]["trainable"] += 0 if p.grad_req == "null" else p.data().size
                    if p in seen:
                        summary[m_key]["shared"] += p.data().size
                    else:
                        seen.add(p)
                summary[m_key]["n_params"] = params

            from .nn.basic_layers import HybridSequential, Sequential
            if not isinstance(block, (Sequential, HybridSequential)):
                hooks.append(block.register_forward_hook(_summary_hook))

        summary["Input"] = OrderedDict()
        summary["Input"]["output_shape"] = _get_shape_str(inputs)
        summary["Input"]["n_params"] = 0
        summary["Input"]["trainable"] = 0
        summary["Input"]["shared"] = 0
        try:
            self.apply(_register_summary_hook)
            self(*inputs)
            line_format = "{:>20}  {:>42} {:>15}"
            print("-" * 80)
            print(line_format.format("Layer (type)", "Output Shape", "Param #"))
            print("=" * 80)
            total_params = trainable_params = shared_params = 0
            for layer in summary:
                print(line_format.format(layer, str(summary[layer]["output_shape"]),
                                         summary[layer]["n_params"]))
                total_params += summary[layer]["n_params"]
                trainable_params += summary[layer]["trainable"]
                shared_params += summary[layer]["shared"]
            print("=" * 80)
            print("Parameters in forward computation graph, duplicate included")
            print("   Total params: " + str(total_params))
            print("   Trainable params: " + str(trainable_params))
            print("   Non-trainable params: " + str(total_params - trainable_params))
            print("Shared params in forward computation graph: " + str(shared_params))
            print("Unique parameters in model: " + str(total_params - shared_params))
            print("-" * 80)
        finally:
            for h in hooks:
                h.detach()


# --------------------------------------------------------------------------------------------
# HybridBlock
# --------------------------------------------------------------------------------------------

def _input_context(args) -> Context | None:
    for a in args:
        if isinstance(a, NDArray):
            return a.context
    return None


class _Weights:
    """The parameter buffers an inference plan depends on by value, frozen
    (`write_guard.freeze`), and how many calls the plan served with them unchanged.

    `promote_after` 0: a bound plan (its constants are copies of these buffers: stale once one is
    written). Else a plan with parameters as inputs, waiting for the weights to stay unchanged
    for `promote_after` calls before the block binds them (`HybridBlock._plan_fast_call`)."""
    __slots__ = ("arrays", "roots", "generation", "calls", "promote_after")

    def __init__(self, arrays, promote_after: int = 0):
        self.arrays = list(arrays)
        self.promote_after = promote_after
        self.calls = 0
        self.refreeze()

    def refreeze(self) -> None:
        self.roots = [write_guard.freeze(a) for a in self.arrays]
        self.generation = write_guard.generation()

    def unchanged(self) -> bool:
        """True when no buffer was written since they were frozen (checked when any frozen
        buffer anywhere was thawed; remembers the new generation when so)."""
        if all(write_guard.is_frozen(r) for r in self.roots):
            self.generation = write_guard.generation()
            return True
        return False

    def admit(self) -> bool:
        """Account one call; False when the plan must not serve it (a bound plan gone stale, or
        a waiting plan whose weights stayed unchanged long enough: the block binds them)."""
        if write_guard.generation() != self.generation and not self.unchanged():
            if not self.promote_after:
                return False
            self.refreeze()
            self.calls = 0
        self.calls += 1
        return not self.promote_after or self.calls <= self.promote_after


#: the dense array classes the compiled fast paths take as they are (NDArray and mx.np.ndarray:
#: both hold their value in `_data`); anything else, subclasses included, takes the general path
_DENSE_TYPES = frozenset({NDArray, _NpArray})


def _inference_fast_call(run, sources, in_specs, ctx, out_format, weights=None):
    """The inference fast path of a hybridized block for one input signature: a function
    `call(x, rest)` of the block's positional inputs `(x, *rest)` that returns the block's
    output, or None when the fast path does not apply (the caller then takes the general path).

    `run(*arrays)` is the compiled graph (`CachedOp.inference_runner`); `sources` gives, for each
    of its arrays, the position of the block input fed there (an int) or the numpy array of a
    parameter value (read by pointer, so in-place updates such as `set_data` are seen);
    `in_specs` are the (shape, dtype) of every input; `ctx` their context.

    Invariant (checked on every call, in this order, before anything runs): the result is the
    general path's exactly when
      * the calling thread is neither recording nor training (`autograd` state),
      * no Parameter's list of value arrays was replaced since the plan was built
        (`Parameter._generation` unchanged: initialize, cast, reset_ctx, load into an
        uninitialized Parameter ... all change it),
      * the inputs are as many dense arrays (`_DENSE_TYPES`, not nested lists) with the same
        shapes, dtypes and context as `in_specs` / `ctx`,
      * `run` accepts the arrays (the native Entry raises MXNetError, before computing anything,
        on an array it was not compiled for, e.g. a non-contiguous one).
      * `weights.admit()` (when given: the plan depends on parameter values, see `_Weights`).
    Everything else the plan depends on (the traced graph, the block's parameters, its cached op)
    only changes through `HybridBlock._clear_cached_op`, which drops the plan. A plan keeps the
    parameter arrays it was built with alive until it is dropped or replaced.
    """
    state = autograd._STATE  # thread-local recording / training flags
    generation = Parameter._generation
    n_in = len(in_specs)
    template = [None if isinstance(src, int) else src for src in sources]
    slots = [(pos, src) for pos, src in enumerate(sources) if isinstance(src, int)]
    single = n_in == 1 and len(slots) == 1
    if single:
        (shape, dtype), = in_specs
        k = slots[0][0]
        before, after = tuple(template[:k]), tuple(template[k + 1:])
    single_out = out_format == 0  # one output, returned as is; else regrouped by out_format

    def call_one(x, rest):
        """The common case: one input array, fed to the graph once."""
        if rest or state.recording or state.training or Parameter._generation != generation \
                or type(x) not in _DENSE_TYPES:
            return None
        d = x._data
        if d.shape != shape or d.dtype != dtype or (x._ctx is not ctx and x._ctx != ctx):
            return None
        if weights is not None and not weights.admit():
            return None
        try:
            outs = run(*before, d, *after)
        except MXNetError:
            return None
        cls = _NpArray if is_np_array() else NDArray   # what the general path returns
        if single_out:
            return cls(outs[0], ctx)
        return _regroup([cls(o, ctx) for o in outs], out_format)[0]

    def call_many(x, rest):
        inputs = (x,) + rest
        if len(inputs) != n_in or state.recording or state.training \
                or Parameter._generation != generation:
            return None
        for a, (shape_, dtype_) in zip(inputs, in_specs):
            if type(a) not in _DENSE_TYPES:
                return None
            d = a._data
            if d.shape != shape_ or d.dtype != dtype_ or (a._ctx is not ctx and a._ctx != ctx):
                return None
        if weights is not None and not weights.admit():
            return None
        arrays = list(template)
        for pos, i in slots:
            arrays[pos] = inputs[i]._data
        try:
            outs = run(*arrays)
        except MXNetError:
            return None
        cls = _NpArray if is_np_array() else NDArray   # what the general path returns
        if single_out:
            return cls(outs[0], ctx)
        return _regroup([cls(o, ctx) for o in outs], out_format)[0]

    call = call_one if single else call_many
    call.generation = generation
    call.weights = weights
    call.const_bytes = 0
    return call


#: Most input signatures whose fast-path plans a hybridized block keeps.
_MAX_FAST_CALLS = 16

#: Longest wait (in inference calls with unchanged weights) before a block binds its parameters
#: again after bound plans kept going stale at once (see the module docstring).
_MAX_BIND_BACKOFF = 1024


def _default_bound_limit(param_bytes: int) -> int:
    """The default bound on the bytes a block's bound plans hold together: room for the packed
    copies of a few input signatures (a packed, Winograd-transformed copy can be about twice
    the weights it comes from)."""
    return 4 * param_bytes + (64 << 20)


def _plan_key(args):
    """The signature of inputs `args` for the fast path (each one's shape, dtype, context), or
    None unless they are one or more dense arrays (`_DENSE_TYPES`)."""
    if not args:
        return None
    key = []
    for a in args:
        if type(a) not in _DENSE_TYPES:
            return None
        d = a._data
        key.append((d.shape, d.dtype, a._ctx))
    return tuple(key)


class HybridBlock(Block):
    """A Block whose `hybrid_forward(F, x, ...)` runs imperatively (F = ndarray) or, once
    hybridized, is traced into a Symbol (F = symbol) and compiled per input signature."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._cached_graph = ()
        self._cached_op = None
        # inference fast path (see _inference_fast_call): the last signature's plan, and the
        # plans of recent signatures by _plan_key; both dropped with the cached op
        self._fast_call = None
        self._fast_calls = {}
        #: bound-parameter plans: enabled, limit on their bytes (None: the default), and the
        #: calls a waiting plan needs before binding again (0: bind at once)
        self._bind_params = True
        self._bound_bytes_limit = None
        self._bind_backoff = 0
        self._bind_too_big = set()   # signatures whose bound plan cannot be made or kept
        self._out_format = None
        self._in_format = None
        self._active = False
        self._flags = []
        self._callback = None
        self._monitor_all = False

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if isinstance(value, HybridBlock):
            self._clear_cached_op()

    def register_child(self, block, name=None):
        if not isinstance(block, HybridBlock):
            raise ParameterValueError(
                f"Children of HybridBlock must also be HybridBlock, but {block} has type {type(block)}. "
                "If you are using Sequential, please try HybridSequential instead.")
        super().register_child(block, name)
        self._clear_cached_op()

    # ---- tracing -------------------------------------------------------------------------------
    def _get_graph(self, *args):
        """(input variables, output Symbol) of `hybrid_forward` traced on symbols; cached."""
        if not self._cached_graph:
            flat, self._in_format = _flatten(args, "input")
            var = _sym.np.var if is_np_array() else _sym.var   # MXNet: np inputs trace as np symbols
            if len(flat) > 1:
                inputs = [None if a is None else var("data%d" % i) for i, a in enumerate(flat)]
            else:
                inputs = [None if a is None else var("data") for a in flat]
            grouped_inputs = _regroup(inputs, self._in_format)[0]
            params = {i: j.var() for i, j in self._reg_params.items()}
            with self.name_scope():
                out = self.hybrid_forward(_sym, *grouped_inputs, **params)
            out, self._out_format = _flatten(out, "output")
            self._cached_graph = inputs, _sym.Group(out)
        return self._cached_graph

    def _infer_attrs(self, infer_fn, attr, *args):
        """Infer parameter shapes (or dtypes) from the traced graph and the given inputs."""
        inputs, out = self._get_graph(*args)
        flat, _ = _flatten(args, "input")
        known = {i.name: getattr(j, attr) for i, j in zip(inputs, flat) if i is not None and j is not None}
        if infer_fn == "infer_shape":
            arg_attrs, _, aux_attrs = out.infer_shape_partial(**known)
        else:
            arg_attrs, _, aux_attrs = out.infer_type_partial(**known)
        sdict = dict(zip(out.list_arguments(), arg_attrs))
        sdict.update(zip(out.list_auxiliary_states(), aux_attrs))
        for i in self.collect_params().values():
            if i.name in sdict and sdict[i.name]:
                setattr(i, attr, sdict[i.name])

    def infer_shape(self, *args):
        """Infer the shapes of deferred parameters from example inputs."""
        self._infer_attrs("infer_shape", "shape", *args)

    def infer_type(self, *args):
        """Infer the dtypes of parameters from example inputs."""
        self._infer_attrs("infer_type", "dtype", *args)

    def _deferred_infer_shape(self, *args):
        """Infer deferred parameter shapes by tracing on symbols. As in MXNet, the blocks called
        during the trace run their forward hooks (with Symbols)."""
        try:
            self.infer_shape(*args)
        except MXNetError as e:
            raise MXNetError(f"Deferred initialization failed because shape cannot be inferred. {e}") \
                from None

    # ---- the cached op -----------------------------------------------------------------------
    def _clear_cached_op(self):
        self._cached_graph = ()
        self._cached_op = None
        self._fast_call = None
        self._fast_calls = {}
        self._bind_too_big = set()

    def _build_cache(self, *args):
        inputs, out = self._get_graph(*args)
        data_indices = {v.name: i for i, v in enumerate(inputs) if v is not None}
        params = self.collect_params()
        by_name = {p.name: p for p in params.values()}
        self._cached_op = CachedOp(out, self._flags)
        plan = []
        for name in self._cached_op.arg_names + self._cached_op.aux_names:
            if name in data_indices:
                plan.append((True, data_indices[name]))
            elif name in by_name:
                plan.append((False, by_name[name]))
            else:
                raise MXNetError(f"hybridized block {self.name!r}: the traced graph reads {name!r}, which "
                                 f"is neither an input nor a Parameter of the block "
                                 f"(parameters: {sorted(by_name)})")
        self._cached_op_args = plan
        unused = [v.name for v in inputs if v is not None and v.name not in
                  set(self._cached_op.arg_names + self._cached_op.aux_names)]
        if unused:
            warnings.warn(f"The {unused} input to HybridBlock is not used by any computation. Is this "
                          "intended?", stacklevel=4)

    def _call_cached_op(self, *args):
        hook = self._callback
        inference = not autograd.is_recording() and not autograd.is_training() and hook is None
        key = _plan_key(args) if inference and self._fast_calls else None
        if key is not None:  # maybe a signature seen before, not the last one
            plan = self._fast_calls.get(key)
            if plan is not None:
                out = plan(args[0], args[1:])
                if out is not None:
                    self._fast_call = plan
                    self._fast_calls[key] = self._fast_calls.pop(key)   # most recently used last
                    return out
        if self._cached_op is None:
            self._build_cache(*args)
        if all(type(a) in _DENSE_TYPES for a in args):   # flat arrays (their format: one 0 each)
            flat, fmt = list(args), [0] * len(args)
        else:
            flat, fmt = _flatten(args, "input")
        if fmt != self._in_format and not _compatible_format(fmt, self._in_format):
            raise ParameterValueError(
                "The argument structure of HybridBlock does not match the cached version. Stored "
                f"format = {self._in_format}, input format = {fmt}")
        ctx = _input_context(flat)

        def gather():
            return [flat[x] if is_arg else x.data(ctx) for is_arg, x in self._cached_op_args]
        try:
            cargs = gather()
        except DeferredInitializationError:
            self._deferred_infer_shape(*args)
            for _, p in self.collect_params().items():
                p._finish_deferred_init()
            cargs = gather()
        if inference and fmt == [0] * len(args):
            plan = self._plan_fast_call(args, cargs, ctx)
            if plan is not None:
                out = plan(args[0], args[1:])
                if out is not None:
                    return out
        if hook is not None:
            out = _run_op_by_op(self._cached_graph[1], dict(zip(self._cached_op.input_names, cargs)),
                                hook=hook, monitor_all=self._monitor_all)
            return _regroup(out, self._out_format)[0]
        n_args = len(self._cached_op.arg_names)
        out = self._cached_op(cargs[:n_args], cargs[n_args:])
        return _regroup(out, self._out_format)[0]

    def _plan_fast_call(self, args, cargs, ctx):
        """Make the inference fast path (`_inference_fast_call`) for the signature of the inputs
        `args` (flat), whose graph arguments were gathered as `cargs` (the cached op's arguments
        then aux states, current values), the block's `_fast_call`, remember it by signature
        in `_fast_calls` and return it (None when there is no plan for these inputs).

        The plan binds the parameters as constants unless binding is off, the block waits
        after stale bound plans, or the bound plan would not fit the block's memory bound (see
        the module docstring). `_fast_calls` holds only plans built at the current
        `Parameter._generation` (at most `_MAX_FAST_CALLS`), so that inputs alternating between
        a few signatures stay fast; its order is least recently used first."""
        key = _plan_key(args)
        if key is None:
            return None
        plans = self._fast_calls
        self._learn_from(plans.get(key, self._fast_call))
        plan = None
        if self._bind_params and not self._bind_backoff and key not in self._bind_too_big:
            plan = self._make_fast_call(args, cargs, ctx, bind=True)
            if plan is None:
                self._bind_too_big.add(key)
        if plan is None:
            plan = self._make_fast_call(args, cargs, ctx, bind=False)
        if plan is None:
            return None
        plans.pop(key, None)
        if len(plans) >= _MAX_FAST_CALLS or any(p.generation != plan.generation for p in plans.values()):
            plans.clear()
        plans[key] = self._fast_call = plan
        return plan

    def _learn_from(self, old) -> None:
        """Adjust `_bind_backoff` from the plan being replaced (see the module docstring)."""
        weights = getattr(old, "weights", None)
        if weights is None:
            return
        if not weights.promote_after:   # a bound plan
            if weights.calls < 2 and not weights.unchanged():
                self._bind_backoff = min(_MAX_BIND_BACKOFF, max(2, 2 * self._bind_backoff))
            elif weights.calls >= 2:
                self._bind_backoff = 0
        elif weights.calls > weights.promote_after:   # weights unchanged long enough
            self._bind_backoff = 0

    def bound_bytes_limit(self) -> int:
        """The bound on the bytes this block's bound plans hold together (module docstring)."""
        if self._bound_bytes_limit is not None:
            return int(self._bound_bytes_limit)
        total = sum(a._data.nbytes for p in self.collect_params().values() if p._data is not None
                    for a in p._data)
        return _default_bound_limit(total)

    def bound_bytes(self) -> int:
        """The bytes this block's bound plans hold now (their `BoundRunner.const_bytes`)."""
        return sum(p.const_bytes for p in self._fast_calls.values())

    def _make_fast_call(self, args, cargs, ctx, bind: bool):
        """The plan for `_plan_fast_call`, or None when the compiled graph reads an array the
        block does not provide, or (`bind`) when the backend cannot bind constants or the
        bound plan alone exceeds the block's memory bound; `bind` makes room for the bound
        plan by evicting the least recently used other bound plans."""
        op = self._cached_op
        n_args = len(op.arg_names)
        fixed = [j for j, (is_arg, _) in enumerate(self._cached_op_args) if not is_arg]
        const_bytes = 0
        if bind:
            weights = _Weights([cargs[j]._data for j in fixed])   # frozen before they are read
            bound = op.bound_runner(cargs[:n_args], cargs[n_args:], fixed)
            limit = self.bound_bytes_limit()
            if bound is None or bound.const_bytes > limit:
                return None
            run, names, const_bytes = bound.run, bound.names, bound.const_bytes
            plans = self._fast_calls
            for k in [k for k, p in plans.items() if p.const_bytes]:
                if self.bound_bytes() + const_bytes <= limit:
                    break
                del plans[k]
        else:
            run, names = op.inference_runner(cargs[:n_args], cargs[n_args:])
            weights = _Weights([cargs[j]._data for j in fixed], self._bind_backoff) \
                if self._bind_params and self._bind_backoff and fixed else None
        index = {name: j for j, name in enumerate(op.input_names)}
        sources = []
        for name in names:
            j = index.get(name)
            if j is None:
                return None
            is_arg, x = self._cached_op_args[j]
            sources.append(x if is_arg else cargs[j]._data)
        in_specs = [(a._data.shape, a._data.dtype) for a in args]
        call = _inference_fast_call(run, sources, in_specs, ctx, self._out_format, weights)
        call.const_bytes = const_bytes
        return call

    # ---- public API --------------------------------------------------------------------------
    def hybridize(self, active=True, **kwargs):
        """Trace and compile this block (and hybridize children) on the next forward.

        Keyword flags (static_alloc, static_shape, ...) are accepted as MXNet's; compilation is
        always per input signature, so they do not change results. `inline_limit` (default 2)
        and `static_alloc` decide, as in MXNet, whether a recorded call reads as the graph's ops
        or as one `_CachedOp` node in `autograd.get_symbol`. symjit's own:
        `bind_params` (default True: inference binds parameters as constants) and
        `bound_bytes_limit` (bytes the block's bound plans may hold; see the module docstring)."""
        self._active = active
        self._flags = list(kwargs.items())
        self._bind_params = bool(kwargs.get("bind_params", True))
        self._bound_bytes_limit = kwargs.get("bound_bytes_limit")
        if self._bound_bytes_limit is not None and (isinstance(self._bound_bytes_limit, bool) or not
                                                    isinstance(self._bound_bytes_limit, int)
                                                    or self._bound_bytes_limit < 0):
            raise ParameterValueError(f"hybridize: bound_bytes_limit must be a non-negative int (bytes), "
                                      f"got {self._bound_bytes_limit!r}")
        self._bind_backoff = 0
        self._clear_cached_op()
        if active and (self._forward_hooks or self._forward_pre_hooks):
            warnings.warn(f'"{self}" is being hybridized while still having forward hook/pre-hook. If '
                          f'"{self}" is a child of HybridBlock, the hooks will not take effect.',
                          stacklevel=2)
        super().hybridize(active, **kwargs)

    def cast(self, dtype):
        self._clear_cached_op()
        super().cast(dtype)

    def export(self, path, epoch=0, remove_amp_cast=True):
        """Write `path-symbol.json` and `path-%04d.params` (keys `arg:NAME` / `aux:NAME`) in
        MXNet's formats, loadable by `SymbolBlock.imports` and by MXNet itself; returns the two
        file names."""
        if not self._cached_graph:
            raise MXNetError("Please first call block.hybridize() and then run forward with this block "
                             "at least once before calling export.")
        sym = self._cached_graph[1]
        sym.save("%s-symbol.json" % path, remove_amp_cast=remove_amp_cast)
        arg_names = set(sym.list_arguments())
        aux_names = set(sym.list_auxiliary_states())
        arg_dict = {}
        for name, param in self.collect_params().items():
            if name in arg_names:
                arg_dict["arg:%s" % name] = param._reduce()
            elif name in aux_names:
                arg_dict["aux:%s" % name] = param._reduce()
            else:
                warnings.warn(f"Parameter '{name}' is not used by the exported graph; not saved",
                              stacklevel=2)
        params_filename = "%s-%04d.params" % (path, epoch)
        _nd.save(params_filename, arg_dict)
        return "%s-symbol.json" % path, params_filename

    def register_op_hook(self, callback, monitor_all=False):
        """Install `callback(node_name, op_name, NDArray)` on this block and its children, as
        MXNet's: every call of the hybridized graph reports each operator's outputs as they are
        computed (named as `get_internals()` names them, e.g. 'dense0_fwd_output') and, with
        `monitor_all`, before them the operator's inputs ('dense0_fwd_data', or MXNet's
        'relu0_fwd_input0' for ops that do not list input names). The arrays are read-only.
        While a hook is installed the graph runs op by op, so that those are the values used."""
        if not callable(callback):
            raise TypeError(f"register_op_hook: callback must be callable, got {type(callback).__name__}")
        for block in [self] + list(self._children.values()):
            block._callback = callback
            block._monitor_all = bool(monitor_all)
            block._fast_call = None      # the inference fast paths would bypass the hook
            block._fast_calls = {}

    def forward(self, x, *args):
        """Dispatch: compiled graph when hybridized, `hybrid_forward` on arrays or symbols
        otherwise. Under `npx.set_np()` the results are `mx.np.ndarray`s (or `_Symbol`s), as
        MXNet's."""
        out = self._forward(x, *args)
        return _np_outputs(out) if is_np_array() else out

    def _forward(self, x, *args):
        fast = self._fast_call
        if fast is not None and self._callback is None:
            out = fast(x, args)
            if out is not None:
                return out
        if self._active and self._cached_op is not None and type(x) in _DENSE_TYPES:
            # the common compiled call: arrays in, all on one context
            ctx = x._ctx
            if all(type(a) in _DENSE_TYPES and (a._ctx is ctx or a._ctx == ctx) for a in args):
                return self._call_cached_op(x, *args)
        if type(x) in _DENSE_TYPES and all(type(a) in _DENSE_TYPES and a._ctx == x._ctx for a in args):
            # arrays only, on one context: what `_gather_type_ctx_info` would find, without the walk
            has_symbol, has_ndarray, ctx_set, first_ctx = False, True, (x._ctx,), x._ctx
        else:
            has_symbol, has_ndarray, ctx_set, first_ctx = _gather_type_ctx_info([x] + list(args))
        if has_symbol and has_ndarray:
            raise ParameterValueError("In HybridBlock, we do not support mixed NDArrays and Symbols types "
                                      "for the input. Please check the type of the args.")
        if not has_symbol and not has_ndarray:
            raise ParameterValueError("In HybridBlock, there must be one NDArray or one Symbol in the "
                                      "input. Please check the type of the args.")
        if has_ndarray:
            ctx = first_ctx
            if self._active and len(ctx_set) > 1:
                raise ParameterValueError(
                    "Find multiple contexts in the input, After hybridized, the HybridBlock only "
                    "supports one input context. You can print the ele.ctx in the input arguments to "
                    f"inspect their contexts. Find all contexts = {sorted(str(c) for c in ctx_set)}")
            if self._active:
                return self._call_cached_op(x, *args)
            try:
                params = {k: v.data(ctx) for k, v in self._reg_params.items()}
            except DeferredInitializationError:
                self._deferred_infer_shape(x, *args)
                for _, v in self.params.items():
                    v._finish_deferred_init()
                params = {k: v.data(ctx) for k, v in self._reg_params.items()}
            return self.hybrid_forward(_nd, x, *args, **params)
        params = {i: j.var() for i, j in self._reg_params.items()}
        with self.name_scope():
            return self.hybrid_forward(_sym, x, *args, **params)

    def hybrid_forward(self, F, x, *args, **kwargs):
        """Override: the computation, written with `F` (symjit.ndarray or symjit.symbol)."""
        raise NotImplementedError


def _np_outputs(out):
    """A block's (nested) outputs with NumPy semantics: arrays as `mx.np.ndarray`, symbols as
    `mx.sym.np._Symbol` (what MXNet's blocks return under `npx.set_np()`)."""
    if type(out) is _NpArray:
        return out
    if isinstance(out, (list, tuple)):
        return type(out)(_np_outputs(o) for o in out)
    if isinstance(out, NDArray):
        return as_np(out)
    if isinstance(out, Symbol):
        return out.as_np_ndarray()
    return out


def _read_only(x: NDArray) -> NDArray:
    """An NDArray over `x`'s memory that refuses writes (what op hooks are handed)."""
    view = x._data.view()
    view.flags.writeable = False
    return NDArray(view, x._ctx)


def _run_op_by_op(sym, feeds: dict, who: str = "hybridized block", hook=None,
                  monitor_all: bool = False) -> list:
    """The outputs of `sym` computed by applying its nodes one by one as NDArray ops (each
    recorded by autograd when recording), variables taking their values from `feeds` (name ->
    NDArray). `hook(name, op name, NDArray)` (an op hook, see `register_op_hook`), when given,
    sees every output of every node as it is computed (`<node>_<output name>`) and, with
    `monitor_all`, before that each of the node's inputs (`<node>_<input name>`)."""
    from ..ndarray import invoke
    from ..symbol.symbol import topo_nodes
    values: dict[int, list] = {}
    for node in topo_nodes(sym._outputs):
        if node.is_variable:
            if node.name not in feeds:
                raise MXNetError(f"{who}: no value for variable {node.name!r}")
            values[id(node)] = [feeds[node.name]]
            continue
        ins = [values[id(c)][i] for c, i in node.inputs]
        if hook is not None and monitor_all:
            for name, x in zip(node.op.monitor_input_names(node.parsed), ins):
                hook(f"{node.name}_{name}", node.op.name, _read_only(x))
        attrs = {k: v for k, v in node.attrs.items() if k in node.op.params}
        outs = values[id(node)] = invoke(node.op.name, ins, attrs, all_outputs=True)
        if hook is not None:
            for i, y in enumerate(outs):
                hook(node.output_name(i), node.op.name, _read_only(y))
    return [values[id(n)][i] for n, i in sym._outputs]


# --------------------------------------------------------------------------------------------
# SymbolBlock
# --------------------------------------------------------------------------------------------

def _common_prefix(names):
    if not names:
        return ""
    prefix = names[0]
    for name in names:
        i = 0
        while i < len(prefix) and i < len(name) and prefix[i] == name[i]:
            i += 1
        prefix = prefix[:i]
    return prefix


class SymbolBlock(HybridBlock):
    """A Block running a Symbol: `outputs` computed from `inputs` (variables); every other
    argument / auxiliary state of the Symbol becomes a Parameter (aux states with grad_req null).

    Always runs through the compiled CachedOp when hybridized; when not hybridized the Symbol's
    nodes are applied one by one as NDArray ops (imperative execution, one tape node per op)."""

    @staticmethod
    def imports(symbol_file, input_names, param_file=None, ctx=None, allow_missing=False,
                ignore_extra=False):
        """Load a model exported by `HybridBlock.export` (MXNet's or symjit's)."""
        sym = _sym.load(symbol_file)
        if isinstance(input_names, str):
            input_names = [input_names]
        var = _sym.np.var if is_np_array() else _sym.var
        if param_file is None:
            inputs = [var(i, dtype="float32") for i in input_names]
        else:
            inputs = [var(i) for i in input_names]
        ret = SymbolBlock(sym, inputs)
        if param_file is not None:
            ret.collect_params().load(param_file, ctx, allow_missing, ignore_extra, cast_dtype=True,
                                      dtype_source="saved")
        return ret

    def __repr__(self):
        s = "{name}(\n{modstr}\n)"
        modstr = "\n".join(["  {block} : {numinputs} -> {numoutputs}".format(
            block=self._cached_graph[1], numinputs=len(self._cached_graph[0]),
            numoutputs=len(self._cached_graph[1].list_outputs()))])
        return s.format(name=self.__class__.__name__, modstr=modstr)

    def __init__(self, outputs, inputs, params=None):
        super().__init__(prefix=None, params=None)
        self._prefix = ""
        self._params = ParameterDict("", params)
        if isinstance(inputs, Symbol) and len(inputs.list_outputs()) == 1:
            inputs = [inputs]
        if isinstance(outputs, (list, tuple)) and len(outputs) == 1:
            outputs = outputs[0]
        syms, self._in_format = _flatten(inputs, "input")
        out, self._out_format = _flatten(outputs, "output")
        out = _sym.Group(out)
        for j in out.get_internals():   # MXNet: SymbolBlocks take no row_sparse Parameters
            if j.attr("__storage_type__") == str(_STORAGE_TYPE_STR_TO_ID["row_sparse"]):
                raise ParameterAssertionError(f"SymbolBlock doesn't support Parameter '{j.name}' because "
                                              "its storage type is 'row_sparse'.")
        input_names = set()
        for i in syms:
            if not isinstance(i, Symbol) or len(i.list_outputs()) != 1 or i.list_arguments() != [i.name]:
                raise ParameterAssertionError(
                    f"Input symbols must be variable, but {i} is an output of operators")
            input_names.add(i.name)
        for i in out.list_arguments():
            if i not in input_names:
                self.params.get(i, allow_deferred_init=True)
        for i in out.list_auxiliary_states():
            if i not in input_names:
                self.params.get(i, grad_req="null", allow_deferred_init=True)
        self._cached_graph = syms, out
        len_prefix = len(_common_prefix(list(self._params.keys())))
        self._reg_params = {key[len_prefix:]: val for key, val in self._params.items()}

    def _forward(self, x, *args):
        fast = self._fast_call
        if fast is not None and self._callback is None:
            out = fast(x, args)
            if out is not None:
                return out
        if isinstance(x, NDArray):
            with x.context:
                if self._active:
                    return self._call_cached_op(x, *args)
                return self._call_imperative(x, *args)
        flat, fmt = _flatten([x] + list(args), "input")
        if not all(isinstance(a, Symbol) for a in flat):
            raise MXNetError("SymbolBlock: inputs must be all NDArrays or all Symbols")
        ret = self._cached_graph[1].copy()
        ret._compose(**{k.name: v for k, v in zip(self._cached_graph[0], flat)})
        return _regroup(list(ret), self._out_format)[0]

    def _clear_cached_op(self):
        tmp = self._cached_graph
        super()._clear_cached_op()
        self._cached_graph = tmp

    def _ensure_initialized(self, *args):
        try:
            for p in self.params.values():
                p.data(_input_context(_flatten(args, "input")[0]))
        except DeferredInitializationError:
            self._deferred_infer_shape(*args)
            for p in self.params.values():
                p._finish_deferred_init()

    def _call_imperative(self, *args):
        """Apply the Symbol's nodes one by one as NDArray ops (recorded op by op by autograd)."""
        self._ensure_initialized(*args)
        flat, fmt = _flatten(args, "input")
        if fmt != self._in_format and not _compatible_format(fmt, self._in_format):
            raise ParameterValueError(
                "The argument structure of HybridBlock does not match the cached version. Stored "
                f"format = {self._in_format}, input format = {fmt}")
        ctx = _input_context(flat)
        inputs, out = self._cached_graph
        feeds = {v.name: a for v, a in zip(inputs, flat)}
        params = {p.name: p for p in self.params.values()}
        feeds.update((n, params[n].data(ctx)) for n in out.list_inputs() if n not in feeds and n in params)
        return _regroup(_run_op_by_op(out, feeds, "SymbolBlock"), self._out_format)[0]

    def cast(self, dtype):
        self._clear_cached_op()
        super().cast(dtype)

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError
