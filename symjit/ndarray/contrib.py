"""symjit.ndarray.contrib (`mx.nd.contrib`): MXNet 1.x imperative contrib functions.

  * `rand_zipfian` — MXNet's composition of registered ops (log-uniform draw, float64 counts);
  * `while_loop`, `foreach`, `cond` — imperative control flow: plain Python loops over eager
    ops, so autograd records every iteration (MXNet's `ndarray.contrib` semantics, including
    `while_loop`'s outputs stacked and padded to `max_iterations` rows — with zeros here,
    where MXNet leaves the padding uninitialised);
  * the optimizer wrappers of `contrib_optimizer` (`multi_lamb_update`, `mp_adamw_update`, ...);
  * every registered `_contrib_<name>` op as `mx.nd.contrib.<name>` (e.g. `index_copy`).
"""
from __future__ import annotations

import math
from typing import Callable

from ..base import MXNetError
from ..context import current_context
from ..ops.registry import find_op, list_ops
from .ndarray import NDArray, invoke, zeros
from .contrib_optimizer import (adamw_update, mp_adamw_update, multi_adamw_update,  # noqa: F401
                                multi_lamb_update, multi_mp_adamw_update, multi_mp_lamb_update)
from .random import uniform
from ..nested import flatten, regroup as _regroup

__all__ = ["rand_zipfian", "while_loop", "foreach", "cond", "isinf", "isfinite", "isnan", "adamw_update",
           "mp_adamw_update", "multi_adamw_update", "multi_mp_adamw_update", "multi_lamb_update",
           "multi_mp_lamb_update"]

_PREFIX = "_contrib_"


def rand_zipfian(true_classes: NDArray, num_sampled: int, range_max: int, ctx=None):
    """Draw `num_sampled` classes from the approximately log-uniform (Zipfian) distribution on
    [0, range_max): P(class) = log((class + 2) / (class + 1)) / log(range_max + 1).

    Returns (sampled classes as int64, expected count of each true class, expected count of
    each sampled class), the counts in float64: num_sampled * P(class)."""
    if not isinstance(true_classes, NDArray):
        raise MXNetError(f"rand_zipfian: true_classes must be an NDArray, got {type(true_classes).__name__}")
    ctx = current_context() if ctx is None else ctx
    log_range = math.log(range_max + 1)
    rand = uniform(0, log_range, shape=(num_sampled,), dtype="float64", ctx=ctx)
    sampled_classes = (rand.exp() - 1).astype("int64") % range_max
    true_cls = true_classes.as_in_context(ctx).astype("float64")
    expected_count_true = ((true_cls + 2.0) / (true_cls + 1.0)).log() / log_range * num_sampled
    sampled_fp64 = sampled_classes.astype("float64")
    expected_prob_sampled = ((sampled_fp64 + 2.0) / (sampled_fp64 + 1.0)).log() / log_range
    return sampled_classes, expected_count_true, expected_prob_sampled * num_sampled


# ------------------------------------------------------------------------------------------
# Nested lists of NDArrays (MXNet's _flatten / _regroup)
# ------------------------------------------------------------------------------------------

def _flatten(args, what: str):
    """A nested list of NDArrays -> (flat list, format to regroup it)."""
    return flatten(args, NDArray, what)


def _to_python_scalar(value, type_, name: str):
    if isinstance(value, NDArray):
        value = value.asscalar()
    try:
        return type_(value)
    except (TypeError, ValueError):
        raise ValueError(f"Cannot convert {name} to python {type_.__name__}") from None


# ------------------------------------------------------------------------------------------
# Control flow
# ------------------------------------------------------------------------------------------

def foreach(body: Callable, data, init_states):
    """Run `body(slice, states) -> (outputs, new_states)` over the first axis of `data` (an
    NDArray or a list of them); returns (outputs stacked along a new first axis, final states)."""
    flat, _ = _flatten(data, "foreach input")
    _flatten(init_states, "foreach states")
    not_data_list = isinstance(data, NDArray)
    num_iters = data.shape[0] if not_data_list else flat[0].shape[0]
    for d in flat:
        if d.shape[0] != num_iters:
            raise MXNetError(f"foreach: every input must have {num_iters} rows, got shape {d.shape}")
    states = init_states
    steps, out_fmt = [], None
    for i in range(num_iters):
        eles = data[i] if not_data_list else [d[i] for d in data]
        outs, states = body(eles, states)
        outs, out_fmt = _flatten(outs, "foreach output")
        steps.append(outs)
    if not steps:
        raise MXNetError("foreach: data has no rows to iterate over")
    stacked = [invoke("stack", list(items), {"axis": 0, "num_args": len(items)}) for items in zip(*steps)]
    outputs, _ = _regroup(stacked, out_fmt)
    return outputs, states


def while_loop(cond: Callable, func: Callable, loop_vars, max_iterations=None):
    """Run `func` while `cond(*loop_vars)` is true, at most `max_iterations` times.

    `func(*loop_vars)` returns (step outputs, new loop variables). Returns (outputs, final loop
    variables): each step output stacked along a new first axis and padded with zero rows to
    `max_iterations` rows (no outputs if no iteration ran)."""
    if max_iterations is None:
        raise ValueError("max_iterations should be specified")
    max_iterations = _to_python_scalar(max_iterations, int, "max_iteration")
    if isinstance(loop_vars, (list, tuple)) and len(loop_vars) == 0:
        raise ValueError("loop_vars should contain at least one element")
    not_loop_var_list = isinstance(loop_vars, NDArray)
    loop_vars = [loop_vars] if not_loop_var_list else list(loop_vars)
    steps: list[list[NDArray]] = []
    out_fmt = None
    while len(steps) < max_iterations and _to_python_scalar(cond(*loop_vars), bool, "Return value of cond"):
        step_output, new_vars = func(*loop_vars)
        step_output = [] if step_output is None else step_output
        new_vars = [] if new_vars is None else new_vars
        new_vars = [new_vars] if isinstance(new_vars, NDArray) else list(new_vars)
        if len(new_vars) != len(loop_vars):
            raise ValueError("The length of loop_vars should be consistent during the loop")
        step_output, out_fmt = _flatten(step_output, "while output")
        if steps and len(step_output) != len(steps[0]):
            raise ValueError("Number of elements in step_output should be the same in each step")
        steps.append(step_output)
        loop_vars = new_vars
    stacked = []
    for k, items in enumerate(zip(*steps), 1):
        rows = [x.expand_dims(0) for x in items]
        if any(r.shape != rows[0].shape for r in rows):
            raise ValueError("\n".join([f"Shapes of {k}-th elements in step_outputs are inconsistent, which are:"]
                                       + [f"  Step {i}, shape is {x.shape}" for i, x in enumerate(items)]))
        if len(steps) != max_iterations:
            pad_shape = (max_iterations - len(steps),) + rows[0].shape[1:]
            rows.append(zeros(pad_shape, rows[0].context, rows[0].dtype))
        stacked.append(invoke("Concat", rows, {"dim": 0, "num_args": len(rows)}))
    outputs = _regroup(stacked, out_fmt)[0] if out_fmt is not None else stacked
    return outputs, (loop_vars[0] if not_loop_var_list else loop_vars)


def cond(pred, then_func: Callable, else_func: Callable):
    """`then_func()` if the one-element `pred` is true, else `else_func()`."""
    branch = _to_python_scalar(pred, bool, "pred")
    return then_func() if branch else else_func()


# ------------------------------------------------------------------------------------------
# Registered `_contrib_*` ops
# ------------------------------------------------------------------------------------------

def isinf(data: NDArray) -> NDArray:
    """1 where `data` is +-inf, else 0 (data's dtype)."""
    return data.abs() == math.inf


def isfinite(data: NDArray) -> NDArray:
    """1 where `data` is neither inf nor NaN, else 0."""
    return (data.abs() != math.inf) * (data == data)


def isnan(data: NDArray) -> NDArray:
    """1 where `data` is NaN, else 0."""
    return data != data


def __getattr__(name: str) -> Callable:
    if not name.startswith("__") and find_op(_PREFIX + name) is not None:
        from . import _op_function
        fn = _op_function(_PREFIX + name)
        fn.__name__ = name
        globals()[name] = fn        # one function object per op: `mx.nd.contrib.X is mx.nd.contrib.X`
        return fn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted({*globals(), *(n[len(_PREFIX):] for n in list_ops() if n.startswith(_PREFIX))})
