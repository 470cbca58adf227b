"""Build script for the native runtime extension `symjit._runtime`.

Everything else about the package lives in pyproject.toml; this file only declares the C
extension, compiled from runtime/*.c with the system C compiler. The flags are portable
(-O3, no -march): the runtime must run on any machine a wheel lands on, while the code that
symjit generates at run time is the part tuned for the host CPU. numpy's headers are found at
build time (pyproject's build requirements provide numpy).
"""
from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

RUNTIME = Path("runtime")


class BuildRuntime(build_ext):
    """build_ext that adds numpy's include directory lazily (numpy is only needed to compile)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        import numpy

        self.include_dirs.append(numpy.get_include())


def runtime_extension() -> Extension:
    sources = sorted(str(p) for p in RUNTIME.glob("*.c"))
    compile_args: list[str] = []
    link_args: list[str] = []
    if sys.platform != "win32":
        # a call to an undeclared function is an error, never an implicit declaration that links
        # against a symbol which may not exist when the extension is loaded
        compile_args = ["-O3", "-std=gnu11", "-fvisibility=hidden", "-Wall", "-Wno-unused-parameter",
                        "-Werror=implicit-function-declaration"]
        link_args = ["-pthread"]
    return Extension(
        "symjit._runtime",
        sources=sources,
        include_dirs=[str(RUNTIME)],
        define_macros=[("SYMJIT_API", "")],
        # runtime/nn/*.c: the kernel library's families, compiled as part of nnkernels.c
        depends=sorted(str(p) for p in [*RUNTIME.glob("*.h"), *RUNTIME.glob("nn/*.[ch]")]),
        extra_compile_args=compile_args,
        extra_link_args=link_args,
    )


setup(ext_modules=[runtime_extension()], cmdclass={"build_ext": BuildRuntime})
