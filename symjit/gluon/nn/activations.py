"""Activation layers (MXNet 1.x `gluon.nn.activations`): LeakyReLU, PReLU, ELU, SELU, GELU
and Swish. The rectifier family calls the registered `LeakyReLU` op with MXNet's `act_type`."""
from __future__ import annotations

from ... import initializer
from ...util import is_np_array
from ..block import HybridBlock

__all__ = ["LeakyReLU", "PReLU", "ELU", "SELU", "GELU", "Swish"]


def _leaky_relu(F):
    """The LeakyReLU operator function of `F` (npx.leaky_relu under NumPy semantics)."""
    return F.npx.leaky_relu if is_np_array() else F.LeakyReLU


class LeakyReLU(HybridBlock):
    """x for x > 0, alpha * x otherwise (alpha >= 0)."""

    def __init__(self, alpha, **kwargs):
        if alpha < 0:
            raise ValueError(f"Slope coefficient for LeakyReLU must be no less than 0, got {alpha}")
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F, x):
        return _leaky_relu(F)(x, act_type="leaky", slope=self._alpha, name="fwd")

    def __repr__(self):
        return f"{self.__class__.__name__}({self._alpha})"


class PReLU(HybridBlock):
    """Leaky ReLU with a learned slope `alpha` (shape (in_channels,), one per channel of axis 1
    or a single shared slope when in_channels=1)."""

    def __init__(self, alpha_initializer=None, in_channels=1, **kwargs):
        super().__init__(**kwargs)
        if alpha_initializer is None:
            alpha_initializer = initializer.Constant(0.25)
        with self.name_scope():
            self.alpha = self.params.get("alpha", shape=(in_channels,), init=alpha_initializer)

    def hybrid_forward(self, F, x, alpha):
        return _leaky_relu(F)(x, gamma=alpha, act_type="prelu", name="fwd")


class ELU(HybridBlock):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F, x):
        return _leaky_relu(F)(x, act_type="elu", slope=self._alpha)


class SELU(HybridBlock):
    """Scaled ELU with the self-normalizing constants (lambda 1.0507..., alpha 1.6732...)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def hybrid_forward(self, F, x):
        return _leaky_relu(F)(x, act_type="selu", name="fwd")


class GELU(HybridBlock):
    """Gaussian error linear unit: 0.5 * x * (1 + erf(x / sqrt(2)))."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def hybrid_forward(self, F, x):
        return _leaky_relu(F)(x, act_type="gelu", name="fwd")


class Swish(HybridBlock):
    """x * sigmoid(beta * x)."""

    def __init__(self, beta=1.0, **kwargs):
        super().__init__(**kwargs)
        self._beta = beta

    def hybrid_forward(self, F, x):
        sigmoid = F.npx.sigmoid if is_np_array() else F.sigmoid
        return x * sigmoid(self._beta * x, name="fwd")
