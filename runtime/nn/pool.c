/* nn/pool.c -- Pooling, forward and backward.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

/* ---------------------------------------------------------------------------------------- */
/* Pooling                                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* Descriptor: symjit_pool_desc (nnkernels.h).
 * Windows start at o*s - p; max skips padding (an empty window gives -FLT_MAX) and ignores NaN
 * like numpy's fmax; avg divides by the window clipped to [start, min(start+k, in+p)) (or to
 * the input without count_include_pad). */
typedef struct {
    const symjit_pool_desc *d;
    const float *x, *dy, *y;
    float *out;
} pool_job;

static int64_t win_lo(int64_t o, int64_t s, int64_t p) { return o * s - p; }

/* the size of output o's window along spatial dimension i (the factor of avg's divisor).
 * Always inlined, as pool_divisor: the blocked AVX-512 pooling calls them per output, and as
 * out-of-line calls of this baseline-ISA (SSE) code they made a (8, 32, 14, 14) 2x2 average
 * pooling take 0.23 ms against max pooling's 0.006 ms, and slowed the kernels after it up to
 * 8x; inlined, 0.012-0.019 ms (Zen 5, in graph). Inception v3 batch 1, one thread, CPU time of
 * the whole call: 89-95 ms against 110-116 ms. */
static inline __attribute__((always_inline)) float pool_dim_size(const symjit_pool_desc *d, int i, int64_t o) {
    int64_t in = d->in_size[i], k = d->kernel[i], s = d->stride[i], p = d->pad[i];
    int64_t st = win_lo(o, s, p), en = imin(st + k, in + p);
    return (float)(d->count_include_pad ? en - st : imin(en, in) - imax(st, 0));
}

/* avg's divisor: the product of the window sizes, dimension 0 first */
static inline __attribute__((always_inline)) float pool_divisor(const symjit_pool_desc *d, int64_t od, int64_t oh, int64_t ow) {
    return 1.0f * pool_dim_size(d, 0, od) * pool_dim_size(d, 1, oh) * pool_dim_size(d, 2, ow);
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
    const symjit_pool_desc *d = job->d;
    const int64_t D = d->in_size[0], H = d->in_size[1], W = d->in_size[2], OD = d->out_size[0],
                  OH = d->out_size[1], OW = d->out_size[2];
    const int64_t type = d->type, pv = d->p, sw = d->stride[2], kwn = d->kernel[2];
    /* the valid output columns [lo, hi) of each kernel column (the same for every row), and avg's
     * divisor as pool_divisor's product: its factor over (od, oh) per row times div_w[ow] */
    int64_t lo_s[64], hi_s[64];
    float div_s[256];
    int64_t *lo = lo_s, *hi = hi_s;
    float *div_w = div_s;
    void *heap = NULL;
    if (kwn > 64 || OW > 256) {
        heap = malloc((size_t)kwn * 2 * sizeof(int64_t) + (size_t)OW * sizeof(float));
        if (!heap) return;
        lo = (int64_t *)heap;
        hi = lo + kwn;
        div_w = (float *)(hi + kwn);
    }
    if (type == SYMJIT_POOL_AVG)
        for (int64_t ow = 0; ow < OW; ow++) div_w[ow] = pool_dim_size(d, 2, ow);
    for (int64_t kw = 0; kw < kwn; kw++) {
        const int64_t off = kw - d->pad[2];
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
                const float init = type == SYMJIT_POOL_MAX ? -FLT_MAX : 0.0f;
                for (int64_t ow = 0; ow < OW; ow++) yr[ow] = init;
                int64_t d0 = win_lo(od, d->stride[0], d->pad[0]), h0 = win_lo(oh, d->stride[1], d->pad[1]);
                for (int64_t id = imax(d0, 0); id < imin(d0 + d->kernel[0], D); id++)
                    for (int64_t ih = imax(h0, 0); ih < imin(h0 + d->kernel[1], H); ih++) {
                        const float *xr = xp + (id * H + ih) * W;
                        for (int64_t kw = 0; kw < kwn; kw++) {
                            const int64_t off = kw - d->pad[2], l = lo[kw], h = hi[kw];
                            if (type == SYMJIT_POOL_MAX) {
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
                            } else if (type == SYMJIT_POOL_LP) {
                                for (int64_t ow = l; ow < h; ow++) yr[ow] += lp_pow(xr[ow * sw + off], pv);
                            } else if (sw == 1) {
                                for (int64_t ow = l; ow < h; ow++) yr[ow] += xr[ow + off];
                            } else {
                                for (int64_t ow = l; ow < h; ow++) yr[ow] += xr[ow * sw + off];
                            }
                        }
                    }
                if (type == SYMJIT_POOL_AVG) {
                    const float dh = 1.0f * pool_dim_size(d, 0, od) * pool_dim_size(d, 1, oh);
                    for (int64_t ow = 0; ow < OW; ow++) yr[ow] = yr[ow] / (dh * div_w[ow]);
                } else if (type == SYMJIT_POOL_LP) {
                    for (int64_t ow = 0; ow < OW; ow++) yr[ow] = lp_root(yr[ow], pv);
                }
            }
    }
    free(heap);
}

/* Global pooling (one output per plane, the window is the whole unpadded plane): one reduction
 * per plane; max in the order of the general path, sums in 16 interleaved partial sums (another
 * summation order, within float rounding of the reference). */
NN_CLONES
static void pool_global_task(int64_t begin, int64_t end, void **argv) {
    pool_job *job = (pool_job *)argv[0];
    const symjit_pool_desc *d = job->d;
    const int64_t n = d->in_size[0] * d->in_size[1] * d->in_size[2], type = d->type, pv = d->p;
    for (int64_t t = begin; t < end; t++) {
        const float *restrict xp = job->x + t * n;
        if (type == SYMJIT_POOL_MAX) {
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
        if (type == SYMJIT_POOL_LP) {
            for (; i < n; i++) part[0] += lp_pow(xp[i], pv);
        } else {
            for (; i + 16 <= n; i += 16)
                for (int l = 0; l < 16; l++) part[l] += xp[i + l];
            for (; i < n; i++) part[i & 15] += xp[i];
        }
        float sum = 0.0f;
        for (int l = 0; l < 16; l++) sum += part[l];
        job->out[t] = type == SYMJIT_POOL_AVG ? sum / pool_divisor(d, 0, 0, 0)
                      : type == SYMJIT_POOL_LP ? lp_root(sum, pv) : sum;
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

/* 2x2 stride-2 unpadded max, avg or sum pooling whose windows lie inside the input (the common
 * downsampling pool): the AVX-512 kernels below read two input rows split into even and odd
 * columns, 16 windows at a time, no padded copy */
static inline int pool_is_2x2_inside(const symjit_pool_desc *d) {
    const int64_t *in = d->in_size, *out = d->out_size, *k = d->kernel, *s = d->stride, *p = d->pad;
    return (d->type == SYMJIT_POOL_MAX || d->type == SYMJIT_POOL_AVG || d->type == SYMJIT_POOL_SUM) && in[0] == 1 && out[0] == 1 && k[0] == 1 && k[1] == 2 && k[2] == 2 &&
           s[1] == 2 && s[2] == 2 && p[0] == 0 && p[1] == 0 && p[2] == 0 && 2 * out[1] <= in[1] && 2 * out[2] <= in[2];
}

#ifdef NN_HAVE_AVX512
/* the four taps of 16 windows: input columns [c0, c0 + 32) of rows x0 and x1 split into even (a,
 * c) and odd (b, e) columns; lanes past W read 0 (they belong to no kept window) */
typedef struct { __m512 a, b, c, e; __mmask16 m0, m1; } taps2x2;

NN_AVX512 static inline taps2x2 load_taps2x2(const float *x0, const float *x1, int64_t c0, int64_t W) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const int64_t left = W - c0;
    taps2x2 t;
    t.m0 = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
    t.m1 = left >= 32 ? (__mmask16)0xFFFF : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1u);
    const __m512 r0a = _mm512_maskz_loadu_ps(t.m0, x0 + c0), r0b = _mm512_maskz_loadu_ps(t.m1, x0 + c0 + 16);
    const __m512 r1a = _mm512_maskz_loadu_ps(t.m0, x1 + c0), r1b = _mm512_maskz_loadu_ps(t.m1, x1 + c0 + 16);
    t.a = _mm512_permutex2var_ps(r0a, even, r0b);
    t.b = _mm512_permutex2var_ps(r0a, odd, r0b);
    t.c = _mm512_permutex2var_ps(r1a, even, r1b);
    t.e = _mm512_permutex2var_ps(r1a, odd, r1b);
    return t;
}

static inline __mmask16 lanes_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1u);
}

/* forward, the taps in row-major order: max as vmaxps(tap, acc) keeping acc where the tap is NaN
 * (the general path's fmax rule); avg and sum as ((0 + a) + b + c) + e, avg then divided by 4
 * (every window lies inside the input): the general path's operations, so the same floats */
NN_AVX512 static void pool_2x2_task(int64_t begin, int64_t end, void **argv) {
    pool_job *job = (pool_job *)argv[0];
    const symjit_pool_desc *d = job->d;
    const int64_t H = d->in_size[1], W = d->in_size[2], OH = d->out_size[1], OW = d->out_size[2];
    const int is_max = d->type == SYMJIT_POOL_MAX, is_avg = d->type == SYMJIT_POOL_AVG;
    for (int64_t t = begin; t < end; t++) {
        const float *xp = job->x + t * H * W;
        float *yp = job->out + t * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
                const taps2x2 v = load_taps2x2(xp + 2 * oh * W, xp + (2 * oh + 1) * W, 2 * ow0, W);
                __m512 acc;
                if (is_max) {
                    acc = _mm512_max_ps(v.a, _mm512_set1_ps(-FLT_MAX));
                    acc = _mm512_max_ps(v.b, acc);
                    acc = _mm512_max_ps(v.c, acc);
                    acc = _mm512_max_ps(v.e, acc);
                } else {
                    acc = _mm512_add_ps(_mm512_add_ps(_mm512_setzero_ps(), v.a), v.b);
                    acc = _mm512_add_ps(_mm512_add_ps(acc, v.c), v.e);
                    if (is_avg) acc = _mm512_div_ps(acc, _mm512_set1_ps(4.0f));
                }
                _mm512_mask_storeu_ps(yp + oh * OW + ow0, lanes_mask(OW - ow0), acc);
            }
    }
}
#endif

/* 2-D max pooling on the AVX-512 path: per plane, the input's stride phase planes padded with
 * -FLT_MAX (windows over the padding or past the input need no clipping), each output row a
 * few vectors with each tap one shifted load. */
static void pool_max2d_task(int64_t begin, int64_t end, void **argv) {
#ifdef NN_HAVE_AVX512
    pool_job *job = (pool_job *)argv[0];
    const symjit_pool_desc *d = job->d;
    const int64_t H = d->in_size[1], W = d->in_size[2], OH = d->out_size[1], OW = d->out_size[2],
                  KH = d->kernel[1], KW = d->kernel[2], sh = d->stride[1], sw = d->stride[2];
    const int64_t Hq = OH + (KH - 1) / sh, Wq = OW + (KW - 1) / sw, S = sh * sw;
    geo_t g;
    memset(&g, 0, sizeof g);
    g.in[1] = H; g.in[2] = W; g.p[1] = d->pad[1]; g.p[2] = d->pad[2]; g.s[1] = sh; g.s[2] = sw;
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

/* 2-D average / sum pooling with stride 1 (Inception's 3x3 pad-1 branch pools): separable, on
 * each plane copied into a zero-padded scratch plane P of (OH + KH - 1) x (OW + KW - 1) (rows and
 * columns past the input are 0, which adds nothing): the horizontal window sums of P as KW
 * shifted adds over the whole flat plane, then the vertical sums as KH shifted adds of those at
 * multiples of P's row length, then each output row copied out (avg: divided by the product of
 * its row and column window sizes, the same float as pool_divisor's). A KH x KW window costs
 * KH + KW adds per output instead of KH * KW, and every loop but the copies runs over the whole
 * plane (small planes such as 8x8 pay no per-row loop overhead). The valid taps are summed in
 * another order than pool_fwd_task's (within float rounding of it). */
static inline int pool_is_sum2d_s1(const symjit_pool_desc *d) {
    const int64_t *in = d->in_size, *out = d->out_size, *k = d->kernel, *s = d->stride, *p = d->pad;
    return (d->type == SYMJIT_POOL_AVG || d->type == SYMJIT_POOL_SUM) && in[0] == 1 && out[0] == 1 && k[0] == 1 &&
           p[0] == 0 && s[1] == 1 && s[2] == 1 && k[1] <= 64 && k[2] <= 64;
}

/* the window size of output o along a dimension of `in` inputs, kernel k, padding p, stride 1:
 * clipped to [o - p, min(o - p + k, in + p)), and to the input without count_include_pad */
static float pool_window_size(int64_t o, int64_t in, int64_t k, int64_t p, int64_t include_pad) {
    const int64_t st = o - p, en = imin(st + k, in + p);
    return (float)(include_pad ? en - st : imin(en, in) - imax(st, 0));
}

/* Plane x (H x W) copied into P (Hp x Wp) at row offset ph and column offset pw, everything
 * else `fill`: the padded planes of the plane-pass pools (0 for sums, -FLT_MAX for maxima). */
static inline __attribute__((always_inline)) void pool_padded_plane(const float *x, int64_t H, int64_t W, int64_t ph,
                                                                    int64_t pw, int64_t Hp, int64_t Wp, float fill,
                                                                    float *P) {
    const int64_t c0 = imin(pw, Wp), c1 = imax(c0, imin(pw + W, Wp));   /* the input's columns in P */
    for (int64_t r = 0; r < Hp; r++) {
        const int64_t ih = r - ph, inside = ih >= 0 && ih < H;
        const int64_t a = inside ? c0 : Wp, b = inside ? c1 : Wp;
        float *restrict pr = P + r * Wp;
        for (int64_t j = 0; j < a; j++) pr[j] = fill;
        if (b > a) memcpy(pr + a, x + ih * W + (a - pw), (size_t)(b - a) * sizeof(float));
        for (int64_t j = b; j < Wp; j++) pr[j] = fill;
    }
}

/* Output rows of a plane-pass sum pooling from its window sums (rows `ld` floats apart): avg
 * divides each by div_h[oh] * div_w[ow], sum copies them. */
static inline __attribute__((always_inline)) void pool_store_sums(const symjit_pool_desc *d, const float *sums,
                                                                  int64_t ld, const float *div_h, const float *div_w,
                                                                  float *y) {
    const int64_t OH = d->out_size[1], OW = d->out_size[2];
    for (int64_t oh = 0; oh < OH; oh++) {
        float *restrict yr = y + oh * OW;
        const float *restrict sr = sums + oh * ld;
        if (d->type == SYMJIT_POOL_AVG) {
            const float dh = div_h[oh];
            for (int64_t ow = 0; ow < OW; ow++) yr[ow] = sr[ow] / (dh * div_w[ow]);
        } else {
            memcpy(yr, sr, (size_t)OW * sizeof(float));
        }
    }
}

NN_CLONES
static void pool_sum2d_s1_task(int64_t begin, int64_t end, void **argv) {
    pool_job *job = (pool_job *)argv[0];
    const symjit_pool_desc *d = job->d;
    const int64_t H = d->in_size[1], W = d->in_size[2], OH = d->out_size[1], OW = d->out_size[2],
                  KH = d->kernel[1], KW = d->kernel[2], ph = d->pad[1], pw = d->pad[2];
    const int64_t Hp = OH + KH - 1, Wp = OW + KW - 1, np_ = Hp * Wp, nh = np_ - (KW - 1), nv = imax((OH - 1) * Wp + OW, 0);
    float *buf = scratch(0, (size_t)(np_ + np_ + nv + OH + OW));
    if (!buf) return;
    float *restrict P = buf, *restrict hs = P + np_, *restrict vs = hs + np_, *div_h = vs + nv, *div_w = div_h + OH;
    for (int64_t oh = 0; oh < OH; oh++) div_h[oh] = pool_window_size(oh, H, KH, ph, d->count_include_pad);
    for (int64_t ow = 0; ow < OW; ow++) div_w[ow] = pool_window_size(ow, W, KW, pw, d->count_include_pad);
    for (int64_t t = begin; t < end; t++) {
        const float *xp = job->x + t * H * W;
        float *yp = job->out + t * OH * OW;
        pool_padded_plane(xp, H, W, ph, pw, Hp, Wp, 0.0f, P);
        for (int64_t i = 0; i < nh; i++) hs[i] = P[i];
        for (int64_t kw = 1; kw < KW; kw++)
            for (int64_t i = 0; i < nh; i++) hs[i] += P[i + kw];
        for (int64_t i = 0; i < nv; i++) vs[i] = hs[i];
        for (int64_t kh = 1; kh < KH; kh++)
            for (int64_t i = 0; i < nv; i++) vs[i] += hs[i + kh * Wp];
        pool_store_sums(d, vs, Wp, div_h, div_w, yp);
    }
}

/* 2-D max pooling on the portable path (hosts without AVX-512): separable, as pool_sum2d_s1_task,
 * on each plane copied into a scratch plane P of Hp x Wp padded with -FLT_MAX (the padding, and
 * the rows and columns of ceil-mode windows past the input): the horizontal window maxima of P
 * over the whole flat plane (one contiguous loop per tap), then per output row the vertical
 * maxima of its window's rows, then every sw-th of them. Maxima start at -FLT_MAX and take
 * `v > m ? v : m` (maxps), so NaN inputs are skipped and a window over padding only gives
 * -FLT_MAX, as pool_fwd_task; a maximum does not depend on the order it is taken in. */
static inline int pool_is_max2d(const symjit_pool_desc *d) {
    const int64_t *in = d->in_size, *out = d->out_size, *k = d->kernel, *p = d->pad;
    return d->type == SYMJIT_POOL_MAX && in[0] == 1 && out[0] == 1 && k[0] == 1 && p[0] == 0;
}

NN_CLONES
static void pool_max2d_pt_task(int64_t begin, int64_t end, void **argv) {
    pool_job *job = (pool_job *)argv[0];
    const symjit_pool_desc *d = job->d;
    const int64_t H = d->in_size[1], W = d->in_size[2], OH = d->out_size[1], OW = d->out_size[2],
                  KH = d->kernel[1], KW = d->kernel[2], sh = d->stride[1], sw = d->stride[2], ph = d->pad[1],
                  pw = d->pad[2];
    const int64_t Hp = (OH - 1) * sh + KH, Wp = (OW - 1) * sw + KW, np_ = Hp * Wp, nh = np_ - (KW - 1),
                  nr = (OW - 1) * sw + 1;
    float *buf = scratch(0, (size_t)(np_ + np_ + nr));
    if (!buf) return;
    float *restrict P = buf, *restrict hs = P + np_, *restrict vr = hs + np_;
    for (int64_t t = begin; t < end; t++) {
        const float *xp = job->x + t * H * W;
        float *yp = job->out + t * OH * OW;
        pool_padded_plane(xp, H, W, ph, pw, Hp, Wp, -FLT_MAX, P);
        for (int64_t i = 0; i < nh; i++) hs[i] = -FLT_MAX;
        for (int64_t kw = 0; kw < KW; kw++)
            for (int64_t i = 0; i < nh; i++) hs[i] = P[i + kw] > hs[i] ? P[i + kw] : hs[i];
        for (int64_t oh = 0; oh < OH; oh++) {
            for (int64_t j = 0; j < nr; j++) vr[j] = -FLT_MAX;
            for (int64_t kh = 0; kh < KH; kh++) {
                const float *restrict hr = hs + (oh * sh + kh) * Wp;
                for (int64_t j = 0; j < nr; j++) vr[j] = hr[j] > vr[j] ? hr[j] : vr[j];
            }
            float *restrict yr = yp + oh * OW;
            if (sw == 1) memcpy(yr, vr, (size_t)OW * sizeof(float));
            else if (sw == 2) for (int64_t ow = 0; ow < OW; ow++) yr[ow] = vr[2 * ow];
            else for (int64_t ow = 0; ow < OW; ow++) yr[ow] = vr[ow * sw];
        }
    }
}

/* 2-D average / sum pooling with equal strides s on the portable path: each plane copied into a
 * zero-padded scratch plane P (Hp x Wp, rows past it zero), and each tap (kh, kw) in row-major
 * order one strided pass over the whole plane: output (oh, ow) reads P at s (oh Wp + ow) +
 * kh Wp + kw, so its sums run over the flat index oh Wp + ow (the columns ow >= OW are computed
 * and dropped). Each output sums its window's taps in the order pool_fwd_task does, from 0,
 * the padding adding zeros, and avg divides by the same float: the same result. */
static inline int pool_is_avg2d(const symjit_pool_desc *d) {
    const int64_t *in = d->in_size, *out = d->out_size, *k = d->kernel, *s = d->stride, *p = d->pad;
    return (d->type == SYMJIT_POOL_AVG || d->type == SYMJIT_POOL_SUM) && in[0] == 1 && out[0] == 1 && k[0] == 1 &&
           p[0] == 0 && s[1] == s[2] && k[1] * k[2] <= 64;
}

NN_CLONES
static void pool_avg2d_pt_task(int64_t begin, int64_t end, void **argv) {
    pool_job *job = (pool_job *)argv[0];
    const symjit_pool_desc *d = job->d;
    const int64_t H = d->in_size[1], W = d->in_size[2], OH = d->out_size[1], OW = d->out_size[2],
                  KH = d->kernel[1], KW = d->kernel[2], st = d->stride[1], ph = d->pad[1], pw = d->pad[2];
    const int64_t Wp = (OW - 1) * st + KW, Hp = imax((OH - 1) * st + KH, 1), nq = OH * Wp;
    const int64_t np_ = imax(Hp * Wp, st * nq + KH * Wp + KW);   /* + the dropped columns' reads */
    float *buf = scratch(0, (size_t)(np_ + nq + OW + OH));
    if (!buf) return;
    float *restrict P = buf, *restrict acc = P + np_, *div_w = acc + nq, *div_h = div_w + OW;
    for (int64_t ow = 0; ow < OW; ow++) div_w[ow] = pool_dim_size(d, 2, ow);
    for (int64_t oh = 0; oh < OH; oh++) div_h[oh] = 1.0f * pool_dim_size(d, 0, 0) * pool_dim_size(d, 1, oh);
    memset(P + Hp * Wp, 0, (size_t)(np_ - Hp * Wp) * sizeof(float));
    for (int64_t t = begin; t < end; t++) {
        const float *xp = job->x + t * H * W;
        float *yp = job->out + t * OH * OW;
        pool_padded_plane(xp, H, W, ph, pw, Hp, Wp, 0.0f, P);
        for (int64_t q = 0; q < nq; q++) acc[q] = 0.0f;
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++) {
                const float *restrict src = P + kh * Wp + kw;
                if (st == 1) for (int64_t q = 0; q < nq; q++) acc[q] += src[q];
                else if (st == 2) for (int64_t q = 0; q < nq; q++) acc[q] += src[2 * q];
                else for (int64_t q = 0; q < nq; q++) acc[q] += src[st * q];
            }
        pool_store_sums(d, acc, Wp, div_h, div_w, yp);
    }
}

NN_API void symjit_nn_pool(const symjit_pool_desc *d, const float *x, float *y) {
    pool_job job = {d, x, NULL, NULL, y};
    void *argv[1] = {&job};
    const int64_t *in = d->in_size, *out = d->out_size, *k = d->kernel, *s = d->stride, *p = d->pad;
    int64_t work = out[0] * out[1] * out[2] * k[0] * k[1] * k[2];
    int64_t grain = imax(1, 32768 / imax(work, 1));
    int global = out[0] == 1 && out[1] == 1 && out[2] == 1 && k[0] == in[0] && k[1] == in[1] && k[2] == in[2] &&
                 p[0] == 0 && p[1] == 0 && p[2] == 0;
    if (global) {
        symjit_parallel_for(pool_global_task, d->planes, imax(1, 32768 / imax(in[0] * in[1] * in[2], 1)), argv);
#ifdef NN_HAVE_AVX512
    } else if (native_on() && pool_is_2x2_inside(d)) {
        symjit_parallel_for(pool_2x2_task, d->planes, imax(1, 65536 / imax(in[1] * in[2], 1)), argv);   /* ~5 us a chunk */
#endif
    } else if ((native_on() || g_tune[TUNE_POOL] != TUNE_POOL_GENERAL) && pool_is_sum2d_s1(d)) {
        symjit_parallel_for(pool_sum2d_s1_task, d->planes, imax(1, 65536 / imax(in[1] * in[2] * (k[1] + k[2]), 1)), argv);
    } else if (!native_on() && g_tune[TUNE_POOL] != TUNE_POOL_GENERAL && pool_is_avg2d(d)) {
        const int64_t plane = ((out[1] - 1) * s[1] + k[1]) * ((out[2] - 1) * s[2] + k[2]) * (1 + k[1] * k[2] / 4);
        symjit_parallel_for(pool_avg2d_pt_task, d->planes, imax(1, 16384 / imax(plane, 1)), argv);
    } else if (!native_on() && g_tune[TUNE_POOL] != TUNE_POOL_GENERAL && pool_is_max2d(d)) {
        const int64_t plane = ((out[1] - 1) * s[1] + k[1]) * ((out[2] - 1) * s[2] + k[2]);
        symjit_parallel_for(pool_max2d_pt_task, d->planes, imax(1, 16384 / imax(plane, 1)), argv);
    } else if (native_on() && d->type == SYMJIT_POOL_MAX && in[0] == 1 && out[0] == 1 && k[0] == 1 &&
               k[1] * k[2] <= 64 && s[1] * s[2] <= 16) {
        int64_t plane = (out[1] + (k[1] - 1) / s[1]) * (out[2] + (k[2] - 1) / s[2]) * s[1] * s[2];
        symjit_parallel_for(pool_max2d_task, d->planes, imax(1, 16384 / imax(plane, 1)), argv);
    } else {
        symjit_parallel_for(pool_fwd_task, d->planes, grain, argv);
    }
}

static void pool_bwd_task(int64_t begin, int64_t end, void **argv) {
    pool_job *job = (pool_job *)argv[0];
    const symjit_pool_desc *d = job->d;
    const int64_t D = d->in_size[0], H = d->in_size[1], W = d->in_size[2], OD = d->out_size[0],
                  OH = d->out_size[1], OW = d->out_size[2];
    const int64_t type = d->type, pv = d->p;
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
                    int64_t d0 = win_lo(od, d->stride[0], d->pad[0]), h0 = win_lo(oh, d->stride[1], d->pad[1]);
                    int64_t w0 = win_lo(ow, d->stride[2], d->pad[2]);
                    int64_t d1 = imin(d0 + d->kernel[0], D), h1 = imin(h0 + d->kernel[1], H);
                    int64_t w1 = imin(w0 + d->kernel[2], W);
                    d0 = imax(d0, 0); h0 = imax(h0, 0); w0 = imax(w0, 0);
                    float gv = dyp[o];
                    if (type == SYMJIT_POOL_MAX) {
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
                    if (type == SYMJIT_POOL_AVG) gv = gv / pool_divisor(d, od, oh, ow);
                    for (int64_t id = d0; id < d1; id++)
                        for (int64_t ih = h0; ih < h1; ih++)
                            for (int64_t iw = w0; iw < w1; iw++) {
                                int64_t i = (id * H + ih) * W + iw;
                                if (type == SYMJIT_POOL_LP && pv != 1) {
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

#ifdef NN_HAVE_AVX512
/* 2x2 stride-2 unpadded max pooling backward whose windows lie inside the input (AVX-512): per
 * output row, 16 windows at a time from two input rows split into even and odd columns; the
 * gradient goes to the first strict maximum in row-major order (a > -inf, then each later tap
 * only if strictly greater: the general path's rule, NaN never chosen), written with the zeros of
 * the other three taps as two interleaved rows. Input rows and columns no window covers get 0. */
NN_AVX512 static void pool_max2x2_bwd_task(int64_t begin, int64_t end, void **argv) {
    pool_job *job = (pool_job *)argv[0];
    const symjit_pool_desc *d = job->d;
    const int64_t H = d->in_size[1], W = d->in_size[2], OH = d->out_size[1], OW = d->out_size[2];
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t t = begin; t < end; t++) {
        const float *xp = job->x + t * H * W, *dyp = job->dy + t * OH * OW;
        float *dxp = job->out + t * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            float *d0 = dxp + 2 * oh * W, *d1 = d0 + W;
            for (int64_t ow0 = 0; ow0 < cdiv(W, 2); ow0 += 16) {   /* input columns [2 ow0, 2 ow0 + 32) */
                const int64_t c0 = 2 * ow0;
                const taps2x2 v = load_taps2x2(xp + 2 * oh * W, xp + (2 * oh + 1) * W, c0, W);
                const __mmask16 ma = _mm512_cmp_ps_mask(v.a, ninf, _CMP_GT_OQ);
                __m512 best = _mm512_mask_mov_ps(ninf, ma, v.a);
                const __mmask16 mb = _mm512_cmp_ps_mask(v.b, best, _CMP_GT_OQ);
                best = _mm512_mask_mov_ps(best, mb, v.b);
                const __mmask16 mc = _mm512_cmp_ps_mask(v.c, best, _CMP_GT_OQ);
                best = _mm512_mask_mov_ps(best, mc, v.c);
                const __mmask16 me = _mm512_cmp_ps_mask(v.e, best, _CMP_GT_OQ);
                const __mmask16 se = me, sc = mc & ~me, sb = mb & ~mc & ~me, sa = ma & ~mb & ~mc & ~me;
                const __m512 gv = _mm512_maskz_loadu_ps(lanes_mask(OW - ow0), dyp + oh * OW + ow0);
                const __m512 ga = _mm512_maskz_mov_ps(sa, gv), gb = _mm512_maskz_mov_ps(sb, gv);
                const __m512 gc = _mm512_maskz_mov_ps(sc, gv), ge = _mm512_maskz_mov_ps(se, gv);
                _mm512_mask_storeu_ps(d0 + c0, v.m0, _mm512_permutex2var_ps(ga, lo, gb));
                _mm512_mask_storeu_ps(d0 + c0 + 16, v.m1, _mm512_permutex2var_ps(ga, hi, gb));
                _mm512_mask_storeu_ps(d1 + c0, v.m0, _mm512_permutex2var_ps(gc, lo, ge));
                _mm512_mask_storeu_ps(d1 + c0 + 16, v.m1, _mm512_permutex2var_ps(gc, hi, ge));
            }
        }
        if (H > 2 * OH) memset(dxp + 2 * OH * W, 0, (size_t)((H - 2 * OH) * W) * sizeof(float));
    }
}
#endif

/* dx (planes, in) from dy and y (planes, out) and x (planes, in): the gradient of symjit_nn_pool;
 * max routes each output gradient to the first (row-major) strict maximum of its window. */
NN_API void symjit_nn_pool_bwd(const symjit_pool_desc *d, const float *dy, const float *x, const float *y, float *dx) {
    pool_job job = {d, x, dy, y, dx};
    void *argv[1] = {&job};
#ifdef NN_HAVE_AVX512
    if (native_on() && d->type == SYMJIT_POOL_MAX && pool_is_2x2_inside(d)) {
        const int64_t plane = d->in_size[1] * d->in_size[2];
        symjit_parallel_for(pool_max2x2_bwd_task, d->planes, imax(1, 16384 / imax(plane, 1)), argv);
        return;
    }
#endif
    symjit_parallel_for(pool_bwd_task, d->planes, 1, argv);
}
