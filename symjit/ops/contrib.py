"""Contrib operators: `_contrib_index_copy` and the control-flow ops `_while_loop`, `_cond`
and `_foreach`.

`_contrib_index_copy(old_tensor, index_vector, new_tensor)`: a copy of `old_tensor` whose rows
`index_vector[k]` are replaced by `new_tensor[k]` (MXNet's `mx.nd.contrib.index_copy`).

`_while_loop(*inputs, cond, func, ...)`: MXNet's symbolic while loop. The loop body and the
condition are *subgraphs*: objects implementing the `Subgraph` protocol below (the Symbol
frontend builds them from Python functions, `symjit.symbol.contrib.while_loop`). The op itself
only knows how to drive them, so this layer stays independent of Symbols and of the IR:
  * `run(arrays, ctx) -> list[np.ndarray]` evaluates the subgraph on its inputs;
  * `infer(shapes, dtypes) -> (shapes, dtypes)` gives its (partial) output types;
  * `vjp(arrays, out_grads, ctx) -> list` gives the gradient of sum_k <output_k, out_grads[k]>
    with respect to each input (zeros where none flows), recomputing the forward;
  * `str(subgraph)` is its text form; a frontend registers a loader
    (`set_subgraph_loader`) that turns that text back into a subgraph, so graphs holding
    control flow round-trip through MXNet-style string attributes and JSON.
MXNet's attributes keep their meaning: the node's inputs are the union of both subgraphs'
inputs; `cond_input_locs[k]` / `func_input_locs[k]` name the node input feeding subgraph input k;
`func_var_locs[j]` is the func input holding loop variable j. `func` returns `num_out_data`
step outputs followed by the new loop variables. Outputs: each step output stacked over the
iterations and padded with zeros to `max_iterations` rows (MXNet leaves the padding
uninitialised), then the final loop variables. `_cond` and `_foreach` follow the same scheme
with MXNet's attributes (`*_input_locs`; `in_data_locs` / `in_state_locs` / `remain_locs`).

Gradients: `_backward_<op>` (hidden) takes the output gradients and the forward inputs,
replays the control flow (recording each iteration's subgraph inputs) and runs the subgraphs'
`vjp` in reverse, carrying loop-variable / state gradients between iterations and summing the
gradients of inputs read at every iteration. Rows of `_while_loop`'s zero padding get no
gradient; predicates get none. Replays recompute the forward, so subgraphs that sample get
the gradient of a fresh draw. Backward ops are not differentiated again.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..base import MXNetError
from .attrs import Count, Int, Param, Shape
from .registry import OPS, ComputeContext, Op, merge_shape, register

__all__ = ["Subgraph", "set_subgraph_loader", "parse_subgraph"]


def _err(op: str, msg: str) -> MXNetError:
    return MXNetError(f"{op}: {msg}")


# ------------------------------------------------------------------------------------------
# _contrib_index_copy
# ------------------------------------------------------------------------------------------

def _index_rows(op: str, index: np.ndarray, rows: int) -> np.ndarray:
    """Integer row numbers from an index vector of any numeric dtype; all in [0, rows)."""
    if index.ndim != 1:
        raise _err(op, f"index_vector must be 1-D, got shape {index.shape}")
    idx = index.astype(np.int64)
    if index.dtype.kind == "f" and not np.array_equal(idx, index):
        raise _err(op, "index_vector must hold whole numbers")
    bad = (idx < 0) | (idx >= rows)
    if np.any(bad):
        raise _err(op, f"index {int(idx[bad][0])} is out of range for old_tensor with {rows} rows")
    return idx


@register("_contrib_index_copy")
class IndexCopy(Op):
    """Copy `old_tensor`, replacing row `index_vector[k]` by `new_tensor[k]` for every k."""
    inputs = ("old_tensor", "index_vector", "new_tensor")
    kernel = "gather"
    inplace = {0: 0}

    def infer_shape(self, attrs, in_shapes):
        old, idx, new = in_shapes
        if idx is not None and len(idx) != 1:
            raise _err(self.name, f"index_vector must be 1-D, got shape {tuple(idx)}")
        if old is not None:
            if len(old) < 1:
                raise _err(self.name, "old_tensor must have at least one dimension")
            expect = ((idx[0] if idx is not None else 0),) + tuple(old[1:])
            new = merge_shape(self.name, "input 'new_tensor'", expect, new)
        if new is not None and len(new) >= 1:
            idx = merge_shape(self.name, "input 'index_vector'", (new[0],), idx)
        if new is not None and old is not None and len(new) != len(old):
            raise _err(self.name, f"new_tensor must have the rank of old_tensor: expected "
                                  f"{len(old)} dims, got shape {tuple(new)}")
        return [old, idx, new], [old]

    def infer_type(self, attrs, in_types):
        old, idx, new = in_types
        t = old or new
        if old and new and old != new:
            raise _err(self.name, f"dtype mismatch for input 'new_tensor': expected {old}, got {new}")
        return [t, idx, t], [t]

    def compute(self, attrs, inputs, ctx):
        old, index, new = inputs
        if old.ndim < 1:
            raise _err(self.name, "old_tensor must have at least one dimension")
        idx = _index_rows(self.name, index, old.shape[0])
        expect = (idx.size,) + old.shape[1:]
        if new.shape != expect:
            raise _err(self.name, f"shape mismatch for input 'new_tensor': expected {expect}, "
                                  f"got {new.shape}")
        out = np.array(old, copy=True)
        out[idx] = new.astype(old.dtype, copy=False)
        return [out]

    def grad(self, F, attrs, inputs, outputs, ograds):
        old, index, new = inputs
        g = ograds[0]
        return [F._contrib_index_copy(g, index, F.zeros_like(new)),
                F.zeros_like(index),
                F.take(g, index, axis=0)]


# ------------------------------------------------------------------------------------------
# Subgraphs of control-flow ops
# ------------------------------------------------------------------------------------------

class Subgraph(Protocol):
    """A computation a control-flow op runs (see the module docstring)."""

    num_inputs: int
    num_outputs: int

    def run(self, arrays: Sequence[np.ndarray], ctx: ComputeContext) -> list: ...

    def infer(self, shapes: Sequence, dtypes: Sequence) -> tuple[list, list]: ...

    def vjp(self, arrays: Sequence[np.ndarray], out_grads: Sequence[np.ndarray],
            ctx: ComputeContext) -> list: ...


_LOADERS: list[Callable[[str], Any]] = []


def set_subgraph_loader(loader: Callable[[str], Any]) -> None:
    """Install the function that rebuilds a subgraph from its text form (one per process;
    the Symbol frontend installs its JSON loader when imported)."""
    _LOADERS[:] = [loader]


def parse_subgraph(value) -> Any:
    """Attribute parser: a Subgraph object as is, or its text form through the loader."""
    if isinstance(value, str):
        if not _LOADERS:
            raise ValueError("no subgraph loader is installed (import symjit.symbol)")
        return _LOADERS[0](value)
    if all(hasattr(value, a) for a in ("run", "infer", "num_inputs", "num_outputs")):
        return value
    raise ValueError(f"expected a subgraph, got {type(value).__name__}")


parse_subgraph.__name__ = "Subgraph"


def _locs(v) -> tuple:
    return Shape(v)


# ------------------------------------------------------------------------------------------
# _while_loop
# ------------------------------------------------------------------------------------------

@register("_while_loop")
class WhileLoop(Op):
    """Run `func` while `cond` holds (at most `max_iterations` times); outputs are the step
    outputs stacked and zero-padded to `max_iterations` rows, then the final loop variables."""
    params = {
        "cond": Param(parse_subgraph, doc="Loop condition: loop variables (and free inputs) -> one "
                                          "boolean element."),
        "func": Param(parse_subgraph, doc="Loop body: -> step outputs followed by the new loop variables."),
        "num_args": Param(Count, doc="Number of inputs."),
        "num_outputs": Param(Count, doc="Number of outputs of the subgraph."),
        "num_out_data": Param(Count, doc="Number of outputs from the function body."),
        "max_iterations": Param(Int, doc="Maximum number of iterations."),
        "cond_input_locs": Param(_locs, doc="The locations of cond's inputs in the given inputs."),
        "func_input_locs": Param(_locs, doc="The locations of func's inputs in the given inputs."),
        "func_var_locs": Param(_locs, doc="The locations of loop_vars among func's inputs."),
    }
    kernel = "control_flow"
    is_random = True  # the subgraphs may sample: never merged by CSE nor constant-folded
    subgraph_attrs = ("cond", "func")

    def input_names(self, attrs):
        return [f"data{i}" for i in range(attrs["num_args"])]

    def num_outputs(self, attrs):
        return attrs["num_outputs"]

    def output_names(self, attrs):
        return [f"output{i}" for i in range(attrs["num_outputs"])]

    # ---- attribute checks ---------------------------------------------------------------
    def _check(self, attrs) -> list[int]:
        """Validate the attributes; returns the node input index of each loop variable."""
        n_in, n_out, n_data = attrs["num_args"], attrs["num_outputs"], attrs["num_out_data"]
        cond, func = attrs["cond"], attrs["func"]
        if attrs["max_iterations"] < 0:
            raise _err(self.name, f"max_iterations must be non-negative, got {attrs['max_iterations']}")
        for what, locs, sub in (("cond_input_locs", attrs["cond_input_locs"], cond),
                                ("func_input_locs", attrs["func_input_locs"], func)):
            if len(locs) != sub.num_inputs:
                raise _err(self.name, f"{what} has {len(locs)} entries for a subgraph with "
                                      f"{sub.num_inputs} inputs")
            if any(not 0 <= i < n_in for i in locs):
                raise _err(self.name, f"{what} {locs} refers to inputs outside [0, {n_in})")
        if cond.num_outputs != 1:
            raise _err(self.name, f"cond must have exactly one output, got {cond.num_outputs}")
        if func.num_outputs != n_out:
            raise _err(self.name, f"func has {func.num_outputs} outputs, num_outputs is {n_out}")
        n_vars = n_out - n_data
        var_locs = attrs["func_var_locs"]
        if n_data < 0 or len(var_locs) != n_vars:
            raise _err(self.name, f"func_var_locs has {len(var_locs)} entries for {n_vars} loop variables")
        if any(not 0 <= v < func.num_inputs for v in var_locs):
            raise _err(self.name, f"func_var_locs {var_locs}: every loop variable must be an input "
                                  f"of func (func has {func.num_inputs} inputs)")
        return [attrs["func_input_locs"][v] for v in var_locs]

    # ---- inference ------------------------------------------------------------------------
    def infer_shape(self, attrs, in_shapes):
        var_pos = self._check(attrs)
        func_in = [in_shapes[i] for i in attrs["func_input_locs"]]
        out_shapes, _ = attrs["func"].infer(func_in, [None] * len(func_in))
        n_data = attrs["num_out_data"]
        outs = []
        for s in out_shapes[:n_data]:
            outs.append(None if s is None else (attrs["max_iterations"],) + tuple(s))
        ins = list(in_shapes)
        for j, pos in enumerate(var_pos):
            state = merge_shape(self.name, f"loop variable {j}", ins[pos], out_shapes[n_data + j])
            ins[pos] = state
            outs.append(state)
        return ins, outs

    def infer_type(self, attrs, in_types):
        var_pos = self._check(attrs)
        func_in = [in_types[i] for i in attrs["func_input_locs"]]
        _, out_types = attrs["func"].infer([None] * len(func_in), func_in)
        n_data = attrs["num_out_data"]
        outs = list(out_types[:n_data])
        ins = list(in_types)
        for j, pos in enumerate(var_pos):
            t = ins[pos] or out_types[n_data + j]
            ins[pos] = t
            outs.append(t)
        return ins, outs

    # ---- execution -------------------------------------------------------------------------
    def compute(self, attrs, inputs, ctx):
        var_pos = self._check(attrs)
        if len(inputs) != attrs["num_args"]:
            raise _err(self.name, f"expected {attrs['num_args']} inputs, got {len(inputs)}")
        cond, func = attrs["cond"], attrs["func"]
        n_data, max_iter = attrs["num_out_data"], attrs["max_iterations"]
        env = [np.asarray(x) for x in inputs]
        steps: list[list[np.ndarray]] = []
        while len(steps) < max_iter and self._holds(cond.run([env[i] for i in attrs["cond_input_locs"]], ctx)):
            results = func.run([env[i] for i in attrs["func_input_locs"]], ctx)
            step, new_vars = results[:n_data], results[n_data:]
            if steps and any(a.shape != b.shape for a, b in zip(step, steps[0])):
                raise _err(self.name, "step outputs must keep their shapes across iterations: "
                                      f"{[a.shape for a in steps[0]]} then {[a.shape for a in step]}")
            for j, (pos, v) in enumerate(zip(var_pos, new_vars)):
                if v.shape != env[pos].shape:
                    raise _err(self.name, f"loop variable {j} changed shape from {env[pos].shape} "
                                          f"to {v.shape}")
                env[pos] = np.asarray(v)
            steps.append(step)
        outs = self._stack(attrs, steps, [x.shape for x in inputs], [x.dtype.name for x in inputs])
        return outs + [np.array(env[pos], copy=True) for pos in var_pos]

    def _holds(self, result: list) -> bool:
        (c,) = result
        if np.size(c) != 1:
            raise _err(self.name, f"the loop condition must have exactly one element, got shape {np.shape(c)}")
        return bool(np.asarray(c).reshape(-1)[0])

    def _stack(self, attrs, steps: list, in_shapes: list, in_dtypes: list) -> list:
        """Step outputs stacked along a new first axis and zero-padded to max_iterations."""
        n_data, max_iter = attrs["num_out_data"], attrs["max_iterations"]
        if steps:
            shapes = [s.shape for s in steps[0]]
            dtypes = [s.dtype for s in steps[0]]
        else:  # no iteration ran: the shapes come from inference
            func_in = attrs["func_input_locs"]
            shapes, dtypes = attrs["func"].infer([in_shapes[i] for i in func_in],
                                                 [in_dtypes[i] for i in func_in])
            if any(s is None or 0 in s for s in shapes[:n_data]) or any(d is None for d in dtypes[:n_data]):
                raise _err(self.name, "the loop ran no iteration and the step output types "
                                      "cannot be inferred")
        outs = []
        for k in range(n_data):
            out = np.zeros((max_iter,) + tuple(shapes[k]), dtype=dtypes[k])
            for t, step in enumerate(steps):
                out[t] = step[k]
            outs.append(out)
        return outs

    def replay(self, attrs, inputs, ctx) -> list:
        """The func inputs of every iteration the loop runs on `inputs`."""
        var_pos = self._check(attrs)
        env = [np.asarray(x) for x in inputs]
        history = []
        while len(history) < attrs["max_iterations"] and \
                self._holds(attrs["cond"].run([env[i] for i in attrs["cond_input_locs"]], ctx)):
            func_in = [env[i] for i in attrs["func_input_locs"]]
            history.append(func_in)
            new_vars = attrs["func"].run(func_in, ctx)[attrs["num_out_data"]:]
            for pos, v in zip(var_pos, new_vars):
                env[pos] = np.asarray(v)
        return history

    def grad(self, F, attrs, inputs, outputs, ograds):
        return F.apply("_backward_while_loop", list(ograds) + list(inputs), **attrs)


# ------------------------------------------------------------------------------------------
# _cond
# ------------------------------------------------------------------------------------------

def _check_locs(op: str, what: str, locs: tuple, sub, n_in: int) -> None:
    if len(locs) != sub.num_inputs:
        raise _err(op, f"{what} has {len(locs)} entries for a subgraph with {sub.num_inputs} inputs")
    if any(not 0 <= i < n_in for i in locs):
        raise _err(op, f"{what} {locs} refers to inputs outside [0, {n_in})")


def _merge_branch(op: str, what: str, a, b):
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise _err(op, f"then_branch and else_branch give different {what}: {a} vs {b}")


@register("_cond")
class Cond(Op):
    """Run `then_branch` if the one-element output of `cond` is true, else `else_branch`;
    both branches give `num_outputs` outputs of the same shapes and dtypes."""
    params = {
        "cond": Param(parse_subgraph, doc="The predicate: -> one element."),
        "then_branch": Param(parse_subgraph, doc="Outputs when the predicate is true."),
        "else_branch": Param(parse_subgraph, doc="Outputs when the predicate is false."),
        "num_args": Param(Count, doc="Number of inputs."),
        "num_outputs": Param(Count, doc="Number of outputs."),
        "cond_input_locs": Param(_locs, doc="The locations of cond's inputs in the given inputs."),
        "then_input_locs": Param(_locs, doc="The locations of then_branch's inputs in the given inputs."),
        "else_input_locs": Param(_locs, doc="The locations of else_branch's inputs in the given inputs."),
    }
    kernel = "control_flow"
    is_random = True  # the subgraphs may sample: never merged by CSE nor constant-folded
    subgraph_attrs = ("cond", "then_branch", "else_branch")

    def input_names(self, attrs):
        return [f"data{i}" for i in range(attrs["num_args"])]

    def num_outputs(self, attrs):
        return attrs["num_outputs"]

    def output_names(self, attrs):
        return [f"output{i}" for i in range(attrs["num_outputs"])]

    def _check(self, attrs) -> None:
        n = attrs["num_args"]
        for key in ("cond", "then", "else"):
            sub = attrs[key if key == "cond" else f"{key}_branch"]
            _check_locs(self.name, f"{key}_input_locs", attrs[f"{key}_input_locs"], sub, n)
        if attrs["cond"].num_outputs != 1:
            raise _err(self.name, f"cond must have exactly one output, got {attrs['cond'].num_outputs}")
        for key in ("then_branch", "else_branch"):
            if attrs[key].num_outputs != attrs["num_outputs"]:
                raise _err(self.name, f"{key} has {attrs[key].num_outputs} outputs, num_outputs is "
                                      f"{attrs['num_outputs']}")

    def _infer(self, attrs, values: list, kind: int) -> list:
        """Output shapes (kind 0) or dtypes (kind 1) agreed by both branches."""
        self._check(attrs)
        results = []
        for key in ("then", "else"):
            sub_in = [values[i] for i in attrs[f"{key}_input_locs"]]
            none = [None] * len(sub_in)
            results.append(attrs[f"{key}_branch"].infer(*((sub_in, none) if kind == 0 else (none, sub_in)))[kind])
        what = "output shapes" if kind == 0 else "output dtypes"
        if kind == 0:
            return [merge_shape(self.name, f"output {k}", a, b) for k, (a, b) in enumerate(zip(*results))]
        return [_merge_branch(self.name, what, a, b) for a, b in zip(*results)]

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), self._infer(attrs, list(in_shapes), 0)

    def infer_type(self, attrs, in_types):
        return list(in_types), self._infer(attrs, list(in_types), 1)

    def compute(self, attrs, inputs, ctx):
        self._check(attrs)
        env = [np.asarray(x) for x in inputs]
        (pred,) = attrs["cond"].run([env[i] for i in attrs["cond_input_locs"]], ctx)
        if np.size(pred) != 1:
            raise _err(self.name, f"the predicate must have exactly one element, got shape {np.shape(pred)}")
        key = "then" if bool(np.asarray(pred).reshape(-1)[0]) else "else"
        outs = attrs[f"{key}_branch"].run([env[i] for i in attrs[f"{key}_input_locs"]], ctx)
        return [np.array(o, copy=True) for o in outs]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return F.apply("_backward_cond", list(ograds) + list(inputs), **attrs)


# ------------------------------------------------------------------------------------------
# _foreach
# ------------------------------------------------------------------------------------------

@register("_foreach")
class Foreach(Op):
    """Run `body` over the first axis of the data inputs, threading states: inputs are the
    data arrays, the initial states, then the remaining (free) inputs of the body; outputs
    are the body's step outputs stacked along a new first axis, then the final states."""
    params = {
        "body": Param(parse_subgraph, doc="The loop body: -> step outputs followed by the new states."),
        "num_args": Param(Count, doc="Number of inputs."),
        "num_outputs": Param(Count, doc="The number of outputs of the subgraph."),
        "num_out_data": Param(Count, doc="The number of output data of the subgraph."),
        "in_state_locs": Param(_locs, doc="The locations of loop states among the inputs."),
        "in_data_locs": Param(_locs, doc="The locations of input data among the inputs."),
        "remain_locs": Param(_locs, doc="The locations of remaining data among the inputs."),
    }
    kernel = "control_flow"
    is_random = True  # the subgraph may sample: never merged by CSE nor constant-folded
    subgraph_attrs = ("body",)

    def input_names(self, attrs):
        return [f"data{i}" for i in range(attrs["num_args"])]

    def num_outputs(self, attrs):
        return attrs["num_outputs"]

    def output_names(self, attrs):
        return [f"output{i}" for i in range(attrs["num_outputs"])]

    def _check(self, attrs) -> tuple[int, int]:
        """(number of data inputs, number of states), after validating the locations."""
        body = attrs["body"]
        n_data, n_states = len(attrs["in_data_locs"]), len(attrs["in_state_locs"])
        locs = list(attrs["in_data_locs"]) + list(attrs["in_state_locs"]) + list(attrs["remain_locs"])
        if sorted(locs) != list(range(body.num_inputs)) or len(locs) != attrs["num_args"]:
            raise _err(self.name, f"in_data_locs, in_state_locs and remain_locs must together name each "
                                  f"of the body's {body.num_inputs} inputs once (num_args "
                                  f"{attrs['num_args']}), got {locs}")
        if n_data < 1:
            raise _err(self.name, "foreach needs at least one data input")
        if body.num_outputs != attrs["num_outputs"] or attrs["num_outputs"] - attrs["num_out_data"] != n_states:
            raise _err(self.name, f"the body has {body.num_outputs} outputs for num_outputs "
                                  f"{attrs['num_outputs']}, num_out_data {attrs['num_out_data']} and {n_states} states")
        return n_data, n_states

    def _body_inputs(self, attrs, data: list, states: list, remains: list) -> list:
        sub = [None] * attrs["body"].num_inputs
        for loc, v in zip(attrs["in_data_locs"], data):
            sub[loc] = v
        for loc, v in zip(attrs["in_state_locs"], states):
            sub[loc] = v
        for loc, v in zip(attrs["remain_locs"], remains):
            sub[loc] = v
        return sub

    def _infer(self, attrs, values: list, kind: int) -> tuple[list, list]:
        n_data, n_states = self._check(attrs)
        data, states, remains = values[:n_data], values[n_data:n_data + n_states], values[n_data + n_states:]
        if kind == 0:
            steps = {int(s[0]) for s in data if s is not None and len(s) > 0 and s[0]}
            if len(steps) > 1:
                raise _err(self.name, f"every data input must have the same first dimension, got "
                                      f"{[tuple(s) for s in data if s is not None]}")
            rows = steps.pop() if steps else 0
            sliced = [None if s is None else tuple(s[1:]) for s in data]
        else:
            sliced = list(data)
        sub = self._body_inputs(attrs, sliced, states, remains)
        none = [None] * len(sub)
        out = attrs["body"].infer(*((sub, none) if kind == 0 else (none, sub)))[kind]
        n_out = attrs["num_out_data"]
        ins = list(values)
        for j in range(n_states):
            pos = n_data + j
            if kind == 0:
                ins[pos] = merge_shape(self.name, f"state {j}", ins[pos], out[n_out + j])
            else:
                ins[pos] = ins[pos] or out[n_out + j]
        if kind == 0:
            data_out = [None if s is None else (rows,) + tuple(s) for s in out[:n_out]]
        else:
            data_out = list(out[:n_out])
        return ins, data_out + ins[n_data:n_data + n_states]

    def infer_shape(self, attrs, in_shapes):
        return self._infer(attrs, list(in_shapes), 0)

    def infer_type(self, attrs, in_types):
        return self._infer(attrs, list(in_types), 1)

    def compute(self, attrs, inputs, ctx):
        n_data, n_states = self._check(attrs)
        xs = [np.asarray(x) for x in inputs]
        data, states, remains = xs[:n_data], xs[n_data:n_data + n_states], xs[n_data + n_states:]
        if any(d.ndim == 0 for d in data) or len({d.shape[0] for d in data}) != 1:
            raise _err(self.name, f"every data input must have the same first dimension, got "
                                  f"{[d.shape for d in data]}")
        rows = data[0].shape[0]
        if rows == 0:
            raise _err(self.name, "the data inputs have no rows to iterate over")
        n_out = attrs["num_out_data"]
        steps = []
        for t in range(rows):
            res = attrs["body"].run(self._body_inputs(attrs, [d[t] for d in data], states, remains), ctx)
            for j, (old, new) in enumerate(zip(states, res[n_out:])):
                if old.shape != np.shape(new):
                    raise _err(self.name, f"state {j} changed shape from {old.shape} to {np.shape(new)}")
            states = [np.asarray(s) for s in res[n_out:]]
            if steps and any(a.shape != b.shape for a, b in zip(steps[0], res[:n_out])):
                raise _err(self.name, "step outputs must keep their shapes across iterations")
            steps.append(res[:n_out])
        outs = [np.stack([s[k] for s in steps]) for k in range(n_out)]
        return outs + [np.array(s, copy=True) for s in states]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return F.apply("_backward_foreach", list(ograds) + list(inputs), **attrs)


# ------------------------------------------------------------------------------------------
# Backward ops of the control-flow ops
# ------------------------------------------------------------------------------------------

class _BackwardControlFlow(Op):
    """`_backward_<op>(*ograds, *inputs)` -> one gradient per forward input."""
    kernel = "control_flow"
    is_random = True
    hidden = True
    forward: str = ""

    @property
    def fwd(self) -> Op:
        """The registered forward op (its checks, replay and subgraph plumbing)."""
        return OPS[self.forward]

    def forward_counts(self, attrs) -> tuple[int, int]:
        """(number of forward inputs, number of forward outputs)."""
        return attrs["num_args"], attrs["num_outputs"]

    def input_names(self, attrs):
        n_in, n_out = self.forward_counts(attrs)
        return [f"ograd{i}" for i in range(n_out)] + [f"data{i}" for i in range(n_in)]

    def num_outputs(self, attrs):
        return self.forward_counts(attrs)[0]

    def output_names(self, attrs):
        return [f"data{i}_grad" for i in range(self.forward_counts(attrs)[0])]

    def infer_shape(self, attrs, in_shapes):
        return list(in_shapes), list(in_shapes[self.forward_counts(attrs)[1]:])

    def infer_type(self, attrs, in_types):
        return list(in_types), list(in_types[self.forward_counts(attrs)[1]:])

    def split(self, attrs, inputs) -> tuple[list, list, list]:
        """(output gradients, forward inputs, zero gradient accumulators per input)."""
        n_in, n_out = self.forward_counts(attrs)
        if len(inputs) != n_out + n_in:
            raise _err(self.name, f"expected {n_out + n_in} inputs, got {len(inputs)}")
        xs = [np.asarray(x) for x in inputs[n_out:]]
        return [np.asarray(g) for g in inputs[:n_out]], xs, [np.zeros(x.shape, x.dtype) for x in xs]

    @staticmethod
    def accumulate(acc: list, locs: tuple, grads: list, skip: set = frozenset()) -> None:
        for k, (loc, g) in enumerate(zip(locs, grads)):
            if k not in skip and np.issubdtype(acc[loc].dtype, np.floating):
                acc[loc] += np.asarray(g, dtype=acc[loc].dtype)

    def grad(self, F, attrs, inputs, outputs, ograds):
        raise MXNetError(f"{self.name}: second-order gradients of control flow are not supported")


@register("_backward_while_loop")
class BackwardWhileLoop(_BackwardControlFlow):
    """Gradient of `_while_loop` with respect to every input (loop variables' initial values
    and the free inputs of cond/func)."""
    params = WhileLoop.params
    forward = "_while_loop"

    def compute(self, attrs, inputs, ctx):
        ograds, xs, acc = self.split(attrs, inputs)
        fwd = self.fwd
        var_pos = fwd._check(attrs)
        history = fwd.replay(attrs, xs, ctx)
        n_data, var_locs = attrs["num_out_data"], attrs["func_var_locs"]
        carried = ograds[n_data:]
        for t in reversed(range(len(history))):
            out_grads = [ograds[k][t] for k in range(n_data)] + carried
            in_grads = attrs["func"].vjp(history[t], out_grads, ctx)
            carried = [in_grads[v] for v in var_locs]
            self.accumulate(acc, attrs["func_input_locs"], in_grads, skip=set(var_locs))
        self.accumulate(acc, tuple(var_pos), carried)
        return acc


@register("_backward_cond")
class BackwardCond(_BackwardControlFlow):
    """Gradient of `_cond`: the taken branch's gradient, scattered to the node's inputs."""
    params = Cond.params
    forward = "_cond"

    def compute(self, attrs, inputs, ctx):
        ograds, xs, acc = self.split(attrs, inputs)
        self.fwd._check(attrs)
        (pred,) = attrs["cond"].run([xs[i] for i in attrs["cond_input_locs"]], ctx)
        key = "then" if bool(np.asarray(pred).reshape(-1)[0]) else "else"
        locs = attrs[f"{key}_input_locs"]
        self.accumulate(acc, locs, attrs[f"{key}_branch"].vjp([xs[i] for i in locs], ograds, ctx))
        return acc


@register("_backward_foreach")
class BackwardForeach(_BackwardControlFlow):
    """Gradient of `_foreach`: per-row data gradients, state gradients carried backwards
    through the iterations, remaining inputs' gradients summed over them."""
    params = Foreach.params
    forward = "_foreach"

    def compute(self, attrs, inputs, ctx):
        ograds, xs, acc = self.split(attrs, inputs)
        fwd = self.fwd
        n_data, n_states = fwd._check(attrs)
        data, states, remains = xs[:n_data], xs[n_data:n_data + n_states], xs[n_data + n_states:]
        n_out, body = attrs["num_out_data"], attrs["body"]
        history = []
        for t in range(data[0].shape[0]):
            sub = fwd._body_inputs(attrs, [d[t] for d in data], states, remains)
            history.append(sub)
            states = [np.asarray(s) for s in body.run(sub, ctx)[n_out:]]
        carried = ograds[n_out:]
        for t in reversed(range(len(history))):
            g = body.vjp(history[t], [ograds[k][t] for k in range(n_out)] + carried, ctx)
            for k, loc in enumerate(attrs["in_data_locs"]):
                if np.issubdtype(acc[k].dtype, np.floating):
                    acc[k][t] += np.asarray(g[loc], dtype=acc[k].dtype)
            carried = [g[loc] for loc in attrs["in_state_locs"]]
            for r, loc in enumerate(attrs["remain_locs"]):
                if np.issubdtype(acc[n_data + n_states + r].dtype, np.floating):
                    acc[n_data + n_states + r] += np.asarray(g[loc], dtype=acc[n_data + n_states + r].dtype)
        for j, g in enumerate(carried):
            if np.issubdtype(acc[n_data + j].dtype, np.floating):
                acc[n_data + j] += np.asarray(g, dtype=acc[n_data + j].dtype)
        return acc
