/* nnkernels.h -- every entry point of the kernel library (nnkernels.c and its families in nn/)
 * that generated code and Python call. nnkernels.c includes it, so the compiler checks each
 * definition against its declaration; tests/runtime/test_kernel_header.py checks the LLVM
 * signatures codegen declares (symjit/codegen/llvm/lower_gemm.py C_SIGNATURES) against this file.
 *
 * `d` arguments are geometry descriptors, typed structs declared here (symjit_gemm_desc,
 * symjit_conv_desc, symjit_pool_desc, symjit_conv_pool_desc, symjit_reorder_desc,
 * symjit_conv_blocked_desc), all of int64 fields. Python builds them as ctypes structures
 * (lower_gemm.GemmDesc, lower_conv.ConvDesc / ConvPoolDesc, lower_pool.PoolDesc,
 * lower_blocked.ReorderDesc / ConvBlockedDesc) that the test checks against this file, and
 * generated code keeps their bytes as module constants. Kernels taking `epi`/`epi_args` apply
 * that elementwise epilogue (a symjit_kernel_fn over output rows) to their output; NULL: none.
 * Failures (out of memory) are reported through the runtime's last error (symjit_set_error). */
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
 * (benchmarks/bench_gemm_choices.py, bench_weight_prefetch.py) and the tests that cover the
 * alternatives; 0 keeps the built-in choice. Python reads the keys as
 * symjit.codegen.llvm.lower_gemm.TUNE_KEYS and the values below as TUNE_CONV_VALUES /
 * TUNE_PREFETCH_VALUES (checked against these enums by tests/runtime/test_kernel_header.py). */
enum {
    TUNE_KC,          /* K block of the GEMM tiles (floats) */
    TUNE_SHAPE,       /* 1 + index of a forced tile shape (MM_SHAPES) */
    TUNE_CONV,        /* a forced convolution path (enum symjit_tune_conv) */
    TUNE_WBLOCK,      /* the fused Winograd's budget for V + M (floats, wnat_blocks) */
    TUNE_BLOCKS,      /* blocks per thread of large calls */
    TUNE_PREFETCH,    /* one software prefetch switched off (enum symjit_tune_prefetch) */
    TUNE_CHANVEC_OW,  /* widest depthwise output row vectorized along channels (default
                         DW_CHANVEC_MAX_OW, or below DW_ROWS_MIN_OW_S1 / _S2 where the 3x3 row
                         kernel applies; -1: none) */
    TUNE_MIN_TASK,    /* fewest flops per block of calls below 2e7 flops (NN_MIN_TASK_FLOPS) */
    TUNE_BLOCKED_CHUNK, /* weight bytes per input-channel chunk of the general blocked
                           convolution (BLOCKED_CHUNK_BYTES; -1: whole panels, no chunks) */
    TUNE_BLOCKED_SPLIT, /* 1: the blocked convolutions' tasks split as before equal panel
                           groups and whole rounds of tasks (split_panels); 2: panel groups x
                           image groups wherever the filters outnumber a plane's pixels, also
                           when the weights fit L2 */
    TUNE_BLOCKED_PAD_COPY, /* 1: the general blocked convolution copies a padded input into a
                              zero-bordered plane first (as the portable path does) instead of
                              the AVX-512 edge tiles */
    TUNE_PORTABLE_BLAS, /* 1: the portable path's GEMMs all go to the BLAS (no pt_gemm tiles
                           for im2col convolutions, no gemm_nt_dots for dense layers of few rows) */
    TUNE_POOL,        /* 1 (general loops): the portable path's 2-D max and stride-1 average
                         pooling on the general loops (pool_fwd_task), not the separable passes */
    TUNE_COUNT
};
#define TUNE_POOL_GENERAL 1
/* values of TUNE_CONV: the alternative a convolution takes instead of the built-in choice */
enum symjit_tune_conv {
    TUNE_CONV_NO_IMPLICIT = 1,          /* im2col tiles instead of the implicit GEMM */
    TUNE_CONV_PORTABLE_DEPTHWISE = 3,   /* the portable depthwise loops */
    TUNE_CONV_NO_FVEC = 4,              /* no filter-vector path */
    TUNE_CONV_FORCE_FVEC = 5,           /* the filter-vector path wherever weights can be packed
                                           (decided when packing, at compile time) */
    TUNE_CONV_NO_WNAT = 6,              /* no fused Winograd on the tiles */
    TUNE_CONV_POOL_UNFUSED = 7,         /* symjit_nn_conv_pool as the whole convolution, then
                                           the pooling */
    TUNE_CONV_DW_PERMUTE_ROWS = 13,     /* the permute-based row kernel (dw3x3_rows_core) for
                                           stride-1 3x3 depthwise planes */
    TUNE_CONV_WEIGHT_ROWS = 14,         /* the implicit GEMM tiles read the weights by rows (one
                                           pointer per filter) rather than by columns */
    TUNE_CONV_POOL_ROWS_TMP = 15,       /* symjit_nn_conv_pool's 2-wide stride-2 windows through
                                           the general rows pass (conv_pool_rows) */
    TUNE_CONV_DW_WIDE_ACC = 16,         /* the portable path's depthwise planes as tap-by-tap
                                           passes over a wide-row accumulator (not dw_plane_pt) */
    TUNE_CONV_PW_BLAS = 17,             /* the portable path's 1x1 layers on the BLAS in im2col's
                                           blocks (not pt_gemm on packed strips) */
    TUNE_CONV_TILES_SPLIT_M = 18        /* the portable path's convolutions on pt_gemm in the
                                           BLAS's blocks (split_blas: filters first where they
                                           outnumber the positions) */
};
/* values of TUNE_PREFETCH: the software prefetch switched off */
enum symjit_tune_prefetch {
    TUNE_PREFETCH_WEIGHTS = 1,      /* the next weight block (mm_run) */
    TUNE_PREFETCH_DW_ROWS = 2,      /* the next input rows of the 3x3 depthwise row kernel */
    TUNE_PREFETCH_KBLOCK = 3,       /* the next K block's first panel (the next weight block
                                       only within a K block) */
    TUNE_PREFETCH_PLANES = 4,       /* the next channel's rows when copying phase planes
                                       (prefetch_plane_rows) */
    TUNE_PREFETCH_A_ROWS = 5,       /* the next row tile's rows of A (mm_run) */
    TUNE_PREFETCH_DW_OUT = 7,       /* for writing, the next output rows of the 3x3 depthwise
                                       row kernel */
    TUNE_PREFETCH_GEMM_OUT = 8,     /* for writing, the GEMM tiles' output (mm_run `pfw`) */
    TUNE_PREFETCH_WINO_OUT = 9,     /* for writing, the Winograd output transform (wnat_output) */
    TUNE_PREFETCH_BLOCKED_OUT = 10  /* for writing, the next tile's output in the blocked
                                       pointwise tiles (PWB_TILE) */
};
/* set tuning override `key` to `value`; returns the previous value (-1: no such key) */
NN_API int64_t symjit_nn_tune(int64_t key, int64_t value);
/* whether this CPU can run the AVX-512 paths / whether they are in use now / switch them
 * (mode 0: portable paths only; otherwise AVX-512 where available) */
NN_API int64_t symjit_nn_native_available(void);
NN_API int64_t symjit_nn_native_in_use(void);
NN_API int64_t symjit_nn_set_native(int64_t mode);
/* whether the multiply-accumulate kernels flush denormals (x86 DAZ/FTZ per task; nn/common.c):
 * 1 on, 0 off, -1 the environment's choice (SYMJIT_FLUSH_DENORMALS=1: on; default off); returns the
 * previous setting (-1: not decided yet) */
NN_API int64_t symjit_nn_set_flush_denormals(int64_t on);

/* ---- epilogue ----------------------------------------------------------------------- */
/* relu in place over floats [begin, end) of args[0] (a symjit_kernel_fn) */
NN_API void symjit_nn_epi_relu(int64_t begin, int64_t end, void **args);
/* sigmoid and tanh likewise (nn/epilogue.c; symjit's own float32 exp and tanh) */
NN_API void symjit_nn_epi_sigmoid(int64_t begin, int64_t end, void **args);
NN_API void symjit_nn_epi_tanh(int64_t begin, int64_t end, void **args);

/* ---- GEMM --------------------------------------------------------------------------- */
/* where symjit_nn_gemm's bias goes (symjit_gemm_desc.bias_mode) */
enum symjit_gemm_bias { SYMJIT_BIAS_NONE = 0, SYMJIT_BIAS_PER_COLUMN = 1, SYMJIT_BIAS_PER_ROW = 2 };
/* C[b] = op(A[b]) op(B[b]) (+ bias) for b < batch, row-major: op(A) is m x k (A stored k x m
 * when trans_a), op(B) k x n (B stored n x k when trans_b); C contiguous (n columns). */
typedef struct {
    int64_t batch;
    int64_t m, n, k;
    int64_t trans_a, trans_b;
    int64_t stride_a, stride_b, stride_c;   /* batch strides (elements; 0: a shared operand) */
    int64_t bias_mode;                      /* enum symjit_gemm_bias: bias[n] per column, bias[m] per row */
} symjit_gemm_desc;
NN_API void symjit_nn_gemm(const symjit_gemm_desc *d, const float *A, const float *B, const float *bias, float *C,
                           symjit_kernel_fn epi, void **epi_args);
/* GEMMs whose B is a compile-time constant (dense layers at inference): B packed once into the
 * column panels the tiles read (batch 1, !trans_a). symjit_nn_gemm_pack returns the floats of
 * the packing (0: the library wants none for d), written to `out` unless NULL;
 * symjit_nn_gemm_packed computes as symjit_nn_gemm from the packed copy Bp (B itself where the
 * AVX-512 tiles are off). */
NN_API int64_t symjit_nn_gemm_pack(const symjit_gemm_desc *d, const float *B, float *out);
NN_API void symjit_nn_gemm_packed(const symjit_gemm_desc *d, const float *A, const float *B, const float *Bp,
                                  const float *bias, float *C, symjit_kernel_fn epi, void **epi_args);

/* ---- convolution -------------------------------------------------------------------- */
/* forward convolution methods (symjit_conv_desc.method) */
enum symjit_conv_method {
    SYMJIT_CONV_IM2COL = 0,     /* im2col + GEMM, or on the AVX-512 tiles implicit GEMM / filter vectors */
    SYMJIT_CONV_DEPTHWISE = 1,  /* one input channel per filter: direct loops */
    SYMJIT_CONV_WINOGRAD = 2    /* Winograd F(2x2, 3x3) (2-D, one group, 3x3, stride 1, dilation 1) */
};
/* Geometry of a convolution, always with 3 spatial dims (1-D and 2-D ones lead with size 1,
 * padding 0). Forward: x (n, channels, in_size), w (filters, channels / groups, kernel),
 * y (n, filters, out_size), y[n,f,o] = sum over c in group(f), k of x[n, c, o*stride + k*dilate
 * - pad] * w[f, c, k] (zero outside x). The backward-data kernel takes the same descriptor, with
 * `out_size` dy's spatial size and `in_size` dx's. All fields int64 (no padding bytes). */
typedef struct {
    int64_t n;            /* images */
    int64_t channels;     /* data channels */
    int64_t groups;
    int64_t filters;
    int64_t in_size[3];   /* input D H W */
    int64_t kernel[3];
    int64_t out_size[3];  /* output D H W */
    int64_t stride[3];
    int64_t dilate[3];
    int64_t pad[3];
    int64_t method;       /* enum symjit_conv_method (forward only) */
} symjit_conv_desc;
/* pooling types (symjit_pool_desc.type) */
enum symjit_pool_type { SYMJIT_POOL_MAX = 0, SYMJIT_POOL_AVG = 1, SYMJIT_POOL_SUM = 2, SYMJIT_POOL_LP = 3 };
/* Geometry of a pooling over `planes` planes (N * C), 3 spatial dims as symjit_conv_desc.
 * Windows start at o * stride - pad; avg divides by the window clipped to [start, min(start +
 * kernel, in + pad)), or to the input without count_include_pad. */
typedef struct {
    int64_t planes;
    int64_t in_size[3];
    int64_t out_size[3];
    int64_t kernel[3];
    int64_t stride[3];
    int64_t pad[3];
    int64_t type;               /* enum symjit_pool_type */
    int64_t count_include_pad;  /* avg: the padding counts in the divisor */
    int64_t p;                  /* lp: the power */
} symjit_pool_desc;
/* symjit_nn_conv_pool: the convolution, the max pooling over its output and whether relu
 * comes between */
typedef struct {
    symjit_conv_desc conv;
    symjit_pool_desc pool;
    int64_t relu;
} symjit_conv_pool_desc;

/* pack weights at compile time for the method in d; returns floats written (0: no packing) */
NN_API int64_t symjit_nn_conv_pack(const symjit_conv_desc *d, const float *w, float *out);
NN_API void symjit_nn_conv(const symjit_conv_desc *d, const float *x, const float *w, const float *bias, float *y,
                           symjit_kernel_fn epi, void **epi_args);
NN_API void symjit_nn_conv_packed(const symjit_conv_desc *d, const float *x, const float *w, const float *wp,
                                  const float *bias, float *y, symjit_kernel_fn epi, void **epi_args);
NN_API void symjit_nn_conv_bwd_data(const symjit_conv_desc *d, const float *dy, const float *w, const float *bias,
                                    float *dx, symjit_kernel_fn epi, void **epi_args);
NN_API void symjit_nn_conv_bwd_weight(const symjit_conv_desc *d, const float *dy, const float *x, float *dw);
NN_API void symjit_nn_bias_bwd(int64_t outer, int64_t C, int64_t inner, const float *dy, float *db);
/* convolution (+ relu per d) + max pooling, the convolution rows kept in cache */
NN_API void symjit_nn_conv_pool(const symjit_conv_pool_desc *d, const float *x, const float *w, const float *wp,
                                const float *bias, float *y);

/* ---- channel-blocked layout (NCHW16c) ------------------------------------------------ */
/* the conversions: x (n, channels, positions) <-> (n, channels / 16, positions, 16) */
typedef struct {
    int64_t n, channels, positions;
} symjit_reorder_desc;
/* the blocked convolutions (symjit_conv_blocked_desc.kind); runtime/nn/blocked.c documents the
 * layouts of their packed weights */
enum symjit_blocked_kind {
    SYMJIT_BLOCKED_POINTWISE = 0,   /* 1x1, stride 1, no padding: blocked -> blocked */
    SYMJIT_BLOCKED_DEPTHWISE = 1,   /* 3x3, padding 1, channels == filters: blocked -> blocked */
    SYMJIT_BLOCKED_DIRECT = 2,      /* any kernel, one group, no dilation: NCHW -> blocked */
    SYMJIT_BLOCKED_GENERAL = 3      /* any kernel, one group, no dilation: blocked -> blocked */
};
/* the activations the blocked convolutions apply in their stores (symjit_conv_blocked_desc.relu;
 * ops/fused.py ACT_*): relu and relu6 keep NaN */
enum symjit_blocked_act {
    SYMJIT_ACT_NONE = 0,
    SYMJIT_ACT_RELU = 1,            /* max(x, 0) */
    SYMJIT_ACT_RELU6 = 2            /* min(max(x, 0), 6) */
};
typedef struct {
    int64_t kind;                    /* enum symjit_blocked_kind */
    int64_t n, channels, filters;
    int64_t height, width, out_height, out_width;
    int64_t stride;                  /* both directions (depthwise 1 or 2, pointwise 1, others any) */
    int64_t relu;                    /* activation of the stores: enum symjit_blocked_act */
    int64_t vectors;                 /* filter vectors (16 lanes) per packed panel */
    int64_t kernel_h, kernel_w, pad_h, pad_w;   /* the direct and general kinds'; 0 for the others */
} symjit_conv_blocked_desc;
NN_API void symjit_nn_to_blocked(const symjit_reorder_desc *d, const float *x, float *y);
NN_API void symjit_nn_from_blocked(const symjit_reorder_desc *d, const float *x, float *y);
NN_API void symjit_nn_conv_blocked(const symjit_conv_blocked_desc *d, const float *x, const float *wp,
                                   const float *bias, const float *residual, float *y);
/* 2-D max / avg / sum pooling of blocked x into blocked y; d->planes = n channels / 16 */
NN_API void symjit_nn_pool_blocked(const symjit_pool_desc *d, const float *x, float *y);

/* ---- pooling ------------------------------------------------------------------------ */
NN_API void symjit_nn_pool(const symjit_pool_desc *d, const float *x, float *y);
NN_API void symjit_nn_pool_bwd(const symjit_pool_desc *d, const float *dy, const float *x, const float *y, float *dx);

/* ---- embedding (kind: index dtype, 0 float32, 1 float64, 2 int32, 3 int64) ------------- */
NN_API void symjit_nn_embedding(int64_t n, int64_t rows, int64_t dim, int64_t kind, const void *idx,
                                const float *weight, float *out);
NN_API void symjit_nn_embedding_bwd(int64_t n, int64_t rows, int64_t dim, int64_t kind, const void *idx,
                                    const float *dy, float *dw);

/* ---- fused recurrent layers (MXNet's RNN op; runtime/nn/rnn.c documents the layouts) ------ */
/* cell types (symjit_rnn_desc.mode) */
enum symjit_rnn_mode { SYMJIT_RNN_RELU = 0, SYMJIT_RNN_TANH = 1, SYMJIT_RNN_LSTM = 2, SYMJIT_RNN_GRU = 3 };
/* x (seq, batch, input), y (seq, batch, dirs * hidden), states (layers * dirs, batch, hidden),
 * params packed as MXNet's, masks (layers - 1, seq, batch, dirs * hidden) or NULL */
typedef struct {
    int64_t mode;         /* enum symjit_rnn_mode */
    int64_t seq, batch, input, hidden, layers, dirs;
    int64_t reserve;      /* floats of the reserve buffer (symjit.ops.rnn.reserve_size), 0: none */
} symjit_rnn_desc;
/* forward: hy, cy may be NULL; c0 (lstm only) NULL: zeros; cy of a cell without one: zeros;
 * reserve (NULL: none) receives the traces the backward reuses */
NN_API void symjit_nn_rnn(const symjit_rnn_desc *d, const float *x, const float *params, const float *h0,
                          const float *c0, const float *masks, float *y, float *hy, float *cy, float *reserve);
/* backward: reuses the forward's traces from a reserve that holds them, else recomputes them;
 * dhy, dcy NULL: zeros; dc0 NULL: not wanted */
NN_API void symjit_nn_rnn_bwd(const symjit_rnn_desc *d, const float *x, const float *params, const float *h0,
                              const float *c0, const float *masks, const float *reserve, const float *dy,
                              const float *dhy, const float *dcy, float *dx, float *dparams, float *dh0,
                              float *dc0);

/* ---- sparse (CSR) products (kind: value dtype, 0 float32, 1 float64; int64 indices) ---- */
NN_API void symjit_nn_csr_dense(int64_t rows, int64_t k, int64_t kind, const void *data, const int64_t *indices,
                                const int64_t *indptr, const void *dense, void *out);
NN_API void symjit_nn_csrt_dense(int64_t rows, int64_t k, int64_t out_rows, int64_t kind, const void *data,
                                 const int64_t *indices, const int64_t *indptr, const int64_t *slot,
                                 const void *dense, void *out, int64_t parts, void *scratch);

#endif
