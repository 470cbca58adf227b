/* nn/blocked.c -- The channel-blocked layout (NCHW16c): conversions and the blocked convolutions.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

/* ---------------------------------------------------------------------------------------- */
/* Channel-blocked layout (NCHW16c): a tensor (N, C, H, W) stored as (N, C/16, H, W, 16), the */
/* 16 channels of a block at one pixel one vector. passes/blocked_layout.py moves chains of   */
/* convolutions (and the poolings and concatenations between them) into it, with conversions */
/* at the chains' ends. There a depthwise output vector is 9 FMAs of aligned channel vectors (no shifted or  */
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

static void reorder(const symjit_reorder_desc *d, const float *x, float *y, int to_blocked) {
    const int64_t N = d->n, C = d->channels, P = d->positions;
    if (C % BLK != 0) {
        symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT, "nnkernels: blocked layout: %lld channels, expected a multiple of 16",
                         (long long)C);
        return;
    }
    reorder_job job = {x, y, P, cdiv(P, BLK), to_blocked};
    void *argv[1] = {&job};
    symjit_parallel_for(reorder_task, N * (C / BLK) * job.tiles, 64, argv);
}

/* x (N, C, P) -> y (N, C/16, P, 16) */
NN_API void symjit_nn_to_blocked(const symjit_reorder_desc *d, const float *x, float *y) { reorder(d, x, y, 1); }

/* x (N, C/16, P, 16) -> y (N, C, P) */
NN_API void symjit_nn_from_blocked(const symjit_reorder_desc *d, const float *x, float *y) { reorder(d, x, y, 0); }

/* Descriptor of symjit_nn_conv_blocked: symjit_conv_blocked_desc (nnkernels.h).
 * Pointwise (1x1, stride 1, no padding): x (N, C/16, H, W, 16) -> y (N, F/16, H, W, 16);
 * wp: the weights (F, C) packed as panels [F / 16V][C][16V] (filter f: panel f / 16V, lane
 * f % 16V). Depthwise (3x3, padding 1, C == F): wp [C/16][9][16] (tap kh 3 + kw of channel
 * 16 cb + l at (cb 9 + kh 3 + kw) 16 + l). bias: F floats or NULL. relu: the activation of the
 * stores (enum symjit_blocked_act). residual (pointwise only, else NULL): an array of y's shape
 * and layout added to the result before the activation (a residual connection).
 * Direct (kind BLOCKED_DIRECT, the convolution at a chain's entry, e.g. a network's stem): x in
 * NCHW (N, C, H, W), any C, one group, no dilation -> y (N, F/16, OH, OW, 16); the descriptor
 * has kernel_h, kernel_w, pad_h, pad_w (the stride both directions); wp: the weights
 * (F, C, KH, KW) packed as panels [F / 16V][C][KH][KW][16V]. */

typedef struct {
    const float *x, *wp, *bias, *res;   /* res: the residual (pointwise) or NULL */
    float *y;
    int64_t N, C, F, H, W, OH, OW, S, V, R;
    int relu;
    int64_t panels, ptiles, pb, pg;   /* pointwise: 16V-filter panels, R-pixel tiles; blocks of each per task */
    int64_t ni;                       /* pointwise and general: images per task (split_panels) */
    int64_t rb;                       /* depthwise: row blocks per plane; direct: per image */
    int64_t KH, KW, PH, PW;           /* direct: kernel and padding */
    int64_t kcb;                      /* general: input channel blocks per weight chunk (genb_chunk) */
    /* general, unpadded input (genb_run): output rows [oh_lo, oh_hi) and columns [ow_lo, ow_hi)
     * whose taps all lie inside the input; tiles of other pixels are edge tiles */
    int64_t unpadded, oh_lo, oh_hi, ow_lo, ow_hi;
} blocked_job;

/* the activation code `act` (enum symjit_blocked_act) of v; NaN stays NaN */
static inline float act_f(float v, int act) {
    if (act == SYMJIT_ACT_NONE) return v;
    v = relu_f(v);
    return act == SYMJIT_ACT_RELU6 && v > 6.0f ? 6.0f : v;
}

#ifdef NN_HAVE_AVX512
/* act_f on 16 lanes (min(6, v) returns v where v is NaN) */
NN_AVX512 static inline __m512 act_ps(__m512 v, int act) {
    if (act == SYMJIT_ACT_NONE) return v;
    v = relu_ps(v);
    return act == SYMJIT_ACT_RELU6 ? _mm512_min_ps(_mm512_set1_ps(6.0f), v) : v;
}

/* one step of a tile of R rows x V filter vectors (the blocked pointwise, direct and general
 * tiles): acc[r][v] += AT * w[16 v, 16 v + 16), AT an expression of the row r_ (the input value
 * row r_ broadcasts) */
#define RV_STEP_AT(R, V, acc, w, AT)                                                                        \
    do {                                                                                                    \
        __m512 b_[V];                                                                                       \
        for (int v_ = 0; v_ < V; v_++) b_[v_] = _mm512_loadu_ps((w) + 16 * v_);                             \
        for (int r_ = 0; r_ < R; r_++) {                                                                    \
            const __m512 a_ = _mm512_set1_ps(AT);                                                           \
            for (int v_ = 0; v_ < V; v_++) (acc)[r_][v_] = _mm512_fmadd_ps(a_, b_[v_], (acc)[r_][v_]);      \
        }                                                                                                   \
    } while (0)
/* the step with row r's input at x[off[r]] */
#define RV_STEP(R, V, acc, w, x, off) RV_STEP_AT(R, V, acc, w, (x)[(off)[r_]])

/* pointwise tile: pixels [p0, p0 + R) x the panel's 16V filters. x: the image's input at
 * channel block 0, pixel 0; wp: the panel; bias: the panel's 16V (or NULL); y: the panel's
 * first output block at pixel 0; res: the residual at the same place as y (or NULL). FULL:
 * every row inside the plane (constant offsets, plain stores); else rows past the plane
 * recompute pixel p0 and are not stored. */
#define PWB_TILE(R, V, FULL)                                                                                \
    NN_AVX512 static void pwb_tile_##R##x##V##_##FULL(const float *x, int64_t P, int64_t CB, const float *wp, \
                                                      const float *bias, const float *res, float *y,        \
                                                      int64_t p0, int relu) {                               \
        const int64_t nr = FULL ? R : imin(R, P - p0);                                                     \
        if (CB < 1) __builtin_unreachable();   /* C >= 16: lets GCC keep the sums in registers */         \
        __m512 acc[R][V], b0[V];                                                                           \
        for (int v = 0; v < V; v++) b0[v] = bias ? _mm512_loadu_ps(bias + 16 * v) : _mm512_setzero_ps();    \
        for (int r = 0; r < R; r++)                                                                        \
            for (int v = 0; v < V; v++) acc[r][v] = b0[v];                                                 \
        if (FULL && p0 + 2 * R <= P && g_tune[TUNE_PREFETCH] != TUNE_PREFETCH_BLOCKED_OUT)                                        \
            for (int v = 0; v < V; v++)   /* for writing: the lines the next tile stores */                \
                for (int r = 0; r < R; r++) __builtin_prefetch(y + (v * P + p0 + R + r) * BLK, 1, 3);       \
        int64_t off[R];                                                                                    \
        for (int r = 0; r < R; r++) off[r] = (FULL || r < nr ? r : 0) * BLK;                               \
        const float *xp = x + p0 * BLK;                                                                    \
        for (int64_t cb = 0; cb < CB; cb++) {                                                              \
            const float *xc = xp + cb * P * BLK, *w = wp + cb * BLK * BLK * V;                             \
            for (int ci = 0; ci < BLK; ci++) RV_STEP(R, V, acc, w + ci * BLK * V, xc + ci, off);            \
        }                                                                                                  \
        for (int v = 0; v < V; v++) {  /* (two store loops: an activated copy of the sums would spill them) */ \
            float *yv = y + (v * P + p0) * BLK;                                                            \
            if (res)                                                                                       \
                for (int r = 0; r < R; r++)                                                                \
                    if (FULL || r < nr)                                                                    \
                        acc[r][v] = _mm512_add_ps(acc[r][v], _mm512_loadu_ps(res + (v * P + p0 + r) * BLK)); \
            if (relu)                                                                                      \
                for (int r = 0; r < R; r++) {                                                              \
                    if (FULL || r < nr) _mm512_storeu_ps(yv + r * BLK, act_ps(acc[r][v], relu));           \
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

typedef void (*pwb_tile_fn)(const float *, int64_t, int64_t, const float *, const float *, const float *, float *,
                            int64_t, int);

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
static void pwb_tile_portable(const float *x, int64_t P, int64_t CB, const float *wp, const float *bias,
                              const float *res, float *y, int64_t p0, int relu, int64_t R, int64_t V) {
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
                const float r = acc[16 * v + l] + (res ? res[(v * P + p) * BLK + l] : 0.0f);
                y[(v * P + p) * BLK + l] = act_f(r, relu);
            }
    }
}

/* tasks: (image, block of pixel tiles, group of panels); panels outer within a task, so a
 * panel's weights stay in cache while the task's pixel tiles pass */
static void pwb_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    const blocked_job *j = (const blocked_job *)argv[0];
    const int64_t P = j->H * j->W, CB = j->C / BLK, per = j->pb * j->pg, pw = 16 * j->V;
#ifdef NN_HAVE_AVX512
    const pwb_tile_fn full = native_on() ? pwb_tile_for(j->R, j->V, 1) : NULL;
    const pwb_tile_fn part = native_on() ? pwb_tile_for(j->R, j->V, 0) : NULL;
#endif
    for (int64_t t = begin; t < end; t++) {
        const int64_t ib = (t % per) / j->pg, ig = (t % per) % j->pg;
        const int64_t t0 = ib * j->ptiles / j->pb, t1 = (ib + 1) * j->ptiles / j->pb;
        const int64_t q0 = ig * j->panels / j->pg, q1 = (ig + 1) * j->panels / j->pg;
        for (int64_t q = q0; q < q1; q++)
          for (int64_t n = (t / per) * j->ni; n < imin(j->N, (t / per + 1) * j->ni); n++) {
            const float *x = j->x + n * j->C * P;
            const float *wp = j->wp + q * j->C * pw, *bias = j->bias ? j->bias + q * pw : NULL;
            float *y = j->y + (n * j->F + q * pw) * P;
            const float *res = j->res ? j->res + (n * j->F + q * pw) * P : NULL;
            for (int64_t tile = t0; tile < t1; tile++) {
#ifdef NN_HAVE_AVX512
                if (full) {
                    ((tile + 1) * j->R <= P ? full : part)(x, P, CB, wp, bias, res, y, tile * j->R, j->relu);
                    continue;
                }
#endif
                pwb_tile_portable(x, P, CB, wp, bias, res, y, tile * j->R, j->relu, j->R, j->V);
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
                for (int u = 0; u < DWB_U; u++) _mm512_storeu_ps(yr + (ow + u) * BLK, act_ps(acc[u], relu));
                ow += DWB_U;
            } else {
                __m512 acc = b;
                for (int kh = 0; kh < 3; kh++)
                    for (int kw = 0; kw < 3; kw++) {
                        const int64_t iw = ow * S + kw - 1;
                        if (iw >= 0 && iw < W) acc = _mm512_fmadd_ps(w[kh * 3 + kw], _mm512_loadu_ps(rows[kh] + iw * BLK), acc);
                    }
                _mm512_storeu_ps(yr + ow * BLK, act_ps(acc, relu));
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
            for (int64_t i = 0; i < OW * BLK; i++) yr[i] = act_f(yr[i], relu);
    }
}

/* tasks: (image and channel block, block of output rows) */
static void dwb_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
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
                    if (SC || r < nr) _mm512_storeu_ps(y + (v * OHW + r) * BLK, act_ps(acc[r][v], j->relu));             \
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
            y[v * j->OH * j->OW * BLK + l] = act_f(r, j->relu);
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
    NN_FLUSH_DENORMALS;
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

/* General blocked convolution (kind SYMJIT_BLOCKED_GENERAL): x (N, C/16, H, W, 16) -> y (N,
 * F/16, OH, OW, 16), any kernel, padding and stride (both directions), one group, no dilation;
 * wp: the weights (F, C, KH, KW) packed as panels [F / 16V][C/16][KH][KW][16][16V]. The
 * output plane runs in tiles of R pixels consecutive in the flattened plane (crossing rows: no
 * short tiles at the ends of narrow rows) x the panel's V filter vectors, each pixel's input
 * offset computed once per tile. Per input channel block and tap: 16 steps of V weight vectors
 * and R broadcast input values, as the pointwise tile. Padding: the AVX-512 path reads the
 * input as it is; tiles whose pixels all have every tap inside (genb_interior) run GENB_TILE,
 * the others GENB_EDGE_TILE, which reads a zero block for taps outside and skips a tap that is
 * outside for every pixel of the tile (as the padded copy's zeros, except that a NaN or
 * infinite weight times padding is not NaN there). The portable path (and
 * the `blocked_pad_copy` override) first copies the input into a zero-bordered plane (the
 * caller's scratch), so every tap of every pixel lies inside. Without the copy, 2-vCPU Xeon,
 * paired whole calls: Inception v3 batch 1 0.96, batch 8 0.97, DenseNet-121 batch 1 0.94;
 * against ONNX Runtime (bench_conv_chains), four 7x1 192 -> 192 at 17x17, batch 8: 1.24 -> 1.06
 * of its time, 3x3 448 -> 448 at 8x8 1.26-1.33 -> 1.09-1.15. residual: as the pointwise kind's. */
typedef struct {
    const float *x;
    float *xp;
    int64_t H, W, Hp, Wp, PH, PW;
} pad_job;

/* tasks: rows of the padded planes (N C/16 Hp of them) */
static void genb_pad_task(int64_t begin, int64_t end, void **argv) {
    const pad_job *j = (const pad_job *)argv[0];
    const size_t row = (size_t)(j->Wp * BLK);
    for (int64_t t = begin; t < end; t++) {
        const int64_t plane = t / j->Hp, ih = t % j->Hp - j->PH;
        float *d = j->xp + t * (int64_t)row;
        if (ih < 0 || ih >= j->H) {
            memset(d, 0, row * sizeof(float));
            continue;
        }
        memset(d, 0, (size_t)(j->PW * BLK) * sizeof(float));
        memcpy(d + j->PW * BLK, j->x + (plane * j->H + ih) * j->W * BLK, (size_t)(j->W * BLK) * sizeof(float));
        memset(d + (j->PW + j->W) * BLK, 0, (size_t)((j->Wp - j->W - j->PW) * BLK) * sizeof(float));
    }
}

/* the input offset (floats) of output pixel p's first tap in the blocked plane (PH, PW: the
 * padding still to apply, 0 once the input was copied into a padded plane; p must then be an
 * interior pixel, every tap inside) */
static inline int64_t genb_offset(const blocked_job *j, int64_t p) {
    return (((p / j->OW) * j->S - j->PH) * j->W + (p % j->OW) * j->S - j->PW) * BLK;
}

/* whether output pixels [p0, p0 + n) all have every tap inside an unpadded input */
static inline int genb_interior(const blocked_job *j, int64_t p0, int64_t n) {
    const int64_t oh0 = p0 / j->OW, oh1 = (p0 + n - 1) / j->OW, ow0 = p0 % j->OW, ow1 = (p0 + n - 1) % j->OW;
    if (oh0 < j->oh_lo || oh1 >= j->oh_hi) return 0;
    if (oh0 == oh1) return ow0 >= j->ow_lo && ow1 < j->ow_hi;
    return j->ow_lo == 0 && j->ow_hi == j->OW;   /* crossing rows: every column must be interior */
}

#ifdef NN_HAVE_AVX512
/* x: the image's (padded) input; wp: the panel; bias: the panel's 16V (or NULL); y, res: the
 * panel's first output (residual) block at pixel 0; pixels [p0, p0 + nr), nr <= R (rows past
 * nr recompute pixel p0 and are not stored); input channel blocks [cb0, cb1) (a chunk, see
 * genb_task): the first chunk starts from the bias plus the residual, a later one from the
 * sums stored in y; the last one stores the activation of the sums, earlier ones the sums. */
/* The general tiles' common parts (GENB_TILE, GENB_EDGE_TILE; the tile's arguments in scope):
 * the sums acc[R][V] started from the bias plus the residual (first chunk) or from the sums
 * stored in y (later chunks), and the stores of the last chunk's activation, or of the sums. */
#define GENB_SUMS_START(R, V)                                                                               \
        const int64_t OHW = j->OH * j->OW, HW = j->H * j->W, KH = j->KH, KW = j->KW;                        \
        const int first = cb0 == 0, last = cb1 == j->C / BLK;                                               \
        if (cb1 <= cb0 || KH < 1 || KW < 1) __builtin_unreachable();   /* sums stay in registers */         \
        __m512 acc[R][V];                                                                                   \
        for (int v = 0; v < V; v++) {                                                                       \
            const __m512 b0 = first && bias ? _mm512_loadu_ps(bias + 16 * v) : _mm512_setzero_ps();         \
            const float *from = first ? res : y;                                                            \
            for (int r = 0; r < R; r++)                                                                     \
                acc[r][v] = from && r < nr ? _mm512_add_ps(b0, _mm512_loadu_ps(from + (v * OHW + p0 + r) * BLK)) : b0;\
        }

#define GENB_SUMS_STORE(R, V)                                                                               \
        for (int v = 0; v < V; v++) {                                                                       \
            float *yv = y + (v * OHW + p0) * BLK;                                                           \
            for (int r = 0; r < R; r++)                                                                     \
                if (r < nr) _mm512_storeu_ps(yv + r * BLK, last ? act_ps(acc[r][v], j->relu) : acc[r][v]);  \
        }

#define GENB_TILE(R, V)                                                                                     \
    NN_AVX512 static void genb_tile_##R##x##V(const blocked_job *j, const float *x, const float *wp,        \
                                              const float *bias, const float *res, float *y, int64_t p0,    \
                                              int64_t nr, int64_t cb0, int64_t cb1) {                       \
        GENB_SUMS_START(R, V);                                                                              \
        int64_t off[R];                                                                                     \
        for (int r = 0; r < R; r++) off[r] = genb_offset(j, p0 + (r < nr ? r : 0));                         \
        const float *w = wp + cb0 * KH * KW * BLK * 16 * V;                                                 \
        for (int64_t cb = cb0; cb < cb1; cb++)                                                              \
            for (int64_t kh = 0; kh < KH; kh++)                                                             \
                for (int64_t kw = 0; kw < KW; kw++, w += BLK * 16 * V) {                                    \
                    const float *xt = x + (cb * HW + kh * j->W + kw) * BLK;                                 \
                    for (int ci = 0; ci < BLK; ci++) RV_STEP(R, V, acc, w + ci * 16 * V, xt + ci, off);     \
                }                                                                                           \
        GENB_SUMS_STORE(R, V);                                                                              \
    }
GENB_TILE(6, 4)
GENB_TILE(7, 4)
GENB_TILE(8, 3)
GENB_TILE(12, 2)
GENB_TILE(14, 1)

/* sixteen zeros: the channel block every tap outside the input reads (genb edge tiles) */
static const float genb_zeros[BLK] __attribute__((aligned(64)));

/* The edge tile: GENB_TILE's arithmetic on an unpadded input, for tiles with pixels whose taps
 * reach into the padding. Per tap, each row's input pointer is its pixel's tap position, or
 * the zero block where that lies outside the plane; the padding is never materialised (the
 * copy into a padded plane cost as much as a tenth of a layer on 17x17 planes). */
#define GENB_EDGE_TILE(R, V)                                                                                \
    NN_AVX512 static void genb_edge_tile_##R##x##V(const blocked_job *j, const float *x, const float *wp,   \
                                                   const float *bias, const float *res, float *y, int64_t p0,\
                                                   int64_t nr, int64_t cb0, int64_t cb1) {                  \
        GENB_SUMS_START(R, V);                                                                              \
        const uint64_t H = (uint64_t)j->H, W = (uint64_t)j->W;                                              \
        int64_t ih0[R], iw0[R], o0[R];   /* each row's first tap: input row, column, pixel offset */        \
        for (int r = 0; r < R; r++) {                                                                       \
            const int64_t p = p0 + (r < nr ? r : 0);                                                        \
            ih0[r] = (p / j->OW) * j->S - j->PH, iw0[r] = (p % j->OW) * j->S - j->PW;                       \
            o0[r] = ih0[r] * j->W + iw0[r];                                                                 \
        }                                                                                                   \
        const int64_t step = KH * KW * BLK * 16 * V;   /* weights from one channel block to the next */     \
        for (int64_t kh = 0; kh < KH; kh++)                                                                 \
            for (int64_t kw = 0; kw < KW; kw++) {                                                           \
                /* per tap, each row's input at channel block cb0 and its step per block, or the            \
                 * zero block and no step where the tap lies outside (branch-free: which taps are           \
                 * outside is not predictable); channel blocks inside, so the test is once per tap */       \
                const float *xr[R];                                                                         \
                int64_t inc[R];                                                                             \
                int any = 0;                                                                                \
                for (int r = 0; r < R; r++) {                                                               \
                    const int in = ((uint64_t)(ih0[r] + kh) < H) & ((uint64_t)(iw0[r] + kw) < W);           \
                    xr[r] = in ? x + (cb0 * HW + o0[r] + kh * j->W + kw) * BLK : genb_zeros;                \
                    inc[r] = in ? HW * BLK : 0;                                                             \
                    any |= in;                                                                              \
                }                                                                                           \
                if (!any) continue;   /* outside for every pixel: the tap adds nothing */                   \
                const float *w = wp + (cb0 * KH * KW + kh * KW + kw) * BLK * 16 * V;                        \
                for (int64_t cb = cb0; cb < cb1; cb++, w += step) {                                         \
                    for (int ci = 0; ci < BLK; ci++) RV_STEP_AT(R, V, acc, w + ci * 16 * V, xr[r_][ci]);    \
                    for (int r = 0; r < R; r++) xr[r] += inc[r];                                            \
                }                                                                                           \
            }                                                                                               \
        GENB_SUMS_STORE(R, V);                                                                              \
    }
GENB_EDGE_TILE(6, 4)
GENB_EDGE_TILE(7, 4)
GENB_EDGE_TILE(8, 3)
GENB_EDGE_TILE(12, 2)
GENB_EDGE_TILE(14, 1)

typedef void (*genb_tile_fn)(const blocked_job *, const float *, const float *, const float *, const float *,
                             float *, int64_t, int64_t, int64_t, int64_t);

/* the tile for R rows x V vectors: the interior one, or the edge one (`edge`) */
static genb_tile_fn genb_tile_for(int64_t R, int64_t V, int edge) {
    switch (V) {
    case 4:
        if (R == 7) return edge ? genb_edge_tile_7x4 : genb_tile_7x4;
        return edge ? genb_edge_tile_6x4 : genb_tile_6x4;
    case 3: return edge ? genb_edge_tile_8x3 : genb_tile_8x3;
    case 2: return edge ? genb_edge_tile_12x2 : genb_tile_12x2;
    default: return edge ? genb_edge_tile_14x1 : genb_tile_14x1;
    }
}
#endif

/* the portable tile (same arguments and chunk rule as GENB_TILE's, any R and V) */
NN_CLONES
static void genb_tile_portable(const blocked_job *j, const float *x, const float *wp, const float *bias,
                               const float *res, float *y, int64_t p0, int64_t nr, int64_t cb0, int64_t cb1) {
    const int64_t pw = 16 * j->V, OHW = j->OH * j->OW, HW = j->H * j->W;
    const int first = cb0 == 0, last = cb1 == j->C / BLK;
    float acc[64];
    for (int64_t p = p0; p < p0 + nr; p++) {
        const float *xp = x + genb_offset(j, p), *w = wp + cb0 * j->KH * j->KW * BLK * pw;
        const float *from = first ? res : y;
        for (int64_t v = 0; v < j->V; v++)
            for (int l = 0; l < BLK; l++) {
                const int64_t at = (v * OHW + p) * BLK + l;
                acc[16 * v + l] = (first && bias ? bias[16 * v + l] : 0.0f) + (from ? from[at] : 0.0f);
            }
        for (int64_t cb = cb0; cb < cb1; cb++)
            for (int64_t kh = 0; kh < j->KH; kh++)
                for (int64_t kw = 0; kw < j->KW; kw++) {
                    const float *xt = xp + (cb * HW + kh * j->W + kw) * BLK;
                    for (int ci = 0; ci < BLK; ci++, w += pw)
                        for (int64_t i = 0; i < pw; i++) acc[i] += xt[ci] * w[i];
                }
        for (int64_t v = 0; v < j->V; v++)
            for (int l = 0; l < BLK; l++) {
                const int64_t at = (v * OHW + p) * BLK + l;
                y[at] = last ? act_f(acc[16 * v + l], j->relu) : acc[16 * v + l];
            }
    }
}

/* tasks: (image group, block of pixel tiles, group of panels), as pwb_task's; per panel the
 * input channel blocks in chunks of j->kcb (genb_chunk), each chunk over every image and tile
 * of the task before the next, so that a chunk of the panel's weights is read from memory once
 * per task and then from cache */
static void genb_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    const blocked_job *j = (const blocked_job *)argv[0];
    const int64_t OHW = j->OH * j->OW, per = j->pb * j->pg, pw = 16 * j->V, CB = j->C / BLK;
    const int64_t panel = j->C * j->KH * j->KW * pw;
#ifdef NN_HAVE_AVX512
    const genb_tile_fn tile_fn = native_on() ? genb_tile_for(j->R, j->V, 0) : NULL;
    const genb_tile_fn edge_fn = tile_fn && j->unpadded ? genb_tile_for(j->R, j->V, 1) : NULL;
#endif
    for (int64_t t = begin; t < end; t++) {
        const int64_t ib = (t % per) / j->pg, ig = (t % per) % j->pg;
        const int64_t t0 = ib * j->ptiles / j->pb, t1 = (ib + 1) * j->ptiles / j->pb;
        const int64_t q0 = ig * j->panels / j->pg, q1 = (ig + 1) * j->panels / j->pg;
        for (int64_t q = q0; q < q1; q++)
          for (int64_t cb0 = 0; cb0 < CB; cb0 += j->kcb) {
            const int64_t cb1 = imin(CB, cb0 + j->kcb);
            for (int64_t n = (t / per) * j->ni; n < imin(j->N, (t / per + 1) * j->ni); n++) {
              const float *x = j->x + n * j->C * j->H * j->W;
              const float *wp = j->wp + q * panel, *bias = j->bias ? j->bias + q * pw : NULL;
              float *y = j->y + (n * j->F + q * pw) * OHW;
              const float *res = j->res ? j->res + (n * j->F + q * pw) * OHW : NULL;
              for (int64_t tile = t0; tile < t1; tile++) {
                const int64_t p0 = tile * j->R, nr = imin(j->R, OHW - p0);
#ifdef NN_HAVE_AVX512
                if (tile_fn) {
                    (edge_fn && !genb_interior(j, p0, nr) ? edge_fn : tile_fn)(j, x, wp, bias, res, y, p0, nr, cb0, cb1);
                    continue;
                }
#endif
                genb_tile_portable(j, x, wp, bias, res, y, p0, nr, cb0, cb1);
              }
            }
          }
    }
}

/* Weight bytes of a chunk of a general convolution's panel (genb_chunk): the chunk is read
 * from memory once per task and from L2 for each further tile and image. */
#define BLOCKED_CHUNK_BYTES (256 * 1024)

/* input channel blocks per chunk of a panel (genb_task): all of them (one chunk) where the
 * panel's weights fit BLOCKED_CHUNK_BYTES or a task has one tile of one image (no reuse), else
 * as many as fit (at least one). Each chunk after the first costs a load and a store of the
 * tile's sums, against 16 KH KW steps per channel block. */
static int64_t genb_chunk(const blocked_job *j) {
    const int64_t CB = j->C / BLK, budget = g_tune[TUNE_BLOCKED_CHUNK] ? g_tune[TUNE_BLOCKED_CHUNK] : BLOCKED_CHUNK_BYTES;
    const int64_t per_cb = BLK * j->KH * j->KW * 16 * j->V * (int64_t)sizeof(float);
    const int64_t reuse = cdiv(j->ptiles, j->pb) * j->ni;
    if (budget < 0 || reuse <= 1 || per_cb * CB <= budget) return CB;
    return imax(1, budget / per_cb);
}

/* the divisor of n nearest to x (the larger one on a tie), at least 1 */
static int64_t divisor_near(int64_t n, double x) {
    int64_t best = 1;
    for (int64_t d = 1; d <= n; d++)
        if (n % d == 0 && fabs((double)d - x) <= fabs((double)best - x)) best = d;
    return best;
}

/* The largest weights (bytes) that per-image tasks read from L2 for every image after the
 * first (split_panels); larger ones make the tasks panel groups x image groups instead. */
#define BLOCKED_L2_WEIGHT_BYTES (1024 * 1024)

/* pg panel groups x pb pixel blocks of a panel-tiled job (pointwise and general kinds) over
 * P output pixels per image for `flops` in all: the tasks read C (pg P + pb F) floats of input
 * and weights in all, least at pg = sqrt(want F / P) (large planes split by pixels, small
 * ones by filters). Measured in mobilenet1.0, in graph (this split / filters first): 0.82-0.90
 * on 112x112-28x28 planes with two threads, the whole call 0.93; one thread unchanged.
 * Panel groups are equal (pg divides the panels) and the tasks come in whole rounds of
 * `threads` where the pixel blocks allow: 192 filters in 3 panels of 64 had been cut into
 * groups of 1 and 2 panels, so half the tasks took twice as long. Measured on a 2-vCPU Xeon,
 * four 192 -> 192 1x7 convolutions at 17x17, batch 1, whole call paired: 3 x 4 tasks 0.87 of
 * 2 x 4 (unequal) ones. TUNE_BLOCKED_SPLIT = 1 restores the earlier split. */
static void split_panels(blocked_job *j, int64_t P, double flops, int64_t threads) {
    j->R = pwb_rows(j->V, P);
    j->panels = j->F / (16 * j->V);
    j->ptiles = cdiv(P, j->R);
    const int64_t total = tiles_want(flops, threads);
    const int even = g_tune[TUNE_BLOCKED_SPLIT] != 1;
    const int64_t weight_bytes = j->C * imax(1, j->KH) * imax(1, j->KW) * j->F * (int64_t)sizeof(float);
    const int weights_in_l2 = weight_bytes <= BLOCKED_L2_WEIGHT_BYTES && g_tune[TUNE_BLOCKED_SPLIT] == 0;
    if (j->N > 1 && j->F > P && !weights_in_l2) {
        /* the weights outweigh an image's plane (deep layers on small maps, batches) and do
         * not fit in L2: tasks of panel groups x image groups, images inside the panel loop,
         * so that each panel is read from memory once per image group instead of once per
         * image. Measured in Inception v3 batch 8 (2048 -> 320-448 at 8x8, one thread):
         * 1.5-2.0x the NCHW time with per-image tasks. Weights that fit L2 (MobileNet's 512 ->
         * 512 at 14x14: 1 MB) are read from there for each image, so per-image tasks, which
         * read each input once instead of once per panel group, are faster: on a 2-vCPU Xeon
         * (2 MB L2), batch 8, two threads, whole call paired against this branch for every
         * size (TUNE_BLOCKED_SPLIT 2): MobileNet 1.0 0.97 (its 512 -> 512 layers 0.88-0.92),
         * Inception v3 0.94, MobileNetV2 0.97, ResNet-18 0.98, DenseNet-121 1.00; MobileNet
         * 1.0 at one thread 0.98. */
        j->pb = 1;
        j->pg = imax(1, imin(j->panels, total));
        if (even) j->pg = divisor_near(j->panels, (double)j->pg);
        j->ni = cdiv(j->N, imax(1, imin(j->N, cdiv(total, j->pg))));
        return;
    }
    j->ni = 1;
    const int64_t want = cdiv(total, j->N);
    const double pg = sqrt((double)want * (double)j->F / (double)P);
    j->pg = imax(1, imin(imin(j->panels, want), (int64_t)(pg + 0.5)));
    if (even) j->pg = divisor_near(j->panels, (double)j->pg);
    j->pb = imax(1, imin(j->ptiles, cdiv(want, j->pg)));
    if (even && threads > 1 && total > 1)   /* whole rounds: N pg pb a multiple of the threads */
        while ((j->N * j->pg * j->pb) % threads != 0 && j->pb < j->ptiles) j->pb++;
}

static void genb_run(blocked_job *j, int64_t threads) {
    const int64_t Hp = j->H + 2 * j->PH, Wp = j->W + 2 * j->PW;
#ifdef NN_HAVE_AVX512
    /* the AVX-512 tiles read an unpadded input: edge tiles treat taps outside it as zeros */
    j->unpadded = native_on() && g_tune[TUNE_BLOCKED_PAD_COPY] != 1;
#endif
    if (j->unpadded) {
        interior(j->H, j->KH, j->S, j->PH, j->OH, &j->oh_lo, &j->oh_hi);
        interior(j->W, j->KW, j->S, j->PW, j->OW, &j->ow_lo, &j->ow_hi);
    } else if (j->PH > 0 || j->PW > 0) {
        float *xp = scratch(6, (size_t)(j->N * j->C * Hp * Wp));
        if (!xp) return;
        pad_job pj = {j->x, xp, j->H, j->W, Hp, Wp, j->PH, j->PW};
        void *pargv[1] = {&pj};
        symjit_parallel_for(genb_pad_task, j->N * (j->C / BLK) * Hp, 16, pargv);
        j->x = xp, j->H = Hp, j->W = Wp, j->PH = j->PW = 0;
    }
    const int64_t P = j->OH * j->OW;
    split_panels(j, P, 2.0 * (double)j->N * (double)P * (double)j->F * (double)(j->C * j->KH * j->KW), threads);
    j->kcb = genb_chunk(j);
    void *argv[1] = {j};
    symjit_parallel_for(genb_task, cdiv(j->N, j->ni) * j->pb * j->pg, 1, argv);
}

NN_API void symjit_nn_conv_blocked(const symjit_conv_blocked_desc *d, const float *x, const float *wp,
                                   const float *bias, const float *residual, float *y) {
    blocked_job j = {x, wp, bias, NULL, y, d->n, d->channels, d->filters, d->height, d->width, d->out_height,
                     d->out_width, d->stride, d->vectors, 0, (int)d->relu, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const int64_t threads = symjit_get_num_threads();
    void *argv[1] = {&j};
    const int ok_channels = j.C % BLK == 0 && j.F % BLK == 0 && j.C > 0 && j.F > 0;
    if (d->relu < SYMJIT_ACT_NONE || d->relu > SYMJIT_ACT_RELU6 || (residual && d->kind != SYMJIT_BLOCKED_POINTWISE && d->kind != SYMJIT_BLOCKED_GENERAL)) {
        symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT,
                         "nnkernels: conv_blocked: unsupported activation %lld or residual for kind %lld",
                         (long long)d->relu, (long long)d->kind);
        return;
    }
    j.res = residual;
    if (d->kind == SYMJIT_BLOCKED_POINTWISE && ok_channels && j.V >= 1 && j.V <= 4 && j.F % (16 * j.V) == 0 && j.S == 1) {
        const int64_t P = j.H * j.W;
        split_panels(&j, P, 2.0 * (double)j.N * (double)P * (double)j.C * (double)j.F, threads);
        symjit_parallel_for(pwb_task, cdiv(j.N, j.ni) * j.pb * j.pg, 1, argv);
        return;
    }
    if (d->kind == SYMJIT_BLOCKED_DIRECT && j.C > 0 && j.F % BLK == 0 && j.F > 0 && j.V >= 1 && j.V <= 4 &&
        j.F % (16 * j.V) == 0 && j.S >= 1 && d->kernel_h >= 1 && d->kernel_w >= 1 && d->pad_h >= 0 &&
        d->pad_w >= 0) {
        j.KH = d->kernel_h, j.KW = d->kernel_w, j.PH = d->pad_h, j.PW = d->pad_w;
        j.R = j.V == 4 ? 6 : j.V == 3 ? 9 : 14;   /* 14-28 sums, the tiles above */
        const double flops = 2.0 * (double)j.N * (double)(j.OH * j.OW) * (double)j.F * (double)(j.C * j.KH * j.KW);
        j.rb = imax(1, imin(j.OH, cdiv(tiles_want(flops, threads), j.N)));
        symjit_parallel_for(dirb_task, j.N * j.rb, 1, argv);
        return;
    }
    if (d->kind == SYMJIT_BLOCKED_GENERAL && ok_channels && j.V >= 1 && j.V <= 4 && j.F % (16 * j.V) == 0 &&
        j.S >= 1 && d->kernel_h >= 1 && d->kernel_w >= 1 && d->pad_h >= 0 && d->pad_w >= 0 &&
        (j.OH - 1) * j.S + d->kernel_h <= j.H + 2 * d->pad_h && (j.OW - 1) * j.S + d->kernel_w <= j.W + 2 * d->pad_w) {
        j.KH = d->kernel_h, j.KW = d->kernel_w, j.PH = d->pad_h, j.PW = d->pad_w;
        genb_run(&j, threads);
        return;
    }
    if (d->kind == SYMJIT_BLOCKED_DEPTHWISE && ok_channels && j.C == j.F && (j.S == 1 || j.S == 2)) {
        const int64_t planes = j.N * (j.C / BLK);
        const int64_t want = tiles_want(18.0 * (double)planes * BLK * (double)(j.OH * j.OW), threads);
        j.rb = imax(1, imin(j.OH, cdiv(want, planes)));
        symjit_parallel_for(dwb_task, planes * j.rb, 1, argv);
        return;
    }
    symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT,
                     "nnkernels: conv_blocked: unsupported descriptor (kind %lld, C %lld, F %lld, stride %lld, V %lld)",
                     (long long)d->kind, (long long)j.C, (long long)j.F, (long long)j.S, (long long)j.V);
}

/* Pooling in the blocked layout: x (N, C/16, H, W, 16) -> y (N, C/16, OH, OW, 16); d as
 * symjit_nn_pool's with planes = N C / 16, 2-D (in_size[0] == out_size[0] == kernel[0] == 1),
 * max, avg or sum: per lane the NCHW kernels' windows, divisors and NaN rule (max skips NaN
 * like numpy's fmax), each output one vector from the window's aligned input vectors. */
typedef struct {
    const symjit_pool_desc *d;
    const float *x;
    float *y;
} poolb_job;

#ifdef NN_HAVE_AVX512
/* widest input row whose column sums poolb_row_avx512 keeps on the stack (vectors) */
#define POOLB_COLSUM_MAX 512

/* one output row (as poolb_row_portable) on 16-lane vectors */
NN_AVX512 static void poolb_row_avx512(const symjit_pool_desc *d, const float *xp, float *yr, int64_t oh) {
    const int64_t H = d->in_size[1], W = d->in_size[2], OW = d->out_size[2], h0 = win_lo(oh, d->stride[1], d->pad[1]);
    const int64_t ih0 = imax(h0, 0), ih1 = imin(h0 + d->kernel[1], H);
    const int max = d->type == SYMJIT_POOL_MAX;
    if (!max && W <= POOLB_COLSUM_MAX && d->kernel[1] > 1) {
        /* avg and sum, separably: the window rows' sum per input column once (independent
         * adds), then each output the sum of its window's columns; each input vector is read
         * once per output row instead of once per window that covers it */
        __m512 cs[POOLB_COLSUM_MAX];
        for (int64_t iw = 0; iw < W; iw++) {
            const float *v = xp + (ih0 * W + iw) * BLK;
            __m512 a = ih1 > ih0 ? _mm512_loadu_ps(v) : _mm512_setzero_ps();
            for (int64_t ih = ih0 + 1; ih < ih1; ih++) a = _mm512_add_ps(a, _mm512_loadu_ps(v + (ih - ih0) * W * BLK));
            cs[iw] = a;
        }
        for (int64_t ow = 0; ow < OW; ow++) {
            const int64_t w0 = win_lo(ow, d->stride[2], d->pad[2]), iw0 = imax(w0, 0), iw1 = imin(w0 + d->kernel[2], W);
            __m512 acc = _mm512_setzero_ps();
            for (int64_t iw = iw0; iw < iw1; iw++) acc = _mm512_add_ps(acc, cs[iw]);
            if (d->type == SYMJIT_POOL_AVG) acc = _mm512_div_ps(acc, _mm512_set1_ps(pool_divisor(d, 0, oh, ow)));
            _mm512_storeu_ps(yr + ow * BLK, acc);
        }
        return;
    }
    for (int64_t ow = 0; ow < OW; ow++) {
        const int64_t w0 = win_lo(ow, d->stride[2], d->pad[2]), iw0 = imax(w0, 0), iw1 = imin(w0 + d->kernel[2], W);
        __m512 acc = max ? _mm512_set1_ps(-FLT_MAX) : _mm512_setzero_ps();
        for (int64_t ih = ih0; ih < ih1; ih++) {
            const float *v = xp + (ih * W + iw0) * BLK;
            if (max)
                for (int64_t iw = iw0; iw < iw1; iw++, v += BLK) {
                    const __m512 x = _mm512_loadu_ps(v);   /* v > acc, or acc NaN: take v */
                    const __mmask16 m = _mm512_cmp_ps_mask(x, acc, _CMP_GT_OQ) | _mm512_cmp_ps_mask(acc, acc, _CMP_UNORD_Q);
                    acc = _mm512_mask_mov_ps(acc, m, x);
                }
            else
                for (int64_t iw = iw0; iw < iw1; iw++, v += BLK) acc = _mm512_add_ps(acc, _mm512_loadu_ps(v));
        }
        if (d->type == SYMJIT_POOL_AVG) acc = _mm512_div_ps(acc, _mm512_set1_ps(pool_divisor(d, 0, oh, ow)));
        _mm512_storeu_ps(yr + ow * BLK, acc);
    }
}
#endif

/* one output row oh of a plane: xp the plane's input, yr the row's output */
NN_CLONES
static void poolb_row_portable(const symjit_pool_desc *d, const float *restrict xp, float *restrict yr, int64_t oh) {
    const int64_t H = d->in_size[1], W = d->in_size[2], OW = d->out_size[2], h0 = win_lo(oh, d->stride[1], d->pad[1]);
    const int max = d->type == SYMJIT_POOL_MAX;
    for (int64_t ow = 0; ow < OW; ow++) {
            const int64_t w0 = win_lo(ow, d->stride[2], d->pad[2]);
            float acc[BLK];
            for (int l = 0; l < BLK; l++) acc[l] = max ? -FLT_MAX : 0.0f;
            for (int64_t ih = imax(h0, 0); ih < imin(h0 + d->kernel[1], H); ih++)
                for (int64_t iw = imax(w0, 0); iw < imin(w0 + d->kernel[2], W); iw++) {
                    const float *restrict v = xp + (ih * W + iw) * BLK;
                    if (max)
                        for (int l = 0; l < BLK; l++) acc[l] = (v[l] > acc[l] || acc[l] != acc[l]) ? v[l] : acc[l];
                    else
                        for (int l = 0; l < BLK; l++) acc[l] += v[l];
                }
            const float div = d->type == SYMJIT_POOL_AVG ? pool_divisor(d, 0, oh, ow) : 1.0f;
            for (int l = 0; l < BLK; l++) yr[ow * BLK + l] = d->type == SYMJIT_POOL_AVG ? acc[l] / div : acc[l];
    }
}

/* tasks: (plane, output row) */
static void poolb_task(int64_t begin, int64_t end, void **argv) {
    const poolb_job *j = (const poolb_job *)argv[0];
    const symjit_pool_desc *d = j->d;
    const int64_t HW = d->in_size[1] * d->in_size[2], OH = d->out_size[1], OW = d->out_size[2];
    for (int64_t t = begin; t < end; t++) {
        const float *xp = j->x + (t / OH) * HW * BLK;
        float *yr = j->y + t * OW * BLK;
#ifdef NN_HAVE_AVX512
        if (native_on()) {
            poolb_row_avx512(d, xp, yr, t % OH);
            continue;
        }
#endif
        poolb_row_portable(d, xp, yr, t % OH);
    }
}

NN_API void symjit_nn_pool_blocked(const symjit_pool_desc *d, const float *x, float *y) {
    if (d->in_size[0] != 1 || d->out_size[0] != 1 || d->kernel[0] != 1 || d->type == SYMJIT_POOL_LP) {
        symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT, "nnkernels: pool_blocked: 2-D max, avg or sum pooling only");
        return;
    }
    poolb_job job = {d, x, y};
    void *argv[1] = {&job};
    const int64_t rows = d->planes * d->out_size[1];
    const int64_t per_row = imax(1, d->out_size[2] * d->kernel[1] * d->kernel[2] * BLK);
    symjit_parallel_for(poolb_task, rows, imax(1, 65536 / per_row), argv);
}
