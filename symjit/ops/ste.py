"""Straight-through estimators (MXNet 1.9.1's `contrib.round_ste` and `contrib.sign_ste`):
the forward is round (half away from zero) or sign, the gradient passes the head gradient
unchanged, as if the op were the identity (used to train quantized networks)."""
from __future__ import annotations

from . import scalar as S
from .registry import Elementwise, register


class _StraightThrough(Elementwise):
    """An elementwise forward whose gradient is the head gradient itself."""

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F._copy(ograds[0])]


@register("_contrib_round_ste")
class RoundSTE(_StraightThrough):
    """y = round(x) (halves away from zero); dy/dx taken as 1."""

    def expr(self, attrs, x):
        return S.call("round", x)


@register("_contrib_sign_ste")
class SignSTE(_StraightThrough):
    """y = sign(x); dy/dx taken as 1."""

    def expr(self, attrs, x):
        return S.call("sign", x)
