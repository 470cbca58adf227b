"""Import every operator module once, so that each registers its ops.

A new operator module is added here (and nowhere else)."""
from . import elemwise  # noqa: F401
