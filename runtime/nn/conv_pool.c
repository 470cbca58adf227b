/* nn/conv_pool.c -- Convolution followed by max pooling in one pass.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

/* ---------------------------------------------------------------------------------------- */
/* Convolution followed by max pooling (one pass: only the pooled output leaves the cache)     */
/* ---------------------------------------------------------------------------------------- */

/* Descriptor: symjit_conv_pool_desc (nnkernels.h): the convolution's, the pooling's over the
 * convolution's output (type max), and whether relu applies to the convolution's output
 * before pooling.
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
    const symjit_pool_desc *pd;
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
NN_AVX512 static void conv_pool_rows(const symjit_pool_desc *pd, const float *src, int64_t cr0, int64_t nr, int64_t ph0,
                                     int64_t ph1, float *tmp, int64_t TW, float *out) {
    const int64_t OH = pd->in_size[1], OW = pd->in_size[2], POW = pd->out_size[2], KH = pd->kernel[1],
                  KW = pd->kernel[2], sh = pd->stride[1], sw = pd->stride[2];
    const int64_t ph_ = pd->pad[1], pw_ = pd->pad[2];
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

/* conv_pool_rows for windows two columns wide at stride 2 without column padding (LeNet's and
 * VGG's 2x2/2 pooling; any vertical window): each pooled row's 16 outputs at a time from two
 * vectors of each of its convolution rows (columns past OW read as -FLT_MAX), their rows' maxima,
 * then the even and odd columns: no pass through `tmp`. The same maxima in the same order as
 * conv_pool_rows (vertical, then column 2 pw, then 2 pw + 1), so the same values, NaN included. */
NN_AVX512 static void conv_pool_rows_2w(const symjit_pool_desc *pd, const float *src, int64_t cr0, int64_t nr,
                                        int64_t ph0, int64_t ph1, float *out) {
    const int64_t OH = pd->in_size[1], OW = pd->in_size[2], POW = pd->out_size[2], KH = pd->kernel[1],
                  sh = pd->stride[1], ph_ = pd->pad[1];
    const __m512 lowest = _mm512_set1_ps(-FLT_MAX);
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int64_t ph = ph0; ph < ph1; ph++) {
        const int64_t r0 = imax(ph * sh - ph_, imax(cr0, 0)), r1 = imin(ph * sh - ph_ + KH, imin(cr0 + nr, OH));
        float *y = out + ph * POW;
        for (int64_t pw = 0; pw < POW; pw += 16) {
            const int64_t c0 = 2 * pw;   /* conv columns [c0, c0 + 32) */
            const __mmask16 m = POW - pw >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (POW - pw)) - 1u);
            const __mmask16 mlo = OW - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (OW - c0)) - 1u);
            const __mmask16 mhi = OW - c0 >= 32 ? (__mmask16)0xFFFF
                                  : OW - c0 <= 16 ? (__mmask16)0 : (__mmask16)((1u << (OW - c0 - 16)) - 1u);
            __m512 lo = lowest, hi = lowest;
            for (int64_t r = r0; r < r1; r++) {
                const float *row = src + (r - cr0) * OW + c0;
                lo = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, mlo, row), lo);
                hi = _mm512_max_ps(_mm512_mask_loadu_ps(lowest, mhi, row + 16), hi);
            }
            __m512 acc = _mm512_max_ps(_mm512_permutex2var_ps(lo, even, hi), lowest);
            acc = _mm512_max_ps(_mm512_permutex2var_ps(lo, odd, hi), acc);
            _mm512_mask_storeu_ps(y + pw, m, acc);
        }
    }
}

static void conv_pool_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    conv_pool_job *job = (conv_pool_job *)argv[0];
    conv_job *cj = &job->cj;
    const geo_t *g = &cj->g;
    const symjit_pool_desc *pd = job->pd;
    const int64_t OH = g->out[1], OW = g->out[2], POH = pd->out_size[1], POW = pd->out_size[2], Wq = cj->Wp;
    const int64_t TW = (POW + 16) * pd->stride[2] + pd->kernel[2] + 16;   /* a padded row of vertical maxima */
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
        const int64_t cr0 = imin(imax(ph0 * pd->stride[1] - pd->pad[1], 0), OH);
        const int64_t cr1 = imax(imin((ph1 - 1) * pd->stride[1] - pd->pad[1] + pd->kernel[1], OH), cr0);
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
        const int two_wide = pd->kernel[2] == 2 && pd->stride[2] == 2 && pd->pad[2] == 0 &&
                             g_tune[TUNE_CONV] != TUNE_CONV_POOL_ROWS_TMP;
        for (int64_t r = 0; r < mc; r++) {
            float *y = cj->y + (n * g->F + f0 + r) * POH * POW;
            if (two_wide) conv_pool_rows_2w(pd, rows + r * job->RBc * OW, cr0, cr1 - cr0, ph0, ph1, y);
            else conv_pool_rows(pd, rows + r * job->RBc * OW, cr0, cr1 - cr0, ph0, ph1, tmp, TW, y);
        }
    }
}
#endif

/* The fast path's blocks (see conv_pool_job); 0 if it does not apply. */
static int conv_pool_fast(conv_pool_job *job) {
#ifdef NN_HAVE_AVX512
    conv_job *cj = &job->cj;
    const geo_t *g = &cj->g;
    const symjit_pool_desc *pd = job->pd;
    if (!native_on() || cj->wp || cj->d->method != SYMJIT_CONV_IM2COL || g->G != 1 || !implicit_ok(g) ||
        pd->kernel[2] > 64 ||
        g_tune[TUNE_CONV] == TUNE_CONV_POOL_UNFUSED)
        return 0;
    const int64_t KH = g->k[1], KW = g->k[2], dh = g->dl[1], dw = g->dl[2], sh = g->s[1], sw = g->s[2];
    const int64_t OH = g->out[1], OW = g->out[2], POH = pd->out_size[1];
    const int64_t halo = (KH - 1) * dh / sh, Wq = OW + (KW - 1) * dw / sw, Kd = g->Cg * g->KK;
    if (Wq < 6 || sh * sw > 16) return 0;   /* as conv_implicit */
    cj->phase_used = phases_used(g);
    cj->shape = mm_pick(g->F, OH * Wq);
    const int64_t R = MM_SHAPES[cj->shape].R;
    /* pooled rows per block: the convolution rows of all filters within ~CONV_COLUMN_FLOATS
     * (L2; at least one pooled row), then more blocks while there are fewer than the pool
     * wants (down to 4 pooled rows: the overlap rows are computed twice); then filter blocks */
    const int64_t psh = pd->stride[1], pkh = pd->kernel[1];
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
    cj->wt = implicit_weights_by_columns(cj);
    void *argv[1] = {job};
    const int64_t tasks = g->N * job->tp * job->tm;
    symjit_parallel_for(conv_pool_task, tasks, tasks_grain(tasks, want, threads), argv);
    free(cj->wt);
    cj->wt = NULL;
    return 1;
#else
    (void)job;
    return 0;
#endif
}

/* y (N, F, pooled H, W) = max pooling (d->pool) of the convolution (d->conv) of x with w
 * (packed as symjit_nn_conv_pack: `wp`, or NULL) and bias, relu'd first when d->relu. */
NN_API void symjit_nn_conv_pool(const symjit_conv_pool_desc *d, const float *x, const float *w, const float *wp,
                                const float *bias, float *y) {
    conv_pool_job job;
    memset(&job, 0, sizeof job);
    job.cj.d = &d->conv;
    job.cj.g = geo_of(&d->conv);
    job.cj.x = x;
    job.cj.w = w;
    job.cj.wp = wp;
    job.cj.bias = bias;
    job.cj.y = y;
    job.pd = &d->pool;
    job.relu = d->relu != 0;
    const geo_t *g = &job.cj.g;
    if (job.pd->planes != g->N * g->F || job.pd->in_size[0] != g->out[0] || job.pd->in_size[1] != g->out[1] ||
        job.pd->in_size[2] != g->out[2] ||
        job.pd->type != SYMJIT_POOL_MAX) {
        symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT, "nnkernels: conv_pool: pooling descriptor (%lld planes of %lldx%lld, "
                         "type %lld) does not pool this convolution's output (%lld planes of %lldx%lld, max)",
                         (long long)job.pd->planes, (long long)job.pd->in_size[1], (long long)job.pd->in_size[2],
                         (long long)job.pd->type,
                         (long long)(g->N * g->F), (long long)g->out[1], (long long)g->out[2]);
        return;
    }
    if (conv_pool_fast(&job)) return;
    /* image by image, so that the scratch holds one image's convolution output */
    symjit_conv_pool_desc d1 = *d;   /* one image */
    d1.conv.n = 1;
    d1.pool.planes = g->F;
    float *one = scratch(8, (size_t)(g->F * g->P));
    if (!one) return;
    void *epi_args[2] = {one, one};
    for (int64_t n = 0; n < g->N; n++) {
        symjit_nn_conv_packed(&d1.conv, x + n * g->C * g->IP, w, wp, bias, one, job.relu ? symjit_nn_epi_relu : NULL,
                              epi_args);
        symjit_nn_pool(&d1.pool, one, y + n * g->F * job.pd->out_size[1] * job.pd->out_size[2]);
    }
}
