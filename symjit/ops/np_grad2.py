"""Second-order gradients of NumPy-semantics ops whose gradient is linear in the input values:
the gradient op `_backward<op>` of each gets a `backward_grad` (see `NumpyBackward.grad`), so
`autograd.grad(..., create_graph=True)` differentiates through it.

For an op linear in its inputs (sum, mean, add, subtract, multiplication by a number, ...), the
gradient op computes g = Jᵀ dy with a constant J: the gradient of ⟨o, g⟩ with respect to dy is
J o — the op itself applied to the output gradients o — and zero with respect to the op's
inputs and outputs. For multiply (bilinear), g₁ = dy·x₂ and g₂ = dy·x₁ (each summed to its
input's shape): d/d dy = o₁·x₂ + o₂·x₁, d/dx₁ = dy·o₂ and d/dx₂ = dy·o₁ (summed to shape), the
last two again by the gradient op, so higher orders follow."""
from __future__ import annotations

from . import np_math, np_reduce
from .registry import get_op

#: the modules registering the ops given rules here (imported first)
REQUIRES = (np_math.__name__, np_reduce.__name__)


def _linear_backward_grad(self, F, attrs, inputs, ograds):
    """⟨o, Jᵀ dy⟩ differentiated: J o for dy, nothing for the op's inputs and outputs."""
    n_dy = self.num_outputs(attrs)
    g_dy = F.apply(self.name, list(ograds), **attrs)
    g_dy = g_dy[0] if isinstance(g_dy, (list, tuple)) else g_dy
    return [g_dy] + [None] * (len(inputs) - n_dy)


def _shifted_backward_grad(self, F, attrs, inputs, ograds):
    """x ± c: the gradient op passes dy through, so d/d dy is the output gradient itself."""
    return [ograds[0]] + [None] * (len(inputs) - 1)


def _first(out):
    return out[0] if isinstance(out, (list, tuple)) else out


def _multiply_backward_grad(self, F, attrs, inputs, ograds):
    """The bilinear case (module docstring)."""
    dy, x1, x2, y = inputs
    o1, o2 = ograds
    g_dy = F.apply("_npi_add", [_first(F.apply("_npi_multiply", [o1, x2])),
                                _first(F.apply("_npi_multiply", [o2, x1]))])
    g_x1 = F.apply("_backward_npi_multiply", [dy, x1, o2, y])[0]
    g_x2 = F.apply("_backward_npi_multiply", [dy, o1, x2, y])[1]
    return [_first(g_dy), g_x1, g_x2, None]


def _divide_backward_grad(self, F, attrs, inputs, ograds):
    """y = x₁/x₂, g₁ = dy/x₂, g₂ = -dy·x₁/x₂² (each summed to its input's shape): d/d dy =
    (o₁ - o₂·x₁/x₂)/x₂, d/dx₁ = -dy·o₂/x₂², d/dx₂ = dy·(2·o₂·x₁/x₂ - o₁)/x₂²; sums to shape by
    multiply's gradient op."""
    dy, x1, x2, y = inputs

    def op(name, *args, **attrs):
        return _first(F.apply(name, list(args), **attrs))
    x2_sq = op("_npi_multiply", x2, x2)
    ratio = op("_npi_true_divide", x1, x2)
    g_dy = op("_npi_true_divide", op("_npi_subtract", ograds[0], op("_npi_multiply", ograds[1], ratio)), x2)
    w1 = op("_npi_negative", op("_npi_true_divide", ograds[1], x2_sq))
    w2 = op("_npi_true_divide", op("_npi_subtract", op("_npi_multiply_scalar", op("_npi_multiply", ograds[1], ratio),
                                                      scalar=2.0, is_int=False), ograds[0]), x2_sq)
    g_x1 = F.apply("_backward_npi_multiply", [dy, x1, w1, y])[0]
    g_x2 = F.apply("_backward_npi_multiply", [dy, w2, x2, y])[1]
    return [g_dy, g_x1, g_x2, None]


#: ops linear in their inputs (the op applied to output gradients is the gradient's gradient)
LINEAR = ("_np_sum", "_npi_mean", "_npi_add", "_npi_subtract", "_npi_multiply_scalar",
          "_npi_true_divide_scalar")
#: ops adding a number: their gradient passes dy through
SHIFTED = ("_npi_add_scalar", "_npi_subtract_scalar")


def _install() -> None:
    for name in LINEAR:
        type(get_op(name)).backward_grad = _linear_backward_grad
    for name in SHIFTED:
        type(get_op(name)).backward_grad = _shifted_backward_grad
    type(get_op("_npi_multiply")).backward_grad = _multiply_backward_grad
    type(get_op("_npi_true_divide")).backward_grad = _divide_backward_grad


_install()
