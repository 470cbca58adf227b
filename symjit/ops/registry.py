"""The operator registry: every operator is defined once, here-shaped, and read by every layer.

An operator is a subclass of `Op` registered with `@register(name, aliases=...)`.
It carries:
  * `params`      — attribute schema (`attrs.Param`), parsing MXNet string attributes;
  * `input_names` — argument names (`data`, `weight`, ...), aux states listed in `aux_names`;
  * `infer_shape` / `infer_type` — partial inference: unknown shapes are `None`,
                    unknown dims are 0 (MXNet 1.x convention); may fill input shapes.
                    Callers use `infer_shape_checked`, which adds what every lowering relies
                    on: the arity, non-negative dims within MAX_NDIM / MAX_TENSOR_ELEMENTS,
                    refinement only, and for gradient ops (`forward_op`) agreement with the
                    shapes of the op they differentiate;
  * `compute`     — the numpy reference implementation;
  * `grad`        — the gradient rule, written with registered ops through an `Emitter`
                    so that the same rule builds eager NDArray code or IR graph nodes;
  * lowering info — `expr` (elementwise scalar expression) and `inplace` ({output index:
                    input index} that may share a buffer);
  * traits        — facts that passes and both code generators read instead of lists of op
                    names: `reshape_only`, `gradient_barrier`, `broadcast_only`, `reduces`,
                    `epilogue_host`, `neutral_scalar`, `inference_rewrite` (see `Op`); an
                    `Elementwise` op's `compute_dtype` says per instance in which dtype its
                    expression gives `compute`'s result. Adding a reshape-like op
                    or a GEMM-like op that hosts fused epilogues is one definition with the
                    trait set; every layer picks it up.

Invariants: op names and aliases are unique; `compute` never mutates its inputs;
`grad` returns one entry per input (None where no gradient flows).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from ..base import MXNetError
from . import rng
from . import scalar as S
from .attrs import Any_, Param, parse_attrs

__all__ = ["Op", "LikeInput", "register", "get_op", "find_op", "list_ops", "Emitter", "ComputeContext", "apply_numpy", "numpy_emitter",
           "Shape", "shape_known", "merge_shape", "OPS", "check_shape", "forward_shapes", "format_names",
           "MAX_TENSOR_ELEMENTS", "MAX_NDIM"]

Shape = tuple  # tuple of ints; 0 marks an unknown dim, None an unknown shape

#: name or alias -> Op instance (aliases share the instance)
OPS: dict[str, "Op"] = {}
#: memo of Op.parse: (op name, raw attribute items) -> parsed attributes (never handed out)
_PARSED: dict = {}
_PARSED_MAX = 4096

#: per-node training/placement attributes MXNet accepts on any op (stored as `key` and `__key__`)
HIDDEN_ATTRS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage", "profiler_scope")

#: attribute keys that frontends may attach to nodes and that no op schema declares
FRONTEND_ATTRS = frozenset({"name", "ctx", "out", "attr", "__layout__", *HIDDEN_ATTRS})


@dataclass
class ComputeContext:
    """What an op's reference implementation may read beyond its inputs. `out_shapes`: the
    node's inferred output shapes when it runs inside a graph (None elsewhere); only ops whose
    output shape the inputs and attributes leave open (creation ops with unknown dims) read it."""
    is_train: bool = False
    rng: np.random.Generator | None = None
    out_shapes: tuple | None = None

    def random(self) -> np.random.Generator:
        if self.rng is None:
            return rng.generator()
        return self.rng


def shape_known(shape) -> bool:
    """True if `shape` is fully known (not None, no 0 dims)."""
    return shape is not None and all(int(d) > 0 for d in shape)


def merge_shape(op: str, what: str, a, b):
    """Unify two partial shapes; raises MXNetError naming the op on a conflict."""
    if type(a) is tuple and a == b:   # the common case: both known and equal
        return a
    if a is None:
        return None if b is None else tuple(b)
    if b is None:
        return tuple(a)
    if len(a) != len(b):
        raise MXNetError(f"{op}: shape mismatch for {what}: expected {tuple(a)}, got {tuple(b)}")
    out = []
    for x, y in zip(a, b):
        if x and y and x != y:
            raise MXNetError(f"{op}: shape mismatch for {what}: expected {tuple(a)}, got {tuple(b)}")
        out.append(x or y)
    return tuple(out)


#: the most elements one tensor may hold: MXNet 1.x (built without large-tensor support) indexes
#: tensors with 32-bit integers, and the native kernels rely on the same bound
MAX_TENSOR_ELEMENTS = 2 ** 31 - 1
#: the most dimensions of a tensor (numpy allows 64; no MXNet model uses more than a handful)
MAX_NDIM = 32


def _plain_size(dims: tuple) -> int:
    """The element count of `dims` (0 dims count as 1) when every dim is a non-negative Python
    int (not a bool), else MAX_TENSOR_ELEMENTS + 1 (so that `check_shape` runs its full checks)."""
    size = 1
    for d in dims:
        if type(d) is not int or d < 0:
            return MAX_TENSOR_ELEMENTS + 1
        size *= d or 1
    return size


def check_shape(op: str, what: str, shape):
    """`shape` as a tuple of non-negative ints (None stays None), or MXNetError naming the op.

    Refuses what no kernel can be given: a non-integer or negative dim, more than MAX_NDIM
    dims, more than MAX_TENSOR_ELEMENTS elements (unknown 0 dims count as 1)."""
    if shape is None:
        return None
    if type(shape) is tuple and len(shape) <= MAX_NDIM and _plain_size(shape) <= MAX_TENSOR_ELEMENTS:
        return shape   # the common case: already a tuple of non-negative Python ints
    try:
        dims = tuple(shape)
    except TypeError:
        raise MXNetError(f"{op}: {what} shape must be a tuple of ints, got {shape!r}") from None
    if len(dims) > MAX_NDIM:
        raise MXNetError(f"{op}: {what} has {len(dims)} dimensions, more than the {MAX_NDIM} supported")
    size = 1
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise MXNetError(f"{op}: {what} shape must be a tuple of ints, got {dims}")
        if d < 0:
            raise MXNetError(f"{op}: {what} shape {dims} has a negative dimension")
        size *= max(int(d), 1)
    if size > MAX_TENSOR_ELEMENTS:
        raise MXNetError(f"{op}: {what} shape {dims} has {size} elements, more than the "
                         f"{MAX_TENSOR_ELEMENTS} a tensor may hold")
    return tuple(int(d) for d in dims)


class Op:
    """Base class of operator definitions. Subclasses override class attributes and methods."""

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple] = ()
    params: ClassVar[Mapping[str, Param]] = {}
    inputs: ClassVar[tuple] = ("data",)
    aux_names: ClassVar[tuple] = ()          # subset of inputs that are auxiliary states
    outputs: ClassVar[tuple] = ("output",)
    kernel: ClassVar[str | None] = None       # kernel family label shown by visualization (e.g. "gemm")
    inplace: ClassVar[Mapping[int, int]] = {}  # output index -> input index that may share its buffer
    is_random: ClassVar[bool] = False         # never merged by CSE, never constant-folded
    updates_aux: ClassVar[bool] = False       # compute returns new aux values after the outputs in training
    mutate_inputs: ClassVar[tuple] = ()       # inputs overwritten by the extra outputs (optimizer states)
    hidden: ClassVar[bool] = False            # internal op (e.g. `_backward_*`) not needing a frontend doc
    subgraph_attrs: ClassVar[tuple] = ()      # attributes holding subgraphs, in MXNet JSON's "subgraphs" order
    #: input name -> initializer (MXNet's JSON form) that the variable a frontend creates for a
    #: missing input carries as `__init__` (MXNet: PReLU's gamma starts at 0.25)
    input_init: ClassVar[Mapping[str, str]] = {}
    doc: ClassVar[str] = ""

    # ---- traits (read by passes and code generators; never a list of op names) -----
    #: output 0 holds input 0's elements in the same order, only the shape differs (Reshape,
    #: Flatten, _copy, ...): code generators copy or alias the buffer, simplification drops the
    #: node when the shape is unchanged and merges chains of them into one Reshape
    reshape_only: ClassVar[bool] = False
    #: the reduction (codegen/llvm/lower_reduce.py `Reduction.kind`: sum, mean, prod, max, min,
    #: argmax, argmin) that output 0 is of input 0 over `reduced_axes`: code generators lower
    #: the op by their reduction kernel
    reduces: ClassVar[str | None] = None
    #: the identity in value that stops gradients (BlockGrad): kept while a graph is
    #: differentiated (training), removed in inference
    gradient_barrier: ClassVar[bool] = False
    #: output 0 is input 0 broadcast to a larger shape: the identity when the shapes agree
    broadcast_only: ClassVar[bool] = False
    #: a GEMM-shaped op (dense layer, matrix product, convolution) whose single output an
    #: elementwise epilogue may be fused into (`_with_epilogue`, passes/fusion.py); a code
    #: generator that lowers the op lowers it with an epilogue too
    epilogue_host: ClassVar[bool] = False
    #: for an op of input 0 and a `scalar` attribute: the scalar that makes it the identity
    #: (x + 0, x * 1, x ** 1, ...); simplification drops such nodes
    neutral_scalar: ClassVar[float | None] = None
    #: the outputs depend only on the inputs' shapes and dtypes, never on their values
    #: (shape_array, size_array): constant folding evaluates the op once shapes are known
    shape_only: ClassVar[bool] = False
    #: MXNet lists the op's input names (its FListInputNames): monitors and op hooks name an
    #: input `<node>_<input name>`; for ops without (the unary math ops, Activation) MXNet
    #: names them `<node>_input<i>` (`monitor_input_names`)
    lists_input_names: ClassVar[bool] = True

    def reduced_axes(self, attrs: Mapping, shape: tuple, dtype) -> tuple | None:
        """For a `reduces` op: the sorted axes reduced for an input of `shape` and `dtype`, or None
        where this instance is not exactly that reduction (e.g. it has an initial value)."""
        return None

    def inference_rewrite(self, F: "Emitter", attrs: Mapping, inputs: Sequence,
                          in_shapes: Sequence) -> list | None:
        """What the op becomes when the graph only predicts, if that differs from the node
        itself (training-only machinery: Dropout, loss heads): replacements for its first
        outputs, built from `inputs` with registered ops through `F` (an input itself for the
        identity), or None to keep the node. passes/inference.py applies it."""
        return None

    # ---- attributes --------------------------------------------------------------
    def parse(self, raw: Mapping[str, Any]) -> dict:
        """Parse raw attributes (Python values or MXNet strings) into canonical values.

        Results are memoized per op for hashable raw attributes (keyed by key, value type and
        value, floats by their bits, so 1, 1.0 and True, and 0.0 and -0.0, stay distinct);
        callers get a fresh dict each time."""
        try:
            key = tuple((k, S._value_key(v)) for k, v in raw.items())   # floats by their bits
            cached = _PARSED.get((self.name, key))
        except TypeError:            # unhashable values (lists, arrays): parse every time
            return parse_attrs(self.name, self.params, raw, FRONTEND_ATTRS)
        if cached is None:
            cached = parse_attrs(self.name, self.params, raw, FRONTEND_ATTRS)
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[(self.name, key)] = cached
        return dict(cached)

    # ---- signature ---------------------------------------------------------------
    def input_names(self, attrs: Mapping) -> list[str]:
        """Names of the inputs for these attributes (e.g. no `bias` when no_bias)."""
        return list(self.inputs)

    def positive_count(self, attrs: Mapping, key: str) -> int:
        """The count attribute `key` of a variadic op (how many inputs or outputs): at least 1."""
        n = attrs[key]
        if n < 1:
            raise MXNetError(f"{self.name}: {key} must be at least 1, got {n}")
        return n

    def aux_input_names(self, attrs: Mapping) -> list[str]:
        """Names of the inputs that are auxiliary states for these attributes."""
        return list(self.aux_names)

    def num_outputs(self, attrs: Mapping) -> int:
        return len(self.outputs)

    def state_targets(self, attrs: Mapping) -> list[str]:
        """Names of the inputs that `compute`'s results beyond `num_outputs` overwrite, in order:
        the aux states for `updates_aux` ops (BatchNorm in training), else `mutate_inputs`
        (optimizer update ops, as MXNet's FMutateInputs). Executors write them back in place."""
        return list(self.aux_names) if self.updates_aux else list(self.mutate_inputs)

    def monitor_input_names(self, attrs: Mapping) -> list[str]:
        """The names MXNet's monitors and op hooks give the inputs (`<node>_<name>`)."""
        names = self.input_names(attrs)
        return names if self.lists_input_names else [f"input{i}" for i in range(len(names))]

    def num_visible_outputs(self, attrs: Mapping) -> int:
        return self.num_outputs(attrs)

    def output_names(self, attrs: Mapping) -> list[str]:
        n = self.num_outputs(attrs)
        names = list(self.outputs)
        return names[:n] if len(names) >= n else [f"output{i}" for i in range(n)]

    # ---- inference ---------------------------------------------------------------
    def infer_shape(self, attrs: Mapping, in_shapes: list) -> tuple[list, list]:
        """Return (input shapes, output shapes), filling what can be deduced."""
        raise MXNetError(f"{self.name}: shape inference is not defined")

    def infer_shape_backward(self, attrs: Mapping, in_shapes: list, out_shapes: list) -> list:
        """Input shapes completed from (partially) known output shapes, as MXNet's shape
        functions also deduce inputs from outputs (a batch size known only downstream).
        Partial shapes as in `infer_shape` (None unknown, 0 an unknown dim); the default
        deduces nothing."""
        return list(in_shapes)

    # ---- checked inference and frontend admission --------------------------------
    # gradient ops: the op they differentiate, which of their inputs are its inputs (this op's
    # input name -> the forward op's input name) and which are its outputs (name -> output
    # index); checked inference then accepts only shapes the forward op could have produced
    forward_op: ClassVar[str | None] = None
    forward_inputs: ClassVar[Mapping[str, str]] = {}
    forward_outputs: ClassVar[Mapping[str, int]] = {}

    @property
    def compiler_internal(self) -> bool:
        """True for ops that only compiler passes create (fused kernels, folded constants): an
        attribute of theirs holds a structured value (an expression, another op's parsed
        attributes, an array) that has no text form, so a symbol file or a frontend call can
        never supply it and the frontends refuse these ops by name."""
        return any(p.kind is Any_ for p in self.params.values())

    def infer_shape_checked(self, attrs: Mapping, in_shapes: Sequence) -> tuple[list, list]:
        """`infer_shape` with the invariants every consumer relies on (native lowerings trust
        only shapes that passed here): one shape per input and per output, every shape valid
        for `check_shape` (ints, non-negative, bounded rank and size), and input shapes that
        refine, never contradict, the given ones. Violations raise MXNetError naming the op."""
        names = self.input_names(attrs)
        if len(in_shapes) != len(names):
            raise MXNetError(f"{self.name}: expected {len(names)} inputs {format_names(names)}, "
                             f"got {len(in_shapes)}")
        given = [check_shape(self.name, f"input {n!r}", s) for n, s in zip(names, in_shapes)]
        if self.forward_op is not None:
            given = self._check_against_forward(attrs, names, given)
        ins, outs = self.infer_shape(attrs, list(given))
        n_out = self.num_outputs(attrs)
        if len(ins) != len(names) or len(outs) != n_out:
            raise MXNetError(f"{self.name}: shape inference returned {len(ins)} input and {len(outs)} "
                             f"output shapes for {len(names)} inputs and {n_out} outputs")
        ins = [merge_shape(self.name, f"input {n!r}", g, check_shape(self.name, f"input {n!r}", s))
               for n, g, s in zip(names, given, ins)]
        outs = [check_shape(self.name, f"output {i}", s) for i, s in enumerate(outs)]
        return ins, outs

    def forward_attrs(self, attrs: Mapping) -> Mapping:
        """The attributes of `forward_op` (default: the same as this op's)."""
        return attrs

    def _check_against_forward(self, attrs: Mapping, names: list, given: list) -> list:
        fwd = get_op(self.forward_op)
        fwd_attrs = self.forward_attrs(attrs)
        try:
            fwd_names = fwd.input_names(fwd.parse(fwd_attrs))
        except MXNetError as e:
            raise MXNetError(f"{self.name}: attributes do not fit the {self.forward_op} it "
                             f"differentiates: {e}") from None
        pos = {n: i for i, n in enumerate(names)}
        mine = {f: m for m, f in self.forward_inputs.items() if m in pos}
        fwd_in = [given[pos[mine[f]]] if f in mine else None for f in fwd_names]
        ograds = {k: given[pos[n]] for n, k in self.forward_outputs.items() if n in pos}
        ins, merged = forward_shapes(self.name, self.forward_op, fwd_attrs, fwd_in, ograds)
        out = list(given)
        for f, s in zip(fwd_names, ins):
            if f in mine:
                out[pos[mine[f]]] = merge_shape(self.name, f"input {mine[f]!r}", out[pos[mine[f]]], s)
        for n, k in self.forward_outputs.items():
            if n in pos:
                out[pos[n]] = merge_shape(self.name, f"input {n!r}", out[pos[n]], merged[k])
        return out

    def infer_type(self, attrs: Mapping, in_types: list) -> tuple[list, list]:
        """Default: every input and output shares the first known dtype."""
        known = next((t for t in in_types if t is not None), None)
        if known is not None:
            for i, t in enumerate(in_types):
                if t is not None and t != known:
                    raise MXNetError(f"{self.name}: dtype mismatch for input "
                                     f"{self.input_names(attrs)[i]!r}: expected {known}, got {t}")
        return [known] * len(in_types), [known] * self.num_outputs(attrs)

    # ---- execution ---------------------------------------------------------------
    def compute(self, attrs: Mapping, inputs: Sequence[np.ndarray], ctx: ComputeContext) -> list:
        raise MXNetError(f"{self.name}: no reference implementation")

    def grad(self, F: "Emitter", attrs: Mapping, inputs: Sequence, outputs: Sequence,
             ograds: Sequence) -> list:
        """Gradients w.r.t. each input, built with registered ops through `F`."""
        raise MXNetError(f"{self.name}: operator is not differentiable")

    differentiable: ClassVar[bool] = True
    #: `grad` takes None as the head gradient of an output that nothing downstream used
    #: (eager autograd then makes no zeros for it: a hidden output kept for the gradient)
    grad_takes_missing_ograds: ClassVar[bool] = False

    def __repr__(self):
        return f"<Op {self.name}>"


def forward_shapes(op: str, forward: str, attrs: Mapping, inputs: Sequence,
                   ograds: Mapping[int, Any]) -> tuple[list, dict]:
    """Shape check of a gradient op `op` against the op `forward` it differentiates.

    Runs `forward`'s checked inference on its `inputs` (shapes in its input order, None where
    unknown) with `attrs` (raw or parsed attributes of `forward`) and merges each given output
    gradient shape (`ograds`: forward output index -> shape) with that output's shape. Returns
    (refined forward input shapes, {index: refined ograd shape}); any inconsistency raises
    MXNetError naming `op`. Gradient ops whose lowering reads several inputs use this so they
    accept exactly the shapes their forward op could have produced."""
    fwd = get_op(forward)
    try:
        parsed = fwd.parse(attrs)
        ins, outs = fwd.infer_shape_checked(parsed, list(inputs))
        if any(k >= len(outs) for k in ograds):
            raise MXNetError(f"{forward} has {len(outs)} outputs, fewer than the gradients given")
        merged = {k: merge_shape(forward, f"output {k} (the gradient {op} reads)", outs[k], g)
                  for k, g in ograds.items()}
    except MXNetError as e:
        raise MXNetError(f"{op}: inputs do not match the {forward} it differentiates: {e}") from None
    return ins, merged


def format_names(names: Sequence[str], limit: int = 8) -> str:
    """names as a list literal, the middle elided past `limit` entries."""
    if len(names) <= limit:
        return str(list(names))
    return f"[{', '.join(map(repr, names[:limit - 1]))}, ..., {names[-1]!r}]"


def register(name: str, aliases: Sequence[str] = ()) -> Callable[[type], type]:
    """Class decorator: instantiate the op definition and register it under its names."""
    def deco(cls: type) -> type:
        cls.name = name
        cls.aliases = tuple(aliases)
        inst = cls()
        for n in (name, *aliases):
            if n in OPS:
                raise RuntimeError(f"operator {n!r} registered twice")
            OPS[n] = inst
        return cls
    return deco


def get_op(name: str) -> Op:
    """The op registered under `name` (or an alias). Unknown names raise MXNetError."""
    _ensure_loaded()
    op = OPS.get(name)
    if op is None:
        raise MXNetError(f"unknown operator {name!r}")
    return op


def find_op(name: str) -> Op | None:
    _ensure_loaded()
    return OPS.get(name)


def list_ops() -> list[str]:
    """All registered names, aliases included, sorted."""
    _ensure_loaded()
    return sorted(OPS)


_LOADED = False


def _ensure_loaded():
    global _LOADED
    if not _LOADED:
        from . import _load_all  # noqa: F401  (importing the package registers every op module)
        _LOADED = True


class Emitter:
    """How gradient rules (and other op-level code) call registered ops.

    A backend supplies `apply(op_name, inputs, attrs) -> list of outputs`; the eager
    backend applies ops to NDArrays, the IR backend emits graph nodes. Rules write
    `F.elemwise_mul(dy, y)` or `F.apply('_plus_scalar', [x], scalar=1.0)`; single-output
    ops return one value, multi-output ops a list.
    """

    def __init__(self, apply: Callable[[str, list, dict], list]):
        self._apply = apply

    def apply(self, op_name: str, inputs: Sequence, **attrs) -> list:
        return self._apply(op_name, list(inputs), attrs)

    def __getattr__(self, op_name: str):
        if op_name.startswith("__"):
            raise AttributeError(op_name)
        op = get_op(op_name)

        def call(*inputs, **attrs):
            outs = self._apply(op_name, list(inputs), attrs)
            return outs[0] if op.num_visible_outputs(op.parse(attrs)) == 1 else outs
        return call


# --------------------------------------------------------------------------------------
# Base classes shared by many ops
# --------------------------------------------------------------------------------------

def broadcast_shapes(op: str, shapes: Sequence) -> tuple:
    """MXNet broadcasting: align trailing dims; each pair equal or one of them 1."""
    if any(s is None for s in shapes):
        return None
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(nd):
        dims = [s[len(s) - nd + i] if len(s) - nd + i >= 0 else 1 for s in shapes]
        known = {d for d in dims if d not in (0, 1)}
        if len(known) > 1:
            raise MXNetError(f"{op}: operands could not be broadcast together with shapes "
                             + " ".join(str(tuple(s)) for s in shapes))
        if known:
            out.append(known.pop())
        elif 0 in dims:
            out.append(0)
        else:
            out.append(1)
    return tuple(out)


class Elementwise(Op):
    """An op defined by a scalar expression over same-shaped inputs.

    Subclasses define `expr(self, attrs, *xs) -> scalar.Expr`. The numpy reference,
    fusion and codegen all derive from it. Output dtype equals the input dtype unless
    `out_dtype` says otherwise.
    """
    inplace = {0: 0}
    broadcast: ClassVar[bool] = False

    def expr(self, attrs: Mapping, *xs: S.Expr) -> S.Expr:
        raise MXNetError(f"{self.name} defines no scalar expression")

    def out_dtype(self, attrs: Mapping, in_dtype):
        return in_dtype

    def compute_dtype(self, attrs: Mapping, in_dtypes: Sequence) -> str | None:
        """The dtype the expression is evaluated in for inputs of `in_dtypes` (inputs convert to
        it, the result converts to the output dtype when stored); None when no kernel computes
        this instance exactly as `compute` does (it then runs its reference). Default: the
        first input's dtype."""
        return np.dtype(in_dtypes[0]).name if in_dtypes else None

    def infer_shape(self, attrs, in_shapes):
        if self.broadcast:
            return list(in_shapes), [broadcast_shapes(self.name, in_shapes)]
        merged = None
        for i, s in enumerate(in_shapes):
            merged = merge_shape(self.name, f"input {self.input_names(attrs)[i]!r}", merged, s)
        return [merged] * len(in_shapes), [merged]

    def infer_shape_backward(self, attrs, in_shapes, out_shapes):
        if self.broadcast or out_shapes[0] is None:
            return list(in_shapes)
        return [merge_shape(self.name, "the output", s, out_shapes[0]) for s in in_shapes]

    def infer_type(self, attrs, in_types):
        ins, _ = super().infer_type(attrs, in_types)
        t = ins[0] if ins else None
        return ins, [None if t is None else self.out_dtype(attrs, t)]

    def full_expr(self, attrs: Mapping) -> S.Expr:
        """The expression over `Input(0..n-1)`, ending in the output dtype's cast if any."""
        return self.expr(attrs, *[S.Input(i) for i in range(len(self.input_names(attrs)))])

    def _eager_expr(self, attrs: Mapping) -> S.Expr:
        """`full_expr(attrs)`, memoized per op for attributes of plain scalar values (floats
        keyed by their bits, so 0.0 and -0.0 stay distinct); expressions are immutable."""
        key = _expr_memo_key(attrs)
        if key is None:
            return self.full_expr(attrs)
        memo = self.__dict__.get("_expr_memo")
        if memo is None:
            memo = self._expr_memo = {}
        found = memo.get(key)
        if found is None:
            if len(memo) >= _EXPR_MEMO_MAX:
                memo.clear()
            found = memo[key] = self.full_expr(attrs)
        return found

    def compute(self, attrs, inputs, ctx):
        dtype = inputs[0].dtype
        if self.broadcast:
            out_shape = broadcast_shapes(self.name, [x.shape for x in inputs])
        else:
            for i, x in enumerate(inputs[1:], 1):
                if x.shape != inputs[0].shape:
                    raise MXNetError(f"{self.name}: shape mismatch for input "
                                     f"{self.input_names(attrs)[i]!r}: expected "
                                     f"{inputs[0].shape}, got {x.shape}")
        out = S.evaluate(self._eager_expr(attrs), inputs, dtype)
        od = np.dtype(self.out_dtype(attrs, _dtype_name(dtype)))
        if out.dtype != od:
            out = out.astype(od)
        if self.broadcast and out.shape != out_shape:
            out = np.broadcast_to(out, out_shape)
        return [fresh_array(out, inputs)]



#: memoized eager expressions per elementwise op (attributes such as scalars vary: bounded)
_EXPR_MEMO_MAX = 256
_PLAIN_ATTR_TYPES = (bool, int, str, type(None))


def _expr_memo_key(attrs: Mapping) -> tuple | None:
    """A key equal only for attributes that build the same expression, or None."""
    key = []
    for k, v in attrs.items():
        if type(v) is float:
            key.append((k, S._value_key(v)))
        elif type(v) in _PLAIN_ATTR_TYPES:
            key.append((k, type(v), v))
        else:
            return None
    return tuple(key)


_DTYPE_NAMES: dict = {}


def _dtype_name(dtype: np.dtype) -> str:
    """`dtype.name` (a Python-level property in numpy), cached per dtype."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


class LikeInput(Op):
    """An op with one output of the shape and dtype of input number `like` (gradient ops such as
    `_backward_X(ograd, data, ...)` -> d data)."""
    like: ClassVar[int] = 0

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), [in_shapes[self.like]]

    def infer_type(self, attrs, in_types):
        return list(in_types), [in_types[self.like]]


def fresh_array(out: np.ndarray, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """`out` as a contiguous array that shares no memory with `inputs` (an identity
    expression evaluates to its input; results must never alias what an op read)."""
    out = np.ascontiguousarray(out)
    if any(np.may_share_memory(out, x) for x in inputs):
        out = out.copy()
    return out


def apply_numpy(op_name: str, inputs: Sequence[np.ndarray], attrs: Mapping[str, Any] | None = None,
                ctx: ComputeContext | None = None) -> list:
    """Run one op's reference implementation on numpy arrays (all outputs, aux updates included)."""
    op = get_op(op_name)
    parsed = op.parse(attrs or {})
    names = op.input_names(parsed)
    if len(inputs) != len(names):
        raise MXNetError(f"{op.name}: expected {len(names)} inputs {names}, got {len(inputs)}")
    return op.compute(parsed, [np.asarray(x) for x in inputs], ctx or ComputeContext())


def numpy_emitter(ctx: ComputeContext | None = None) -> Emitter:
    """An Emitter that applies ops directly to numpy arrays (reference semantics, no tape)."""
    return Emitter(lambda name, ins, attrs: apply_numpy(name, ins, attrs, ctx))
