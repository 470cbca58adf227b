/* nn/gemm_packed.c -- GEMMs with a constant B packed at compile time (dense layers and `dot` with
 * bound weights at inference). Part of the kernel library: compiled only as part of
 * nnkernels.c (one translation unit), after nn/gemm.c whose tiles it drives.
 *
 * symjit_nn_gemm packs an operand on every call: for a dense layer with few rows (a batch of
 * 4..32) it packs the activations and stores C transposed, with most of each 16-lane panel
 * padding, and W re-read per call in its stored order. With W packed once into the column
 * panels of the tile shape chosen for (m, n), every call runs the row form straight away:
 * rows of A broadcast, W streamed panel by panel, C stored by rows with the bias and ReLU in
 * the stores (benchmarks/bench_small_models.py measures it against symjit_nn_gemm).
 * Layout of the packed B: panels of PW = gemm_packed_panel(m, n) columns,
 * Bp[(j / PW) * K * PW + k * PW + j % PW] = op(B)(k, j), zero-padded to whole panels. */

/* fewest rows packed: below, the dot-product GEMV (mm_gemv_nt) reads W once per row and wins */
#define GEMM_PACKED_MIN_M 4
/* bytes of a column block above which each panel is streamed once against all row tiles */
#define GEMM_PACKED_L2_BYTES (512 * 1024)

/* the tile shape of packed calls: the default choice, never the tuning override, so that the
 * packing made at compile time matches the run */
static int gemm_packed_shape(const symjit_gemm_desc *d) { return mm_pick_default(d->m, d->n); }

static int gemm_packed_applies(const symjit_gemm_desc *d) {
    return native_on() && d->batch == 1 && !d->trans_a && d->m >= GEMM_PACKED_MIN_M && d->n > 0 && d->k > 0;
}

NN_API int64_t symjit_nn_gemm_pack(const symjit_gemm_desc *d, const float *B, float *out) {
    if (!gemm_packed_applies(d)) return 0;
    const int64_t N = d->n, K = d->k, PW = mm_panel(gemm_packed_shape(d));
    if (out) {
        if (d->trans_b) mm_pack_panels(B, K, 1, N, K, PW, out);   /* B stored n x k */
        else mm_pack_panels(B, 1, N, N, K, PW, out);               /* B stored k x n */
    }
    return cdiv(N, PW) * PW * K;
}

typedef struct {
    const symjit_gemm_desc *d;
    const float *A, *Bp, *bias;
    float *C;
    symjit_kernel_fn epi;
    void **epi_args;
    int shape;
    int64_t rb, cb;     /* rows / columns per block (whole tiles / panels) */
} gemm_packed_job;

static void gemm_packed_task(int64_t begin, int64_t end, void **argv) {
    NN_FLUSH_DENORMALS;
    const gemm_packed_job *job = (const gemm_packed_job *)argv[0];
    const symjit_gemm_desc *d = job->d;
    const int64_t M = d->m, N = d->n, K = d->k, PW = mm_panel(job->shape), R = MM_SHAPES[job->shape].R;
    const int64_t tc = cdiv(N, job->cb);
    for (int64_t t = begin; t < end; t++) {
        const int64_t r0 = (t / tc) * job->rb, c0 = (t % tc) * job->cb;
        const int64_t rc = imin(job->rb, M - r0), cc = imin(job->cb, N - c0);
        mm_t p;
        memset(&p, 0, sizeof p);
        p.K = K;
        p.rows = rc;
        p.cols = cc;
        p.b = job->Bp + (c0 / PW) * K * PW;
        p.bsk = PW; p.bsp = K * PW; p.padded = 1;
        p.a = job->A + r0 * K; p.ask = 1; p.asr = K;
        p.c = job->C + r0 * N + c0; p.csr = N; p.csj = 1;
        if (d->bias_mode == SYMJIT_BIAS_PER_COLUMN) p.bias_j = job->bias + c0;
        else if (d->bias_mode == SYMJIT_BIAS_PER_ROW) p.bias_r = job->bias + r0;
        p.relu = epi_is_relu(job->epi);
        /* several row tiles over a block of B larger than L2: each panel once, all row tiles */
        p.panels_outer = rc > R && (double)K * (double)cc * sizeof(float) > GEMM_PACKED_L2_BYTES;
        if (!p.panels_outer) p.kcap = ngemm_kcap(&p, R);
        mm_run(&p, job->shape);
        if (job->epi && !p.relu) run_epilogue_rows(job->epi, job->epi_args, r0 * N + c0, rc, N, cc);
    }
}

NN_API void symjit_nn_gemm_packed(const symjit_gemm_desc *d, const float *A, const float *B, const float *Bp,
                                  const float *bias, float *C, symjit_kernel_fn epi, void **epi_args) {
    if (d->m <= 0 || d->n <= 0) return;
    if (!Bp || !gemm_packed_applies(d)) {   /* the tiles were switched off since packing */
        symjit_nn_gemm(d, A, B, bias, C, epi, epi_args);
        return;
    }
    gemm_packed_job job = {d, A, Bp, bias, C, epi, epi_args, gemm_packed_shape(d), 0, 0};
    const int64_t M = d->m, N = d->n, PW = mm_panel(job.shape), R = MM_SHAPES[job.shape].R;
    /* blocks: column panels first (each thread streams its own part of B), then row tiles */
    const int64_t want = tiles_want(2.0 * (double)M * (double)N * (double)d->k, symjit_get_num_threads());
    int64_t tc = imin(want, cdiv(N, PW));
    job.cb = cdiv(cdiv(N, tc), PW) * PW;
    tc = cdiv(N, job.cb);
    int64_t tr = tc < want ? imin(cdiv(want, tc), cdiv(M, R)) : 1;
    job.rb = cdiv(cdiv(M, tr), R) * R;
    tr = cdiv(M, job.rb);
    void *argv[1] = {&job};
    symjit_parallel_for(gemm_packed_task, tr * tc, 1, argv);
}
