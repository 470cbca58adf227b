/* nn/winograd.c -- Winograd F(2x2, 3x3): with the BLAS, and fused on the AVX-512 tiles.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

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
    NN_FLUSH_DENORMALS;
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
    NN_FLUSH_DENORMALS;
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
    NN_FLUSH_DENORMALS;
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
        if (t + 16 < qn && g_tune[TUNE_PREFETCH] != TUNE_PREFETCH_WINO_OUT) {
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
    NN_FLUSH_DENORMALS;
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
 * least padded work with V + M within 1.5 MiB, then filter blocks for 4 tasks per thread, since
 * removed), in-graph, resnet18_v1, 2 threads, paired rounds: batch 1 64 ch 56x56
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
    wnat_blocks(&wj, want, threads);
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
    symjit_parallel_for(wnat_task, outer * tm, tasks_grain(outer * tm, want, threads), argv);
    return 1;
}
