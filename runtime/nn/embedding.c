/* nn/embedding.c -- Embedding gathers and their gradient.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

/* ---------------------------------------------------------------------------------------- */
/* Embedding                                                                                 */
/* ---------------------------------------------------------------------------------------- */

/* index kinds: 0 float32, 1 float64, 2 int32, 3 int64; truncated toward zero, NaN -> 0,
 * clipped to [0, rows - 1] */
static int64_t embed_index(const void *idx, int64_t kind, int64_t i, int64_t rows) {
    double v;
    switch (kind) {
    case 0: v = ((const float *)idx)[i]; break;
    case 1: v = ((const double *)idx)[i]; break;
    case 2: return imin(imax(((const int32_t *)idx)[i], 0), rows - 1);
    default: return imin(imax(((const int64_t *)idx)[i], 0), rows - 1);
    }
    if (v != v) return 0;
    v = trunc(v);
    if (v <= 0.0) return 0;
    if (v >= (double)(rows - 1)) return rows - 1;
    return (int64_t)v;
}

typedef struct {
    int64_t n, rows, dim, kind;
    const void *idx;
    const float *src;
    float *dst;
} embed_job;

static void embed_task(int64_t begin, int64_t end, void **argv) {
    embed_job *job = (embed_job *)argv[0];
    for (int64_t i = begin; i < end; i++) {
        int64_t r = embed_index(job->idx, job->kind, i, job->rows);
        memcpy(job->dst + i * job->dim, job->src + r * job->dim, (size_t)job->dim * sizeof(float));
    }
}

/* out[i, :] = weight[clip(trunc(idx[i])), :] for n indices */
NN_API void symjit_nn_embedding(int64_t n, int64_t rows, int64_t dim, int64_t kind, const void *idx,
                                const float *weight, float *out) {
    embed_job job = {n, rows, dim, kind, idx, weight, out};
    void *argv[1] = {&job};
    symjit_parallel_for(embed_task, n, imax(1, 16384 / imax(dim, 1)), argv);
}

/* dw (rows, dim) = scatter-add of dy rows at the indices; each task owns a column range */
static void embed_bwd_task(int64_t begin, int64_t end, void **argv) {
    embed_job *job = (embed_job *)argv[0];
    int64_t j0 = begin * 64, j1 = imin(end * 64, job->dim);
    for (int64_t r = 0; r < job->rows; r++) memset(job->dst + r * job->dim + j0, 0, (size_t)(j1 - j0) * sizeof(float));
    for (int64_t i = 0; i < job->n; i++) {
        int64_t r = embed_index(job->idx, job->kind, i, job->rows);
        float *drow = job->dst + r * job->dim;
        const float *srow = job->src + i * job->dim;
        for (int64_t j = j0; j < j1; j++) drow[j] += srow[j];
    }
}

NN_API void symjit_nn_embedding_bwd(int64_t n, int64_t rows, int64_t dim, int64_t kind, const void *idx,
                                    const float *dy, float *dw) {
    embed_job job = {n, rows, dim, kind, idx, dy, dw};
    void *argv[1] = {&job};
    symjit_parallel_for(embed_bwd_task, cdiv(dim, 64), imax(1, 4096 / imax(n, 1)), argv);
}
