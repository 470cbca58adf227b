/* nn/sparse.c -- products of compressed sparse row (CSR) matrices with dense matrices.
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit).
 *
 * A CSR matrix A (rows x cols) is (data, indices, indptr): row r holds data[p] at column
 * indices[p] for p in [indptr[r], indptr[r + 1]). Indices are int64 and valid (the Python side
 * validates them when the array is built). Values are float32 (kind 0) or float64 (kind 1);
 * dense operands and outputs are C-contiguous of the same kind. Work is proportional to the
 * stored entries, never to rows x cols. */

/* ---------------------------------------------------------------------------------------- */
/* csr x dense                                                                               */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    int64_t rows, k, kind;
    const void *data;
    const int64_t *indices, *indptr;
    const void *dense;   /* (cols, k) */
    void *out;           /* (rows, k) */
} csr_dense_job;

#define CSR_ROW_BODY(T)                                                                        \
    do {                                                                                       \
        const T *restrict val = (const T *)job->data;                                          \
        const T *restrict b = (const T *)job->dense;                                           \
        const int64_t *restrict ind = job->indices, *restrict ptr = job->indptr;               \
        T *restrict out = (T *)job->out;                                                       \
        for (int64_t r = begin; r < end; r++) {                                                \
            T *restrict orow = out + r * k;                                                    \
            for (int64_t j = 0; j < k; j++) orow[j] = 0;                                       \
            const int64_t p1 = ptr[r + 1];                                                     \
            for (int64_t p = ptr[r]; p < p1; p++) {                                            \
                const T v = val[p];                                                            \
                const T *restrict brow = b + ind[p] * k;                                       \
                _Pragma("GCC ivdep") for (int64_t j = 0; j < k; j++) orow[j] += v * brow[j];  \
            }                                                                                  \
        }                                                                                      \
    } while (0)

NN_CLONES static void csr_dense_task(int64_t begin, int64_t end, void **argv) {
    const csr_dense_job *job = (const csr_dense_job *)argv[0];
    const int64_t k = job->k;
    if (job->kind == 0)
        CSR_ROW_BODY(float);
    else
        CSR_ROW_BODY(double);
}

/* out (rows, k) = A (rows, cols; csr) . B (cols, k); rows split over the thread pool */
NN_API void symjit_nn_csr_dense(int64_t rows, int64_t k, int64_t kind, const void *data, const int64_t *indices,
                                const int64_t *indptr, const void *dense, void *out) {
    csr_dense_job job = {rows, k, kind, data, indices, indptr, dense, out};
    void *argv[1] = {&job};
    int64_t nnz = rows > 0 ? indptr[rows] : 0;
    /* about 32k multiply-adds per chunk */
    int64_t per_row = imax(1, (nnz / imax(rows, 1) + 1) * imax(k, 1));
    symjit_parallel_for(csr_dense_task, rows, imax(1, 32768 / per_row), argv);
}

/* ---------------------------------------------------------------------------------------- */
/* csr^T x dense                                                                             */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    int64_t rows, k, out_rows, kind, parts;
    const void *data;
    const int64_t *indices, *indptr, *slot;   /* slot[c]: the output row of A's column c */
    const void *dense;   /* (rows, k) */
    void *out;           /* (out_rows, k) */
    void *scratch;       /* (parts - 1, out_rows, k): the partial products of parts 1.. */
} csrt_dense_job;

#define CSRT_SCATTER_BODY(T)                                                                   \
    do {                                                                                       \
        const T *restrict val = (const T *)job->data;                                          \
        const T *restrict b = (const T *)job->dense;                                           \
        const int64_t *restrict ind = job->indices, *restrict ptr = job->indptr;               \
        const int64_t *restrict slot = job->slot;                                              \
        T *restrict acc = part == 0 ? (T *)job->out : (T *)job->scratch + (part - 1) * size;   \
        for (int64_t e = 0; e < size; e++) acc[e] = 0;                                         \
        for (int64_t r = r0; r < r1; r++) {                                                    \
            const T *restrict brow = b + r * k;                                                \
            for (int64_t p = ptr[r]; p < ptr[r + 1]; p++) {                                    \
                const T v = val[p];                                                            \
                T *restrict orow = acc + slot[ind[p]] * k;                                     \
                _Pragma("GCC ivdep") for (int64_t j = 0; j < k; j++) orow[j] += v * brow[j];  \
            }                                                                                  \
        }                                                                                      \
    } while (0)

/* part `part` of the rows of A scattered into its own accumulator (out for part 0) */
NN_CLONES static void csrt_scatter_task(int64_t begin, int64_t end, void **argv) {
    const csrt_dense_job *job = (const csrt_dense_job *)argv[0];
    const int64_t k = job->k, size = job->out_rows * k;
    for (int64_t part = begin; part < end; part++) {
        const int64_t r0 = job->rows * part / job->parts, r1 = job->rows * (part + 1) / job->parts;
        if (job->kind == 0)
            CSRT_SCATTER_BODY(float);
        else
            CSRT_SCATTER_BODY(double);
    }
}

#define CSRT_REDUCE_BODY(T)                                                                    \
    do {                                                                                       \
        T *restrict out = (T *)job->out;                                                       \
        const T *restrict scratch = (const T *)job->scratch;                                   \
        for (int64_t i = 0; i < job->parts - 1; i++) {                                         \
            const T *restrict src = scratch + i * size;                                        \
            for (int64_t e = e0; e < e1; e++) out[e] += src[e];                                \
        }                                                                                      \
    } while (0)

/* out[rows begin..end) += the partial products of parts 1.. (in part order) */
NN_CLONES static void csrt_reduce_task(int64_t begin, int64_t end, void **argv) {
    const csrt_dense_job *job = (const csrt_dense_job *)argv[0];
    const int64_t size = job->out_rows * job->k, e0 = begin * job->k, e1 = end * job->k;
    if (job->kind == 0)
        CSRT_REDUCE_BODY(float);
    else
        CSRT_REDUCE_BODY(double);
}

/* out (out_rows, k) = A^T . B for A (rows, cols; csr), B (rows, k): row slot[c] of out holds
 * row c of A^T (slot maps every column of A that holds entries to a distinct output row).
 * The rows of A are split into `parts` contiguous ranges; each range scatters its entries'
 * products (v * row r of B into the output row of its column) into its own accumulator, in
 * parallel, and the accumulators are then summed in part order (so results depend on `parts`,
 * never on the thread count). scratch: (parts - 1) * out_rows * k values. */
NN_API void symjit_nn_csrt_dense(int64_t rows, int64_t k, int64_t out_rows, int64_t kind, const void *data,
                                 const int64_t *indices, const int64_t *indptr, const int64_t *slot,
                                 const void *dense, void *out, int64_t parts, void *scratch) {
    csrt_dense_job job = {rows, k, out_rows, kind, imax(parts, 1), data, indices, indptr, slot, dense, out,
                          scratch};
    void *argv[1] = {&job};
    symjit_parallel_for(csrt_scatter_task, job.parts, 1, argv);
    if (job.parts > 1)
        symjit_parallel_for(csrt_reduce_task, out_rows, imax(1, 16384 / imax(k * (job.parts - 1), 1)), argv);
}
