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
        const T *val = (const T *)job->data;                                                   \
        const T *b = (const T *)job->dense;                                                    \
        T *out = (T *)job->out;                                                                \
        for (int64_t r = begin; r < end; r++) {                                                \
            T *orow = out + r * k;                                                             \
            for (int64_t j = 0; j < k; j++) orow[j] = 0;                                       \
            for (int64_t p = job->indptr[r]; p < job->indptr[r + 1]; p++) {                    \
                const T v = val[p];                                                            \
                const T *brow = b + job->indices[p] * k;                                       \
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
        const T *d = (const T *)job->dense;                                                    \
        const T *val = (const T *)job->data;                                                   \
        T *out = (T *)job->out;                                                                \
        for (int64_t i = begin; i < end; i++) {                                                \
            T *orow = out + i * job->p;                                                        \
            const T *drow = d + i * job->n;                                                    \
            for (int64_t j = 0; j < job->p; j++) orow[j] = 0;                                  \
            for (int64_t j = 0; j < job->n; j++) {                                             \
                const T s = drow[j];                                                           \
                if (s == 0) continue;                                                          \
                for (int64_t q = job->indptr[j]; q < job->indptr[j + 1]; q++)                  \
                    orow[job->indices[q]] += s * val[q];                                       \
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
