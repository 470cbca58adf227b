"""Import every operator module of this package once, so that each registers its ops.

Operator modules are discovered, not listed: adding an operator module needs no
change here (DESIGN.md: adding an operator is one definition plus tests).
"""
import importlib
import pkgutil
from pathlib import Path

_PACKAGE = __name__.rsplit(".", 1)[0]
_INFRASTRUCTURE = {"registry", "attrs", "scalar", "rng", "_load_all", "np_aliases"}

for _info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
    if _info.name not in _INFRASTRUCTURE:
        importlib.import_module(f"{_PACKAGE}.{_info.name}")

importlib.import_module(f"{_PACKAGE}.np_aliases").register_aliases()   # aliases of ops registered above
