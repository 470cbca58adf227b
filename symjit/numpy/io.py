"""`mx.np.io`: reading arrays from text files (numpy's genfromtxt, giving mx.np arrays)."""
from __future__ import annotations

import numpy as _onp

from .fallback import numpy_fallback

__all__ = ["genfromtxt"]

genfromtxt = numpy_fallback(_onp.genfromtxt, "genfromtxt")
