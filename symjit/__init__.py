"""symjit: a JIT compiler for MXNet-style symbolic graphs, with the MXNet 1.x Python API.

`import symjit as mx` runs MXNet 1.x programs. See DESIGN.md for the layers:
frontends (ndarray, symbol, gluon, module, autograd) -> ops -> ir -> passes -> codegen -> runtime.

Importing the package loads only what every layer shares (the version, errors, contexts); each
name of the MXNet API (`mx.nd`, `mx.sym`, `mx.gluon`, ...) imports its module on first use (PEP
562). So `import symjit.ir` (or passes, codegen) loads the compiler core alone, and
`tests/test_layering.py` keeps it that way.
"""
from __future__ import annotations

import importlib
import importlib.util

#: The MXNet API level symjit implements (what `mx.__version__` reports to MXNet programs);
#: symjit's own version is `__symjit_version__` (symjit/_version.py, the one place that states it).
__version__ = "1.9.1"

from ._version import __version__ as __symjit_version__  # noqa: F401
from . import base  # noqa: F401
from .base import MXNetError  # noqa: F401
from . import util  # noqa: F401
from .util import (is_np_array, is_np_shape, np_array, np_shape, reset_np, set_np, set_np_shape,  # noqa: F401
                   use_np, use_np_array, use_np_shape)
from .codegen import blas as _blas

_blas.prefer_avx512_kernels()   # before anything loads scipy's OpenBLAS (see codegen/blas.py)
from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus  # noqa: F401,E402

#: the MXNet API: package attribute -> (module relative to the package, name in it or None for
#: the module itself), imported when first read
_API = {
    "ops": (".ops", None),
    "ndarray": (".ndarray", None), "nd": (".ndarray", None),
    "autograd": (".autograd", None),
    "random": (".random", None),
    "test_utils": (".test_utils", None),
    "initializer": (".initializer", None), "init": (".initializer", None),
    "lr_scheduler": (".lr_scheduler", None),
    "optimizer": (".optimizer", None),
    "symbol": (".symbol", None), "sym": (".symbol", None),
    "name": (".symbol.naming", None), "attribute": (".symbol.naming", None),
    "AttrScope": (".symbol.naming", "AttrScope"),
    "executor": (".executor", None),
    "io": (".io", None),
    "img": (".image", None),
    "metric": (".metric", None),
    "module": (".module", None), "mod": (".module", None),
    "model": (".model", None),
    "gluon": (".gluon", None),
    "kvstore": (".kvstore", None), "kv": (".kvstore", None),
    "distributed": (".distributed", None),
    "compile": (".compiler", "compile"), "inspect": (".compiler", "inspect"),
    "np": (".numpy", None),
    "npx": (".numpy_extension", None), "numpy_extension": (".numpy_extension", None),
    "mon": (".monitor", None),
    "visualization": (".visualization", None), "viz": (".visualization", None),
    "profiler": (".profiler", None),
}


def __getattr__(name: str):
    if name in _API:
        module, attr = _API[name]
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        module, attr = f".{name}", None          # any other submodule: mx.callback, mx.rnn, ...
    else:
        raise AttributeError(f"module 'symjit' has no attribute {name!r}")
    mod = importlib.import_module(module, __name__)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_API))
