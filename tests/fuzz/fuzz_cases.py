"""Fuzz cases: each one is rebuilt from (kind, seed, index) alone, so a case that crashed a
worker can be named and replayed (`python tests/fuzz/fuzz_worker.py --replay KIND SEED INDEX`).

Kinds
  * ``json``   — MXNet symbol JSON: mutations of small valid graphs (wrong arity, bad or huge
                 attributes, missing keys, wrong types, bad references, raw bytes), loaded,
                 inferred and, when that succeeds, bound and run on the native backend;
  * ``params`` — `.params` bytes: truncations, bit flips, trailing bytes, huge declared sizes;
  * ``op``     — one registered op (the registry is iterated, internal ops included) alone with
                 random attributes and random input shapes, compiled and run natively.

`run_case` returns how far a case got when it ended normally (``refused`` by an MXNetError,
``ran`` to the end) and lets any other exception propagate: the worker reports it as a finding.
"""
from __future__ import annotations

import json
import os
import random
import struct
import tempfile

import numpy as np

import symjit as mx
from symjit.base import MXNetError
from symjit.ops import attrs as A
from symjit.ops.registry import OPS, list_ops

KINDS = ("json", "params", "op")

#: largest input a case may allocate (elements); keeps a run's memory and time bounded
MAX_ELEMENTS = 1 << 16

HUGE_INTS = (99999999999, 2 ** 31, 2 ** 32 + 1, 2 ** 63, -2 ** 31, 10 ** 30)
STRANGE_STRINGS = ("", " ", "None", "nan", "inf", "-inf", "()", "(,)", "[]", "(0,)", "(-1,)",
                   "(1, 2, 3, 4, 5, 6, 7, 8, 9)", "True", "abc", "\u00e9\u4e2d", "{}", "1e400",
                   "(" * 300, "[1," * 2000, "-" * 5000 + "1", "1" * 5000, "(1,)" * 50,
                   "\x00", "'float32'", "float128", "complex64")


def rng_for(kind: str, seed: int, index: int) -> random.Random:
    return random.Random(f"{kind}:{seed}:{index}")


# ---------------------------------------------------------------------------------------------
# op cases
# ---------------------------------------------------------------------------------------------

def op_names() -> list[str]:
    """Every registered op once (by its canonical name), in a stable order."""
    list_ops()
    return sorted({op.name for op in OPS.values()})


def _random_for_kind(kind, r: random.Random):
    """A value for an attribute parser `kind`: mostly plausible, sometimes hostile."""
    if r.random() < 0.08:
        return r.choice(STRANGE_STRINGS + HUGE_INTS + (None, -1, 0, 1.5, True))
    choices = getattr(kind, "choices", None)
    if choices is not None:
        return r.choice(choices)
    inner = getattr(kind, "inner", None)
    if inner is not None:
        return None if r.random() < 0.3 else _random_for_kind(inner, r)
    if kind is A.Int:
        return r.choice((-2, -1, 0, 1, 1, 2, 2, 3, 4, 5, 8, r.randint(-10, 10)))
    if kind is A.Float:
        return r.choice((0.0, 0.5, 1.0, -1.0, 1e-5, 2.0, 1e30, float("nan"), r.uniform(-3, 3)))
    if kind is A.Bool:
        return r.random() < 0.5
    if kind is A.Shape:
        return tuple(r.choice((-2, -1, 0, 1, 1, 2, 2, 3, 4)) for _ in range(r.randint(0, 4)))
    if kind is A.FloatTuple:
        return tuple(r.uniform(-2, 2) for _ in range(r.randint(0, 4)))
    if kind is A.Dtype:
        return r.choice(("float32", "float32", "float64", "float16", "int32", "int64", "uint8",
                         "int8", "bool"))
    if kind is A.Str:
        return r.choice(("", "a", "data", "float32", "None"))
    return r.choice((None, 0, 1, "x", (1, 2)))


def random_attrs(op, r: random.Random) -> dict:
    attrs = {}
    for key, p in op.params.items():
        if p.kind is A.Any_:
            continue   # internal structured attributes (expressions, subgraphs): never from users
        if p.default is not A.REQUIRED and r.random() < 0.5:
            continue
        v = _random_for_kind(p.kind, r)
        if v is not None:
            attrs[key] = v
    if r.random() < 0.03:
        attrs["no_such_attribute"] = 1
    return attrs


def random_shape(r: random.Random, ndim: int | None = None) -> tuple:
    ndim = r.choice((0, 1, 1, 2, 2, 3, 4, 4, 5)) if ndim is None else ndim
    dims = [r.choice((1, 1, 2, 3, 4, 5, 6, 8, 12, 16)) for _ in range(ndim)]
    if dims and r.random() < 0.05:
        dims[r.randrange(len(dims))] = 0
    while np.prod(dims, dtype=np.int64) > MAX_ELEMENTS:
        dims[dims.index(max(dims))] = 1
    return tuple(dims)


def random_input_shapes(names: list, r: random.Random) -> dict:
    mode = r.random()
    if mode < 0.35:                       # all the same shape (elementwise, ...)
        s = random_shape(r)
        return {n: s for n in names}
    if mode < 0.55:                       # same rank, some dims 1 (broadcasting)
        s = random_shape(r, r.randint(1, 4))
        return {n: tuple(d if r.random() < 0.7 else 1 for d in s) for n in names}
    if mode < 0.65:                       # only the first given: inference fills the rest
        return {names[0]: random_shape(r)} if names else {}
    return {n: random_shape(r) for n in names}


def random_inputs(shapes: dict, dtypes: dict, r: random.Random) -> dict:
    g = np.random.default_rng(r.randrange(2 ** 32))
    out = {}
    for name, shape in shapes.items():
        dt = np.dtype(dtypes.get(name, "float32"))
        choice = r.random()
        if choice < 0.6:
            a = g.uniform(-3, 3, size=shape)
        elif choice < 0.8:
            a = g.integers(-4, 20, size=shape)
        else:
            a = g.choice(np.array([0.0, -1.0, 1e30, -1e30, np.inf, np.nan, 7.0, 1e9]), size=shape)
        with np.errstate(all="ignore"):
            out[name] = a.astype(dt)
    return out


def bind_and_run(sym, shapes: dict, r: random.Random, dtypes: dict | None = None, train=False):
    """simple_bind with `shapes`, fill every argument with random values, run forward (and
    backward when training). Errors must be MXNetError."""
    ex = sym.simple_bind(mx.cpu(), grad_req="write" if train else "null", type_dict=dtypes or None,
                         **shapes)
    arrays = dict(ex.arg_dict)
    arrays.update(ex.aux_dict)
    values = random_inputs({k: v.shape for k, v in arrays.items()},
                           {k: v.dtype for k, v in arrays.items()}, r)
    for k, v in values.items():
        arrays[k][:] = v
    outs = ex.forward(is_train=train)
    for o in outs:
        o.asnumpy()
    if train:
        ex.backward([mx.nd.ones(o.shape, dtype=o.dtype) for o in outs])
        for g in ex.grad_arrays:
            if g is not None:
                g.asnumpy()


def _example_symbols() -> list:
    """(symbol, input shapes) of small training graphs whose forward and gradient nodes give
    valid (op, attributes, input shapes) examples to mutate."""
    S, v = mx.sym, mx.sym.var
    d = v("data")
    out = [
        (S.Convolution(d, kernel=(3, 3), num_filter=4, num_group=2, pad=(1, 1), stride=(2, 2)), {"data": (2, 4, 7, 7)}),
        (S.Convolution(d, kernel=(3,), num_filter=6, num_group=3, dilate=(2,)), {"data": (1, 3, 9)}),
        (S.Deconvolution(d, kernel=(2, 2), num_filter=4, num_group=2, stride=(2, 2), adj=(1, 1)), {"data": (1, 4, 3, 3)}),
        (S.FullyConnected(d, num_hidden=5), {"data": (3, 2, 4)}),
        (S.FullyConnected(d, num_hidden=3, flatten=False), {"data": (2, 3, 4)}),
        (S.BatchNorm(d, fix_gamma=False), {"data": (2, 3, 4, 4)}),
        (S.Pooling(d, kernel=(3, 3), stride=(2, 2), pool_type="max", pad=(1, 1)), {"data": (1, 2, 7, 7)}),
        (S.Pooling(d, kernel=(2,), pool_type="avg"), {"data": (1, 2, 6)}),
        (S.Embedding(d, input_dim=7, output_dim=3), {"data": (2, 5)}),
        (S.LayerNorm(d), {"data": (2, 3, 5)}),
        (S.InstanceNorm(d), {"data": (2, 3, 5)}),
        (S.GroupNorm(d, num_groups=2), {"data": (2, 4, 3, 3)}),
        (S.LeakyReLU(d, act_type="prelu"), {"data": (2, 3, 4)}),
        (S.L2Normalization(d, mode="channel"), {"data": (2, 3, 4)}),
        (S.SoftmaxOutput(d, v("label")), {"data": (4, 5), "label": (4,)}),
        (S.Pad(d, mode="constant", pad_width=(0, 0, 0, 0, 1, 2, 2, 1)), {"data": (1, 2, 3, 3)}),
        (S.UpSampling(d, scale=2, sample_type="nearest", num_args=1), {"data": (1, 2, 3, 3)}),
        (S.take(d, v("idx")), {"data": (5, 3), "idx": (4,)}),
        (S.pick(d, v("idx"), axis=1), {"data": (4, 5), "idx": (4,)}),
        (S.mean(S.sum(d, axis=1, keepdims=True), axis=(0, 2)), {"data": (2, 3, 4)}),
        (S.topk(d, k=2, ret_typ="value"), {"data": (3, 5)}),
        (S.dot(d, v("w"), transpose_b=True), {"data": (3, 4), "w": (5, 4)}),
        (S.broadcast_add(d, v("b")), {"data": (2, 3, 4), "b": (1, 3, 1)}),
        (S.softmax_cross_entropy(d, v("label")), {"data": (4, 5), "label": (4,)}),
        (S.gather_nd(d, v("idx")), {"data": (4, 5), "idx": (2, 3)}),
        (S.diag(d), {"data": (4, 4)}),
        (S.LinearRegressionOutput(d, v("label")), {"data": (4, 2), "label": (4, 2)}),
        (S.CTCLoss(d, v("label")), {"data": (6, 2, 5), "label": (2, 3)}),
        (S.BilinearSampler(d, v("grid")), {"data": (1, 2, 4, 4), "grid": (1, 2, 3, 3)}),
        (S.Convolution(d, kernel=(2, 2, 2), num_filter=2, stride=(1, 2, 1)), {"data": (1, 2, 3, 4, 4)}),
        (S.Deconvolution(d, kernel=(3, 3), num_filter=2, target_shape=(7, 7), stride=(2, 2)), {"data": (1, 3, 3, 3)}),
        (S.Pooling(d, kernel=(1, 1), global_pool=True, pool_type="avg"), {"data": (2, 3, 4, 4)}),
        (S.Pooling(d, kernel=(3, 3), stride=(2, 2), pooling_convention="full", pool_type="sum"), {"data": (1, 1, 6, 6)}),
        (S.BatchNorm(d, axis=-1, use_global_stats=True), {"data": (2, 4, 3)}),
        (S.RNN(d, v("p"), v("s"), v("c"), mode="lstm", state_size=3, num_layers=1, state_outputs=True),
         {"data": (4, 2, 5), "p": (120,), "s": (1, 2, 3), "c": (1, 2, 3)}),
        (S.RNN(d, v("p"), v("s"), mode="gru", state_size=2, num_layers=1, bidirectional=True),
         {"data": (3, 2, 4), "p": (96,), "s": (2, 2, 2)}),
        (S.topk(d, k=3, axis=0, ret_typ="both"), {"data": (5, 2)}),
        (S.SliceChannel(d, num_outputs=3, axis=1, squeeze_axis=True), {"data": (2, 3, 4)}),
        (S.slice(d, begin=(0, 1), end=(2, None), step=(1, 2)), {"data": (3, 5)}),
        (S.reshape(d, shape=(-1, 0, 2)), {"data": (2, 3, 4)}),
        (S.one_hot(d, depth=4), {"data": (3,)}),
        (S.take(d, v("idx"), axis=1, mode="wrap"), {"data": (3, 4), "idx": (2, 2)}),
        (S.Embedding(d, v("w"), input_dim=5, output_dim=2), {"data": (4,), "w": (5, 2)}),
        (S.batch_dot(d, v("b"), transpose_a=True), {"data": (2, 3, 4), "b": (2, 3, 5)}),
        (S.softmax(d, axis=1, temperature=2.0), {"data": (2, 3, 4)}),
        (S.transpose(d, axes=(2, 0, 1)), {"data": (2, 3, 4)}),
        (S.tile(d, reps=(2, 1, 3)), {"data": (2, 3)}),
        (S.repeat(d, repeats=2, axis=0), {"data": (2, 3)}),
        (S.Pad(d, mode="reflect", pad_width=(0, 0, 0, 0, 1, 1, 2, 2)), {"data": (1, 1, 3, 4)}),
        (S.sort(d, axis=-1, is_ascend=False), {"data": (3, 4)}),
        (S.argmax(d, axis=1, keepdims=True), {"data": (3, 4)}),
        (S.norm(d, ord=2, axis=1), {"data": (3, 4)}),
        (S.where(v("c"), d, v("y")), {"c": (3, 4), "data": (3, 4), "y": (3, 4)}),
        (S.Cast(d, dtype="float16"), {"data": (3, 4)}),
        (S.GridGenerator(d, transform_type="affine", target_shape=(3, 4)), {"data": (2, 6)}),
        (S.L2Normalization(d, mode="instance"), {"data": (2, 3, 4)}),
        (S.UpSampling(d, v("e"), scale=2, sample_type="nearest", num_args=2, multi_input_mode="sum"),
         {"data": (1, 2, 2, 2), "e": (1, 2, 4, 4)}),
    ]
    return out


_EXAMPLES = None


def op_examples() -> list:
    """(op, parsed attributes, input shapes) of every node of the examples' training graphs."""
    global _EXAMPLES
    if _EXAMPLES is None:
        from symjit.passes.autodiff import autodiff
        from symjit.passes.infer import infer_types
        from symjit.symbol.lower import lower
        _EXAMPLES = []
        for sym, shapes in _example_symbols():
            try:
                g, _ = lower(sym)
                g, _ = infer_types(g, shapes=shapes)
                g, _ = infer_types(g, dtypes={x.name: "float32" for x in g.inputs if x.type.dtype is None})
                bwd, _ = autodiff(g, list(g.args), "write")
            except MXNetError:
                continue
            for n in list(g.nodes) + list(bwd.nodes):
                if any(p.kind is A.Any_ for p in n.op.params.values()):
                    continue
                _EXAMPLES.append((n.op, dict(n.attrs), [tuple(x.type.shape) for x in n.inputs]))
    return _EXAMPLES


def _mutate_shapes(shapes: list, r: random.Random) -> list:
    shapes = [list(s) for s in shapes]
    for _ in range(r.choice((1, 1, 2))):
        i = r.randrange(len(shapes))
        s = shapes[i]
        what = r.randrange(6)
        if what == 0 and s:
            j = r.randrange(len(s))
            s[j] = max(0, s[j] + r.choice((-1, 1, 2, s[j])))
        elif what == 1 and s:
            s[r.randrange(len(s))] = r.choice((1, 2, 3, 5, 16))
        elif what == 2 and s:
            s.pop(r.randrange(len(s)))
        elif what == 3:
            s.insert(r.randrange(len(s) + 1), r.choice((1, 2, 3)))
        elif what == 4 and len(shapes) > 1:
            j = r.randrange(len(shapes))
            shapes[i], shapes[j] = shapes[j], shapes[i]
        else:
            shapes[i] = list(random_shape(r))
    out = []
    for s in shapes:
        while s and np.prod(s, dtype=np.int64) > MAX_ELEMENTS:
            s[s.index(max(s))] = 1
        out.append(tuple(s))
    return out


def _mutated_example(r: random.Random):
    """(op, attributes, input shapes): a valid example with its shapes or an attribute changed."""
    op, attrs, shapes = r.choice(op_examples())
    attrs = {k: v for k, v in attrs.items() if v is not None}
    if r.random() < 0.3 and op.params:
        key = r.choice(sorted(op.params))
        if op.params[key].kind is not A.Any_:
            attrs[key] = _random_for_kind(op.params[key].kind, r)
            if attrs[key] is None:
                del attrs[key]
        if r.random() < 0.5:
            return op, attrs, shapes
    return op, attrs, _mutate_shapes(shapes, r)


def op_case(seed: int, index: int) -> str:
    """Even indices: every registered op in turn with random attributes and shapes (a quarter of
    them applied eagerly to NDArrays, the rest compiled); odd ones: mutations of valid nodes
    (gradient ops included) taken from small training graphs, compiled."""
    r = rng_for("op", seed, index)
    if index % 2 and op_examples():
        op, attrs, shapes = _mutated_example(r)
        inputs = [mx.sym.var(f"in{i}") for i in range(len(shapes))]
        from symjit.symbol.symbol import create_op_symbol
        try:
            sym = create_op_symbol(op.name, inputs, attrs, name="fz")
            bind_and_run(sym, {f"in{i}": s for i, s in enumerate(shapes)}, r)
        except MXNetError:
            return "refused"
        return "ran"
    names = op_names()
    op = OPS[names[(index // 2) % len(names)]]
    attrs = random_attrs(op, r)
    try:
        parsed = op.parse(attrs)
        in_names = op.input_names(parsed)
    except MXNetError:
        return "refused"
    shapes = random_input_shapes([f"in{i}" for i in range(len(in_names))], r)
    if r.random() < 0.25:                 # eagerly, through the NDArray frontend
        shapes = {k: shapes.get(k, random_shape(r)) for k in (f"in{i}" for i in range(len(in_names)))}
        values = random_inputs(shapes, {}, r)
        from symjit.ndarray.ndarray import invoke
        outs = invoke(op.name, [mx.nd.array(values[f"in{i}"]) for i in range(len(in_names))], attrs,
                      all_outputs=True)
        for o in outs:
            o.asnumpy()
        return "ran"
    inputs = [mx.sym.var(f"in{i}") for i in range(len(in_names))]
    from symjit.symbol.symbol import create_op_symbol
    try:
        sym = create_op_symbol(op.name, inputs, attrs, name="fz")
    except MXNetError:
        return "refused"
    dtypes = None
    if r.random() < 0.2:
        dtypes = {f"in{i}": r.choice(("float64", "float16", "int32", "uint8", "int64"))
                  for i in range(len(in_names)) if r.random() < 0.7}
    try:
        bind_and_run(sym, shapes, r, dtypes, train=r.random() < 0.15 and op.differentiable)
    except MXNetError:
        return "refused"
    return "ran"


# ---------------------------------------------------------------------------------------------
# symbol JSON cases
# ---------------------------------------------------------------------------------------------

def _base_graphs() -> list:
    """(symbol, input shapes) of small valid graphs touching common ops and attribute kinds."""
    d = mx.sym.var("data")
    fc = mx.sym.Activation(mx.sym.FullyConnected(d, num_hidden=4, name="fc"), act_type="relu")
    conv = mx.sym.Convolution(d, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    bn = mx.sym.BatchNorm(conv, name="bn")
    pool = mx.sym.Pooling(bn, kernel=(2, 2), stride=(2, 2), pool_type="max")
    parts = mx.sym.SliceChannel(d, num_outputs=2, axis=1, name="split")
    cat = mx.sym.Concat(parts[0], parts[1], mx.sym.var("b"), dim=1, name="cat")
    rs = mx.sym.sum(mx.sym.reshape(cat, shape=(0, -1)), axis=1)
    emb = mx.sym.Embedding(d, input_dim=10, output_dim=3, name="emb")
    return [(fc, {"data": (2, 5)}), (pool, {"data": (1, 2, 6, 6)}),
            (rs, {"data": (2, 4, 3), "b": (2, 1, 3)}), (emb, {"data": (2, 3)})]


_BASES = None


def base_graphs():
    global _BASES
    if _BASES is None:
        _BASES = [(json.loads(s.tojson()), shapes) for s, shapes in _base_graphs()]
    return _BASES


def _hostile_value(r: random.Random):
    return r.choice((None, True, 1, -1, 2 ** 70, 1.5, "x", [], {}, [1, 2], [[0, 0, 0]],
                     {"a": 1}, "99999999999", "-1", "1e400", "A" * 100000, "(" * 100000))


def _attrs_of(node: dict) -> dict:
    """The node's attribute object, replaced by an empty one when a mutation retyped it."""
    if not isinstance(node.get("attrs"), dict):
        node["attrs"] = {}
    return node["attrs"]


def _mutate(g: dict, r: random.Random) -> None:
    listed = g.get("nodes") if isinstance(g.get("nodes"), list) else []
    nodes = [n for n in listed if isinstance(n, dict)]     # a mutation may have retyped some
    ops = [n for n in nodes if n.get("op") != "null"]
    what = r.randrange(12)
    if what == 0 and ops:             # an attribute replaced by a hostile or huge value
        n = r.choice(ops)
        attrs = _attrs_of(n)
        key = r.choice(sorted(attrs) + ["num_args", "num_outputs", "kernel", "shape", "axis"])
        attrs[key] = r.choice(STRANGE_STRINGS + tuple(str(h) for h in HUGE_INTS)
                              + ("A" * 100000, "(1," * 30000, "99999999999"))
    elif what == 1 and ops:           # an attribute with a non-string value
        n = r.choice(ops)
        _attrs_of(n)[r.choice(("num_hidden", "kernel", "dim", "num_args"))] = _hostile_value(r)
    elif what == 2 and nodes:         # a key dropped or given a wrong type
        n = r.choice(nodes)
        key = r.choice(("op", "name", "inputs", "attrs"))
        if r.random() < 0.5:
            n.pop(key, None)
        else:
            n[key] = _hostile_value(r)
    elif what == 3 and ops:           # wrong arity: an input added or removed
        n = r.choice(ops)
        ins = n.get("inputs")
        if isinstance(ins, list):
            if ins and r.random() < 0.5:
                ins.pop(r.randrange(len(ins)))
            else:
                ins.append([r.randrange(len(nodes)), 0, 0])
    elif what == 4 and ops:           # a reference out of range, negative or malformed
        n = r.choice(ops)
        ins = n.get("inputs")
        if isinstance(ins, list) and ins:
            ins[r.randrange(len(ins))] = r.choice(([10 ** 12, 0, 0], [-1, 0, 0], [0, 2 ** 40, 0],
                                                   [0], [0, 0, 0, 0], ["0", 0, 0], [0.5, 0, 0],
                                                   [len(nodes) - 1, 0, 0]))
    elif what == 5 and ops:           # another registered op with the same attributes and inputs
        r.choice(ops)["op"] = r.choice(op_names())
    elif what == 6:                   # heads broken
        g["heads"] = r.choice(([], [[10 ** 9, 0, 0]], [[0, 5, 0]], "x", None, [[0, -1, 0]]))
    elif what == 7:                   # top-level key dropped or retyped
        key = r.choice(("nodes", "heads", "arg_nodes", "node_row_ptr", "attrs"))
        if r.random() < 0.5:
            g.pop(key, None)
        else:
            g[key] = _hostile_value(r)
    elif what == 8 and nodes:         # a cycle
        n = r.choice(ops or nodes)
        n["inputs"] = [[len(nodes) - 1, 0, 0]] + (n.get("inputs") or [])[1:] \
            if isinstance(n.get("inputs"), list) else []
    elif what == 9 and ops:           # a variadic count declared far beyond the inputs
        _attrs_of(r.choice(ops))[r.choice(("num_args", "num_outputs"))] = \
            str(r.choice((0, -1, 3, 99999999999, 2 ** 40, 10 ** 6)))
    elif what == 10 and nodes:        # duplicate nodes
        listed.append(json.loads(json.dumps(r.choice(nodes))))
    else:                             # a node's name hostile
        if nodes:
            r.choice(nodes)["name"] = r.choice(("", "a" * 100000, "\u0000", "data"))


def _load_from_file(data: bytes, suffix: str, load):
    """load(path) of a temporary file holding `data`."""
    fd, path = tempfile.mkstemp(suffix=suffix)
    try:
        os.write(fd, data)
        os.close(fd)
        return load(path)
    finally:
        os.unlink(path)


def json_case(seed: int, index: int) -> str:
    r = rng_for("json", seed, index)
    base, shapes = r.choice(base_graphs())
    g = json.loads(json.dumps(base))
    for _ in range(r.choice((1, 1, 1, 2, 3))):
        _mutate(g, r)
    text = json.dumps(g)
    form = r.random()
    try:
        if form < 0.1:                    # raw bytes in a file: truncation or non-UTF-8 bytes
            data = bytearray(text.encode("utf-8"))
            if r.random() < 0.5:
                data = data[:r.randrange(len(data) + 1)]
            else:
                for _ in range(r.randint(1, 4)):
                    data[r.randrange(len(data))] = r.choice((0x80, 0xFF, 0xC3, 0x00))
            sym = _load_from_file(bytes(data), "-symbol.json", mx.sym.load)
        else:
            sym = mx.sym.load_json(text)
        sym.list_arguments()
        sym.infer_shape_partial(**shapes)
        if r.random() < 0.35:
            bind_and_run(sym, shapes, r)
    except MXNetError:
        return "refused"
    return "ran"


# ---------------------------------------------------------------------------------------------
# .params cases
# ---------------------------------------------------------------------------------------------

def _valid_params(r: random.Random) -> bytes:
    g = np.random.default_rng(r.randrange(2 ** 32))
    arrays = [mx.nd.array(g.standard_normal(random_shape(r, r.randint(1, 3))).astype(dt), dtype=dt)
              for dt in r.sample(("float32", "float64", "float16", "int32", "uint8", "int64"), r.randint(1, 3))]
    if r.random() < 0.5:
        return mx.nd.save_to_bytes(arrays) if hasattr(mx.nd, "save_to_bytes") else _dumps(arrays)
    return _dumps({f"arg:w{i}": a for i, a in enumerate(arrays)})


def _dumps(data) -> bytes:
    from symjit.ndarray.serialization import dumps
    return dumps(data)


def params_case(seed: int, index: int) -> str:
    r = rng_for("params", seed, index)
    buf = bytearray(_valid_params(r))
    what = r.randrange(5)
    if what == 0:
        buf = buf[:r.randrange(len(buf))]
    elif what == 1:
        for _ in range(r.randint(1, 6)):
            buf[r.randrange(len(buf))] ^= 1 << r.randrange(8)
    elif what == 2:
        buf += bytes(r.randrange(256) for _ in range(r.randint(1, 16)))
    elif what == 3:                   # a huge count or size written over an 8- or 4-byte field
        pos = r.randrange(0, max(1, len(buf) - 8))
        fmt = r.choice(("<Q", "<q", "<i", "<I"))
        val = r.choice((2 ** 31 - 1, 2 ** 32 - 1, 2 ** 62, -1, 99999999999, 0))
        try:
            struct.pack_into(fmt, buf, pos, val)
        except struct.error:
            struct.pack_into("<Q", buf, pos, 2 ** 62)
    else:
        pos = r.randrange(len(buf))
        buf[pos:pos + r.randint(1, 8)] = bytes(r.randrange(256) for _ in range(r.randint(0, 8)))
    try:
        if r.random() < 0.5:
            loaded = mx.nd.load_frombuffer(bytes(buf))
        else:
            loaded = _load_from_file(bytes(buf), ".params", mx.nd.load)
        for a in (loaded.values() if isinstance(loaded, dict) else loaded):
            a.asnumpy().sum()
    except MXNetError:
        return "refused"
    return "ran"


def probe_case(seed: int, index: int) -> str:
    """The harness's own check: case 1 aborts the process, case 2 raises a plain KeyError,
    case 3 hangs, case 4 is refused and the others run."""
    if index == 1:
        os.abort()
    if index == 2:
        raise KeyError("probe")
    if index == 3:
        import time
        time.sleep(3600)
    if index == 4:
        raise MXNetError("probe refused")
    return "ran"


RUNNERS = {"json": json_case, "params": params_case, "op": op_case, "probe": probe_case}


def run_case(kind: str, seed: int, index: int) -> str:
    return RUNNERS[kind](seed, index)
