"""CachedOp: a Symbol compiled once per input signature and run with one call (hybridize()).

`CachedOp(sym)` lowers `sym` to the IR on first use for each signature — the shapes and
dtypes of every input, the context and the training mode — infers every type, verifies the
graph and compiles it on the backend `symjit.executor.select_backend()` chooses (the one
place the execution backend is decided, so a native backend serves hybridized blocks too).
Later calls with the same signature reuse the compiled function; a new input shape compiles
a new entry automatically.

Autograd: under `autograd.record()`, when some argument needs a gradient, ONE tape node is
recorded whose backward runs the compiled backward graph (built once per signature and set of
differentiated arguments by the autodiff pass). The values that graph reads reach it as they
are when they are arguments (weights, data: as MXNet's autograd holds its inputs) or as copies
(aux states, which the forward updates in place); computed ones the forward returns as extra
outputs. Where the compiled code is one native Entry with nothing to do per call in Python (no
aux states, random seeds or Python nodes), the recorded forward and the backward call that Entry
directly (`_DirectForward`, `_DirectBackward`); the backward writes a gradient straight into the
`.grad` buffer the autograd engine offers (`backward_fn(ograds, out=...)`).
Higher-order gradients through a hybridized block are not recorded.

Training mode (`autograd.is_training()`) lets ops such as BatchNorm update their auxiliary
states: the new values are written in place into the aux arrays, as MXNet does.

Inference hot path: `inference_runner(args, aux)` hands out, once per signature, the compiled
inference function over plain numpy arrays (on the native backend the graph's native Entry
itself), which a hybridized block calls directly with its gathered parameter arrays
(`HybridBlock._fast_call`) without going through `__call__`. `bound_runner(args, aux, bound)`
compiles the same with the parameters bound as compile-time constants (the pipeline of
`symjit.compile(..., params=...)`); the block owns the result and decides when it is stale.
"""
from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from .. import autograd
from ..base import MXNetError
from ..ndarray import NDArray
from ..ndarray.write_guard import writable
from ..ops import get_op
from ..symbol.symbol import topo_nodes

__all__ = ["CachedOp", "BoundRunner"]


@dataclass
class _Backward:
    """The compiled backward graph for one set of differentiated arguments."""
    fn: object
    stats: object
    #: is_train -> _DirectBackward or None (made on first use)
    direct: dict = field(default_factory=dict)


@dataclass
class _DirectForward:
    """A recorded forward run as one native Entry call (see `CachedOp._direct_forward`; only
    for graphs without aux states): `order[j]` is the index in args of the Entry's input j; its
    results are the graph outputs, then the values in `computed`; `from_inputs` are the saved
    values that are graph arguments, with their index in args."""
    entry: object
    order: list
    n_out: int
    computed: list
    from_inputs: list


@dataclass
class _DirectBackward:
    """A backward run as one native Entry call: input j is `kept[source]` for a saved forward
    Value, or head gradient number `source` for an int."""
    entry: object
    sources: list
    dtypes: list


@dataclass
class _Entry:
    """One compiled signature: the typed forward graph, its function, and backward graphs."""
    graph: object
    fn: object
    backward: dict = field(default_factory=dict)  # tuple of arg indices -> _Backward
    runner: tuple | None = None  # (run, names) of inference_runner, made once
    direct: dict = field(default_factory=dict)  # (wrt, is_train) -> _DirectForward or None


class CachedOp:
    """Run `sym` (arguments in `list_arguments()` order, aux states in
    `list_auxiliary_states()` order) through compiled graphs cached per signature.

    At most `max_signatures` compiled signatures are kept (least recently used dropped first;
    their machine code is freed once nothing else, e.g. a recorded backward, still holds it),
    so a block fed ever new shapes does not grow without bound."""

    max_signatures = 64

    def __init__(self, sym, flags=()):
        self._sym = sym
        self._flags = dict(flags)
        self.arg_names = sym.list_arguments()
        self.aux_names = sym.list_auxiliary_states()
        #: arg_names + aux_names; one list for the object's lifetime (backends key on its identity)
        self.input_names = self.arg_names + self.aux_names
        self._cache: OrderedDict = OrderedDict()
        self._inlined: bool | None = None      # inlined_when_recorded, computed once
        self._node_form = None                 # symbolic_form's _CachedOp node, made on first use
        self._fingerprint = None               # the symbol's plan-cache text ("": none), made on first use

    @property
    def num_compiled(self) -> int:
        """How many compiled signatures are kept (for tests and diagnostics)."""
        return len(self._cache)

    # ---- compilation ---------------------------------------------------------------------------
    def _signature(self, args, aux, ctx, is_train):
        return (tuple((a._data.shape, a._data.dtype) for a in args),
                tuple((a._data.shape, a._data.dtype) for a in aux), ctx, bool(is_train))

    def _compile(self, args, aux, ctx) -> _Entry:
        from ..executor import select_backend
        from ..ir.graph import TensorType
        from ..ir.verify import verify
        from ..passes.infer import infer_types
        from ..symbol.lower import lower
        graph, _ = lower(self._sym, device=str(ctx))
        # the fed arrays are authoritative: `__shape__`/`__dtype__` hints of variables (e.g. of a
        # model imported and then cast to another dtype) must not conflict with them
        for v in graph.values():
            v.type = TensorType(None, None, v.type.device)
        names = self.arg_names + self.aux_names
        arrays = list(args) + list(aux)
        shapes = {n: a.shape for n, a in zip(names, arrays)}
        dtypes = {n: np.dtype(a.dtype).name for n, a in zip(names, arrays)}
        graph, _ = infer_types(graph, shapes=shapes, dtypes=dtypes)
        unknown = [f"%{v.name}" for v in graph.values() if not v.type.known]
        if unknown:
            raise MXNetError(f"hybridized block: cannot infer the type of {unknown[:8]} from the inputs "
                             f"{shapes}")
        verify(graph)
        return _Entry(graph, select_backend().compile(graph))

    def _backward_for(self, entry: _Entry, wrt: tuple) -> _Backward:
        from ..executor import select_backend
        from ..ir.verify import verify
        from ..passes.autodiff import autodiff
        bwd = entry.backward.get(wrt)
        if bwd is None:
            g = entry.graph
            graph, stats = autodiff(g, [g.args[i] for i in wrt], "write")
            verify(graph)
            bwd = _Backward(select_backend().compile(graph), stats)
            entry.backward[wrt] = bwd
        return bwd

    # ---- execution -----------------------------------------------------------------------------
    def _entry_for(self, args, aux, ctx, is_train) -> _Entry:
        """The compiled entry for this signature (compiled now when new)."""
        key = self._signature(args, aux, ctx, is_train)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._compile(args, aux, ctx)
            self._cache[key] = entry
            while len(self._cache) > self.max_signatures:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return entry

    def __call__(self, args, aux=()) -> list:
        """Run on NDArrays; returns the outputs as new NDArrays (a list)."""
        args, aux = list(args), list(aux)
        if len(args) != len(self.arg_names) or len(aux) != len(self.aux_names):
            raise MXNetError(f"CachedOp: expected {len(self.arg_names)} arguments {self.arg_names} and "
                             f"{len(self.aux_names)} aux states, got {len(args)} and {len(aux)}")
        for n, a in zip(self.arg_names + self.aux_names, args + aux):
            if not isinstance(a, NDArray):
                raise MXNetError(f"CachedOp: input {n!r} must be an NDArray, got {type(a).__name__}")
        ctx = args[0].context if args else (aux[0].context if aux else None)
        is_train = autograd.is_training()
        entry = self._entry_for(args, aux, ctx, is_train)
        g = entry.graph
        recording = autograd.is_recording()
        fast = getattr(entry.fn, "fast", None)
        if fast is not None and not recording and not is_train:
            # inference: the native entry writes into fresh output arrays, one call
            outs = [np.empty(v.type.shape, v.type.dtype) for v in g.outputs]
            if fast([np.ascontiguousarray(a._data) for a in args + aux], outs, self.input_names):
                return [NDArray(o, ctx) for o in outs]
        wrt = ()
        if recording:
            wrt = tuple(i for i, a in enumerate(args) if autograd._needs_grad(a))
        bwd = self._backward_for(entry, wrt) if wrt else None
        if bwd is not None:
            direct = entry.direct.get((wrt, is_train), False)
            if direct is False:
                direct = entry.direct[(wrt, is_train)] = self._direct_forward(entry, bwd, is_train)
            if direct is not None:   # (graphs with aux states have none)
                datas = [a._data for a in args]
                if all(d.flags.c_contiguous for d in datas):
                    res = direct.entry(*[datas[i] for i in direct.order])
                    n = direct.n_out
                    outputs = [NDArray(r, ctx) for r in res[:n]]
                    kept = {f: datas[i] for f, i in direct.from_inputs}
                    kept.update(zip(direct.computed, res[n:]))
                    self._record(bwd, [args[i] for i in wrt], outputs, kept, ctx, args + aux)
                    return outputs
        feeds = {v: a._data for v, a in zip(g.args, args)}
        feeds.update({v: a._data for v, a in zip(g.aux, aux)})
        saved = [f for f, _ in bwd.stats.saved] if bwd is not None else []
        # values the backward reads: graph inputs are passed to it as they are (as MXNet's
        # autograd holds its inputs; aux states are copied, the forward updates them in place),
        # computed ones come back from the forward as extra outputs
        keep = [f for f in saved if f not in feeds]
        aux_set = set(g.aux)
        kept = {f: (np.array(feeds[f], copy=True) if f in aux_set else feeds[f]) for f in saved if f in feeds}
        result = entry.fn(feeds, is_train=is_train, keep=keep)
        fed = _Fed(feeds.values())
        outputs = [NDArray(fed.fresh(r), ctx) for r in result.outputs]
        if is_train and result.aux_updates:
            index = {v: i for i, v in enumerate(g.aux)}
            for v, new in result.aux_updates.items():
                arr = aux[index[v]]
                writable(arr._data)[...] = np.asarray(new).astype(arr._data.dtype, copy=False)
        if bwd is not None:
            kept.update(result.kept)
            self._record(bwd, [args[i] for i in wrt], outputs, kept, ctx, args + aux)
        return outputs

    def _direct_forward(self, entry: _Entry, bwd: _Backward, is_train: bool):
        """A `_DirectForward` for recording calls of this signature, or None when the run needs
        more than one native call (random seeds, aux state updates, Python nodes) or the
        backward reads an aux state (which the generic path copies before its update)."""
        native_variant = getattr(entry.fn, "native_variant", None)
        if native_variant is None or entry.graph.aux:
            return None
        g = entry.graph
        saved = [f for f, _ in bwd.stats.saved]
        index = {v: i for i, v in enumerate(g.args)}
        computed = [f for f in saved if f not in index]
        cg = native_variant(is_train, computed)
        if cg is None or len(cg.output_specs) != len(g.outputs) + len(computed):
            return None
        pos = {v.name: i for i, v in enumerate(g.args)}
        try:
            order = [pos[name] for name, _, _ in cg.input_specs]
        except KeyError:
            return None
        return _DirectForward(cg.entry, order, len(g.outputs), computed,
                              [(f, index[f]) for f in saved if f in index])

    @staticmethod
    def _direct_backward(bwd: _Backward, is_train: bool):
        """A `_DirectBackward` for this backward graph, or None (see `_direct_forward`)."""
        native_variant = getattr(bwd.fn, "native_variant", None)
        if native_variant is None:
            return None
        cg = native_variant(is_train, [])
        if cg is None:
            return None
        st = bwd.stats
        by_name = {b.name: f for f, b in st.saved}
        by_name.update({b.name: j for j, b in enumerate(st.head_grads)})
        try:
            sources = [by_name[name] for name, _, _ in cg.input_specs]
        except KeyError:
            return None
        return _DirectBackward(cg.entry, sources, [dtype for _, _, dtype in cg.input_specs])

    def inference_runner(self, args, aux=()):
        """`(run, names)` for inference (not recording, not training) on inputs with exactly the
        signature of the NDArrays `args` / `aux` (same shapes, dtypes and context):
        `run(*arrays)` takes C-contiguous numpy arrays, one per name of `names` (graph input
        names, in the order the compiled code wants them), and returns the outputs as fresh
        numpy arrays the caller owns (a sequence, in output order).

        On the native backend `run` is the compiled graph's native Entry itself (one C call,
        which validates every array and raises MXNetError before running anything when one is
        not as compiled) unless the graph needs per-call work in Python (random seeds, Python
        nodes, state outputs). The signature's graph is compiled now if needed."""
        args, aux = list(args), list(aux)
        ctx = args[0].context if args else (aux[0].context if aux else None)
        entry = self._entry_for(args, aux, ctx, False)
        if entry.runner is None:
            entry.runner = self._make_runner(entry, args + aux)
        return entry.runner

    def bound_runner(self, args, aux, bound) -> BoundRunner | None:
        """Like `inference_runner`, but with the inputs at positions `bound` (indices into
        `input_names`) bound as compile-time constants holding their values now, through the
        pipeline `symjit.compile(..., params=...)` runs (packed weights, BatchNorm folded into
        them, Winograd-transformed filters). The bound inputs stay in `names` (`run` checks
        and ignores them). None when the backend cannot bind constants (the interpreter).

        Compiled anew on every call and not cached here: the caller keeps the result, accounts
        for its `const_bytes` and drops it when the bound values change."""
        args, aux = list(args), list(aux)
        ctx = args[0].context if args else (aux[0].context if aux else None)
        arrays = [a._data for a in args + aux]
        fixed = [arrays[i] for i in sorted(set(bound))]
        constants = {self.input_names[i]: arrays[i] for i in sorted(set(bound))}
        key = self._bound_plan_key(arrays, ctx, constants)
        if key is not None:   # a plan a previous process stored: no graph to build
            from ..codegen.llvm.backend import load_plan
            cg = load_plan(key, lambda: self._entry_for(args, aux, ctx, False).fn.bind(constants, cache=False))
            if cg is not None:
                run, names = _runner_of(cg, len(cg.output_specs))
                return BoundRunner(run, names, _own_bytes(cg.params, fixed))
        entry = self._entry_for(args, aux, ctx, False)
        bind = getattr(entry.fn, "bind", None)
        if bind is None:
            return None
        cg = bind(constants) if key is None else bind(constants, plan_key=key)
        run, names = _runner_of(cg, len(entry.graph.outputs))
        return BoundRunner(run, names, _own_bytes(cg.params, fixed))

    def _bound_plan_key(self, arrays: list, ctx, constants: dict) -> str | None:
        """The plan-cache key of this symbol's bound plan for these input arrays (None: the
        backend is not the native one, or the plan cache cannot be used)."""
        from ..native import backend_choice
        if backend_choice() == "interp":
            return None
        from ..codegen import plan_cache
        from ..codegen.llvm.backend import symbol_plan_key
        from ..symbol.fingerprint import symbol_fingerprint
        if not plan_cache.enabled():
            return None
        if self._fingerprint is None:
            try:
                self._fingerprint = symbol_fingerprint(self._sym)
            except plan_cache.Uncacheable:
                self._fingerprint = ""
        if not self._fingerprint:
            return None
        from ..util import is_np_array, is_np_shape
        return symbol_plan_key(self._fingerprint, [(n, a.shape, a.dtype) for n, a in zip(self.input_names, arrays)],
                               str(ctx), constants, np_modes=(bool(is_np_shape()), bool(is_np_array())))

    def _make_runner(self, entry: _Entry, arrays: list):
        fast = getattr(entry.fn, "fast", None)
        variants = getattr(entry.fn, "variants", None)
        if fast is not None and variants is not None:
            key = (False, ())
            if key not in variants:  # `fast` builds the inference variant on its first call
                fast([np.ascontiguousarray(a._data) for a in arrays],
                     [np.empty(v.type.shape, v.type.dtype) for v in entry.graph.outputs],
                     self.input_names)
            return _runner_of(variants[key][0], len(entry.graph.outputs))
        graph, fn = entry.graph, entry.fn
        inputs = list(graph.args) + list(graph.aux)

        def run_graph(*arrays):
            return [_fresh(o, arrays) for o in fn(dict(zip(inputs, arrays)), is_train=False).outputs]
        return run_graph, self.input_names

    @property
    def inlined_when_recorded(self) -> bool:
        """Whether MXNet would record a call op by op (it inlines graphs of at most
        `inline_limit` ops, default 2, unless `static_alloc`) rather than as one `_CachedOp`
        node. symjit runs and differentiates the compiled graph either way; this decides only
        how the recorded call reads as a graph (`symbolic_form`)."""
        if self._inlined is None:
            n_ops = sum(1 for n in topo_nodes(self._sym._outputs) if not n.is_variable)
            self._inlined = (not self._flags.get("static_alloc", False)
                             and n_ops <= int(self._flags.get("inline_limit", 2)))
        return self._inlined

    def symbolic_form(self):
        """(template Symbol, its input names) of a recorded call, as `autograd.get_symbol`
        shows it (the inputs are the arguments then the aux states): the graph itself when
        inlined, else MXNet's one `_CachedOp` node holding the graph as its subgraph."""
        if self.inlined_when_recorded:
            return self._sym, self.input_names
        if self._node_form is None:
            from ..symbol.contrib import SymbolSubgraph
            from ..symbol.symbol import Symbol, SymNode, attr_string
            op = get_op("_CachedOp")
            attrs = {k: attr_string(v) for k, v in self._flags.items() if k in op.params and k != "subgraph"}
            attrs["subgraph"] = str(SymbolSubgraph(self._sym, self.input_names))
            node = SymNode(op, "_cachedop", attrs, [(SymNode(None, n), 0) for n in self.input_names])
            self._node_form = Symbol([(node, i) for i in range(node.num_outputs())])
        return self._node_form, self.input_names

    def _record(self, bwd: _Backward, inputs: list, outputs: list, kept: dict, ctx, all_inputs: list):
        """Append one tape node whose backward runs the compiled backward graph; `inputs` are
        the differentiated ones, `all_inputs` every input (the node's symbolic form)."""
        st = bwd.stats
        out_types = [(o.shape, o._data.dtype) for o in outputs]

        def backward_fn(ograds, out=None):
            """Input gradients as NDArrays; `out`: per input, an array to write that gradient
            into (or None), honoured where the compiled backward accepts it."""
            if autograd.is_recording():  # backward with create_graph=True
                raise MXNetError("higher-order gradients (create_graph=True) through a hybridized block "
                                 "are not supported; call hybridize(False) on the block to differentiate "
                                 "its gradient")
            is_train = autograd.is_training()
            direct = bwd.direct.get(is_train, False)
            if direct is False:
                direct = bwd.direct[is_train] = self._direct_backward(bwd, is_train)
            if direct is not None:
                heads = [og._data if isinstance(og, NDArray) else np.asarray(og) for og in ograds]
                arrays = [np.ascontiguousarray(heads[s] if s.__class__ is int else kept[s], dtype)
                          for s, dtype in zip(direct.sources, direct.dtypes)]
                ids = {id(a) for a in arrays}
                if out is not None and accepts_out and not any(o is not None and id(o) in ids for o in out):
                    res = direct.entry(*arrays, out=out)
                else:
                    res = direct.entry(*arrays)
                return [NDArray(r, ctx) for r in res]
            feeds = {b: kept[f] for f, b in st.saved}
            for b, og, (shape, dtype) in zip(st.head_grads, ograds, out_types):
                data = og._data if isinstance(og, NDArray) else np.asarray(og)
                feeds[b] = data.astype(dtype, copy=False)
            # as MXNet: backward ops see the train_mode of the backward call (loss.backward(train_mode=))
            fed = _Fed(feeds.values())
            if out is not None and accepts_out and not any(o is not None and id(o) in fed.ids for o in out):
                res = bwd.fn(feeds, is_train=autograd.is_training(), out=out)
            else:
                res = bwd.fn(feeds, is_train=autograd.is_training())
            return [NDArray(fed.fresh(r), ctx) for r in res.outputs]  # copies only what aliases a feed

        accepts_out = getattr(bwd.fn, "accepts_out", False)
        backward_fn.accepts_out = True
        backward_fn.symbolic_form = lambda: self.symbolic_form() + (list(all_inputs),)  # see symbol/tape.py
        autograd.attach_outputs(autograd.Node(None, None, list(inputs), None, backward_fn=backward_fn),
                                outputs)


@dataclass
class BoundRunner:
    """An inference runner with bound constants (`CachedOp.bound_runner`): `run` and `names`
    as `inference_runner`'s; `const_bytes`: the memory its constants hold beyond the bound
    arrays themselves (packed, folded and transformed copies, precomputed values)."""
    run: object
    names: list
    const_bytes: int


def _runner_of(cg, n_outputs: int):
    """`(run, names)` over a compiled inference variant `cg` (see `inference_runner`)."""
    names = [n for n, _, _ in cg.input_specs]
    if (cg.entry is not None and not cg.module.seed_params and not cg.state_specs
            and len(cg.output_specs) == n_outputs):
        return cg.entry, names

    def run_compiled(*arrays):
        outs, _ = cg.run(list(arrays), False, None)
        return [_fresh(o, arrays) for o in outs]
    return run_compiled, names


class _Fed:
    """The arrays fed to one compiled call, for making its results caller-owned."""
    __slots__ = ("arrays", "ids")

    def __init__(self, arrays):
        self.arrays = list(arrays)
        self.ids = {id(a) for a in self.arrays}

    def fresh(self, r) -> np.ndarray:
        """`r` as an array owned by the caller: copied when it aliases a fed input buffer."""
        return _fresh(r, self.arrays, self.ids)


def _fresh(r, fed: list, fed_ids: set | None = None) -> np.ndarray:
    """`r` as an array owned by the caller: copied when it aliases a fed input buffer."""
    r = np.asarray(r)
    if r.flags.owndata and r.flags.c_contiguous and id(r) not in (
            fed_ids if fed_ids is not None else {id(f) for f in fed}):
        return r  # its own buffer, so no view of a fed array (and not a fed array itself)
    if any(np.may_share_memory(r, f) for f in fed):
        return np.array(r, copy=True)
    return np.ascontiguousarray(r)


class NDArrayCachedOp:
    """MXNet's `mx.nd.CachedOp(sym, flags=())`: call with the symbol's inputs positionally, in
    `sym.list_inputs()` order (arguments and auxiliary states as the graph lists them); returns
    one NDArray for a single output, else a list; `out=` (an NDArray or a list) receives the
    results. Compiled per input signature and differentiable under autograd, as CachedOp."""

    def __init__(self, sym, flags=()):
        self._op = CachedOp(sym, flags)
        names = sym.list_inputs()
        arg_pos = {n: i for i, n in enumerate(self._op.arg_names)}
        aux_pos = {n: i for i, n in enumerate(self._op.aux_names)}
        self._route = [("arg", arg_pos[n]) if n in arg_pos else ("aux", aux_pos[n]) for n in names]
        self._num_outputs = len(sym.list_outputs())

    def __call__(self, *inputs, out=None, **kwargs):
        if kwargs:
            raise MXNetError(f"CachedOp: unexpected keyword arguments {sorted(kwargs)}")
        if len(inputs) != len(self._route):
            raise MXNetError(f"CachedOp: expected {len(self._route)} inputs, got {len(inputs)}")
        args = [None] * len(self._op.arg_names)
        aux = [None] * len(self._op.aux_names)
        for (kind, i), x in zip(self._route, inputs):
            (args if kind == "arg" else aux)[i] = x
        outputs = self._op(args, aux)
        if out is not None:
            targets = out if isinstance(out, (list, tuple)) else [out]
            if len(targets) != len(outputs):
                raise MXNetError(f"CachedOp: out= has {len(targets)} arrays for {len(outputs)} outputs")
            for t, o in zip(targets, outputs):
                t[:] = o
            return out
        return outputs[0] if self._num_outputs == 1 else outputs


def _byte_bounds(a: np.ndarray) -> tuple[int, int]:
    bounds = getattr(getattr(np.lib, "array_utils", None), "byte_bounds", None) or np.byte_bounds
    return bounds(a)


def _own_bytes(arrays, others) -> int:
    """The bytes of the `arrays` whose memory overlaps none of `others`: `np.may_share_memory`'s
    test (address bounds; a zero-size array shares nothing) against the union of the others'
    spans, sorted once, so that many arrays cost n log n rather than one test per pair."""
    spans = sorted(_byte_bounds(o) for o in others if o.size)
    merged: list[list[int]] = []
    for lo, hi in spans:
        if merged and lo < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    ends = [hi for _, hi in merged]
    total = 0
    for a in arrays:
        if a.size:
            lo, hi = _byte_bounds(a)
            k = bisect.bisect_right(ends, lo)   # the first span ending after lo
            if k < len(merged) and merged[k][0] < hi:
                continue
        total += a.nbytes
    return total
