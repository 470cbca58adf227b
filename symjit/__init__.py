"""symjit: a JIT compiler for MXNet-style symbolic graphs, with the MXNet 1.x Python API.

`import symjit as mx` runs MXNet 1.x programs. See DESIGN.md for the layers:
frontends (ndarray, symbol, gluon, module, autograd) -> ops -> ir -> passes -> codegen -> runtime.
"""
from __future__ import annotations

#: The MXNet API level symjit implements (what `mx.__version__` reports to MXNet programs).
__version__ = "1.9.1"
#: symjit's own version.
__symjit_version__ = "0.1.0"

from . import base  # noqa: F401
from .base import MXNetError  # noqa: F401
from . import util  # noqa: F401
from .util import (is_np_array, is_np_shape, np_array, np_shape, reset_np, set_np, set_np_shape,  # noqa: F401
                   use_np, use_np_array, use_np_shape)
from .codegen import blas as _blas

_blas.prefer_avx512_kernels()   # before anything loads scipy's OpenBLAS (see codegen/blas.py)
from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus  # noqa: F401
from . import ops  # noqa: F401
from . import ndarray  # noqa: F401
from . import ndarray as nd  # noqa: F401
from . import autograd  # noqa: F401
from . import random  # noqa: F401
try:
    from . import runtime  # noqa: F401  (mx.runtime.Features; needs the native extension)
except ImportError:   # not built: the interpreter backend still runs everything
    pass
from . import test_utils  # noqa: F401
from . import initializer  # noqa: F401
from . import initializer as init  # noqa: F401
from . import lr_scheduler  # noqa: F401
from . import optimizer  # noqa: F401
from . import symbol  # noqa: F401
from . import symbol as sym  # noqa: F401
from .symbol import naming as name  # noqa: F401
from .symbol import naming as attribute  # noqa: F401
from .symbol.naming import AttrScope  # noqa: F401
from . import executor  # noqa: F401
from . import operator  # noqa: F401  (mx.operator: CustomOp, CustomOpProp, register)
from . import contrib  # noqa: F401  (mx.contrib.ndarray / mx.contrib.symbol)
from . import io  # noqa: F401
from . import metric  # noqa: F401
from . import module  # noqa: F401
from . import module as mod  # noqa: F401
from . import model  # noqa: F401
from . import gluon  # noqa: F401
from .gluon.cached_op import NDArrayCachedOp as _NDArrayCachedOp  # noqa: E402

ndarray.CachedOp = _NDArrayCachedOp   # MXNet's mx.nd.CachedOp (a Symbol run as one imperative op)
from . import kvstore  # noqa: F401
from . import kvstore as kv  # noqa: F401
from . import distributed  # noqa: F401
from .compiler import compile, inspect  # noqa: F401,E402  (symjit.compile / symjit.inspect)
from . import visualization  # noqa: F401,E402
from . import visualization as viz  # noqa: F401,E402  (mx.viz.plot_network, mx.viz.print_summary)
