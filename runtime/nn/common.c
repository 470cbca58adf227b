/* nn/common.c -- Shared by every family: compiler macros, the BLAS binding, integer helpers, per-thread scratch,
 * the AVX-512 switch, the tuning overrides and the plane-row prefetch.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

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

/* ---------------------------------------------------------------------------------------- */
/* Denormals: the multiply-accumulate kernels (GEMM, convolutions forward and backward, the   */
/* recurrent cells) can run each task with denormal inputs read as zero and denormal results  */
/* flushed to zero (x86 MXCSR DAZ | FTZ), restored when the task ends.                        */
/* ---------------------------------------------------------------------------------------- */

/* Why: a well-fit network's gradients can underflow (a loss near zero); x86 cores then take
 * microcode assists on every multiply-add with a denormal operand. Measured on a Zen 5, the
 * 784-512-512-10 MLP's backward graph with its head gradient scaled into the denormal range:
 * 12-14 ms against 0.16 ms for a 64 x 512 by 512 product (flushing: 0.16 ms whatever the scale;
 * benchmarks/bench_denormals.py, 2 threads: 187x the normal-magnitude time without flushing, 1.0x with).
 * Off by default, as in MXNet, PyTorch (set_flush_denormal) and ONNX Runtime
 * (set_denormal_as_zero), so results keep IEEE semantics; on (SYMJIT_FLUSH_DENORMALS=1 or
 * symjit_nn_set_flush_denormals(1)), values below FLT_MIN (1.2e-38) in these kernels' inputs and
 * results become zero, as with TensorFlow / XLA's default. The elementwise code and the
 * interpreter keep IEEE denormals either way (exp(-100) stays 3.7e-44). */
static int g_flush_denormals = -1;   /* -1: not read from the environment yet */

NN_API int64_t symjit_nn_set_flush_denormals(int64_t on) {
    int64_t old = g_flush_denormals;
    g_flush_denormals = on < 0 ? -1 : on != 0;
    return old;
}

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define NN_MXCSR_DAZ_FTZ 0x8040u
static inline unsigned nn_flush_enter(void) {
    if (g_flush_denormals < 0) {
        const char *t = getenv("SYMJIT_FLUSH_DENORMALS");
        g_flush_denormals = t != NULL && t[0] == '1';
    }
    const unsigned csr = _mm_getcsr();
    if (g_flush_denormals && (csr & NN_MXCSR_DAZ_FTZ) != NN_MXCSR_DAZ_FTZ) _mm_setcsr(csr | NN_MXCSR_DAZ_FTZ);
    return csr;
}
static inline void nn_flush_leave(const unsigned *csr) {
    if (_mm_getcsr() != *csr) _mm_setcsr(*csr);
}
/* at the top of a task: denormals flushed until the enclosing block ends */
#define NN_FLUSH_DENORMALS const unsigned nn_csr_ __attribute__((cleanup(nn_flush_leave), unused)) = nn_flush_enter()
#else
#define NN_FLUSH_DENORMALS do { } while (0)
#endif

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }


/* ---------------------------------------------------------------------------------------- */
/* Scratch: one growing, 64-byte-aligned buffer per thread (chunks of one call never share).  */
/* ---------------------------------------------------------------------------------------- */

/* slots: 0 im2col blocks, 1 packed small-GEMM operands, 2..4 Winograd buffers of the caller,
 * (4 also the transposed, flipped weights of a data gradient run as a forward convolution),
 * 5 panels packed for the AVX-512 tiles, 6..7 padded input and offset table of the caller
 * (implicit-GEMM convolution), 8 convolution rows before pooling (symjit_nn_conv_pool), 9 per-task
 * gate buffers and 10 the workspace of the caller (the fused RNN, nn/rnn.c), 11 dy transposed per
 * task and 12 the chunk accumulators of the caller (convolution weight gradient), 13 the
 * recurrent weights packed by the caller (the fused RNN) */
static __thread float *t_scratch[14];
static __thread size_t t_scratch_cap[14];

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


static int g_native = -1;   /* -1: not decided yet; 0: BLAS / loop nests; 1: AVX-512 tiles */

/* Tuning overrides for the benchmarks (0: the built-in choice); keys: nnkernels.h */
static int64_t g_tune[TUNE_COUNT];

/* Set tuning override `key` to `value` (0 restores the built-in choice); returns the previous
 * value. The keys and the values each takes: nnkernels.h. */
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
    if (g_tune[TUNE_PREFETCH] == TUNE_PREFETCH_PLANES) return;
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
