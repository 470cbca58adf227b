"""symjit.autograd: MXNet 1.x imperative automatic differentiation.

While `record()` is active, every op applied through `ndarray.invoke` to an array
that needs gradients appends a `Node` to the tape: the op, its parsed attributes,
its input and output arrays. `backward`/`grad` walk the nodes reachable from the
heads in reverse topological order and run each op's gradient rule through the
eager emitter, so gradient rules are the same registered-op code that the IR
autodiff pass uses. With `create_graph=True` the backward computation is itself
recorded, giving higher-order gradients.

Invariants: a node's saved arrays are the arrays the op read and wrote (in-place
writes to recorded arrays are refused while recording); a graph is freed after a
backward unless `retain_graph=True`, and using a freed graph raises MXNetError.
"""
from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager

import numpy as np

from .base import MXNetError

__all__ = ["record", "pause", "train_mode", "predict_mode", "is_recording", "is_training",
           "set_recording", "set_training", "mark_variables", "backward", "grad", "Function",
           "get_symbol", "NDArray"]   # MXNet's autograd exports NDArray with `import *` too


class _State(threading.local):
    def __init__(self):
        self.recording = False
        self.training = False


_STATE = _State()


def is_recording() -> bool:
    return _STATE.recording


def is_training() -> bool:
    return _STATE.training


def set_recording(is_recording: bool) -> bool:  # noqa: F811
    prev, _STATE.recording = _STATE.recording, bool(is_recording)
    return prev


def set_training(train_mode: bool) -> bool:  # noqa: F811
    prev, _STATE.training = _STATE.training, bool(train_mode)
    return prev


@contextmanager
def _scope(recording: bool | None, training: bool | None):
    prev_r, prev_t = _STATE.recording, _STATE.training
    if recording is not None:
        _STATE.recording = recording
    if training is not None:
        _STATE.training = training
    try:
        yield
    finally:
        _STATE.recording, _STATE.training = prev_r, prev_t


def record(train_mode: bool = True):  # noqa: F811
    """Record operations for differentiation (and run them in training mode by default)."""
    return _scope(True, train_mode)


def pause(train_mode: bool = False):  # noqa: F811
    """Stop recording inside a `record()` block."""
    return _scope(False, train_mode)


def train_mode():  # noqa: F811
    return _scope(None, True)


def predict_mode():
    return _scope(None, False)


# --------------------------------------------------------------------------------------------
# The tape
# --------------------------------------------------------------------------------------------

class Node:
    """One recorded op application (or a variable, when `op` is None).

    Invariant: a node never holds a strong reference to an array whose `_ag` entry points back
    at it, so the tape has no reference cycles and an array (with its gradient buffer, and the
    activations its node keeps) is freed when the program drops it, as with MXNet's reference
    counting, not at the next cyclic garbage collection. `outputs` are therefore buffer-sharing
    copies without a tape entry (see `attach_outputs`), and a variable node refers to its
    variable weakly."""
    __slots__ = ("op", "attrs", "inputs", "outputs", "backward_fn", "freed", "_variables", "__weakref__")

    def __init__(self, op, attrs, inputs, outputs, backward_fn=None, variable=None):
        self.op = op
        self.attrs = attrs
        self.inputs = inputs            # list of NDArray (as read by the op)
        self.outputs = outputs          # list of NDArray (as written by the op), untaped copies
        self.backward_fn = backward_fn  # custom Function backward, else op.grad
        self.freed = False
        self._variables = () if variable is None else (weakref.ref(variable),)

    @property
    def variable(self):
        """The NDArray whose .grad receives the gradient: the variable, or a view of it sharing
        its gradient buffer (`share_entry`) while the variable itself is gone; None for op nodes,
        and once the program has dropped them all (no one can read the gradient then)."""
        for ref in self._variables:
            v = ref()
            if v is not None:
                return v
        return None


def share_entry(src, view) -> None:
    """Give `view` (another array object over `src`'s memory) `src`'s gradient buffer and tape
    entry; a variable's gradient then reaches whichever of the two the program still holds."""
    view._grad, view._grad_req, view._ag = src._grad, src._grad_req, src._ag
    ag = src._ag
    if ag is not None and ag.node._variables:
        ag.node._variables += (weakref.ref(view),)


class Entry:
    """An array's position in the tape: output `index` of `node`."""
    __slots__ = ("node", "index")

    def __init__(self, node: Node, index: int):
        self.node = node
        self.index = index


def mark_variables(variables, gradients, grad_reqs="write") -> None:
    """Mark arrays as variables whose gradients are written into `gradients` (grad_req write/add/null)."""
    from .ndarray import NDArray
    if isinstance(variables, NDArray):
        variables, gradients = [variables], [gradients]
    reqs = [grad_reqs] * len(variables) if isinstance(grad_reqs, str) else list(grad_reqs)
    if len(gradients) != len(variables) or len(reqs) != len(variables):
        raise MXNetError("mark_variables: variables, gradients and grad_reqs must have the same length")
    for v, g, req in zip(variables, gradients, reqs):
        if req not in ("write", "add", "null"):
            raise MXNetError(f"mark_variables: grad_req must be 'write', 'add' or 'null', got {req!r}")
        if g.shape != v.shape:
            raise MXNetError(f"mark_variables: gradient shape {g.shape} does not match variable {v.shape}")
        v._grad = g
        v._grad_req = req
        v._ag = Entry(Node(None, None, [], [], variable=v), 0)


def _needs_grad(x) -> bool:
    return x._ag is not None and not x._ag.node.freed


def record_op(op, attrs, inputs, outputs) -> None:
    """Called by `ndarray.invoke` while recording: append a node if any input needs gradients."""
    if not any(_needs_grad(x) for x in inputs):
        return
    if not op.differentiable:
        return
    attach_outputs(Node(op, attrs, list(inputs), None), outputs)


def attach_outputs(node: Node, outputs) -> None:
    """Make `outputs` the recorded results of `node`: each gets a tape entry, and the node
    keeps untaped copies sharing their buffers (no reference cycle; see `Node`)."""
    node.outputs = [_untaped(o) for o in outputs]
    for i, o in enumerate(outputs):
        o._ag = Entry(node, i)


def _topo_nodes(heads) -> list[Node]:
    order: list[Node] = []
    seen: set[int] = set()
    stack = [(h._ag.node, False) for h in heads if h._ag is not None]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for x in node.inputs:
            if x._ag is not None and id(x._ag.node) not in seen:
                stack.append((x._ag.node, False))
    return order  # inputs before users


_SLOT_NAMES: dict = {}


def _slot_names(cls) -> tuple:
    """The slot names of `cls` and its bases (but `__weakref__`), most derived first; cached."""
    names = _SLOT_NAMES.get(cls)
    if names is None:
        names = []
        for c in cls.__mro__:
            slots = getattr(c, "__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if name != "__weakref__":
                    names.append(name)
        names = _SLOT_NAMES[cls] = tuple(names)
    return names


_PLAIN: dict = {}


def _is_plain(cls) -> bool:
    """True when `cls` objects carry exactly NDArray's slots and no `__dict__`."""
    from .ndarray import NDArray
    return (issubclass(cls, NDArray) and _slot_names(cls) == _slot_names(NDArray)
            and all("__slots__" in c.__dict__ for c in cls.__mro__ if c is not object))


def _untaped(x):
    """`x` as a new object of its class sharing its buffer and attributes but with no tape entry.

    A node keeps such copies of its outputs (`attach_outputs`): a node holding its outputs while
    each output's entry holds the node was a reference cycle, so a step's arrays (outputs, and
    what the backward kept: activations, workspaces) lived until the next cyclic garbage
    collection instead of going when the caller drops its last array of the step (which, a step
    later, made every step's large buffers come from fresh, page-faulting memory)."""
    cls = x.__class__
    copy = object.__new__(cls)
    plain = _PLAIN.get(cls)
    if plain is None:
        plain = _PLAIN[cls] = _is_plain(cls)
    if plain:   # exactly NDArray's slots, all set by its __init__: copied directly (the common case)
        copy._data, copy._ctx, copy._grad = x._data, x._ctx, x._grad
        copy._grad_req, copy._fresh_grad, copy._ag = x._grad_req, x._fresh_grad, None
        return copy
    for name in _slot_names(cls):
        try:
            value = object.__getattribute__(x, name)   # no __getattr__ fallback for unset slots
        except AttributeError:   # an unset slot stays unset
            continue
        object.__setattr__(copy, name, value)
    if hasattr(x, "__dict__"):
        copy.__dict__.update(x.__dict__)
    object.__setattr__(copy, "_ag", None)
    return copy


def _taped(x, node: Node, index: int):
    """A buffer-sharing copy of `x` recorded as output `index` of `node` (a temporary: the node
    does not hold it, so no cycle)."""
    copy = _untaped(x)
    copy._ag = Entry(node, index)
    return copy


def _direct_gradient_buffers(order: list, heads) -> dict:
    """{id(node): per-input gradient buffers} for the nodes whose backward may write a
    variable's gradient straight into its `.grad` buffer (`backward_fn.accepts_out`): the
    variable has grad_req 'write' and this node is its only use (so no other gradient is
    summed into it) and it is not a head. `backward` then finds the buffer already written."""
    uses: dict[int, int] = {}
    for h in heads:
        if h._ag is not None:
            uses[id(h._ag.node)] = 2  # a head's own gradient is summed in: never direct
    hosts = []
    for node in order:
        for x in node.inputs:
            ag = x._ag
            if ag is not None:
                k = id(ag.node)
                uses[k] = uses.get(k, 0) + 1
        fn = node.backward_fn
        if fn is not None and getattr(fn, "accepts_out", False):
            hosts.append(node)
    direct = {}
    for node in hosts:
        dests, found = [], False
        for x in node.inputs:
            ag = x._ag
            var = ag.node.variable if ag is not None else None
            d = None
            if var is x and var._grad_req == "write" and var._grad is not None and uses[id(ag.node)] == 1:
                buf = var._grad._data
                if buf.shape == x._data.shape and buf.dtype == x._data.dtype:
                    d, found = buf, True
            dests.append(d)
        if found:
            direct[id(node)] = dests
    return direct


def _compute_grads(heads, head_grads, variables, retain_graph: bool, create_graph: bool,
                   train_mode: bool, order: list | None = None):
    """Return {id(variable node): gradient NDArray} for every variable reachable from heads.
    `order`: `_topo_nodes(heads)` when the caller already has it."""
    from .ndarray import NDArray, eager_emitter
    heads = list(heads)
    for h in heads:
        if h._ag is None:
            raise MXNetError("cannot differentiate with respect to an array that is not in a recorded "
                             "graph; call attach_grad() and compute it inside autograd.record()")
        if h._ag.node.freed:
            raise MXNetError("the graph has already been freed by a previous backward; pass "
                             "retain_graph=True to backward twice")
    if head_grads is None:
        head_grads = [None] * len(heads)
    if len(head_grads) != len(heads):
        raise MXNetError(f"backward: got {len(head_grads)} head gradients for {len(heads)} heads")
    grads: dict[tuple[int, int], NDArray] = {}

    def accumulate(entry: Entry, g):
        key = (id(entry.node), entry.index)
        grads[key] = g if key not in grads else grads[key] + g

    with _scope(create_graph, train_mode):
        for h, hg in zip(heads, head_grads):
            if hg is None:
                hg = NDArray(np.ones(h._data.shape, h._data.dtype), h._ctx)
            elif not isinstance(hg, NDArray):
                raise MXNetError("head gradients must be NDArrays")
            elif hg.shape != h.shape:
                raise MXNetError(f"head gradient shape {hg.shape} does not match head shape {h.shape}")
            accumulate(h._ag, hg)
        F = eager_emitter()
        if order is None:
            order = _topo_nodes(heads)
        direct = _direct_gradient_buffers(order, heads) if variables is None and not create_graph else {}
        for node in reversed(order):
            if node.op is None and node.backward_fn is None:
                continue
            ograds = [grads.get((id(node), i)) for i in range(len(node.outputs))]
            if all(g is None for g in ograds):
                continue
            if node.op is None or not node.op.grad_takes_missing_ograds:
                ograds = [g if g is not None else o.zeros_like() for g, o in zip(ograds, node.outputs)]
            if node.backward_fn is not None:
                dests = direct.get(id(node))
                in_grads = node.backward_fn(ograds) if dests is None else node.backward_fn(ograds, out=dests)
            else:
                outs = node.outputs
                if create_graph:   # the gradient graph differentiates through the outputs too
                    outs = [_taped(o, node, i) for i, o in enumerate(outs)]
                in_grads = node.op.grad(F, node.attrs, node.inputs, outs, ograds)
            for x, g in zip(node.inputs, in_grads):
                if g is not None and x._ag is not None:
                    accumulate(x._ag, g)
    if not retain_graph:
        for node in order:
            if node.op is not None or node.backward_fn is not None:
                node.freed = True
    return {key[0]: g for key, g in grads.items()}


def is_fresh_grad(var) -> bool:
    """True if a backward wrote `var`'s gradient since `set_fresh_grad(var, False)` (MXNet's
    `NDArray._fresh_grad`, read and cleared by gluon.Trainer to detect stale gradients)."""
    return getattr(var, "_fresh_grad", False)


def set_fresh_grad(var, fresh: bool) -> None:
    """Mark (or clear) `var`'s gradient as written by a backward."""
    var._fresh_grad = bool(fresh)


def backward(heads, head_grads=None, retain_graph: bool = False, train_mode: bool = True) -> None:
    """Compute gradients of heads w.r.t. marked variables, written per their grad_req."""
    from .ndarray import NDArray
    if isinstance(heads, NDArray):
        heads = [heads]
        if head_grads is not None and isinstance(head_grads, NDArray):
            head_grads = [head_grads]
    order = _topo_nodes(heads)
    grads = _compute_grads(heads, head_grads, None, retain_graph, False, train_mode, order)
    for node in order:
        var = node.variable
        if var is None or var._grad_req == "null":
            continue
        set_fresh_grad(var, True)
        g = grads.get(id(node))
        if g is None:
            if var._grad_req == "write":
                var._grad._data[...] = 0
            continue
        if var._grad._is_sparse:
            from .ndarray.sparse_ops import assign_gradient
            if assign_gradient(var._grad, g, var._grad_req):
                continue
        if var._grad_req == "add":
            var._grad._data[...] += g._data
        elif g._data is not var._grad._data:  # else written in place by the node's backward
            var._grad._data[...] = g._data


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph: bool = False,
         train_mode: bool = True):
    """Return gradients of heads w.r.t. `variables` as new arrays (no .grad buffers touched)."""
    from .ndarray import NDArray
    single = isinstance(variables, NDArray)
    if isinstance(heads, NDArray):
        heads = [heads]
        if isinstance(head_grads, NDArray):
            head_grads = [head_grads]
    variables = [variables] if single else list(variables)
    for v in variables:
        if v._ag is None:
            raise MXNetError("grad: every variable must be marked with attach_grad() or mark_variables()")
    if retain_graph is None:
        retain_graph = create_graph
    grads = _compute_grads(heads, head_grads, variables, retain_graph, create_graph, train_mode)
    out = []
    for v in variables:
        g = grads.get(id(v._ag.node))
        if g is None:
            from .ndarray import zeros
            g = zeros(v.shape, v.context, v._data.dtype)
        if type(g) is NDArray and type(v) is not NDArray and not v._is_sparse:   # an mx.np array's
            g = g.as_np_ndarray()
        out.append(g)
    return out[0] if single else out


class Function:
    """A user-defined differentiable function (`forward` and `backward` on NDArrays)."""

    def __init__(self):
        self._saved = ()

    def save_for_backward(self, *args) -> None:
        self._saved = args

    @property
    def saved_tensors(self):
        return self._saved

    def __call__(self, *inputs):
        from .ndarray import NDArray
        with pause(train_mode=is_training()):
            outputs = self.forward(*inputs)
        single = isinstance(outputs, NDArray)
        outs = [outputs] if single else list(outputs)
        if is_recording() and any(_needs_grad(x) for x in inputs if isinstance(x, NDArray)):
            arrays = [x for x in inputs if isinstance(x, NDArray)]

            def backward_fn(ograds):
                with pause(train_mode=is_training()):
                    res = self.backward(*ograds)
                res = [res] if isinstance(res, NDArray) else list(res)
                if len(res) != len(arrays):
                    raise MXNetError(f"{type(self).__name__}.backward returned {len(res)} gradients "
                                     f"for {len(arrays)} inputs")
                return res
            attach_outputs(Node(None, None, arrays, None, backward_fn=backward_fn), outs)
        return outputs

    def forward(self, *inputs):
        raise MXNetError(f"{type(self).__name__} must define forward()")

    def backward(self, *output_grads):
        raise MXNetError(f"{type(self).__name__} must define backward()")


def get_symbol(x):
    """The recorded computation that produced `x`, as a Symbol (inputs become variables)."""
    from .symbol.tape import symbol_from_tape
    return symbol_from_tape(x)



def __getattr__(name):
    """`NDArray` (exported as MXNet's autograd module does), imported lazily: the ndarray
    package imports this module."""
    if name == "NDArray":
        from .ndarray import NDArray
        return NDArray
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
