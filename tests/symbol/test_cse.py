"""Symbol-level common-subexpression elimination (Executor.get_optimized_symbol)."""
import numpy as np
import pytest

import symjit as mx
from symjit.symbol.cse import eliminate_common_expr
from symjit.test_utils import environment


def _internals(sym):
    return len(sym.get_internals().list_outputs())


@pytest.mark.parametrize("build, saved", [
    (lambda a, b: (a + 1) + (a + 2), 0),                                 # different scalars
    (lambda a, b: (a + b) + (a + b), 1),
    # one d = a + 1: a*d is merged, then a copy isolates the repeated output (no net saving)
    (lambda a, b: (lambda d: mx.sym.Group([a * d, a * d]))(a + 1), 0),
    (lambda a, b: (lambda d: mx.sym.Group([a * d + b, a * d + b]))(a + 1), 1),
    (lambda a, b: mx.sym.Group([a * (a + 1), a * (a + 1)]), 1),           # the two a + 1 merge too
    (lambda a, b: mx.sym.Dropout(a) + mx.sym.Dropout(a), 0),              # random ops stay apart
])
def test_savings_and_values(build, saved):
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    sym = build(a, b)
    opt = eliminate_common_expr(sym)
    assert _internals(sym) - _internals(opt) == saved
    assert opt.list_outputs() != [] and len(opt.list_outputs()) == len(sym.list_outputs())
    args = {n: mx.nd.array(np.random.rand(2, 3)) for n in sym.list_arguments()}
    if "Dropout" not in sym.tojson():
        for x, y in zip(sym.bind(mx.cpu(), args).forward(), opt.bind(mx.cpu(), args).forward()):
            np.testing.assert_allclose(x.asnumpy(), y.asnumpy())


def test_executor_decides_at_bind_time():
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    sym = (a + b) + (a + b)
    with environment("MXNET_ELIMINATE_COMMON_EXPR", "0"):
        off = sym.simple_bind(mx.cpu(), a=(2,), b=(2,))
    on = sym.simple_bind(mx.cpu(), a=(2,), b=(2,))
    assert _internals(off.get_optimized_symbol()) == _internals(on.get_optimized_symbol()) + 1
