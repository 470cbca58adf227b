/* nn/depthwise.c -- Depthwise convolution: phase-plane, 3x3 row kernels, channel-vectorised and portable loops.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

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
    const int prefetch = g_tune[TUNE_PREFETCH] != TUNE_PREFETCH_DW_ROWS,
              prefetch_out = g_tune[TUNE_PREFETCH] != TUNE_PREFETCH_DW_OUT;
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
    const int prefetch = g_tune[TUNE_PREFETCH] != TUNE_PREFETCH_DW_ROWS,
              prefetch_out = g_tune[TUNE_PREFETCH] != TUNE_PREFETCH_DW_OUT;
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
    else if (g_tune[TUNE_CONV] != TUNE_CONV_DW_PERMUTE_ROWS)
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

/* Portable counterpart of dw_plane_avx512 (hosts without AVX-512): one depthwise output plane
 * from its padded phase planes (tap t reads src + toff[t] + oh Wq + ow), in 8-column output
 * vectors (GCC vectors: one AVX2 register in the x86-64-v3 clone), DW_PT_GROUP of them at a
 * time in row-major order, each summing its KK taps in a register (independent chains for both
 * FMA pipes), with no pass over an accumulator in memory and no copy of the valid columns.
 * A row's last vector is stored whole: its lanes past the row fall on the next row's first
 * columns, which a later vector (higher in the row-major order) stores afterwards; only lanes
 * past the plane's end are never written (partial store). Reads past a row's end land in the
 * next row or the planes' slack. Each output is summed in one fixed order (bias, then the taps
 * in order), whatever the group or the task split. */
#define DW_PT_GROUP 8
NN_CLONES
static void dw_plane_pt(const float *src, const int64_t *toff, const float *wt, int64_t KK, float b0, int64_t OH,
                        int64_t OW, int64_t Wq, float *y) {
    const int64_t per_row = cdiv(OW, 8), total = OH * per_row, P = OH * OW;
    for (int64_t i0 = 0; i0 < total; i0 += DW_PT_GROUP) {
        const int64_t cnt = imin(DW_PT_GROUP, total - i0);
        const float *base[DW_PT_GROUP];
        int64_t dst[DW_PT_GROUP];
        _Pragma("GCC unroll 8")
        for (int u = 0; u < DW_PT_GROUP; u++) {   /* past cnt: repeats the last vector (not stored) */
            const int64_t i = i0 + imin(u, cnt - 1), oh = i / per_row, v = i - oh * per_row;
            base[u] = src + oh * Wq + 8 * v;
            dst[u] = oh * OW + 8 * v;
        }
        nn_v8f a[DW_PT_GROUP];
        _Pragma("GCC unroll 8")
        for (int u = 0; u < DW_PT_GROUP; u++) a[u] = BC8(b0);
        for (int64_t t = 0; t < KK; t++) {
            const nn_v8f w = BC8(wt[t]);
            const int64_t o = toff[t];
            _Pragma("GCC unroll 8")
            for (int u = 0; u < DW_PT_GROUP; u++) a[u] += w * LD8(base[u] + o);
        }
        for (int u = 0; u < cnt; u++) {   /* ascending: a row's overhang is overwritten later */
            if (dst[u] + 8 <= P) {
                ST8(y + dst[u], a[u]);
            } else {
                float lanes[8];
                memcpy(lanes, &a[u], sizeof lanes);
                memcpy(y + dst[u], lanes, (size_t)(P - dst[u]) * sizeof(float));
            }
        }
    }
}

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
    NN_FLUSH_DENORMALS;
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
    /* the taps' offsets into the phase planes (dw_plane_pt; geometry only, once per task) */
    int64_t toff[64];
    const int tap_rows = KK <= 64 && (native_on() || g_tune[TUNE_CONV] != TUNE_CONV_DW_WIDE_ACC);
    for (int64_t kh = 0; KK <= 64 && kh < KH; kh++)
        for (int64_t kw = 0; kw < KW; kw++)
            toff[kh * KW + kw] = ((kh * dh % sh) * sw + kw * dw % sw) * Hq * Wq + (kh * dh / sh) * Wq + kw * dw / sw;
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
            dw_plane_avx512(planes, toff, wf, KK, b0, OH, OW, Wq, yp);
            continue;
        }
#endif
        if (tap_rows) {
            dw_plane_pt(planes, toff, wf, KK, b0, OH, OW, Wq, yp);
            continue;
        }
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
    NN_FLUSH_DENORMALS;
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
    NN_FLUSH_DENORMALS;
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
