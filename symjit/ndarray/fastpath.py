"""Compiled kernels for large eager elementwise ops (and optimizer updates).

An eager NDArray elementwise op (or a fused optimizer update such as `sgd_mom_update`) over at
least `MIN_ELEMENTS` elements runs the same LLVM
kernel a compiled graph would (`codegen.llvm.compile_elementwise`, cached per dtype and
broadcast pattern, size-independent for flat kernels) on the runtime's thread pool, instead
of one numpy pass per primitive of its scalar expression (a kernel not compiled yet is compiled on
its use after `SYMJIT_JIT_AFTER` uses ran the reference: a one-off broadcast pattern never pays a
compile). Small arrays keep the numpy
reference (compiling is not worth it, and printed results stay the reference's digits).
Results agree with the reference within a few ulp (vectorized transcendental functions).
`SYMJIT_EAGER_JIT=0` disables the fast path.

Optimizer updates (`optimizer_ops.Update` ops) of any size >= 2 take a
kernel whose changing hyperparameters (`DYNAMIC_SCALARS`: learning rate, weight decay, gradient
rescale) are inputs broadcast from one-element arrays rather than constants, so one compiled
kernel serves every parameter, every step and every learning-rate schedule; it is looked up
by the op's structural attributes only (`_UPDATE_KERNELS`), without rebuilding expressions,
and from the optimizers' raw attributes without parsing them (`prepare_update_raw`).
`run_updates` applies prepared updates of many parameters sharing a kernel in one
multi-tensor call (`runtime.parallel_for_multi`): the optimizer's whole step is one native call.

Compute-bound ops (`COMPILED_OPS`: FullyConnected, Convolution, Deconvolution, Pooling and their
backward ops, BatchNorm with its moving statistics' updates, the fused RNN and its gradient,
softmax and log_softmax and their gradients, pick's gradient (an unhybridized loss block's)) over float32 inputs of at least `MIN_ELEMENTS` elements run as a one-node graph
compiled through the same pass pipeline and lowerings as a hybridized block's graph
(`try_compiled_op`, cached per op, attributes, shapes and mode). An eager call then runs the
same native kernel as the hybridized graph, so both agree to the bit on long reductions (as
MXNet's do: one kernel both ways) and run at the compiled kernels' speed.
"""
from __future__ import annotations

import os

import numpy as np

from ..base import MXNetError
from ..native import interpreted_calls, native_runtime
from ..ops import scalar as S
from ..ops.optimizer_multi import MultiUpdate
from ..ops.optimizer_ops import Update
from ..ops.registry import Elementwise, broadcast_shapes

__all__ = ["try_compiled_elementwise", "try_compiled_op", "COMPILED_OPS", "update_in_place", "prepare_update", "prepare_update_raw",
           "prepare_multi_update",
           "prepare_updates_raw", "run_updates",
           "PreparedUpdate",
           "MIN_ELEMENTS", "DYNAMIC_SCALARS"]

MIN_ELEMENTS = 1 << 16
GRAIN = 1 << 15
_ENABLED = os.environ.get("SYMJIT_EAGER_JIT", "1") != "0"
_SUPPORTED = {"float32", "float64", "int32", "int64", "uint8", "int8"}

#: compute-bound ops an eager call runs as a compiled one-node graph (`try_compiled_op`)
COMPILED_OPS = frozenset({
    "FullyConnected", "_backward_FullyConnected_data", "_backward_FullyConnected_weight",
    "Convolution", "_backward_Convolution_data", "_backward_Convolution_weight",
    "Deconvolution", "_backward_Deconvolution_data", "Pooling", "_backward_Pooling",
    "BatchNorm", "_backward_BatchNorm", "RNN", "_backward_RNN", "softmax", "log_softmax",
    "_backward_softmax", "_backward_log_softmax", "_backward_pick"})
#: (op name, attrs key, input shapes and dtypes, is_train) -> (CompiledGraph, input order) or
#: None when the op does not compile to native code for that key
_OP_GRAPHS: dict = {}
_MAX_OP_GRAPHS = 256

#: update-op attributes passed to compiled update kernels as inputs (they change between steps)
DYNAMIC_SCALARS = ("lr", "wd", "rescale_grad")
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
#: (op name, dtype, number of arrays, structural attrs) -> (kernel address, dynamic attr names,
#: number of outputs), or None when the op's expressions cannot take symbolic hyperparameters
_UPDATE_KERNELS: dict = {}


def _expressions(op, attrs, arrays):
    """(expressions, output dtypes, broadcast?) of an elementwise op, or None.

    Elementwise ops have one expression; update ops (`optimizer_ops`: new weight and new
    states) one per output, all over same-shaped inputs."""
    dtype = arrays[0].dtype
    if isinstance(op, Elementwise):
        return (op.full_expr(attrs),), (np.dtype(op.out_dtype(attrs, dtype.name)),), op.broadcast
    if op.kernel == "elementwise" and hasattr(op, "exprs"):
        exprs = tuple(op.exprs(attrs, *[S.Input(i) for i in range(len(arrays))]))
        return exprs, (dtype,) * len(exprs), False
    return None


def try_compiled_elementwise(op, attrs, arrays: list, destinations: list | None = None) -> list | None:
    """The op's outputs computed by a compiled kernel, or None to use the reference.

    `destinations` (optional): arrays to write the outputs into, used when each has the output's
    shape and dtype and is C-contiguous (they may be inputs: kernels load every input of an
    element before storing)."""
    if not _ENABLED or not arrays:
        return None
    if isinstance(op, MultiUpdate):
        return _multi_update_in_place(op, attrs, arrays, destinations)
    if isinstance(op, Update):
        done = _compiled_update(op, attrs, arrays, destinations)
        if done is not None:
            return done
    if max(a.size for a in arrays) < MIN_ELEMENTS:
        return None
    dtype = arrays[0].dtype
    if dtype.name not in _SUPPORTED or any(a.dtype != dtype for a in arrays):
        return None
    found = _expressions(op, attrs, arrays)
    if found is None:
        return None
    exprs, out_dtypes, broadcast = found
    compute = op.compute_dtype(attrs, [dtype.name] * len(arrays)) if isinstance(op, Elementwise) else dtype.name
    if compute not in _SUPPORTED:
        return None
    try:
        out_shape = broadcast_shapes(op.name, [a.shape for a in arrays]) if broadcast else arrays[0].shape
    except Exception:  # noqa: BLE001 - shape errors are reported by the reference path
        return None
    if not broadcast and any(a.shape != out_shape for a in arrays):
        return None
    if any(d.name not in _SUPPORTED for d in out_dtypes):
        return None
    runtime = native_runtime()
    if runtime is None:      # SYMJIT_BACKEND=interp and no loadable runtime: the reference runs
        return None
    from ..codegen.llvm import ElementwiseSpec, compile_elementwise
    arrays = [np.ascontiguousarray(a) for a in arrays]
    spec = ElementwiseSpec(exprs, tuple(a.dtype.name for a in arrays), tuple(a.shape for a in arrays),
                           compute, tuple(d.name for d in out_dtypes), tuple(out_shape))
    if not _compile_now(spec):
        return None
    kernel = compile_elementwise(spec)
    outs = None
    if destinations is not None and len(destinations) == len(out_dtypes) and all(
            isinstance(d, np.ndarray) and d.shape == tuple(out_shape) and d.dtype == dt and d.flags.c_contiguous
            and d.flags.writeable for d, dt in zip(destinations, out_dtypes)):
        outs = list(destinations)
    if outs is None:
        outs = [np.empty(out_shape, d) for d in out_dtypes]
    runtime.parallel_for(kernel.address, outs[0].size, GRAIN, arrays + outs)
    return outs


#: kernel spec -> uses that ran the reference because its kernel was not compiled yet
_UNCOMPILED_USES: dict = {}


def _compile_now(spec) -> bool:
    """Whether to run `spec`'s kernel now: once compiled, always; before, only after
    `interpreted_calls()` uses ran the reference (a one-off op over a large array, such as one
    broadcast pattern among many, costs one numpy pass, far less than compiling a kernel)."""
    from ..codegen.llvm import is_compiled
    if is_compiled(spec):
        return True
    seen = _UNCOMPILED_USES.get(spec, 0)
    if seen >= interpreted_calls():
        _UNCOMPILED_USES.pop(spec, None)
        return True
    if len(_UNCOMPILED_USES) > 4096:
        _UNCOMPILED_USES.clear()
    _UNCOMPILED_USES[spec] = seen + 1
    return False


def _update_key(op, attrs: dict, dtype: np.dtype, n: int):
    try:
        structural = tuple(sorted((k, v) for k, v in attrs.items() if k not in DYNAMIC_SCALARS))
        hash(structural)
    except TypeError:
        return None
    return (op.name, dtype, n, structural)


def _build_update_kernel(op, attrs: dict, dtype: np.dtype, n: int, size: int):
    """(address, dynamic names, n_outputs) of the update kernel with symbolic hyperparameters,
    or None when the op's expressions need concrete values."""
    from ..codegen.llvm import ElementwiseSpec, compile_elementwise
    dyn = tuple(k for k in DYNAMIC_SCALARS if isinstance(attrs.get(k), (int, float)))
    symbolic = dict(attrs)
    for j, k in enumerate(dyn):
        symbolic[k] = S.Input(n + j)
    try:
        exprs = tuple(op.exprs(symbolic, *[S.Input(i) for i in range(n)]))
    except (TypeError, ValueError, AttributeError):
        return None
    if not exprs or not all(isinstance(e, S.Expr) for e in exprs):
        return None
    spec = ElementwiseSpec(exprs, (dtype.name,) * (n + len(dyn)), ((size,),) * n + ((1,),) * len(dyn),
                           dtype.name, (dtype.name,) * len(exprs), (size,))
    return compile_elementwise(spec).address, dyn, len(exprs)


def _update_kernel(op, attrs: dict, dtype: np.dtype, n: int, size: int):
    """The memoized `_build_update_kernel` result for this op's structure, or None."""
    key = _update_key(op, attrs, dtype, n)
    if key is None:
        return None
    entry = _UPDATE_KERNELS.get(key, False)
    if entry is False:
        entry = None if native_runtime() is None else _build_update_kernel(op, attrs, dtype, n, size)
        _UPDATE_KERNELS[key] = entry
    return entry


def _compiled_update(op, attrs: dict, arrays: list, destinations: list | None) -> list | None:
    """An optimizer update (out of place or into `destinations`) run by its
    hyperparameter-symbolic kernel, or None (reference)."""
    dtype = arrays[0].dtype
    size = arrays[0].size
    if dtype not in _FLOAT_DTYPES or size < 2 or any(a.dtype != dtype or a.shape != arrays[0].shape
                                                     for a in arrays):
        return None
    entry = _update_kernel(op, attrs, dtype, len(arrays), size)
    if entry is None:
        return None
    from .. import runtime
    address, dyn, n_out = entry
    arrays = [np.ascontiguousarray(a) for a in arrays]
    scalars = [np.array([attrs[k]], dtype) for k in dyn]
    outs = None
    if destinations is not None and len(destinations) == n_out and all(
            isinstance(d, np.ndarray) and d.shape == arrays[0].shape and d.dtype == dtype and d.flags.c_contiguous
            and d.flags.writeable for d in destinations):
        outs = list(destinations)
    if outs is None:
        outs = [np.empty(arrays[0].shape, dtype) for _ in range(n_out)]
    runtime.parallel_for(address, size, GRAIN, arrays + scalars + outs)
    return outs


class PreparedUpdate:
    """One in-place optimizer update ready for its compiled kernel: `arrays` = [weight, grad,
    states...] (C-contiguous, one dtype and shape; the weight and states are the outputs,
    written in place), `scalars` the values of the kernel's dynamic hyperparameters."""
    __slots__ = ("address", "dtype", "arrays", "scalars", "n_out", "op_name", "read_ids", "write_ids")

    def __init__(self, address: int, dtype: np.dtype, arrays: list, scalars: tuple, n_out: int, op_name: str):
        self.address, self.dtype, self.arrays, self.scalars, self.n_out = address, dtype, arrays, scalars, n_out
        self.op_name = op_name
        # identities of the buffers read (all) and written (weight, states); stable: held here
        self.read_ids = frozenset(id(a) for a in arrays)
        self.write_ids = frozenset([id(arrays[0])] + [id(a) for a in arrays[2:]])

    def args(self, scalar_ptrs) -> list:
        """The kernel's pointer list: inputs, dynamic scalars, outputs (weight, states)."""
        a = self.arrays
        return a + list(scalar_ptrs) + [a[0]] + a[2:]


def prepare_update(op, attrs: dict, arrays: list) -> PreparedUpdate | None:
    """The update op `op` (parsed `attrs`) over `arrays` = [weight, grad, states...] as a
    `PreparedUpdate` writing the weight and states in place, or None when the compiled kernel
    does not apply (then nothing was done and the caller takes the general `invoke` path)."""
    if not _ENABLED or not isinstance(op, Update):
        return None
    first = arrays[0]
    dtype, shape = first.dtype, first.shape
    if (dtype not in _FLOAT_DTYPES or first.size < 2 or len(arrays) != len(op.input_names(attrs))
            or any(a.dtype != dtype or a.shape != shape or not a.flags.c_contiguous for a in arrays)):
        return None
    if not all(d.flags.writeable for d in arrays[:1] + arrays[2:]):
        return None
    entry = _update_kernel(op, attrs, dtype, len(arrays), first.size)
    if entry is None:
        return None
    address, dyn, n_out = entry
    if n_out != len(arrays) - 1:  # outputs must be exactly the weight and the states
        return None
    return PreparedUpdate(address, dtype, list(arrays), tuple(attrs[k] for k in dyn), n_out, op.name)


#: (op name, dtype, number of arrays, which DYNAMIC_SCALARS are given, raw structural attrs
#: and their types) -> `_update_kernel` entry, for `prepare_update_raw`: the per-step lookup
#: without parsing attributes
_RAW_UPDATE_KERNELS: dict = {}
_ABSENT = object()
assert DYNAMIC_SCALARS == ("lr", "wd", "rescale_grad")


def _raw_key(op_name: str, raw: dict, dtype: np.dtype, n: int) -> tuple:
    """The `_RAW_UPDATE_KERNELS` key of raw attributes (may be unhashable: the caller checks)."""
    structural = dict(raw)
    given = (structural.pop("lr", _ABSENT) is not _ABSENT, structural.pop("wd", _ABSENT) is not _ABSENT,
             structural.pop("rescale_grad", _ABSENT) is not _ABSENT)   # DYNAMIC_SCALARS
    return (op_name, dtype, n, given, tuple(structural.items()), tuple(map(type, structural.values())))


def prepare_update_raw(op_name: str, raw: dict, arrays: list) -> PreparedUpdate | None:
    """`prepare_update` for raw (unparsed) attributes whose hyperparameters (`DYNAMIC_SCALARS`)
    are Python numbers, as optimizers pass them: after the first call for a structure, a
    dictionary lookup replaces parsing. Same results and None cases as `prepare_update`."""
    if not _ENABLED:
        return None
    first = arrays[0]
    dtype = first.dtype
    key = _raw_key(op_name, raw, dtype, len(arrays))
    try:
        entry = _RAW_UPDATE_KERNELS.get(key, False)
    except TypeError:
        key, entry = None, False
    if entry is False:
        from ..ops.registry import get_op
        op = get_op(op_name)
        attrs = op.parse(raw)
        prepared = prepare_update(op, attrs, arrays)
        if key is not None and prepared is not None:
            address, dyn, n_out = _update_kernel(op, attrs, dtype, len(arrays), first.size)
            if all(k not in raw or isinstance(raw[k], (int, float)) for k in dyn):
                if len(_RAW_UPDATE_KERNELS) > 4096:
                    _RAW_UPDATE_KERNELS.clear()
                # hyperparameters absent from `raw` have their (structural) parsed defaults
                defaults = tuple((k, attrs[k]) for k in dyn if k not in raw)
                _RAW_UPDATE_KERNELS[key] = (address, dyn, n_out, dict(defaults))
        return prepared
    return _prepare_from_entry(entry, raw, arrays, op_name)


def _prepare_from_entry(entry, raw: dict, arrays: list, op_name: str) -> PreparedUpdate | None:
    """A PreparedUpdate of a `_RAW_UPDATE_KERNELS` entry, after checking the arrays."""
    if entry is None:
        return None
    first = arrays[0]
    dtype, shape = first.dtype, first.shape
    address, dyn, n_out, defaults = entry
    if first.size < 2:
        return None
    for i, a in enumerate(arrays):
        flags = a.flags
        if a.dtype != dtype or a.shape != shape or not flags.c_contiguous or (i != 1 and not flags.writeable):
            return None
    try:
        scalars = tuple(float(raw[k]) if k in raw else defaults[k] for k in dyn)
    except (TypeError, ValueError):
        return None
    return PreparedUpdate(address, dtype, list(arrays), scalars, n_out, op_name)


def prepare_updates_raw(op_name: str, raws: list, arrays_list: list) -> list | None:
    """`prepare_update_raw` for several parameters whose raw attributes have the same structure
    (the same keys and values but for the hyperparameters): the kernel is looked up once per
    dtype. None when any of them does not take the compiled path."""
    out = []
    cached: dict = {}
    for raw, arrays in zip(raws, arrays_list):
        entry = cached.get((arrays[0].dtype, len(arrays)))
        if entry is None:   # first of its dtype, or a structure not cached (then each is prepared)
            p = prepare_update_raw(op_name, raw, arrays)
            if p is None:
                return None
            try:
                cached[(arrays[0].dtype, len(arrays))] = _RAW_UPDATE_KERNELS.get(
                    _raw_key(op_name, raw, arrays[0].dtype, len(arrays)))
            except TypeError:
                pass
        else:
            p = _prepare_from_entry(entry, raw, arrays, op_name)
            if p is None:
                return None
        out.append(p)
    return out


#: the eager-op observer (`ndarray.set_op_observer` sets it): one event per kernel group run here
_op_observer = None


class _KernelGroup:
    """The native call of the prepared updates that share one kernel: their pointer lists and
    sizes, and the array of their dynamic scalars those lists point into (held here)."""
    __slots__ = ("address", "op_name", "values", "arg_lists", "sizes")

    def __init__(self, address: int, dtype: np.dtype, group: list):
        width = len(group[0].scalars)
        self.address, self.op_name = address, group[0].op_name
        self.values = np.array([u.scalars for u in group], dtype)
        base, step = self.values.ctypes.data, dtype.itemsize
        self.arg_lists = [u.args(range(base + i * width * step, base + (i + 1) * width * step, step))
                          for i, u in enumerate(group)]
        self.sizes = [u.arrays[0].size for u in group]


class _RunPlan:
    """`run_updates`' kernel groups for one list of prepared updates. It holds the updates, so
    the identities keying it (`_RUN_PLANS`) cannot be reused while it lives; a PreparedUpdate
    never changes (its arrays and scalars are fixed), so neither does its plan."""
    __slots__ = ("updates", "groups")

    def __init__(self, updates: list):
        self.updates = list(updates)
        by_kernel: dict = {}
        for u in updates:
            by_kernel.setdefault((u.address, u.dtype), []).append(u)
        self.groups = [_KernelGroup(address, dtype, group) for (address, dtype), group in by_kernel.items()]


#: how many plans a `run_updates` plan cache keeps (an optimizer runs the same lists every step)
MAX_RUN_PLANS = 8


def _run_plan(updates: list, plans: dict | None) -> _RunPlan:
    if plans is None:
        return _RunPlan(updates)
    key = tuple(map(id, updates))
    plan = plans.get(key)
    if plan is None:
        if len(plans) >= MAX_RUN_PLANS:
            plans.clear()
        plan = plans[key] = _RunPlan(updates)
    return plan


def run_updates(updates: list, plans: dict | None = None) -> None:
    """Run prepared updates: those sharing a kernel in one multi-tensor `parallel_for` (all
    their elements split over the pool together, one native call); the updates must touch
    pairwise distinct weights and states (each is applied exactly once). `plans`: a dict the
    caller keeps (and clears when it drops updates it prepared) where the grouping and
    pointer lists of a list of updates (`_RunPlan`) are kept for the next run of the same list."""
    from .. import runtime
    for g in _run_plan(updates, plans).groups:
        observer = _op_observer
        if observer is not None:
            token = observer.enter()
        if len(g.sizes) == 1:
            code = runtime._runtime.parallel_for(g.address, g.sizes[0], GRAIN, g.arg_lists[0])
        else:
            code = runtime._runtime.parallel_for_multi(g.address, GRAIN, g.sizes, g.arg_lists)
        if observer is not None:
            observer.leave(g.op_name, token)
        if code != 0:
            runtime.raise_last_error("optimizer update kernel", code)


def prepare_multi_update(op: MultiUpdate, attrs: dict, groups: list, trailing: list) -> list | None:
    """The multi-tensor update `op` (attributes raw, as optimizers pass them, or parsed) over
    `groups` = [[weight, grad, states...], ...] (numpy arrays; `trailing`: the preloaded ops' lrs
    and wds) as the prepared in-place updates of its single-tensor op, one per group (the op's
    `split`), or None when the compiled kernel does not apply or the attributes do not fit
    (then nothing was done and the caller runs the op itself, which reports the error)."""
    n = len(groups)
    if not n or attrs.get(op.count_key, 1) != n:
        return None
    if trailing:
        lrs, wds = (np.asarray(t).reshape(-1).tolist() for t in trailing)
    else:
        lrs, wds = attrs.get("lrs", ()), attrs.get("wds", ())
    if len(lrs) != n or len(wds) != n:
        return None
    shared = {k: attrs[k] for k in op.shared if k in attrs}
    raws = [dict(shared, lr=lr, wd=wd) for lr, wd in zip(lrs, wds)]
    if n == 1:
        p = prepare_update_raw(op.single, raws[0], groups[0])
        return None if p is None else [p]
    return prepare_updates_raw(op.single, raws, groups)


def _multi_update_in_place(op: MultiUpdate, attrs: dict, arrays: list, destinations: list | None) -> list | None:
    """An eager multi-tensor update written with out= its own weights (as MXNet's optimizers call
    it) run by the compiled single-tensor kernels in one multi-tensor call: the results are the
    input buffers themselves (weights, then the states in `state_targets` order). None when the
    outputs go elsewhere, a buffer appears twice, or the kernels do not apply."""
    k = len(op.per_group)
    n = (len(arrays) - len(op.trailing)) // k
    groups = [arrays[i * k:(i + 1) * k] for i in range(n)]
    weights = [g[0] for g in groups]
    if (destinations is None or len(destinations) != n or any(d is not w for d, w in zip(destinations, weights))
            or len({id(a) for a in arrays}) != len(arrays)):
        return None
    prepared = prepare_multi_update(op, attrs, groups, arrays[n * k:])
    if prepared is None:
        return None
    run_updates(prepared)
    return weights + [a for g in groups for a in g[op.first_state:]]


def update_in_place(op, attrs: dict, arrays: list) -> bool:
    """Run update op `op` (parsed `attrs`) over `arrays` = [weight, grad, states...] writing the
    new weight and states into their own buffers; False (nothing written) when the compiled
    kernel does not apply (then the caller takes the general `invoke` path)."""
    prepared = prepare_update(op, attrs, arrays)
    if prepared is None:
        return False
    run_updates([prepared])
    return True


def _attrs_key(attrs) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in attrs.items()))


def _build_op_graph(op, attrs, arrays, is_train: bool):
    """(CompiledGraph, input positions in graph order) of `op` alone, or None when any node
    of it would run its Python reference (nothing to gain over calling the reference)."""
    from ..codegen.llvm.executable import compile_planned
    from ..ir import GraphBuilder, TensorType
    from ..passes.manager import compile_graph
    names = op.input_names(attrs)
    b = GraphBuilder(name=f"eager_{op.name}")
    aux = set(op.aux_names)
    vals = [b.add_input(n, TensorType(a.shape, a.dtype.name), aux=n in aux) for n, a in zip(names, arrays)]
    outs = b.add_node(op, vals, attrs, already_parsed=True)
    g = b.build(outs[:op.num_outputs(attrs)])
    opt, _ = compile_graph(g, "training" if is_train else "inference")
    cg = compile_planned(opt, g.name, is_train)
    if not cg.native or cg.module.seed_params:
        return None
    pos = {v.name: i for i, v in enumerate(g.inputs)}
    return cg, [pos[v.name] for v in opt.inputs], [v.name for v in g.inputs]


def _work_elements(attrs, arrays: list) -> int:
    """The elements an op call touches, to size it against `MIN_ELEMENTS`: its inputs', or the
    output's where an attribute gives that shape (a scatter into zeros, `_backward_pick`)."""
    inputs = sum(a.size for a in arrays)
    shape = attrs.get("shape")
    if isinstance(shape, tuple) and all(isinstance(d, int) and d >= 0 for d in shape):
        return max(inputs, int(np.prod(shape, dtype=np.int64)))
    return inputs


def compiles_eagerly(op_name: str, attrs, arrays: list) -> bool:
    """Whether an eager call of `op_name` (parsed `attrs`) on `arrays` is sized and typed for
    its compiled one-node graph (`try_compiled_op`) rather than the numpy reference."""
    return (_ENABLED and op_name in COMPILED_OPS and bool(arrays)
            and all(a.dtype == np.float32 for a in arrays) and _work_elements(attrs, arrays) >= MIN_ELEMENTS)


def try_compiled_op(op, attrs, arrays: list, is_train: bool) -> list | None:
    """The outputs of a compute-bound op (`COMPILED_OPS`, parsed `attrs`) from its compiled
    one-node graph, or None to use the reference (small or non-float32 inputs, or an op
    instance without a native lowering)."""
    if not compiles_eagerly(op.name, attrs, arrays):
        return None
    key = (op.name, _attrs_key(attrs), tuple(a.shape for a in arrays), bool(is_train))
    entry = _OP_GRAPHS.get(key, _OP_GRAPHS)
    if entry is _OP_GRAPHS:
        if len(_OP_GRAPHS) >= _MAX_OP_GRAPHS:
            _OP_GRAPHS.clear()
        try:
            entry = _build_op_graph(op, attrs, arrays, bool(is_train))
        except MXNetError:
            entry = None  # the reference reports bad input with its own message
        _OP_GRAPHS[key] = entry
    if entry is None:
        return None
    cg, order, input_names = entry
    outs, updates = cg.run([np.ascontiguousarray(arrays[i]) for i in order], bool(is_train))
    if not updates:
        return list(outs)
    # new values of updated inputs (aux states), in the reference's order: op.state_targets
    new = {v.name: a for v, a in updates.items()}
    by_arg = dict(zip(op.input_names(attrs), input_names))
    targets = [by_arg[t] for t in op.state_targets(attrs) if t in by_arg]
    if any(t not in new for t in targets):
        return None
    return list(outs) + [new[t] for t in targets]
