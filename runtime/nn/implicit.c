/* nn/implicit.c -- Implicit-GEMM convolution over zero-padded stride phase planes (AVX-512 path).
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

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
        } else if (sw == 2) {   /* a constant stride: vectorized (even lanes of two loads) */
            const int64_t n = hi - lo;
            float *restrict out = row + lo;
            for (int64_t j = 0; j < n; j++) out[j] = src[2 * j];
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

/* The weights w (F, Cg KK) by columns for the implicit GEMM tiles: tap k of filter f at
 * wt[k F + f]. The tiles then broadcast every filter's weight through one pointer; by rows they
 * keep one pointer per tile row live, which spills with 8 rows and slows the tile loop (K is
 * only Cg KK, e.g. 25 for a one-channel 5x5 stem: benchmarks/bench_few_channel_conv.py).
 * malloc'd (the caller frees it), or NULL where the tuning override keeps the rows or the
 * allocation fails: the tiles read the weights by rows then. */
static float *implicit_weights_by_columns(const conv_job *job) {
    const geo_t *g = &job->g;
    const int64_t Kd = g->Cg * g->KK;
    if (g_tune[TUNE_CONV] == TUNE_CONV_WEIGHT_ROWS) return NULL;
    float *wt = (float *)malloc((size_t)(Kd * g->F) * sizeof(float));
    if (!wt) return NULL;
    for (int64_t f = 0; f < g->F; f++)
        for (int64_t k = 0; k < Kd; k++) wt[k * g->F + f] = job->w[f * Kd + k];
    return wt;
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
    if (job->wt) {
        p.a = job->wt + f0;
        p.ask = g->F;
        p.asr = 1;
    } else {
        p.a = job->w + f0 * p.K;
        p.ask = 1;
        p.asr = p.K;
    }
    p.csj = 1;
    p.wide_w = job->Wp;
    p.valid_w = g->out[2];
    p.bias_r = job->bias ? job->bias + f0 : NULL;
    p.rows = mc;
    return p;
}

static void conv_implicit_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
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
    job->wt = implicit_weights_by_columns(job);
    void *argv[1] = {job};
    symjit_parallel_for(conv_implicit_task, outer * tp * tm, tasks_grain(outer * tp * tm, want, threads), argv);
    free(job->wt);
    job->wt = NULL;
    return 1;
}
