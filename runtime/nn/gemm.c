/* nn/gemm.c -- GEMM: the portable loop nest, the AVX-512 register tiles (mm_t, mm_run) every GEMM-shaped
 * kernel drives, the ReLU epilogue, and the dense-layer entry point symjit_nn_gemm.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

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

/* C (M x N) = A B^T + beta C with both operands K-contiguous (A[m * lda + k], B[n * ldb + k])
 * and few rows M (a dense layer at a small batch) on the portable path: dot products, 8 k per
 * vector (GCC vector extensions: two SSE registers in the baseline clone, one AVX2 register in
 * the x86-64-v3 one), DOT_MR rows of A against DOT_NR rows of B at a time. This is memory-bound
 * on B, which a BLAS would first pack (a copy of all the weights on every call).
 * Each C(m, n) is summed the same way whatever the block or the neighbouring rows: lane l
 * sums k = 8i + l in order, the lanes are added pairwise (0+4, 1+5, ... then halves), then the
 * k past the last whole vector in order -- so a call's result does not depend on how it is cut. */
typedef float nn_v8f __attribute__((vector_size(32)));
#define DOT_MR 2
#define DOT_NR 4
/* The most rows of A (per block) that take gemm_nt_dots instead of the BLAS. Measured on a Zen 3
 * (AVX2) host, 2 threads, whole FullyConnected calls (K x N weights; dots / BLAS time): 784x128
 * 0.49 (M = 1) ... 0.73 (16), 0.59 (32); 800x500 0.31 ... 0.78 (16), 1.16 (32); 512x1000 0.26 ...
 * 0.97 (16), 1.30 (32); 2048x1000 0.35 ... 0.81 (16), 1.22 (32). */
#define GEMM_DOTS_MAX_ROWS 16

static inline float dot_v8_sum(const nn_v8f *v) {
    float h[8];
    memcpy(h, v, sizeof h);
    return ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]));
}

/* an unaligned load of 8 floats (a statement expression: no vector-typed function boundary in
 * the baseline clone, whose ABI would pass it in memory) */
#define LD8(p) ({ nn_v8f v_; memcpy(&v_, (p), sizeof v_); v_; })

NN_CLONES
static void gemm_nt_dots(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float beta, float *C, int64_t ldc) {
    const int64_t K8 = K / 8 * 8;
    for (int64_t m0 = 0; m0 < M; m0 += DOT_MR) {
        const int64_t mr = imin(DOT_MR, M - m0);
        const float *a0 = A + m0 * lda, *a1 = A + (m0 + mr - 1) * lda;   /* past the edge: a copy, not stored */
        for (int64_t n0 = 0; n0 < N; n0 += DOT_NR) {
            const int64_t nr = imin(DOT_NR, N - n0);
            const float *b0 = B + n0 * ldb, *b1 = B + (n0 + imin(1, nr - 1)) * ldb,
                        *b2 = B + (n0 + imin(2, nr - 1)) * ldb, *b3 = B + (n0 + nr - 1) * ldb;
            nn_v8f c00 = {0}, c01 = {0}, c02 = {0}, c03 = {0}, c10 = {0}, c11 = {0}, c12 = {0}, c13 = {0};
            for (int64_t k = 0; k < K8; k += 8) {
                const nn_v8f x0 = LD8(a0 + k), x1 = LD8(a1 + k);
                const nn_v8f y0 = LD8(b0 + k), y1 = LD8(b1 + k), y2 = LD8(b2 + k), y3 = LD8(b3 + k);
                c00 += x0 * y0; c01 += x0 * y1; c02 += x0 * y2; c03 += x0 * y3;
                c10 += x1 * y0; c11 += x1 * y1; c12 += x1 * y2; c13 += x1 * y3;
            }
            const nn_v8f acc[DOT_MR][DOT_NR] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}};
            const float *ar[DOT_MR] = {a0, a1}, *br[DOT_NR] = {b0, b1, b2, b3};
            for (int64_t i = 0; i < mr; i++)
                for (int64_t j = 0; j < nr; j++) {
                    float v = dot_v8_sum(&acc[i][j]);
                    for (int64_t k = K8; k < K; k++) v += ar[i][k] * br[j][k];
                    float *c = C + (m0 + i) * ldc + n0 + j;
                    *c = beta == 0.0f ? v : v + beta * *c;
                }
        }
    }
}

/* C (M x N) = A B [+ bias] + beta C (beta 0 or 1) with A row-major (M x K, lda: a convolution's
 * weights) and B row-major (K x N, ldb: its im2col columns, or a 1x1 layer's input in place) on
 * the portable path: PT_R x 16 register tiles (two 8-lane vectors per row: 12 accumulators of
 * the 16 AVX2 registers), A broadcast straight from its rows (no packing: a BLAS packs both
 * operands on every call), B read 16 columns per k. Loops: K blocks of PT_KC, then row tiles
 * (their PT_R x PT_KC of A stay in L1), then 16-column strips of B (the K block of B stays in
 * L2: conv_gemm_task's column blocks hold ~512 KiB whole); a partial last strip is copied,
 * zero-padded, once per K block (no read past N; its unused lanes are the work pt_gemm_suits
 * bounds). With `bpack` (PT_KC x N floats, or NULL) the K block's whole strips are first copied
 * into it, each kc x 16 contiguous: for a B whose rows lie far apart (a 1x1 layer's input
 * planes), whose strips would touch a page per k.
 * Each C(m, n) is C's value (beta = 1) or 0, plus per K block the products in k order (the
 * first block's sum plus bias[m] when `bias` is given): the same float whatever rows and
 * columns the call covered, so a call's result does not depend on how it is cut into blocks. */
#define PT_R 6
#define PT_KC 256
/* Output block of a 1x1 layer on pt_gemm (conv_gemm_task; floats): filters x columns in L2, so
 * the epilogue that follows each block reads it from there. Measured on a Zen 3 (AVX2), 2
 * threads, single layers, tiles in blocks of this size / the BLAS in the blocks of im2col
 * (paired per call): batch 1 16 -> 96 at 112x112 0.72, 24 -> 144 at 56x56 0.83, 32 -> 192 at
 * 28x28 0.83, 128 -> 128 at 56x56 0.86; batch 8 0.72-1.02 (12 layers, 16 to 512 channels).
 * 1x1 layers with more than PT_KC input channels stay on the BLAS: MobileNet 1.0's 512 and
 * 1024 at batch 8 measured 0.94-1.00 (BLAS / tiles), its layers of 32-256 channels 1.03-1.47. */
#define PW_TILES_OUT_FLOATS 32768
/* r[i] <- column i of the 8 x 8 matrix whose rows are r[0..7] (GCC vectors: unpacks, then
 * pair shuffles, then 128-bit halves, as an AVX2 8 x 8 transpose) */
static inline __attribute__((always_inline)) void transpose8x8_v8(nn_v8f r[8]) {
    nn_v8f t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int h = 0; h < 8; h += 4)
        for (int j = 0; j < 2; j++) {
            u[h + 2 * j] = __builtin_shufflevector(t[h + j], t[h + 2 + j], 0, 1, 8, 9, 4, 5, 12, 13);
            u[h + 2 * j + 1] = __builtin_shufflevector(t[h + j], t[h + 2 + j], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int i = 0; i < 4; i++) {
        r[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[i + 4] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

#define BC8(s) ({ const float s_ = (s); (nn_v8f){s_, s_, s_, s_, s_, s_, s_, s_}; })
#define ST8(p, v) do { const nn_v8f w_ = (v); memcpy((p), &w_, sizeof w_); } while (0)
/* The sums of a PT_R x 16 tile in registers, c<row><half> (rows 0-5, two 8-lane halves), shared
 * by pt_gemm and the portable 1x1 tiles (conv.c pw_fvec_task): declared zero, one k step
 * (row r's broadcast value s<r> times the step's 16 columns v0, v1), and moved to or from 16
 * floats per row at p (rows 16 floats apart). */
#define PT_TILE_SUMS nn_v8f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, \
                            c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0}
#define PT_TILE_STEP(s0, s1, s2, s3, s4, s5, v0, v1) do {                       \
        nn_v8f x_ = BC8(s0); c00 += x_ * (v0); c01 += x_ * (v1);             \
        x_ = BC8(s1); c10 += x_ * (v0); c11 += x_ * (v1);                    \
        x_ = BC8(s2); c20 += x_ * (v0); c21 += x_ * (v1);                    \
        x_ = BC8(s3); c30 += x_ * (v0); c31 += x_ * (v1);                    \
        x_ = BC8(s4); c40 += x_ * (v0); c41 += x_ * (v1);                    \
        x_ = BC8(s5); c50 += x_ * (v0); c51 += x_ * (v1);                    \
    } while (0)
#define PT_TILE_STORE(p) do {                                                  \
        ST8((p), c00); ST8((p) + 8, c01); ST8((p) + 16, c10); ST8((p) + 24, c11); \
        ST8((p) + 32, c20); ST8((p) + 40, c21); ST8((p) + 48, c30); ST8((p) + 56, c31); \
        ST8((p) + 64, c40); ST8((p) + 72, c41); ST8((p) + 80, c50); ST8((p) + 88, c51); \
    } while (0)
#define PT_TILE_LOAD(p) do {                                                   \
        c00 = LD8(p); c01 = LD8((p) + 8); c10 = LD8((p) + 16); c11 = LD8((p) + 24); \
        c20 = LD8((p) + 32); c21 = LD8((p) + 40); c30 = LD8((p) + 48); c31 = LD8((p) + 56); \
        c40 = LD8((p) + 64); c41 = LD8((p) + 72); c50 = LD8((p) + 80); c51 = LD8((p) + 88); \
    } while (0)

/* Whether pt_gemm takes the blocks of an im2col convolution (M filters per group, N output
 * positions) rather than the BLAS: a whole tile of rows and a strip of columns, and at most 1/8
 * of the strips' lanes past N (blocks are cut at multiples of 16 columns: only the last has a
 * partial strip). Decided for the whole convolution, so that no output's sum depends on its
 * block. Measured on
 * a Zen 3 (AVX2) host, 2 threads, whole layers (pt_gemm / BLAS time, paired, 2-3 runs): 3x3
 * 64 -> 64 at 56x56 0.74-0.81 (batch 1), 0.80-0.85 (batch 8); 128 at 28x28 0.92-0.95; 256 at
 * 14x14 0.93-0.95; 7x7/2 stem 3 -> 64 0.79-0.90; 3x3/2 3 -> 32 0.80-0.89; 5x5 48 -> 64 at 35x35
 * 0.79-0.96; LeNet's 5x5 20 -> 50 0.77. Left to the BLAS: 3x3 512 at 7x7 (49 columns, 15 lanes
 * of 64 unused) 1.06-1.21. The 1x1 convolutions of at most PT_KC channels take it too, with
 * packed strips and output blocks of PW_TILES_OUT_FLOATS (without them: 0.99-1.30 of the BLAS
 * with 128 or more channels). */
static int pt_gemm_suits(int64_t M, int64_t N) {
    return M >= PT_R && N >= 16 && (cdiv(N, 16) * 16 - N) * 8 <= N && g_tune[TUNE_PORTABLE_BLAS] != 1;
}

NN_CLONES
static void pt_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc, const float *bias, float *bpack) {
    float edge[PT_KC * 16] __attribute__((aligned(64)));
    const int64_t N16 = N / 16 * 16;
    for (int64_t k0 = 0; k0 < K; k0 += PT_KC) {
        const int64_t kc = imin(PT_KC, K - k0);
        const int add = k0 > 0 || beta != 0.0f;
        if (bpack) {   /* the K block's whole strips, each kc x 16 contiguous */
            for (int64_t j0 = 0; j0 < N16; j0 += 16) {
                float *dst = bpack + j0 * kc;
                const float *src = B + k0 * ldb + j0;
                for (int64_t k = 0; k < kc; k++) {
                    ST8(dst + k * 16, LD8(src + k * ldb));
                    ST8(dst + k * 16 + 8, LD8(src + k * ldb + 8));
                }
            }
        }
        if (N16 < N)
            for (int64_t k = 0; k < kc; k++)
                for (int64_t l = 0; l < 16; l++)
                    edge[k * 16 + l] = N16 + l < N ? B[(k0 + k) * ldb + N16 + l] : 0.0f;
        for (int64_t r0 = 0; r0 < M; r0 += PT_R) {
            const int64_t nr = imin(PT_R, M - r0);
            /* rows past the edge compute a copy of the last one and are not stored */
            const float *a0 = A + r0 * lda + k0, *a1 = A + (r0 + imin(1, nr - 1)) * lda + k0,
                        *a2 = A + (r0 + imin(2, nr - 1)) * lda + k0, *a3 = A + (r0 + imin(3, nr - 1)) * lda + k0,
                        *a4 = A + (r0 + imin(4, nr - 1)) * lda + k0, *a5 = A + (r0 + nr - 1) * lda + k0;
            for (int64_t j0 = 0; j0 < N; j0 += 16) {
                const int64_t nc = imin(16, N - j0);
                const float *bk = nc < 16 ? edge : bpack ? bpack + j0 * kc : B + k0 * ldb + j0;
                const int64_t bstep = nc == 16 && !bpack ? ldb : 16;
                PT_TILE_SUMS;
                for (int64_t k = 0; k < kc; k++, bk += bstep) {
                    const nn_v8f b0 = LD8(bk), b1 = LD8(bk + 8);
                    PT_TILE_STEP(a0[k], a1[k], a2[k], a3[k], a4[k], a5[k], b0, b1);
                }
                float t[PT_R * 16] __attribute__((aligned(32)));
                PT_TILE_STORE(t);
                for (int64_t i = 0; i < nr; i++) {
                    float *cr = C + (r0 + i) * ldc + j0;
                    const float *ti = t + i * 16;
                    const float bi = bias && k0 == 0 ? bias[r0 + i] : 0.0f;   /* sum + bias, once */
                    if (nc == 16) {
                        ST8(cr, (add ? LD8(ti) + LD8(cr) : LD8(ti)) + BC8(bi));
                        ST8(cr + 8, (add ? LD8(ti + 8) + LD8(cr + 8) : LD8(ti + 8)) + BC8(bi));
                    } else {
                        for (int64_t l = 0; l < nc; l++) cr[l] = (add ? cr[l] + ti[l] : ti[l]) + bi;
                    }
                }
            }
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
    const int64_t *arow;       /* if set, A by rows through a table: A(k, r) = a[arow[r] + k] (ask == 1;
                                  the weight gradient's rows are shifted input planes) */
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
    int64_t kcap;              /* K block (0: MM_KC, or MM_KC_PANELS with panels_outer) */
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

/* The k loop of MM_TILE (its locals in scope). FULL: a whole tile of rows of A by columns, at
 * constant offsets from one pointer (R rows through the `off` table keep R offsets live,
 * which spill with 8 rows) */
#define MM_TILE_KLOOP(R, V, AROWS, BTAB, FULL) \
    for (int64_t k = 0; k < K; k++) {                                                                  \
        if (pf) _mm_prefetch(pf + k * pf_step, _MM_HINT_T1);                                           \
        const float *bk = BTAB ? bp + koff[k] : bp + k * bsk;                                          \
        const float *ak = AROWS == 2 ? a + aoff[k] : a;                                                \
        __m512 bv[V];                                                                                  \
        for (int v = 0; v < V; v++) bv[v] = _mm512_loadu_ps(bk + 16 * v);                              \
        for (int r = 0; r < R; r++) {                                                                  \
            __m512 av = _mm512_set1_ps(AROWS & 1 ? ap[AROWS & 1 ? r : 0][k] : ak[FULL ? r : off[r]]);  \
            for (int v = 0; v < V; v++) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);             \
        }                                                                                              \
        if (AROWS == 0) a += ask;                                                                      \
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
        const float *ap[AROWS & 1 ? R : 1];                                                           \
        int off[R];                                                                                   \
        for (int r = 0; r < R; r++) off[r] = r < nr ? r : 0;                                          \
        const float *a = p->a + (AROWS == 2 ? (r0 / p->valid_w) * p->a_pitch + r0 % p->valid_w : r0); \
        const int64_t ask = p->ask;                                                                   \
        const int64_t *aoff = p->aoff;                                                                \
        if (AROWS & 1)                                                                                \
            for (int r = 0; r < (AROWS & 1 ? R : 1); r++)                                             \
                ap[r] = p->a + (AROWS == 3 ? p->arow[r0 + off[r]] : (r0 + off[r]) * p->asr);          \
        const char *pf = p->pf;                                                                       \
        const int64_t pf_step = p->pf_step;                                                           \
        if (AROWS == 0 && nr == R) MM_TILE_KLOOP(R, V, AROWS, BTAB, 1)                               \
        else MM_TILE_KLOOP(R, V, AROWS, BTAB, 0)                                                      \
        if (p->csj == 1 && !p->bias_j && p->wide_w == 0 && nr == R && nc == 16 * V && !p->accumulate) { \
            /* a whole tile of plain rows: straight stores */                                     \
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
#define MM_TILES(R, V) MM_TILE(R, V, 1, 0) MM_TILE(R, V, 0, 0) MM_TILE(R, V, 1, 1) MM_TILE(R, V, 0, 1) \
                       MM_TILE(R, V, 3, 0)
MM_TILES(6, 4)
MM_TILES(8, 3)
MM_TILES(12, 2)
MM_TILES(8, 2)
MM_TILES(14, 1)
MM_TILES(7, 4)
MM_TILES(7, 3)
MM_TILE(7, 4, 2, 0)
MM_TILE(7, 3, 2, 0)
#define MM_FNS(R, V) {{mm_tile_##R##x##V##_00, mm_tile_##R##x##V##_01}, {mm_tile_##R##x##V##_10, mm_tile_##R##x##V##_11}, \
                     {NULL, NULL}, {mm_tile_##R##x##V##_30, NULL}}
#define MM_FNS7(R, V) {{mm_tile_##R##x##V##_00, mm_tile_##R##x##V##_01}, {mm_tile_##R##x##V##_10, mm_tile_##R##x##V##_11}, \
                      {mm_tile_##R##x##V##_20, NULL}, {mm_tile_##R##x##V##_30, NULL}}
#else
#define MM_FNS(R, V) {{NULL, NULL}, {NULL, NULL}, {NULL, NULL}, {NULL, NULL}}
#define MM_FNS7(R, V) MM_FNS(R, V)
#endif

/* tile shapes: R rows x 16V columns; `cost` weights padded work by the measured speed of the
 * shape (percent; 16-column tiles load one vector per R broadcasts and run slower; 7 x 4 keeps
 * one of its 28 accumulators on the stack) */
typedef struct {
    int R, V, cost;
    mm_tile_fn fn[4][2];   /* [A by columns / rows / columns through a table / rows through a table]
                              [B by offset table] */
} mm_shape;

static const mm_shape MM_SHAPES[] = {
    {6, 4, 100, MM_FNS(6, 4)}, {8, 3, 100, MM_FNS(8, 3)}, {12, 2, 101, MM_FNS(12, 2)},
    {8, 2, 102, MM_FNS(8, 2)}, {14, 1, 140, MM_FNS(14, 1)}, {7, 4, 105, MM_FNS7(7, 4)},
    {7, 3, 101, MM_FNS7(7, 3)},
};
#define MM_NSHAPES ((int)(sizeof MM_SHAPES / sizeof MM_SHAPES[0]))

/* the tile shape with the least padded work (rows and columns rounded up to whole tiles) */
static int mm_pick_default(int64_t rows, int64_t cols) {
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

/* mm_pick_default, or the shape forced by the tuning override */
static int mm_pick(int64_t rows, int64_t cols) {
    if (g_tune[TUNE_SHAPE] > 0 && g_tune[TUNE_SHAPE] <= MM_NSHAPES) return (int)g_tune[TUNE_SHAPE] - 1;
    return mm_pick_default(rows, cols);
}

static int64_t mm_panel(int shape) { return 16 * MM_SHAPES[shape].V; }

/* Blocks the AVX-512 paths cut a call of `flops` into: below 2e7 flops at most one per thread and
 * at least NN_MIN_TASK_FLOPS each (a block of a few microseconds gains less than handing it to
 * a worker costs: waking or stealing it from a spinning worker, and waiting at the join for a
 * worker that another process preempted), else NN_BLOCKS_PER_THREAD per thread, so that a
 * thread slowed down leaves its remaining blocks to the others.
 * benchmarks/bench_small_models.py --section threads and bench_kernel_tune.py --key min_task
 * measure the threshold. It is a trade-off between an idle and a loaded machine: on an idle
 * 2-core Zen 5 (load ~1, 2 threads, paired whole calls, 1e6 against 4e6) SqueezeNet 1.1 batch 1
 * 0.57-0.91, LeNet batch 8 0.66, MobileNetV2 batch 1 0.97, DenseNet-121 batch 1 0.98, Inception
 * v3 batch 1 1.03, LeNet batch 1 1.05-1.14 (34 -> 36-38 us); on the same machine shared with
 * other work (load ~5) LeNet batch 1 took 196 us at 1e6 against 89 us at 4e6, a preempted
 * worker stalling each small parallel region. The default favours the idle machine. */
#ifndef NN_BLOCKS_PER_THREAD
#define NN_BLOCKS_PER_THREAD 4
#endif
#ifndef NN_MIN_TASK_FLOPS
#define NN_MIN_TASK_FLOPS 1e6
#endif
static int64_t tiles_want(double flops, int64_t threads) {
    int64_t per = g_tune[TUNE_BLOCKS] > 0 ? g_tune[TUNE_BLOCKS] : NN_BLOCKS_PER_THREAD;
    double min_task = g_tune[TUNE_MIN_TASK] > 0 ? (double)g_tune[TUNE_MIN_TASK] : NN_MIN_TASK_FLOPS;
    if (flops >= 2e7) return per * threads;
    return imax(1, imin(threads, (int64_t)(flops / min_task)));
}

/* The grain of symjit_parallel_for over `tasks` blocks cut with tiles_want's `want`: blocks may
 * be more than `want` (cache blocking, one per image); below one block per thread they run in at
 * most `want` chunks, so a call too small for the pool stays on the caller. */
static int64_t tasks_grain(int64_t tasks, int64_t want, int64_t threads) {
    return want < threads ? imax(1, cdiv(tasks, imax(want, 1))) : 1;
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
    const int amode = p->arow ? 3 : p->aoff ? 2 : p->ask == 1;
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
    const int64_t kcap = g_tune[TUNE_KC] > 0 ? g_tune[TUNE_KC] : p->kcap > 0 ? p->kcap
                         : p->panels_outer ? MM_KC_PANELS : MM_KC;
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
                if (p->koff || g_tune[TUNE_PREFETCH] == TUNE_PREFETCH_WEIGHTS) {
                } else if ((c + 1) * pw < full) {
                    next = q.b + (c + 1) * q.bsp;
                    next_k = q.K;
                } else if (k0 + kc < K && full > 0 && g_tune[TUNE_PREFETCH] != TUNE_PREFETCH_KBLOCK) {
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
        const int pf_rows = amode == 1 && p->asr == K && kc == K && !p->aoff && g_tune[TUNE_PREFETCH] != TUNE_PREFETCH_A_ROWS;
        for (int64_t c0 = 0; c0 < panels; c0 += bp) {
            int64_t c1 = imin(panels, c0 + bp);
            for (int64_t r0 = 0; r0 < p->rows; r0 += s->R)
                for (int64_t c = c0; c < c1; c++) {
                    int64_t j0 = c * pw;
                    mm_t *t = j0 < full ? &q : &e;
                    if (p->pfw && k0 == 0 && g_tune[TUNE_PREFETCH] != TUNE_PREFETCH_GEMM_OUT) {
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
    if (!ta && tb && M <= GEMM_DOTS_MAX_ROWS && K >= 8 && g_tune[TUNE_PORTABLE_BLAS] != 1) {
        gemm_nt_dots(M, N, K, A, lda, B, ldb, beta, C, ldc);
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
 * when the work is large enough to pay for waking the pool (tiles_want's threshold below 2e7
 * flops). nb is a multiple of 16 if split. */
static void split2(int64_t M, int64_t N, int64_t K, int64_t outer, int64_t nb_cap, int64_t *mb, int64_t *nb) {
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)M * (double)N * (double)K * (double)outer;
    int64_t want = flops < 2e7 ? tiles_want(flops, threads) : 2 * threads;
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

/* split2 for blocks that a BLAS computes (the portable path): each block's GEMM packs its rows
 * of A (mb x K) and its columns of B (K x nb) before multiplying, so for as many blocks, cutting
 * the longer of M and N packs less. Where M > N (a convolution with more filters than output
 * positions per block: the weights are the larger operand) the blocks split2 chose are cut
 * along M instead, N blocked only as far as `nb_cap` needs. Measured on a Zen 3 (AVX2) host,
 * 2 threads, MobileNet 1.0 batch 1: its 512 -> 512 pointwise layers at 14x14 0.92 -> 0.73 ms. */
static void split_blas(int64_t M, int64_t N, int64_t K, int64_t outer, int64_t nb_cap, int64_t *mb, int64_t *nb) {
    split2(M, N, K, outer, nb_cap, mb, nb);
    if (M <= N) return;
    const int64_t cap = nb_cap > 0 && N > nb_cap ? imax(16, (nb_cap / 16) * 16) : N;
    const int64_t blocks = cdiv(M, *mb) * cdiv(N, *nb), tn = cdiv(N, cap);
    const int64_t tm = imin(cdiv(blocks, tn), imax(1, M / 8));
    *nb = cap;
    *mb = cdiv(M, tm);
}

/* Descriptor of symjit_nn_gemm: symjit_gemm_desc (nnkernels.h).
 * Tasks are output blocks (batch, rows, columns) sized by split2 at call time.
 * C is contiguous (ldc = N); lda = ta ? M : K, ldb = tb ? K : N. */
typedef struct {
    const symjit_gemm_desc *d;
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
    NN_FLUSH_DENORMALS;
    gemm_job *job = (gemm_job *)argv[0];
    const symjit_gemm_desc *d = job->d;
    int64_t M = d->m, N = d->n, K = d->k, ta = d->trans_a, tb = d->trans_b, mb = job->mb, nb = job->nb;
    int64_t tm = cdiv(M, mb), tn = cdiv(N, nb);
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / (tm * tn), r = t % (tm * tn);
        int64_t m0 = (r / tn) * mb, n0 = (r % tn) * nb;
        int64_t mc = imin(mb, M - m0), nc = imin(nb, N - n0);
        const float *A = job->A + b * d->stride_a + (ta ? m0 : m0 * lda);
        const float *B = job->B + b * d->stride_b + (tb ? n0 * ldb : n0);
        float *C = job->C + b * d->stride_c + m0 * N + n0;
        float beta = 0.0f;
        if (d->bias_mode == SYMJIT_BIAS_PER_COLUMN) {
            for (int64_t i = 0; i < mc; i++) memcpy(C + i * N, job->bias + n0, (size_t)nc * sizeof(float));
            beta = 1.0f;
        } else if (d->bias_mode == SYMJIT_BIAS_PER_ROW) {
            for (int64_t i = 0; i < mc; i++)
                for (int64_t j = 0; j < nc; j++) C[i * N + j] = job->bias[m0 + i];
            beta = 1.0f;
        }
        gemm_rm((int)ta, (int)tb, mc, nc, K, A, lda, B, ldb, beta, C, N);
        run_epilogue_rows(job->epi, job->epi_args, b * d->stride_c + m0 * N + n0, mc, N, nc);
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
    const symjit_gemm_desc *d;
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
    const symjit_gemm_desc *d = job->d;
    const int64_t M = d->m, N = d->n, K = d->k, PW = mm_panel(job->shape);
    const int64_t np = job->vec_m ? cdiv(M, PW) : cdiv(N, PW), nk = cdiv(K, NGEMM_PACK_K);
    for (int64_t t = begin; t < end; t++) {   /* t = (batch item, panel, k chunk) */
        int64_t kc = t % nk, q = (t / nk) % np, b = t / (nk * np);
        int64_t k0 = kc * NGEMM_PACK_K, kn = imin(NGEMM_PACK_K, K - k0);
        const float *src = job->vec_m ? job->A + b * d->stride_a : job->B + b * d->stride_b;
        int64_t rows = job->vec_m ? M : N;
        mm_pack_panels(src + q * PW * K + k0, K, 1, imin(PW, rows - q * PW), kn, PW,
                       job->packed + b * job->pstride + q * K * PW + k0 * PW);
    }
}

/* K block of symjit_nn_gemm's tiles: the part of the broadcast operand a row tile reads per K
 * block stays in L1 (~32 KiB) -- R rows of kc floats when A's rows are contiguous along k, else
 * kc cache lines (R consecutive floats per k). Measured on the language model's Dense 5000
 * backward (1 thread): dY W (1120 x 256, K 5000) 63 -> 21 ms, dY^T X (5000 x 256, K 1120)
 * 64 -> 36 ms (benchmarks/bench_train_lstm.py). */
#define NGEMM_L1_FLOATS 8192
static int64_t ngemm_kcap(const mm_t *p, int64_t R) {
    return p->ask == 1 ? imax(256, NGEMM_L1_FLOATS / R) : NGEMM_L1_FLOATS / 16 - 128;
}

static void ngemm_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    ngemm_job *job = (ngemm_job *)argv[0];
    const symjit_gemm_desc *d = job->d;
    const int64_t M = d->m, N = d->n, K = d->k, ta = d->trans_a, tb = d->trans_b;
    const int64_t lda = ta ? M : K, ldb = tb ? K : N;
    const int64_t rows = job->vec_m ? N : M, cols = job->vec_m ? M : N;
    const int64_t tr = cdiv(rows, job->rb), tc = cdiv(cols, job->cb), PW = mm_panel(job->shape);
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / (tr * tc), r = t % (tr * tc);
        int64_t r0 = (r / tc) * job->rb, c0 = (r % tc) * job->cb;
        int64_t rc = imin(job->rb, rows - r0), cc = imin(job->cb, cols - c0);
        const float *A = job->A + b * d->stride_a, *B = job->B + b * d->stride_b;
        float *C = job->C + b * d->stride_c;
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
            if (d->bias_mode == SYMJIT_BIAS_PER_COLUMN) p.bias_j = job->bias + c0;
            else if (d->bias_mode == SYMJIT_BIAS_PER_ROW) p.bias_r = job->bias + r0;
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
            if (d->bias_mode == SYMJIT_BIAS_PER_COLUMN) p.bias_r = job->bias + r0;
            else if (d->bias_mode == SYMJIT_BIAS_PER_ROW) p.bias_j = job->bias + c0;
        }
        p.relu = epi_is_relu(job->epi);
        p.kcap = ngemm_kcap(&p, MM_SHAPES[job->shape].R);
        mm_run(&p, job->shape);
        if (job->epi && !p.relu) {
            int64_t m0 = job->vec_m ? c0 : r0, mc = job->vec_m ? cc : rc;
            int64_t n0 = job->vec_m ? r0 : c0, nc = job->vec_m ? rc : cc;
            run_epilogue_rows(job->epi, job->epi_args, b * d->stride_c + m0 * N + n0, mc, N, nc);
        }
    }
}

/* returns 0 when the geometry is left to the general path */
static int ngemm(const symjit_gemm_desc *d, const float *A, const float *B, const float *bias, float *C,
                 symjit_kernel_fn epi, void **epi_args) {
    const int64_t batch = d->batch, M = d->m, N = d->n, K = d->k, ta = d->trans_a, tb = d->trans_b;
    if (K <= 0 || (d->stride_c != M * N && batch > 1) || (M <= 3 && !ta && tb)) return 0;   /* gemv: gemm_task */
    ngemm_job job;
    memset(&job, 0, sizeof job);
    job.d = d; job.A = A; job.B = B; job.bias = bias; job.C = C; job.epi = epi; job.epi_args = epi_args;
    int pack = 0;
    if (!tb) job.vec_m = 0;
    else if (ta) job.vec_m = 1;
    else {
        /* pack the smaller operand, except that with many rows per k (M >= 2K) the row-major
         * form (W^T packed, contiguous stores of C) beats transposed stores even for N > M:
         * 1 thread, 1120 x 256 by 5000: 31 -> 24 ms; 1120 x 256 by 1024: 6.4 -> 4.2 ms; at
         * M <= 1.25 K (64 x 784 by 512, 640 x 512 by 5000, 256 x 1024 by 1024) transposed
         * stores win (each form forced in turn through FullyConnected's compiled one-node
         * graph, CPU time, the minimum of 5 alternating rounds; 2 threads alike) */
        job.vec_m = M <= N && M < 2 * K;
        pack = 1;
    }
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

NN_API void symjit_nn_gemm(const symjit_gemm_desc *d, const float *A, const float *B, const float *bias, float *C,
                           symjit_kernel_fn epi, void **epi_args) {
    gemm_job job = {d, A, B, bias, C, epi, epi_args, 0, 0};
    if (d->batch <= 0 || d->m <= 0 || d->n <= 0) return;
    if (native_on() && d->m * d->n * d->k > g_small_gemm && ngemm(d, A, B, bias, C, epi, epi_args)) return;
    split2(d->m, d->n, d->k, d->batch, 0, &job.mb, &job.nb);
    void *argv[1] = {&job};
    int64_t tasks = d->batch * cdiv(d->m, job.mb) * cdiv(d->n, job.nb);
    symjit_parallel_for(gemm_task, tasks, 1, argv);
}
