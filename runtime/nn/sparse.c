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
                for (int64_t j = 0; j < k; j++) orow[j] += v * brow[j];                        \
            }                                                                                  \
        }                                                                                      \
    } while (0)

static void csr_dense_task(int64_t begin, int64_t end, void **argv) {
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
    int64_t rows, k, out_rows, kind;
    const void *data;
    const int64_t *indices, *indptr, *slot;   /* slot[c]: the output row of A's column c */
    const void *dense;   /* (rows, k) */
    void *out;           /* (out_rows, k) */
} csrt_dense_job;

#define CSRT_BLOCK 16   /* output columns per task */

#define CSRT_BODY(T)                                                                           \
    do {                                                                                       \
        const T *restrict val = (const T *)job->data;                                          \
        const T *restrict b = (const T *)job->dense;                                           \
        const int64_t *restrict ind = job->indices, *restrict ptr = job->indptr;               \
        const int64_t *restrict slot = job->slot;                                              \
        T *restrict out = (T *)job->out;                                                       \
        for (int64_t r = 0; r < job->out_rows; r++)                                            \
            for (int64_t j = j0; j < j1; j++) out[r * k + j] = 0;                              \
        for (int64_t r = 0; r < job->rows; r++) {                                              \
            const T *restrict brow = b + r * k;                                                \
            const int64_t p1 = ptr[r + 1];                                                     \
            for (int64_t p = ptr[r]; p < p1; p++) {                                            \
                const T v = val[p];                                                            \
                T *restrict orow = out + slot[ind[p]] * k;                                     \
                for (int64_t j = j0; j < j1; j++) orow[j] += v * brow[j];                      \
            }                                                                                  \
        }                                                                                      \
    } while (0)

static void csrt_dense_task(int64_t begin, int64_t end, void **argv) {
    const csrt_dense_job *job = (const csrt_dense_job *)argv[0];
    const int64_t k = job->k, j0 = begin * CSRT_BLOCK, j1 = imin(end * CSRT_BLOCK, k);
    if (job->kind == 0)
        CSRT_BODY(float);
    else
        CSRT_BODY(double);
}

/* out (out_rows, k) = A^T . B for A (rows, cols; csr), B (rows, k): row slot[c] of out holds
 * row c of A^T (slot maps every column of A that holds entries to a distinct output row). Each
 * task owns a block of CSRT_BLOCK output columns, so no two tasks write the same element. */
NN_API void symjit_nn_csrt_dense(int64_t rows, int64_t k, int64_t out_rows, int64_t kind, const void *data,
                                 const int64_t *indices, const int64_t *indptr, const int64_t *slot,
                                 const void *dense, void *out) {
    csrt_dense_job job = {rows, k, out_rows, kind, data, indices, indptr, slot, dense, out};
    void *argv[1] = {&job};
    symjit_parallel_for(csrt_dense_task, (k + CSRT_BLOCK - 1) / CSRT_BLOCK, 1, argv);
}
