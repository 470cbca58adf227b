"""Contrib operators: `_contrib_index_copy` and the control-flow op `_while_loop`.

`_contrib_index_copy(old_tensor, index_vector, new_tensor)`: a copy of `old_tensor` whose rows
`index_vector[k]` are replaced by `new_tensor[k]` (MXNet's `mx.nd.contrib.index_copy`).

`_while_loop(*inputs, cond, func, ...)`: MXNet's symbolic while loop. The loop body and the
condition are *subgraphs*: objects implementing the `Subgraph` protocol below (the Symbol
frontend builds them from Python functions, `symjit.symbol.contrib.while_loop`). The op itself
only knows how to drive them, so this layer stays independent of Symbols and of the IR:
  * `run(arrays, ctx) -> list[np.ndarray]` evaluates the subgraph on its inputs;
  * `infer(shapes, dtypes) -> (shapes, dtypes)` gives its (partial) output types;
  * `str(subgraph)` is its text form; a frontend registers a loader
    (`set_subgraph_loader`) that turns that text back into a subgraph, so graphs holding
    control flow round-trip through MXNet-style string attributes and JSON.
MXNet's attributes keep their meaning: the node's inputs are the union of both subgraphs'
inputs; `cond_input_locs[k]` / `func_input_locs[k]` name the node input feeding subgraph input k;
`func_var_locs[j]` is the func input holding loop variable j. `func` returns `num_out_data`
step outputs followed by the new loop variables. Outputs: each step output stacked over the
iterations and padded with zeros to `max_iterations` rows (MXNet leaves the padding
uninitialised), then the final loop variables.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..base import MXNetError
from .attrs import Int, Param, Shape
from .registry import ComputeContext, Op, merge_shape, register

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


@register("_contrib_index_copy", aliases=("index_copy",))
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
        "num_args": Param(Int, doc="Number of inputs."),
        "num_outputs": Param(Int, doc="Number of outputs of the subgraph."),
        "num_out_data": Param(Int, doc="Number of outputs from the function body."),
        "max_iterations": Param(Int, doc="Maximum number of iterations."),
        "cond_input_locs": Param(_locs, doc="The locations of cond's inputs in the given inputs."),
        "func_input_locs": Param(_locs, doc="The locations of func's inputs in the given inputs."),
        "func_var_locs": Param(_locs, doc="The locations of loop_vars among func's inputs."),
    }
    kernel = "control_flow"
    is_random = True  # the subgraphs may sample: never merged by CSE nor constant-folded

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

    def grad(self, F, attrs, inputs, outputs, ograds):
        raise MXNetError(f"{self.name}: differentiating a symbolic while_loop is not supported; "
                         "use mx.nd.contrib.while_loop under autograd.record()")
