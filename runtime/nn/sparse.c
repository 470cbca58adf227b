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
/* transpose (counting sort by column): A^T in CSR                                           */
/* ---------------------------------------------------------------------------------------- */

/* For A (rows x cols): indptr_t (cols + 1) of A^T, and for each entry of A^T in order, the
 * position `perm` of that entry in A's arrays and its column in A^T (`rows_t`, A's row).
 * Entries of one column of A keep A's row order, so the rows of A^T stay sorted. */
NN_API void symjit_nn_csr_transpose(int64_t rows, int64_t cols, const int64_t *indices, const int64_t *indptr,
                                    int64_t *indptr_t, int64_t *perm, int64_t *rows_t) {
    for (int64_t c = 0; c <= cols; c++) indptr_t[c] = 0;
    int64_t nnz = indptr[rows];
    for (int64_t p = 0; p < nnz; p++) indptr_t[indices[p] + 1]++;
    for (int64_t c = 0; c < cols; c++) indptr_t[c + 1] += indptr_t[c];
    int64_t *next = (int64_t *)malloc((size_t)imax(cols, 1) * sizeof(int64_t));
    if (!next) {
        symjit_set_error_str(SYMJIT_ERR_OUT_OF_MEMORY, "symjit_nn_csr_transpose: out of memory");
        return;
    }
    memcpy(next, indptr_t, (size_t)cols * sizeof(int64_t));
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t p = indptr[r]; p < indptr[r + 1]; p++) {
            int64_t q = next[indices[p]]++;
            perm[q] = p;
            rows_t[q] = r;
        }
    }
    free(next);
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

/* ---------------------------------------------------------------------------------------- */
/* dense x csr                                                                               */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    int64_t n, p, kind;   /* D: (m, n); A: (n, p) csr; out (m, p) */
    const void *dense;
    const void *data;
    const int64_t *indices, *indptr;
    void *out;
} dense_csr_job;

#define DENSE_CSR_BODY(T)                                                                      \
    do {                                                                                       \
        const T *restrict d = (const T *)job->dense;                                           \
        const T *restrict val = (const T *)job->data;                                          \
        const int64_t *restrict ind = job->indices, *restrict ptr = job->indptr;               \
        const int64_t n = job->n, p = job->p;                                                  \
        T *restrict out = (T *)job->out;                                                       \
        for (int64_t i = begin; i < end; i++) {                                                \
            T *restrict orow = out + i * p;                                                    \
            const T *restrict drow = d + i * n;                                                \
            for (int64_t j = 0; j < p; j++) orow[j] = 0;                                       \
            for (int64_t j = 0; j < n; j++) {                                                  \
                const T s = drow[j];                                                           \
                if (s == 0) continue;                                                          \
                const int64_t q1 = ptr[j + 1];                                                 \
                for (int64_t q = ptr[j]; q < q1; q++) orow[ind[q]] += s * val[q];              \
            }                                                                                  \
        }                                                                                      \
    } while (0)

static void dense_csr_task(int64_t begin, int64_t end, void **argv) {
    const dense_csr_job *job = (const dense_csr_job *)argv[0];
    if (job->kind == 0)
        DENSE_CSR_BODY(float);
    else
        DENSE_CSR_BODY(double);
}

/* out (m, p) = D (m, n) . A (n, p; csr); rows of D split over the thread pool */
NN_API void symjit_nn_dense_csr(int64_t m, int64_t n, int64_t p, int64_t kind, const void *dense, const void *data,
                                const int64_t *indices, const int64_t *indptr, void *out) {
    dense_csr_job job = {n, p, kind, dense, data, indices, indptr, out};
    void *argv[1] = {&job};
    int64_t nnz = n > 0 ? indptr[n] : 0;
    symjit_parallel_for(dense_csr_task, m, imax(1, 32768 / imax(1, nnz + n + p)), argv);
}
