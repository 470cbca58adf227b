/* nn/conv.c -- Convolution: the descriptor's geometry, im2col / col2im, the im2col + GEMM and filter-vector
 * forward paths, and the weight packing (symjit_nn_conv_pack).
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

/* ---------------------------------------------------------------------------------------- */
/* Convolution geometry                                                                      */
/* ---------------------------------------------------------------------------------------- */

/* The descriptor of the convolution family is symjit_conv_desc (nnkernels.h); geo_t is it
 * with the derived sizes: Cg, Fg per group, KK taps, P output and IP input positions. */
typedef struct {
    int64_t N, C, G, F, Cg, Fg;
    int64_t in[3], k[3], out[3], s[3], dl[3], p[3];
    int64_t KK, P, IP;
} geo_t;

static geo_t geo_of(const symjit_conv_desc *d) {
    geo_t g;
    g.N = d->n; g.C = d->channels; g.G = d->groups; g.F = d->filters;
    g.Cg = g.C / g.G; g.Fg = g.F / g.G;
    for (int i = 0; i < 3; i++) {
        g.in[i] = d->in_size[i]; g.k[i] = d->kernel[i]; g.out[i] = d->out_size[i];
        g.s[i] = d->stride[i]; g.dl[i] = d->dilate[i]; g.p[i] = d->pad[i];
    }
    g.KK = g.k[0] * g.k[1] * g.k[2];
    g.P = g.out[0] * g.out[1] * g.out[2];
    g.IP = g.in[0] * g.in[1] * g.in[2];
    return g;
}

/* cols[(c*KK + kidx), j] = x_c[o(p0 + j) * s + k * d - p] for channels [c0, c1), columns [p0, p1) */
NN_CLONES
static void im2col(const geo_t *g, const float *x, int64_t c0, int64_t c1, int64_t p0, int64_t p1, float *cols) {
    const int64_t pb = p1 - p0;
    const int64_t OH = g->out[1], OW = g->out[2], D = g->in[0], H = g->in[1], W = g->in[2];
    float *dst = cols;
    for (int64_t c = c0; c < c1; c++) {
        const float *xc = x + c * g->IP;
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    int64_t p = p0, od = p0 / (OH * OW), oh = (p0 / OW) % OH, ow = p0 % OW;
                    const int64_t off = kw * g->dl[2] - g->p[2], sw = g->s[2];
                    float *row = dst;
                    while (p < p1) {
                        int64_t cnt = imin(OW - ow, p1 - p);
                        int64_t id = od * g->s[0] - g->p[0] + kd * g->dl[0];
                        int64_t ih = oh * g->s[1] - g->p[1] + kh * g->dl[1];
                        if (id < 0 || id >= D || ih < 0 || ih >= H) {
                            memset(row, 0, (size_t)cnt * sizeof(float));
                        } else {
                            const float *src = xc + (id * H + ih) * W;
                            /* valid ow range: 0 <= ow*sw + off < W */
                            int64_t lo = off >= 0 ? 0 : cdiv(-off, sw);
                            int64_t hi = W - off <= 0 ? 0 : cdiv(W - off, sw);
                            int64_t a = imin(imax(lo - ow, 0), cnt), b = imin(imax(hi - ow, 0), cnt);
                            if (b < a) b = a;
                            for (int64_t t = 0; t < a; t++) row[t] = 0.0f;
                            if (sw == 1) {
                                memcpy(row + a, src + ow + a + off, (size_t)(b - a) * sizeof(float));
                            } else {
                                for (int64_t t = a; t < b; t++) row[t] = src[(ow + t) * sw + off];
                            }
                            for (int64_t t = b; t < cnt; t++) row[t] = 0.0f;
                        }
                        row += cnt;
                        p += cnt;
                        ow = 0;
                        if (++oh == OH) { oh = 0; od++; }
                    }
                    dst += pb;
                }
    }
}

/* The adjoint of im2col: dx_c[o(p)*s + k*d - p] += cols[(c*KK + kidx), p] for all columns. */
NN_CLONES
static void col2im(const geo_t *g, const float *cols, int64_t c0, int64_t c1, float *dx) {
    const int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2], D = g->in[0], H = g->in[1], W = g->in[2];
    const float *src = cols;
    for (int64_t c = c0; c < c1; c++) {
        float *xc = dx + c * g->IP;
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    const int64_t off = kw * g->dl[2] - g->p[2], sw = g->s[2];
                    int64_t lo = off >= 0 ? 0 : cdiv(-off, sw);
                    int64_t hi = W - off <= 0 ? 0 : cdiv(W - off, sw);
                    lo = imin(lo, OW);
                    hi = imin(imax(hi, lo), OW);
                    for (int64_t od = 0; od < OD; od++) {
                        int64_t id = od * g->s[0] - g->p[0] + kd * g->dl[0];
                        for (int64_t oh = 0; oh < OH; oh++) {
                            int64_t ih = oh * g->s[1] - g->p[1] + kh * g->dl[1];
                            const float *r = src + (od * OH + oh) * OW;
                            if (id < 0 || id >= D || ih < 0 || ih >= H) continue;
                            float *dr = xc + (id * H + ih) * W + off;
                            for (int64_t ow = lo; ow < hi; ow++) dr[ow * sw] += r[ow];
                        }
                    }
                    src += g->P;
                }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Convolution forward                                                                       */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    const symjit_conv_desc *d;
    geo_t g;
    const float *x, *w, *bias;
    float *y;
    symjit_kernel_fn epi;
    void **epi_args;
    int64_t mb, pb;   /* row (filter or channel) block and column block */
    int shape;        /* AVX-512 tile shape (conv_native) */
    int64_t serial;   /* distinguishes calls for the per-thread im2col cache */
    const float *wp;  /* weights packed by symjit_nn_conv_pack (F-vector orientation), or NULL */
    float *xp;        /* implicit GEMM: zero-padded input, planes of Hp x Wp (+ slack) */
    int64_t Hp, Wp;
    const int64_t *koff;
    int64_t phase_used;   /* bit a * sw + b: some tap reads phase plane (a, b) */
    int fv_how;           /* conv_fvec: FV_INPUT, FV_IM2COL or FV_PLANES */
    float *wt;            /* implicit GEMM: the weights by columns (implicit_weights_by_columns), or NULL */
    int tiles;            /* portable path: the GEMMs of conv_gemm_task on pt_gemm (pt_gemm_suits, decided
                             once per call so that every block sums the same way), else the BLAS */
} conv_job;

static int is_pointwise(const geo_t *g) {
    for (int i = 0; i < 3; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->p[i] != 0 || g->out[i] != g->in[i]) return 0;
    return 1;
}

/* one task: image n, group gi, filter block [m0, m0+mb), column block [p0, p0+pb) */
NN_CLONES
static void conv_gemm_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    int64_t pb = job->pb, mb = job->mb;
    int64_t tp = cdiv(g->P, pb), tm = cdiv(g->Fg, mb);
    int64_t Kd = g->Cg * g->KK;
    int pw = is_pointwise(g);
    const int tiles = job->tiles;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / (g->G * tm * tp), r = t % (g->G * tm * tp);
        int64_t gi = r / (tm * tp);
        r %= tm * tp;
        int64_t m0 = (r / tp) * mb, p0 = (r % tp) * pb;
        int64_t mc = imin(mb, g->Fg - m0), pc = imin(pb, g->P - p0);
        const float *xg = job->x + (n * g->C + gi * g->Cg) * g->IP;
        const float *B;
        int64_t ldb;
        if (pw) {
            B = xg + p0;
            ldb = g->P;
        } else {
            float *cols = scratch(0, (size_t)(Kd * pc));
            if (!cols) return;
            im2col(g, xg, 0, g->Cg, p0, p0 + pc, cols);
            B = cols;
            ldb = pc;
        }
        int64_t f0 = gi * g->Fg + m0;
        float *Y = job->y + (n * g->F + f0) * g->P + p0;
        if (tiles) {
            /* a 1x1 layer's B is its input in place, rows P apart: packed per K block into
             * contiguous strips (each read by every row tile of the block) */
            float *bpack = pw ? scratch(0, (size_t)(imin(Kd, PT_KC) * pc)) : NULL;
            if (pw && !bpack) return;
            pt_gemm(mc, pc, Kd, job->w + f0 * Kd, Kd, B, ldb, 0.0f, Y, g->P, job->bias ? job->bias + f0 : NULL, bpack);
        } else {
            float beta = 0.0f;
            if (job->bias) {
                for (int64_t i = 0; i < mc; i++)
                    for (int64_t j = 0; j < pc; j++) Y[i * g->P + j] = job->bias[f0 + i];
                beta = 1.0f;
            }
            gemm_rm(0, 0, mc, pc, Kd, job->w + f0 * Kd, Kd, B, ldb, beta, Y, g->P);
        }
        run_epilogue_rows(job->epi, job->epi_args, (n * g->F + f0) * g->P + p0, mc, g->P, pc);
    }
}

/* AVX-512 path: one task = image n, group gi, column block [p0, p0 + pb), filter block
 * [m0, m0 + mb); the tiles read the weights' rows directly (broadcast operand) and the im2col
 * block (or, for 1x1 stride-1 convolutions, the input itself) as the vector operand, add the
 * bias as they store, and the epilogue runs on the block. Tasks are ordered with the filter
 * block fastest, and a thread keeps its last im2col block (per-thread cache keyed by call and
 * block), so splitting the filters of one column block does not repeat its im2col. */
static _Atomic int64_t g_call_serial;
static __thread int64_t t_cols_serial = -1, t_cols_tag = -1;
static __thread const float *t_cols_ptr;

static void conv_native_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    const int64_t pb = job->pb, mb = job->mb;
    const int64_t tp = cdiv(g->P, pb), tm = cdiv(g->Fg, mb);
    const int64_t Kd = g->Cg * g->KK;
    const int pw = is_pointwise(g);
    for (int64_t t = begin; t < end; t++) {
        int64_t mi = t % tm, rest = t / tm;
        int64_t pi = rest % tp;
        rest /= tp;
        int64_t gi = rest % g->G, n = rest / g->G;
        int64_t m0 = mi * mb, p0 = pi * pb;
        int64_t mc = imin(mb, g->Fg - m0), pc = imin(pb, g->P - p0);
        const float *xg = job->x + (n * g->C + gi * g->Cg) * g->IP;
        mm_t p;
        memset(&p, 0, sizeof p);
        p.K = Kd;
        if (pw) {
            p.b = xg + p0;
            p.bsk = g->P;
            p.bsp = mm_panel(job->shape);
        } else {
            float *cols = scratch(0, (size_t)(Kd * pc));
            if (!cols) return;
            int64_t tag = (n * g->G + gi) * tp + pi;
            if (t_cols_serial != job->serial || t_cols_tag != tag || t_cols_ptr != cols) {
                im2col(g, xg, 0, g->Cg, p0, p0 + pc, cols);
                t_cols_serial = job->serial;
                t_cols_tag = tag;
                t_cols_ptr = cols;
            }
            p.b = cols;
            p.bsk = pc;
            p.bsp = mm_panel(job->shape);
        }
        int64_t f0 = gi * g->Fg + m0;
        p.a = job->w + f0 * Kd;
        p.ask = 1;
        p.asr = Kd;
        p.c = job->y + (n * g->F + f0) * g->P + p0;
        p.csr = g->P;
        p.csj = 1;
        p.pfw = 1;
        p.bias_r = job->bias ? job->bias + f0 : NULL;
        p.rows = mc;
        p.cols = pc;
        p.relu = epi_is_relu(job->epi);
        mm_run(&p, job->shape);
        if (!p.relu) run_epilogue_rows(job->epi, job->epi_args, (n * g->F + f0) * g->P + p0, mc, g->P, pc);
    }
}

/* Blocks of conv_native: im2col blocks of ~CONV_COLUMN_FLOATS (whole panels), then, while the
 * pool has fewer blocks than it wants, more column blocks (each at least two panels wide),
 * then filter blocks (whole row tiles). */
static void conv_native(conv_job *job) {
    const geo_t *g = &job->g;
    const int64_t Kd = g->Cg * g->KK, outer = g->N * g->G;
    job->shape = mm_pick(g->Fg, g->P);
    const int64_t W = mm_panel(job->shape), R = MM_SHAPES[job->shape].R;
    const int64_t panels = cdiv(g->P, W);
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)outer * (double)g->Fg * (double)g->P * (double)Kd;
    int64_t want = tiles_want(flops, threads);
    int64_t per = is_pointwise(g) ? panels : imax(1, CONV_COLUMN_FLOATS / imax(Kd * W, 1));
    int64_t tp = cdiv(panels, imin(per, panels));
    if (outer * tp < want) tp = imax(tp, imin(cdiv(want, outer), imax(1, panels / 2)));
    job->pb = cdiv(panels, tp) * W;
    tp = cdiv(g->P, job->pb);
    int64_t tm = 1;
    if (outer * tp < want) tm = imin(cdiv(want, outer * tp), cdiv(g->Fg, R));
    job->mb = cdiv(cdiv(g->Fg, tm), R) * R;
    tm = cdiv(g->Fg, job->mb);
    job->serial = atomic_fetch_add(&g_call_serial, 1) + 1;
    void *argv[1] = {job};
    symjit_parallel_for(conv_native_task, outer * tp * tm, tasks_grain(outer * tp * tm, want, threads), argv);
}

/* F-vector orientation (AVX-512 path) for convolutions with few output positions (the 7x7 and
 * 14x14 maps of a 224x224 network at batch 1): the tiles run along the filters (F a multiple of
 * 16: no padded lanes) and broadcast the positions, so P = 49 costs 49 rows instead of 64 padded
 * columns. The vector operand is the weights transposed into panels of PW filters,
 * wp[gi][f / PW][k][f % PW] (zero-padded), packed once by symjit_nn_conv_pack when the weights are
 * constant; the broadcast operand is the im2col matrix (or the input itself for 1x1 stride 1).
 * Chosen when its padded work is at most 92% of the usual orientation's (the transposed stores
 * cost a little), 75% where it needs an im2col that the implicit GEMM avoids. Returns the tile
 * shape, or -1. */
static int implicit_ok(const geo_t *g);

static void pad_phase_rows(const geo_t *g, const float *x, int64_t a, int64_t b, int64_t i0, int64_t nrows,
                           int64_t Wq, float *d, int interior_only, float fill);
#ifdef NN_HAVE_AVX512
NN_AVX512 static void pad_phase_rows_pair(const geo_t *g, const float *x, int64_t a, int64_t i0, int64_t nrows,
                                          int64_t Wq, float *d0, float *d1);
#endif

/* how conv_fvec reads the positions (the broadcast operand) */
enum { FV_INPUT = 0, FV_IM2COL = 1, FV_PLANES = 2 };

static int conv_fvec_how(const geo_t *g) {
    if (is_pointwise(g)) return FV_INPUT;
    if (implicit_ok(g) && g->out[2] % 7 == 0 && g->s[1] * g->s[2] <= 16) return FV_PLANES;
    return FV_IM2COL;
}

/* Portable path (hosts without AVX-512), 1x1 stride-1 convolutions of one image: filter-vector
 * tiles on weights packed at compile time (symjit_nn_conv_pack: per group, panels of 16
 * filters, w[panel][c][16], the last zero-padded). A tile is 16 filters (two 8-lane vectors)
 * x PT_R output positions broadcast from the input rows (x[c][p]): 12 accumulators. The BLAS
 * orientation puts the positions in the vectors, which a 7x7 or 14x14 plane fills badly, and
 * packs the weights, the large operand there, on every call.
 * Task: group, panel, chunk of PWF_CHUNK positions; its partial sums, 16 per position, stay in
 * `part` (L1) across channel blocks of PWF_KC. Each output sums its channels in order, one FMA
 * each, then adds the bias: the same float however the call is cut into tasks. */
#define PWF_KC 128
#define PWF_CHUNK 96
_Static_assert(PWF_CHUNK % PT_R == 0, "a position chunk holds whole tiles (pw_fvec_task stores them whole)");

/* Which 1x1 layers take it (from the geometry alone, at packing time and at run time alike):
 * one image, and at least PWF_MIN_CHANNELS input channels per group (long dot products, against
 * which the tile's transposed stores are cheap) or at most PWF_MAX_FILTERS filters (a BLAS
 * packs the whole input block for few rows of work). Measured on a Zen 3 (AVX2) host, 2
 * threads, single layers at batch 1 (tiles / BLAS, paired): 512 -> 512 at 14x14 0.70-0.74;
 * 1024 -> 1024 at 7x7 0.91-0.93; 960 -> 160 at 7x7 0.56-0.76; 576 -> 96 at 14x14 0.71; 192 ->
 * 64 at 35x35 0.84-0.90; 64 -> 16 at 55x55 0.45-0.54; 32 -> 64 at 112x112 0.82-0.95. Left to
 * the BLAS: batch 8 (512 -> 512 at 14x14 0.95-1.17, 96 -> 576 1.19-1.20; MobileNet 1.0 whole
 * 1.22), fewer than 32 channels (24 -> 144 at 56x56 1.35-1.50, SqueezeNet's 16 -> 64 at 55x55
 * 1.15), 160 -> 960 at 7x7 0.97-1.11. Whole models at batch 1 (bench_kernel_tune.py --key conv
 * --value 4, BLAS / tiles, paired in one process): MobileNetV2 1.14-1.30, Inception v3 1.09,
 * DenseNet-121 1.05, MobileNet 1.0 1.04. */
#define PWF_MIN_CHANNELS 192
#define PWF_MAX_FILTERS 64

static int pw_fvec_ok(const geo_t *g) {
    return !cpu_has_avx512() && is_pointwise(g) && g->N == 1 && g->in[0] == 1 && g->Fg >= 16 && g->Cg >= 32 &&
           (g->Cg >= PWF_MIN_CHANNELS || g->Fg <= PWF_MAX_FILTERS) && g_tune[TUNE_CONV] != TUNE_CONV_NO_FVEC;
}

NN_CLONES
static void pw_fvec_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    const int64_t P = g->P, Cg = g->Cg, np = cdiv(g->Fg, 16), nch = cdiv(P, PWF_CHUNK);
    float part[PWF_CHUNK * 16] __attribute__((aligned(64)));
    for (int64_t t = begin; t < end; t++) {
        const int64_t n = t / (g->G * np * nch), r = t % (g->G * np * nch);
        const int64_t gi = r / (np * nch), pn = (r / nch) % np, ch = r % nch;
        const int64_t p0 = ch * PWF_CHUNK, pc = imin(PWF_CHUNK, P - p0);
        const int64_t f0 = gi * g->Fg + pn * 16, nf = imin(16, g->Fg - pn * 16);
        const float *wpan = job->wp + gi * np * 16 * Cg + pn * 16 * Cg;
        const float *xg = job->x + (n * g->C + gi * Cg) * P + p0;
        for (int64_t c0 = 0; c0 < Cg; c0 += PWF_KC) {
            const int64_t kc = imin(PWF_KC, Cg - c0);
            for (int64_t q = 0; q < pc; q += PT_R) {
                const int64_t nr = imin(PT_R, pc - q);
                /* positions past the chunk compute a copy of its last one, kept in `part` but never stored */
                const float *x0 = xg + c0 * P + q, *x1 = x0 + imin(1, nr - 1), *x2 = x0 + imin(2, nr - 1),
                            *x3 = x0 + imin(3, nr - 1), *x4 = x0 + imin(4, nr - 1), *x5 = x0 + nr - 1;
                float *pp = part + q * 16;
                PT_TILE_SUMS;
                if (c0 > 0) PT_TILE_LOAD(pp);   /* the previous channel blocks' sums */
                const float *wk = wpan + c0 * 16;
                for (int64_t k = 0; k < kc; k++, wk += 16) {
                    const int64_t o = k * P;
                    PT_TILE_STEP(x0[o], x1[o], x2[o], x3[o], x4[o], x5[o], LD8(wk), LD8(wk + 8));
                }
                PT_TILE_STORE(pp);   /* whole tiles: a chunk is a whole number of them */
            }
        }
        float *y = job->y + (n * g->F + f0) * P + p0;
        /* transposed stores (filter rows of positions): 8 x 8 blocks in registers, the last
         * positions of a partial chunk one by one */
        const int64_t pc8 = pc / 8 * 8;
        for (int64_t l0 = 0; l0 < nf; l0 += 8) {
            float bl[8];
            for (int l = 0; l < 8; l++) bl[l] = job->bias && l0 + l < nf ? job->bias[f0 + l0 + l] : 0.0f;
            for (int64_t q0 = 0; q0 < pc8; q0 += 8) {
                nn_v8f r[8];
                for (int j = 0; j < 8; j++) r[j] = LD8(part + (q0 + j) * 16 + l0);
                transpose8x8_v8(r);
                for (int l = 0; l < 8 && l0 + l < nf; l++) ST8(y + (l0 + l) * P + q0, r[l] + BC8(bl[l]));
            }
            for (int64_t l = 0; l < 8 && l0 + l < nf; l++)
                for (int64_t q = pc8; q < pc; q++) y[(l0 + l) * P + q] = part[q * 16 + l0 + l] + bl[l];
        }
        run_epilogue_rows(job->epi, job->epi_args, (n * g->F + f0) * P + p0, nf, P, pc);
    }
}

static void conv_pw_fvec(conv_job *job) {
    const geo_t *g = &job->g;
    void *argv[1] = {job};
    const int64_t tasks = g->N * g->G * cdiv(g->Fg, 16) * cdiv(g->P, PWF_CHUNK);
    const double flops = 2.0 * (double)g->N * (double)g->F * (double)g->P * (double)g->Cg;
    const int64_t threads = symjit_get_num_threads();
    symjit_parallel_for(pw_fvec_task, tasks, tasks_grain(tasks, tiles_want(flops, threads), threads), argv);
}

static int conv_fvec_shape(const geo_t *g) {
    if (!cpu_has_avx512() || g->Fg < 16) return -1;
    int64_t cols_n = g->P;
    if (implicit_ok(g))
        cols_n = g->out[1] * (g->out[2] + (g->k[2] - 1) * g->dl[2] / g->s[2]);
    int sn = mm_pick(g->Fg, cols_n), sf;
    int how = conv_fvec_how(g);
    double margin = 0.92;   /* the transposed stores cost a little */
    if (how == FV_PLANES) {   /* row tiles of 7 positions = whole output rows (7 | OW) */
        sf = mm_cost(5, g->P, g->Fg) <= mm_cost(6, g->P, g->Fg) ? 5 : 6;
        if (g_tune[TUNE_SHAPE] == 6 || g_tune[TUNE_SHAPE] == 7) sf = (int)g_tune[TUNE_SHAPE] - 1;
    } else {
        sf = mm_pick(g->P, g->Fg);
        if (how == FV_IM2COL) margin = 0.75;   /* it pays an im2col the other avoids */
    }
    if (g_tune[TUNE_CONV] == TUNE_CONV_FORCE_FVEC) margin = 10.0;
    return mm_cost(sf, g->P, g->Fg) <= margin * mm_cost(sn, g->Fg, cols_n) ? sf : -1;
}

static int64_t conv_fvec_group_floats(const geo_t *g, int shape) {
    return cdiv(g->Fg, mm_panel(shape)) * mm_panel(shape) * g->Cg * g->KK;
}

static void conv_fvec_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    conv_job *job = (conv_job *)argv[0];
    const geo_t *g = &job->g;
    const int64_t mb = job->mb, tm = cdiv(g->Fg, mb), Kd = g->Cg * g->KK, PW = mm_panel(job->shape);
    const int64_t pb = job->pb, tp = cdiv(g->P, pb);   /* position blocks (whole row tiles / rows) */
    for (int64_t t = begin; t < end; t++) {
        /* position blocks innermost: the pool hands consecutive tasks to different threads, so
         * the tasks of one filter block run side by side and its weights stream from memory
         * once (filter blocks innermost read each again after all the others) */
        int64_t pi = t % tp, mi = (t / tp) % tm, ng = t / (tm * tp);
        const int64_t gi = ng % g->G, n = ng / g->G;
        int64_t m0 = mi * mb, mc = imin(mb, g->Fg - m0), f0 = gi * g->Fg + m0;
        int64_t p0 = pi * pb, pc = imin(pb, g->P - p0);
        const float *xg = job->x + (n * g->C + gi * g->Cg) * g->IP;
        mm_t p;
        memset(&p, 0, sizeof p);
        p.K = Kd;
        if (job->fv_how == FV_INPUT) {
            p.a = xg + p0;
            p.ask = g->P;
        } else if (job->fv_how == FV_PLANES) {
            /* the image's padded phase planes; A(k, r) = planes[aoff[k] + pos(r)] */
            const int64_t sh = g->s[1], sw = g->s[2], Hq = job->Hp, Wq = job->Wp;
            const size_t np = (size_t)(g->Cg * sh * sw * Hq * Wq), slack = (size_t)(Wq + 64);
            float *planes = scratch(0, np + slack);
            if (!planes) return;
            if (t_cols_serial != job->serial || t_cols_tag != ng || t_cols_ptr != planes) {
                for (int64_t c = 0; c < g->Cg; c++)
                    for (int64_t a = 0; a < sh; a++) {
                        float *dst = planes + (c * sh + a) * sw * Hq * Wq;
                        if (a == 0 && c + 1 < g->Cg)
                            prefetch_plane_rows(xg + (c + 1) * g->IP, g->in[1], g->in[2], 0, g->in[1]);
#ifdef NN_HAVE_AVX512
                        if (sw == 2 && ((job->phase_used >> (a * 2)) & 3) == 3) {
                            pad_phase_rows_pair(g, xg + c * g->IP, a, 0, Hq, Wq, dst, dst + Hq * Wq);
                            continue;
                        }
#endif
                        for (int64_t b = 0; b < sw; b++)
                            if ((job->phase_used >> (a * sw + b)) & 1)
                                pad_phase_rows(g, xg + c * g->IP, a, b, 0, Hq, Wq, dst + b * Hq * Wq, 0, 0.0f);
                    }
                for (size_t i = np; i < np + slack; i++) planes[i] = 0.0f;
                t_cols_serial = job->serial;
                t_cols_tag = ng;
                t_cols_ptr = planes;
            }
            p.a = planes + (p0 / g->out[2]) * Wq;   /* p0: whole output rows */
            p.aoff = job->koff;
            p.a_pitch = Wq;
            p.valid_w = g->out[2];
        } else {
            float *cols = scratch(0, (size_t)(Kd * g->P));
            if (!cols) return;
            if (t_cols_serial != job->serial || t_cols_tag != ng || t_cols_ptr != cols) {
                im2col(g, xg, 0, g->Cg, 0, g->P, cols);
                t_cols_serial = job->serial;
                t_cols_tag = ng;
                t_cols_ptr = cols;
            }
            p.a = cols + p0;
            p.ask = g->P;
        }
        p.asr = 1;
        p.b = job->wp + gi * conv_fvec_group_floats(g, job->shape) + (m0 / PW) * Kd * PW;
        p.bsk = PW;
        p.bsp = Kd * PW;
        p.padded = 1;
        p.panels_outer = 1;
        p.c = job->y + (n * g->F + f0) * g->P + p0;
        p.csr = 1;
        p.csj = g->P;
        p.bias_j = job->bias ? job->bias + f0 : NULL;
        p.rows = pc;
        p.cols = mc;
        p.relu = epi_is_relu(job->epi);
        mm_run(&p, job->shape);
        if (!p.relu) run_epilogue_rows(job->epi, job->epi_args, (n * g->F + f0) * g->P + p0, mc, g->P, pc);
    }
}

static void conv_fvec(conv_job *job, int shape) {
    const geo_t *g = &job->g;
    const int64_t outer = g->N * g->G, PW = mm_panel(shape);
    job->shape = shape;
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)outer * (double)g->Fg * (double)g->P * (double)(g->Cg * g->KK);
    int64_t want = tiles_want(flops, threads);
    /* blocks: filter panels first (each block reads its part of the packed weights once),
     * then positions (whole output rows for the phase planes, whole row tiles otherwise) */
    int64_t panels = cdiv(g->Fg, PW), tm = outer >= want ? 1 : imin(cdiv(want, outer), panels);
    job->mb = cdiv(panels, tm) * PW;
    tm = cdiv(g->Fg, job->mb);
    const int64_t unit = conv_fvec_how(g) == FV_PLANES ? g->out[2] : MM_SHAPES[shape].R;
    const int64_t units = cdiv(g->P, unit);
    int64_t tp = outer * tm >= want ? 1 : imin(cdiv(want, outer * tm), units);
    job->pb = cdiv(units, tp) * unit;
    job->fv_how = conv_fvec_how(g);
    if (job->fv_how == FV_PLANES) {   /* phase planes of whole images and the table of A */
        const int64_t KH = g->k[1], KW = g->k[2], dh = g->dl[1], dw = g->dl[2], sh = g->s[1], sw = g->s[2];
        const int64_t Kd = g->Cg * g->KK;
        job->Hp = g->out[1] + (KH - 1) * dh / sh;
        job->Wp = g->out[2] + (KW - 1) * dw / sw;
        int64_t *aoff = (int64_t *)scratch(7, (size_t)(2 * Kd));
        if (!aoff) return;
        job->phase_used = 0;
        for (int64_t c = 0; c < g->Cg; c++)
            for (int64_t kh = 0; kh < KH; kh++)
                for (int64_t kw = 0; kw < KW; kw++) {
                    int64_t a = kh * dh % sh, b = kw * dw % sw;
                    aoff[(c * KH + kh) * KW + kw] = (((c * sh + a) * sw + b) * job->Hp + kh * dh / sh) * job->Wp + kw * dw / sw;
                    job->phase_used |= (int64_t)1 << (a * sw + b);
                }
        job->koff = aoff;
    }
    job->serial = atomic_fetch_add(&g_call_serial, 1) + 1;
    void *argv[1] = {job};
    const int64_t tasks = outer * tm * cdiv(g->P, job->pb);
    symjit_parallel_for(conv_fvec_task, tasks, tasks_grain(tasks, want, threads), argv);
}

/* Size in floats of the packed weights the AVX-512 path wants for this (forward, im2col-method)
 * convolution, 0 if none; with `out`, also packs w (F, C/G, k) into it. Called when the weights
 * are constant at compile time (lower_conv), so a call pays no packing. */
static int wnat_ok(const geo_t *g);
static int64_t wnat_pack_floats(const geo_t *g);
static void wino_weights(const float *w, int64_t F, int64_t C, int64_t f0, int64_t f1, float *U);

NN_API int64_t symjit_nn_conv_pack(const symjit_conv_desc *d, const float *w, float *out) {
    geo_t g = geo_of(d);
    if (d->method == SYMJIT_CONV_WINOGRAD) {   /* Winograd: U = G g G^T, [16][F][C] */
        int64_t n = cpu_has_avx512() ? wnat_pack_floats(&g) : 0;
        if (n > 0 && out) wino_weights(w, g.F, g.C, 0, g.F, out);
        return n;
    }
    if (d->method != SYMJIT_CONV_IM2COL) return 0;
    if (pw_fvec_ok(&g)) {   /* the portable filter-vector tiles: panels of 16 filters */
        const int64_t per = cdiv(g.Fg, 16) * 16 * g.Cg;
        if (out)
            for (int64_t gi = 0; gi < g.G; gi++) mm_pack_panels(w + gi * g.Fg * g.Cg, g.Cg, 1, g.Fg, g.Cg, 16, out + gi * per);
        return g.G * per;
    }
    int shape = conv_fvec_shape(&g);
    if (shape < 0) return 0;
    const int64_t PW = mm_panel(shape), Kd = g.Cg * g.KK, per = conv_fvec_group_floats(&g, shape);
    if (out) {
        for (int64_t gi = 0; gi < g.G; gi++)
            mm_pack_panels(w + gi * g.Fg * Kd, Kd, 1, g.Fg, Kd, PW, out + gi * per);
    }
    return g.G * per;
}
