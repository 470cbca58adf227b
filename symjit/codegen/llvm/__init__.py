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
           "compile_elementwise", "CompiledCode", "ElementwiseKernel", "compile_ir", "compile_to_object",
           "load_object", "host_target", "target_description"]


_CODE: dict[str, int] = {}      # kernel symbol name -> address of loaded code


@functools.lru_cache(maxsize=1024)
def compile_elementwise(spec: ElementwiseSpec) -> ElementwiseKernel:
    """JIT-compile the kernel for `spec` and wrap it for calls on numpy arrays.

    Specs that generate the same code (e.g. contiguous kernels of different sizes) share
    one compiled kernel: the symbol name is a hash of the code key.
    """
    name = kernel_name(spec)
    addr = _CODE.get(name)
    if addr is None:
        ir_text, name = elementwise_module(spec, name)
        addr = _CODE[name] = compile_ir(ir_text, [name]).addresses[name]
    return ElementwiseKernel(addr, spec.in_dtypes, spec.in_shapes, spec.out_dtypes, spec.out_shape, name=name)
