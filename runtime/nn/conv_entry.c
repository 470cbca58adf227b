/* nn/conv_entry.c -- Convolution entry points: the forward dispatch over the methods (conv.c, implicit.c,
 * depthwise.c, winograd.c), backward data and weight, and the bias gradient.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

/* symjit_nn_conv with `wp`, the weights packed by symjit_nn_conv_pack (or NULL) */
NN_API void symjit_nn_conv_packed(const symjit_conv_desc *d, const float *x, const float *w, const float *wp,
                                  const float *bias, float *y, symjit_kernel_fn epi, void **epi_args) {
    conv_job job = {d, geo_of(d), x, w, bias, y, epi, epi_args, 0, 0};
    job.wp = wp;
    void *argv[1] = {&job};
    const geo_t *g = &job.g;
    if (d->method == SYMJIT_CONV_DEPTHWISE) {
        if (g_tune[TUNE_CONV] != TUNE_CONV_PORTABLE_DEPTHWISE && conv_depthwise_wide(&job)) return;
        int padded = g->in[0] == 1 && g->k[0] == 1 && g->out[0] == 1;
        symjit_parallel_for(padded ? conv_depthwise_padded_task : conv_depthwise_task, g->N * g->F, 1, argv);
    } else if (d->method == SYMJIT_CONV_WINOGRAD && native_on() && g_tune[TUNE_CONV] != TUNE_CONV_NO_WNAT && wnat_ok(g) && conv_wnat(&job)) {
        return;
    } else if (d->method == SYMJIT_CONV_WINOGRAD && !native_on() && winograd_ok(g) && conv_winograd(&job)) {
        return;
    } else if (native_on()) {
        int fv = job.wp && d->method == SYMJIT_CONV_IM2COL ? conv_fvec_shape(g) : -1;
        if (fv >= 0 && g_tune[TUNE_CONV] != TUNE_CONV_NO_FVEC) conv_fvec(&job, fv);
        else if (!(g_tune[TUNE_CONV] != TUNE_CONV_NO_IMPLICIT && implicit_ok(g) && conv_implicit(&job))) conv_native(&job);
    } else if (job.wp && d->method == SYMJIT_CONV_IM2COL && pw_fvec_ok(g)) {
        conv_pw_fvec(&job);   /* weights packed for it (symjit_nn_conv_pack) */
    } else {
        const int64_t Kd = g->Cg * g->KK;
        job.tiles = pt_gemm_suits(g->Fg, g->P) &&
                    !(is_pointwise(g) && (Kd > PT_KC || g_tune[TUNE_CONV] == TUNE_CONV_PW_BLAS));
        /* column blocks keep the im2col block (K x pb) within ~512 KiB of L2; a 1x1 layer's on
         * the tiles, its output block (filters x pb) within PW_TILES_OUT_FLOATS (pt_gemm adds the
         * bias, and the epilogue that follows reads the block from L2) */
        const int64_t cap = job.tiles && is_pointwise(g) ? imax(16, PW_TILES_OUT_FLOATS / imax(g->Fg, 1))
                                                         : imax(64, CONV_COLUMN_FLOATS / imax(Kd, 1));
        if (job.tiles && g_tune[TUNE_CONV] != TUNE_CONV_TILES_SPLIT_M)
            /* blocks of columns first: every filter block of a column block would repeat its
             * im2col (or its packed strips), and the tiles read the weights unpacked */
            split2(g->Fg, g->P, Kd, g->N * g->G, cap, &job.mb, &job.pb);
        else
            split_blas(g->Fg, g->P, Kd, g->N * g->G, cap, &job.mb, &job.pb);
        int64_t tasks = g->N * g->G * cdiv(g->Fg, job.mb) * cdiv(g->P, job.pb);
        symjit_parallel_for(conv_gemm_task, tasks, 1, argv);
    }
}

NN_API void symjit_nn_conv(const symjit_conv_desc *d, const float *x, const float *w, const float *bias, float *y,
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
    NN_FLUSH_DENORMALS;
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

/* AVX-512 path of the data gradient of 2-D stride-1 convolutions of one group: a forward
 * convolution of dy (F channels) with the weights transposed and flipped, W'[c][f][kh][kw] =
 * W[f][c][KH-1-kh][KW-1-kw], padding (K-1) dl - p, into dx -- the forward path's implicit GEMM
 * (no column buffer, no col2im). Returns 0 when the geometry is left to the general path.
 * Measured (bench_gemm_choices --section convbwd, CPU time, 1 thread): 64x32x16x16 <- 64 filters
 * 6.1 against 6.9 ms, 8x64x56x56 <- 64 21 against 28 ms; 3 input channels 3.4 against 2.6 ms. */
static int conv_bwd_data_forward(const symjit_conv_desc *d, const float *dy, const float *w, const float *bias,
                                 float *dx, symjit_kernel_fn epi, void **epi_args) {
    const geo_t g = geo_of(d);
    if (!native_on() || g.G != 1 || g.C < 16 || g.in[0] != 1 || g.k[0] != 1 || g.out[0] != 1 || g.s[1] != 1 ||
        g.s[2] != 1)
        return 0;   /* few input channels: the forward's rows would be mostly padding (measured slower) */
    symjit_conv_desc t = *d;
    for (int i = 1; i < 3; i++) {
        t.pad[i] = (d->kernel[i] - 1) * d->dilate[i] - d->pad[i];
        if (t.pad[i] < 0) return 0;
        t.in_size[i] = d->out_size[i];
        t.out_size[i] = d->in_size[i];
    }
    t.channels = d->filters;
    t.filters = d->channels;
    t.method = SYMJIT_CONV_IM2COL;
    const int64_t KK = g.KK;
    float *wt = scratch(4, (size_t)(g.F * g.C * KK));
    if (!wt) return 1;
    for (int64_t f = 0; f < g.F; f++)
        for (int64_t c = 0; c < g.C; c++)
            for (int64_t k = 0; k < KK; k++) wt[(c * g.F + f) * KK + (KK - 1 - k)] = w[(f * g.C + c) * KK + k];
    symjit_nn_conv_packed(&t, dy, wt, NULL, bias, dx, epi, epi_args);
    return 1;
}

/* dx (N, C, in) from dy (N, F, out) and w (F, C/G, k); `bias` (C,) optional (Deconvolution). */
NN_API void symjit_nn_conv_bwd_data(const symjit_conv_desc *d, const float *dy, const float *w, const float *bias,
                                    float *dx, symjit_kernel_fn epi, void **epi_args) {
    if (g_tune[TUNE_CONV] != TUNE_CONV_NO_IMPLICIT && conv_bwd_data_forward(d, dy, w, bias, dx, epi, epi_args)) return;
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
    NN_FLUSH_DENORMALS;
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

#ifdef NN_HAVE_AVX512
/* AVX-512 path of the weight gradient of 2-D convolutions, as an implicit GEMM per image:
 * dW_g^T (Kd x Fg) += A (Kd x Q) B (Q x Fg) with Q = OH Wq wide positions (conv_implicit's): row
 * (c, kh, kw) of A is the image's phase plane of that tap shifted by its offset (the tiles read
 * A's rows through the tap table, no im2col; 1x1 stride-1 convolutions read the input itself),
 * and B is dy transposed into wide rows, dyT[q][f], zero at the discarded columns ow >= OW and
 * past Fg (whole panels). Images are split into chunks, each accumulating into its own
 * Kd x Fg buffer (rows split too when there are fewer chunks than the pool wants); a second
 * pass sums the chunks in a fixed order and transposes them into dw (F, Cg, k). */
typedef struct {
    conv_job cj;          /* geometry; x = the input; Hp, Wp, phase_used, koff of the planes */
    const float *dy;
    float *acc, *dw;      /* acc: (G, chunks, Kd, Fg) */
    int64_t chunks, per_chunk, rb, Fpad;
    int pointwise;
} wgrad_job;

/* out[(oh Wq + ow) Fpad + f] = dy[f P + oh OW + ow] for ow < OW and f < Fg, else 0 */
NN_AVX512 static void dy_wide_transpose(const float *dy, int64_t Fg, int64_t P, int64_t OH, int64_t OW, int64_t Wq,
                                        int64_t Fpad, float *out) {
    for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow0 = 0; ow0 < Wq; ow0 += 16) {
            const int64_t in_lanes = imax(0, imin(16, OW - ow0)), out_lanes = imin(16, Wq - ow0);
            const __mmask16 m = in_lanes >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << in_lanes) - 1u);
            for (int64_t f0 = 0; f0 < Fpad; f0 += 16) {
                __m512 r[16];
                for (int i = 0; i < 16; i++)
                    r[i] = f0 + i < Fg ? _mm512_maskz_loadu_ps(m, dy + (f0 + i) * P + oh * OW + ow0) : _mm512_setzero_ps();
                tr16x16(r);
                for (int64_t l = 0; l < out_lanes; l++) _mm512_storeu_ps(out + (oh * Wq + ow0 + l) * Fpad + f0, r[l]);
            }
        }
}

static void wgrad_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    wgrad_job *job = (wgrad_job *)argv[0];
    const conv_job *cj = &job->cj;
    const geo_t *g = &cj->g;
    const int64_t Kd = g->Cg * g->KK, Wq = cj->Wp, Q = g->out[1] * Wq, trb = cdiv(Kd, job->rb);
    const int64_t PW = mm_panel(cj->shape);
    float *planes = NULL;
    if (!job->pointwise) {
        const size_t np = (size_t)(g->Cg * g->s[1] * g->s[2] * cj->Hp * Wq), slack = (size_t)(Wq + g->k[2] * g->dl[2] + 64);
        planes = scratch(6, np + slack);
        if (!planes) return;
        memset(planes + np, 0, slack * sizeof(float));
    }
    float *dyT = scratch(11, (size_t)(Q * job->Fpad));
    if (!dyT) return;
    for (int64_t t = begin; t < end; t++) {
        const int64_t rbi = t % trb, ch = (t / trb) % job->chunks, gi = t / (trb * job->chunks);
        const int64_t r0 = rbi * job->rb, rc = imin(job->rb, Kd - r0);
        const int64_t n0 = ch * job->per_chunk, n1 = imin(g->N, n0 + job->per_chunk);
        float *C = job->acc + ((gi * job->chunks + ch) * Kd + r0) * g->Fg;
        if (n1 <= n0) memset(C, 0, (size_t)(rc * g->Fg) * sizeof(float));
        for (int64_t n = n0; n < n1; n++) {
            const float *xg = cj->x + (n * g->C + gi * g->Cg) * g->IP;
            if (!job->pointwise) implicit_block_planes(cj, n, gi, 0, planes);
            dy_wide_transpose(job->dy + (n * g->F + gi * g->Fg) * g->P, g->Fg, g->P, g->out[1], g->out[2], Wq,
                              job->Fpad, dyT);
            mm_t p;
            memset(&p, 0, sizeof p);
            p.K = Q;
            p.a = job->pointwise ? xg : planes;
            p.arow = cj->koff + r0;
            p.ask = 1;
            p.b = dyT;
            p.bsk = job->Fpad;
            p.bsp = PW;
            p.padded = 1;
            p.c = C;
            p.csr = g->Fg;
            p.csj = 1;
            p.rows = rc;
            p.cols = g->Fg;
            p.accumulate = n > n0;
            p.kcap = imax(512, MM_BLOCK_FLOATS / job->Fpad);
            mm_run(&p, cj->shape);
        }
    }
}

/* dw[gi Fg + f][r] = sum over chunks of acc[gi][chunk][r][f]; a task is a block of 16 rows r and
 * 16 filters f of a group: the chunks summed in registers, then one 16 x 16 transpose */
NN_AVX512 static void wgrad_reduce_task(int64_t begin, int64_t end, void **argv) {
    wgrad_job *job = (wgrad_job *)argv[0];
    const geo_t *g = &job->cj.g;
    const int64_t Kd = g->Cg * g->KK, Fg = g->Fg, tr = cdiv(Kd, 16), tf = cdiv(Fg, 16);
    for (int64_t t = begin; t < end; t++) {
        const int64_t fi = t % tf, ri = (t / tf) % tr, gi = t / (tf * tr);
        const int64_t r0 = ri * 16, f0 = fi * 16, nr = imin(16, Kd - r0), nf = imin(16, Fg - f0);
        const __mmask16 mf = nf >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nf) - 1u);
        const __mmask16 mr = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1u);
        __m512 v[16];
        for (int i = 0; i < 16; i++) {
            v[i] = _mm512_setzero_ps();
            if (i >= nr) continue;
            const float *a = job->acc + (gi * job->chunks * Kd + r0 + i) * Fg + f0;
            for (int64_t ch = 0; ch < job->chunks; ch++)
                v[i] = _mm512_add_ps(v[i], _mm512_maskz_loadu_ps(mf, a + ch * Kd * Fg));
        }
        tr16x16(v);   /* v[l]: filter f0 + l, rows r0 .. r0 + 15 */
        for (int64_t l = 0; l < nf; l++) _mm512_mask_storeu_ps(job->dw + (gi * Fg + f0 + l) * Kd + r0, mr, v[l]);
    }
}

/* 1 if the AVX-512 path took the call (2-D convolutions with at least 8 filters per group;
 * depthwise and 1-D / 3-D ones stay on the im2col path) */
static int conv_bwd_weight_native(const symjit_conv_desc *d, const float *dy, const float *x, float *dw) {
    wgrad_job job;
    memset(&job, 0, sizeof job);
    conv_job *cj = &job.cj;
    cj->d = d;
    cj->g = geo_of(d);
    const geo_t *g = &cj->g;
    if (!native_on() || g->Fg < 8 || g->in[0] != 1 || g->k[0] != 1 || g->out[0] != 1 || g->s[1] * g->s[2] > 16)
        return 0;
    cj->x = x;
    job.dy = dy;
    job.dw = dw;
    job.pointwise = is_pointwise(g);
    const int64_t Kd = g->Cg * g->KK, OH = g->out[1];
    cj->Wp = job.pointwise ? g->out[2] : g->out[2] + (g->k[2] - 1) * g->dl[2] / g->s[2];
    cj->Hp = OH + (g->k[1] - 1) * g->dl[1] / g->s[1];
    cj->shape = mm_pick(Kd, g->Fg);
    job.Fpad = cdiv(g->Fg, mm_panel(cj->shape)) * mm_panel(cj->shape);
    if (job.pointwise) {
        int64_t *koff = (int64_t *)scratch(7, (size_t)g->Cg);
        if (!koff) return 1;
        for (int64_t c = 0; c < g->Cg; c++) koff[c] = c * g->IP;
        cj->koff = koff;
    } else {
        cj->phase_used = phases_used(g);
        cj->koff = implicit_tap_offsets(cj);
        if (!cj->koff) return 1;
    }
    const int64_t threads = symjit_get_num_threads();
    const double flops = 2.0 * (double)g->N * (double)g->F * (double)(OH * cj->Wp) * (double)Kd;
    const int64_t want = tiles_want(flops, threads);
    const int64_t per_acc = g->G * Kd * g->Fg;
    /* as many chunks as the pool wants blocks (fewer when the accumulators would pass 8 MiB),
     * then row blocks: a row block repeats its chunk's planes and dy transposes */
    int64_t chunks = imax(1, imin(imin(g->N, want), (int64_t)(1 << 21) / imax(per_acc, 1)));
    job.per_chunk = cdiv(g->N, chunks);
    job.chunks = cdiv(g->N, job.per_chunk);
    const int64_t R = MM_SHAPES[cj->shape].R;
    int64_t trb = g->G * job.chunks >= want ? 1 : imin(cdiv(want, g->G * job.chunks), cdiv(Kd, R));
    job.rb = cdiv(cdiv(Kd, trb), R) * R;
    trb = cdiv(Kd, job.rb);
    job.acc = scratch(12, (size_t)(job.chunks * per_acc));
    if (!job.acc) return 1;
    void *argv[1] = {&job};
    symjit_parallel_for(wgrad_task, g->G * job.chunks * trb, 1, argv);
    symjit_parallel_for(wgrad_reduce_task, g->G * cdiv(Kd, 16) * cdiv(g->Fg, 16), imax(1, 16 / job.chunks), argv);
    return 1;
}
#endif

/* dw (F, C/G, k) from dy (N, F, out) and x (N, C, in). */
NN_API void symjit_nn_conv_bwd_weight(const symjit_conv_desc *d, const float *dy, const float *x, float *dw) {
#ifdef NN_HAVE_AVX512
    if (g_tune[TUNE_CONV] != TUNE_CONV_NO_IMPLICIT && conv_bwd_weight_native(d, dy, x, dw)) return;
#endif
    conv_job job = {d, geo_of(d), dy, x, NULL, dw, NULL, NULL, 0, 0};
    void *argv[1] = {&job};
    job.mb = channel_block(&job.g, job.g.G, job.g.P * job.g.KK);
    symjit_parallel_for(conv_bwd_weight_task, job.g.G * cdiv(job.g.Cg, job.mb), 1, argv);
}

/* ---------------------------------------------------------------------------------------- */
/* Bias gradient: db[c] = sum over (outer, inner) of dy[outer, c, inner]                     */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    int64_t outer, C, inner;
    const float *dy;
    float *db;
} bias_bwd_job;

/* channels [begin, end): each summed in the same order whatever the split (8 partial sums per
 * run of `inner`, added in double) */
NN_CLONES
static void bias_bwd_task(int64_t begin, int64_t end, void **argv) {
    const bias_bwd_job *j = (const bias_bwd_job *)argv[0];
    for (int64_t c = begin; c < end; c++) {
        double s = 0.0;
        for (int64_t o = 0; o < j->outer; o++) {
            const float *r = j->dy + (o * j->C + c) * j->inner;
            float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int64_t i = 0;
            for (; i + 8 <= j->inner; i += 8)
                for (int l = 0; l < 8; l++) part[l] += r[i + l];
            for (; i < j->inner; i++) part[0] += r[i];
            for (int l = 0; l < 8; l++) s += part[l];
        }
        j->db[c] = (float)s;
    }
}

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
    /* channels over the pool: a channel is outer x inner floats, tasks of about 64K floats */
    bias_bwd_job job = {outer, C, inner, dy, db};
    void *argv[1] = {&job};
    symjit_parallel_for(bias_bwd_task, C, imax(1, 65536 / imax(outer * inner, 1)), argv);
}
