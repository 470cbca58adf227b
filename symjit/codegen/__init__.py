"""Native code generation: `llvm` for CPUs (fused elementwise kernels, vectorized math, JIT).

The code generators read only the IR-level description of kernels (scalar expressions,
dtypes, shapes); they know nothing of MXNet attributes or frontends.
"""
