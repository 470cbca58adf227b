"""The LLVM (CPU) backend: elementwise kernel generation, vectorizable math, JIT.

    spec = ElementwiseSpec(exprs, in_dtypes, in_shapes, compute_dtype, out_dtypes, out_shape)
    kernel = compile_elementwise(spec)          # ElementwiseKernel, callable on numpy arrays
    y = kernel(a, b)

`compile_elementwise` keeps compiled kernels in memory (keyed by the spec) for the process.
"""
from __future__ import annotations

import functools

from .elementwise import ElementwiseSpec, ModuleBuilder, code_key, elementwise_module, emit_elementwise, kernel_name
from .jit import CompiledCode, ElementwiseKernel, compile_ir, compile_to_object, load_object
from .target import host_target, target_description

__all__ = ["ElementwiseSpec", "ModuleBuilder", "emit_elementwise", "elementwise_module", "kernel_name", "code_key",
           "compile_elementwise", "is_compiled", "CompiledCode", "ElementwiseKernel", "compile_ir", "compile_to_object",
           "load_object", "host_target", "target_description"]


#: kernel symbol name -> its loaded code. Eager kernels stay loaded for the process (their
#: number is bounded by the distinct kernel texts): callers such as `ndarray.fastpath` keep
#: their raw addresses.
_CODE: dict[str, CompiledCode] = {}


@functools.lru_cache(maxsize=1024)
def compile_elementwise(spec: ElementwiseSpec) -> ElementwiseKernel:
    """JIT-compile the kernel for `spec` and wrap it for calls on numpy arrays.

    Specs that generate the same code (e.g. contiguous kernels of different sizes) share
    one compiled kernel: the symbol name is a hash of the code key.
    """
    name = kernel_name(spec)
    code = _CODE.get(name)
    if code is None:
        ir_text, name = elementwise_module(spec, name)
        code = _CODE[name] = compile_ir(ir_text, [name])
    return ElementwiseKernel(code.addresses[name], spec.in_dtypes, spec.in_shapes, spec.out_dtypes, spec.out_shape, name=name)


def is_compiled(spec: ElementwiseSpec) -> bool:
    """Whether the kernel `spec` needs is compiled already (a call would not compile)."""
    return kernel_name(spec) in _CODE
