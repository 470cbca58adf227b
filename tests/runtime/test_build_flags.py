"""The C sources compile with implicit function declarations as errors, wherever symjit compiles
C: the runtime extension (setup.py), AOT libraries and the CUDA host emulation
(`symjit.codegen.aot.C_ERRORS`). An implicit declaration links against whatever symbol has the
name, and the extension then fails to load (numpy's `PyDataMem_SetHandler` hidden by an older
default C-API target was one)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig

import numpy as np
import pytest

from symjit.base import MXNetError
from symjit.codegen import aot

from shared_data import REPO

RUNTIME = REPO / "runtime"


def _cc() -> str:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs the system C compiler `cc`")
    return cc


def test_setup_and_aot_flags_make_implicit_declarations_errors():
    assert "-Werror=implicit-function-declaration" in aot.C_ERRORS
    assert set(aot.C_ERRORS) <= set(aot._CFLAGS)
    assert '"-Werror=implicit-function-declaration"' in (REPO / "setup.py").read_text()


@pytest.mark.parametrize("source", sorted(p.name for p in RUNTIME.glob("*.c")))
def test_runtime_source_compiles_with_implicit_declarations_as_errors(source):
    """Each runtime source, with the extension's include path (Python and numpy headers)."""
    proc = subprocess.run([_cc(), "-fsyntax-only", "-std=gnu11", "-Wall", *aot.C_ERRORS, "-DSYMJIT_API=",
                           f"-I{RUNTIME}", f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}",
                           str(RUNTIME / source)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "implicit declaration" not in proc.stderr


def test_module_states_its_numpy_c_api_target():
    """Without NPY_TARGET_VERSION numpy 2.2's headers (Python 3.10's last numpy) default to the
    1.21 C API, which lacks NEP 49's PyDataMem_SetHandler."""
    text = (RUNTIME / "module.c").read_text()
    assert text.index("#define NPY_TARGET_VERSION") < text.index("#include <numpy/arrayobject.h>")


def test_module_targets_the_oldest_numpy_the_package_allows():
    """The extension, built against numpy 2's headers, loads under every numpy the package
    depends on: its C API target is the oldest one (older numpys refuse it at import)."""
    pyproject = (REPO / "pyproject.toml").read_text()
    major, minor = re.search(r'^\s*"numpy>=(\d+)\.(\d+)', pyproject, re.M).groups()
    assert f"#define NPY_TARGET_VERSION NPY_{major}_{minor}_API_VERSION" in (RUNTIME / "module.c").read_text()
    assert re.search(r'requires = \[.*"numpy>=2"', pyproject), "build against numpy 2's headers"


def test_aot_compile_refuses_an_undeclared_call(tmp_path):
    src = tmp_path / "bad.c"
    src.write_text("int f(void) { return undeclared_function(1); }\n")
    with pytest.raises(MXNetError, match="implicit declaration"):
        aot._compile_c(_cc(), RUNTIME, str(src), str(tmp_path / "bad.o"), cached=False)
