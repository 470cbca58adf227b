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
    } else {
        /* column blocks keep the im2col block (K x pb) within ~512 KiB of L2 */
        int64_t Kd = g->Cg * g->KK;
        split2(g->Fg, g->P, Kd, g->N * g->G, imax(64, CONV_COLUMN_FLOATS / imax(Kd, 1)), &job.mb, &job.pb);
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
NN_API void symjit_nn_conv_bwd_data(const symjit_conv_desc *d, const float *dy, const float *w, const float *bias,
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
NN_API void symjit_nn_conv_bwd_weight(const symjit_conv_desc *d, const float *dy, const float *x, float *dw) {
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
