/*
 * nnkernels.c -- compute-bound neural-network kernels that generated code calls (float32, row-major).
 *
 * Two paths compute GEMM-shaped work (FullyConnected, dot, batch_dot, convolutions, their
 * backward passes, Deconvolution):
 *   - on x86-64 hosts with AVX-512 (F/BW/DQ/VL), the default: register-blocked tiles written
 *     here (R rows x 16V columns in zmm accumulators, "Native AVX-512 GEMM tiles" below),
 *     driven by convolution-specific blockings that avoid im2col (implicit GEMM over zero-padded
 *     stride phase planes, fused Winograd F(2x2, 3x3), filter-vector tiles over weights packed
 *     at compile time), a GEMM driver for dense layers and a dot-product GEMV; depthwise
 *     convolution and max pooling have vectorised AVX-512 loops too;
 *   - elsewhere, or after `symjit_nn_set_native(0)` (the portable path): a BLAS sgemm bound at
 *     run time (`symjit_nn_set_blas`: symjit binds scipy's OpenBLAS), im2col + GEMM, Winograd
 *     with sgemm, and built-in loop nests for tiny products.
 * benchmarks/bench_gemm_choices.py measures the choices (tiles against the BLAS, methods, tile
 * shapes, blocking); `symjit_nn_tune` overrides them for it.
 * Depthwise convolution, pooling, bias gradients and embedding gathers are direct loops. Work is
 * split over the runtime's pool (`symjit_parallel_for`) into output blocks; GEMM work inside a
 * block is single-threaded (no nested thread pools), and a node's elementwise epilogue (a
 * generated kernel `void epi(begin, end, args)` over flat output indices) runs on each output
 * block as soon as the block is complete, while it is still in cache.
 *
 * Geometry arrives as an int64 descriptor array (layouts documented per function; generated
 * code keeps them as module constants). Spatial convolutions and pooling are handled as 3-D
 * (1-D and 2-D pad the leading spatial dims with size 1). These symbols have default
 * visibility so that symjit's code generator can find them with dlsym in the extension.
 */
#include <float.h>
#include <stdatomic.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nnkernels.h"
#include "symjit_runtime.h"

#define NN_API __attribute__((visibility("default")))

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && __GNUC__ >= 12 \
    && !defined(SYMJIT_NO_AVX512)
/* loop nests vectorised for the host's vector width, picked once at load time (ifunc); a
 * library built for one CPU (-march, SYMJIT_NO_AVX512) has one version, for that CPU */
#define NN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NN_CLONES
#endif

typedef void (*sgemm_fn)(const char *, const char *, const int *, const int *, const int *,
                         const float *, const float *, const int *, const float *, const int *,
                         const float *, float *, const int *);
typedef int (*set_threads_fn)(int);

static sgemm_fn g_sgemm = NULL;
static set_threads_fn g_blas_threads_local = NULL;
/* products with at most this many multiply-adds use the built-in loop nest */
static int64_t g_small_gemm = 32768;
#ifndef CONV_COLUMN_FLOATS
#define CONV_COLUMN_FLOATS 131072   /* im2col block: 512 KiB (L2); larger blocks measured no faster */
#endif

NN_API void symjit_nn_set_blas(void *sgemm, void *set_threads_local, int64_t small_gemm) {
    g_sgemm = (sgemm_fn)sgemm;
    g_blas_threads_local = (set_threads_fn)set_threads_local;
    if (small_gemm >= 0) g_small_gemm = small_gemm;
}

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }


/* ---------------------------------------------------------------------------------------- */
/* Scratch: one growing, 64-byte-aligned buffer per thread (chunks of one call never share).  */
/* ---------------------------------------------------------------------------------------- */

/* slots: 0 im2col blocks, 1 packed small-GEMM operands, 2..4 Winograd buffers of the caller,
 * 5 panels packed for the AVX-512 tiles, 6..7 padded input and offset table of the caller
 * (implicit-GEMM convolution), 8 convolution rows before pooling (symjit_nn_conv_pool) */
static __thread float *t_scratch[9];
static __thread size_t t_scratch_cap[9];

/* NULL when memory is exhausted; the caller then skips its work and the error is recorded
 * (symjit_last_error) -- the only failure these kernels have. */
static float *scratch(int slot, size_t nfloats) {
    if (nfloats > t_scratch_cap[slot]) {
        free(t_scratch[slot]);
        size_t cap = nfloats + nfloats / 4 + 1024;
        void *p = NULL;
        if (posix_memalign(&p, 64, cap * sizeof(float)) != 0) p = NULL;
        t_scratch[slot] = (float *)p;
        t_scratch_cap[slot] = p ? cap : 0;
        if (!p) symjit_set_error(SYMJIT_ERR_OUT_OF_MEMORY, "nnkernels: cannot allocate %zu bytes of scratch",
                                 nfloats * sizeof(float));
    }
    return t_scratch[slot];
}

/* ---------------------------------------------------------------------------------------- */
/* GEMM                                                                                      */
/* ---------------------------------------------------------------------------------------- */

/* C[M,N] = op(A) op(B) + beta*C, row-major; op(A) is M x K (A stored K x M when ta),
 * op(B) is K x N (B stored N x K when tb). Small sizes: i-k-j loop nest over a packed B. */
NN_CLONES
static void gemm_small(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    const float *Bp = B;
    int64_t ldp = ldb;
    if (tb) {
        float *p = scratch(1, (size_t)(K * N));
        if (!p) return;
        for (int64_t j = 0; j < N; j++)
            for (int64_t k = 0; k < K; k++) p[k * N + j] = B[j * ldb + k];
        Bp = p;
        ldp = N;
    }
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        if (beta == 0.0f) {
            for (int64_t j = 0; j < N; j++) c[j] = 0.0f;
        } else if (beta != 1.0f) {
            for (int64_t j = 0; j < N; j++) c[j] *= beta;
        }
        for (int64_t k = 0; k < K; k++) {
            const float a = ta ? A[k * lda + i] : A[i * lda + k];
            const float *b = Bp + k * ldp;
            for (int64_t j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Native AVX-512 GEMM tiles (x86-64 hosts with AVX-512F/BW/DQ/VL)                          */
/* ---------------------------------------------------------------------------------------- */

/* On AVX-512 hosts GEMM-shaped work runs on register-blocked tiles written here instead of
 * the BLAS (benchmarks/bench_gemm_choices.py measures both): C(r, j) = sum_k A(k, r) B(k, j)
 * [+ C] [+ bias], R rows x 16V columns per tile in R*V zmm accumulators.
 *   B, the "vector" operand: B(k, j) = b[(j / PW) * bsp + koff(k) + j % PW], PW = 16V, with
 *     koff(k) = k * bsk, or koff[k] from a table (implicit-GEMM convolution: the k-th row is a
 *     shifted window of the padded input); an unpacked row-major B has bsp = PW. Loaded without
 *     masks (masked loads make GCC spill the accumulators): a partial last panel must be
 *     readable to its full width (`padded`) or mm_run copies it, zero-padded, first.
 *   A, the "broadcast" operand: by rows (A(k, r) = a[r * asr + k], ask == 1) or by columns
 *     (A(k, r) = a[k * ask + r], asr == 1). Rows past the edge of a tile compute a copy of its
 *     first row and are not stored, so no operand is read out of bounds.
 *   C(r, j) = c[r * csr + j * csj] with csj == 1 (vector stores) or csr == 1 (transposed,
 *     through a small buffer); with wide_w > 0 the columns are positions q = q0 + j of an output
 *     computed `wide_w` columns wide of which the first `valid_w` are kept:
 *     C(r, j) = c[r * csr + (q / wide_w) * valid_w + q % wide_w] (implicit-GEMM convolution). */

static int g_native = -1;   /* -1: not decided yet; 0: BLAS / loop nests; 1: AVX-512 tiles */

/* Tuning overrides for the benchmarks (0: the built-in choice); keys: nnkernels.h */
static int64_t g_tune[TUNE_COUNT];

/* Set tuning override `key` to `value` (0 restores the built-in choice); returns the previous
 * value. For benchmarks/bench_gemm_choices.py. TUNE_KC: K block of the tiles; TUNE_SHAPE: 1 +
 * index of a forced tile shape (MM_SHAPES); TUNE_CONV: 1 no implicit GEMM (im2col tiles), 3 the
 * portable depthwise loops, 4 no filter-vector path, 5 the filter-vector path wherever weights
 * can be packed (decided when packing, at compile time), 6 no fused Winograd on the tiles, 7
 * convolution + max pooling as a whole convolution then the pooling (symjit_nn_conv_pool), 8
 * the filter-vector tasks with filter blocks innermost, 11 whole tiles of plain rows stored
 * through the masked-segment loop, 12 the fused Winograd's previous blocks (wnat_blocks_v1),
 * 13 the permute-based row kernel (dw3x3_rows_core) for stride-1 3x3 depthwise planes;
 * TUNE_WBLOCK: the fused Winograd's budget for V + M (floats, wnat_blocks); TUNE_BLOCKS: blocks
 * per thread of large calls;
 * TUNE_PREFETCH: 1 no prefetching of the next weight block (mm_run), 2 no prefetching of the
 * next input rows in the 3x3 depthwise row kernel (dw3x3_rows_core), 3 the next weight block
 * only within a K block (not the next K block's first panel), 4 no prefetching of the next
 * channel's rows when copying phase planes (prefetch_plane_rows), 5 no prefetching of the next
 * row tile's rows of A (mm_run), 7 no prefetching for writing of the next output rows in the
 * 3x3 depthwise row kernel, 8 no prefetching for writing of the GEMM tiles' output (mm_run,
 * `pfw`), 9 the same in the Winograd output transform (wnat_output), 10 no prefetching for
 * writing of the next tile's output in the blocked pointwise tiles (PWB_TILE); TUNE_CHANVEC_OW: the widest
 * depthwise output row that vectorizes along channels (default DW_CHANVEC_MAX_OW, or below
 * DW_ROWS_MIN_OW_S1 / _S2 where the 3x3 row kernel applies; -1: none). */
NN_API int64_t symjit_nn_tune(int64_t key, int64_t value) {
    if (key < 0 || key >= TUNE_COUNT) return -1;
    int64_t old = g_tune[key];
    g_tune[key] = value;
    return old;
}

/* Prefetch (into L2) rows [r0, r1) (clipped to [0, H)) of a plane of H x W floats. The kernels
 * that copy a block of rows of every input channel (phase planes) call it for the next channel
 * before copying the current one: each channel's rows are a short run of their own (a few KB,
 * one plane apart), which the hardware prefetchers meet cold, so without it the copies wait
 * for every line (measured: the Winograd layer's phase split was 16% of its time at batch 8). */
static inline void prefetch_plane_rows(const float *x, int64_t H, int64_t W, int64_t r0, int64_t r1) {
    if (g_tune[TUNE_PREFETCH] == 4) return;
    const char *p = (const char *)(x + (r0 > 0 ? r0 : 0) * W), *e = (const char *)(x + (r1 < H ? r1 : H) * W);
    for (; p < e; p += 64) __builtin_prefetch(p, 0, 2);
}

/* SYMJIT_NO_AVX512: leave the AVX-512 paths out (an AOT library for a CPU without AVX-512
 * carries no AVX-512 instruction at all, symjit compile --cpu x86-64-v3) */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(SYMJIT_NO_AVX512)
#define NN_HAVE_AVX512 1
#include <immintrin.h>
#define NN_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prfchw")))

static int cpu_has_avx512(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}
#else
static int cpu_has_avx512(void) { return 0; }
#endif

static int native_on(void) {
    if (g_native < 0) g_native = cpu_has_avx512();
    return g_native;
}

/* Whether this CPU can run the AVX-512 tiles (what the default path uses). */
NN_API int64_t symjit_nn_native_available(void) { return cpu_has_avx512(); }

/* whether the AVX-512 paths are in use now (the CPU has them and symjit_nn_set_native has not
 * switched them off) */
NN_API int64_t symjit_nn_native_in_use(void) { return native_on(); }

/* mode 0: BLAS and loop nests only (the portable path); otherwise the AVX-512 tiles where the
 * CPU has them (the default). Returns whether the tiles are now in use. */
NN_API int64_t symjit_nn_set_native(int64_t mode) {
    g_native = mode == 0 ? 0 : cpu_has_avx512();
    return g_native;
}

typedef struct {
    int64_t K;
    const float *a;
    int64_t ask, asr;          /* A(k, r) = a[k * ask + r * asr]; ask == 1 or asr == 1 */
    const float *b;
    int64_t bsk, bsp;          /* B(k, j) = b[(j / PW) * bsp + k * bsk + j % PW] */
    const int64_t *koff;       /* if set, k * bsk is koff[k] */
    const int64_t *aoff;       /* if set, A by columns through a table: A(k, r) = a[aoff[k] + pos(r)]
                                  with pos(r) = (r / valid_w) a_pitch + r % valid_w (row tiles
                                  never cross a multiple of valid_w) */
    int64_t a_pitch;
    float *c;
    int64_t csr, csj;          /* C(r, j) = c[r * csr + j * csj]; csj == 1 or csr == 1 */
    int64_t wide_w, valid_w, q0;   /* wide output (csj == 1), see above */
    const float *bias_r, *bias_j;
    int64_t rows, cols;
    int accumulate;            /* C += result (beta = 1) */
    int padded;                /* B's last panel is readable to its full width */
    int panels_outer;          /* B is the large operand (packed weights): each panel once, all
                                  row tiles against it, K blocked so both stay in L2 */
    const char *pf;            /* if set, a tile prefetches pf + k * pf_step (into L2) at step k */
    int64_t pf_step;
    int relu;                  /* the stored values are relu(C) (the symjit_nn_epi_relu epilogue) */
    int pfw;                   /* C is the arena (csj == 1): prefetch for writing what the tile two
                                  panels on stores (mm_run) */
} mm_t;

/* The ReLU epilogue, as the `relu` op computes it: y if y > 0 or y is NaN, else +0. As an
 * epilogue kernel (inputs then outputs: args[0] the result, args[1] where it goes, here the
 * same buffer) over flat indices [begin, end). Kernels whose stores apply it in registers
 * (relu_ps) recognise it (epi_is_relu) and do not call it; the others call it like any
 * generated epilogue. */
static inline float relu_f(float v) { return (v > 0.0f || v != v) ? v : 0.0f; }

NN_API void symjit_nn_epi_relu(int64_t begin, int64_t end, void **args) {
    const float *x = (const float *)args[0];
    float *y = (float *)args[1];
    for (int64_t i = begin; i < end; i++) y[i] = relu_f(x[i]);
}

static inline int epi_is_relu(symjit_kernel_fn epi) { return epi == symjit_nn_epi_relu; }

typedef void (*mm_tile_fn)(const mm_t *, int64_t r0, int64_t j0);

#ifdef NN_HAVE_AVX512
/* relu on 16 lanes with the op's semantics: lanes not <= 0 (positive or NaN) kept, others +0 */
NN_AVX512 static inline __m512 relu_ps(__m512 x) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NLE_UQ), x);
}

/* add the biases, then store (or accumulate) nr rows x nc columns of a tile, held in `acc` as
 * acc[(r * V + v) * 16 + lane]; relu last when p->relu */
NN_AVX512 static void mm_store(const mm_t *p, int64_t r0, int64_t j0, int64_t nr, int64_t nc, int V,
                               const float *acc) {
    const int W = 16 * V;
    float bj[64] __attribute__((aligned(64)));
    if (p->bias_j) {
        for (int v = 0; v < V; v++) {
            int64_t left = nc - 16 * v;
            __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
            _mm512_store_ps(bj + 16 * v, _mm512_maskz_loadu_ps(m, p->bias_j + j0 + 16 * v));
        }
    } else {
        for (int v = 0; v < V; v++) _mm512_store_ps(bj + 16 * v, _mm512_setzero_ps());
    }
    if (p->csj == 1) {
        /* runs of columns: [j, j + len) of the tile go to c + row offset + dst */
        int64_t run_j[8], run_len[8], run_dst[8];
        int nrun = 0;
        if (p->wide_w == 0) {
            run_j[0] = 0; run_len[0] = nc; run_dst[0] = j0; nrun = 1;
        } else {
            const int64_t Wd = p->wide_w, OW = p->valid_w;
            int64_t q = p->q0 + j0, oh = q / Wd, ow = q % Wd, j = 0;
            while (j < nc && nrun < 8) {
                if (ow >= OW) { j += Wd - ow; oh++; ow = 0; continue; }
                int64_t len = imin(OW - ow, nc - j);
                run_j[nrun] = j; run_len[nrun] = len; run_dst[nrun] = oh * OW + ow; nrun++;
                j += len; ow += len;
            }
        }
        for (int64_t r = 0; r < nr; r++) {
            float *cr = p->c + (r0 + r) * p->csr;
            const float *ar = acc + r * W;
            __m512 br = _mm512_set1_ps(p->bias_r ? p->bias_r[r0 + r] : 0.0f);
            for (int u = 0; u < nrun; u++) {
                const float *src = ar + run_j[u], *bsrc = bj + run_j[u];
                float *dst = cr + run_dst[u];
                for (int64_t t = 0; t < run_len[u]; t += 16) {
                    int64_t left = run_len[u] - t;
                    __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
                    __m512 x = _mm512_add_ps(_mm512_add_ps(_mm512_maskz_loadu_ps(m, src + t), br),
                                             _mm512_maskz_loadu_ps(m, bsrc + t));
                    if (p->accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, dst + t));
                    if (p->relu) x = relu_ps(x);
                    _mm512_mask_storeu_ps(dst + t, m, x);
                }
            }
        }
        return;
    }
    for (int v = 0; v < V; v++) {   /* transposed: C(r, j) at c[r + j * csj] */
        int64_t lanes = imin(16, nc - 16 * v);
        for (int64_t l = 0; l < lanes; l++) {
            float *cj = p->c + (j0 + 16 * v + l) * p->csj + r0;
            for (int64_t r = 0; r < nr; r++) {
                float x = acc[(r * V + v) * 16 + l] + bj[16 * v + l] + (p->bias_r ? p->bias_r[r0 + r] : 0.0f);
                if (p->accumulate) x += cj[r];
                cj[r] = p->relu ? relu_f(x) : x;
            }
        }
    }
}

/* Where the 16-lane vectors v < V of a tile's row go (csj == 1): ns[v] masked segments, lane l
 * of segment u stored at c + row offset + so[v][u] + l. Plain rows: one segment per vector.
 * Wide output: lane l of vector v is position q = q0 + j0 + 16v + l, kept if q % wide_w <
 * valid_w, stored at (q / wide_w) * valid_w + q % wide_w: one segment per output row it touches. */
static inline __attribute__((always_inline)) void mm_segments(const mm_t *p, int64_t j0, int64_t nc, int V, int *ns,
                                                              __mmask16 (*sm)[4], int64_t (*so)[4]) {
    if (p->wide_w == 0) {
        for (int v = 0; v < V; v++) {
            int64_t lanes = imin(16, nc - 16 * v);
            ns[v] = lanes > 0;
            if (lanes <= 0) continue;
            sm[v][0] = lanes >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << lanes) - 1u);
            so[v][0] = j0 + 16 * v;
        }
        return;
    }
    /* one division per tile: (oh, ow) of its first column, then advanced lane by lane */
    const int64_t Wd = p->wide_w, OW = p->valid_w, q = p->q0 + j0;
    int64_t oh = q / Wd, ow = q - oh * Wd;
    for (int v = 0; v < V; v++) {
        int64_t lanes = imin(16, nc - 16 * v), l = 0;
        const int64_t qv = q + 16 * v;
        ns[v] = 0;
        while (l < lanes) {
            if (ow >= OW) {   /* skip the discarded columns of the wide row */
                int64_t skip = imin(Wd - ow, lanes - l);
                l += skip;
                ow += skip;
            } else {
                int64_t run = imin(OW - ow, lanes - l);
                if (ns[v] < 4) {
                    sm[v][ns[v]] = (__mmask16)((((1u << run) - 1u) << l) & 0xFFFFu);
                    so[v][ns[v]] = qv - oh * (Wd - OW);
                    ns[v]++;
                }
                l += run;
                ow += run;
            }
            if (ow >= Wd) { oh++; ow -= Wd; }
        }
        if (lanes < 16) {   /* the next vector starts 16 columns on */
            int64_t rest = 16 - imax(lanes, 0);
            ow += rest;
            oh += ow / Wd;
            ow %= Wd;
        }
    }
}

/* transpose of a 16 x 16 block held in r[0..15] (rows) into r (columns) */
NN_AVX512 static inline __attribute__((always_inline)) void tr16x16(__m512 *r) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {   /* 64-bit interleave of pairs */
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    /* r[4g + j], 128-bit lane L: column 4L + j of rows 4g..4g+3; a 4 x 4 transpose of lanes
     * over g gives column 4L + j of all rows */
    for (int j = 0; j < 4; j++) {
        __m512 u0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44), u1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);
        __m512 u2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44), u3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
        t[j] = _mm512_shuffle_f32x4(u0, u2, 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
        t[8 + j] = _mm512_shuffle_f32x4(u1, u3, 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* one R x 16V tile at rows [r0, r0 + R), columns [j0, j0 + 16V) (j0 a multiple of 16V) */
#define MM_TILE(R, V, AROWS, BTAB)                                                                    \
    NN_AVX512 static void mm_tile_##R##x##V##_##AROWS##BTAB(const mm_t *p, int64_t r0, int64_t j0) {  \
        const int64_t K = p->K, nr = imin(R, p->rows - r0), nc = imin(16 * V, p->cols - j0);         \
        __m512 acc[R][V];                                                                             \
        for (int r = 0; r < R; r++)                                                                   \
            for (int v = 0; v < V; v++) acc[r][v] = _mm512_setzero_ps();                              \
        const float *bp = p->b + (j0 / (16 * V)) * p->bsp;                                           \
        const int64_t bsk = p->bsk;                                                                   \
        const int64_t *koff = p->koff;                                                                \
        const float *ap[AROWS == 1 ? R : 1];                                                          \
        int off[R];                                                                                   \
        for (int r = 0; r < R; r++) off[r] = r < nr ? r : 0;                                          \
        const float *a = p->a + (AROWS == 2 ? (r0 / p->valid_w) * p->a_pitch + r0 % p->valid_w : r0); \
        const int64_t ask = p->ask;                                                                   \
        const int64_t *aoff = p->aoff;                                                                \
        if (AROWS == 1)                                                                               \
            for (int r = 0; r < (AROWS == 1 ? R : 1); r++) ap[r] = p->a + (r0 + off[r]) * p->asr;    \
        const char *pf = p->pf;                                                                       \
        const int64_t pf_step = p->pf_step;                                                           \
        for (int64_t k = 0; k < K; k++) {                                                             \
            if (pf) _mm_prefetch(pf + k * pf_step, _MM_HINT_T1);                                      \
            const float *bk = BTAB ? bp + koff[k] : bp + k * bsk;                                    \
            const float *ak = AROWS == 2 ? a + aoff[k] : a;                                           \
            __m512 bv[V];                                                                             \
            for (int v = 0; v < V; v++) bv[v] = _mm512_loadu_ps(bk + 16 * v);                         \
            for (int r = 0; r < R; r++) {                                                             \
                __m512 av = _mm512_set1_ps(AROWS == 1 ? ap[AROWS == 1 ? r : 0][k] : ak[off[r]]);      \
                for (int v = 0; v < V; v++) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);       \
            }                                                                                         \
            if (AROWS == 0) a += ask;                                                                 \
        }                                                                                             \
        if (p->csj == 1 && !p->bias_j && p->wide_w == 0 && nr == R && nc == 16 * V && !p->accumulate && \
            g_tune[TUNE_CONV] != 11) { /* a whole tile of plain rows: straight stores */               \
            for (int r = 0; r < R; r++) {                                                             \
                float *cr = p->c + (r0 + r) * p->csr + j0;                                            \
                const __m512 br = _mm512_set1_ps(p->bias_r ? p->bias_r[r0 + r] : 0.0f);               \
                for (int v = 0; v < V; v++) {                                                         \
                    __m512 y = _mm512_add_ps(acc[r][v], br);                                          \
                    _mm512_storeu_ps(cr + 16 * v, p->relu ? relu_ps(y) : y);                          \
                }                                                                                     \
            }                                                                                         \
            return;                                                                                   \
        }                                                                                             \
        if (p->csj == 1 && !p->bias_j) { /* rows: store from registers, by masked segments */        \
            __mmask16 sm[V][4];                                                                       \
            int64_t so[V][4];                                                                         \
            int ns[V];                                                                                \
            mm_segments(p, j0, nc, V, ns, sm, so);                                                    \
            for (int r = 0; r < R; r++) {                                                             \
                if (r >= nr) break;                                                                   \
                float *cr = p->c + (r0 + r) * p->csr;                                                 \
                __m512 br = _mm512_set1_ps(p->bias_r ? p->bias_r[r0 + r] : 0.0f);                     \
                for (int v = 0; v < V; v++) {                                                         \
                    __m512 x = _mm512_add_ps(acc[r][v], br);                                          \
                    for (int u = 0; u < ns[v]; u++) {                                                 \
                        __m512 y = p->accumulate ? _mm512_add_ps(x, _mm512_maskz_loadu_ps(sm[v][u], cr + so[v][u])) : x; \
                        if (p->relu) y = relu_ps(y);                                                  \
                        _mm512_mask_storeu_ps(cr + so[v][u], sm[v][u], y);                            \
                    }                                                                                 \
                }                                                                                     \
            }                                                                                         \
            return;                                                                                   \
        }                                                                                             \
        if (p->csr == 1 && p->wide_w == 0) { /* transposed: 16 x 16 register transposes per vector */ \
            for (int v = 0; v < V; v++) {                                                             \
                int64_t lanes = imin(16, nc - 16 * v);                                                \
                if (lanes <= 0) break;                                                                \
                __m512 t[16];                                                                         \
                for (int r = 0; r < 16; r++) {                                                        \
                    t[r] = _mm512_setzero_ps();                                                       \
                    if (r < R) t[r] = _mm512_add_ps(acc[r < R ? r : 0][v],                            \
                                        _mm512_set1_ps(p->bias_r && r < nr ? p->bias_r[r0 + r] : 0.0f)); \
                }                                                                                     \
                tr16x16(t);                                                                           \
                const __mmask16 rm = (__mmask16)((1u << nr) - 1u);                                    \
                for (int64_t l = 0; l < lanes; l++) {                                                 \
                    float *cj = p->c + (j0 + 16 * v + l) * p->csj + r0;                                \
                    __m512 x = t[l];                                                                  \
                    if (p->bias_j) x = _mm512_add_ps(x, _mm512_set1_ps(p->bias_j[j0 + 16 * v + l]));  \
                    if (p->accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(rm, cj));           \
                    if (p->relu) x = relu_ps(x);                                                      \
                    _mm512_mask_storeu_ps(cj, rm, x);                                                 \
                }                                                                                     \
            }                                                                                         \
            return;                                                                                   \
        }                                                                                             \
        /* through a float buffer: acc's address must not escape, or it leaves the registers */    \
        float out[R * V * 16] __attribute__((aligned(64)));                                           \
        for (int r = 0; r < R; r++)                                                                   \
            for (int v = 0; v < V; v++) _mm512_store_ps(out + (r * V + v) * 16, acc[r][v]);          \
        mm_store(p, r0, j0, nr, nc, V, out);                                                          \
    }
#define MM_TILES(R, V) MM_TILE(R, V, 1, 0) MM_TILE(R, V, 0, 0) MM_TILE(R, V, 1, 1) MM_TILE(R, V, 0, 1)
MM_TILES(6, 4)
MM_TILES(8, 3)
MM_TILES(12, 2)
MM_TILES(8, 2)
MM_TILES(14, 1)
MM_TILES(7, 4)
MM_TILES(7, 3)
MM_TILE(7, 4, 2, 0)
MM_TILE(7, 3, 2, 0)
#define MM_FNS(R, V) {{mm_tile_##R##x##V##_00, mm_tile_##R##x##V##_01}, {mm_tile_##R##x##V##_10, mm_tile_##R##x##V##_11}, {NULL, NULL}}
#define MM_FNS7(R, V) {{mm_tile_##R##x##V##_00, mm_tile_##R##x##V##_01}, {mm_tile_##R##x##V##_10, mm_tile_##R##x##V##_11}, {mm_tile_##R##x##V##_20, NULL}}
#else
#define MM_FNS(R, V) {{NULL, NULL}, {NULL, NULL}, {NULL, NULL}}
#define MM_FNS7(R, V) MM_FNS(R, V)
#endif

/* tile shapes: R rows x 16V columns; `cost` weights padded work by the measured speed of the
 * shape (percent; 16-column tiles load one vector per R broadcasts and run slower; 7 x 4 keeps
 * one of its 28 accumulators on the stack) */
typedef struct {
    int R, V, cost;
    mm_tile_fn fn[3][2];   /* [A by columns / rows / columns through a table][B by offset table] */
} mm_shape;

static const mm_shape MM_SHAPES[] = {
    {6, 4, 100, MM_FNS(6, 4)}, {8, 3, 100, MM_FNS(8, 3)}, {12, 2, 101, MM_FNS(12, 2)},
    {8, 2, 102, MM_FNS(8, 2)}, {14, 1, 140, MM_FNS(14, 1)}, {7, 4, 105, MM_FNS7(7, 4)},
    {7, 3, 101, MM_FNS7(7, 3)},
};
#define MM_NSHAPES ((int)(sizeof MM_SHAPES / sizeof MM_SHAPES[0]))

/* the tile shape with the least padded work (rows and columns rounded up to whole tiles) */
static int mm_pick(int64_t rows, int64_t cols) {
    if (g_tune[TUNE_SHAPE] > 0 && g_tune[TUNE_SHAPE] <= MM_NSHAPES) return (int)g_tune[TUNE_SHAPE] - 1;
    int best = 0;
    double best_cost = 0.0;
    for (int i = 0; i < MM_NSHAPES; i++) {
        const mm_shape *s = &MM_SHAPES[i];
        double c = (double)(cdiv(rows, s->R) * s->R) * (double)(cdiv(cols, 16 * s->V) * 16 * s->V) * s->cost;
        if (s->R > rows && i > 0) c *= 1.0 + 1e-9 * s->R;   /* equal work: prefer fewer idle rows */
        if (i == 0 || c < best_cost) { best = i; best_cost = c; }
    }
    return best;
}

static int64_t mm_panel(int shape) { return 16 * MM_SHAPES[shape].V; }

/* Blocks the AVX-512 paths cut a call of `flops` into: one below 2e5 flops (waking the pool
 * costs more), one per thread below 2e7, else NN_BLOCKS_PER_THREAD per thread, so that a thread
 * slowed down (another process on its core) leaves its remaining blocks to the others. */
#ifndef NN_BLOCKS_PER_THREAD
#define NN_BLOCKS_PER_THREAD 4
#endif
static int64_t tiles_want(double flops, int64_t threads) {
    int64_t per = g_tune[TUNE_BLOCKS] > 0 ? g_tune[TUNE_BLOCKS] : NN_BLOCKS_PER_THREAD;
    return flops < 2e5 ? 1 : (flops < 2e7 ? threads : per * threads);
}

/* padded work of a shape for rows x cols (the quantity mm_pick minimises) */
static double mm_cost(int shape, int64_t rows, int64_t cols) {
    const mm_shape *s = &MM_SHAPES[shape];
    return (double)(cdiv(rows, s->R) * s->R) * (double)(cdiv(cols, 16 * s->V) * 16 * s->V) * s->cost;
}

#ifndef MM_KC
#define MM_KC 8192               /* K block (measured: blocking K below this only slows the tiles) */
#endif
#ifndef MM_KC_PANELS
#define MM_KC_PANELS 2048        /* K block when each B panel is streamed once (panels_outer) */
#endif
#ifndef MM_BLOCK_FLOATS
#define MM_BLOCK_FLOATS 131072   /* B block (KC x columns): 512 KiB, in L2 */
#endif

/* Prefetch for writing the part of C that tile (r0, j0) stores (csj == 1): inside a network the
 * arena's lines were last written in the previous call and the weights streamed since have
 * evicted them, so a tile's first store to each line would wait for memory. */
__attribute__((target("prfchw"), noinline))   /* prefetchw (mm_run is built for any x86-64) */
static void mm_prefetch_out(const mm_t *p, int64_t r0, int64_t R, int64_t j0, int64_t pw) {
    if (j0 >= p->cols) return;
    int64_t a = j0, b = imin(j0 + pw, p->cols) - 1;
    if (p->wide_w) {   /* positions of the wide columns q0 + j (see mm_segments) */
        const int64_t Wd = p->wide_w, OW = p->valid_w, qa = p->q0 + a, qb = p->q0 + b;
        a = (qa / Wd) * OW + imin(qa % Wd, OW - 1);
        b = (qb / Wd) * OW + imin(qb % Wd, OW - 1);
    }
    for (int64_t r = r0; r < imin(r0 + R, p->rows); r++) {
        const char *s = (const char *)(p->c + r * p->csr + a), *e = (const char *)(p->c + r * p->csr + b);
        for (s = (const char *)((uintptr_t)s & ~(uintptr_t)63); s <= e; s += 64) __builtin_prefetch(s, 1, 3);
    }
}

/* All tiles of p, blocked for the caches: K in blocks of ~MM_KC (the first block stores, the
 * others accumulate), columns in blocks of ~MM_BLOCK_FLOATS / KC; within a block, row tiles
 * outer (A's R x KC floats stay in L1) and column panels inner (B's block stays in L2). A
 * partial last panel of an unpadded B is first copied, zero-padded, to scratch slot 1. */
static void mm_run(const mm_t *p, int shape) {
    const mm_shape *s = &MM_SHAPES[shape];
    const int amode = p->aoff ? 2 : p->ask == 1;
    mm_tile_fn fn = s->fn[amode][p->koff != NULL];
    const int64_t pw = 16 * s->V, K = p->K;
    int64_t full = p->padded ? p->cols : p->cols / pw * pw;
    float *edge_b = NULL;
    if (full < p->cols) {
        int64_t w = p->cols - full;
        edge_b = scratch(1, (size_t)(K * pw));
        if (!edge_b) return;
        const float *src = p->b + (full / pw) * p->bsp;
        for (int64_t k = 0; k < K; k++) {
            memcpy(edge_b + k * pw, src + (p->koff ? p->koff[k] : k * p->bsk), (size_t)w * sizeof(float));
            memset(edge_b + k * pw + w, 0, (size_t)(pw - w) * sizeof(float));
        }
    }
    const int64_t kcap = g_tune[TUNE_KC] > 0 ? g_tune[TUNE_KC] : p->panels_outer ? MM_KC_PANELS : MM_KC;
    int64_t nk = imax(1, (K + kcap / 2) / kcap), kc = cdiv(K, nk);
    int64_t panels = cdiv(p->cols, pw);
    int64_t bp = imax(1, MM_BLOCK_FLOATS / (kc * pw));       /* panels per column block */
    bp = cdiv(panels, cdiv(panels, bp));                      /* equal blocks */
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
        mm_t q = *p;
        q.K = imin(kc, K - k0);
        if (p->aoff) q.aoff = p->aoff + k0;
        else q.a = p->a + k0 * p->ask;
        if (p->koff) q.koff = p->koff + k0;
        else q.b = p->b + k0 * p->bsk;
        if (k0 > 0) { q.accumulate = 1; q.bias_r = NULL; q.bias_j = NULL; }
        q.relu = p->relu && k0 + kc >= K;   /* partial sums stay as they are */
        mm_t e = q;
        if (edge_b) {             /* B(k, full + j) = edge_b[k * pw + j] */
            e.b = edge_b + k0 * pw;
            e.bsk = pw;
            e.bsp = 0;
            e.koff = NULL;
        }
        mm_tile_fn efn = s->fn[amode][0];
        if (p->panels_outer) {
            /* the next block streams in from memory while the row tiles run over this one (from
             * L1/L2): row tile i prefetches the i-th of ntiles equal parts of it. The next block
             * is the next column panel, after the last one the first panel of the next K block. */
            const int64_t ntiles = cdiv(p->rows, s->R);
            for (int64_t c = 0; c < panels; c++) {
                const float *next = NULL;
                int64_t next_k = 0;
                if (p->koff || g_tune[TUNE_PREFETCH] == 1) {
                } else if ((c + 1) * pw < full) {
                    next = q.b + (c + 1) * q.bsp;
                    next_k = q.K;
                } else if (k0 + kc < K && full > 0 && g_tune[TUNE_PREFETCH] != 3) {
                    next = p->b + (k0 + kc) * p->bsk;
                    next_k = imin(kc, K - k0 - kc);
                }
                const int64_t part = cdiv(next_k * pw * (int64_t)sizeof(float), ntiles);
                for (int64_t r0 = 0; r0 < p->rows; r0 += s->R) {
                    int64_t j0 = c * pw;
                    mm_t *t = j0 < full ? &q : &e;
                    t->pf = next ? (const char *)next + (r0 / s->R) * part : NULL;
                    t->pf_step = imin(64, cdiv(part, q.K));
                    (j0 < full ? fn : efn)(t, r0, j0);
                }
            }
            continue;
        }
        /* A by rows, rows contiguous (weights, K not blocked): in the first column block the
         * first tile of a row pass prefetches the next row tile's R rows (R floats a step),
         * which otherwise arrive as R cold streams at the start of the next pass */
        const int pf_rows = amode == 1 && p->asr == K && kc == K && !p->aoff && g_tune[TUNE_PREFETCH] != 5;
        for (int64_t c0 = 0; c0 < panels; c0 += bp) {
            int64_t c1 = imin(panels, c0 + bp);
            for (int64_t r0 = 0; r0 < p->rows; r0 += s->R)
                for (int64_t c = c0; c < c1; c++) {
                    int64_t j0 = c * pw;
                    mm_t *t = j0 < full ? &q : &e;
                    if (p->pfw && k0 == 0 && g_tune[TUNE_PREFETCH] != 8) {
                        if (c == c0) mm_prefetch_out(p, r0, s->R, j0 + pw, pw);
                        mm_prefetch_out(p, r0, s->R, j0 + 2 * pw, pw);
                    }
                    if (pf_rows && c == 0 && r0 + s->R < p->rows) {
                        t->pf = (const char *)(p->a + (r0 + s->R) * p->asr);
                        t->pf_step = s->R * (int64_t)sizeof(float);
                    } else {
                        t->pf = NULL;
                    }
                    (j0 < full ? fn : efn)(t, r0, j0);
                }
        }
    }
}

#ifdef NN_HAVE_AVX512
/* mm_pack_panels for sxk == 1 (rows contiguous along k): 16 x 16 blocks transposed in registers */
NN_AVX512 static void mm_pack_panels_t(const float *x, int64_t sxi, int64_t rows, int64_t K, int64_t pw,
                                       float *dst) {
    for (int64_t i0 = 0; i0 < rows; i0 += 16) {
        const int64_t ni = imin(16, rows - i0);
        float *d = dst + (i0 / pw) * K * pw + i0 % pw;
        for (int64_t k0 = 0; k0 < K; k0 += 16) {
            const int64_t nk = imin(16, K - k0);
            const __mmask16 mk = nk >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nk) - 1u);
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < ni ? _mm512_maskz_loadu_ps(mk, x + (i0 + i) * sxi + k0) : _mm512_setzero_ps();
            tr16x16(r);
            for (int k = 0; k < nk; k++) _mm512_storeu_ps(d + (k0 + k) * pw, r[k]);
        }
    }
}
#endif

/* pack X (rows x K, element (i, k) at x[i * sxi + k * sxk]) into panels of pw rows:
 * dst[(i / pw) * K * pw + k * pw + i % pw], zero-padded to whole panels */
NN_CLONES
static void mm_pack_panels(const float *x, int64_t sxi, int64_t sxk, int64_t rows, int64_t K, int64_t pw,
                           float *dst) {
#ifdef NN_HAVE_AVX512
    if (sxk == 1 && pw % 16 == 0 && native_on()) {
        mm_pack_panels_t(x, sxi, rows, K, pw, dst);
        for (int64_t i = rows; i < cdiv(rows, pw) * pw; i++)   /* zero rows of the last panel */
            for (int64_t k = 0; k < K; k++) dst[(i / pw) * K * pw + k * pw + i % pw] = 0.0f;
        return;
    }
#endif
    for (int64_t i0 = 0; i0 < rows; i0 += pw) {
        int64_t n = imin(pw, rows - i0);
        float *d = dst + (i0 / pw) * K * pw;
        for (int64_t k = 0; k < K; k++) {
            float *dk = d + k * pw;
            const float *xk = x + k * sxk + i0 * sxi;
            for (int64_t i = 0; i < n; i++) dk[i] = xk[i * sxi];
            for (int64_t i = n; i < pw; i++) dk[i] = 0.0f;
        }
    }
}

#ifdef NN_HAVE_AVX512
/* C (M x N) = A B^T + beta C with both operands K-contiguous (A[m * lda + k], B[n * ldb + k]) and
 * few rows M (a dense layer at batch 1..3): dot products, 16 k per instruction, 8 rows of B at a
 * time (each B row is read once per row of A; this is memory-bound on B) */
NN_AVX512 static void mm_gemv_nt(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                                 int64_t ldb, float beta, float *C, int64_t ldc) {
    const int64_t K16 = K / 16 * 16;
    const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1u);
    for (int64_t m = 0; m < M; m++) {
        const float *a = A + m * lda;
        float *c = C + m * ldc;
        for (int64_t n0 = 0; n0 < N; n0 += 8) {
            int64_t nr = imin(8, N - n0);
            const float *b[8];
            for (int r = 0; r < 8; r++) b[r] = B + (n0 + imin(r, nr - 1)) * ldb;
            __m512 acc[8];
            for (int r = 0; r < 8; r++) acc[r] = _mm512_setzero_ps();
            for (int64_t k = 0; k < K16; k += 16) {
                __m512 av = _mm512_loadu_ps(a + k);
                for (int r = 0; r < 8; r++) acc[r] = _mm512_fmadd_ps(av, _mm512_loadu_ps(b[r] + k), acc[r]);
            }
            if (K16 < K) {
                __m512 av = _mm512_maskz_loadu_ps(tail, a + K16);
                for (int r = 0; r < 8; r++) acc[r] = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(tail, b[r] + K16), acc[r]);
            }
            for (int r = 0; r < nr; r++) {
                float v = _mm512_reduce_add_ps(acc[r]);
                c[n0 + r] = beta == 0.0f ? v : v + beta * c[n0 + r];
            }
        }
    }
}
#endif

/* C = op(A) op(B) + beta C on the tiles (row-major, as gemm_rm). The vector operand must have
 * unit stride along its columns: op(B) when tb == 0 (columns of C), else op(A)^T when ta == 1
 * (rows of C, stored transposed); otherwise the smaller of the two is packed into panels
 * first (scratch slot 5). */
static void native_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                        const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (beta != 0.0f && beta != 1.0f) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] *= beta;
        beta = 1.0f;
    }
#ifdef NN_HAVE_AVX512
    if (M <= 3 && !ta && tb && K >= 16) {
        mm_gemv_nt(M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#endif
    mm_t p;
    memset(&p, 0, sizeof p);
    p.K = K;
    p.accumulate = beta != 0.0f;
    /* op(A)(m, k) = A[m * lda + k] or A[k * lda + m]; op(B)(k, n) = B[k * ldb + n] or B[n * ldb + k] */
    int vec_n = !tb || (ta == 0 && N <= M);   /* vector along C's columns (n) */
    if (vec_n) {
        int shape = mm_pick(M, N);
        int64_t pw = mm_panel(shape);
        if (!tb) {
            p.b = B; p.bsk = ldb; p.bsp = pw;
        } else {
            float *pk = scratch(5, (size_t)(cdiv(N, pw) * pw * K));
            if (!pk) return;
            mm_pack_panels(B, ldb, 1, N, K, pw, pk);
            p.b = pk; p.bsk = pw; p.bsp = K * pw; p.padded = 1;
        }
        p.a = A;
        if (ta) { p.ask = lda; p.asr = 1; } else { p.ask = 1; p.asr = lda; }
        p.c = C; p.csr = ldc; p.csj = 1;
        p.rows = M; p.cols = N;
        mm_run(&p, shape);
    } else {
        int shape = mm_pick(N, M);
        int64_t pw = mm_panel(shape);
        if (ta) {
            p.b = A; p.bsk = lda; p.bsp = pw;
        } else {
            float *pk = scratch(5, (size_t)(cdiv(M, pw) * pw * K));
            if (!pk) return;
            mm_pack_panels(A, lda, 1, M, K, pw, pk);
            p.b = pk; p.bsk = pw; p.bsp = K * pw; p.padded = 1;
        }
        p.a = B;   /* broadcast op(B)(k, n) for r = n */
        if (tb) { p.ask = 1; p.asr = ldb; } else { p.ask = ldb; p.asr = 1; }
        p.c = C; p.csr = 1; p.csj = ldc;
        p.rows = N; p.cols = M;
        mm_run(&p, shape);
    }
}

static void gemm_rm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        return;
    }
    if (native_on()) {
        native_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (g_sgemm == NULL || M * N * K <= g_small_gemm || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX ||
        lda > INT32_MAX || ldb > INT32_MAX || ldc > INT32_MAX) {
        gemm_small(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* row-major C = op(A) op(B)  <=>  column-major C^T = op(B)^T op(A)^T */
    if (g_blas_threads_local) g_blas_threads_local(1);
    int m = (int)N, n = (int)M, k = (int)K, la = (int)ldb, lb = (int)lda, lc = (int)ldc;
    float one = 1.0f;
    g_sgemm(tb ? "T" : "N", ta ? "T" : "N", &m, &n, &k, &one, B, &la, A, &lb, &beta, C, &lc);
}

/* Block sizes for splitting `outer` independent (M x N x K) products over the pool: at most
 * `nb_cap` columns per block (cache), then enough blocks (N first, then M) for every thread
 * when the work is large enough to pay for waking the pool. nb is a multiple of 16 if split. */
static void split2(int64_t M, int64_t N, int64_t K, int64_t outer, int64_t nb_cap, int64_t *mb, int64_t *nb) {
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)M * (double)N * (double)K * (double)outer;
    int64_t want = flops < 2e5 ? 1 : (flops < 2e7 ? threads : 2 * threads);
    *mb = M;
    *nb = N;
    if (nb_cap > 0 && N > nb_cap) *nb = imax(16, (nb_cap / 16) * 16);
    int64_t have = outer * cdiv(N, *nb);
    if (have >= want) return;
    int64_t pn = imin(cdiv(want, outer), imax(1, N / 32));
    if (pn > 1) *nb = imin(*nb, cdiv(cdiv(N, pn), 16) * 16);
    have = outer * cdiv(N, *nb);
    if (have >= want) return;
    int64_t pm = imin(cdiv(want, have), imax(1, M / 16));
    if (pm > 1) *mb = cdiv(M, pm);
}

/* Descriptor of symjit_nn_gemm (int64):
 *   [0] batch  [1] M  [2] N  [3] K  [4] ta  [5] tb
 *   [6] batch stride of A  [7] of B  [8] of C (elements; 0 = shared operand)
 *   [9] bias mode: 0 none, 1 bias[n] per column, 2 bias[m] per row
 * Tasks are output blocks (batch, rows, columns) sized by split2 at call time.
 * C is contiguous (ldc = N); lda = ta ? M : K, ldb = tb ? K : N. */
typedef struct {
    const int64_t *d;
    const float *A, *B, *bias;
    float *C;
    symjit_kernel_fn epi;
    void **epi_args;
    int64_t mb, nb;
} gemm_job;

static void run_epilogue_rows(symjit_kernel_fn epi, void **args, int64_t base, int64_t rows, int64_t ld,
                              int64_t cols) {
    if (!epi) return;
    if (cols == ld) {
        epi(base, base + rows * cols, args);
        return;
    }
    for (int64_t r = 0; r < rows; r++) epi(base + r * ld, base + r * ld + cols, args);
}

static void gemm_task(int64_t begin, int64_t end, void **argv) {
    gemm_job *job = (gemm_job *)argv[0];
    const int64_t *d = job->d;
    int64_t M = d[1], N = d[2], K = d[3], ta = d[4], tb = d[5], mb = job->mb, nb = job->nb;
    int64_t tm = cdiv(M, mb), tn = cdiv(N, nb);
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / (tm * tn), r = t % (tm * tn);
        int64_t m0 = (r / tn) * mb, n0 = (r % tn) * nb;
        int64_t mc = imin(mb, M - m0), nc = imin(nb, N - n0);
        const float *A = job->A + b * d[6] + (ta ? m0 : m0 * lda);
        const float *B = job->B + b * d[7] + (tb ? n0 * ldb : n0);
        float *C = job->C + b * d[8] + m0 * N + n0;
        float beta = 0.0f;
        if (d[9] == 1) {
            for (int64_t i = 0; i < mc; i++) memcpy(C + i * N, job->bias + n0, (size_t)nc * sizeof(float));
            beta = 1.0f;
        } else if (d[9] == 2) {
            for (int64_t i = 0; i < mc; i++)
                for (int64_t j = 0; j < nc; j++) C[i * N + j] = job->bias[m0 + i];
            beta = 1.0f;
        }
        gemm_rm((int)ta, (int)tb, mc, nc, K, A, lda, B, ldb, beta, C, N);
        run_epilogue_rows(job->epi, job->epi_args, b * d[8] + m0 * N + n0, mc, N, nc);
    }
}

/* AVX-512 path of symjit_nn_gemm. The tile problem per batch item: rows x cols with the vector
 * operand along the cols --
 *   tb == 0:            cols = n (B's rows are contiguous along n), rows = m;
 *   ta == 1, tb == 1:   cols = m (A's rows are contiguous along m), rows = n, stored transposed;
 *   ta == 0, tb == 1:   (dense layers) the smaller of A and B is packed into panels first, in a
 *                       parallel phase (once per call, not per block), then as above.
 * The bias goes to the tiles' stores (no prefill pass); tasks are blocks of whole row tiles and
 * column panels; the epilogue runs on each finished block of C. */
typedef struct {
    const int64_t *d;
    const float *A, *B, *bias;
    float *C;
    symjit_kernel_fn epi;
    void **epi_args;
    int vec_m;          /* cols = m (transposed stores) */
    int shape;
    float *packed;      /* packed operand (batch x panels), or NULL */
    int64_t pstride;    /* floats per batch item in `packed` */
    int64_t rb, cb;     /* rows / cols per block */
} ngemm_job;

#define NGEMM_PACK_K 128   /* k per packing task */
static void ngemm_pack_task(int64_t begin, int64_t end, void **argv) {
    ngemm_job *job = (ngemm_job *)argv[0];
    const int64_t *d = job->d;
    const int64_t M = d[1], N = d[2], K = d[3], PW = mm_panel(job->shape);
    const int64_t np = job->vec_m ? cdiv(M, PW) : cdiv(N, PW), nk = cdiv(K, NGEMM_PACK_K);
    for (int64_t t = begin; t < end; t++) {   /* t = (batch item, panel, k chunk) */
        int64_t kc = t % nk, q = (t / nk) % np, b = t / (nk * np);
        int64_t k0 = kc * NGEMM_PACK_K, kn = imin(NGEMM_PACK_K, K - k0);
        const float *src = job->vec_m ? job->A + b * d[6] : job->B + b * d[7];
        int64_t rows = job->vec_m ? M : N;
        mm_pack_panels(src + q * PW * K + k0, K, 1, imin(PW, rows - q * PW), kn, PW,
                       job->packed + b * job->pstride + q * K * PW + k0 * PW);
    }
}

static void ngemm_task(int64_t begin, int64_t end, void **argv) {
    ngemm_job *job = (ngemm_job *)argv[0];
    const int64_t *d = job->d;
    const int64_t M = d[1], N = d[2], K = d[3], ta = d[4], tb = d[5];
    const int64_t lda = ta ? M : K, ldb = tb ? K : N;
    const int64_t rows = job->vec_m ? N : M, cols = job->vec_m ? M : N;
    const int64_t tr = cdiv(rows, job->rb), tc = cdiv(cols, job->cb), PW = mm_panel(job->shape);
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / (tr * tc), r = t % (tr * tc);
        int64_t r0 = (r / tc) * job->rb, c0 = (r % tc) * job->cb;
        int64_t rc = imin(job->rb, rows - r0), cc = imin(job->cb, cols - c0);
        const float *A = job->A + b * d[6], *B = job->B + b * d[7];
        float *C = job->C + b * d[8];
        mm_t p;
        memset(&p, 0, sizeof p);
        p.K = K;
        p.rows = rc;
        p.cols = cc;
        if (!job->vec_m) {   /* rows m, cols n: C(m, n) row-major */
            if (job->packed) {   /* B^T packed: panels of n */
                p.b = job->packed + b * job->pstride + (c0 / PW) * K * PW;
                p.bsk = PW; p.bsp = K * PW; p.padded = 1;
            } else {
                p.b = B + c0; p.bsk = ldb; p.bsp = PW;
            }
            p.a = A + (ta ? r0 : r0 * lda);
            if (ta) { p.ask = lda; p.asr = 1; } else { p.ask = 1; p.asr = lda; }
            p.c = C + r0 * N + c0; p.csr = N; p.csj = 1;
            if (d[9] == 1) p.bias_j = job->bias + c0;
            else if (d[9] == 2) p.bias_r = job->bias + r0;
        } else {             /* rows n, cols m: C(m, n) stored transposed */
            if (job->packed) {   /* A^T packed: panels of m */
                p.b = job->packed + b * job->pstride + (c0 / PW) * K * PW;
                p.bsk = PW; p.bsp = K * PW; p.padded = 1;
            } else {             /* ta == 1: A stored K x M */
                p.b = A + c0; p.bsk = lda; p.bsp = PW;
            }
            p.a = B + (tb ? r0 * ldb : r0);
            if (tb) { p.ask = 1; p.asr = ldb; } else { p.ask = ldb; p.asr = 1; }
            p.c = C + c0 * N + r0; p.csr = 1; p.csj = N;
            if (d[9] == 1) p.bias_r = job->bias + r0;
            else if (d[9] == 2) p.bias_j = job->bias + c0;
        }
        p.relu = epi_is_relu(job->epi);
        mm_run(&p, job->shape);
        if (job->epi && !p.relu) {
            int64_t m0 = job->vec_m ? c0 : r0, mc = job->vec_m ? cc : rc;
            int64_t n0 = job->vec_m ? r0 : c0, nc = job->vec_m ? rc : cc;
            run_epilogue_rows(job->epi, job->epi_args, b * d[8] + m0 * N + n0, mc, N, nc);
        }
    }
}

/* returns 0 when the geometry is left to the general path */
static int ngemm(const int64_t *d, const float *A, const float *B, const float *bias, float *C,
                 symjit_kernel_fn epi, void **epi_args) {
    const int64_t batch = d[0], M = d[1], N = d[2], K = d[3], ta = d[4], tb = d[5];
    if (K <= 0 || (d[8] != M * N && batch > 1) || (M <= 3 && !ta && tb)) return 0;   /* gemv: gemm_task */
    ngemm_job job;
    memset(&job, 0, sizeof job);
    job.d = d; job.A = A; job.B = B; job.bias = bias; job.C = C; job.epi = epi; job.epi_args = epi_args;
    int pack = 0;
    if (!tb) job.vec_m = 0;
    else if (ta) job.vec_m = 1;
    else { job.vec_m = M <= N; pack = 1; }
    const int64_t rows = job.vec_m ? N : M, cols = job.vec_m ? M : N;
    job.shape = mm_pick(rows, cols);
    const int64_t PW = mm_panel(job.shape), R = MM_SHAPES[job.shape].R;
    void *argv[1] = {&job};
    if (pack) {
        const int64_t np = cdiv(cols, PW);
        job.pstride = np * PW * K;
        job.packed = scratch(5, (size_t)(batch * job.pstride));
        if (!job.packed) return 1;
        symjit_parallel_for(ngemm_pack_task, batch * np * cdiv(K, NGEMM_PACK_K), imax(1, 8192 / (PW * NGEMM_PACK_K)), argv);
    }
    /* blocks: rows split first (whole tiles; each block reads its own part of the broadcast
     * operand), then column panels, until the pool has enough blocks */
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)batch * (double)M * (double)N * (double)K;
    int64_t want = tiles_want(flops, threads);
    int64_t tr = 1, tc = 1;
    if (batch < want) tr = imin(cdiv(want, batch), cdiv(rows, R));
    job.rb = cdiv(cdiv(rows, tr), R) * R;
    tr = cdiv(rows, job.rb);
    if (batch * tr < want) tc = imin(cdiv(want, batch * tr), cdiv(cols, PW));
    job.cb = cdiv(cdiv(cols, tc), PW) * PW;
    tc = cdiv(cols, job.cb);
    symjit_parallel_for(ngemm_task, batch * tr * tc, 1, argv);
    return 1;
}

NN_API void symjit_nn_gemm(const int64_t *d, const float *A, const float *B, const float *bias, float *C,
                           symjit_kernel_fn epi, void **epi_args) {
    gemm_job job = {d, A, B, bias, C, epi, epi_args, 0, 0};
    if (d[0] <= 0 || d[1] <= 0 || d[2] <= 0) return;
    if (native_on() && d[1] * d[2] * d[3] > g_small_gemm && ngemm(d, A, B, bias, C, epi, epi_args)) return;
    split2(d[1], d[2], d[3], d[0], 0, &job.mb, &job.nb);
    void *argv[1] = {&job};
    int64_t tasks = d[0] * cdiv(d[1], job.mb) * cdiv(d[2], job.nb);
    symjit_parallel_for(gemm_task, tasks, 1, argv);
}

/* ---------------------------------------------------------------------------------------- */
/* Convolution geometry                                                                      */
/* ---------------------------------------------------------------------------------------- */

/* Descriptor of the convolution family (int64), always 3 spatial dims:
 *   [0] N  [1] C (data channels)  [2] G  [3] F (filters)
 *   [4..6] input D H W   [7..9] kernel   [10..12] output D H W
 *   [13..15] stride  [16..18] dilate  [19..21] pad
 *   [22] mode (conv forward: 0 im2col+GEMM, 1 depthwise direct, 2 Winograd F(2x2,3x3))
 * Forward convolution: x (N, C, in), w (F, C/G, k), y (N, F, out).
 * y[n,f,o] = sum_{c in group(f), k} x[n, c, o*s + k*d - p] * w[f, c, k]   (zero outside x). */
typedef struct {
    int64_t N, C, G, F, Cg, Fg;
    int64_t in[3], k[3], out[3], s[3], dl[3], p[3];
    int64_t KK, P, IP;
} geo_t;

static geo_t geo_of(const int64_t *d) {
    geo_t g;
    g.N = d[0]; g.C = d[1]; g.G = d[2]; g.F = d[3];
    g.Cg = g.C / g.G; g.Fg = g.F / g.G;
    for (int i = 0; i < 3; i++) {
        g.in[i] = d[4 + i]; g.k[i] = d[7 + i]; g.out[i] = d[10 + i];
        g.s[i] = d[13 + i]; g.dl[i] = d[16 + i]; g.p[i] = d[19 + i];
    }
    g.KK = g.k[0] * g.k[1] * g.k[2];
    g.P = g.out[0] * g.out[1] * g.out[2];
    g.IP = g.in[0] * g.in[1] * g.in[2];
    return g;
}

/* cols[(c*KK + kidx), j] = x_c[o(p0 + j) * s + k * d - p] for channels [c0, c1), columns [p0, p1) */
NN_CLONES
static void im2col(const geo_t *g, const float *x, int64_t c0, int64_t c1, int64_t p0, int64_t p1, float *cols) {
    const int64_t pb = p1 - p0;
    const int64_t OH = g->out[1], OW = g->out[2], D = g->in[0], H = g->in[1], W = g->in[2];
    float *dst = cols;
    for (int64_t c = c0; c < c1; c++) {
        const float *xc = x + c * g->IP;
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    int64_t p = p0, od = p0 / (OH * OW), oh = (p0 / OW) % OH, ow = p0 % OW;
                    const int64_t off = kw * g->dl[2] - g->p[2], sw = g->s[2];
                    float *row = dst;
                    while (p < p1) {
                        int64_t cnt = imin(OW - ow, p1 - p);
                        int64_t id = od * g->s[0] - g->p[0] + kd * g->dl[0];
                        int64_t ih = oh * g->s[1] - g->p[1] + kh * g->dl[1];
                        if (id < 0 || id >= D || ih < 0 || ih >= H) {
                            memset(row, 0, (size_t)cnt * sizeof(float));
                        } else {
                            const float *src = xc + (id * H + ih) * W;
                            /* valid ow range: 0 <= ow*sw + off < W */
                            int64_t lo = off >= 0 ? 0 : cdiv(-off, sw);
                            int64_t hi = W - off <= 0 ? 0 : cdiv(W - off, sw);
                            int64_t a = imin(imax(lo - ow, 0), cnt), b = imin(imax(hi - ow, 0), cnt);
                            if (b < a) b = a;
                            for (int64_t t = 0; t < a; t++) row[t] = 0.0f;
                            if (sw == 1) {
                                memcpy(row + a, src + ow + a + off, (size_t)(b - a) * sizeof(float));
                            } else {
                                for (int64_t t = a; t < b; t++) row[t] = src[(ow + t) * sw + off];
                            }
                            for (int64_t t = b; t < cnt; t++) row[t] = 0.0f;
                        }
                        row += cnt;
                        p += cnt;
                        ow = 0;
                        if (++oh == OH) { oh = 0; od++; }
                    }
                    dst += pb;
                }
    }
}

/* The adjoint of im2col: dx_c[o(p)*s + k*d - p] += cols[(c*KK + kidx), p] for all columns. */
NN_CLONES
static void col2im(const geo_t *g, const float *cols, int64_t c0, int64_t c1, float *dx) {
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2], D = g->in[0], H = g->in[1], W = g->in[2];
    const float *src = cols;
    for (int64_t c = c0; c < c1; c++) {
        float *xc = dx + c * g->IP;
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    const int64_t off = kw * g->dl[2] - g->p[2], sw = g->s[2];
                    int64_t lo = off >= 0 ? 0 : cdiv(-off, sw);
                    int64_t hi = W - off <= 0 ? 0 : cdiv(W - off, sw);
                    lo = imin(lo, OW);
                    hi = imin(imax(hi, lo), OW);
                    for (int64_t od = 0; od < OD; od++) {
                        int64_t id = od * g->s[0] - g->p[0] + kd * g->dl[0];
                        for (int64_t oh = 0; oh < OH; oh++) {
                            int64_t ih = oh * g->s[1] - g->p[1] + kh * g->dl[1];
                            const float *r = src + (od * OH + oh) * OW;
                            if (id < 0 || id >= D || ih < 0 || ih >= H) continue;
                            float *dr = xc + (id * H + ih) * W + off;
                            for (int64_t ow = lo; ow < hi; ow++) dr[ow * sw] += r[ow];
                        }
                    }
                    src += g->P;
                }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Convolution forward                                                                       */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    const int64_t *d;
    geo_t g;
    const float *x, *w, *bias;
    float *y;
    symjit_kernel_fn epi;
    void **epi_args;
    int64_t mb, pb;   /* row (filter or channel) block and column block */
    int shape;        /* AVX-512 tile shape (conv_native) */
    int64_t serial;   /* distinguishes calls for the per-thread im2col cache */
    const float *wp;  /* weights packed by symjit_nn_conv_pack (F-vector orientation), or NULL */
    float *xp;        /* implicit GEMM: zero-padded input, planes of Hp x Wp (+ slack) */
    int64_t Hp, Wp;
    const int64_t *koff;
    int64_t phase_used;   /* bit a * sw + b: some tap reads phase plane (a, b) */
    int fv_how;           /* conv_fvec: FV_INPUT, FV_IM2COL or FV_PLANES */
} conv_job;

static int is_pointwise(const geo_t *g) {
    for (int i = 0; i < 3; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->p[i] != 0 || g->out[i] != g->in[i]) return 0;
    return 1;
}

/* one task: image n, group gi, filter block [m0, m0+mb), column block [p0, p0+pb) */
static void conv_gemm_task(int64_t begin, int64_t end, void **argv) {
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    int64_t pb = job->pb, mb = job->mb;
    int64_t tp = cdiv(g->P, pb), tm = cdiv(g->Fg, mb);
    int64_t Kd = g->Cg * g->KK;
    int pw = is_pointwise(g);
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / (g->G * tm * tp), r = t % (g->G * tm * tp);
        int64_t gi = r / (tm * tp);
        r %= tm * tp;
        int64_t m0 = (r / tp) * mb, p0 = (r % tp) * pb;
        int64_t mc = imin(mb, g->Fg - m0), pc = imin(pb, g->P - p0);
        const float *xg = job->x + (n * g->C + gi * g->Cg) * g->IP;
        const float *B;
        int64_t ldb;
        if (pw) {
            B = xg + p0;
            ldb = g->P;
        } else {
            float *cols = scratch(0, (size_t)(Kd * pc));
            if (!cols) return;
            im2col(g, xg, 0, g->Cg, p0, p0 + pc, cols);
            B = cols;
            ldb = pc;
        }
        int64_t f0 = gi * g->Fg + m0;
        float *Y = job->y + (n * g->F + f0) * g->P + p0;
        float beta = 0.0f;
        if (job->bias) {
            for (int64_t i = 0; i < mc; i++)
                for (int64_t j = 0; j < pc; j++) Y[i * g->P + j] = job->bias[f0 + i];
            beta = 1.0f;
        }
        gemm_rm(0, 0, mc, pc, Kd, job->w + f0 * Kd, Kd, B, ldb, beta, Y, g->P);
        run_epilogue_rows(job->epi, job->epi_args, (n * g->F + f0) * g->P + p0, mc, g->P, pc);
    }
}

/* AVX-512 path: one task = image n, group gi, column block [p0, p0 + pb), filter block
 * [m0, m0 + mb); the tiles read the weights' rows directly (broadcast operand) and the im2col
 * block (or, for 1x1 stride-1 convolutions, the input itself) as the vector operand, add the
 * bias as they store, and the epilogue runs on the block. Tasks are ordered with the filter
 * block fastest, and a thread keeps its last im2col block (per-thread cache keyed by call and
 * block), so splitting the filters of one column block does not repeat its im2col. */
static _Atomic int64_t g_call_serial;
static __thread int64_t t_cols_serial = -1, t_cols_tag = -1;
static __thread const float *t_cols_ptr;

static void conv_native_task(int64_t begin, int64_t end, void **argv) {
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    const int64_t pb = job->pb, mb = job->mb;
    const int64_t tp = cdiv(g->P, pb), tm = cdiv(g->Fg, mb);
    const int64_t Kd = g->Cg * g->KK;
    const int pw = is_pointwise(g);
    for (int64_t t = begin; t < end; t++) {
        int64_t mi = t % tm, rest = t / tm;
        int64_t pi = rest % tp;
        rest /= tp;
        int64_t gi = rest % g->G, n = rest / g->G;
        int64_t m0 = mi * mb, p0 = pi * pb;
        int64_t mc = imin(mb, g->Fg - m0), pc = imin(pb, g->P - p0);
        const float *xg = job->x + (n * g->C + gi * g->Cg) * g->IP;
        mm_t p;
        memset(&p, 0, sizeof p);
        p.K = Kd;
        if (pw) {
            p.b = xg + p0;
            p.bsk = g->P;
            p.bsp = mm_panel(job->shape);
        } else {
            float *cols = scratch(0, (size_t)(Kd * pc));
            if (!cols) return;
            int64_t tag = (n * g->G + gi) * tp + pi;
            if (t_cols_serial != job->serial || t_cols_tag != tag || t_cols_ptr != cols) {
                im2col(g, xg, 0, g->Cg, p0, p0 + pc, cols);
                t_cols_serial = job->serial;
                t_cols_tag = tag;
                t_cols_ptr = cols;
            }
            p.b = cols;
            p.bsk = pc;
            p.bsp = mm_panel(job->shape);
        }
        int64_t f0 = gi * g->Fg + m0;
        p.a = job->w + f0 * Kd;
        p.ask = 1;
        p.asr = Kd;
        p.c = job->y + (n * g->F + f0) * g->P + p0;
        p.csr = g->P;
        p.csj = 1;
        p.pfw = 1;
        p.bias_r = job->bias ? job->bias + f0 : NULL;
        p.rows = mc;
        p.cols = pc;
        p.relu = epi_is_relu(job->epi);
        mm_run(&p, job->shape);
        if (!p.relu) run_epilogue_rows(job->epi, job->epi_args, (n * g->F + f0) * g->P + p0, mc, g->P, pc);
    }
}

/* Blocks of conv_native: im2col blocks of ~CONV_COLUMN_FLOATS (whole panels), then, while the
 * pool has fewer blocks than it wants, more column blocks (each at least two panels wide),
 * then filter blocks (whole row tiles). */
static void conv_native(conv_job *job) {
    const geo_t *g = &job->g;
    const int64_t Kd = g->Cg * g->KK, outer = g->N * g->G;
    job->shape = mm_pick(g->Fg, g->P);
    const int64_t W = mm_panel(job->shape), R = MM_SHAPES[job->shape].R;
    const int64_t panels = cdiv(g->P, W);
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)outer * (double)g->Fg * (double)g->P * (double)Kd;
    int64_t want = tiles_want(flops, threads);
    int64_t per = is_pointwise(g) ? panels : imax(1, CONV_COLUMN_FLOATS / imax(Kd * W, 1));
    int64_t tp = cdiv(panels, imin(per, panels));
    if (outer * tp < want) tp = imax(tp, imin(cdiv(want, outer), imax(1, panels / 2)));
    job->pb = cdiv(panels, tp) * W;
    tp = cdiv(g->P, job->pb);
    int64_t tm = 1;
    if (outer * tp < want) tm = imin(cdiv(want, outer * tp), cdiv(g->Fg, R));
    job->mb = cdiv(cdiv(g->Fg, tm), R) * R;
    tm = cdiv(g->Fg, job->mb);
    job->serial = atomic_fetch_add(&g_call_serial, 1) + 1;
    void *argv[1] = {job};
    symjit_parallel_for(conv_native_task, outer * tp * tm, 1, argv);
}

/* F-vector orientation (AVX-512 path) for convolutions with few output positions (the 7x7 and
 * 14x14 maps of a 224x224 network at batch 1): the tiles run along the filters (F a multiple of
 * 16: no padded lanes) and broadcast the positions, so P = 49 costs 49 rows instead of 64 padded
 * columns. The vector operand is the weights transposed into panels of PW filters,
 * wp[gi][f / PW][k][f % PW] (zero-padded), packed once by symjit_nn_conv_pack when the weights are
 * constant; the broadcast operand is the im2col matrix (or the input itself for 1x1 stride 1).
 * Chosen when its padded work is at most 92% of the usual orientation's (the transposed stores
 * cost a little), 75% where it needs an im2col that the implicit GEMM avoids. Returns the tile
 * shape, or -1. */
static int implicit_ok(const geo_t *g);

static void pad_phase_rows(const geo_t *g, const float *x, int64_t a, int64_t b, int64_t i0, int64_t nrows,
                           int64_t Wq, float *d, int interior_only, float fill);
#ifdef NN_HAVE_AVX512
NN_AVX512 static void pad_phase_rows_pair(const geo_t *g, const float *x, int64_t a, int64_t i0, int64_t nrows,
                                          int64_t Wq, float *d0, float *d1);
#endif

/* how conv_fvec reads the positions (the broadcast operand) */
enum { FV_INPUT = 0, FV_IM2COL = 1, FV_PLANES = 2 };

static int conv_fvec_how(const geo_t *g) {
    if (is_pointwise(g)) return FV_INPUT;
    if (implicit_ok(g) && g->out[2] % 7 == 0 && g->s[1] * g->s[2] <= 16) return FV_PLANES;
    return FV_IM2COL;
}

static int conv_fvec_shape(const geo_t *g) {
    if (!cpu_has_avx512() || g->Fg < 16) return -1;
    int64_t cols_n = g->P;
    if (implicit_ok(g))
        cols_n = g->out[1] * (g->out[2] + (g->k[2] - 1) * g->dl[2] / g->s[2]);
    int sn = mm_pick(g->Fg, cols_n), sf;
    int how = conv_fvec_how(g);
    double margin = 0.92;   /* the transposed stores cost a little */
    if (how == FV_PLANES) {   /* row tiles of 7 positions = whole output rows (7 | OW) */
        sf = mm_cost(5, g->P, g->Fg) <= mm_cost(6, g->P, g->Fg) ? 5 : 6;
        if (g_tune[TUNE_SHAPE] == 6 || g_tune[TUNE_SHAPE] == 7) sf = (int)g_tune[TUNE_SHAPE] - 1;
    } else {
        sf = mm_pick(g->P, g->Fg);
        if (how == FV_IM2COL) margin = 0.75;   /* it pays an im2col the other avoids */
    }
    if (g_tune[TUNE_CONV] == 5) margin = 10.0;
    return mm_cost(sf, g->P, g->Fg) <= margin * mm_cost(sn, g->Fg, cols_n) ? sf : -1;
}

static int64_t conv_fvec_group_floats(const geo_t *g, int shape) {
    return cdiv(g->Fg, mm_panel(shape)) * mm_panel(shape) * g->Cg * g->KK;
}

static void conv_fvec_task(int64_t begin, int64_t end, void **argv) {
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    const int64_t mb = job->mb, tm = cdiv(g->Fg, mb), Kd = g->Cg * g->KK, PW = mm_panel(job->shape);
    const int64_t pb = job->pb, tp = cdiv(g->P, pb);   /* position blocks (whole row tiles / rows) */
    for (int64_t t = begin; t < end; t++) {
        /* position blocks innermost: the pool hands consecutive tasks to different threads, so
         * the tasks of one filter block run side by side and its weights stream from memory
         * once (filter blocks innermost read each again after all the others) */
        int64_t pi = t % tp, mi = (t / tp) % tm, ng = t / (tm * tp);
        if (g_tune[TUNE_CONV] == 8) { mi = t % tm; pi = (t / tm) % tp; }
        const int64_t gi = ng % g->G, n = ng / g->G;
        int64_t m0 = mi * mb, mc = imin(mb, g->Fg - m0), f0 = gi * g->Fg + m0;
        int64_t p0 = pi * pb, pc = imin(pb, g->P - p0);
        const float *xg = job->x + (n * g->C + gi * g->Cg) * g->IP;
        mm_t p;
        memset(&p, 0, sizeof p);
        p.K = Kd;
        if (job->fv_how == FV_INPUT) {
            p.a = xg + p0;
            p.ask = g->P;
        } else if (job->fv_how == FV_PLANES) {
            /* the image's padded phase planes; A(k, r) = planes[aoff[k] + pos(r)] */
            const int64_t sh = g->s[1], sw = g->s[2], Hq = job->Hp, Wq = job->Wp;
            const size_t np = (size_t)(g->Cg * sh * sw * Hq * Wq), slack = (size_t)(Wq + 64);
            float *planes = scratch(0, np + slack);
            if (!planes) return;
            if (t_cols_serial != job->serial || t_cols_tag != ng || t_cols_ptr != planes) {
                for (int64_t c = 0; c < g->Cg; c++)
                    for (int64_t a = 0; a < sh; a++) {
                        float *dst = planes + (c * sh + a) * sw * Hq * Wq;
                        if (a == 0 && c + 1 < g->Cg)
                            prefetch_plane_rows(xg + (c + 1) * g->IP, g->in[1], g->in[2], 0, g->in[1]);
#ifdef NN_HAVE_AVX512
                        if (sw == 2 && ((job->phase_used >> (a * 2)) & 3) == 3) {
                            pad_phase_rows_pair(g, xg + c * g->IP, a, 0, Hq, Wq, dst, dst + Hq * Wq);
                            continue;
                        }
#endif
                        for (int64_t b = 0; b < sw; b++)
                            if ((job->phase_used >> (a * sw + b)) & 1)
                                pad_phase_rows(g, xg + c * g->IP, a, b, 0, Hq, Wq, dst + b * Hq * Wq, 0, 0.0f);
                    }
                for (size_t i = np; i < np + slack; i++) planes[i] = 0.0f;
                t_cols_serial = job->serial;
                t_cols_tag = ng;
                t_cols_ptr = planes;
            }
            p.a = planes + (p0 / g->out[2]) * Wq;   /* p0: whole output rows */
            p.aoff = job->koff;
            p.a_pitch = Wq;
            p.valid_w = g->out[2];
        } else {
            float *cols = scratch(0, (size_t)(Kd * g->P));
            if (!cols) return;
            if (t_cols_serial != job->serial || t_cols_tag != ng || t_cols_ptr != cols) {
                im2col(g, xg, 0, g->Cg, 0, g->P, cols);
                t_cols_serial = job->serial;
                t_cols_tag = ng;
                t_cols_ptr = cols;
            }
            p.a = cols + p0;
            p.ask = g->P;
        }
        p.asr = 1;
        p.b = job->wp + gi * conv_fvec_group_floats(g, job->shape) + (m0 / PW) * Kd * PW;
        p.bsk = PW;
        p.bsp = Kd * PW;
        p.padded = 1;
        p.panels_outer = 1;
        p.c = job->y + (n * g->F + f0) * g->P + p0;
        p.csr = 1;
        p.csj = g->P;
        p.bias_j = job->bias ? job->bias + f0 : NULL;
        p.rows = pc;
        p.cols = mc;
        p.relu = epi_is_relu(job->epi);
        mm_run(&p, job->shape);
        if (!p.relu) run_epilogue_rows(job->epi, job->epi_args, (n * g->F + f0) * g->P + p0, mc, g->P, pc);
    }
}

static void conv_fvec(conv_job *job, int shape) {
    const geo_t *g = &job->g;
    const int64_t outer = g->N * g->G, PW = mm_panel(shape);
    job->shape = shape;
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)outer * (double)g->Fg * (double)g->P * (double)(g->Cg * g->KK);
    int64_t want = tiles_want(flops, threads);
    /* blocks: filter panels first (each block reads its part of the packed weights once),
     * then positions (whole output rows for the phase planes, whole row tiles otherwise) */
    int64_t panels = cdiv(g->Fg, PW), tm = outer >= want ? 1 : imin(cdiv(want, outer), panels);
    job->mb = cdiv(panels, tm) * PW;
    tm = cdiv(g->Fg, job->mb);
    const int64_t unit = conv_fvec_how(g) == FV_PLANES ? g->out[2] : MM_SHAPES[shape].R;
    const int64_t units = cdiv(g->P, unit);
    int64_t tp = outer * tm >= want ? 1 : imin(cdiv(want, outer * tm), units);
    job->pb = cdiv(units, tp) * unit;
    job->fv_how = conv_fvec_how(g);
    if (job->fv_how == FV_PLANES) {   /* phase planes of whole images and the table of A */
        const int64_t KH = g->k[1], KW = g->k[2], dh = g->dl[1], dw = g->dl[2], sh = g->s[1], sw = g->s[2];
        const int64_t Kd = g->Cg * g->KK;
        job->Hp = g->out[1] + (KH - 1) * dh / sh;
        job->Wp = g->out[2] + (KW - 1) * dw / sw;
        int64_t *aoff = (int64_t *)scratch(7, (size_t)(2 * Kd));
        if (!aoff) return;
        job->phase_used = 0;
        for (int64_t c = 0; c < g->Cg; c++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    int64_t a = kh * dh % sh, b = kw * dw % sw;
                    aoff[(c * KH + kh) * KW + kw] = (((c * sh + a) * sw + b) * job->Hp + kh * dh / sh) * job->Wp + kw * dw / sw;
                    job->phase_used |= (int64_t)1 << (a * sw + b);
                }
        job->koff = aoff;
    }
    job->serial = atomic_fetch_add(&g_call_serial, 1) + 1;
    void *argv[1] = {job};
    symjit_parallel_for(conv_fvec_task, outer * tm * cdiv(g->P, job->pb), 1, argv);
}

/* Size in floats of the packed weights the AVX-512 path wants for this (forward, im2col-method)
 * convolution, 0 if none; with `out`, also packs w (F, C/G, k) into it. Called when the weights
 * are constant at compile time (lower_conv), so a call pays no packing. */
static int wnat_ok(const geo_t *g);
static int64_t wnat_pack_floats(const geo_t *g);
static void wino_weights(const float *w, int64_t F, int64_t C, int64_t f0, int64_t f1, float *U);

NN_API int64_t symjit_nn_conv_pack(const int64_t *d, const float *w, float *out) {
    geo_t g = geo_of(d);
    if (d[22] == 2) {   /* Winograd: U = G g G^T, [16][F][C] */
        int64_t n = cpu_has_avx512() ? wnat_pack_floats(&g) : 0;
        if (n > 0 && out) wino_weights(w, g.F, g.C, 0, g.F, out);
        return n;
    }
    if (d[22] != 0) return 0;
    int shape = conv_fvec_shape(&g);
    if (shape < 0) return 0;
    const int64_t PW = mm_panel(shape), Kd = g.Cg * g.KK, per = conv_fvec_group_floats(&g, shape);
    if (out) {
        for (int64_t gi = 0; gi < g.G; gi++)
            mm_pack_panels(w + gi * g.Fg * Kd, Kd, 1, g.Fg, Kd, PW, out + gi * per);
    }
    return g.G * per;
}

/* Implicit GEMM for 2-D convolutions (AVX-512 path). With stride s = (sh, sw), the zero-padded
 * input is split once into sh x sw phase planes of Hq x Wq, plane (a, b) of channel c holding
 * padded-input pixel (i sh + a, j sw + b) at (i, j); tap (kh, kw) of the kernel reads phase
 * (kh dh % sh, kw dw % sw) shifted by (kh dh / sh, kw dw / sw). The output is computed Wq
 * columns wide (q = oh Wq + ow; columns ow >= OW are discarded as they are stored), so row
 * k = (c, kh, kw) of the GEMM's B is one phase plane shifted by a constant: no im2col, the tiles
 * read the planes through an offset table. Hq = OH + (KH-1) dh / sh, Wq = OW + (KW-1) dw / sw;
 * phases no tap reads (e.g. 1x1 stride 2) are not filled. One task = image n, group gi, a block
 * of q, a block of filters. */
static int implicit_ok(const geo_t *g) {
    return g->in[0] == 1 && g->k[0] == 1 && g->out[0] == 1 && !is_pointwise(g);
}

/* phase plane (a, b) (Hq x Wq) of one zero-padded input plane x (see conv_implicit); with
 * `interior_only` the zero border is assumed in place already (same geometry, same buffer) */
#ifdef NN_HAVE_AVX512
NN_AVX512 static void copy_stride2_avx512(const float *s, int64_t n, float *d);
#endif

NN_CLONES
static void pad_phase_rows(const geo_t *g, const float *x, int64_t a, int64_t b, int64_t i0, int64_t nrows,
                           int64_t Wq, float *d, int interior_only, float fill) {
    const int64_t H = g->in[1], W = g->in[2], ph = g->p[1], pw = g->p[2], sh = g->s[1], sw = g->s[2];
    /* columns j with 0 <= j sw + b - pw < W: [lo, hi) */
    const int64_t lo = imin(pw > b ? cdiv(pw - b, sw) : 0, Wq);
    const int64_t hi = imin(imax(W + pw - b > 0 ? cdiv(W + pw - b, sw) : 0, lo), Wq);
    for (int64_t i = i0; i < i0 + nrows; i++) {
        float *restrict row = d + (i - i0) * Wq;
        int64_t ih = i * sh + a - ph;
        if (ih < 0 || ih >= H) {
            if (!interior_only)
                for (int64_t j = 0; j < Wq; j++) row[j] = fill;
            continue;
        }
        const float *restrict src = x + ih * W + lo * sw + b - pw;
        if (!interior_only)
            for (int64_t j = 0; j < lo; j++) row[j] = fill;
        if (sw == 1) {
            for (int64_t j = lo; j < hi; j++) row[j] = src[j - lo];
#ifdef NN_HAVE_AVX512
        } else if (sw == 2 && native_on()) {
            copy_stride2_avx512(src, hi - lo, row + lo);
#endif
        } else {
            for (int64_t j = lo; j < hi; j++) row[j] = src[(j - lo) * sw];
        }
        if (!interior_only)
            for (int64_t j = hi; j < Wq; j++) row[j] = fill;
    }
}

#ifdef NN_HAVE_AVX512
/* pad_phase_rows for both column phases b = 0, 1 of a column stride of 2 (into d0, d1), reading
 * each input row once: input column c goes to phase (c + pw) % 2 at (c + pw) / 2, so the even
 * and the odd columns of a 32-column chunk (two permutes) are one masked store each. Zero fill. */
NN_AVX512 static void pad_phase_rows_pair(const geo_t *g, const float *x, int64_t a, int64_t i0, int64_t nrows,
                                          int64_t Wq, float *d0, float *d1) {
    const int64_t H = g->in[1], W = g->in[2], ph = g->p[1], pw = g->p[2], sh = g->s[1];
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    float *de = (pw % 2 == 0) ? d0 : d1, *dodd = (pw % 2 == 0) ? d1 : d0;
    const int64_t oe = pw / 2, oo = (pw + 1) / 2;   /* j = c0 / 2 + lane + offset */
    for (int64_t i = i0; i < i0 + nrows; i++) {
        float *re = de + (i - i0) * Wq, *ro = dodd + (i - i0) * Wq;
        for (int64_t j = 0; j < Wq; j++) re[j] = 0.0f;
        for (int64_t j = 0; j < Wq; j++) ro[j] = 0.0f;
        int64_t ih = i * sh + a - ph;
        if (ih < 0 || ih >= H) continue;
        const float *src = x + ih * W;
        for (int64_t c0 = 0; c0 < W; c0 += 32) {
            int64_t left = W - c0;
            __mmask16 m0 = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
            __mmask16 m1 = left >= 32 ? (__mmask16)0xFFFF : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1u);
            __m512 v0 = _mm512_maskz_loadu_ps(m0, src + c0), v1 = _mm512_maskz_loadu_ps(m1, src + c0 + 16);
            /* lanes l: even column c0 + 2l valid if < W, odd c0 + 2l + 1; destination j < Wq */
            int64_t ne = imin(16, (left + 1) / 2), no = imin(16, left / 2);
            int64_t je = c0 / 2 + oe, jo = c0 / 2 + oo;
            ne = imax(0, imin(ne, Wq - je));
            no = imax(0, imin(no, Wq - jo));
            if (ne > 0) _mm512_mask_storeu_ps(re + je, (__mmask16)((1u << ne) - 1u), _mm512_permutex2var_ps(v0, even, v1));
            if (no > 0) _mm512_mask_storeu_ps(ro + jo, (__mmask16)((1u << no) - 1u), _mm512_permutex2var_ps(v0, odd, v1));
        }
    }
}
#endif

static void pad_phase_plane_fill(const geo_t *g, const float *x, int64_t a, int64_t b, int64_t Hq, int64_t Wq,
                                 float *d, int interior_only, float fill) {
    pad_phase_rows(g, x, a, b, 0, Hq, Wq, d, interior_only, fill);
}

static void pad_phase_plane(const geo_t *g, const float *x, int64_t a, int64_t b, int64_t Hq, int64_t Wq,
                            float *d, int interior_only) {
    pad_phase_plane_fill(g, x, a, b, Hq, Wq, d, interior_only, 0.0f);
}

/* Bit a sw + b set for each stride phase (a, b) some tap of the kernel reads. */
static int64_t phases_used(const geo_t *g) {
    int64_t used = 0;
    for (int64_t kh = 0; kh < g->k[1]; kh++)
        for (int64_t kw = 0; kw < g->k[2]; kw++)
            used |= (int64_t)1 << ((kh * g->dl[1] % g->s[1]) * g->s[2] + kw * g->dl[2] % g->s[2]);
    return used;
}

/* The table of B's rows for block planes of job->Hp x job->Wp (scratch slot 7): row
 * k = (c, kh, kw) is phase plane (kh dh % sh, kw dw % sw) of channel c shifted by
 * (kh dh / sh, kw dw / sw). NULL when out of memory. */
static const int64_t *implicit_tap_offsets(const conv_job *job) {
    const geo_t *g = &job->g;
    const int64_t KH = g->k[1], KW = g->k[2], dh = g->dl[1], dw = g->dl[2], sh = g->s[1], sw = g->s[2];
    int64_t *koff = (int64_t *)scratch(7, (size_t)(2 * g->Cg * g->KK));
    if (!koff) return NULL;
    for (int64_t c = 0; c < g->Cg; c++)
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++) {
                int64_t a = kh * dh % sh, b = kw * dw % sw;
                koff[(c * KH + kh) * KW + kw] = (((c * sh + a) * sw + b) * job->Hp + kh * dh / sh) * job->Wp + kw * dw / sw;
            }
    return koff;
}

/* This thread's buffer of a block's phase planes (scratch slot 6), its slack after them zeroed
 * (the wide rows' last panel reads past the planes), or NULL. */
static float *implicit_planes_buffer(const conv_job *job) {
    const geo_t *g = &job->g;
    const size_t planes = (size_t)(g->Cg * g->s[1] * g->s[2] * job->Hp * job->Wp);
    const size_t slack = (size_t)(mm_panel(job->shape) + job->Wp + g->k[2] * g->dl[2] + 16);
    float *buf = scratch(6, planes + slack);
    if (buf) memset(buf + planes, 0, slack * sizeof(float));
    return buf;
}

/* Rows [oh0, oh0 + job->Hp) of the phase planes of image n, group gi's channels, into buf
 * (channel c, phase (a, b) at buf + ((c sh + a) sw + b) Hp Wp); the next channel's input rows
 * are prefetched while one is copied. */
static void implicit_block_planes(const conv_job *job, int64_t n, int64_t gi, int64_t oh0, float *buf) {
    const geo_t *g = &job->g;
    const int64_t sh = g->s[1], sw = g->s[2], RBH = job->Hp, Wq = job->Wp;
    const int64_t ih0 = oh0 * sh - g->p[1], ih1 = (oh0 + RBH) * sh - g->p[1];   /* rows read */
    for (int64_t c = 0; c < g->Cg; c++)
        for (int64_t a = 0; a < sh; a++) {
            const float *xc = job->x + (n * g->C + gi * g->Cg + c) * g->IP;
            if (a == 0 && c + 1 < g->Cg) prefetch_plane_rows(xc + g->IP, g->in[1], g->in[2], ih0, ih1);
            float *dst = buf + (c * sh + a) * sw * RBH * Wq;
#ifdef NN_HAVE_AVX512
            if (sw == 2 && ((job->phase_used >> (a * 2)) & 3) == 3) {
                pad_phase_rows_pair(g, xc, a, oh0, RBH, Wq, dst, dst + RBH * Wq);
                continue;
            }
#endif
            for (int64_t b = 0; b < sw; b++)
                if ((job->phase_used >> (a * sw + b)) & 1)
                    pad_phase_rows(g, xc, a, b, oh0, RBH, Wq, dst + b * RBH * Wq, 0, 0.0f);
        }
}

/* The implicit GEMM of filters [f0, f0 + mc) over a block's phase planes (buf): every field
 * but where C goes (c, csr, q0), its columns and the prefetch choices. */
static mm_t implicit_tiles(const conv_job *job, const float *buf, int64_t f0, int64_t mc) {
    const geo_t *g = &job->g;
    mm_t p;
    memset(&p, 0, sizeof p);
    p.K = g->Cg * g->KK;
    p.b = buf;
    p.koff = job->koff;
    p.bsp = mm_panel(job->shape);
    p.padded = 1;
    p.a = job->w + f0 * p.K;
    p.ask = 1;
    p.asr = p.K;
    p.csj = 1;
    p.wide_w = job->Wp;
    p.valid_w = g->out[2];
    p.bias_r = job->bias ? job->bias + f0 : NULL;
    p.rows = mc;
    return p;
}

static void conv_implicit_task(int64_t begin, int64_t end, void **argv) {
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    const int64_t RB = job->pb, mb = job->mb, Wq = job->Wp, OH = g->out[1], OW = g->out[2];
    const int64_t tp = cdiv(OH, RB), tm = cdiv(g->Fg, mb);
    float *buf = implicit_planes_buffer(job);
    if (!buf) return;
    for (int64_t t = begin; t < end; t++) {
        int64_t mi = t % tm, rest = t / tm;
        int64_t pi = rest % tp;
        rest /= tp;
        int64_t gi = rest % g->G, n = rest / g->G;
        int64_t m0 = mi * mb, oh0 = pi * RB, rb = imin(RB, OH - oh0);
        int64_t mc = imin(mb, g->Fg - m0);
        int64_t f0 = gi * g->Fg + m0;
        int64_t tag = t / tm;
        if (t_cols_serial != job->serial || t_cols_tag != tag || t_cols_ptr != buf) {
            implicit_block_planes(job, n, gi, oh0, buf);
            t_cols_serial = job->serial;
            t_cols_tag = tag;
            t_cols_ptr = buf;
        }
        mm_t p = implicit_tiles(job, buf, f0, mc);
        p.c = job->y + (n * g->F + f0) * g->P;
        p.csr = g->P;
        p.pfw = 1;
        p.q0 = oh0 * Wq;
        p.cols = rb * Wq;
        p.relu = epi_is_relu(job->epi);
        mm_run(&p, job->shape);
        if (!p.relu)
            run_epilogue_rows(job->epi, job->epi_args, (n * g->F + f0) * g->P + oh0 * OW, mc, g->P, rb * OW);
    }
}

static int conv_implicit(conv_job *job) {
    const geo_t *g = &job->g;
    const int64_t KH = g->k[1], KW = g->k[2], dh = g->dl[1], dw = g->dl[2], sh = g->s[1], sw = g->s[2];
    const int64_t OH = g->out[1], OW = g->out[2];
    const int64_t halo = (KH - 1) * dh / sh, Wq = OW + (KW - 1) * dw / sw;
    const int64_t Kd = g->Cg * g->KK, outer = g->N * g->G, S = sh * sw;
    if (Wq < 6 || S > 16) return 0;   /* a vector's 16 positions span at most 4 output rows (mm_segments) */
    job->phase_used = phases_used(g);
    int64_t used = __builtin_popcountll((unsigned long long)job->phase_used);
    job->shape = mm_pick(g->Fg, OH * Wq);
    const int64_t R = MM_SHAPES[job->shape].R;
    /* output rows per block: the block's phase-plane rows (channels x phases x (rows + halo) x Wq)
     * within ~2 x CONV_COLUMN_FLOATS (L2), then enough blocks for the pool */
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)outer * (double)g->Fg * (double)(OH * Wq) * (double)Kd;
    int64_t want = tiles_want(flops, threads);
    int64_t rb = imax(1, 2 * CONV_COLUMN_FLOATS / imax(g->Cg * used * Wq, 1) - halo);
    int64_t tp = cdiv(OH, imin(rb, OH));
    /* more row blocks only while each keeps two panels of columns; then filter blocks */
    const int64_t rb_min = cdiv(2 * mm_panel(job->shape), Wq);
    if (outer * tp < want) tp = imax(tp, imin(cdiv(want, outer), imax(1, OH / rb_min)));
    job->pb = cdiv(OH, tp);   /* rows per block */
    tp = cdiv(OH, job->pb);
    job->Hp = job->pb + halo;
    job->Wp = Wq;
    int64_t tm = 1;
    if (outer * tp < want) tm = imin(cdiv(want, outer * tp), cdiv(g->Fg, R));
    job->mb = cdiv(cdiv(g->Fg, tm), R) * R;
    tm = cdiv(g->Fg, job->mb);
    job->koff = implicit_tap_offsets(job);
    if (!job->koff) return 0;
    job->serial = atomic_fetch_add(&g_call_serial, 1) + 1;
    void *argv[1] = {job};
    symjit_parallel_for(conv_implicit_task, outer * tp * tm, 1, argv);
    return 1;
}

/* Depthwise (2-D) over the input's phase planes (as conv_implicit, per plane): the output is
 * computed Wq columns wide, so each tap is one shifted copy of a phase plane and the plane's
 * whole output is a few long vectorised multiply-adds (rows of 7 or 14 columns vectorise
 * poorly on their own); the valid columns are then copied out. One task per output plane. */
#ifdef NN_HAVE_AVX512
/* one depthwise output plane from its padded phase planes: output row oh, columns [ow, ow + 16)
 * accumulate the KK taps (tap t reads src + toff[t] + oh * Wq + ow) in registers, four vectors
 * at a time, and store masked at the row's end */

/* Output vectors i0 .. i0+7 of a plane (row-major, `per_row` 16-lane vectors per output row of
 * OW columns; the input rows `Wq` floats apart): where each reads (`base`) and writes (`dst`),
 * the lanes inside the row (`m`). Returns how many of the eight exist (the rest repeat the
 * last, so loops may run all eight). */
NN_AVX512 static inline int64_t plane_vector_group(const float *src, float *y, int64_t OW, int64_t Wq,
                                                   int64_t per_row, int64_t total, int64_t i0,
                                                   const float **base, float **dst, __mmask16 *m) {
    const int64_t cnt = imin(8, total - i0);
    for (int u = 0; u < 8; u++) {
        int64_t i = i0 + imin(u, cnt - 1), oh = i / per_row, v = i - oh * per_row;
        int64_t left = OW - 16 * v;
        base[u] = src + oh * Wq + 16 * v;
        dst[u] = y + oh * OW + 16 * v;
        m[u] = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
    }
    return cnt;
}

NN_AVX512 static void dw_plane_avx512(const float *src, const int64_t *toff, const float *wt, int64_t KK, float b0,
                                      int64_t OH, int64_t OW, int64_t Wq, float *y) {
    /* the plane's output vectors (row oh, columns [16 v, 16 v + 16)), eight at a time: eight
     * independent accumulator chains over the taps keep both FMA pipes busy (reads past a
     * row's end land in the slack) */
    const int64_t per_row = cdiv(OW, 16), total = OH * per_row;
    for (int64_t i0 = 0; i0 < total; i0 += 8) {
        const float *base[8];
        float *dst[8];
        __mmask16 m[8];
        const int64_t cnt = plane_vector_group(src, y, OW, Wq, per_row, total, i0, base, dst, m);
        __m512 a[8];
        for (int u = 0; u < 8; u++) a[u] = _mm512_set1_ps(b0);
        for (int64_t t = 0; t < KK; t++) {
            __m512 w1 = _mm512_set1_ps(wt[t]);
            const int64_t o = toff[t];
            for (int u = 0; u < 8; u++) a[u] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(base[u] + o), a[u]);
        }
        for (int u = 0; u < 8; u++)
            if (u < cnt) _mm512_mask_storeu_ps(dst[u], m[u], a[u]);
    }
}

/* one depthwise output plane straight from the input plane x (H x W), no padded copy, for
 * column strides 1 and 2: eight output rows at a time share one column vector v0 (so the column
 * masks of the KW taps, which clip the padding at the row ends, are shared), rows outside the
 * input read a zero row. Stride 2: tap kw reads the 32 columns from 2 v0 + kw dw - pw and keeps
 * the even ones (one permute). */
/* Column masks of dw_plane_direct_avx512 for output vectors [vc, vc + nvc) (nvc <= 16):
 * cm[v - vc][kw][half] = lanes whose input column is inside the row. They depend on the
 * geometry only, so a task computes them once for all its planes. */
typedef __mmask16 dw_masks_t[16][16][2];
static void dw_column_masks(int64_t W, int64_t KW, int64_t sw, int64_t dw, int64_t pw, int64_t OW, int64_t vc,
                            int64_t nvc, dw_masks_t cm) {
    const int64_t nkw = imin(KW, 16);
    for (int64_t v = vc; v < vc + nvc; v++)
        for (int64_t kw = 0; kw < nkw; kw++)
            for (int h = 0; h < 2; h++) {
                uint32_t m = 0;
                for (int l = 0; l < 16; l++) {
                    int64_t col = 16 * v * sw + kw * dw - pw + 16 * h + l;
                    int64_t o = sw == 2 ? (16 * h + l) / 2 : (h ? 16 : l);
                    if (col >= 0 && col < W && 16 * v + o < OW) m |= 1u << l;
                }
                cm[v - vc][kw][h] = (__mmask16)m;
            }
}

/* `masks`: dw_column_masks for vectors [0, 16) when the plane has at most 16 output vectors
 * (computed by the caller once per task), else NULL (computed here per chunk of 16). */
NN_AVX512 static void dw_plane_direct_avx512(const float *x, int64_t H, int64_t W, const float *wt, int64_t KH,
                                             int64_t KW, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t ph,
                                             int64_t pw, float b0, int64_t OH, int64_t OW, const float *zero, float *y,
                                             dw_masks_t masks) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const int64_t nkw = imin(KW, 16), nv = cdiv(OW, 16);
    /* the loops go row group by row group so the rows a group reads stay in L1 across its vectors */
    dw_masks_t local;
    for (int64_t vc = 0; vc < nv; vc += 16) {   /* chunks of up to 16 vectors per row */
    const int64_t nvc = imin(16, nv - vc);
    __mmask16 (*cm_s)[16][2] = masks;
    if (masks == NULL || nv > 16) {
        dw_column_masks(W, KW, sw, dw, pw, OW, vc, nvc, local);
        cm_s = local;
    }
    for (int64_t oh0 = 0; oh0 < OH; oh0 += 8) {
        const int64_t cnt = imin(8, OH - oh0);
        for (int64_t v = vc; v < vc + nvc; v++) {
            const int64_t v0 = 16 * v, left = OW - v0;
            const __mmask16 sm = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
            __m512 a[8];
            for (int u = 0; u < 8; u++) a[u] = _mm512_set1_ps(b0);
            for (int64_t kh = 0; kh < KH; kh++) {
                const float *row[8];
                for (int u = 0; u < 8; u++) {
                    int64_t ih = (oh0 + imin(u, cnt - 1)) * sh + kh * dh - ph;
                    row[u] = ih >= 0 && ih < H ? x + ih * W : zero;
                }
                for (int64_t kw = 0; kw < nkw; kw++) {
                    const __m512 w1 = _mm512_set1_ps(wt[kh * KW + kw]);
                    const int64_t o = v0 * sw + kw * dw - pw;
                    const __mmask16 m0 = cm_s[v - vc][kw][0];
                    if (sw == 1) {
                        for (int u = 0; u < 8; u++) a[u] = _mm512_fmadd_ps(w1, _mm512_maskz_loadu_ps(m0, row[u] + o), a[u]);
                    } else {
                        const __mmask16 m1 = cm_s[v - vc][kw][1];
                        for (int u = 0; u < 8; u++) {
                            __m512 lo = _mm512_maskz_loadu_ps(m0, row[u] + o);
                            __m512 hi = _mm512_maskz_loadu_ps(m1, row[u] + o + 16);
                            a[u] = _mm512_fmadd_ps(w1, _mm512_permutex2var_ps(lo, even, hi), a[u]);
                        }
                    }
                }
            }
            for (int u = 0; u < 8; u++)
                if (u < cnt) _mm512_mask_storeu_ps(y + (oh0 + u) * OW + v0, sm, a[u]);
        }
    }
    }
}

/* the lanes j < n of a 16-lane mask (n <= 0: none, n >= 16: all) */
static inline __mmask16 lanes_below(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* permute indices: lane j from lane j + off of (a, b) concatenated, for off in [-16, 16] */
NN_AVX512 static inline __m512i lanes_from(int off) {
    int32_t lanes[16];
    for (int j = 0; j < 16; j++) lanes[j] = (int32_t)(j + off < 0 ? j + off + 32 : j + off);
    return _mm512_loadu_si512(lanes);
}

/* One 3x3 depthwise output plane with dilation 1 and stride S = 1 or 2 in both directions
 * (S = 1 runs dw3x3_s1_plane instead, unless TUNE_CONV 13),
 * straight from the input plane x (H x W), eight output rows at a time. Each of the input rows
 * the group reads (10 for S = 1, 17 for S = 2) is loaded once per output vector, zero outside
 * the row (rows outside the plane read `zrow`), and the three taps' columns are built from it
 * in registers; every output row of the group that uses the row (kh = i - S u) takes its taps
 * from them. S = 1: the vector and its left and right neighbours, each shift one two-source
 * permute. S = 2: the 32 columns from 2 v0 split into even and odd ones (taps 0 and 1 away),
 * taps at -1 / -2 / +2 one more permute with the 16 columns before or after. Per output vector:
 * 9 FMAs and (S = 1) 3.75 loads + 2.5 permutes or (S = 2) about 6.4 loads + 6.4 permutes, where
 * loading each tap's columns separately costs 9 (S = 1) or 18 loads + 9 permutes (S = 2). All
 * loop bounds are compile-time constants, so accumulators and taps stay in registers.
 * `relu`: store relu of the results (the fused ReLU epilogue).
 * Prefetch: a group reads its rows column vector by column vector, ten to seventeen row streams
 * plus eight output rows, more than the hardware prefetchers follow, and in a whole network the
 * input plane was written long enough before to have left the caches; so at each vector the
 * group prefetches the same columns of the 8 S rows the next group adds (into L1). Measured on
 * mobilenet1.0 (benchmarks/bench_weight_prefetch.py --what depthwise): 112x112 / 56x56 layers
 * with a cold cache 0.5-0.6x the time, whole network 0.92-0.98x.
 * Preconditions: pw <= 2; `zrow` points 16 floats into at least W + 48 zero floats. */
NN_AVX512 static inline __attribute__((always_inline)) void dw3x3_rows_core(
    const float *x, int64_t H, int64_t W, const float *wt, int64_t ph, int64_t pw, float b0, int64_t OH,
    int64_t OW, const float *zrow, float *y, const int relu, const int S) {
    const int ROWS = 8 * S + 3 - S;   /* input rows per group of eight output rows */
    /* tap kw reads input column S c + d of output column c, d = kw - pw in [-2, 2]; its lanes
     * come from (first, second) = S = 1: (left, cur) for d < 0, (cur, right) for d > 0;
     * S = 2: (left, odd / even) for d < 0, (even, right) for d = 2 */
    __m512i idx[3];
    for (int kw = 0; kw < 3; kw++) {
        const int d = (int)(kw - pw);
        idx[kw] = S == 1 ? (d < 0 ? lanes_from(d + 16) : lanes_from(d))
                         : (d < 0 ? lanes_from(-1) : lanes_from(1));
        if (S == 2 && d < 0) {   /* lane 0 from the block before: its column 2 v0 + d */
            int32_t lanes[16];
            _mm512_storeu_si512(lanes, idx[kw]);
            lanes[0] = 16 + 16 + d;
            idx[kw] = _mm512_loadu_si512(lanes);
        }
    }
    int32_t ev[16], od[16];   /* S = 2: the even and the odd columns of 32 */
    for (int j = 0; j < 16; j++) {
        ev[j] = 2 * j;
        od[j] = 2 * j + 1;
    }
    const __m512i evens = _mm512_loadu_si512(ev), odds = _mm512_loadu_si512(od);
    const int need_left = pw > 0, need_right = S == 1 ? 2 - pw > 0 : 2 - pw >= 2;
    __m512 w[9];
    for (int k = 0; k < 9; k++) w[k] = _mm512_set1_ps(wt[k]);
    const int64_t nv = cdiv(OW, 16);
    const int prefetch = g_tune[TUNE_PREFETCH] != 2, prefetch_out = g_tune[TUNE_PREFETCH] != 7;
    for (int64_t oh0 = 0; oh0 < OH; oh0 += 8) {
        const int64_t cnt = imin(8, OH - oh0), r0 = S * oh0 - ph;   /* input rows r0 .. r0 + ROWS - 1 */
        for (int64_t v = 0; v < nv; v++) {
            const int64_t c0 = 16 * S * v;   /* input column of output column 16 v at d = 0 */
            const __mmask16 m_left = lanes_below(W - c0 + 16), m0 = lanes_below(W - c0),
                            m1 = lanes_below(W - c0 - 16), m_right = lanes_below(W - c0 - 16 * S);
            if (prefetch) {   /* the rows the next group adds, at this vector's columns */
                _Pragma("GCC unroll 16")
                for (int i = 0; i < 8 * S; i++) {
                    const int64_t r = r0 + ROWS + i;
                    if (r < H) _mm_prefetch((const char *)(x + r * W + c0), _MM_HINT_T0);
                    if (r < H && S == 2) _mm_prefetch((const char *)(x + r * W + c0 + 16), _MM_HINT_T0);
                }
            }
            if (prefetch_out) {   /* for writing, the rows the next group stores */
                _Pragma("GCC unroll 8")
                for (int u = 0; u < 8; u++)
                    if (oh0 + 8 + u < OH) __builtin_prefetch(y + (oh0 + 8 + u) * OW + 16 * v, 1, 3);
            }
            __m512 a[8];
            _Pragma("GCC unroll 8")
            for (int u = 0; u < 8; u++) a[u] = _mm512_set1_ps(b0);
            _Pragma("GCC unroll 17")
            for (int i = 0; i < ROWS; i++) {
                const int64_t r = r0 + i;
                const float *row = (r >= 0 && r < H ? x + r * W : zrow) + c0;
                const __m512 left = need_left && c0 > 0 ? _mm512_maskz_loadu_ps(m_left, row - 16) : _mm512_setzero_ps();
                const __m512 right = need_right ? _mm512_maskz_loadu_ps(m_right, row + 16 * S) : _mm512_setzero_ps();
                const __m512 x0 = _mm512_maskz_loadu_ps(m0, row);
                __m512 cur = x0, odd_cols = x0;
                if (S == 2) {
                    const __m512 x1 = _mm512_maskz_loadu_ps(m1, row + 16);
                    cur = _mm512_permutex2var_ps(x0, evens, x1);
                    odd_cols = _mm512_permutex2var_ps(x0, odds, x1);
                }
                __m512 t[3];
                _Pragma("GCC unroll 3")
                for (int kw = 0; kw < 3; kw++) {
                    const int64_t d = kw - pw;
                    if (S == 1)
                        t[kw] = d == 0 ? cur : d < 0 ? _mm512_permutex2var_ps(left, idx[kw], cur)
                                                     : _mm512_permutex2var_ps(cur, idx[kw], right);
                    else
                        t[kw] = d == 0 ? cur : d == 1 ? odd_cols
                              : d < 0 ? _mm512_permutex2var_ps(d == -1 ? odd_cols : cur, idx[kw], left)
                                      : _mm512_permutex2var_ps(cur, idx[kw], right);
                }
                _Pragma("GCC unroll 3")
                for (int kh = 0; kh < 3; kh++) {
                    if ((i - kh) % S != 0) continue;
                    const int u = (i - kh) / S;
                    if (u < 0 || u >= 8) continue;
                    a[u] = _mm512_fmadd_ps(w[3 * kh], t[0], a[u]);
                    a[u] = _mm512_fmadd_ps(w[3 * kh + 1], t[1], a[u]);
                    a[u] = _mm512_fmadd_ps(w[3 * kh + 2], t[2], a[u]);
                }
            }
            const __mmask16 sm = lanes_below(OW - 16 * v);
            _Pragma("GCC unroll 8")
            for (int u = 0; u < 8; u++)
                if (u < cnt) _mm512_mask_storeu_ps(y + (oh0 + u) * OW + 16 * v, sm, relu ? relu_ps(a[u]) : a[u]);
        }
    }
}

/* One 3x3 depthwise output plane with stride 1 and dilation 1 (padding ph rows, pw <= 2
 * columns), straight from the input plane x (H x W): DW_S1_ROWS output rows at a time, column
 * vector by column vector. Each input row the group reads is loaded once per vector as its
 * three taps' columns (three unaligned loads, masked to the row: the padding reads zero), and
 * each feeds the up to three output rows that use it, so an output vector costs 9 FMAs and
 * (ROWS + 2) x 3 / ROWS loads in independent accumulator chains. Measured against the
 * permute-based row kernel (dw3x3_rows_core, S = 1) in a C loop over 8 planes, cycles per
 * output vector: 14x14 7.1 vs 16.5, 28x28 7.1 vs 13.4, 56x56 7.9 vs 10.1, 112x112 8.0 vs 8.7
 * (that kernel's permutes and spills cost more than the loads they save). Prefetch as the row
 * kernel: at each vector, the next group's input rows (into L1) and for writing its output rows.
 * `relu`: store relu of the results. */
#define DW_S1_ROWS 6
NN_AVX512 static void dw3x3_s1_plane(const float *x, int64_t H, int64_t W, const float *wt, int64_t ph,
                                     int64_t pw, float b0, int64_t OH, int64_t OW, float *y, int relu) {
    __m512 w[9];
    for (int k = 0; k < 9; k++) w[k] = _mm512_set1_ps(wt[k]);
    const int64_t nv = cdiv(OW, 16);
    const int prefetch = g_tune[TUNE_PREFETCH] != 2, prefetch_out = g_tune[TUNE_PREFETCH] != 7;
    for (int64_t oh0 = 0; oh0 < OH; oh0 += DW_S1_ROWS) {
        const int64_t cnt = imin(DW_S1_ROWS, OH - oh0), r0 = oh0 - ph;   /* input rows r0 .. r0 + ROWS + 1 */
        for (int64_t v = 0; v < nv; v++) {
            const int64_t c0 = 16 * v;
            __mmask16 m[3];   /* tap kw reads input columns c0 + j + kw - pw, j < 16 */
            for (int kw = 0; kw < 3; kw++) {
                const int64_t d = c0 + kw - pw;
                m[kw] = (__mmask16)(lanes_below(W - d) & ~lanes_below(-d));
            }
            if (prefetch) {
                _Pragma("GCC unroll 6")
                for (int i = 0; i < DW_S1_ROWS; i++) {
                    const int64_t r = r0 + DW_S1_ROWS + 2 + i;
                    if (r >= 0 && r < H) _mm_prefetch((const char *)(x + r * W + c0), _MM_HINT_T0);
                }
            }
            if (prefetch_out) {
                _Pragma("GCC unroll 6")
                for (int u = 0; u < DW_S1_ROWS; u++)
                    if (oh0 + DW_S1_ROWS + u < OH) __builtin_prefetch(y + (oh0 + DW_S1_ROWS + u) * OW + c0, 1, 3);
            }
            __m512 a[DW_S1_ROWS];
            _Pragma("GCC unroll 6")
            for (int u = 0; u < DW_S1_ROWS; u++) a[u] = _mm512_set1_ps(b0);
            _Pragma("GCC unroll 8")
            for (int i = 0; i < DW_S1_ROWS + 2; i++) {
                const int64_t r = r0 + i;
                if (r < 0 || r >= H) continue;
                const float *row = x + r * W + c0 - pw;
                const __m512 t0 = _mm512_maskz_loadu_ps(m[0], row);
                const __m512 t1 = _mm512_maskz_loadu_ps(m[1], row + 1);
                const __m512 t2 = _mm512_maskz_loadu_ps(m[2], row + 2);
                _Pragma("GCC unroll 3")
                for (int kh = 0; kh < 3; kh++) {
                    const int u = i - kh;
                    if (u < 0 || u >= DW_S1_ROWS) continue;
                    a[u] = _mm512_fmadd_ps(w[3 * kh], t0, a[u]);
                    a[u] = _mm512_fmadd_ps(w[3 * kh + 1], t1, a[u]);
                    a[u] = _mm512_fmadd_ps(w[3 * kh + 2], t2, a[u]);
                }
            }
            const __mmask16 sm = lanes_below(OW - c0);
            _Pragma("GCC unroll 6")
            for (int u = 0; u < DW_S1_ROWS; u++)
                if (u < cnt) _mm512_mask_storeu_ps(y + (oh0 + u) * OW + c0, sm, relu ? relu_ps(a[u]) : a[u]);
        }
    }
}

NN_AVX512 static void dw3x3_plane_rows_avx512(const float *x, int64_t H, int64_t W, const float *wt, int64_t sh,
                                              int64_t ph, int64_t pw, float b0, int64_t OH, int64_t OW,
                                              const float *zrow, float *y, int relu) {
    if (sh == 2)
        dw3x3_rows_core(x, H, W, wt, ph, pw, b0, OH, OW, zrow, y, relu, 2);
    else if (g_tune[TUNE_CONV] != 13)
        dw3x3_s1_plane(x, H, W, wt, ph, pw, b0, OH, OW, y, relu);
    else
        dw3x3_rows_core(x, H, W, wt, ph, pw, b0, OH, OW, zrow, y, relu, 1);
}

/* r[i] <- column i of the 16 x 16 matrix whose rows are r[0..15] (in place). */
NN_AVX512 static inline void transpose16x16(__m512 r[16]) {
    __m512 t[16];
    _Pragma("GCC unroll 16")
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    _Pragma("GCC unroll 16")
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    /* r[4q + k] now holds, in each 128-bit lane L, elements k of rows 4L'..: gather the lanes */
    _Pragma("GCC unroll 16")
    for (int i = 0; i < 8; i++) {
        int q = i / 4, k = i % 4;   /* pair rows q*8 + k and q*8 + 4 + k */
        t[i] = _mm512_shuffle_f32x4(r[8 * q + k], r[8 * q + 4 + k], 0x88);
        t[i + 8] = _mm512_shuffle_f32x4(r[8 * q + k], r[8 * q + 4 + k], 0xDD);
    }
    _Pragma("GCC unroll 16")
    for (int k = 0; k < 4; k++) {
        r[k] = _mm512_shuffle_f32x4(t[k], t[4 + k], 0x88);
        r[k + 8] = _mm512_shuffle_f32x4(t[k], t[4 + k], 0xDD);
        r[k + 4] = _mm512_shuffle_f32x4(t[8 + k], t[12 + k], 0x88);
        r[k + 12] = _mm512_shuffle_f32x4(t[8 + k], t[12 + k], 0xDD);
    }
}

/* Depthwise convolution (one input plane per filter) of `nc` <= 16 consecutive planes at once,
 * vectorized along the channels: the planes are transposed (16 x 16 blocks) into S, a zero-padded
 * [Hp][Wp][16] block, each output position is a sum of KK products of 16-channel vectors, and
 * each output row is transposed back into the nc output planes. For small planes, where a
 * vector along a row would be mostly edge. x: the first plane (planes IP floats apart); w: the
 * first filter's KK taps (filters KK apart); y: the first output plane (P floats apart);
 * S: Hp * Wp * 16 + chanvec_slack(sw) floats, Hp = H + 2 ph, Wp = W + 2 pw (64-byte aligned);
 * the slack is zeroed here and read by the blocks of 16 positions that run past the plane. */
static int64_t chanvec_slack(int64_t sw) { return (16 * sw + 16) * 16; }

NN_AVX512 static void dw_block_chanvec(const float *x, int64_t IP, int nc, int64_t H, int64_t W, const float *w,
                                       int64_t KH, int64_t KW, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                                       int64_t ph, int64_t pw, const float *bias, int64_t OH, int64_t OW,
                                       float *y, int64_t P, float *S, int relu) {
    const int64_t Wp = W + 2 * pw, KK = KH * KW;
    /* zero the padding only: the rows above and below, and the columns left and right */
    memset(S, 0, (size_t)(ph * Wp * 16) * sizeof(float));
    memset(S + (ph + H) * Wp * 16, 0, (size_t)(ph * Wp * 16 + chanvec_slack(sw)) * sizeof(float));
    for (int64_t h = ph; h < ph + H && pw > 0; h++) {
        memset(S + h * Wp * 16, 0, (size_t)(pw * 16) * sizeof(float));
        memset(S + (h * Wp + pw + W) * 16, 0, (size_t)(pw * 16) * sizeof(float));
    }
    __m512 r[16];
    for (int64_t h = 0; h < H; h++)
        for (int64_t w0 = 0; w0 < W; w0 += 16) {
            const int64_t nw = imin(16, W - w0);
            const __mmask16 m = (__mmask16)((1u << nw) - 1u);
            _Pragma("GCC unroll 16")
            for (int j = 0; j < 16; j++)
                r[j] = j < nc ? _mm512_maskz_loadu_ps(m, x + j * IP + h * W + w0) : _mm512_setzero_ps();
            transpose16x16(r);
            float *dst = S + ((h + ph) * Wp + w0 + pw) * 16;
            for (int64_t i = 0; i < nw; i++) _mm512_store_ps(dst + i * 16, r[i]);
        }
    _Alignas(64) float wt[16];
    __m512 wv[16 * 16];   /* taps (KK <= 256) as 16-channel vectors */
    for (int64_t t = 0; t < KK; t++) {
        for (int j = 0; j < 16; j++) wt[j] = j < nc ? w[j * KK + t] : 0.0f;
        wv[t] = _mm512_load_ps(wt);
    }
    for (int j = 0; j < 16; j++) wt[j] = bias != NULL && j < nc ? bias[j] : 0.0f;
    const __m512 b0 = _mm512_load_ps(wt);
    if (sh == sw) {
        /* wide rows: output position q = oh Wp + ow (ow < Wp) reads S at sw q + the tap's
         * offset, so 16 consecutive q are one block of unrolled loads whatever the plane width;
         * the positions with ow >= OW are computed and dropped (each channel's valid lanes
         * compressed into consecutive outputs). S has slack after the padded plane. */
        int64_t toff[256];
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++) toff[kh * KW + kw] = (kh * dh * Wp + kw * dw) * 16;
        const int64_t Q = (OH - 1) * Wp + OW;
        int64_t done = 0, ow = 0;   /* outputs stored per channel so far; column of position q0 */
        for (int64_t q0 = 0; q0 < Q; q0 += 16) {
            _Pragma("GCC unroll 16")
            for (int i = 0; i < 16; i++) r[i] = b0;
            const float *base = S + sw * q0 * 16;
            for (int64_t t = 0; t < KK; t++) {
                const __m512 wk = wv[t];
                const float *b = base + toff[t];
                _Pragma("GCC unroll 16")
                for (int i = 0; i < 16; i++) r[i] = _mm512_fmadd_ps(wk, _mm512_load_ps(b + i * sw * 16), r[i]);
            }
            if (relu)
                for (int i = 0; i < 16; i++) r[i] = relu_ps(r[i]);
            transpose16x16(r);
            uint32_t valid = 0;
            for (int i = 0; i < 16; i++, ow = ow + 1 == Wp ? 0 : ow + 1)
                valid |= (uint32_t)(q0 + i < Q && ow < OW) << i;
            const int nvalid = __builtin_popcount(valid);
            const __mmask16 sm = lanes_below(nvalid);
            for (int j = 0; j < nc; j++)
                _mm512_mask_storeu_ps(y + j * P + done, sm, _mm512_maskz_compress_ps((__mmask16)valid, r[j]));
            done += nvalid;
        }
        return;
    }
    for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
            const int64_t nw = imin(16, OW - ow0);
            _Pragma("GCC unroll 16")
            for (int i = 0; i < 16; i++) r[i] = b0;
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    const __m512 wk = wv[kh * KW + kw];
                    const float *base = S + ((oh * sh + kh * dh) * Wp + ow0 * sw + kw * dw) * 16;
                    _Pragma("GCC unroll 16")
                    for (int i = 0; i < 16; i++)   /* past nw: reads the slack, lanes dropped */
                        r[i] = _mm512_fmadd_ps(wk, _mm512_load_ps(base + i * sw * 16), r[i]);
                }
            if (relu)
                for (int i = 0; i < 16; i++) r[i] = relu_ps(r[i]);
            transpose16x16(r);
            const __mmask16 m = (__mmask16)((1u << nw) - 1u);
            for (int j = 0; j < nc; j++) _mm512_mask_storeu_ps(y + j * P + oh * OW + ow0, m, r[j]);
        }
}

/* d[j] = s[2 j] for j < n (stride-2 row of a phase plane), by deinterleaving pairs of vectors */
NN_AVX512 static void copy_stride2_avx512(const float *s, int64_t n, float *d) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {   /* reads s[2j .. 2j + 30]: the last pair is masked */
        __mmask16 m1 = (__mmask16)(j + 16 == n ? 0x7FFF : 0xFFFF);
        __m512 v0 = _mm512_loadu_ps(s + 2 * j), v1 = _mm512_maskz_loadu_ps(m1, s + 2 * j + 16);
        _mm512_storeu_ps(d + j, _mm512_permutex2var_ps(v0, even, v1));
    }
    if (j < n) {
        int64_t need = 2 * (n - j) - 1;   /* source floats s[2j .. 2j + need) */
        __mmask16 m0 = need >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << need) - 1u);
        __mmask16 m1 = need > 16 ? (__mmask16)((1u << (need - 16)) - 1u) : 0;
        __m512 v0 = _mm512_maskz_loadu_ps(m0, s + 2 * j), v1 = _mm512_maskz_loadu_ps(m1, s + 2 * j + 16);
        _mm512_mask_storeu_ps(d + j, (__mmask16)((1u << (n - j)) - 1u), _mm512_permutex2var_ps(v0, even, v1));
    }
}
#endif

#define DW_BLOCK 2048   /* wide outputs accumulated at a time (L1) */
#ifndef DW_CHANVEC_MAX_OW
#define DW_CHANVEC_MAX_OW 32   /* depthwise output rows up to this width vectorize along channels */
#endif
/* ... except 3x3 layers the row kernels (dw3x3_s1_plane, dw3x3_rows_core) take, from these
 * widths on (stride 1, stride 2). Measured in mobilenet1.0, in-graph, 2 threads, interleaved
 * (TUNE_CHANVEC_OW): row kernel / channel vectors 0.56-0.58 at 128 ch 56->28 stride 2, 0.82 at
 * 256 ch 28->14 stride 2, 1.2 at 512 ch 14->7 and 1.5 at 1024 ch 7x7 (7 of 16 lanes used);
 * stride 1 with dw3x3_s1_plane: 0.90 at 256 ch 28x28, 1.15-1.27 at 512 ch 14x14. */
#define DW_ROWS_MIN_OW_S1 16
#define DW_ROWS_MIN_OW_S2 14
NN_CLONES
static void conv_depthwise_wide_task(int64_t begin, int64_t end, void **argv) {
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    const int64_t OH = g->out[1], OW = g->out[2], KH = g->k[1], KW = g->k[2];
    const int64_t sh = g->s[1], sw = g->s[2], dh = g->dl[1], dw = g->dl[2];
    const int64_t Hq = job->Hp, Wq = job->Wp, Q = OH * Wq, S = sh * sw, KK = KH * KW;
#ifdef NN_HAVE_AVX512
    /* column stride 1 or 2 on AVX-512: straight from the input (no padded planes), rows
     * outside it read a zero row */
    if (native_on() && sw <= 2 && KW <= 16) {
        const int64_t zn = g->in[2] + 64;
        float *zero = scratch(0, (size_t)zn);
        if (!zero) return;
        memset(zero, 0, (size_t)zn * sizeof(float));   /* masked reads stay within [0, W) */
        const int rows3x3 = KH == 3 && KW == 3 && sh == sw && sh <= 2 && dh == 1 && dw == 1 && g->p[2] <= 2;
        const int64_t chanvec_max = g_tune[TUNE_CHANVEC_OW] ? g_tune[TUNE_CHANVEC_OW]
                                  : rows3x3 ? (sh == 1 ? DW_ROWS_MIN_OW_S1 : DW_ROWS_MIN_OW_S2) - 1
                                            : DW_CHANVEC_MAX_OW;
        if (g->Fg == 1 && g->C == g->F && g->out[0] == 1 && g->in[0] == 1 && OW <= chanvec_max && KH * KW <= 256) {
            /* small planes: 16 channels per vector (dw_block_chanvec), blocks within one image */
            const int64_t H = g->in[1], W = g->in[2];
            float *S = scratch(2, (size_t)((H + 2 * g->p[1]) * (W + 2 * g->p[2]) * 16 + chanvec_slack(sw) + 16));
            if (!S) return;
            S = (float *)(((uintptr_t)S + 63) & ~(uintptr_t)63);
            int64_t epi_from = begin;
            for (int64_t t = begin; t < end;) {
                const int64_t n = t / g->F, f = t % g->F;
                const int nc = (int)imin(16, imin(end - t, g->F - f));
                dw_block_chanvec(job->x + (n * g->C + f) * g->IP, g->IP, nc, H, W, job->w + f * KK, KH, KW, sh, sw,
                                 dh, dw, g->p[1], g->p[2], job->bias ? job->bias + f : NULL, OH, OW,
                                 job->y + (n * g->F + f) * g->P, g->P, S, epi_is_relu(job->epi));
                t += nc;
                if (job->epi && !epi_is_relu(job->epi) && ((t - epi_from) * g->P >= DW_BLOCK || t == end)) {
                    job->epi(epi_from * g->P, t * g->P, job->epi_args);
                    epi_from = t;
                }
            }
            return;
        }
        dw_masks_t masks;
        const int64_t nv = cdiv(OW, 16);
        if (nv <= 16 && !rows3x3) dw_column_masks(g->in[2], KW, sw, dw, g->p[2], OW, 0, nv, masks);
        /* the epilogue runs on groups of planes of about DW_BLOCK outputs, while they are in cache */
        int64_t epi_from = begin;
        const int relu = rows3x3 && epi_is_relu(job->epi);   /* applied by the row kernel's stores */
        for (int64_t t = begin; t < end; t++) {
            int64_t n = t / g->F, f = t % g->F, c = f / g->Fg;
            if (rows3x3)
                dw3x3_plane_rows_avx512(job->x + (n * g->C + c) * g->IP, g->in[1], g->in[2], job->w + f * KK, sh,
                                        g->p[1], g->p[2], job->bias ? job->bias[f] : 0.0f, OH, OW, zero + 16,
                                        job->y + (n * g->F + f) * g->P, relu);
            else
                dw_plane_direct_avx512(job->x + (n * g->C + c) * g->IP, g->in[1], g->in[2], job->w + f * KK, KH, KW, sh,
                                       sw, dh, dw, g->p[1], g->p[2], job->bias ? job->bias[f] : 0.0f, OH, OW, zero,
                                       job->y + (n * g->F + f) * g->P, nv <= 16 ? masks : NULL);
            if (job->epi && !relu && ((t + 1 - epi_from) * g->P >= DW_BLOCK || t + 1 == end)) {
                job->epi(epi_from * g->P, (t + 1) * g->P, job->epi_args);
                epi_from = t + 1;
            }
        }
        return;
    }
#endif
    const int64_t slack = Wq + KW * dw + 32;   /* dw_plane_avx512 reads 16 past a row's start */
    float *planes = scratch(0, (size_t)(S * Hq * Wq + slack + imin(Q, DW_BLOCK)));
    if (!planes) return;
    float *acc = planes + S * Hq * Wq + slack;
    memset(planes + S * Hq * Wq, 0, (size_t)slack * sizeof(float));
    int64_t last_c = -1;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / g->F, f = t % g->F, c = f / g->Fg;
        if (c != last_c || t == begin) {
            for (int64_t a = 0; a < sh; a++)
                for (int64_t b = 0; b < sw; b++)
                    if ((job->phase_used >> (a * sw + b)) & 1)
                        pad_phase_plane(g, job->x + (n * g->C + c) * g->IP, a, b, Hq, Wq, planes + (a * sw + b) * Hq * Wq,
                                        t != begin);
            last_c = c;
        }
        const float *wf = job->w + f * KK;
        const float b0 = job->bias ? job->bias[f] : 0.0f;
        float *yp = job->y + (n * g->F + f) * g->P;
#ifdef NN_HAVE_AVX512
        if (native_on() && KK <= 64) {
            int64_t toff[64];
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++)
                    toff[kh * KW + kw] = ((kh * dh % sh) * sw + kw * dw % sw) * Hq * Wq + (kh * dh / sh) * Wq + kw * dw / sw;
            dw_plane_avx512(planes, toff, wf, KK, b0, OH, OW, Wq, yp);
            continue;
        }
#endif
        for (int64_t q0 = 0; q0 < Q; q0 += DW_BLOCK) {
            const int64_t qn = imin(DW_BLOCK, Q - q0);
            for (int64_t q = 0; q < qn; q++) acc[q] = b0;
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    const float wv = wf[kh * KW + kw];
                    const float *restrict src = planes + ((kh * dh % sh) * sw + kw * dw % sw) * Hq * Wq +
                                                (kh * dh / sh) * Wq + kw * dw / sw + q0;
                    float *restrict ac = acc;
#pragma GCC ivdep
                    for (int64_t q = 0; q < qn; q++) ac[q] += wv * src[q];
                }
            /* valid columns of the wide rows in [q0, q0 + qn) */
            for (int64_t q = q0; q < q0 + qn;) {
                int64_t oh = q / Wq, ow = q % Wq;
                int64_t run = imin(Wq - ow, q0 + qn - q);
                float *restrict dst = yp + oh * OW + ow;
                const float *restrict src = acc + (q - q0);
                for (int64_t j = 0; j < imin(run, OW - ow); j++) dst[j] = src[j];
                q += run;
            }
        }
    }
    /* the chunk's planes are consecutive: one epilogue over all of them, still in cache */
    if (job->epi) job->epi(begin * g->P, end * g->P, job->epi_args);
}

static int conv_depthwise_wide(conv_job *job) {
    const geo_t *g = &job->g;
    if (!(g->in[0] == 1 && g->k[0] == 1 && g->out[0] == 1)) return 0;
    const int64_t KH = g->k[1], KW = g->k[2], dh = g->dl[1], dw = g->dl[2], sh = g->s[1], sw = g->s[2];
    job->Hp = g->out[1] + (KH - 1) * dh / sh;
    job->Wp = g->out[2] + (KW - 1) * dw / sw;
    if (sh * sw > 16) return 0;
    job->phase_used = phases_used(g);
    void *argv[1] = {job};
    int64_t work = g->P * g->KK;
    symjit_parallel_for(conv_depthwise_wide_task, g->N * g->F, imax(1, 16384 / imax(work, 1)), argv);
    return 1;
}

/* depthwise: one input channel per group; one task per output plane (n, f). Each output row
 * accumulates whole input rows; with 3 taps per row (3x3 kernels) the interior columns, where
 * every tap is inside the row, take a fused 3-term loop and only the edges go tap by tap. */
/* depthwise over a zero-padded copy of the input plane (2-D and 1-D): no bounds checks in
 * the row loops, 3-tap rows fused. Padded size: (Hp, Wp) covering every window. */
NN_CLONES
static void conv_depthwise_padded_task(int64_t begin, int64_t end, void **argv) {
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    const int64_t OH = g->out[1], OW = g->out[2], H = g->in[1], W = g->in[2];
    const int64_t sh = g->s[1], sw = g->s[2], dh = g->dl[1], dw = g->dl[2], ph = g->p[1], pw = g->p[2];
    const int64_t KH = g->k[1], KW = g->k[2];
    const int64_t Hp = imax((OH - 1) * sh + (KH - 1) * dh + 1, ph + H), Wp = imax((OW - 1) * sw + (KW - 1) * dw + 1, pw + W);
    float *xp = scratch(0, (size_t)(Hp * Wp));
    if (!xp) return;
    memset(xp, 0, (size_t)(Hp * Wp) * sizeof(float));
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / g->F, f = t % g->F;
        int64_t c = f / g->Fg;
        const float *xc = job->x + (n * g->C + c) * g->IP;
        if (t == begin || (f % g->Fg) == 0) {   /* copy the plane (borders stay zero) */
            for (int64_t ih = 0; ih < H; ih++) memcpy(xp + (ih + ph) * Wp + pw, xc + ih * W, (size_t)W * sizeof(float));
        }
        const float *wf = job->w + f * g->KK;
        float *yp = job->y + (n * g->F + f) * g->P;
        const float b0 = job->bias ? job->bias[f] : 0.0f;
        for (int64_t oh = 0; oh < OH; oh++) {
            float *restrict yr = yp + oh * OW;
            for (int64_t ow = 0; ow < OW; ow++) yr[ow] = b0;
            for (int64_t kh = 0; kh < KH; kh++) {
                const float *restrict xr = xp + (oh * sh + kh * dh) * Wp;
                const float *wk = wf + kh * KW;
                if (KW == 3) {
                    const float w0 = wk[0], w1 = wk[1], w2 = wk[2];
                    if (sw == 1) {
#pragma GCC ivdep
                        for (int64_t ow = 0; ow < OW; ow++)
                            yr[ow] += w0 * xr[ow] + w1 * xr[ow + dw] + w2 * xr[ow + 2 * dw];
                    } else if (sw == 2) {
#pragma GCC ivdep
                        for (int64_t ow = 0; ow < OW; ow++)
                            yr[ow] += w0 * xr[2 * ow] + w1 * xr[2 * ow + dw] + w2 * xr[2 * ow + 2 * dw];
                    } else {
                        for (int64_t ow = 0; ow < OW; ow++)
                            yr[ow] += w0 * xr[ow * sw] + w1 * xr[ow * sw + dw] + w2 * xr[ow * sw + 2 * dw];
                    }
                } else {
                    for (int64_t kw = 0; kw < KW; kw++) {
                        const float wv = wk[kw];
                        const float *restrict xs = xr + kw * dw;
#pragma GCC ivdep
                        for (int64_t ow = 0; ow < OW; ow++) yr[ow] += wv * xs[ow * sw];
                    }
                }
            }
        }
        if (job->epi) job->epi((n * g->F + f) * g->P, (n * g->F + f + 1) * g->P, job->epi_args);
    }
}

NN_CLONES
static void conv_depthwise_task(int64_t begin, int64_t end, void **argv) {
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2], D = g->in[0], H = g->in[1], W = g->in[2];
    const int64_t sw = g->s[2], dw = g->dl[2], pw = g->p[2], KW = g->k[2];
    /* interior columns [lo_all, hi_all) of 3-tap rows */
    int64_t lo_all = OW, hi_all = OW;
    if (KW == 3) {
        lo_all = imin(pw > 0 ? cdiv(pw, sw) : 0, OW);
        int64_t last = W - 1 - 2 * dw + pw;
        hi_all = last < 0 ? lo_all : imin(imax(last / sw + 1, lo_all), OW);
    }
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / g->F, f = t % g->F;
        int64_t c = f / g->Fg;
        const float *xc = job->x + (n * g->C + c) * g->IP;
        const float *wf = job->w + f * g->KK;
        float *yp = job->y + (n * g->F + f) * g->P;
        float b0 = job->bias ? job->bias[f] : 0.0f;
        for (int64_t od = 0; od < OD; od++)
            for (int64_t oh = 0; oh < OH; oh++) {
                float *restrict yr = yp + (od * OH + oh) * OW;
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = b0;
                for (int64_t kd = 0; kd < g->k[0]; kd++) {
                    int64_t id = od * g->s[0] - g->p[0] + kd * g->dl[0];
                    if (id < 0 || id >= D) continue;
                    for (int64_t kh = 0; kh < g->k[1]; kh++) {
                        int64_t ih = oh * g->s[1] - g->p[1] + kh * g->dl[1];
                        if (ih < 0 || ih >= H) continue;
                        const float *restrict xr = xc + (id * H + ih) * W;
                        const float *wk = wf + (kd * g->k[1] + kh) * KW;
                        if (KW == 3 && hi_all > lo_all) {
                            const float w0 = wk[0], w1 = wk[1], w2 = wk[2];
                            const float *restrict x0 = xr - pw;
                            if (sw == 1) {
#pragma GCC ivdep
                                for (int64_t ow = lo_all; ow < hi_all; ow++)
                                    yr[ow] += w0 * x0[ow] + w1 * x0[ow + dw] + w2 * x0[ow + 2 * dw];
                            } else {
#pragma GCC ivdep
                                for (int64_t ow = lo_all; ow < hi_all; ow++)
                                    yr[ow] += w0 * x0[ow * sw] + w1 * x0[ow * sw + dw] + w2 * x0[ow * sw + 2 * dw];
                            }
                        }
                        for (int64_t kw = 0; kw < KW; kw++) {
                            const float wv = wk[kw];
                            const int64_t off = kw * dw - pw;
                            int64_t lo = off >= 0 ? 0 : cdiv(-off, sw);
                            int64_t hi = W - off <= 0 ? 0 : cdiv(W - off, sw);
                            lo = imin(lo, OW);
                            hi = imin(imax(hi, lo), OW);
                            if (KW != 3 || hi_all <= lo_all) {
                                if (sw == 1) {
#pragma GCC ivdep
                                    for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow + off];
                                } else {
#pragma GCC ivdep
                                    for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow * sw + off];
                                }
                                continue;
                            }
                            /* the edges: columns of [lo, hi) outside the interior */
                            for (int64_t ow = lo; ow < imin(hi, lo_all); ow++) yr[ow] += wv * xr[ow * sw + off];
                            for (int64_t ow = imax(lo, hi_all); ow < hi; ow++) yr[ow] += wv * xr[ow * sw + off];
                        }
                    }
                }
            }
        if (job->epi) job->epi((n * g->F + f) * g->P, (n * g->F + f + 1) * g->P, job->epi_args);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Winograd F(2x2, 3x3): 2-D, one group, 3x3 kernel, stride 1, dilation 1, any padding.      */
/* 16 products per 2x2 output tile instead of 36: U = G g G^T per (f, c), V = B^T d B per     */
/* (c, tile), M_xi = U_xi V_xi as 16 GEMMs over all tiles of all images, Y = A^T m A.         */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    conv_job *job;
    float *U, *V, *M;     /* U[16][F][C], V[16][C][Tt], M[16][F][Tt] */
    int64_t th, tw, tiles, Tt, nb;
} wino_job;

static void wino_weight_task(int64_t begin, int64_t end, void **argv) {
    wino_job *wj = (wino_job *)argv[0];
    const geo_t *g = &wj->job->g;
    wino_weights(wj->job->w, g->F, g->C, begin, end, wj->U);
}

NN_CLONES
static void wino_input_task(int64_t begin, int64_t end, void **argv) {
    wino_job *wj = (wino_job *)argv[0];
    const geo_t *g = &wj->job->g;
    const int64_t C = g->C, H = g->in[1], W = g->in[2], ph = g->p[1], pw = g->p[2];
    const int64_t Tt = wj->Tt, tw = wj->tw;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / C, c = t % C;
        const float *xc = wj->job->x + (n * C + c) * g->IP;
        for (int64_t tile = 0; tile < wj->tiles; tile++) {
            int64_t y0 = (tile / tw) * 2 - ph, x0 = (tile % tw) * 2 - pw;
            float d[4][4];
            for (int i = 0; i < 4; i++) {
                int64_t yy = y0 + i;
                for (int j = 0; j < 4; j++) {
                    int64_t xx = x0 + j;
                    d[i][j] = (yy >= 0 && yy < H && xx >= 0 && xx < W) ? xc[yy * W + xx] : 0.0f;
                }
            }
            float b[4][4];   /* B^T d */
            for (int j = 0; j < 4; j++) {
                b[0][j] = d[0][j] - d[2][j];
                b[1][j] = d[1][j] + d[2][j];
                b[2][j] = d[2][j] - d[1][j];
                b[3][j] = d[1][j] - d[3][j];
            }
            int64_t col = n * wj->tiles + tile;
            for (int i = 0; i < 4; i++) {   /* (B^T d) B */
                float v[4] = {b[i][0] - b[i][2], b[i][1] + b[i][2], b[i][2] - b[i][1], b[i][1] - b[i][3]};
                for (int j = 0; j < 4; j++) wj->V[((int64_t)(i * 4 + j) * C + c) * Tt + col] = v[j];
            }
        }
    }
}

static void wino_gemm_task(int64_t begin, int64_t end, void **argv) {
    wino_job *wj = (wino_job *)argv[0];
    const geo_t *g = &wj->job->g;
    const int64_t F = g->F, C = g->C, Tt = wj->Tt, nb = wj->nb, tn = cdiv(Tt, nb);
    for (int64_t t = begin; t < end; t++) {
        int64_t xi = t / tn, c0 = (t % tn) * nb, cc = imin(nb, Tt - c0);
        gemm_rm(0, 0, F, cc, C, wj->U + xi * F * C, C, wj->V + xi * C * Tt + c0, Tt, 0.0f,
                wj->M + xi * F * Tt + c0, Tt);
    }
}

NN_CLONES
static void wino_output_task(int64_t begin, int64_t end, void **argv) {
    wino_job *wj = (wino_job *)argv[0];
    conv_job *job = wj->job;
    const geo_t *g = &job->g;
    const int64_t F = g->F, OH = g->out[1], OW = g->out[2], Tt = wj->Tt, tw = wj->tw;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / F, f = t % F;
        float *yp = job->y + (n * F + f) * g->P;
        float b0 = job->bias ? job->bias[f] : 0.0f;
        const float *mp = wj->M + f * Tt + n * wj->tiles;
        for (int64_t tile = 0; tile < wj->tiles; tile++) {
            float m[4][4];
            for (int xi = 0; xi < 16; xi++) m[xi / 4][xi % 4] = mp[(int64_t)xi * F * Tt + tile];
            float a[2][4];   /* A^T m */
            for (int j = 0; j < 4; j++) {
                a[0][j] = m[0][j] + m[1][j] + m[2][j];
                a[1][j] = m[1][j] - m[2][j] - m[3][j];
            }
            int64_t y0 = (tile / tw) * 2, x0 = (tile % tw) * 2;
            for (int i = 0; i < 2; i++) {
                if (y0 + i >= OH) break;
                float r0 = a[i][0] + a[i][1] + a[i][2] + b0;
                float r1 = a[i][1] - a[i][2] - a[i][3] + b0;
                yp[(y0 + i) * OW + x0] = r0;
                if (x0 + 1 < OW) yp[(y0 + i) * OW + x0 + 1] = r1;
            }
        }
        if (job->epi) job->epi((n * F + f) * g->P, (n * F + f + 1) * g->P, job->epi_args);
    }
}

static int winograd_ok(const geo_t *g) {
    return g->G == 1 && g->in[0] == 1 && g->k[0] == 1 && g->k[1] == 3 && g->k[2] == 3 && g->s[1] == 1 &&
           g->s[2] == 1 && g->dl[1] == 1 && g->dl[2] == 1;
}

static int conv_winograd(conv_job *job) {
    const geo_t *g = &job->g;
    wino_job wj;
    wj.job = job;
    wj.th = cdiv(g->out[1], 2);
    wj.tw = cdiv(g->out[2], 2);
    wj.tiles = wj.th * wj.tw;
    wj.Tt = g->N * wj.tiles;
    wj.U = scratch(2, (size_t)(16 * g->F * g->C));
    wj.V = scratch(3, (size_t)(16 * g->C * wj.Tt));
    wj.M = scratch(4, (size_t)(16 * g->F * wj.Tt));
    if (!wj.U || !wj.V || !wj.M) return 0;
    int64_t threads = symjit_get_num_threads();
    int64_t want = cdiv(2 * threads, 16);
    wj.nb = wj.Tt;
    if (wj.nb > 512) wj.nb = 512;
    if (want > 1) wj.nb = imin(wj.nb, imax(16, cdiv(cdiv(wj.Tt, want), 16) * 16));
    void *argv[1] = {&wj};
    symjit_parallel_for(wino_weight_task, g->F, 1, argv);
    symjit_parallel_for(wino_input_task, g->N * g->C, 1, argv);
    symjit_parallel_for(wino_gemm_task, 16 * cdiv(wj.Tt, wj.nb), 1, argv);
    symjit_parallel_for(wino_output_task, g->N * g->F, 1, argv);
    return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* Fused Winograd F(2x2, 3x3) on the AVX-512 tiles                                           */
/* ---------------------------------------------------------------------------------------- */

/* 2-D, one group, 3x3, stride 1, dilation 1. The zero-padded input is split into its four
 * stride-2 phase planes (Hq x Wq = (TH + 1) x (TW + 1), TH x TW the 2x2 output tiles), so the
 * 16 inputs of tile (ty, tx) are phase (i & 1, j & 1) at (ty + i / 2, tx + j / 2): for the wide
 * tile index q = ty Wq + tx (tiles tx = TW are padding) every input of 16 consecutive tiles is
 * one vector load, and the transforms run 16 tiles per instruction. One task = image n, a block
 * of whole tile rows, a block of filters; the task splits just its rows (+ 1) of the planes
 * into its thread's buffer, so they, V = B^T d B and M = U V stay in that core's L2:
 *   V[xi][c][t]  input transform of the block (16 x C x tb),
 *   M[xi][f][t]  = U[xi][f][:] . V[xi][:][t]: 16 GEMMs on the tiles (K = C),
 *   y            = A^T M A + bias, stored 2x2 per tile; the epilogue runs on the block's rows.
 * U[xi][f][c] = G g G^T is packed once at compile time for constant weights
 * (symjit_nn_conv_pack), else computed at the start of the call. */
typedef struct {
    conv_job *job;
    const float *U;     /* [16][F][C] */
    int64_t TH, TW, Hq, Wq, rows, tb, mb;   /* rows: tile rows per block; tb: block width (q, padded) */
    int shape;
} wnat_job;

/* U[xi][f][c] (16 x F x C) from w (F, C, 3, 3) for filters [f0, f1) */
static void wino_weights(const float *w, int64_t F, int64_t C, int64_t f0, int64_t f1, float *U) {
    for (int64_t f = f0; f < f1; f++)
        for (int64_t c = 0; c < C; c++) {
            const float *k = w + (f * C + c) * 9;
            float t[4][3];   /* G g */
            for (int j = 0; j < 3; j++) {
                float a = k[j], b = k[3 + j], e = k[6 + j];
                t[0][j] = a;
                t[1][j] = 0.5f * (a + b + e);
                t[2][j] = 0.5f * (a - b + e);
                t[3][j] = e;
            }
            for (int i = 0; i < 4; i++) {   /* (G g) G^T */
                float a = t[i][0], b = t[i][1], e = t[i][2];
                float u[4] = {a, 0.5f * (a + b + e), 0.5f * (a - b + e), e};
                for (int j = 0; j < 4; j++) U[((int64_t)(i * 4 + j) * F + f) * C + c] = u[j];
            }
        }
}

static void wnat_weight_task(int64_t begin, int64_t end, void **argv) {
    wnat_job *wj = (wnat_job *)argv[0];
    const geo_t *g = &wj->job->g;
    wino_weights(wj->job->w, g->F, g->C, begin, end, (float *)wj->U);
}

/* strides between the 16 transform points of V and M: padded by 3 cache lines so that the 16
 * streams do not share one L1 set (C tb floats is often a multiple of 4 KiB) */
static int64_t wnat_vstride(const wnat_job *wj) { return wj->job->g.C * wj->tb + 48; }
static int64_t wnat_mstride(const wnat_job *wj) { return wj->mb * wj->tb + 48; }

#ifdef NN_HAVE_AVX512
/* V[xi][c][t] for t < tb (tile q = q0 + t) from the block's rows of the phase planes,
 * planes[c][a][b][rows + 1][Wq] */
NN_AVX512 static void wnat_input(const wnat_job *wj, const float *planes, float *V) {
    const geo_t *g = &wj->job->g;
    const int64_t C = g->C, Wq = wj->Wq, tb = wj->tb, PL = (wj->rows + 1) * Wq, vs = wnat_vstride(wj);
    for (int64_t c = 0; c < C; c++) {
        const float *pc = planes + c * 4 * PL;
        const float *P00 = pc, *P01 = pc + PL, *P10 = pc + 2 * PL, *P11 = pc + 3 * PL;
        float *vc = V + c * tb;
        for (int64_t t = 0; t < tb; t += 16) {
            /* d[i][j] = P_{i&1, j&1}[q + (i >> 1) Wq + (j >> 1)] */
#define WLD(i, j) _mm512_loadu_ps(((i) & 1 ? ((j) & 1 ? P11 : P10) : ((j) & 1 ? P01 : P00)) + t + ((i) >> 1) * Wq + ((j) >> 1))
            __m512 d[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) d[i][j] = WLD(i, j);
#undef WLD
            __m512 r[4][4];   /* B^T d */
            for (int j = 0; j < 4; j++) {
                r[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
                r[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
                r[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
                r[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
            }
            for (int i = 0; i < 4; i++) {   /* (B^T d) B */
                float *o = vc + (int64_t)(i * 4) * vs + t;
                _mm512_storeu_ps(o, _mm512_sub_ps(r[i][0], r[i][2]));
                _mm512_storeu_ps(o + vs, _mm512_add_ps(r[i][1], r[i][2]));
                _mm512_storeu_ps(o + 2 * vs, _mm512_sub_ps(r[i][2], r[i][1]));
                _mm512_storeu_ps(o + 3 * vs, _mm512_sub_ps(r[i][1], r[i][3]));
            }
        }
    }
}

/* y = A^T M A + bias for filters [f0, f0 + fc) of image n, tiles q0 + t (t < qn): each output row
 * of 16 tiles is two interleaved vectors, stored by masked segments (valid tiles, clipped to OW) */
NN_AVX512 static void wnat_output(const wnat_job *wj, int64_t n, int64_t q0, int64_t qn, int64_t f0, int64_t fc,
                                  const float *M) {
    const conv_job *job = wj->job;
    const geo_t *g = &job->g;
    const int64_t F = g->F, OH = g->out[1], OW = g->out[2], Wq = wj->Wq, TW = wj->TW, tb = wj->tb;
    const int64_t fstride = wnat_mstride(wj);   /* M[xi][f][t], f relative to f0 */
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const int relu = epi_is_relu(job->epi);   /* applied here; other epilogues after the block */
    for (int64_t t = 0; t < qn; t += 16) {
        /* segments of the 16 tiles: lanes [l0, l1) in tile row ty from column tx0 */
        int64_t seg_l0[4], seg_l1[4], seg_ty[4], seg_tx[4];
        int ns = 0;
        int64_t lanes = imin(16, qn - t), l = 0;
        while (l < lanes && ns < 4) {
            int64_t q = q0 + t + l, ty = q / Wq, tx = q - ty * Wq;
            if (tx >= TW) { l += Wq - tx; continue; }
            int64_t run = imin(TW - tx, lanes - l);
            seg_l0[ns] = l; seg_l1[ns] = l + run; seg_ty[ns] = ty; seg_tx[ns] = tx; ns++;
            l += run;
        }
        /* output rows 2 ty, 2 ty + 1 and columns [2 tx, 2 tx + 32) of the next 16 tiles' first */
        int64_t pf_oy = -1, pf_ox = 0, pf_ox_end = 0;
        if (t + 16 < qn && g_tune[TUNE_PREFETCH] != 9) {
            const int64_t q = q0 + t + 16, ty = q / Wq, tx = q - ty * Wq;
            if (tx < TW) { pf_oy = 2 * ty; pf_ox = 2 * tx; pf_ox_end = imin(2 * tx + 32, OW); }
        }
        for (int64_t f = 0; f < fc; f++) {
            const float *mp = M + f * tb + t;
            __m512 m[4][4];
            for (int xi = 0; xi < 16; xi++) m[xi >> 2][xi & 3] = _mm512_loadu_ps(mp + xi * fstride);
            __m512 a0[4], a1[4];   /* A^T m */
            for (int j = 0; j < 4; j++) {
                a0[j] = _mm512_add_ps(_mm512_add_ps(m[0][j], m[1][j]), m[2][j]);
                a1[j] = _mm512_sub_ps(_mm512_sub_ps(m[1][j], m[2][j]), m[3][j]);
            }
            const __m512 b0 = _mm512_set1_ps(job->bias ? job->bias[f0 + f] : 0.0f);
            __m512 yv[2][2];
            yv[0][0] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0[0], a0[1]), a0[2]), b0);
            yv[0][1] = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(a0[1], a0[2]), a0[3]), b0);
            yv[1][0] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a1[0], a1[1]), a1[2]), b0);
            yv[1][1] = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(a1[1], a1[2]), a1[3]), b0);
            if (relu)
                for (int i = 0; i < 4; i++) yv[i >> 1][i & 1] = relu_ps(yv[i >> 1][i & 1]);
            float *yf = job->y + (n * F + f0 + f) * g->P;
            if (pf_oy >= 0)   /* for writing: what the next 16 tiles store (the arena is cold) */
                for (int i = 0; i < 2 && pf_oy + i < OH; i++)
                    for (int64_t c = pf_ox; c < pf_ox_end; c += 16) __builtin_prefetch(yf + (pf_oy + i) * OW + c, 1, 3);
            for (int i = 0; i < 2; i++) {
                /* z[0]: tiles 0..7 as (y_i0, y_i1) pairs, z[1]: tiles 8..15 */
                __m512 z[2] = {_mm512_permutex2var_ps(yv[i][0], lo, yv[i][1]),
                               _mm512_permutex2var_ps(yv[i][0], hi, yv[i][1])};
                for (int u = 0; u < ns; u++) {
                    int64_t oy = 2 * seg_ty[u] + i;
                    if (oy >= OH) continue;
                    /* output columns 2 (tx0 + l - l0) + j for lanes l in [l0, l1), clipped to OW */
                    int64_t c_lo = 2 * seg_l0[u], c_hi = imin(2 * seg_l1[u], 2 * seg_l0[u] + OW - 2 * seg_tx[u]);
                    float *base = yf + oy * OW + 2 * seg_tx[u] - 2 * seg_l0[u];   /* z lane e -> base[e] */
                    for (int h = 0; h < 2; h++) {
                        int64_t e0 = imax(c_lo - 16 * h, 0), e1 = imin(c_hi - 16 * h, 16);
                        if (e1 <= e0) continue;
                        __mmask16 mk = (__mmask16)((((1u << (e1 - e0)) - 1u) << e0) & 0xFFFFu);
                        _mm512_mask_storeu_ps(base + 16 * h, mk, z[h]);
                    }
                }
            }
        }
    }
}
#endif

static void wnat_task(int64_t begin, int64_t end, void **argv) {
#ifdef NN_HAVE_AVX512
    wnat_job *wj = (wnat_job *)argv[0];
    conv_job *job = wj->job;
    const geo_t *g = &job->g;
    const int64_t C = g->C, F = g->F, tb = wj->tb, mb = wj->mb, tm = cdiv(F, mb);
    const int64_t nblk = cdiv(wj->TH, wj->rows);
    float *V = scratch(2, (size_t)(16 * wnat_vstride(wj)));
    float *M = scratch(3, (size_t)(16 * wnat_mstride(wj)));
    const size_t nplanes = (size_t)(C * 4 * (wj->rows + 1) * wj->Wq), slack = (size_t)(wj->tb + 2 * wj->Wq + 64);
    float *planes = scratch(6, nplanes + slack);
    if (!V || !M || !planes) return;
    for (size_t i = nplanes; i < nplanes + slack; i++) planes[i] = 0.0f;
    for (int64_t t = begin; t < end; t++) {
        int64_t mi = t % tm, nb = t / tm, blk = nb % nblk, n = nb / nblk;
        int64_t ty0 = blk * wj->rows, ty1 = imin(wj->TH, ty0 + wj->rows);
        int64_t q0 = ty0 * wj->Wq, qn = (ty1 - ty0) * wj->Wq;
        int64_t f0 = mi * mb, fc = imin(mb, F - f0);
        if (t_cols_serial != job->serial || t_cols_tag != nb || t_cols_ptr != V) {
            geo_t g2 = *g;   /* the phase planes of a stride-2 split, rows [ty0, ty0 + rows + 1) */
            g2.s[1] = g2.s[2] = 2;
            const int64_t PL = (wj->rows + 1) * wj->Wq;
            const int64_t ih0 = 2 * ty0 - g->p[1], ih1 = 2 * (ty0 + wj->rows + 1) - g->p[1];   /* rows read */
            for (int64_t c = 0; c < C; c++) {
                if (c + 1 < C) prefetch_plane_rows(job->x + (n * C + c + 1) * g->IP, g->in[1], g->in[2], ih0, ih1);
                for (int64_t a = 0; a < 2; a++)
                    pad_phase_rows_pair(&g2, job->x + (n * C + c) * g->IP, a, ty0, wj->rows + 1, wj->Wq,
                                        planes + (c * 4 + 2 * a) * PL, planes + (c * 4 + 2 * a + 1) * PL);
            }
            wnat_input(wj, planes, V);
            t_cols_serial = job->serial;
            t_cols_tag = nb;
            t_cols_ptr = V;
        }
        for (int xi = 0; xi < 16; xi++) {
            mm_t p;
            memset(&p, 0, sizeof p);
            p.K = C;
            p.a = wj->U + ((int64_t)xi * F + f0) * C;
            p.ask = 1;
            p.asr = C;
            p.b = V + (int64_t)xi * wnat_vstride(wj);
            p.bsk = tb;
            p.bsp = mm_panel(wj->shape);
            p.padded = 1;
            p.c = M + (int64_t)xi * wnat_mstride(wj);
            p.csr = tb;
            p.csj = 1;
            p.rows = fc;
            p.cols = qn;
            mm_run(&p, wj->shape);
        }
        wnat_output(wj, n, q0, qn, f0, fc, M);
        if (job->epi && !epi_is_relu(job->epi)) {
            int64_t r0 = 2 * ty0, r1 = imin(2 * ty1, g->out[1]);
            run_epilogue_rows(job->epi, job->epi_args, (n * F + f0) * g->P + r0 * g->out[2], fc, g->P,
                              (r1 - r0) * g->out[2]);
        }
    }
#endif
}

static int wnat_ok(const geo_t *g) {
    return g->G == 1 && g->in[0] == 1 && g->k[0] == 1 && g->out[0] == 1 && g->k[1] == 3 && g->k[2] == 3 &&
           g->s[1] == 1 && g->s[2] == 1 && g->dl[1] == 1 && g->dl[2] == 1;
}

/* Floats of the precomputed U (16 F C) for a Winograd descriptor, 0 if not applicable. */
static int64_t wnat_pack_floats(const geo_t *g) {
    return wnat_ok(g) ? 16 * g->F * g->C : 0;
}

/* Rows computed for `rows` rows cut into blocks of `block`, each block into tiles of R */
static int64_t padded_rows(int64_t rows, int64_t block, int64_t R) {
    return rows / block * cdiv(block, R) * R + cdiv(rows % block, R) * R;
}

/* The blocks of conv_wnat: tile rows per block (wj->rows), tile shape, block width (wj->tb)
 * and filters per task (wj->mb). A task is one block of tile rows of one image and a block of
 * filters: it builds the block's phase planes and input transform V (16 C tb floats, in this
 * thread's scratch), runs the 16 tile GEMMs into M (16 mb tb floats) and the output transform.
 * Filters are split only when the blocks of all images are fewer than the threads: a thread
 * that takes another filter block of a block transforms its input again, and threads on
 * different filter blocks stream different parts of U at the same time (measured in-graph,
 * resnet18_v1 batch 1, 2 threads: 256 channels 14x14, 2 blocks, 4 filter blocks -> 1:
 * 0.82-0.88x the time). Each (rows, shape) is costed as the tiles' padded multiply-adds
 * (weighted by the shape's measured speed; 1 + 0.3 x the excess when V + M outgrow
 * WNAT_VM_FLOATS, so that they stay in L2 with the stream of U) plus the input transform (6
 * multiply-add equivalents per element of V, its halo row included) per thread that builds
 * it, over the tasks' balance across the threads. Measured against the previous choice (the
 * least padded work with V + M within 1.5 MiB, then filter blocks for 4 tasks per thread;
 * TUNE_CONV 12), in-graph, resnet18_v1, 2 threads, paired rounds: batch 1 64 ch 56x56
 * 0.89-0.94x, 128 ch 28x28 0.92-0.97x, 256 ch 14x14 0.82-0.88x, whole call 0.94-0.97x (1
 * thread 0.96x); batch 8 whole call 0.99x. */
#define WNAT_VM_FLOATS 196608   /* 768 KiB of the 1 MiB L2 */
#define WNAT_V_FLOPS 6.0
static void wnat_blocks(wnat_job *wj, int64_t want, int64_t threads) {
    const geo_t *g = &wj->job->g;
    const int64_t C = g->C, F = g->F, N = g->N, TH = wj->TH, Wq = wj->Wq;
    const double budget = (double)(g_tune[TUNE_WBLOCK] > 0 ? g_tune[TUNE_WBLOCK] : WNAT_VM_FLOATS);
    double best = -1.0;
    for (int64_t r = 1; r <= TH; r++) {
        const int64_t nb = cdiv(TH, r);
        if (cdiv(TH, nb) != r) continue;   /* the same blocks as a smaller r */
        const int64_t blocks = N * nb;
        for (int sh = 0; sh < MM_NSHAPES; sh++) {
            const int64_t R = MM_SHAPES[sh].R, pw = mm_panel(sh), tb = cdiv(r * Wq, pw) * pw;
            int64_t tm = blocks >= threads ? 1 : imin(cdiv(want, blocks), cdiv(F, R));
            const int64_t mb = cdiv(cdiv(F, tm), R) * R;
            tm = cdiv(F, mb);
            const int64_t tasks = blocks * tm;
            double gemm = 16.0 * (double)C * (double)padded_rows(F, mb, R) * (double)tb * MM_SHAPES[sh].cost / 100.0;
            const double vm = 16.0 * (double)((C + mb) * tb);
            if (vm > budget) gemm *= 1.0 + 0.3 * (vm - budget) / budget;
            const double v = WNAT_V_FLOPS * 16.0 * (double)(C * tb) * (double)(r + 1) / (double)r;
            const double spread = (double)(cdiv(tasks, threads) * threads) / (double)tasks;
            const double wall = (double)blocks * (gemm + v * (double)imin(tm, threads)) * spread;
            if (best < 0.0 || wall < best) {
                best = wall;
                wj->rows = r;
                wj->shape = sh;
                wj->mb = mb;
                wj->tb = tb;
            }
        }
    }
}

/* conv_wnat's blocks before wnat_blocks (TUNE_CONV 12, for the A/B): the least padded GEMM
 * work with V and M (16 (C + F) tb floats) within 1.5 MiB (ties: larger blocks), then filter
 * blocks until there are `want` tasks */
static void wnat_blocks_v1(wnat_job *wj, int64_t want) {
    const geo_t *g = &wj->job->g;
    const int64_t C = g->C, F = g->F;
    double best = 0.0;
    for (int64_t r = 1; r <= wj->TH; r++) {
        int64_t nb = cdiv(wj->TH, r), rr = cdiv(wj->TH, nb), q = rr * wj->Wq;
        int sh = mm_pick(F, q);
        int64_t tbr = cdiv(q, mm_panel(sh)) * mm_panel(sh);
        if (r > 1 && 16 * (C + F) * tbr > 393216) break;
        double cost = (double)nb * mm_cost(sh, F, q) * (1.0 + 1.0 / (double)rr);
        if (r == 1 || cost <= best) { best = cost; wj->rows = rr; }
    }
    const int64_t outer = g->N * cdiv(wj->TH, wj->rows), qn = wj->rows * wj->Wq;
    wj->shape = mm_pick(F, qn);
    const int64_t PW = mm_panel(wj->shape), R = MM_SHAPES[wj->shape].R;
    wj->tb = cdiv(qn, PW) * PW;
    int64_t tm = outer < want ? imin(cdiv(want, outer), cdiv(F, R)) : 1;
    wj->mb = cdiv(cdiv(F, tm), R) * R;
}

static int conv_wnat(conv_job *job) {
    const geo_t *g = &job->g;
    wnat_job wj;
    memset(&wj, 0, sizeof wj);
    wj.job = job;
    wj.TH = cdiv(g->out[1], 2);
    wj.TW = cdiv(g->out[2], 2);
    wj.Hq = wj.TH + 1;
    wj.Wq = wj.TW + 1;
    const int64_t C = g->C, F = g->F, threads = symjit_get_num_threads();
    const int64_t want = tiles_want(2.0 * g->N * F * C * 16 * g->P / 4, threads);
    if (g_tune[TUNE_CONV] == 12) wnat_blocks_v1(&wj, want);
    else wnat_blocks(&wj, want, threads);
    const int64_t tm = cdiv(F, wj.mb), outer = g->N * cdiv(wj.TH, wj.rows);
    void *argv[1] = {&wj};
    if (job->wp) {
        wj.U = job->wp;
    } else {
        float *U = scratch(5, (size_t)(16 * F * C));
        if (!U) return 0;
        wj.U = U;
        symjit_parallel_for(wnat_weight_task, F, 1, argv);
    }
    job->serial = atomic_fetch_add(&g_call_serial, 1) + 1;
    symjit_parallel_for(wnat_task, outer * tm, 1, argv);
    return 1;
}

/* symjit_nn_conv with `wp`, the weights packed by symjit_nn_conv_pack (or NULL) */
NN_API void symjit_nn_conv_packed(const int64_t *d, const float *x, const float *w, const float *wp,
                                  const float *bias, float *y, symjit_kernel_fn epi, void **epi_args) {
    conv_job job = {d, geo_of(d), x, w, bias, y, epi, epi_args, 0, 0};
    job.wp = wp;
    void *argv[1] = {&job};
    const geo_t *g = &job.g;
    if (d[22] == 1) {
        if (g_tune[TUNE_CONV] != 3 && conv_depthwise_wide(&job)) return;
        int padded = g->in[0] == 1 && g->k[0] == 1 && g->out[0] == 1;
        symjit_parallel_for(padded ? conv_depthwise_padded_task : conv_depthwise_task, g->N * g->F, 1, argv);
    } else if (d[22] == 2 && native_on() && g_tune[TUNE_CONV] != 6 && wnat_ok(g) && conv_wnat(&job)) {
        return;
    } else if (d[22] == 2 && !native_on() && winograd_ok(g) && conv_winograd(&job)) {
        return;
    } else if (native_on()) {
        int fv = job.wp && d[22] == 0 ? conv_fvec_shape(g) : -1;
        if (fv >= 0 && g_tune[TUNE_CONV] != 4) conv_fvec(&job, fv);
        else if (!(g_tune[TUNE_CONV] != 1 && implicit_ok(g) && conv_implicit(&job))) conv_native(&job);
    } else {
        /* column blocks keep the im2col block (K x pb) within ~512 KiB of L2 */
        int64_t Kd = g->Cg * g->KK;
        split2(g->Fg, g->P, Kd, g->N * g->G, imax(64, CONV_COLUMN_FLOATS / imax(Kd, 1)), &job.mb, &job.pb);
        int64_t tasks = g->N * g->G * cdiv(g->Fg, job.mb) * cdiv(g->P, job.pb);
        symjit_parallel_for(conv_gemm_task, tasks, 1, argv);
    }
}

NN_API void symjit_nn_conv(const int64_t *d, const float *x, const float *w, const float *bias, float *y,
                           symjit_kernel_fn epi, void **epi_args) {
    symjit_nn_conv_packed(d, x, w, NULL, bias, y, epi, epi_args);
}

/* Channels per task when `outer` tasks already exist: enough blocks for every thread (twice
 * over) once the work is large, each block's columns (channels x per_channel floats) bounded. */
static int64_t channel_block(const geo_t *g, int64_t outer, int64_t per_channel) {
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)g->N * (double)g->F * (double)g->P * (double)(g->Cg * g->KK);
    int64_t want = flops < 2e5 ? 1 : 2 * threads;
    int64_t cb = g->Cg;
    if (outer < want) cb = cdiv(g->Cg, imin(cdiv(want, outer), g->Cg));
    int64_t cap = imax(1, (4 << 20) / imax(per_channel * 4, 1));   /* 4 MiB of columns at most */
    return imax(1, imin(cb, cap));
}

/* ---------------------------------------------------------------------------------------- */
/* Convolution backward (data) and Deconvolution: dx = col2im(W^T dy)                         */
/* ---------------------------------------------------------------------------------------- */

/* Same descriptor; here `out` is dy's spatial size and `in` dx's. Task: (n, group, channel block
 * [c0, c0 + mb) within the group) -- distinct tasks write distinct dx channels. */
static void conv_bwd_data_task(int64_t begin, int64_t end, void **argv) {
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    int64_t cb = job->mb;
    int64_t tc = cdiv(g->Cg, cb);
    int64_t Kd = g->Cg * g->KK;
    int pw = is_pointwise(g);
    const float *dy = job->x;
    float *dx = job->y;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / (g->G * tc), r = t % (g->G * tc);
        int64_t gi = r / tc, c0 = (r % tc) * cb, cc = imin(cb, g->Cg - c0);
        const float *dyg = dy + (n * g->F + gi * g->Fg) * g->P;
        const float *wg = job->w + gi * g->Fg * Kd + c0 * g->KK;   /* (Fg x Kd), columns [c0*KK, ...) */
        int64_t ch0 = n * g->C + gi * g->Cg + c0;
        float *dxc = dx + ch0 * g->IP;
        if (pw) {   /* dx[c, p] = sum_f w[f, c] dy[f, p] */
            float beta = 0.0f;
            if (job->bias) {
                for (int64_t i = 0; i < cc; i++)
                    for (int64_t j = 0; j < g->IP; j++) dxc[i * g->IP + j] = job->bias[gi * g->Cg + c0 + i];
                beta = 1.0f;
            }
            gemm_rm(1, 0, cc, g->P, g->Fg, wg, Kd, dyg, g->P, beta, dxc, g->P);
        } else {
            float *cols = scratch(0, (size_t)(cc * g->KK * g->P));
        if (!cols) return;
            if (!cols) return;
            gemm_rm(1, 0, cc * g->KK, g->P, g->Fg, wg, Kd, dyg, g->P, 0.0f, cols, g->P);
            for (int64_t i = 0; i < cc; i++) {
                float *plane = dxc + i * g->IP;
                float b0 = job->bias ? job->bias[gi * g->Cg + c0 + i] : 0.0f;
                for (int64_t j = 0; j < g->IP; j++) plane[j] = b0;
            }
            col2im(g, cols, 0, cc, dxc);
        }
        run_epilogue_rows(job->epi, job->epi_args, ch0 * g->IP, 1, cc * g->IP, cc * g->IP);
    }
}

/* dx (N, C, in) from dy (N, F, out) and w (F, C/G, k); `bias` (C,) optional (Deconvolution). */
NN_API void symjit_nn_conv_bwd_data(const int64_t *d, const float *dy, const float *w, const float *bias,
                                    float *dx, symjit_kernel_fn epi, void **epi_args) {
    conv_job job = {d, geo_of(d), dy, w, bias, dx, epi, epi_args, 0, 0};
    void *argv[1] = {&job};
    const geo_t *g = &job.g;
    job.mb = channel_block(g, g->N * g->G, g->P * g->KK);
    symjit_parallel_for(conv_bwd_data_task, g->N * g->G * cdiv(g->Cg, job.mb), 1, argv);
}

/* ---------------------------------------------------------------------------------------- */
/* Convolution backward (weight): dw_g = sum_n dy_g[n] cols_n^T                              */
/* ---------------------------------------------------------------------------------------- */

static void conv_bwd_weight_task(int64_t begin, int64_t end, void **argv) {
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    int64_t cb = job->mb;
    int64_t tc = cdiv(g->Cg, cb);
    int64_t Kd = g->Cg * g->KK;
    const float *dy = job->x, *x = job->w;
    float *dw = job->y;
    for (int64_t t = begin; t < end; t++) {
        int64_t gi = t / tc, c0 = (t % tc) * cb, cc = imin(cb, g->Cg - c0);
        float *dwg = dw + gi * g->Fg * Kd + c0 * g->KK;
        for (int64_t f = 0; f < g->Fg; f++) memset(dwg + f * Kd, 0, (size_t)(cc * g->KK) * sizeof(float));
        float *cols = scratch(0, (size_t)(cc * g->KK * g->P));
        if (!cols) return;
        for (int64_t n = 0; n < g->N; n++) {
            const float *xg = x + (n * g->C + gi * g->Cg) * g->IP;
            im2col(g, xg, c0, c0 + cc, 0, g->P, cols);
            const float *dyg = dy + (n * g->F + gi * g->Fg) * g->P;
            gemm_rm(0, 1, g->Fg, cc * g->KK, g->P, dyg, g->P, cols, g->P, 1.0f, dwg, Kd);
        }
    }
}

/* dw (F, C/G, k) from dy (N, F, out) and x (N, C, in). */
NN_API void symjit_nn_conv_bwd_weight(const int64_t *d, const float *dy, const float *x, float *dw) {
    conv_job job = {d, geo_of(d), dy, x, NULL, dw, NULL, NULL, 0, 0};
    void *argv[1] = {&job};
    job.mb = channel_block(&job.g, job.g.G, job.g.P * job.g.KK);
    symjit_parallel_for(conv_bwd_weight_task, job.g.G * cdiv(job.g.Cg, job.mb), 1, argv);
}

/* ---------------------------------------------------------------------------------------- */
/* Bias gradient: db[c] = sum over (outer, inner) of dy[outer, c, inner]                     */
/* ---------------------------------------------------------------------------------------- */

NN_CLONES
NN_API void symjit_nn_bias_bwd(int64_t outer, int64_t C, int64_t inner, const float *dy, float *db) {
    if (inner == 1) {
        double *acc = calloc((size_t)C, sizeof(double));
        if (!acc) return;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t c = 0; c < C; c++) acc[c] += dy[o * C + c];
        for (int64_t c = 0; c < C; c++) db[c] = (float)acc[c];
        free(acc);
        return;
    }
    for (int64_t c = 0; c < C; c++) {
        double s = 0.0;
        for (int64_t o = 0; o < outer; o++) {
            const float *r = dy + (o * C + c) * inner;
            float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int64_t i = 0;
            for (; i + 8 <= inner; i += 8)
                for (int l = 0; l < 8; l++) part[l] += r[i + l];
            for (; i < inner; i++) part[0] += r[i];
            for (int l = 0; l < 8; l++) s += part[l];
        }
        db[c] = (float)s;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Pooling                                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* Descriptor (int64): [0] planes (N*C)  [1..3] in D H W  [4..6] out D H W  [7..9] kernel
 *   [10..12] stride  [13..15] pad  [16] type: 0 max, 1 avg, 2 sum, 3 lp  [17] count_include_pad
 *   [18] p (lp)
 * Windows start at o*s - p; max skips padding (an empty window gives -FLT_MAX) and ignores NaN
 * like numpy's fmax; avg divides by the window clipped to [start, min(start+k, in+p)) (or to
 * the input without count_include_pad). */
typedef struct {
    const int64_t *d;
    const float *x, *dy, *y;
    float *out;
} pool_job;

static int64_t win_lo(int64_t o, int64_t s, int64_t p) { return o * s - p; }

static float pool_divisor(const int64_t *d, int64_t od, int64_t oh, int64_t ow) {
    int64_t o[3] = {od, oh, ow};
    float div = 1.0f;
    for (int i = 0; i < 3; i++) {
        int64_t in = d[1 + i], k = d[7 + i], s = d[10 + i], p = d[13 + i];
        int64_t st = win_lo(o[i], s, p), en = imin(st + k, in + p);
        int64_t size = d[17] ? en - st : imin(en, in) - imax(st, 0);
        div *= (float)size;
    }
    return div;
}

static float lp_root(float v, int64_t p) {
    if (p == 1) return v;
    if (p == 2) return sqrtf(v);
    if (p == 3) return cbrtf(v);
    return powf(v, 1.0f / (float)p);
}

static float lp_pow(float v, int64_t p) {
    if (p == 1) return v;
    if (p == 2) return v * v;
    if (p == 3) return v * v * v;
    return powf(v, (float)p);
}

NN_CLONES
static void pool_fwd_task(int64_t begin, int64_t end, void **argv) {
    pool_job *job = (pool_job *)argv[0];
    const int64_t *d = job->d;
    const int64_t D = d[1], H = d[2], W = d[3], OD = d[4], OH = d[5], OW = d[6];
    const int64_t type = d[16], pv = d[18], sw = d[12], kwn = d[9];
    /* the valid output columns [lo, hi) of each kernel column (the same for every row) */
    int64_t lo_s[64], hi_s[64];
    int64_t *lo = lo_s, *hi = hi_s;
    if (kwn > 64) {
        lo = malloc((size_t)kwn * 2 * sizeof(int64_t));
        if (!lo) return;
        hi = lo + kwn;
    }
    for (int64_t kw = 0; kw < kwn; kw++) {
        const int64_t off = kw - d[15];
        int64_t l = off >= 0 ? 0 : cdiv(-off, sw);
        int64_t h = W - off <= 0 ? 0 : cdiv(W - off, sw);
        lo[kw] = imin(l, OW);
        hi[kw] = imin(imax(h, lo[kw]), OW);
    }
    for (int64_t t = begin; t < end; t++) {
        const float *xp = job->x + t * D * H * W;
        float *yp = job->out + t * OD * OH * OW;
        for (int64_t od = 0; od < OD; od++)
            for (int64_t oh = 0; oh < OH; oh++) {
                float *yr = yp + (od * OH + oh) * OW;
                const float init = type == 0 ? -FLT_MAX : 0.0f;
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = init;
                int64_t d0 = win_lo(od, d[10], d[13]), h0 = win_lo(oh, d[11], d[14]);
                for (int64_t id = imax(d0, 0); id < imin(d0 + d[7], D); id++)
                    for (int64_t ih = imax(h0, 0); ih < imin(h0 + d[8], H); ih++) {
                        const float *xr = xp + (id * H + ih) * W;
                        for (int64_t kw = 0; kw < kwn; kw++) {
                            const int64_t off = kw - d[15], l = lo[kw], h = hi[kw];
                            if (type == 0) {
                                if (sw == 1) {
                                    for (int64_t ow = l; ow < h; ow++) {
                                        float v = xr[ow + off], o = yr[ow];
                                        yr[ow] = (v > o || o != o) ? v : o;
                                    }
                                } else {
                                    for (int64_t ow = l; ow < h; ow++) {
                                        float v = xr[ow * sw + off], o = yr[ow];
                                        yr[ow] = (v > o || o != o) ? v : o;
                                    }
                                }
                            } else if (type == 3) {
                                for (int64_t ow = l; ow < h; ow++) yr[ow] += lp_pow(xr[ow * sw + off], pv);
                            } else if (sw == 1) {
                                for (int64_t ow = l; ow < h; ow++) yr[ow] += xr[ow + off];
                            } else {
                                for (int64_t ow = l; ow < h; ow++) yr[ow] += xr[ow * sw + off];
                            }
                        }
                    }
                if (type == 1) {
                    for (int64_t ow = 0; ow < OW; ow++) yr[ow] = yr[ow] / pool_divisor(d, od, oh, ow);
                } else if (type == 3) {
                    for (int64_t ow = 0; ow < OW; ow++) yr[ow] = lp_root(yr[ow], pv);
                }
            }
    }
    if (lo != lo_s) free(lo);
}

/* Global pooling (one output per plane, the window is the whole unpadded plane): one reduction
 * per plane; max in the order of the general path, sums in 16 interleaved partial sums (another
 * summation order, within float rounding of the reference). */
NN_CLONES
static void pool_global_task(int64_t begin, int64_t end, void **argv) {
    pool_job *job = (pool_job *)argv[0];
    const int64_t *d = job->d;
    const int64_t n = d[1] * d[2] * d[3], type = d[16], pv = d[18];
    for (int64_t t = begin; t < end; t++) {
        const float *restrict xp = job->x + t * n;
        if (type == 0) {
            float o = -FLT_MAX;
            for (int64_t i = 0; i < n; i++) {
                float v = xp[i];
                o = (v > o || o != o) ? v : o;
            }
            job->out[t] = o;
            continue;
        }
        float part[16] = {0};
        int64_t i = 0;
        if (type == 3) {
            for (; i < n; i++) part[0] += lp_pow(xp[i], pv);
        } else {
            for (; i + 16 <= n; i += 16)
                for (int l = 0; l < 16; l++) part[l] += xp[i + l];
            for (; i < n; i++) part[i & 15] += xp[i];
        }
        float sum = 0.0f;
        for (int l = 0; l < 16; l++) sum += part[l];
        job->out[t] = type == 1 ? sum / pool_divisor(d, 0, 0, 0) : type == 3 ? lp_root(sum, pv) : sum;
    }
}

#ifdef NN_HAVE_AVX512
/* max pooling of one plane from its phase planes (padded with -FLT_MAX): output row oh, columns
 * [16 v, 16 v + 16) take the max over the taps (tap t at src + toff[t] + oh Wq + 16 v), eight
 * vectors at a time; vmaxps(v, acc) keeps acc where v is NaN, like the general path */
NN_AVX512 static void pool_max_plane_avx512(const float *src, const int64_t *toff, int64_t KK, int64_t OH,
                                            int64_t OW, int64_t Wq, float *y) {
    const int64_t per_row = cdiv(OW, 16), total = OH * per_row;
    for (int64_t i0 = 0; i0 < total; i0 += 8) {
        const float *base[8];
        float *dst[8];
        __mmask16 m[8];
        const int64_t cnt = plane_vector_group(src, y, OW, Wq, per_row, total, i0, base, dst, m);
        __m512 a[8];
        for (int u = 0; u < 8; u++) a[u] = _mm512_set1_ps(-FLT_MAX);
        for (int64_t t = 0; t < KK; t++) {
            const int64_t o = toff[t];
            for (int u = 0; u < 8; u++) a[u] = _mm512_max_ps(_mm512_loadu_ps(base[u] + o), a[u]);
        }
        for (int u = 0; u < 8; u++)
            if (u < cnt) _mm512_mask_storeu_ps(dst[u], m[u], a[u]);
    }
}
#endif

/* 2-D max pooling on the AVX-512 path: per plane, the input's stride phase planes padded with
 * -FLT_MAX (windows over the padding or past the input need no clipping), each output row a
 * few vectors with each tap one shifted load. */
static void pool_max2d_task(int64_t begin, int64_t end, void **argv) {
#ifdef NN_HAVE_AVX512
    pool_job *job = (pool_job *)argv[0];
    const int64_t *d = job->d;
    const int64_t H = d[2], W = d[3], OH = d[5], OW = d[6], KH = d[8], KW = d[9], sh = d[11], sw = d[12];
    const int64_t Hq = OH + (KH - 1) / sh, Wq = OW + (KW - 1) / sw, S = sh * sw;
    geo_t g;
    memset(&g, 0, sizeof g);
    g.in[1] = H; g.in[2] = W; g.p[1] = d[14]; g.p[2] = d[15]; g.s[1] = sh; g.s[2] = sw;
    const int64_t slack = Wq + KW + 32;
    float *planes = scratch(0, (size_t)(S * Hq * Wq + slack));
    if (!planes) return;
    for (int64_t i = 0; i < slack; i++) planes[S * Hq * Wq + i] = -FLT_MAX;
    int64_t toff[64], used = 0;
    for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t kw = 0; kw < KW; kw++) {
            toff[kh * KW + kw] = ((kh % sh) * sw + kw % sw) * Hq * Wq + (kh / sh) * Wq + kw / sw;
            used |= (int64_t)1 << ((kh % sh) * sw + kw % sw);
        }
    for (int64_t t = begin; t < end; t++) {
        for (int64_t a = 0; a < sh; a++)
            for (int64_t b = 0; b < sw; b++)
                if ((used >> (a * sw + b)) & 1)
                    pad_phase_plane_fill(&g, job->x + t * H * W, a, b, Hq, Wq, planes + (a * sw + b) * Hq * Wq,
                                         t != begin, -FLT_MAX);
        pool_max_plane_avx512(planes, toff, KH * KW, OH, OW, Wq, job->out + t * OH * OW);
    }
#endif
}

NN_API void symjit_nn_pool(const int64_t *d, const float *x, float *y) {
    pool_job job = {d, x, NULL, NULL, y};
    void *argv[1] = {&job};
    int64_t work = d[4] * d[5] * d[6] * d[7] * d[8] * d[9];
    int64_t grain = imax(1, 32768 / imax(work, 1));
    int global = d[4] == 1 && d[5] == 1 && d[6] == 1 && d[7] == d[1] && d[8] == d[2] && d[9] == d[3] &&
                 d[13] == 0 && d[14] == 0 && d[15] == 0;
    if (global) {
        symjit_parallel_for(pool_global_task, d[0], imax(1, 32768 / imax(d[1] * d[2] * d[3], 1)), argv);
    } else if (native_on() && d[16] == 0 && d[1] == 1 && d[4] == 1 && d[7] == 1 && d[8] * d[9] <= 64 &&
               d[11] * d[12] <= 16) {
        int64_t plane = (d[5] + (d[8] - 1) / d[11]) * (d[6] + (d[9] - 1) / d[12]) * d[11] * d[12];
        symjit_parallel_for(pool_max2d_task, d[0], imax(1, 16384 / imax(plane, 1)), argv);
    } else {
        symjit_parallel_for(pool_fwd_task, d[0], grain, argv);
    }
}

static void pool_bwd_task(int64_t begin, int64_t end, void **argv) {
    pool_job *job = (pool_job *)argv[0];
    const int64_t *d = job->d;
    const int64_t D = d[1], H = d[2], W = d[3], OD = d[4], OH = d[5], OW = d[6];
    const int64_t type = d[16], pv = d[18];
    for (int64_t t = begin; t < end; t++) {
        const float *xp = job->x + t * D * H * W;
        const float *dyp = job->dy + t * OD * OH * OW;
        const float *yp = job->y + t * OD * OH * OW;
        float *dxp = job->out + t * D * H * W;
        memset(dxp, 0, (size_t)(D * H * W) * sizeof(float));
        for (int64_t od = 0; od < OD; od++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t o = (od * OH + oh) * OW + ow;
                    int64_t d0 = win_lo(od, d[10], d[13]), h0 = win_lo(oh, d[11], d[14]);
                    int64_t w0 = win_lo(ow, d[12], d[15]);
                    int64_t d1 = imin(d0 + d[7], D), h1 = imin(h0 + d[8], H), w1 = imin(w0 + d[9], W);
                    d0 = imax(d0, 0); h0 = imax(h0, 0); w0 = imax(w0, 0);
                    float gv = dyp[o];
                    if (type == 0) {
                        float best = -INFINITY;
                        int64_t arg = -1;
                        for (int64_t id = d0; id < d1; id++)
                            for (int64_t ih = h0; ih < h1; ih++)
                                for (int64_t iw = w0; iw < w1; iw++) {
                                    float v = xp[(id * H + ih) * W + iw];
                                    if (v > best) { best = v; arg = (id * H + ih) * W + iw; }
                                }
                        if (arg >= 0) dxp[arg] += gv;
                        continue;
                    }
                    if (type == 1) gv = gv / pool_divisor(d, od, oh, ow);
                    for (int64_t id = d0; id < d1; id++)
                        for (int64_t ih = h0; ih < h1; ih++)
                            for (int64_t iw = w0; iw < w1; iw++) {
                                int64_t i = (id * H + ih) * W + iw;
                                if (type == 3 && pv != 1) {
                                    float yv = yp[o];
                                    float term = gv * lp_pow(xp[i] / yv, pv - 1);
                                    dxp[i] += yv == 0.0f ? 0.0f : term;
                                } else {
                                    dxp[i] += gv;
                                }
                            }
                }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Convolution followed by max pooling (one pass: only the pooled output leaves the cache)     */
/* ---------------------------------------------------------------------------------------- */

/* Descriptor: [0..22] the convolution's (above), [23..41] the pooling's over the convolution's
 * output (type max), [42] 1 if relu applies to the convolution's output before pooling.
 *
 * A network's stem (resnet: 7x7 convolution, relu, 3x3 stride-2 max pooling) writes a
 * convolution output four times the size of the pooled one, and the pooling reads it back:
 * at batch 1 that round trip goes to memory (the weights streamed every call have evicted
 * the arena). Here one task computes the convolution rows that a block of pooled rows needs
 * (implicit GEMM, as conv_implicit, into a per-thread buffer that stays in L2: the windows'
 * overlap rows are computed by both neighbouring blocks) and pools them at once.
 *
 * Fast path: AVX-512 tiles, plain 2-D convolution (one group, not 1x1 stride 1, weights not
 * packed for the filter-vector tiles). Otherwise, image by image, the convolution runs whole
 * into scratch, then the pooling: the same values either way (the same tiles and pooling
 * order; a convolution's images are independent). */
typedef struct {
    conv_job cj;
    const int64_t *pd;
    int relu;
    int64_t PB, tp, tm;   /* pooled rows per block, pooled-row blocks, filter blocks */
    int64_t RBc;          /* most convolution rows a block needs */
} conv_pool_job;

#ifdef NN_HAVE_AVX512
/* Max pooling of the rows [ph0, ph1) of one plane from its convolution rows [cr0, cr0 + nr)
 * (`src`, OW floats apart). First each pooled row's vertical maxima go to row ph - ph0 of
 * `tmp` (TW floats apart, column ow at pw_ + ow, -FLT_MAX around: the caller fills it once;
 * TW covers the reads of the last vector's lanes too), then the horizontal windows read them.
 * vmaxps(v, acc) keeps acc where v is NaN, as pool_max_plane_avx512; windows over no row give
 * -FLT_MAX. */
NN_AVX512 static void conv_pool_rows(const int64_t *pd, const float *src, int64_t cr0, int64_t nr, int64_t ph0,
                                     int64_t ph1, float *tmp, int64_t TW, float *out) {
    const int64_t OH = pd[2], OW = pd[3], POW = pd[6], KH = pd[8], KW = pd[9], sh = pd[11], sw = pd[12];
    const int64_t ph_ = pd[14], pw_ = pd[15];
    const __m512 lowest = _mm512_set1_ps(-FLT_MAX);
    for (int64_t ph = ph0; ph < ph1; ph++) {
        const int64_t r0 = imax(ph * sh - ph_, imax(cr0, 0)), r1 = imin(ph * sh - ph_ + KH, imin(cr0 + nr, OH));
        float *t = tmp + (ph - ph0) * TW + pw_;
        for (int64_t ow = 0; ow < OW; ow += 16) {
            const __mmask16 m = OW - ow >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (OW - ow)) - 1u);
            __m512 acc = lowest;
            for (int64_t r = r0; r < r1; r++)
                acc = _mm512_max_ps(_mm512_maskz_loadu_ps(m, src + (r - cr0) * OW + ow), acc);
            _mm512_mask_storeu_ps(t + ow, m, acc);
        }
    }
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i strided = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                               _mm512_set1_epi32((int)sw));
    for (int64_t ph = ph0; ph < ph1; ph++) {
        const float *row = tmp + (ph - ph0) * TW;
        float *y = out + ph * POW;
        for (int64_t pw = 0; pw < POW; pw += 16) {
            const __mmask16 m = POW - pw >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (POW - pw)) - 1u);
            __m512 acc = lowest;
            for (int64_t kw = 0; kw < KW; kw++) {
                const float *t = row + pw * sw + kw;   /* lane i: t[i sw] */
                __m512 v;
                if (sw == 1) v = _mm512_loadu_ps(t);
                else if (sw == 2) v = _mm512_permutex2var_ps(_mm512_loadu_ps(t), even, _mm512_loadu_ps(t + 16));
                else v = _mm512_mask_i32gather_ps(lowest, m, strided, t, 4);
                acc = _mm512_max_ps(v, acc);
            }
            _mm512_mask_storeu_ps(y + pw, m, acc);
        }
    }
}

static void conv_pool_task(int64_t begin, int64_t end, void **argv) {
    conv_pool_job *job = (conv_pool_job *)argv[0];
    conv_job *cj = &job->cj;
    const geo_t *g = &cj->g;
    const int64_t *pd = job->pd;
    const int64_t OH = g->out[1], OW = g->out[2], POH = pd[5], POW = pd[6], Wq = cj->Wp;
    const int64_t TW = (POW + 16) * pd[12] + pd[9] + 16;   /* a padded row of vertical maxima */
    const size_t tmp_n = (size_t)(job->PB * TW), rows_n = (size_t)(cj->mb * job->RBc * OW);
    float *buf = implicit_planes_buffer(cj), *rows = scratch(8, rows_n + tmp_n);
    if (!buf || !rows) return;
    float *tmp = rows + rows_n;
    for (size_t i = 0; i < tmp_n; i++) tmp[i] = -FLT_MAX;   /* columns [pw_, pw_ + OW) are rewritten per row */
    for (int64_t t = begin; t < end; t++) {
        const int64_t mi = t % job->tm, pi = (t / job->tm) % job->tp, n = t / (job->tm * job->tp);
        const int64_t f0 = mi * cj->mb, mc = imin(cj->mb, g->F - f0);
        const int64_t ph0 = pi * job->PB, ph1 = imin(POH, ph0 + job->PB);
        /* the convolution rows the pooled rows' windows cover */
        const int64_t cr0 = imin(imax(ph0 * pd[11] - pd[14], 0), OH);
        const int64_t cr1 = imax(imin((ph1 - 1) * pd[11] - pd[14] + pd[8], OH), cr0);
        if (cr1 > cr0) {
            if (t_cols_serial != cj->serial || t_cols_tag != t / job->tm || t_cols_ptr != buf) {
                implicit_block_planes(cj, n, 0, cr0, buf);
                t_cols_serial = cj->serial;
                t_cols_tag = t / job->tm;
                t_cols_ptr = buf;
            }
            mm_t p = implicit_tiles(cj, buf, f0, mc);
            p.c = rows;              /* filter r, row cr0 + i, column ow at rows[r RBc OW + i OW + ow] */
            p.csr = job->RBc * OW;
            p.cols = (cr1 - cr0) * Wq;
            p.relu = job->relu;
            mm_run(&p, cj->shape);
        }
        for (int64_t r = 0; r < mc; r++)
            conv_pool_rows(pd, rows + r * job->RBc * OW, cr0, cr1 - cr0, ph0, ph1, tmp, TW,
                           cj->y + (n * g->F + f0 + r) * POH * POW);
    }
}
#endif

/* The fast path's blocks (see conv_pool_job); 0 if it does not apply. */
static int conv_pool_fast(conv_pool_job *job) {
#ifdef NN_HAVE_AVX512
    conv_job *cj = &job->cj;
    const geo_t *g = &cj->g;
    const int64_t *pd = job->pd;
    if (!native_on() || cj->wp || cj->d[22] != 0 || g->G != 1 || !implicit_ok(g) || pd[9] > 64 ||
        g_tune[TUNE_CONV] == 7)
        return 0;
    const int64_t KH = g->k[1], KW = g->k[2], dh = g->dl[1], dw = g->dl[2], sh = g->s[1], sw = g->s[2];
    const int64_t OH = g->out[1], OW = g->out[2], POH = pd[5];
    const int64_t halo = (KH - 1) * dh / sh, Wq = OW + (KW - 1) * dw / sw, Kd = g->Cg * g->KK;
    if (Wq < 6 || sh * sw > 16) return 0;   /* as conv_implicit */
    cj->phase_used = phases_used(g);
    cj->shape = mm_pick(g->F, OH * Wq);
    const int64_t R = MM_SHAPES[cj->shape].R;
    /* pooled rows per block: the convolution rows of all filters within ~CONV_COLUMN_FLOATS
     * (L2; at least one pooled row), then more blocks while there are fewer than the pool
     * wants (down to 4 pooled rows: the overlap rows are computed twice); then filter blocks */
    const int64_t psh = pd[11], pkh = pd[8];
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)g->N * (double)g->F * (double)(OH * Wq) * (double)Kd;
    int64_t want = tiles_want(flops, threads);
    /* pooled rows per block and filter blocks: at least `want` tasks, each block's convolution
     * rows (of its filters) within ~CONV_COLUMN_FLOATS (L2); of those, the least convolution
     * rows computed twice (the windows' overlap), then the fewest filter blocks (each builds
     * its row block's phase planes again) */
    double best = 0.0;
    for (int64_t tm = 1; tm <= cdiv(g->F, R); tm++) {
        const int64_t mb = cdiv(cdiv(g->F, tm), R) * R;
        if (tm > 1 && cdiv(g->F, mb) < tm) continue;   /* the same blocks as fewer */
        int64_t pb = imin(imax(1, ((CONV_COLUMN_FLOATS / imax(mb * OW, 1)) - pkh) / psh + 1), POH);
        pb = imin(pb, imax(1, cdiv(POH, cdiv(want, g->N * tm))));
        const int64_t tp = cdiv(POH, pb), rbc = imax(1, imin((pb - 1) * psh + pkh, OH));
        const double cost = (double)(tp * rbc) / (double)OH + 0.01 * (double)tm +
                            (g->N * tp * tm < want ? 1.0 : 0.0);
        if (tm == 1 || cost < best) {
            best = cost;
            job->PB = pb;
            cj->mb = mb;
        }
    }
    job->tp = cdiv(POH, job->PB);
    job->RBc = imax(1, imin((job->PB - 1) * psh + pkh, OH));
    job->tm = cdiv(g->F, cj->mb);
    cj->Hp = job->RBc + halo;
    cj->Wp = Wq;
    cj->koff = implicit_tap_offsets(cj);
    if (!cj->koff) return 1;   /* out of memory: recorded, nothing to fall back to */
    cj->serial = atomic_fetch_add(&g_call_serial, 1) + 1;
    void *argv[1] = {job};
    symjit_parallel_for(conv_pool_task, g->N * job->tp * job->tm, 1, argv);
    return 1;
#else
    (void)job;
    return 0;
#endif
}

/* y (N, F, pooled H, W) = max pooling (descriptor d + 23) of the convolution (descriptor d) of x
 * with w (packed as symjit_nn_conv_pack: `wp`, or NULL) and bias, relu'd first when d[42]. */
NN_API void symjit_nn_conv_pool(const int64_t *d, const float *x, const float *w, const float *wp,
                                const float *bias, float *y) {
    conv_pool_job job;
    memset(&job, 0, sizeof job);
    job.cj.d = d;
    job.cj.g = geo_of(d);
    job.cj.x = x;
    job.cj.w = w;
    job.cj.wp = wp;
    job.cj.bias = bias;
    job.cj.y = y;
    job.pd = d + 23;
    job.relu = d[42] != 0;
    const geo_t *g = &job.cj.g;
    if (job.pd[0] != g->N * g->F || job.pd[1] != g->out[0] || job.pd[2] != g->out[1] || job.pd[3] != g->out[2] ||
        job.pd[16] != 0) {
        symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT, "nnkernels: conv_pool: pooling descriptor (%lld planes of %lldx%lld, "
                         "type %lld) does not pool this convolution's output (%lld planes of %lldx%lld, max)",
                         (long long)job.pd[0], (long long)job.pd[2], (long long)job.pd[3], (long long)job.pd[16],
                         (long long)(g->N * g->F), (long long)g->out[1], (long long)g->out[2]);
        return;
    }
    if (conv_pool_fast(&job)) return;
    /* image by image, so that the scratch holds one image's convolution output */
    int64_t d1[43];
    memcpy(d1, d, sizeof d1);
    d1[0] = 1;
    d1[23] = g->F;
    float *one = scratch(8, (size_t)(g->F * g->P));
    if (!one) return;
    void *epi_args[2] = {one, one};
    for (int64_t n = 0; n < g->N; n++) {
        symjit_nn_conv_packed(d1, x + n * g->C * g->IP, w, wp, bias, one, job.relu ? symjit_nn_epi_relu : NULL,
                              epi_args);
        symjit_nn_pool(d1 + 23, one, y + n * g->F * job.pd[5] * job.pd[6]);
    }
}

/* dx (planes, in) from dy and y (planes, out) and x (planes, in): the gradient of symjit_nn_pool;
 * max routes each output gradient to the first (row-major) strict maximum of its window. */
NN_API void symjit_nn_pool_bwd(const int64_t *d, const float *dy, const float *x, const float *y, float *dx) {
    pool_job job = {d, x, dy, y, dx};
    void *argv[1] = {&job};
    symjit_parallel_for(pool_bwd_task, d[0], 1, argv);
}

/* ---------------------------------------------------------------------------------------- */
/* Embedding                                                                                 */
/* ---------------------------------------------------------------------------------------- */

/* index kinds: 0 float32, 1 float64, 2 int32, 3 int64; truncated toward zero, NaN -> 0,
 * clipped to [0, rows - 1] */
static int64_t embed_index(const void *idx, int64_t kind, int64_t i, int64_t rows) {
    double v;
    switch (kind) {
    case 0: v = ((const float *)idx)[i]; break;
    case 1: v = ((const double *)idx)[i]; break;
    case 2: return imin(imax(((const int32_t *)idx)[i], 0), rows - 1);
    default: return imin(imax(((const int64_t *)idx)[i], 0), rows - 1);
    }
    if (v != v) return 0;
    v = trunc(v);
    if (v <= 0.0) return 0;
    if (v >= (double)(rows - 1)) return rows - 1;
    return (int64_t)v;
}

typedef struct {
    int64_t n, rows, dim, kind;
    const void *idx;
    const float *src;
    float *dst;
} embed_job;

static void embed_task(int64_t begin, int64_t end, void **argv) {
    embed_job *job = (embed_job *)argv[0];
    for (int64_t i = begin; i < end; i++) {
        int64_t r = embed_index(job->idx, job->kind, i, job->rows);
        memcpy(job->dst + i * job->dim, job->src + r * job->dim, (size_t)job->dim * sizeof(float));
    }
}

/* out[i, :] = weight[clip(trunc(idx[i])), :] for n indices */
NN_API void symjit_nn_embedding(int64_t n, int64_t rows, int64_t dim, int64_t kind, const void *idx,
                                const float *weight, float *out) {
    embed_job job = {n, rows, dim, kind, idx, weight, out};
    void *argv[1] = {&job};
    symjit_parallel_for(embed_task, n, imax(1, 16384 / imax(dim, 1)), argv);
}

/* dw (rows, dim) = scatter-add of dy rows at the indices; each task owns a column range */
static void embed_bwd_task(int64_t begin, int64_t end, void **argv) {
    embed_job *job = (embed_job *)argv[0];
    int64_t j0 = begin * 64, j1 = imin(end * 64, job->dim);
    for (int64_t r = 0; r < job->rows; r++) memset(job->dst + r * job->dim + j0, 0, (size_t)(j1 - j0) * sizeof(float));
    for (int64_t i = 0; i < job->n; i++) {
        int64_t r = embed_index(job->idx, job->kind, i, job->rows);
        float *drow = job->dst + r * job->dim;
        const float *srow = job->src + i * job->dim;
        for (int64_t j = j0; j < j1; j++) drow[j] += srow[j];
    }
}

NN_API void symjit_nn_embedding_bwd(int64_t n, int64_t rows, int64_t dim, int64_t kind, const void *idx,
                                    const float *dy, float *dw) {
    embed_job job = {n, rows, dim, kind, idx, dy, dw};
    void *argv[1] = {&job};
    symjit_parallel_for(embed_bwd_task, cdiv(dim, 64), imax(1, 4096 / imax(n, 1)), argv);
}

/* ---------------------------------------------------------------------------------------- */
/* Channel-blocked layout (NCHW16c): a tensor (N, C, H, W) stored as (N, C/16, H, W, 16), the */
/* 16 channels of a block at one pixel one vector. passes/blocked_layout.py moves chains of   */
/* pointwise (1x1) and 3x3 depthwise convolutions into it, with conversions at the chains'   */
/* ends. There a depthwise output vector is 9 FMAs of aligned channel vectors (no shifted or  */
/* masked loads along a row; stride 2 costs what stride 1 does), and a pointwise convolution  */
/* is tiles of R pixels x 16V filters: per input channel, a broadcast input value times V    */
/* packed filter vectors. Channel counts are multiples of 16 (the pass guarantees it).        */
/* ---------------------------------------------------------------------------------------- */

#define BLK 16

#ifdef NN_HAVE_AVX512
/* 16 channel planes (P floats apart) x np <= 16 pixels from p0 -> y[p0 + i][16] */
NN_AVX512 static void reorder_in_avx512(const float *x, int64_t P, int64_t p0, int64_t np, float *y) {
    const __mmask16 m = lanes_below(np);
    __m512 r[16];
    if (np == BLK)
        for (int c = 0; c < BLK; c++) r[c] = _mm512_loadu_ps(x + c * P + p0);   /* masked loads: 1.25x slower */
    else
        for (int c = 0; c < BLK; c++) r[c] = _mm512_maskz_loadu_ps(m, x + c * P + p0);
    transpose16x16(r);
    for (int64_t i = 0; i < np; i++) _mm512_storeu_ps(y + (p0 + i) * BLK, r[i]);
}

/* the inverse: pixels [p0, p0 + np) of a block x[p][16] -> 16 channel planes of y */
NN_AVX512 static void reorder_out_avx512(const float *x, int64_t P, int64_t p0, int64_t np, float *y) {
    const __mmask16 m = lanes_below(np);
    __m512 r[16];
    for (int i = 0; i < BLK; i++) r[i] = i < np ? _mm512_loadu_ps(x + (p0 + i) * BLK) : _mm512_setzero_ps();
    transpose16x16(r);
    for (int c = 0; c < BLK; c++) _mm512_mask_storeu_ps(y + c * P + p0, m, r[c]);
}
#endif

typedef struct {
    const float *x;
    float *y;
    int64_t P, tiles;   /* pixels per plane; blocks of 16 pixels per plane */
    int to_blocked;
} reorder_job;

/* tasks: (image and channel block, 16 pixels); both layouts put image n's channel block cb at
 * (n C / 16 + cb) 16 P floats */
static void reorder_task(int64_t begin, int64_t end, void **argv) {
    const reorder_job *j = (const reorder_job *)argv[0];
    const int64_t P = j->P;
    for (int64_t t = begin; t < end; t++) {
        const int64_t p0 = (t % j->tiles) * BLK, np = imin(BLK, P - p0);
        const float *x = j->x + (t / j->tiles) * BLK * P;
        float *y = j->y + (t / j->tiles) * BLK * P;
#ifdef NN_HAVE_AVX512
        if (native_on()) {
            if (j->to_blocked) reorder_in_avx512(x, P, p0, np, y);
            else reorder_out_avx512(x, P, p0, np, y);
            continue;
        }
#endif
        for (int64_t p = p0; p < p0 + np; p++)
            for (int64_t c = 0; c < BLK; c++) {
                if (j->to_blocked) y[p * BLK + c] = x[c * P + p];
                else y[c * P + p] = x[p * BLK + c];
            }
    }
}

static void reorder(const int64_t *d, const float *x, float *y, int to_blocked) {
    const int64_t N = d[0], C = d[1], P = d[2];
    if (C % BLK != 0) {
        symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT, "nnkernels: blocked layout: %lld channels, expected a multiple of 16",
                         (long long)C);
        return;
    }
    reorder_job job = {x, y, P, cdiv(P, BLK), to_blocked};
    void *argv[1] = {&job};
    symjit_parallel_for(reorder_task, N * (C / BLK) * job.tiles, 64, argv);
}

/* d = (N, C, P): x (N, C, P) -> y (N, C/16, P, 16) */
NN_API void symjit_nn_to_blocked(const int64_t *d, const float *x, float *y) { reorder(d, x, y, 1); }

/* d = (N, C, P): x (N, C/16, P, 16) -> y (N, C, P) */
NN_API void symjit_nn_from_blocked(const int64_t *d, const float *x, float *y) { reorder(d, x, y, 0); }

/* Descriptor of symjit_nn_conv_blocked (int64):
 *   0 kind (BLOCKED_POINTWISE, BLOCKED_DEPTHWISE), 1 N, 2 C, 3 F, 4 H, 5 W, 6 OH, 7 OW,
 *   8 stride (depthwise: 1 or 2, both directions; pointwise: 1), 9 relu, 10 V.
 * Pointwise (1x1, stride 1, no padding): x (N, C/16, H, W, 16) -> y (N, F/16, H, W, 16);
 * wp: the weights (F, C) packed as panels [F / 16V][C][16V] (filter f: panel f / 16V, lane
 * f % 16V). Depthwise (3x3, padding 1, C == F): wp [C/16][9][16] (tap kh 3 + kw of channel
 * 16 cb + l at (cb 9 + kh 3 + kw) 16 + l). bias: F floats or NULL. relu: store relu(result).
 * Direct (kind BLOCKED_DIRECT, the convolution at a chain's entry, e.g. a network's stem): x in
 * NCHW (N, C, H, W), any C, one group, no dilation -> y (N, F/16, OH, OW, 16); the descriptor
 * goes on with 11 KH, 12 KW, 13 pad_h, 14 pad_w (stride d[8] both directions); wp: the weights
 * (F, C, KH, KW) packed as panels [F / 16V][C][KH][KW][16V]. */
enum { BLOCKED_POINTWISE = 0, BLOCKED_DEPTHWISE = 1, BLOCKED_DIRECT = 2 };

typedef struct {
    const float *x, *wp, *bias;
    float *y;
    int64_t N, C, F, H, W, OH, OW, S, V, R;
    int relu;
    int64_t panels, ptiles, pb, pg;   /* pointwise: 16V-filter panels, R-pixel tiles; blocks of each per task */
    int64_t rb;                       /* depthwise: row blocks per plane; direct: per image */
    int64_t KH, KW, PH, PW;           /* direct: kernel and padding */
} blocked_job;

#ifdef NN_HAVE_AVX512
/* one step of a tile of R rows x V filter vectors (the blocked pointwise and direct tiles):
 * acc[r][v] += x[off[r]] * w[16 v, 16 v + 16) */
#define RV_STEP(R, V, acc, w, x, off)                                                                       \
    do {                                                                                                   \
        __m512 b_[V];                                                                                      \
        for (int v_ = 0; v_ < V; v_++) b_[v_] = _mm512_loadu_ps((w) + 16 * v_);                            \
        for (int r_ = 0; r_ < R; r_++) {                                                                   \
            const __m512 a_ = _mm512_set1_ps((x)[(off)[r_]]);                                              \
            for (int v_ = 0; v_ < V; v_++) (acc)[r_][v_] = _mm512_fmadd_ps(a_, b_[v_], (acc)[r_][v_]);      \
        }                                                                                                  \
    } while (0)

/* pointwise tile: pixels [p0, p0 + R) x the panel's 16V filters. x: the image's input at
 * channel block 0, pixel 0; wp: the panel; bias: the panel's 16V (or NULL); y: the panel's
 * first output block at pixel 0. FULL: every row inside the plane (constant offsets, plain
 * stores); else rows past the plane recompute pixel p0 and are not stored. */
#define PWB_TILE(R, V, FULL)                                                                                \
    NN_AVX512 static void pwb_tile_##R##x##V##_##FULL(const float *x, int64_t P, int64_t CB, const float *wp, \
                                                      const float *bias, float *y, int64_t p0, int relu) {   \
        const int64_t nr = FULL ? R : imin(R, P - p0);                                                     \
        if (CB < 1) __builtin_unreachable();   /* C >= 16: lets GCC keep the sums in registers */         \
        __m512 acc[R][V], b0[V];                                                                           \
        for (int v = 0; v < V; v++) b0[v] = bias ? _mm512_loadu_ps(bias + 16 * v) : _mm512_setzero_ps();    \
        for (int r = 0; r < R; r++)                                                                        \
            for (int v = 0; v < V; v++) acc[r][v] = b0[v];                                                 \
        if (FULL && p0 + 2 * R <= P && g_tune[TUNE_PREFETCH] != 10)                                        \
            for (int v = 0; v < V; v++)   /* for writing: the lines the next tile stores */                \
                for (int r = 0; r < R; r++) __builtin_prefetch(y + (v * P + p0 + R + r) * BLK, 1, 3);       \
        int64_t off[R];                                                                                    \
        for (int r = 0; r < R; r++) off[r] = (FULL || r < nr ? r : 0) * BLK;                               \
        const float *xp = x + p0 * BLK;                                                                    \
        for (int64_t cb = 0; cb < CB; cb++) {                                                              \
            const float *xc = xp + cb * P * BLK, *w = wp + cb * BLK * BLK * V;                             \
            for (int ci = 0; ci < BLK; ci++) RV_STEP(R, V, acc, w + ci * BLK * V, xc + ci, off);            \
        }                                                                                                  \
        for (int v = 0; v < V; v++) {  /* (two store loops: a relu'd copy of the sums would spill them) */ \
            float *yv = y + (v * P + p0) * BLK;                                                            \
            if (relu)                                                                                      \
                for (int r = 0; r < R; r++) {                                                              \
                    if (FULL || r < nr) _mm512_storeu_ps(yv + r * BLK, relu_ps(acc[r][v]));                \
                }                                                                                          \
            else                                                                                           \
                for (int r = 0; r < R; r++)                                                                \
                    if (FULL || r < nr) _mm512_storeu_ps(yv + r * BLK, acc[r][v]);                         \
        }                                                                                                  \
    }
#define PWB_TILES(R, V) PWB_TILE(R, V, 0) PWB_TILE(R, V, 1)
PWB_TILES(6, 4)
PWB_TILES(7, 4)
PWB_TILES(8, 3)
PWB_TILES(12, 2)
PWB_TILES(14, 1)

typedef void (*pwb_tile_fn)(const float *, int64_t, int64_t, const float *, const float *, float *, int64_t, int);

/* the tile of R rows x V vectors: whole (every row inside the plane) or not */
static pwb_tile_fn pwb_tile_for(int64_t R, int64_t V, int full) {
    switch (V) {
    case 4: return R == 7 ? (full ? pwb_tile_7x4_1 : pwb_tile_7x4_0) : (full ? pwb_tile_6x4_1 : pwb_tile_6x4_0);
    case 3: return full ? pwb_tile_8x3_1 : pwb_tile_8x3_0;
    case 2: return full ? pwb_tile_12x2_1 : pwb_tile_12x2_0;
    default: return full ? pwb_tile_14x1_1 : pwb_tile_14x1_0;
    }
}
#endif

/* the portable pointwise tile (same arguments as PWB_TILE's, any R and V) */
NN_CLONES
static void pwb_tile_portable(const float *x, int64_t P, int64_t CB, const float *wp, const float *bias, float *y,
                              int64_t p0, int relu, int64_t R, int64_t V) {
    float acc[64];
    for (int64_t p = p0; p < imin(P, p0 + R); p++) {
        for (int64_t j = 0; j < 16 * V; j++) acc[j] = bias ? bias[j] : 0.0f;
        for (int64_t c = 0; c < CB * BLK; c++) {
            const float a = x[((c / BLK) * P + p) * BLK + c % BLK];
            const float *w = wp + c * 16 * V;
            for (int64_t j = 0; j < 16 * V; j++) acc[j] += a * w[j];
        }
        for (int64_t v = 0; v < V; v++)
            for (int64_t l = 0; l < BLK; l++) {
                const float r = acc[16 * v + l];
                y[(v * P + p) * BLK + l] = relu ? relu_f(r) : r;
            }
    }
}

/* tasks: (image, block of pixel tiles, group of panels); panels outer within a task, so a
 * panel's weights stay in cache while the task's pixel tiles pass */
static void pwb_task(int64_t begin, int64_t end, void **argv) {
    const blocked_job *j = (const blocked_job *)argv[0];
    const int64_t P = j->H * j->W, CB = j->C / BLK, per = j->pb * j->pg, pw = 16 * j->V;
#ifdef NN_HAVE_AVX512
    const pwb_tile_fn full = native_on() ? pwb_tile_for(j->R, j->V, 1) : NULL;
    const pwb_tile_fn part = native_on() ? pwb_tile_for(j->R, j->V, 0) : NULL;
#endif
    for (int64_t t = begin; t < end; t++) {
        const int64_t n = t / per, ib = (t % per) / j->pg, ig = (t % per) % j->pg;
        const int64_t t0 = ib * j->ptiles / j->pb, t1 = (ib + 1) * j->ptiles / j->pb;
        const int64_t q0 = ig * j->panels / j->pg, q1 = (ig + 1) * j->panels / j->pg;
        const float *x = j->x + n * j->C * P;
        for (int64_t q = q0; q < q1; q++) {
            const float *wp = j->wp + q * j->C * pw, *bias = j->bias ? j->bias + q * pw : NULL;
            float *y = j->y + (n * j->F + q * pw) * P;
            for (int64_t tile = t0; tile < t1; tile++) {
#ifdef NN_HAVE_AVX512
                if (full) {
                    ((tile + 1) * j->R <= P ? full : part)(x, P, CB, wp, bias, y, tile * j->R, j->relu);
                    continue;
                }
#endif
                pwb_tile_portable(x, P, CB, wp, bias, y, tile * j->R, j->relu, j->R, j->V);
            }
        }
    }
}

#ifdef NN_HAVE_AVX512
/* Output rows [oh0, oh1) of one depthwise block: the interior columns (every tap inside the
 * row) eight outputs at a time from the 8 S + 3 - S input vectors of each of the three rows,
 * the edge columns one by one. Rows outside the input read `zrow` (W zero vectors). */
#define DWB_U 8
NN_AVX512 static inline __attribute__((always_inline)) void dwb_rows_core(
    const float *x, int64_t H, int64_t W, const float *wt, const float *bias, const int S, int64_t oh0,
    int64_t oh1, int64_t OW, float *y, int relu, const float *zrow) {
    __m512 w[9];
    for (int k = 0; k < 9; k++) w[k] = _mm512_loadu_ps(wt + 16 * k);
    const __m512 b = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    /* interior: output columns [1, hi) read input columns S ow - 1 .. S ow + 1 inside [0, W) */
    const int64_t hi = W >= 2 ? imin(OW, (W - 2) / S + 1) : 0;
    for (int64_t oh = oh0; oh < oh1; oh++) {
        const float *rows[3];
        for (int kh = 0; kh < 3; kh++) {
            const int64_t ih = oh * S + kh - 1;
            rows[kh] = ih >= 0 && ih < H ? x + ih * W * BLK : zrow;
        }
        float *yr = y + oh * OW * BLK;
        for (int64_t ow = 0; ow < OW;) {
            if (ow >= 1 && ow + DWB_U <= hi) {
                __m512 acc[DWB_U];
                for (int u = 0; u < DWB_U; u++) acc[u] = b;
                for (int kh = 0; kh < 3; kh++) {
                    const float *r = rows[kh] + (ow * S - 1) * BLK;
                    __m512 v[(DWB_U - 1) * 2 + 3];
                    for (int i = 0; i < (DWB_U - 1) * S + 3; i++) v[i] = _mm512_loadu_ps(r + i * BLK);
                    for (int kw = 0; kw < 3; kw++)
                        for (int u = 0; u < DWB_U; u++) acc[u] = _mm512_fmadd_ps(w[kh * 3 + kw], v[u * S + kw], acc[u]);
                }
                for (int u = 0; u < DWB_U; u++) _mm512_storeu_ps(yr + (ow + u) * BLK, relu ? relu_ps(acc[u]) : acc[u]);
                ow += DWB_U;
            } else {
                __m512 acc = b;
                for (int kh = 0; kh < 3; kh++)
                    for (int kw = 0; kw < 3; kw++) {
                        const int64_t iw = ow * S + kw - 1;
                        if (iw >= 0 && iw < W) acc = _mm512_fmadd_ps(w[kh * 3 + kw], _mm512_loadu_ps(rows[kh] + iw * BLK), acc);
                    }
                _mm512_storeu_ps(yr + ow * BLK, relu ? relu_ps(acc) : acc);
                ow++;
            }
        }
    }
}

NN_AVX512 static void dwb_rows_avx512(const float *x, int64_t H, int64_t W, const float *wt, const float *bias,
                                      int64_t S, int64_t oh0, int64_t oh1, int64_t OW, float *y, int relu,
                                      const float *zrow) {
    if (S == 1) dwb_rows_core(x, H, W, wt, bias, 1, oh0, oh1, OW, y, relu, zrow);
    else dwb_rows_core(x, H, W, wt, bias, 2, oh0, oh1, OW, y, relu, zrow);
}
#endif

/* the portable depthwise rows: each tap adds its weight vector times the input vectors over
 * the output columns whose input column is inside the row */
NN_CLONES
static void dwb_rows_portable(const float *x, int64_t H, int64_t W, const float *wt, const float *bias, int64_t S,
                              int64_t oh0, int64_t oh1, int64_t OW, float *y, int relu) {
    for (int64_t oh = oh0; oh < oh1; oh++) {
        float *restrict yr = y + oh * OW * BLK;
        for (int64_t i = 0; i < OW * BLK; i++) yr[i] = bias ? bias[i % BLK] : 0.0f;
        for (int64_t kh = 0; kh < 3; kh++) {
            const int64_t ih = oh * S + kh - 1;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < 3; kw++) {
                /* output columns ow with 0 <= ow S + kw - 1 < W */
                const int64_t lo = kw == 0 ? 1 : 0, hi = imin(OW, (W - kw + S) / S);
                const float *restrict xr = x + (ih * W + kw - 1) * BLK, *restrict wv = wt + (kh * 3 + kw) * BLK;
                for (int64_t ow = lo; ow < hi; ow++)
                    for (int l = 0; l < BLK; l++) yr[ow * BLK + l] += wv[l] * xr[ow * S * BLK + l];
            }
        }
        if (relu)
            for (int64_t i = 0; i < OW * BLK; i++) yr[i] = relu_f(yr[i]);
    }
}

/* tasks: (image and channel block, block of output rows) */
static void dwb_task(int64_t begin, int64_t end, void **argv) {
    const blocked_job *j = (const blocked_job *)argv[0];
    const int64_t CB = j->C / BLK, OH = j->OH;
#ifdef NN_HAVE_AVX512
    float *zrow = NULL;
    if (native_on()) {
        zrow = scratch(0, (size_t)(j->W * BLK));
        if (!zrow) return;
        memset(zrow, 0, (size_t)(j->W * BLK) * sizeof(float));
    }
#endif
    for (int64_t t = begin; t < end; t++) {
        const int64_t plane = t / j->rb, ib = t % j->rb, cb = plane % CB;
        const int64_t oh0 = ib * OH / j->rb, oh1 = (ib + 1) * OH / j->rb;
        const float *x = j->x + plane * j->H * j->W * BLK, *wt = j->wp + cb * 9 * BLK;
        const float *bias = j->bias ? j->bias + cb * BLK : NULL;
        float *y = j->y + plane * OH * j->OW * BLK;
#ifdef NN_HAVE_AVX512
        if (zrow) {
            dwb_rows_avx512(x, j->H, j->W, wt, bias, j->S, oh0, oh1, j->OW, y, j->relu, zrow);
            continue;
        }
#endif
        dwb_rows_portable(x, j->H, j->W, wt, bias, j->S, oh0, oh1, j->OW, y, j->relu);
    }
}

/* Direct convolution into the blocked layout. Output pixels whose taps all lie inside the
 * input (the interior) run in tiles of R consecutive pixels of a row x the panel's V filter
 * vectors: per tap V weight vectors and R broadcast input values; the other pixels (the
 * padding's border) and the portable path take dirb_pixel, which skips taps outside. */
#ifdef NN_HAVE_AVX512
/* x: the image's input at channel 0, at the tile's first tap (row oh S - PH, column ow0 S - PW);
 * wp: the panel; y: the panel's first output block at pixel (oh, ow0); nr: the pixels stored
 * (the others recompute the first one). DIRB_TILE(R, V, S, KW) is the whole tile (nr == R) for
 * one stride and kernel width (S, KW > 0: every offset a constant), DIRB_TILE(R, V, 0, 0) the
 * tile for any. */
#define DIRB_TILE(R, V, SC, KWC)                                                                            \
    NN_AVX512 static void dirb_tile_##R##x##V##_##SC##_##KWC(const blocked_job *j, const float *x,           \
                                                             const float *wp, const float *bias, float *y,   \
                                                             int64_t nr) {                                   \
        const int64_t OHW = j->OH * j->OW, HW = j->H * j->W, S = SC ? SC : j->S, KW = KWC ? KWC : j->KW;   \
        if (j->C < 1 || j->KH < 1 || KW < 1) __builtin_unreachable();   /* sums stay in registers */    \
        __m512 acc[R][V], b0[V];                                                                           \
        for (int v = 0; v < V; v++) b0[v] = bias ? _mm512_loadu_ps(bias + 16 * v) : _mm512_setzero_ps();    \
        for (int r = 0; r < R; r++)                                                                        \
            for (int v = 0; v < V; v++) acc[r][v] = b0[v];                                                 \
        int64_t off[R];                                                                                    \
        for (int r = 0; r < R; r++) off[r] = SC ? r * SC : (r < nr ? r : 0) * S;                           \
        const float *w = wp;                                                                               \
        for (int64_t c = 0; c < j->C; c++)                                                                 \
            for (int64_t kh = 0; kh < j->KH; kh++) {                                                       \
                const float *xr = x + c * HW + kh * j->W;                                                  \
                _Pragma("GCC unroll 1")   /* unrolled, the taps share broadcasts and spill the sums */     \
                for (int64_t kw = 0; kw < KW; kw++, w += 16 * V) RV_STEP(R, V, acc, w, xr + kw, off);       \
            }                                                                                              \
        for (int v = 0; v < V; v++) {                                                                      \
            if (j->relu)                                                                                   \
                for (int r = 0; r < R; r++) {                                                              \
                    if (SC || r < nr) _mm512_storeu_ps(y + (v * OHW + r) * BLK, relu_ps(acc[r][v]));             \
                }                                                                                          \
            else                                                                                           \
                for (int r = 0; r < R; r++)                                                                \
                    if (SC || r < nr) _mm512_storeu_ps(y + (v * OHW + r) * BLK, acc[r][v]);                 \
        }                                                                                                  \
    }
#define DIRB_TILES(R, V) DIRB_TILE(R, V, 0, 0) DIRB_TILE(R, V, 1, 3) DIRB_TILE(R, V, 2, 3)
DIRB_TILES(6, 4)
DIRB_TILES(9, 3)
DIRB_TILES(14, 2)
DIRB_TILES(14, 1)

typedef void (*dirb_tile_fn)(const blocked_job *, const float *, const float *, const float *, float *, int64_t);

/* the tile for V filter vectors: of the job's stride and kernel width (full tiles) if there is
 * one, else the general one */
static dirb_tile_fn dirb_tile_for(const blocked_job *j, int general) {
    static const dirb_tile_fn tiles[4][3] = {
        {dirb_tile_14x1_0_0, dirb_tile_14x1_1_3, dirb_tile_14x1_2_3},
        {dirb_tile_14x2_0_0, dirb_tile_14x2_1_3, dirb_tile_14x2_2_3},
        {dirb_tile_9x3_0_0, dirb_tile_9x3_1_3, dirb_tile_9x3_2_3},
        {dirb_tile_6x4_0_0, dirb_tile_6x4_1_3, dirb_tile_6x4_2_3},
    };
    const int fixed = !general && j->KW == 3 && (j->S == 1 || j->S == 2);
    return tiles[j->V - 1][fixed ? j->S : 0];
}
#endif

/* one output pixel (oh, ow) of one panel: x the image's input, wp the panel, y the panel's
 * first output block at the pixel */
NN_CLONES
static void dirb_pixel(const blocked_job *j, const float *x, const float *wp, const float *bias, float *y,
                       int64_t oh, int64_t ow) {
    const int64_t pw = 16 * j->V;
    float acc[64];
    for (int64_t i = 0; i < pw; i++) acc[i] = bias ? bias[i] : 0.0f;
    for (int64_t c = 0; c < j->C; c++)
        for (int64_t kh = 0; kh < j->KH; kh++) {
            const int64_t ih = oh * j->S - j->PH + kh;
            if (ih < 0 || ih >= j->H) continue;
            for (int64_t kw = 0; kw < j->KW; kw++) {
                const int64_t iw = ow * j->S - j->PW + kw;
                if (iw < 0 || iw >= j->W) continue;
                const float a = x[(c * j->H + ih) * j->W + iw];
                const float *w = wp + ((c * j->KH + kh) * j->KW + kw) * pw;
                for (int64_t i = 0; i < pw; i++) acc[i] += a * w[i];
            }
        }
    for (int64_t v = 0; v < j->V; v++)
        for (int l = 0; l < BLK; l++) {
            const float r = acc[16 * v + l];
            y[v * j->OH * j->OW * BLK + l] = j->relu ? relu_f(r) : r;
        }
}

/* the interior [lo, hi) of an output axis: positions o whose taps o S - pad + [0, K) lie in [0, n) */
static void interior(int64_t n, int64_t K, int64_t S, int64_t pad, int64_t On, int64_t *lo, int64_t *hi) {
    *lo = imin(On, cdiv(pad, S));
    *hi = n - K + pad >= 0 ? imin(On, (n - K + pad) / S + 1) : 0;
    if (*hi < *lo) *hi = *lo;
}

/* tasks: (image, block of output rows); per row every panel, its interior in tiles */
static void dirb_task(int64_t begin, int64_t end, void **argv) {
    const blocked_job *j = (const blocked_job *)argv[0];
    const int64_t OH = j->OH, OW = j->OW, pw = 16 * j->V, panels = j->F / pw;
    int64_t rlo, rhi, clo, chi;
    interior(j->H, j->KH, j->S, j->PH, OH, &rlo, &rhi);
    interior(j->W, j->KW, j->S, j->PW, OW, &clo, &chi);
#ifdef NN_HAVE_AVX512
    const dirb_tile_fn full = native_on() ? dirb_tile_for(j, 0) : NULL, part = native_on() ? dirb_tile_for(j, 1) : NULL;
    const int64_t R = j->R;
#endif
    for (int64_t t = begin; t < end; t++) {
        const int64_t n = t / j->rb, ib = t % j->rb;
        const int64_t oh0 = ib * OH / j->rb, oh1 = (ib + 1) * OH / j->rb;
        const float *x = j->x + n * j->C * j->H * j->W;
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t q = 0; q < panels; q++) {
                const float *wp = j->wp + q * j->C * j->KH * j->KW * pw, *bias = j->bias ? j->bias + q * pw : NULL;
                float *y = j->y + (n * j->F + q * pw) * OH * OW + oh * OW * BLK;
                int64_t lo = 0, hi = 0;   /* the columns taken by tiles */
#ifdef NN_HAVE_AVX512
                if (full && oh >= rlo && oh < rhi) {
                    lo = clo, hi = chi;
                    const float *xr = x + (oh * j->S - j->PH) * j->W - j->PW;
                    for (int64_t ow = lo; ow < hi; ow += R)
                        (ow + R <= hi ? full : part)(j, xr + ow * j->S, wp, bias, y + ow * BLK, imin(R, hi - ow));
                }
#endif
                for (int64_t ow = 0; ow < OW; ow++)
                    if (ow < lo || ow >= hi) dirb_pixel(j, x, wp, bias, y + ow * BLK, oh, ow);
            }
    }
}

/* the pixel tile height for V filter vectors: 28 accumulators or fewer. For V = 4, 7 rows
 * only where they pad the plane's pixels at least 5% less than 6: the 7 x 4 tile needs 33
 * vector registers (28 sums, 4 weight vectors, the broadcast) and spills one sum. Measured in
 * mobilenet1.0, one thread, in graph (7 / 6 rows time): 1.03-1.06 at 14x14 (196 pixels, 198
 * in 6-row tiles), 0.94-0.96 at 7x7 (49 pixels, 54 in 6-row tiles). */
static int64_t pwb_rows(int64_t V, int64_t P) {
    if (V == 4) return cdiv(P, 7) * 7 * 20 < cdiv(P, 6) * 6 * 19 ? 7 : 6;
    return V == 3 ? 8 : V == 2 ? 12 : 14;
}

NN_API void symjit_nn_conv_blocked(const int64_t *d, const float *x, const float *wp, const float *bias, float *y) {
    blocked_job j = {x, wp, bias, y, d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[10], 0, (int)d[9],
                     0, 0, 0, 0, 0, 0, 0, 0, 0};
    const int64_t threads = symjit_get_num_threads();
    void *argv[1] = {&j};
    const int ok_channels = j.C % BLK == 0 && j.F % BLK == 0 && j.C > 0 && j.F > 0;
    if (d[0] == BLOCKED_POINTWISE && ok_channels && j.V >= 1 && j.V <= 4 && j.F % (16 * j.V) == 0 && j.S == 1) {
        const int64_t P = j.H * j.W;
        j.R = pwb_rows(j.V, P);
        j.panels = j.F / (16 * j.V);
        j.ptiles = cdiv(P, j.R);
        const int64_t want = cdiv(tiles_want(2.0 * (double)j.N * (double)P * (double)j.C * (double)j.F, threads), j.N);
        /* pg panel groups x pb pixel blocks: the tasks read C (pg P + pb F) floats of input and
         * weights in all, least at pg = sqrt(want F / P) (large planes split by pixels, small
         * ones by filters). Measured in mobilenet1.0, in graph (this split / filters first):
         * 0.82-0.90 on 112x112-28x28 planes with two threads, the whole call 0.93; one thread
         * unchanged. */
        const double pg = sqrt((double)want * (double)j.F / (double)P);
        j.pg = imax(1, imin(imin(j.panels, want), (int64_t)(pg + 0.5)));
        j.pb = imax(1, imin(j.ptiles, cdiv(want, j.pg)));
        symjit_parallel_for(pwb_task, j.N * j.pb * j.pg, 1, argv);
        return;
    }
    if (d[0] == BLOCKED_DIRECT && j.C > 0 && j.F % BLK == 0 && j.F > 0 && j.V >= 1 && j.V <= 4 &&
        j.F % (16 * j.V) == 0 && j.S >= 1 && d[11] >= 1 && d[12] >= 1 && d[13] >= 0 && d[14] >= 0) {
        j.KH = d[11], j.KW = d[12], j.PH = d[13], j.PW = d[14];
        j.R = j.V == 4 ? 6 : j.V == 3 ? 9 : 14;   /* 14-28 sums, the tiles above */
        const double flops = 2.0 * (double)j.N * (double)(j.OH * j.OW) * (double)j.F * (double)(j.C * j.KH * j.KW);
        j.rb = imax(1, imin(j.OH, cdiv(tiles_want(flops, threads), j.N)));
        symjit_parallel_for(dirb_task, j.N * j.rb, 1, argv);
        return;
    }
    if (d[0] == BLOCKED_DEPTHWISE && ok_channels && j.C == j.F && (j.S == 1 || j.S == 2)) {
        const int64_t planes = j.N * (j.C / BLK);
        const int64_t want = tiles_want(18.0 * (double)planes * BLK * (double)(j.OH * j.OW), threads);
        j.rb = imax(1, imin(j.OH, cdiv(want, planes)));
        symjit_parallel_for(dwb_task, planes * j.rb, 1, argv);
        return;
    }
    symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT,
                     "nnkernels: conv_blocked: unsupported descriptor (kind %lld, C %lld, F %lld, stride %lld, V %lld)",
                     (long long)d[0], (long long)j.C, (long long)j.F, (long long)j.S, (long long)j.V);
}
