"""Executor: a Symbol bound to arrays (MXNet 1.x `Symbol.bind` / `simple_bind`).

Binding lowers the Symbol to the IR, infers every type from the bound arrays, verifies the
graph and compiles it on the backend chosen by `select_backend()` — the single place where
the execution backend is decided. When any gradient is requested, the backward graph is built
once by the autodiff pass; `forward` then keeps exactly the forward values it reads. Executors
binding the same symbol to the same shapes share that work (`executor_cache`).

Semantics (as MXNet): bound arrays are used by reference (`arg_dict['x'][:] = ...` changes the
next forward's input); `forward(is_train=True)` lets BatchNorm update its moving statistics
in the aux arrays; `backward(out_grads)` writes gradients per grad_req ('write' overwrites,
'add' accumulates, 'null' skips); out_grads default to ones.
"""
from __future__ import annotations

import os
from typing import Callable, Mapping, Sequence

import numpy as np

from .base import MXNetError, canonical_dtype, real_array
from .context import Context, current_context
from .ir.graph import Graph, TensorType
from .ir.interpreter import RunResult, run
from .native import backend_choice, interpreted_calls, native_runtime
from .executor_cache import bound_program
from .passes.autodiff import GRAD_REQS
from .passes.infer import infer_types
from .ndarray.ndarray import NDArray
from .ndarray.write_guard import writable
from .util import is_np_shape

__all__ = ["Executor", "select_backend", "Backend", "InterpreterBackend", "LLVMBackend"]


class Backend:
    """An execution backend: `compile(graph)` returns `fn(feeds, is_train, keep) -> RunResult`."""
    name = "backend"

    def compile(self, graph: Graph) -> Callable[..., RunResult]:
        raise NotImplementedError


class InterpreterBackend(Backend):
    """The numpy reference interpreter (`symjit.ir.interpreter`)."""
    name = "interp"

    def compile(self, graph: Graph) -> Callable[..., RunResult]:
        def fn(feeds, is_train=False, keep=()):
            return run(graph, feeds, is_train=is_train, keep=keep)
        return fn


class LLVMBackend(Backend):
    """Native CPU code: the pass pipeline, LLVM codegen and the C runtime
    (`symjit.codegen.llvm.backend`); nodes without a native lowering run their reference
    implementation between native segments."""
    name = "llvm"

    def compile(self, graph: Graph) -> Callable[..., RunResult]:
        from .codegen.llvm.backend import compile_for_executor
        return compile_for_executor(graph)


#: a graph whose values hold at most this many elements in all is "small": interpreting it once
#: costs far less than compiling it natively (tens of milliseconds of LLVM per graph)
SMALL_GRAPH_ELEMENTS = 1 << 22


def _graph_elements(graph: Graph) -> int:
    total = 0
    for v in graph.values():
        n = 1
        for d in v.type.shape or ():
            n *= int(d)
        total += n
    return total


class TieredFunction:
    """A graph's run function that starts on the reference interpreter and moves to `compiled`
    (a backend's function, built lazily) after `interpret` calls. An executor bound and run
    once (one of many shapes in a sweep, a one-off evaluation) then never pays for a native
    compile that costs far more than interpreting it; a hot one is native from its next call.

    Invariant: results do not depend on the tier (the interpreter is the reference the native
    code is tested against); graphs with random ops never start interpreted, so that one
    seeded stream feeds every call of an executor."""

    def __init__(self, graph: Graph, compiled: Callable[..., RunResult], interpret: int):
        self._graph = graph
        self._compiled = compiled
        self._left = interpret

    @property
    def interpreting(self) -> bool:
        return self._left > 0

    def __call__(self, feeds, is_train: bool = False, keep=(), **kwargs) -> RunResult:
        if self._left > 0:
            self._left -= 1
            return run(self._graph, feeds, is_train=is_train, keep=keep)
        return self._compiled(feeds, is_train=is_train, keep=keep, **kwargs)

    def __getattr__(self, name):
        # native entry points (`fast`, `accepts_out`, ...) are offered only once native code runs
        if name in ("fast", "accepts_out") and self._left > 0:
            raise AttributeError(name)
        return getattr(self._compiled, name)


def _compile(backend: Backend, graph: Graph) -> Callable[..., RunResult]:
    """`backend.compile(graph)`, tiered (see TieredFunction) for small graphs without random
    ops when the backend is native."""
    fn = backend.compile(graph)
    if isinstance(backend, InterpreterBackend) or any(n.op.is_random for n in graph.nodes):
        return fn
    interpret = interpreted_calls()
    if interpret and _graph_elements(graph) <= SMALL_GRAPH_ELEMENTS:
        return TieredFunction(graph, fn, interpret)
    return fn


def select_backend() -> Backend:
    """The execution backend: the one place the choice is made.

    `SYMJIT_BACKEND=interp` forces the reference interpreter; `llvm` and `auto` (the default)
    are the native CPU backend, which needs the native runtime: when it cannot be loaded this
    raises MXNetError with the reason (`native_runtime`), never falling back silently.
    """
    if backend_choice() == "interp":
        return InterpreterBackend()
    native_runtime()
    return LLVMBackend()


def group_contexts(symbol, names, ctx: Context, group2ctx) -> list:
    """The context of each input in `names` under MXNet's model parallelism: an input whose
    variable carries a `ctx_group` attribute (set with `AttrScope(ctx_group=...)`) lives on
    `group2ctx[group]`, every other one on `ctx`."""
    if not group2ctx:
        return [ctx] * len(names)
    attrs = symbol.attr_dict()
    out = []
    for name in names:
        group = attrs.get(name, {}).get("__ctx_group__")
        place = group2ctx.get(group, ctx) if group is not None else ctx
        if not isinstance(place, Context):
            raise MXNetError(f"group2ctx[{group!r}] must be a Context, got {type(place).__name__}")
        out.append(place)
    return out


#: MXNet's storage type ids, as a variable's `__storage_type__` attribute may hold them
_STYPE_BY_ID = {"-1": "default", "0": "default", "1": "row_sparse", "2": "csr"}


def storage_types(symbol, names, stype_dict=None) -> list:
    """The storage type of each input in `names`: `stype_dict[name]` when given, else its
    variable's `stype` (the `__storage_type__` attribute, by MXNet's id or name), else 'default'."""
    attrs = symbol.attr_dict()
    out = []
    for name in names:
        st = (stype_dict or {}).get(name) or attrs.get(name, {}).get("__storage_type__", "default")
        st = _STYPE_BY_ID.get(str(st), str(st))
        if st not in ("default", "row_sparse", "csr"):
            raise MXNetError(f"bind: unknown storage type {st!r} for {name!r}; expected default, "
                             "row_sparse or csr")
        out.append(st)
    return out


def gradient_storage(stype: str) -> str:
    """The storage of the gradient of an input of storage `stype`: row_sparse for a row_sparse
    weight (what MXNet's storage inference gives for dot and the sparse embeddings), else dense."""
    return "row_sparse" if stype == "row_sparse" else "default"


def _ctx(ctx) -> Context:
    if ctx is None:
        return current_context()
    if isinstance(ctx, str):
        return Context(ctx)
    if isinstance(ctx, (list, tuple)) and ctx:
        return _ctx(ctx[0])
    if not isinstance(ctx, Context):
        raise MXNetError(f"expected a Context such as mx.cpu(), got {ctx!r}")
    return ctx


def _as_list(what: str, names: Sequence[str], given, allow_missing: bool) -> list:
    """Arrays given as a list (in `names` order) or a dict (by name) -> list with None gaps."""
    if given is None:
        return [None] * len(names)
    if isinstance(given, Mapping):
        # names that are not arguments are ignored, as MXNet does (a dict may serve several symbols)
        out = [given.get(n) for n in names]
        if not allow_missing:
            missing = [n for n, a in zip(names, out) if a is None]
            if missing:
                raise MXNetError(f"bind: {what} is missing {missing}")
        return out
    out = list(given)
    if len(out) != len(names):
        raise MXNetError(f"bind: {what} has {len(out)} arrays, expected {len(names)} for {list(names)}")
    return out


def _resized(old, shape, ctx):
    """An array of `shape` over the memory of `old` when it is large enough (MXNet's reshape
    shares memory that way), else a new zero array."""
    from . import ndarray as nd
    size = int(np.prod(shape))
    if size <= old.size:
        return nd.NDArray(old._data.reshape(-1)[:size].reshape(shape), ctx)
    return nd.zeros(shape, ctx, old.dtype)


def _grad_reqs(names: Sequence[str], grad_req) -> list[str]:
    if isinstance(grad_req, str):
        reqs = [grad_req] * len(names)
    elif isinstance(grad_req, Mapping):   # unlisted arguments: 'null'; unknown names ignored (MXNet)
        reqs = [grad_req.get(n, "null") for n in names]
    else:
        reqs = list(grad_req)
        if len(reqs) != len(names):
            raise MXNetError(f"bind: grad_req has {len(reqs)} entries for {len(names)} arguments")
    for n, r in zip(names, reqs):
        if r not in GRAD_REQS:
            raise MXNetError(f"bind: grad_req for {n!r} must be one of {GRAD_REQS}, got {r!r}")
    return reqs


class FailedOutput(NDArray):
    """An output of a forward that failed: reading its values raises the error of the op that
    failed (MXNet runs ops asynchronously, so their errors surface where the output is read)."""
    __slots__ = ("_error",)

    def __init__(self, data: np.ndarray, ctx: Context, error: MXNetError):
        super().__init__(data, ctx)
        self._error = error

    def _fail(self, *args, **kwargs):
        raise self._error.with_traceback(None)

    asnumpy = asscalar = wait_to_read = __array__ = _fail

    def __repr__(self):
        return f"<FailedOutput {'x'.join(map(str, self.shape))} @{self.context}: {self._error}>"


class Executor:
    """A bound symbol: arrays in, forward/backward out (MXNet 1.x Executor API)."""

    def __init__(self, symbol, ctx: Context, arg_arrays: list, grad_arrays: list, grad_reqs: list,
                 aux_arrays: list):
        from . import ndarray as nd
        self._symbol = symbol
        self._ctx = ctx
        # MXNet decides its graph-level CSE when binding (see get_optimized_symbol)
        self._eliminate_common_expr = os.environ.get("MXNET_ELIMINATE_COMMON_EXPR", "1").strip() != "0"
        self._arg_names = symbol.list_arguments()
        self._aux_names = symbol.list_auxiliary_states()
        self._out_names = symbol.list_outputs()
        for what, names, arrays in (("args", self._arg_names, arg_arrays), ("aux_states", self._aux_names, aux_arrays)):
            for n, a in zip(names, arrays):
                if not isinstance(a, nd.NDArray):
                    raise MXNetError(f"bind: {what}[{n!r}] must be an NDArray, got {type(a).__name__}")
        self.arg_arrays = list(arg_arrays)
        self.aux_arrays = list(aux_arrays)
        self._grad_reqs = [r if g is not None else "null" for r, g in zip(grad_reqs, grad_arrays)]
        # the given arrays stay visible (grad_dict) even where req is 'null': MXNet keeps them
        # and never writes them
        self.grad_arrays = list(grad_arrays)
        for n, a, g in zip(self._arg_names, self.arg_arrays, self.grad_arrays):
            if g is not None and g.shape != a.shape:
                raise MXNetError(f"bind: gradient array for {n!r} has shape {g.shape}, the argument {a.shape}")
        inputs = list(zip(self._arg_names + self._aux_names, self.arg_arrays + self.aux_arrays))
        program = bound_program(symbol, str(ctx), select_backend(), _compile,
                                (self._eliminate_common_expr, is_np_shape(), interpreted_calls()),
                                {n: tuple(a.shape) for n, a in inputs},
                                {n: np.dtype(a.dtype).name for n, a in inputs},
                                tuple(r != "null" for r in self._grad_reqs))
        self._backend = program.backend
        graph = self._graph = program.graph
        self._forward_fn = program.forward_fn
        self._backward_graph, self._bstats = program.backward_graph, program.bstats
        self._backward_fn = program.backward_fn
        self._saved: dict | None = None
        self.outputs = [nd.zeros(v.type.shape, ctx, v.type.dtype) for v in graph.outputs]
        self._fast_io = None  # (input buffers, output buffers, names) of the inference fast path
        self._monitor = None  # (callback, monitor_all) of set_monitor_callback

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def bind(cls, symbol, ctx, args, args_grad=None, grad_req="write", aux_states=None) -> "Executor":
        ctx = _ctx(ctx)
        arg_names, aux_names = symbol.list_arguments(), symbol.list_auxiliary_states()
        arg_arrays = _as_list("args", arg_names, args, allow_missing=False)
        missing = [n for n, a in zip(arg_names, arg_arrays) if a is None]
        if missing:
            raise MXNetError(f"bind: args is missing {missing}")
        if aux_names and aux_states is None:
            raise MXNetError(f"bind: the symbol has auxiliary states {aux_names}; pass aux_states")
        aux_arrays = _as_list("aux_states", aux_names, aux_states, allow_missing=False)
        grad_arrays = _as_list("args_grad", arg_names, args_grad, allow_missing=True)
        reqs = _grad_reqs(arg_names, grad_req)
        return cls(symbol, ctx, arg_arrays, grad_arrays, reqs, aux_arrays)

    @classmethod
    def simple_bind(cls, symbol, ctx, grad_req="write", type_dict=None, group2ctx=None, stype_dict=None,
                    **shapes) -> "Executor":
        """Allocate zero-filled arrays of the shapes (and dtypes) inferred from `shapes`, each
        on its `group2ctx` context (`group_contexts`) in its storage type (`storage_types`)."""
        from . import ndarray as nd
        from .symbol.lower import lower
        ctx = _ctx(ctx)
        # only tuple (or list) values are shapes; MXNet ignores other keyword arguments (force_rebind=...)
        shapes = {k: v for k, v in shapes.items() if isinstance(v, (tuple, list))}
        graph, _ = lower(symbol, device=str(ctx))
        known_inputs = {v.name for v in graph.inputs}
        # MXNet reads only tuple values as shapes and ignores any other keyword (an op's
        # attribute passed along, `axis=0`)
        shapes = {k: v for k, v in shapes.items() if isinstance(v, (tuple, list))}
        for k in list(shapes) + list(type_dict or {}):
            if k not in known_inputs:
                raise MXNetError(f"simple_bind: {k!r} is not an input of the symbol; inputs are {sorted(known_inputs)}")
        dtypes = {k: np.dtype(canonical_dtype(v)).name for k, v in (type_dict or {}).items()}
        graph, _ = infer_types(graph, shapes={k: tuple(v) for k, v in shapes.items()}, dtypes=dtypes)
        # MXNet's default dtype: float32 for inputs nothing determines
        defaults = {v.name: "float32" for v in graph.inputs if v.type.dtype is None}
        if defaults:
            graph, _ = infer_types(graph, dtypes=defaults)
        missing = [v.name for v in graph.inputs if not v.type.shape_known]
        if missing:
            raise MXNetError(f"simple_bind: cannot infer the shapes of {missing}; give their shapes "
                             f"(given: {shapes})")

        def alloc(t: TensorType, where: Context, stype: str):
            return nd.zeros(t.shape, where, t.dtype, stype=stype)
        arg_names, aux_names = [v.name for v in graph.args], [v.name for v in graph.aux]
        arg_ctx = group_contexts(symbol, arg_names, ctx, group2ctx)
        aux_ctx = group_contexts(symbol, aux_names, ctx, group2ctx)
        arg_st = storage_types(symbol, arg_names, stype_dict)
        args = [alloc(v.type, c, st) for v, c, st in zip(graph.args, arg_ctx, arg_st)]
        aux = [alloc(v.type, c, st) for v, c, st in zip(graph.aux, aux_ctx, storage_types(symbol, aux_names))]
        reqs = _grad_reqs(symbol.list_arguments(), grad_req)
        grads = [alloc(v.type, c, gradient_storage(st)) if r != "null" else None
                 for v, c, st, r in zip(graph.args, arg_ctx, arg_st, reqs)]
        return cls(symbol, ctx, args, grads, reqs, aux)

    # ---- dictionaries -------------------------------------------------------------------------
    @property
    def arg_dict(self) -> dict:
        return dict(zip(self._arg_names, self.arg_arrays))

    @property
    def grad_dict(self) -> dict:
        return {n: g for n, g in zip(self._arg_names, self.grad_arrays) if g is not None}

    @property
    def aux_dict(self) -> dict:
        return dict(zip(self._aux_names, self.aux_arrays))

    @property
    def output_dict(self) -> dict:
        return dict(zip(self._out_names, self.outputs))

    @property
    def symbol(self):
        return self._symbol

    # ---- execution ------------------------------------------------------------------------------
    def forward(self, is_train: bool = False, **kwargs) -> list:
        """Run the graph; `kwargs` (name -> array) are copied into the argument arrays first."""
        from .ndarray import NDArray
        if any(isinstance(o, FailedOutput) for o in self.outputs):
            self.outputs = [NDArray(o._data, o.context) for o in self.outputs]
            self._fast_io = None
        fast = getattr(self._forward_fn, "fast", None)
        if fast is not None and not kwargs and not is_train and self._bstats is None:
            # inference fast path: the bound buffers go straight to native code
            if self._fast_io is None:
                self._fast_io = ([a._data for a in self.arg_arrays + self.aux_arrays],
                                 [o._data for o in self.outputs], self._arg_names + self._aux_names)
            try:
                done = self._monitor is None and fast(*self._fast_io)
            except MXNetError as e:
                return self._fail_outputs(e)
            if done:
                self._saved = None
                return self.outputs
        arg_dict = self.arg_dict
        for k, v in kwargs.items():
            if k not in arg_dict:
                raise MXNetError(f"forward: unknown argument {k!r}; arguments are {self._arg_names}")
            target = arg_dict[k]
            data = v._data if isinstance(v, NDArray) else real_array(v, f"forward: argument {k!r}")
            if tuple(data.shape) != target.shape:
                raise MXNetError(f"forward: shape of {k!r} is {tuple(data.shape)}, the executor was bound "
                                 f"with {target.shape}; use reshape() for new shapes")
            writable(target._data)[...] = data
        feeds = {v: a._data for v, a in zip(self._graph.args, self.arg_arrays)}
        feeds.update({v: a._data for v, a in zip(self._graph.aux, self.aux_arrays)})
        keep = [f for f, _ in self._bstats.saved] if self._bstats is not None else []
        try:
            if getattr(self._forward_fn, "accepts_out", False):
                # native code writes straight into the output arrays (no copy)
                result = self._forward_fn(feeds, is_train=bool(is_train), keep=keep,
                                          out=[o._data for o in self.outputs])
            else:
                result = self._forward_fn(feeds, is_train=bool(is_train), keep=keep)
        except MXNetError as e:
            return self._fail_outputs(e)
        for i, r in enumerate(result.outputs):
            out = self.outputs[i]
            if r is out._data:
                continue
            if out.shape == tuple(r.shape) and out._data.dtype == r.dtype:
                out._data[...] = r
            else:
                self.outputs[i] = NDArray(np.ascontiguousarray(r), self._ctx)
                self._fast_io = None  # the fast path must write into the new arrays
        if is_train:
            index = {v: i for i, v in enumerate(self._graph.aux)}
            for v, new in result.aux_updates.items():
                arr = self.aux_arrays[index[v]]
                writable(arr._data)[...] = new.astype(arr._data.dtype, copy=False)
        self._saved = result.kept if self._bstats is not None else None
        if self._monitor is not None:
            self._run_monitor(bool(is_train))
        return self.outputs

    def _fail_outputs(self, error: MXNetError) -> list:
        """A failed forward, as MXNet's asynchronous engine reports it: forward returns and
        reading an output (asnumpy, wait_to_read, ...) raises the op's error."""
        self._saved = None
        self._fast_io = None
        self.outputs = [FailedOutput(o._data, o.context, error) for o in self.outputs]
        return self.outputs

    def _saved_for_backward(self) -> dict:
        """The forward values the backward reads: those the last training forward kept; without
        one, a backward that reads only bound inputs reads them now (as MXNet, whose backward
        of e.g. `repeat` needs no forward)."""
        if self._saved is not None:
            return self._saved
        bound = dict(zip(self._graph.args, self.arg_arrays))
        bound.update(zip(self._graph.aux, self.aux_arrays))
        if any(f not in bound for f, _ in self._bstats.saved):
            raise MXNetError("backward: call forward(is_train=True) before backward()")
        return {f: bound[f]._data for f, _ in self._bstats.saved}

    def backward(self, out_grads=None, is_train: bool = True) -> None:
        """Gradients of the outputs (weighted by `out_grads`, default ones) into `grad_arrays`."""
        from .ndarray import NDArray
        if self._backward_graph is None:
            return
        saved = self._saved_for_backward()
        if out_grads is None:
            heads = [np.ones(v.type.shape, v.type.dtype) for v in self._graph.outputs]
        else:
            if isinstance(out_grads, (NDArray, np.ndarray)):
                out_grads = [out_grads]
            out_grads = list(out_grads)
            if len(out_grads) < len(self._graph.outputs):
                raise MXNetError(f"backward: got {len(out_grads)} out_grads for {len(self._graph.outputs)} outputs")
            out_grads = out_grads[:len(self._graph.outputs)]   # MXNet reads one per output, ignores the rest
            heads = []
            unread = self._unread_head_grads()
            for v, g, hv in zip(self._graph.outputs, out_grads, self._bstats.head_grads):
                data = g._data if isinstance(g, NDArray) else real_array(g, "backward: out_grads")
                if tuple(data.shape) != tuple(v.type.shape) and hv in unread:
                    data = np.zeros(v.type.shape, v.type.dtype)   # never read (MXNet checks no shape)
                if tuple(data.shape) != tuple(v.type.shape):
                    raise MXNetError(f"backward: out_grad for %{v.name} has shape {tuple(data.shape)}, "
                                     f"expected {tuple(v.type.shape)}")
                heads.append(data.astype(v.type.dtype, copy=False))
        st = self._bstats
        feeds = {b: saved[f] for f, b in st.saved}
        feeds.update(dict(zip(st.head_grads, heads)))
        arg_index = {v: i for i, v in enumerate(self._graph.args)}
        result = self._backward_fn(feeds, is_train=bool(is_train))
        for (f, _), g in zip(st.grad_outputs, result.outputs):   # the program's gradients are 'write'
            i = arg_index[f]
            buf = self.grad_arrays[i]
            if self._grad_reqs[i] == "add":
                buf._data += g.astype(buf._data.dtype, copy=False)
            else:
                buf._data[...] = g.astype(buf._data.dtype, copy=False)
        if self._monitor is not None:
            self._run_monitor_backward(heads)

    def _unread_head_grads(self) -> set:
        """The backward graph's head-gradient inputs that no node reads and no output is (the
        gradient of an output whose op ignores its head gradient, e.g. MultiProposal)."""
        bwd = self._backward_graph
        read = set(bwd.consumers()) | set(bwd.outputs)
        return {v for v in self._bstats.head_grads if v not in read}

    # ---- parameters and reshaping -----------------------------------------------------------------
    def copy_params_from(self, arg_params: Mapping, aux_params: Mapping | None = None,
                         allow_extra_params: bool = False) -> None:
        """Copy values from dicts of arrays into the bound argument / aux arrays."""
        for table, target, what in ((arg_params, self.arg_dict, "arg_params"),
                                    (aux_params or {}, self.aux_dict, "aux_params")):
            for name, arr in table.items():
                if name in target:
                    dst = target[name]
                    data = arr._data if hasattr(arr, "_data") else real_array(arr, f"copy_params_from: {name!r}")
                    if tuple(data.shape) != dst.shape:
                        raise MXNetError(f"copy_params_from: {what}[{name!r}] has shape {tuple(data.shape)}, "
                                         f"expected {dst.shape}")
                    dst._data[...] = data.astype(dst._data.dtype, copy=False)
                elif not allow_extra_params:
                    raise MXNetError(f"copy_params_from: {name!r} in {what} is not a parameter of the symbol")

    def reshape(self, partial_shaping: bool = False, allow_up_sizing: bool = False, **kwargs) -> "Executor":
        """A new executor for new input shapes; arrays whose shape is unchanged are shared."""
        from .symbol.lower import lower
        graph, _ = lower(self._symbol, device=str(self._ctx))
        current = list(self.arg_dict.items()) + list(self.aux_dict.items())
        graph, _ = infer_types(graph, shapes={k: tuple(v) for k, v in kwargs.items()},
                               dtypes={n: np.dtype(a.dtype).name for n, a in current})
        # inputs the new shapes do not determine keep their current shape
        keep = {n: a.shape for n, a in current if not graph.value_by_name(n).type.shape_known}
        if keep:
            graph, _ = infer_types(graph, shapes=keep)
        args, grads, aux = [], [], []
        for v, old, g in zip(graph.args, self.arg_arrays, self.grad_arrays):
            if not v.type.shape_known:
                raise MXNetError(f"reshape: cannot infer the shape of {v.name!r}")
            new_shape = tuple(v.type.shape)
            if new_shape == old.shape:
                args.append(old)
                grads.append(g)
                continue
            if v.name not in kwargs and not partial_shaping:
                raise MXNetError(f"reshape: the shape of {v.name!r} changes from {old.shape} to {new_shape}; "
                                 "pass partial_shaping=True to allow it")
            if int(np.prod(new_shape)) > old.size and not allow_up_sizing:
                raise MXNetError(f"reshape: {v.name!r} grows from {old.shape} to {new_shape}; pass "
                                 "allow_up_sizing=True to allocate a larger array")
            args.append(_resized(old, new_shape, self._ctx))
            grads.append(None if g is None else _resized(g, new_shape, self._ctx))
        for v, old in zip(graph.aux, self.aux_arrays):
            new_shape = tuple(v.type.shape or ())
            if new_shape == old.shape:
                aux.append(old)
            elif not partial_shaping:
                raise MXNetError(f"reshape: the shape of auxiliary state {v.name!r} changes from {old.shape} "
                                 f"to {new_shape}; pass partial_shaping=True to allow it")
            else:
                aux.append(_resized(old, new_shape, self._ctx))
        new = Executor(self._symbol, self._ctx, args, grads, list(self._grad_reqs), aux)
        new.outputs = [_resized(old, o.shape, self._ctx) if np.dtype(old.dtype) == np.dtype(o.dtype) else o
                       for old, o in zip(self.outputs, new.outputs)]
        if self._monitor is not None:   # MXNet's reshaped executor keeps the monitor callback
            new.set_monitor_callback(*self._monitor)
        return new

    def get_optimized_symbol(self):
        """The bound symbol after MXNet's graph-level optimization: common-subexpression
        elimination unless MXNET_ELIMINATE_COMMON_EXPR=0 when it was bound (see `symbol.cse`)."""
        if not self._eliminate_common_expr:
            return self._symbol
        from .symbol.cse import eliminate_common_expr
        return eliminate_common_expr(self._symbol)

    def allocated_bytes(self) -> int:
        """Memory this executor holds beyond the bound arrays: its outputs plus the forward
        values it keeps for backward (computed ones; bound inputs are referenced, not copied)."""
        def nbytes(v):
            return int(np.prod(v.type.shape, dtype=np.int64)) * np.dtype(v.type.dtype).itemsize
        inputs = set(self._graph.args) | set(self._graph.aux)
        kept = [f for f, _ in self._bstats.saved if f not in inputs] if self._bstats is not None else []
        return sum(nbytes(v) for v in self._graph.outputs) + sum(nbytes(v) for v in kept)

    def debug_str(self) -> str:
        """The forward (and backward) graph, then MXNet's summary line `Total N MB allocated`
        (see `allocated_bytes`)."""
        from .ir.printer import format_graph
        text = format_graph(self._graph)
        if self._backward_graph is not None:
            text += "\n" + format_graph(self._backward_graph)
        return text + f"\nTotal {self.allocated_bytes() // (1 << 20)} MB allocated\n"

    def set_monitor_callback(self, callback, monitor_all: bool = False) -> None:
        """After each forward, call `callback(name, NDArray)` for every operator output (named as
        `get_internals()` names them, e.g. 'fc1_output') and, with `monitor_all`, every argument
        and auxiliary state; after each backward, for the gradient along every operator input
        (`<node>_backward_<input>`, see `symbol.probes`). The outputs come from a second executor over the internals sharing
        this one's arrays (auxiliary states restored after it, so BatchNorm statistics update
        once); a callback whose `monitor_active()` returns False is skipped at no cost."""
        if not callable(callback):
            raise MXNetError(f"set_monitor_callback: callback must be callable, got {type(callback).__name__}")
        self._monitor = (callback, bool(monitor_all))
        self._monitor_exec = None
        self._monitor_probes = None

    def _run_monitor(self, is_train: bool) -> None:
        callback, monitor_all = self._monitor
        active = getattr(callback, "monitor_active", None)
        if active is not None and not active():
            return
        if self._monitor_exec is None:
            from .symbol.probes import monitor_entries
            from .symbol.symbol import Symbol
            entries = monitor_entries(self._symbol, monitor_all)
            slots: dict = {}   # (id(node), output index) -> position among the monitor executor's outputs
            heads = []
            for e in entries:
                if not e.node.is_variable and (id(e.node), e.index) not in slots:
                    slots[(id(e.node), e.index)] = len(heads)
                    heads.append((e.node, e.index))
            self._monitor_plan = [(e.name, e.node.name if e.node.is_variable else slots[(id(e.node), e.index)])
                                  for e in entries]
            group = Symbol(heads)
            self._monitor_exec = Executor.bind(group, self._ctx, {n: self.arg_dict[n] for n in group.list_arguments()},
                                               grad_req="null",
                                               aux_states={n: self.aux_dict[n] for n in group.list_auxiliary_states()})
        saved_aux = [a._data.copy() for a in self.aux_arrays] if is_train else None
        outputs = self._monitor_exec.forward(is_train=is_train)
        if saved_aux is not None:
            for a, v in zip(self.aux_arrays, saved_aux):
                a._data[...] = v
        inputs = {**self.arg_dict, **self.aux_dict}
        for name, where in self._monitor_plan:
            callback(name, inputs[where] if isinstance(where, str) else outputs[where])

    def _run_monitor_backward(self, heads) -> None:
        """Report the gradients along every operator input edge (MXNet's backward-node outputs),
        from a probed copy of the graph run forward and backward over the same arrays."""
        callback, _ = self._monitor
        active = getattr(callback, "monitor_active", None)
        if active is not None and not active():
            return
        from . import ndarray as nd
        from .symbol.probes import probe_symbol
        if self._monitor_probes is None:
            sym, probes = probe_symbol(self._symbol)
            shapes = {n: a.shape for n, a in self.arg_dict.items()}
            arg_shapes, _, _ = sym.infer_shape_partial(**shapes)
            probe_shapes = dict(zip(sym.list_arguments(), arg_shapes))
            args = dict(self.arg_dict)
            args.update({p.variable: nd.zeros(probe_shapes[p.variable], self._ctx) for p in probes})
            grads = {p.variable: nd.zeros(probe_shapes[p.variable], self._ctx) for p in probes}
            exe = Executor.bind(sym, self._ctx, args, args_grad=grads,
                                grad_req={p.variable: "write" for p in probes}, aux_states=self.aux_dict)
            self._monitor_probes = (exe, probes)
        exe, probes = self._monitor_probes
        saved_aux = [a._data.copy() for a in self.aux_arrays]
        exe.forward(is_train=True)
        for a, v in zip(self.aux_arrays, saved_aux):
            a._data[...] = v
        exe.backward([nd.NDArray(h, self._ctx) for h in heads])
        for p in probes:
            callback(p.name, exe.grad_dict[p.variable])
