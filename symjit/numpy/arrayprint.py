"""`mx.np.arrayprint`: print options of mx.np arrays (their repr and str are numpy's)."""
from __future__ import annotations

import numpy as _onp

__all__ = ["set_printoptions"]


def set_printoptions(precision=None, threshold=None, **kwarg):
    """numpy.set_printoptions: the precision, summarization threshold and numpy's other options
    used when mx.np arrays are printed."""
    _onp.set_printoptions(precision=precision, threshold=threshold, **kwarg)
