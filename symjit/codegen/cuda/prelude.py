"""The device helpers every generated CUDA source starts with.

`PRELUDE` is plain CUDA C++ that also compiles for the host under
`runtime/cuda_host_emu.h` (no intrinsics, no warp functions, no CUDA-only overloads): the
conversions with numpy's x86 semantics, Python-style float and integer modulo, integer
power, digamma (CUDA has none), and the launch macros:

    SJ_LAUNCH(kernel, grid, threads, stream, args...)       kernels without barriers
    SJ_LAUNCH_SYNC(kernel, grid, threads, stream, args...)  kernels that call __syncthreads

Both are `kernel<<<grid, threads, 0, stream>>>(args...)` under nvcc; the host emulator runs
the first kind as a plain loop over threads and the second with one fiber per thread of a
block (a barrier switches fibers), so a kernel's barrier use must be declared where it is
launched. Kernels use only statically sized `__shared__` arrays (dynamic shared memory is 0).
`SJ_UNROLL` is `#pragma unroll` for nvcc and nothing for the host compiler.
"""
from __future__ import annotations

__all__ = ["PRELUDE", "THREADS"]

#: threads per block of every kernel (a multiple of the warp size; all kernels are 1-D blocks)
THREADS = 256

PRELUDE = r"""
#include <stdint.h>
#include <math.h>
#include <float.h>

#define SJ_DEV __device__ __forceinline__

#ifndef SYMJIT_CUDA_EMULATION
#define SJ_UNROLL _Pragma("unroll")
#define SJ_LAUNCH(kernel, grid, threads, stream, ...) kernel<<<(grid), (threads), 0, (stream)>>>(__VA_ARGS__)
#define SJ_LAUNCH_SYNC(kernel, grid, threads, stream, ...) kernel<<<(grid), (threads), 0, (stream)>>>(__VA_ARGS__)
#else
#define SJ_UNROLL
#endif

/* ---- conversions with numpy's x86 semantics (codegen/cuda/expr.py) ---- */
/* float -> int32/int64 as numpy's astype on x86: NaN or out of range gives the minimum */
SJ_DEV int32_t sj_f2i32(double v) { return fabs(v) < 2147483648.0 ? (int32_t)v : (int32_t)(-2147483647 - 1); }
SJ_DEV int64_t sj_f2i64(double v) {
    return fabs(v) < 9223372036854775808.0 ? (int64_t)v : (int64_t)(-9223372036854775807LL - 1);
}
/* scalar._c_cast: NaN and inf become 0, other values truncate through int64 */
SJ_DEV int64_t sj_f2i64_c(double v) { return sj_f2i64(fabs(v) < (double)INFINITY ? trunc(v) : 0.0); }

/* ---- Python-style modulo (sign of b), 0 where b == 0: numpy's npy_divmod on the exact fmod ---- */
#define SJ_DEFINE_MOD(T, F)                                                                     \
    SJ_DEV T sj_mod(T a, T b) {                                                                 \
        if (b == (T)0) return (T)0;                                                             \
        T r = fmod##F(a, b);                                                                    \
        if (r != (T)0) {                                                                        \
            if ((b < (T)0) != (r < (T)0)) r += b;                                               \
        } else {                                                                                \
            r = copysign##F((T)0, b);                                                           \
        }                                                                                       \
        return r;                                                                               \
    }
SJ_DEFINE_MOD(float, f)
SJ_DEFINE_MOD(double, )

/* ---- integer modulo and power (wrapping like numpy) ---- */
template <typename T> SJ_DEV T sj_imod_s(T a, T b) {
    if (b == 0 || b == (T)-1) return (T)0;
    T r = (T)(a % b);
    if (r != 0 && ((r < 0) != (b < 0))) r = (T)(r + b);
    return r;
}
template <typename T> SJ_DEV T sj_imod_u(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }
/* square-and-multiply; a negative exponent gives numpy's truncated 1/a**|e| (1, +-1 or 0) */
template <typename T, typename U> SJ_DEV T sj_ipow(T a, T e) {
    if (e < (T)0 && (T)-1 < (T)0) {
        if (a == (T)1) return (T)1;
        if (a == (T)-1) return (e & 1) ? (T)-1 : (T)1;
        return (T)0;
    }
    U r = 1, b = (U)a, x = (U)e;
    while (x) {
        if (x & 1) r = (U)(r * b);
        b = (U)(b * b);
        x = (U)(x >> 1);
    }
    return (T)r;
}

/* ---- digamma (scipy.special.digamma): reflection, recurrence to x >= 10, asymptotic series ---- */
SJ_DEV double sj_digamma(double x) {
    if (x != x || x == -(double)INFINITY) return (double)NAN;
    if (x == 0.0) return signbit(x) ? (double)INFINITY : -(double)INFINITY;
    double acc = 0.0;
    if (x < 0.0) {
        if (x == floor(x)) return (double)NAN;
        double r = x - floor(x);                      /* psi(x) = psi(1 - x) - pi / tan(pi x) */
        acc = -3.141592653589793 / tan(3.141592653589793 * r);
        x = 1.0 - x;
    }
    while (x < 10.0) {
        acc -= 1.0 / x;
        x += 1.0;
    }
    double z = 1.0 / (x * x);
    double series = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132
                    - z * (691.0 / 32760 - z * (1.0 / 12)))))));
    return acc + log(x) - 0.5 / x - series;
}
"""
