/* nn/rnn.c -- the fused recurrent layers of MXNet's RNN op (rnn_relu, rnn_tanh, lstm, gru) and
 * their gradient, float32, over every time step in one call.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit).
 *
 * Packed parameters (MXNet / cuDNN layout, symjit/ops/rnn.py): every weight first, for layer l
 * and direction k: W_i2h (G*H, in_l) then W_h2h (G*H, H); then every bias in the same order:
 * b_i2h (G*H), b_h2h (G*H). Gates: lstm i, f, g, o; gru r, z, n with
 * n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).
 *
 * Forward, per layer and direction: one GEMM projects every time step's input at once (with
 * both biases, except gru's b_hn); then each step runs one parallel pass whose tasks own a block
 * of hidden units: the block's recurrent GEMM columns of every gate (h_{t-1} W_h2h^T, from a
 * copy of W_h2h transposed once per call) and the gate math of those units. Both directions of
 * a layer share each step's pass. The backward recomputes that forward, keeping every gate,
 * cell and hidden state in a workspace, then runs back-propagation through time with the same
 * task split (one pass per step: the block's columns of dh = dG_{t+1} W_h2h plus the gate
 * derivatives of its units) and finishes each layer with three large GEMMs (input gradient,
 * W_i2h and W_h2h gradients) and the bias sums.
 *
 * Dropout between layers: `masks` (layers - 1, T, N, D*H), already scaled (MXNet's reserve
 * space; the caller draws them), multiplies each layer's output but the last; NULL: none.
 *
 * Workspace lives in a per-thread scratch buffer of the calling thread (slot 10), per-task gate
 * buffers in slot 9. Tanh and the sigmoid run over rows of gates: with AVX-512 through
 * rnn_exp16 (Cephes' single-precision polynomial, relative error ~2e-7), elsewhere libm. */

enum { RNN_SLOT_TASK = 9, RNN_SLOT_WORK = 10, RNN_SLOT_WEIGHTS = 13 };

#ifdef NN_HAVE_AVX512
/* exp of 16 floats: Cephes' expf polynomial after x = n ln2 + r (relative error ~2e-7); NaN
 * propagates (the clamps return x when it is NaN), overflow gives inf, underflow 0 */
NN_AVX512 static inline __m512 rnn_exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(88.7228f), x);
    x = _mm512_max_ps(_mm512_set1_ps(-103.9721f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* x[i] = sigmoid(x[i]) (tanh: 0) or tanh(x[i]) (tanh: 1) for i < n; tanh(x) as
 * sign(x) (1 - e) / (1 + e) with e = exp(-2|x|) */
NN_AVX512 static void rnn_activate_avx512(float *x, int64_t n, int tanh) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i), y;
        if (tanh) {
            __m512i bits = _mm512_castps_si512(v);
            __m512 a = _mm512_castsi512_ps(_mm512_andnot_si512(sign, bits));
            __m512 e = rnn_exp16(_mm512_mul_ps(a, _mm512_set1_ps(-2.0f)));
            y = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
            y = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y), _mm512_and_si512(sign, bits)));
        } else {
            y = _mm512_div_ps(one, _mm512_add_ps(one, rnn_exp16(_mm512_sub_ps(_mm512_setzero_ps(), v))));
        }
        _mm512_mask_storeu_ps(x + i, m, y);
    }
}
#endif

/* in place over n floats: the logistic sigmoid, or tanh */
static void rnn_sigmoid_n(float *x, int64_t n) {
#ifdef NN_HAVE_AVX512
    if (native_on()) { rnn_activate_avx512(x, n, 0); return; }
#endif
    for (int64_t i = 0; i < n; i++) x[i] = 1.0f / (1.0f + expf(-x[i]));
}

static void rnn_tanh_n(float *x, int64_t n) {
#ifdef NN_HAVE_AVX512
    if (native_on()) { rnn_activate_avx512(x, n, 1); return; }
#endif
    for (int64_t i = 0; i < n; i++) x[i] = tanhf(x[i]);
}

static int64_t rnn_gate_count(int64_t mode) {
    return mode == SYMJIT_RNN_LSTM ? 4 : (mode == SYMJIT_RNN_GRU ? 3 : 1);
}

static int64_t rnn_layer_input(const symjit_rnn_desc *d, int64_t layer) {
    return layer == 0 ? d->input : d->dirs * d->hidden;
}

/* float offsets of one (layer, direction)'s W_i2h, W_h2h, b_i2h, b_h2h in the packed vector */
typedef struct {
    int64_t wi, wh, bi, bh;
} rnn_offsets;

static rnn_offsets rnn_param_offsets(const symjit_rnn_desc *d, int64_t layer, int64_t dir) {
    const int64_t GH = rnn_gate_count(d->mode) * d->hidden, H = d->hidden;
    int64_t pos = 0, weights = 0;
    for (int64_t l = 0; l < d->layers; l++) {
        int64_t per_dir = GH * (rnn_layer_input(d, l) + H);
        if (l < layer) pos += d->dirs * per_dir;
        weights += d->dirs * per_dir;
    }
    rnn_offsets o;
    o.wi = pos + dir * GH * (rnn_layer_input(d, layer) + H);
    o.wh = o.wi + GH * rnn_layer_input(d, layer);
    o.bi = weights + (layer * d->dirs + dir) * 2 * GH;
    o.bh = o.bi + GH;
    return o;
}

/* Workspace of one layer and direction (time order, not processing order):
 *   act  (T, N, G*H)  the input projection, then the gate activations in place (lstm i f g o,
 *                     gru r z n); unused by rnn_relu / rnn_tanh
 *   hn   (T, N, H)    gru: W_hn h_{t-1} + b_hn; lstm: tanh(c_t)
 *   hs   (T+1, N, H)  hidden states: the forward direction keeps h_{t-1} in slot t and h_t in
 *                     slot t+1, the reverse direction h_t in slot t and h_{t+1} in slot t+1
 *   cs   (T+1, N, H)  lstm cell states, slots as hs
 *   wht  (H, G*H)     unused (the recurrent weights are packed into scratch, rnn_wpack); kept
 *                     so that the reserve layout (symjit/ops/rnn.py reserve_size) stays as it is.
 *                     Once: W_h2h packed per block of hidden units: the forward's
 *                     block [j0, j0+jn) holds (H, G*jn), W_h2h^T's columns g*H + j0.. of every
 *                     gate g side by side, so a step's recurrent product of a block is one
 *                     GEMM over contiguous weights; the backward repacks it as (G*H, jn) per
 *                     block, W_h2h's columns j0.. */
typedef struct {
    float *act, *hn, *hs, *cs, *wht;
} rnn_dir_ws;

/* The recurrent weights of one (layer, direction), per block of jb hidden units, as the B operand
 * of a step's product out (N, cols) = a (N, K) B (K, cols): forward K = H, cols = G*jn (gate g of
 * unit u in column g*jn + u: W_h2h[g*H + j0 + u][k]), backward K = G*H, cols = jn (W_h2h[k][j0 + u]).
 * On the AVX-512 tiles (pw > 0) each block is stored in panels of pw columns, B(k, c) at
 * blk[(c / pw) * K * pw + k * pw + c % pw], zero-padded to whole panels, so a step streams each
 * panel contiguously (row-major blocks have a power-of-two row pitch for the usual sizes, whose
 * rows then share a few L1 sets: the step products ran at a third of the large GEMMs' rate);
 * elsewhere row-major (k * cols + c). Block b starts at b * blk_floats. */
typedef struct {
    int backward;
    int shape;              /* the tile shape (pw > 0) */
    int64_t pw, K, g, blk_floats;
} rnn_wpack;

typedef struct {
    const symjit_rnn_desc *d;
    int64_t G, GH, jb, nblk;
    rnn_wpack wp;           /* the layout of the packed recurrent weights of this phase */
    const float *params;
    float *bias;            /* (D, G*H) the input projection's bias, per direction of the layer */
    float *layer_out;       /* (T, N, D*H) this layer's output (after its dropout mask) */
    float *outs;            /* with `keep`: every layer's output, 16-float aligned, in order */
    const float *layer_in;
    rnn_dir_ws dir[2];
    /* the step being run (forward: processing order; backward: reverse processing order) */
    int64_t step;
    /* backward */
    const float *dlayer;    /* (T, N, D*H) gradient of this layer's output */
    float *dgi[2], *dgh[2]; /* (T, N, G*H) gate gradients (dgh == dgi except gru) */
    float *dh[2], *dc[2];   /* (N, H) the carried state gradients */
    const float *dhy, *dcy; /* (L*D, N, H) or NULL */
    float *dh0, *dc0;
    int64_t layer;
} rnn_job;

/* time index and hidden-state slots of processing step s of direction k */
static inline int64_t rnn_time(const rnn_job *j, int64_t k, int64_t s) { return k == 0 ? s : j->d->seq - 1 - s; }
static inline int64_t rnn_prev_slot(int64_t k, int64_t t) { return k == 0 ? t : t + 1; }
static inline int64_t rnn_new_slot(int64_t k, int64_t t) { return k == 0 ? t + 1 : t; }

/* the layout of j's recurrent weights for the forward's or the backward's products (j->jb set) */
static rnn_wpack rnn_wpack_for(const rnn_job *j, int backward) {
    rnn_wpack wp;
    const int64_t g = backward ? 1 : j->G;
    wp.backward = backward;
    wp.K = backward ? j->GH : j->d->hidden; wp.g = g; wp.shape = 0; wp.pw = 0;
    if (native_on()) {
        wp.shape = mm_pick(j->d->batch, g * j->jb);
        wp.pw = mm_panel(wp.shape);
    }
    wp.blk_floats = wp.K * (wp.pw ? cdiv(g * j->jb, wp.pw) * wp.pw : g * j->jb);
    return wp;
}

/* floats of every block of one (layer, direction) in layout wp */
static int64_t rnn_wpack_floats(const rnn_job *j, const rnn_wpack *wp) { return j->nblk * wp->blk_floats; }

/* Pack W_h2h (G*H, H) into j->wp's layout (see rnn_wpack; backward: g == 1) at dst */
static void rnn_pack_blocks(const rnn_job *j, const float *w, float *dst) {
    const rnn_wpack *wp = &j->wp;
    const int64_t H = j->d->hidden, K = wp->K, pw = wp->pw, backward = wp->backward;
    for (int64_t j0 = 0; j0 < H; j0 += j->jb) {
        const int64_t jn = imin(j->jb, H - j0), cols = wp->g * jn, padded = pw ? cdiv(cols, pw) * pw : cols;
        float *blk = dst + (j0 / j->jb) * wp->blk_floats;
        for (int64_t c = 0; c < padded; c++) {
            float *col = pw ? blk + (c / pw) * K * pw + c % pw : blk + c;
            const int64_t step = pw ? pw : cols;
            if (c >= cols) {
                for (int64_t k = 0; k < K; k++) col[k * step] = 0.0f;
            } else if (backward) {                /* B(k, c) = W[k][j0 + c] */
                for (int64_t k = 0; k < K; k++) col[k * step] = w[k * H + j0 + c];
            } else {                              /* B(k, c) = W[(c / jn) * H + j0 + c % jn][k] */
                const float *row = w + ((c / jn) * H + j0 + c % jn) * H;
                for (int64_t k = 0; k < K; k++) col[k * step] = row[k];
            }
        }
    }
}

/* out (N, cols) = a (N, K; row pitch lda) times the block at blk (layout j->wp) */
static void rnn_block_product(const rnn_job *j, const float *blk, const float *a, int64_t lda, int64_t cols,
                              float *out) {
    const rnn_wpack *wp = &j->wp;
    const int64_t N = j->d->batch;
    if (!wp->pw) {
        gemm_rm(0, 0, N, cols, wp->K, a, lda, blk, cols, 0.0f, out, cols);
        return;
    }
    mm_t p;
    memset(&p, 0, sizeof p);
    p.K = wp->K;
    p.a = a; p.ask = 1; p.asr = lda;
    p.b = blk; p.bsk = wp->pw; p.bsp = wp->K * wp->pw; p.padded = 1;
    p.c = out; p.csr = cols; p.csj = 1;
    p.rows = N; p.cols = cols;
    mm_run(&p, wp->shape);
}

/* the block of the packed weights `w` holding unit j0 */
static inline const float *rnn_block(const rnn_job *j, const float *w, int64_t j0) {
    return w + (j0 / j->jb) * j->wp.blk_floats;
}

/* The gate math of step t for hidden units [j0, j0 + jn) of direction k: `z` (N, G*jn) holds
 * the recurrent products (gate g in columns g*jn..), turned in place into the gates. */
NN_CLONES
static void rnn_fwd_units(const rnn_job *j, int64_t k, int64_t t, int64_t j0, int64_t jn, float *z) {
    const symjit_rnn_desc *d = j->d;
    const int64_t N = d->batch, H = d->hidden, GH = j->GH, G = j->G, DH = d->dirs * H;
    const rnn_dir_ws *w = &j->dir[k];
    const float *bh = j->params + rnn_param_offsets(d, j->layer, k).bh;
    const float *hprev = w->hs + rnn_prev_slot(k, t) * N * H;
    float *hnew = w->hs + rnn_new_slot(k, t) * N * H;
    float *y = j->layer_out + t * N * DH + k * H;
    for (int64_t n = 0; n < N; n++) {
        float *a = w->act + (t * N + n) * GH + j0;
        float *r = z + n * G * jn;
        float *hn = hnew + n * H + j0, *out = y + n * DH + j0;
        float *aux = w->hn + (t * N + n) * H + j0;   /* lstm tanh(c_t), gru W_hn h + b_hn */
        if (d->mode == SYMJIT_RNN_LSTM) {
            const float *cp = w->cs + rnn_prev_slot(k, t) * N * H + n * H + j0;
            float *cn = w->cs + rnn_new_slot(k, t) * N * H + n * H + j0;
            for (int64_t g = 0; g < 4; g++)
                for (int64_t u = 0; u < jn; u++) r[g * jn + u] += a[g * H + u];
            rnn_sigmoid_n(r, 2 * jn);
            rnn_tanh_n(r + 2 * jn, jn);
            rnn_sigmoid_n(r + 3 * jn, jn);
            for (int64_t u = 0; u < jn; u++) aux[u] = cn[u] = r[jn + u] * cp[u] + r[u] * r[2 * jn + u];
            rnn_tanh_n(aux, jn);
            for (int64_t u = 0; u < jn; u++) hn[u] = out[u] = r[3 * jn + u] * aux[u];
            for (int64_t g = 0; g < 4; g++) memcpy(a + g * H, r + g * jn, (size_t)jn * sizeof(float));
        } else if (d->mode == SYMJIT_RNN_GRU) {
            const float *hp = hprev + n * H + j0, *bn = bh + 2 * H + j0;
            for (int64_t u = 0; u < 2 * jn; u++) r[u] += a[(u / jn) * H + u % jn];
            rnn_sigmoid_n(r, 2 * jn);
            for (int64_t u = 0; u < jn; u++) {
                aux[u] = r[2 * jn + u] + bn[u];
                r[2 * jn + u] = a[2 * H + u] + r[u] * aux[u];
            }
            rnn_tanh_n(r + 2 * jn, jn);
            for (int64_t u = 0; u < jn; u++) hn[u] = out[u] = (1.0f - r[jn + u]) * r[2 * jn + u] + r[jn + u] * hp[u];
            for (int64_t g = 0; g < 3; g++) memcpy(a + g * H, r + g * jn, (size_t)jn * sizeof(float));
        } else {
            for (int64_t u = 0; u < jn; u++) r[u] += a[u];
            if (d->mode == SYMJIT_RNN_RELU)
                for (int64_t u = 0; u < jn; u++) r[u] = r[u] > 0.0f ? r[u] : 0.0f;
            else
                rnn_tanh_n(r, jn);
            memcpy(hn, r, (size_t)jn * sizeof(float));
            memcpy(out, r, (size_t)jn * sizeof(float));
        }
    }
}

static void rnn_fwd_step_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    rnn_job *j = (rnn_job *)argv[0];
    const int64_t H = j->d->hidden, N = j->d->batch;
    for (int64_t task = begin; task < end; task++) {
        int64_t k = task / j->nblk, j0 = (task % j->nblk) * j->jb, jn = imin(j->jb, H - j0);
        int64_t t = rnn_time(j, k, j->step);
        float *gh = scratch(RNN_SLOT_TASK, (size_t)(N * j->G * jn));
        if (!gh) return;
        rnn_block_product(j, rnn_block(j, j->dir[k].wht, j0), j->dir[k].hs + rnn_prev_slot(k, t) * N * H, H,
                          j->G * jn, gh);
        rnn_fwd_units(j, k, t, j0, jn, gh);
    }
}

/* hidden units per task: about two tasks per thread over the directions, whole 16-unit vectors */
static void rnn_split(rnn_job *j) {
    const int64_t H = j->d->hidden;
    int64_t threads = symjit_get_num_threads();
    double flops = 2.0 * (double)j->d->batch * (double)H * (double)j->GH * (double)j->d->dirs;
    int64_t want = flops < 2e5 ? 1 : cdiv(2 * threads, j->d->dirs);
    int64_t jb = cdiv(H, imax(1, want));
    if (jb < H) jb = imin(H, cdiv(jb, 16) * 16);
    j->jb = jb;
    j->nblk = cdiv(H, jb);
}

static void rnn_gemm(int64_t m, int64_t n, int64_t k, int ta, int tb, const float *A, const float *B,
                     const float *bias, float *C) {
    symjit_gemm_desc g;
    memset(&g, 0, sizeof g);
    g.batch = 1; g.m = m; g.n = n; g.k = k; g.trans_a = ta; g.trans_b = tb;
    g.stride_c = m * n;
    g.bias_mode = bias ? SYMJIT_BIAS_PER_COLUMN : SYMJIT_BIAS_NONE;
    symjit_nn_gemm(&g, A, B, bias, C, NULL, NULL);
}

/* the forward of one layer: its input projection, W_h2h^T, then every step */
static void rnn_layer_forward(rnn_job *j, const float *h0, const float *c0) {
    const symjit_rnn_desc *d = j->d;
    const int64_t T = d->seq, N = d->batch, H = d->hidden, GH = j->GH, in = rnn_layer_input(d, j->layer);
    rnn_split(j);
    j->wp = rnn_wpack_for(j, 0);
    float *packed = scratch(RNN_SLOT_WEIGHTS, (size_t)(d->dirs * rnn_wpack_floats(j, &j->wp)));
    if (!packed) return;
    for (int64_t k = 0; k < d->dirs; k++) {
        rnn_offsets o = rnn_param_offsets(d, j->layer, k);
        rnn_dir_ws *w = &j->dir[k];
        const float *bi = j->params + o.bi, *bh = j->params + o.bh, *wh = j->params + o.wh;
        float *bias = j->bias + k * GH;
        for (int64_t c = 0; c < GH; c++)   /* gru's b_hn stays inside r * (...) */
            bias[c] = bi[c] + (d->mode == SYMJIT_RNN_GRU && c >= 2 * H ? 0.0f : bh[c]);
        w->wht = packed + k * rnn_wpack_floats(j, &j->wp);
        rnn_pack_blocks(j, wh, w->wht);
        int64_t idx = j->layer * d->dirs + k;
        float *first = w->hs + rnn_prev_slot(k, rnn_time(j, k, 0)) * N * H;
        memcpy(first, h0 + idx * N * H, (size_t)(N * H) * sizeof(float));
        if (d->mode == SYMJIT_RNN_LSTM) {
            float *cfirst = w->cs + rnn_prev_slot(k, rnn_time(j, k, 0)) * N * H;
            if (c0) memcpy(cfirst, c0 + idx * N * H, (size_t)(N * H) * sizeof(float));
            else memset(cfirst, 0, (size_t)(N * H) * sizeof(float));
        }
        rnn_gemm(T * N, GH, in, 0, 1, j->layer_in, j->params + o.wi, bias, w->act);
    }
    void *argv[1] = {j};
    int64_t tasks = d->dirs * j->nblk;
    for (int64_t s = 0; s < T; s++) {
        j->step = s;
        symjit_parallel_for(rnn_fwd_step_task, tasks, j->nblk == 1 ? tasks : 1, argv);
    }
}

/* Workspace sizes (floats) of one direction of a layer, and of the whole call */
static int64_t rnn_dir_floats(const symjit_rnn_desc *d) {
    const int64_t T = d->seq, N = d->batch, H = d->hidden, GH = rnn_gate_count(d->mode) * H;
    return cdiv(T * N * GH, 16) * 16 + cdiv(T * N * H, 16) * 16 + 2 * cdiv((T + 1) * N * H, 16) * 16
           + cdiv(H * GH, 16) * 16;
}

static void rnn_dir_carve(const symjit_rnn_desc *d, float *base, rnn_dir_ws *w) {
    const int64_t T = d->seq, N = d->batch, H = d->hidden, GH = rnn_gate_count(d->mode) * H;
    w->act = base; base += cdiv(T * N * GH, 16) * 16;
    w->hn = base; base += cdiv(T * N * H, 16) * 16;
    w->hs = base; base += cdiv((T + 1) * N * H, 16) * 16;
    w->cs = base; base += cdiv((T + 1) * N * H, 16) * 16;
    w->wht = base;
}

static void rnn_apply_mask(float *x, const float *mask, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= mask[i];
}

/* floats of the traces a training forward keeps (rnn_forward's `traces`): every layer's output,
 * the projection biases of one layer, every (layer, direction)'s workspace */
static int64_t rnn_trace_floats(const symjit_rnn_desc *d) {
    const int64_t GH = rnn_gate_count(d->mode) * d->hidden, L = d->layers, D = d->dirs;
    return L * cdiv(d->seq * d->batch * D * d->hidden, 16) * 16 + cdiv(D * GH, 16) * 16 + L * D * rnn_dir_floats(d);
}

/* The reserve output (symjit_rnn_desc.reserve floats): a header of RNN_RESERVE_HEADER floats,
 * int64 words [RNN_RESERVE_MAGIC, mode, seq, batch, input, hidden, layers, dirs], then the
 * traces. The op's numpy reference leaves it zero (no magic): its backward then recomputes. */
#define RNN_RESERVE_HEADER 16
#define RNN_RESERVE_MAGIC 0x31565345524E4E52LL   /* "RNNRESV1" */

static int64_t rnn_reserve_floats(const symjit_rnn_desc *d) { return RNN_RESERVE_HEADER + rnn_trace_floats(d); }

static void rnn_reserve_header(const symjit_rnn_desc *d, int64_t *h) {
    memset(h, 0, RNN_RESERVE_HEADER * sizeof(float));
    h[0] = RNN_RESERVE_MAGIC; h[1] = d->mode; h[2] = d->seq; h[3] = d->batch; h[4] = d->input;
    h[5] = d->hidden; h[6] = d->layers; h[7] = d->dirs;
}

/* whether `reserve` holds the traces of a forward of this geometry */
static int rnn_reserve_valid(const symjit_rnn_desc *d, const float *reserve) {
    if (!reserve || d->reserve != rnn_reserve_floats(d)) return 0;
    int64_t want[RNN_RESERVE_HEADER / 2], got[RNN_RESERVE_HEADER / 2];
    rnn_reserve_header(d, want);
    memcpy(got, reserve, sizeof got);
    return memcmp(want, got, sizeof got) == 0;
}

/* j's fields over traces laid out as [layer outputs L x (T, N, D*H)] [bias D*G*H]
 * [L x D direction workspaces] */
static void rnn_attach(const symjit_rnn_desc *d, const float *params, float *traces, rnn_job *j) {
    const int64_t GH = rnn_gate_count(d->mode) * d->hidden;
    memset(j, 0, sizeof *j);
    j->d = d; j->G = rnn_gate_count(d->mode); j->GH = GH; j->params = params;
    j->outs = traces;
    j->bias = traces + d->layers * cdiv(d->seq * d->batch * d->dirs * d->hidden, 16) * 16;
}

static float *rnn_dir_base(const rnn_job *j, int64_t l, int64_t k) {
    return j->bias + cdiv(j->d->dirs * j->GH, 16) * 16 + (l * j->d->dirs + k) * rnn_dir_floats(j->d);
}

/* The whole forward. `traces` (rnn_trace_floats): keep every layer's traces there for the
 * backward (y may then be NULL); NULL: inference in the calling thread's scratch, two layer
 * outputs and one layer's directions. Returns 0 when out of memory. */
static int rnn_forward(const symjit_rnn_desc *d, const float *x, const float *params, const float *h0,
                       const float *c0, const float *masks, float *y, float *hy, float *cy, float *traces,
                       rnn_job *j) {
    const int64_t T = d->seq, N = d->batch, H = d->hidden, L = d->layers, D = d->dirs;
    const int64_t GH = rnn_gate_count(d->mode) * H, DH = D * H, out_sz = cdiv(T * N * DH, 16) * 16;
    const int keep = traces != NULL;
    float *ws = traces;
    if (!keep) {   /* [two layer outputs] [bias] [one layer's directions] */
        ws = scratch(RNN_SLOT_WORK, (size_t)(2 * out_sz + cdiv(D * GH, 16) * 16 + D * rnn_dir_floats(d)));
        if (!ws) return 0;
    }
    rnn_attach(d, params, ws, j);
    if (!keep) j->bias = ws + 2 * out_sz;
    const float *layer_in = x;
    for (int64_t l = 0; l < L; l++) {
        j->layer = l;
        j->layer_in = layer_in;
        float *lout = keep ? ws + l * out_sz : (l == L - 1 ? y : ws + (l % 2) * out_sz);
        j->layer_out = lout;
        for (int64_t k = 0; k < D; k++) {
            rnn_dir_carve(d, rnn_dir_base(j, keep ? l : 0, k), &j->dir[k]);
            if (keep) memset(j->dir[k].wht, 0, (size_t)(H * GH) * sizeof(float));   /* unused trace slot */
        }
        rnn_layer_forward(j, h0, c0);
        for (int64_t k = 0; k < D; k++) {
            int64_t idx = l * D + k;
            const rnn_dir_ws *w = &j->dir[k];
            int64_t last = rnn_new_slot(k, rnn_time(j, k, T - 1));
            if (hy) memcpy(hy + idx * N * H, w->hs + last * N * H, (size_t)(N * H) * sizeof(float));
            if (cy && d->mode == SYMJIT_RNN_LSTM)
                memcpy(cy + idx * N * H, w->cs + last * N * H, (size_t)(N * H) * sizeof(float));
        }
        if (l < L - 1 && masks) rnn_apply_mask(lout, masks + l * T * N * DH, T * N * DH);
        layer_in = lout;
    }
    if (keep && y) memcpy(y, ws + (L - 1) * out_sz, (size_t)(T * N * DH) * sizeof(float));
    if (cy && d->mode != SYMJIT_RNN_LSTM) memset(cy, 0, (size_t)(L * D * N * H) * sizeof(float));
    return 1;
}

NN_API void symjit_nn_rnn(const symjit_rnn_desc *d, const float *x, const float *params, const float *h0,
                          const float *c0, const float *masks, float *y, float *hy, float *cy, float *reserve) {
    rnn_job j;
    if (reserve && d->reserve != rnn_reserve_floats(d)) {
        symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT, "RNN: reserve of %lld floats, expected %lld",
                         (long long)d->reserve, (long long)rnn_reserve_floats(d));
        return;
    }
    if (!rnn_forward(d, x, params, h0, c0, masks, y, hy, cy, reserve ? reserve + RNN_RESERVE_HEADER : NULL, &j))
        return;
    if (reserve) rnn_reserve_header(d, (int64_t *)reserve);
}

/* ---- backward ---------------------------------------------------------------------------- */

NN_CLONES
static void rnn_bwd_units(const rnn_job *j, int64_t k, int64_t t, int64_t j0, int64_t jn, float *dh) {
    /* dh (N, jn): on entry the gradient reaching h_t from later steps (and the output above),
     * on exit unchanged; writes the gate gradients of step t and the carried dc / dh */
    const symjit_rnn_desc *d = j->d;
    const int64_t N = d->batch, H = d->hidden, GH = j->GH;
    const rnn_dir_ws *w = &j->dir[k];
    for (int64_t n = 0; n < N; n++) {
        const float *dhn = dh + n * jn;
        float *gi = j->dgi[k] + (t * N + n) * GH + j0, *gh = j->dgh[k] + (t * N + n) * GH + j0;
        float *carry = j->dh[k] + n * H + j0;
        if (d->mode == SYMJIT_RNN_LSTM) {
            const float *a = w->act + (t * N + n) * GH + j0;
            const float *cp = w->cs + rnn_prev_slot(k, t) * N * H + n * H + j0;
            const float *tcn = w->hn + (t * N + n) * H + j0;   /* tanh(c_t) */
            float *dc = j->dc[k] + n * H + j0;
            for (int64_t u = 0; u < jn; u++) {
                float i = a[u], f = a[H + u], g = a[2 * H + u], o = a[3 * H + u];
                float tc = tcn[u];
                float dho = dhn[u];
                float dct = dc[u] + dho * o * (1.0f - tc * tc);
                gi[u] = dct * g * i * (1.0f - i);
                gi[H + u] = dct * cp[u] * f * (1.0f - f);
                gi[2 * H + u] = dct * i * (1.0f - g * g);
                gi[3 * H + u] = dho * tc * o * (1.0f - o);
                dc[u] = dct * f;
            }
        } else if (d->mode == SYMJIT_RNN_GRU) {
            const float *a = w->act + (t * N + n) * GH + j0;
            const float *hh = w->hn + (t * N + n) * H + j0;
            const float *hp = w->hs + rnn_prev_slot(k, t) * N * H + n * H + j0;
            for (int64_t u = 0; u < jn; u++) {
                float r = a[u], z = a[H + u], nn = a[2 * H + u], dho = dhn[u];
                float dn = dho * (1.0f - z) * (1.0f - nn * nn);
                float dz = dho * (hp[u] - nn) * z * (1.0f - z);
                float dr = dn * hh[u] * r * (1.0f - r);
                gi[u] = gh[u] = dr;
                gi[H + u] = gh[H + u] = dz;
                gi[2 * H + u] = dn;
                gh[2 * H + u] = dn * r;
                carry[u] = dho * z;   /* the direct path h_{t-1} -> h_t */
            }
        } else {
            const float *hn = w->hs + rnn_new_slot(k, t) * N * H + n * H + j0;
            int relu = d->mode == SYMJIT_RNN_RELU;
            for (int64_t u = 0; u < jn; u++)
                gi[u] = dhn[u] * (relu ? (hn[u] > 0.0f ? 1.0f : 0.0f) : 1.0f - hn[u] * hn[u]);
        }
    }
}

/* dh (N, jn) = the gradient reaching the block's units from the later steps, at backward step b
 * (processing step T-1-b; b == T: the initial state): from processing step T-b's gate gradients
 * (dG W_h2h, plus gru's direct path), or dhy at b == 0 */
static void rnn_bwd_incoming(const rnn_job *j, int64_t k, int64_t b, int64_t j0, int64_t jn, float *dh) {
    const symjit_rnn_desc *d = j->d;
    const int64_t N = d->batch, H = d->hidden, GH = j->GH;
    int64_t idx = j->layer * d->dirs + k;
    if (b == 0) {
        for (int64_t n = 0; n < N; n++)
            for (int64_t u = 0; u < jn; u++) dh[n * jn + u] = j->dhy ? j->dhy[(idx * N + n) * H + j0 + u] : 0.0f;
        return;
    }
    int64_t tp = rnn_time(j, k, d->seq - b);
    rnn_block_product(j, rnn_block(j, j->dir[k].wht, j0), j->dgh[k] + tp * N * GH, GH, jn, dh);
    if (d->mode == SYMJIT_RNN_GRU)
        for (int64_t n = 0; n < N; n++)
            for (int64_t u = 0; u < jn; u++) dh[n * jn + u] += j->dh[k][n * H + j0 + u];
}

static void rnn_bwd_step_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    rnn_job *j = (rnn_job *)argv[0];
    const symjit_rnn_desc *d = j->d;
    const int64_t H = d->hidden, N = d->batch, T = d->seq, DH = d->dirs * H;
    for (int64_t task = begin; task < end; task++) {
        int64_t k = task / j->nblk, j0 = (task % j->nblk) * j->jb, jn = imin(j->jb, H - j0);
        float *dh = scratch(RNN_SLOT_TASK, (size_t)(N * jn));
        if (!dh) return;
        rnn_bwd_incoming(j, k, j->step, j0, jn, dh);
        if (j->step == T) {   /* past the last step: the initial state's gradient */
            int64_t idx = j->layer * d->dirs + k;
            for (int64_t n = 0; n < N; n++) {
                memcpy(j->dh0 + (idx * N + n) * H + j0, dh + n * jn, (size_t)jn * sizeof(float));
                if (d->mode == SYMJIT_RNN_LSTM && j->dc0)
                    memcpy(j->dc0 + (idx * N + n) * H + j0, j->dc[k] + n * H + j0, (size_t)jn * sizeof(float));
            }
            continue;
        }
        int64_t t = rnn_time(j, k, T - 1 - j->step);
        for (int64_t n = 0; n < N; n++)
            for (int64_t u = 0; u < jn; u++) dh[n * jn + u] += j->dlayer[(t * N + n) * DH + k * H + j0 + u];
        rnn_bwd_units(j, k, t, j0, jn, dh);
    }
}

/* dst (cols, rows) = src (rows, cols)^T, in 16 x 16 tiles split by column blocks over the pool */
typedef struct {
    const float *src;
    float *dst;
    int64_t rows, cols;
} rnn_transpose_job;

static void rnn_transpose_task(int64_t begin, int64_t end, void **argv) {
    rnn_transpose_job *tj = (rnn_transpose_job *)argv[0];
    const int64_t R = tj->rows, C = tj->cols;
    for (int64_t c0 = begin * 16; c0 < imin(end * 16, C); c0 += 16)
        for (int64_t r0 = 0; r0 < R; r0 += 16)
            for (int64_t c = c0; c < imin(c0 + 16, C); c++)
                for (int64_t r = r0; r < imin(r0 + 16, R); r++) tj->dst[c * R + r] = tj->src[r * C + c];
}

static void rnn_transpose(const float *src, int64_t rows, int64_t cols, float *dst) {
    rnn_transpose_job tj = {src, dst, rows, cols};
    void *argv[1] = {&tj};
    symjit_parallel_for(rnn_transpose_task, cdiv(cols, 16), 4, argv);
}

/* column sums of x (rows, cols) into out (cols), split by columns over the pool */
typedef struct {
    const float *x;
    float *out;
    int64_t rows, cols;
} rnn_colsum_job;

static void rnn_colsum_task(int64_t begin, int64_t end, void **argv) {
    rnn_colsum_job *c = (rnn_colsum_job *)argv[0];
    int64_t c0 = begin * 64, c1 = imin(end * 64, c->cols);
    for (int64_t i = c0; i < c1; i++) c->out[i] = 0.0f;
    for (int64_t r = 0; r < c->rows; r++) {
        const float *row = c->x + r * c->cols;
        for (int64_t i = c0; i < c1; i++) c->out[i] += row[i];
    }
}

static void rnn_colsum(const float *x, int64_t rows, int64_t cols, float *out) {
    rnn_colsum_job c = {x, out, rows, cols};
    void *argv[1] = {&c};
    symjit_parallel_for(rnn_colsum_task, cdiv(cols, 64), 1, argv);
}

NN_API void symjit_nn_rnn_bwd(const symjit_rnn_desc *d, const float *x, const float *params, const float *h0,
                              const float *c0, const float *masks, const float *reserve, const float *dy,
                              const float *dhy, const float *dcy, float *dx, float *dparams, float *dh0, float *dc0) {
    const int64_t T = d->seq, N = d->batch, H = d->hidden, L = d->layers, D = d->dirs;
    const int64_t G = rnn_gate_count(d->mode), GH = G * H, DH = D * H;
    /* gradient buffers: per direction dgi, dgh (gru), dh, dc, W_h2h packed for the backward;
     * three (T, N, max(in, D*H)) buffers for the layer gradients, a gate gradient transposed
     * (the weight gradients dG^T X as GEMMs over row-major operands: ~2.5x faster than over
     * the transposed dG). Without a valid reserve the traces are recomputed first, into the
     * same scratch before them. */
    const int64_t gsz = cdiv(T * N * GH, 16) * 16, ssz = cdiv(N * H, 16) * 16;
    int64_t in_max = imax(d->input, DH), lsz = cdiv(T * N * in_max, 16) * 16;
    int64_t need = D * (gsz * (d->mode == SYMJIT_RNN_GRU ? 2 : 1) + 2 * ssz) + 3 * lsz + gsz;
    const int have = rnn_reserve_valid(d, reserve);
    const int64_t trace = have ? 0 : rnn_trace_floats(d);
    float *buf = scratch(RNN_SLOT_WORK, (size_t)(trace + need));
    if (!buf) return;
    rnn_job j;
    if (have) rnn_attach(d, params, (float *)reserve + RNN_RESERVE_HEADER, &j);   /* read only below */
    else if (!rnn_forward(d, x, params, h0, c0, masks, NULL, NULL, NULL, buf, &j)) return;
    float *g = buf + trace;
    float *p = g;
    for (int64_t k = 0; k < D; k++) {
        j.dgi[k] = p; p += gsz;
        if (d->mode == SYMJIT_RNN_GRU) { j.dgh[k] = p; p += gsz; } else j.dgh[k] = j.dgi[k];
        j.dh[k] = p; p += ssz;
        j.dc[k] = p; p += ssz;
    }
    float *dl_a = p, *dl_b = p + lsz, *dtmp = p + 2 * lsz, *dgt = p + 3 * lsz;
    const int64_t out_sz = cdiv(T * N * DH, 16) * 16;
    j.dhy = dhy; j.dh0 = dh0; j.dc0 = dc0;
    const float *dlayer = dy;
    for (int64_t l = L - 1; l >= 0; l--) {
        const int64_t in = rnn_layer_input(d, l);
        const float *layer_in = l == 0 ? x : j.outs + (l - 1) * out_sz;
        j.layer = l;
        j.dlayer = dlayer;
        for (int64_t k = 0; k < D; k++) {
            rnn_dir_carve(d, rnn_dir_base(&j, l, k), &j.dir[k]);
            int64_t idx = l * D + k;
            if (dcy && d->mode == SYMJIT_RNN_LSTM) memcpy(j.dc[k], dcy + idx * N * H, (size_t)(N * H) * sizeof(float));
            else memset(j.dc[k], 0, (size_t)(N * H) * sizeof(float));
            memset(j.dh[k], 0, (size_t)(N * H) * sizeof(float));
        }
        rnn_split(&j);
        j.wp = rnn_wpack_for(&j, 1);
        float *packed = scratch(RNN_SLOT_WEIGHTS, (size_t)(D * rnn_wpack_floats(&j, &j.wp)));
        if (!packed) return;
        for (int64_t k = 0; k < D; k++) {
            j.dir[k].wht = packed + k * rnn_wpack_floats(&j, &j.wp);
            rnn_pack_blocks(&j, params + rnn_param_offsets(d, l, k).wh, j.dir[k].wht);
        }
        void *argv[1] = {&j};
        int64_t tasks = D * j.nblk;
        for (int64_t s = 0; s <= T; s++) {
            j.step = s;
            symjit_parallel_for(rnn_bwd_step_task, tasks, j.nblk == 1 ? tasks : 1, argv);
        }
        /* the layer's large products */
        float *dxl = l == 0 ? dx : (dlayer == dl_a ? dl_b : dl_a);
        for (int64_t k = 0; k < D; k++) {
            rnn_offsets o = rnn_param_offsets(d, l, k);
            rnn_transpose(j.dgi[k], T * N, GH, dgt);
            rnn_gemm(GH, in, T * N, 0, 0, dgt, layer_in, NULL, dparams + o.wi);
            const float *hprev = j.dir[k].hs + (k == 0 ? 0 : N * H);
            if (j.dgh[k] != j.dgi[k]) rnn_transpose(j.dgh[k], T * N, GH, dgt);
            rnn_gemm(GH, H, T * N, 0, 0, dgt, hprev, NULL, dparams + o.wh);
            rnn_colsum(j.dgi[k], T * N, GH, dparams + o.bi);
            rnn_colsum(j.dgh[k], T * N, GH, dparams + o.bh);
            rnn_gemm(T * N, in, GH, 0, 0, j.dgi[k], params + o.wi, NULL, k == 0 ? dxl : dtmp);
            if (k > 0)
                for (int64_t i = 0; i < T * N * in; i++) dxl[i] += dtmp[i];
        }
        if (l > 0 && masks) rnn_apply_mask(dxl, masks + (l - 1) * T * N * DH, T * N * DH);
        dlayer = dxl;
    }
}
