/* nnkernels.h -- every entry point of the kernel library (nnkernels.c and nn/*.c) that generated code and
 * Python call. nnkernels.c includes it, so the compiler checks each definition against its
 * declaration; tests/runtime/test_kernel_header.py checks the LLVM signatures codegen declares
 * (symjit/codegen/llvm/lower_gemm.py C_SIGNATURES) against this file.
 *
 * `d` arguments are geometry descriptors: int64 arrays whose layout the lowering that builds
 * them documents (codegen/llvm/lower_gemm.py gemm_call, lower_conv.py conv_desc, lower_pool.py,
 * lower_blocked.py). Kernels taking `epi`/`epi_args` apply that elementwise epilogue (a
 * symjit_kernel_fn over output rows) to their output; NULL: none. Failures (out of memory) are
 * reported through the runtime's last error (symjit_set_error). */
#ifndef SYMJIT_NNKERNELS_H
#define SYMJIT_NNKERNELS_H

#include <stdint.h>

#include "symjit_runtime.h"

#ifndef NN_API
#define NN_API __attribute__((visibility("default")))
#endif

/* ---- configuration ------------------------------------------------------------------ */
/* BLAS binding: Fortran sgemm_ (NULL: built-in loop nests only), its per-thread thread-count
 * setter, and the smallest GEMM (multiply-adds) sent to it */
NN_API void symjit_nn_set_blas(void *sgemm, void *set_threads_local, int64_t small_gemm);
/* Tuning overrides, for the benchmarks that measure the kernel library's choices
 * (benchmarks/bench_gemm_choices.py, bench_weight_prefetch.py); 0 keeps the built-in choice.
 * The values each key takes are listed at symjit_nn_tune in nnkernels.c. Python reads the keys
 * as symjit.codegen.llvm.lower_gemm.TUNE_KEYS (checked against this enum by a test). */
enum {
    TUNE_KC,          /* K block of the GEMM tiles (floats) */
    TUNE_SHAPE,       /* 1 + index of a forced tile shape (MM_SHAPES) */
    TUNE_CONV,        /* a forced convolution path (A/B of the measured choices) */
    TUNE_WBLOCK,      /* the fused Winograd's budget for V + M (floats) */
    TUNE_BLOCKS,      /* blocks per thread of large calls */
    TUNE_PREFETCH,    /* one software prefetch switched off */
    TUNE_CHANVEC_OW,  /* widest depthwise output row vectorized along channels (-1: none) */
    TUNE_COUNT
};
/* set tuning override `key` to `value`; returns the previous value (-1: no such key) */
NN_API int64_t symjit_nn_tune(int64_t key, int64_t value);
/* whether this CPU can run the AVX-512 paths / whether they are in use now / switch them
 * (mode 0: portable paths only; otherwise AVX-512 where available) */
NN_API int64_t symjit_nn_native_available(void);
NN_API int64_t symjit_nn_native_in_use(void);
NN_API int64_t symjit_nn_set_native(int64_t mode);

/* ---- epilogue ----------------------------------------------------------------------- */
/* relu in place over floats [begin, end) of args[0] (a symjit_kernel_fn) */
NN_API void symjit_nn_epi_relu(int64_t begin, int64_t end, void **args);

/* ---- GEMM --------------------------------------------------------------------------- */
NN_API void symjit_nn_gemm(const int64_t *d, const float *A, const float *B, const float *bias, float *C,
                           symjit_kernel_fn epi, void **epi_args);

/* ---- convolution -------------------------------------------------------------------- */
/* pack weights at compile time for the method in d; returns floats written (0: no packing) */
NN_API int64_t symjit_nn_conv_pack(const int64_t *d, const float *w, float *out);
NN_API void symjit_nn_conv(const int64_t *d, const float *x, const float *w, const float *bias, float *y,
                           symjit_kernel_fn epi, void **epi_args);
NN_API void symjit_nn_conv_packed(const int64_t *d, const float *x, const float *w, const float *wp,
                                  const float *bias, float *y, symjit_kernel_fn epi, void **epi_args);
NN_API void symjit_nn_conv_bwd_data(const int64_t *d, const float *dy, const float *w, const float *bias,
                                    float *dx, symjit_kernel_fn epi, void **epi_args);
NN_API void symjit_nn_conv_bwd_weight(const int64_t *d, const float *dy, const float *x, float *dw);
NN_API void symjit_nn_bias_bwd(int64_t outer, int64_t C, int64_t inner, const float *dy, float *db);
/* convolution (+ relu per d) + max pooling, the convolution rows kept in cache */
NN_API void symjit_nn_conv_pool(const int64_t *d, const float *x, const float *w, const float *wp,
                                const float *bias, float *y);

/* ---- channel-blocked layout (NCHW16c) ------------------------------------------------ */
NN_API void symjit_nn_to_blocked(const int64_t *d, const float *x, float *y);
NN_API void symjit_nn_from_blocked(const int64_t *d, const float *x, float *y);
NN_API void symjit_nn_conv_blocked(const int64_t *d, const float *x, const float *wp, const float *bias, float *y);

/* ---- pooling ------------------------------------------------------------------------ */
NN_API void symjit_nn_pool(const int64_t *d, const float *x, float *y);
NN_API void symjit_nn_pool_bwd(const int64_t *d, const float *dy, const float *x, const float *y, float *dx);

/* ---- embedding (kind: index dtype, 0 float32, 1 float64, 2 int32, 3 int64) ------------- */
NN_API void symjit_nn_embedding(int64_t n, int64_t rows, int64_t dim, int64_t kind, const void *idx,
                                const float *weight, float *out);
NN_API void symjit_nn_embedding_bwd(int64_t n, int64_t rows, int64_t dim, int64_t kind, const void *idx,
                                    const float *dy, float *dw);

#endif
