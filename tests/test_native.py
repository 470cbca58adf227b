"""The native runtime is loaded and used by default; a runtime that cannot be loaded is an error
users see, never a silent fallback to the interpreter; SYMJIT_BACKEND=interp runs without it."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.executor import InterpreterBackend, LLVMBackend, select_backend
from symjit.native import backend_choice, native_runtime

from shared_data import REPO


def _python(code: str, broken: bool = False, **env: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter importing this checkout's symjit (after `_BROKEN_RUNTIME`
    when `broken`), with SYMJIT_BACKEND and SYMJIT_EAGER_JIT unset unless given."""
    code = (textwrap.dedent(_BROKEN_RUNTIME) if broken else "") + textwrap.dedent(code)
    base = {k: v for k, v in os.environ.items() if k not in ("SYMJIT_BACKEND", "SYMJIT_EAGER_JIT")}
    base["PYTHONPATH"] = os.pathsep.join([str(REPO), base.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**base, **env}, timeout=300)


#: makes `import symjit._runtime` fail as a runtime built against another numpy C API does
_BROKEN_RUNTIME = """
    import sys
    class BrokenRuntime:
        def find_spec(self, name, path=None, target=None):
            if name == "symjit._runtime":
                raise ImportError("_runtime.so: undefined symbol: PyDataMem_SetHandler")
    sys.meta_path.insert(0, BrokenRuntime())
    import numpy as np
    import symjit as mx
    from symjit.base import MXNetError
"""


def test_runtime_loaded_and_used_by_default():
    """With no SYMJIT_* settings, binding a Symbol and hybridizing a Gluon block run native code
    (one native Entry call per forward), and eager ops on large arrays use compiled kernels."""
    proc = _python("""
        import sys
        import numpy as np
        import symjit as mx
        from symjit.executor import LLVMBackend, select_backend
        assert isinstance(select_backend(), LLVMBackend)
        x = mx.sym.var("x")
        exe = (mx.sym.relu(x * 2) + 1).simple_bind(mx.cpu(), x=(4,), grad_req="null")
        exe.arg_dict["x"][:] = mx.nd.array([-1, 0, 1, 2])
        assert exe.forward()[0].asnumpy().tolist() == [1, 1, 3, 5]
        assert isinstance(exe._backend, LLVMBackend) and exe._forward_fn.native_variant(False, []) is not None
        net = mx.gluon.nn.Dense(3, in_units=5)
        net.initialize()
        net.hybridize()
        net(mx.nd.ones((2, 5)))
        (entry,) = net._cached_op._cache.values()
        assert entry.fn.native_variant(False, []) is not None
        from symjit.ndarray import fastpath
        big = np.arange(1 << 17, dtype=np.float32)
        out = fastpath.try_compiled_elementwise(mx.ops.get_op("_plus_scalar"), {"scalar": 1.0}, [big])
        assert out is not None and np.array_equal(out[0], big + 1)
        assert "symjit._runtime" in sys.modules
        print("native")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["native"]


def test_backend_choice_in_process(monkeypatch):
    monkeypatch.delenv("SYMJIT_BACKEND", raising=False)
    assert backend_choice() == "auto" and isinstance(select_backend(), LLVMBackend)
    from symjit import runtime
    assert native_runtime() is runtime
    monkeypatch.setenv("SYMJIT_BACKEND", " LLVM ")
    assert backend_choice() == "llvm" and isinstance(select_backend(), LLVMBackend)
    monkeypatch.setenv("SYMJIT_BACKEND", "interp")
    assert isinstance(select_backend(), InterpreterBackend)
    assert native_runtime() is runtime        # a loadable runtime is still returned
    monkeypatch.setenv("SYMJIT_BACKEND", "gpu")
    with pytest.raises(MXNetError, match="SYMJIT_BACKEND='gpu' is not available"):
        select_backend()


@pytest.mark.parametrize("backend", ["", "auto", "llvm"])
def test_runtime_that_fails_to_load_is_an_error_not_a_fallback(backend):
    """Binding, hybridizing and a large eager op each raise MXNetError naming the loader's
    reason and the ways out (symjit.compile, native code only, the runtime's ImportError);
    nothing runs on the interpreter behind the user's back."""
    proc = _python("""
        def refused(what, fn):
            try:
                fn()
            except (MXNetError, ImportError) as e:   # compile (native code only) raises the import's error
                msg = str(e)
                assert "undefined symbol: PyDataMem_SetHandler" in msg and "pip install -e ." in msg, msg
                assert isinstance(e, ImportError) or "SYMJIT_BACKEND=interp" in msg, msg
                print(what, "refused")
            else:
                print(what, "ran")
        x = mx.sym.var("x")
        refused("bind", lambda: (x * 2).simple_bind(mx.cpu(), x=(4,)))
        net = mx.gluon.nn.Dense(3, in_units=5)
        net.initialize()
        net.hybridize()
        refused("hybridize", lambda: net(mx.nd.ones((2, 5))))
        refused("eager", lambda: mx.nd.ones((1 << 17,)) * 3)
        refused("compile", lambda: mx.compile(x * 2, shapes={"x": (4,)}))
    """, broken=True, **({"SYMJIT_BACKEND": backend} if backend else {}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:4] == ["bind refused", "hybridize refused", "eager refused", "compile refused"]


def test_explicit_interp_runs_without_a_loadable_runtime():
    proc = _python("""
        from symjit.executor import InterpreterBackend, select_backend
        assert isinstance(select_backend(), InterpreterBackend)
        x = mx.sym.var("x")
        exe = (x * 2).simple_bind(mx.cpu(), x=(4,), grad_req="null")
        exe.arg_dict["x"][:] = 1
        assert exe.forward()[0].asnumpy().tolist() == [2, 2, 2, 2]
        big = mx.nd.ones((1 << 17,)) * 3
        assert float(big.sum().asscalar()) == 3 * (1 << 17)
        import sys
        assert "symjit.runtime" not in sys.modules
        print("interp")
    """, broken=True, SYMJIT_BACKEND="interp")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["interp"]


def test_runtime_import_error_says_built_or_not():
    """The runtime module's own ImportError tells a missing build from one that fails to load."""
    proc = _python("""
        try:
            import symjit.runtime
        except ImportError as e:
            print(e)
    """, broken=True)
    assert "failed to load: _runtime.so: undefined symbol: PyDataMem_SetHandler" in proc.stdout, proc.stderr
    proc = _python("""
        import sys
        sys.modules["symjit._runtime"] = None      # as if the extension had never been compiled
        try:
            import symjit.runtime
        except ImportError as e:
            print(e)
    """)
    assert "is not built" in proc.stdout and "pip install -e ." in proc.stdout, proc.stderr


def test_in_process_results_are_native_by_default():
    """The suite itself runs on the native backend unless SYMJIT_BACKEND=interp is set."""
    if os.environ.get("SYMJIT_BACKEND", "").strip().lower() == "interp":
        pytest.skip("the suite runs with SYMJIT_BACKEND=interp")
    model = mx.compile(mx.sym.relu(mx.sym.var("a")) * 3, shapes={"a": (5,)})
    assert model.native
    a = np.linspace(-2, 2, 5, dtype=np.float32)
    np.testing.assert_array_equal(model(a=a)[0], np.maximum(a, 0) * 3)
