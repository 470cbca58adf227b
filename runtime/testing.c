/*
 * testing.c -- tiny kernels and one entry point compiled into the runtime so the tests can drive
 * the thread pool and the entry ABI from Python without a code generator. They follow the same
 * ABI as generated code (symjit_runtime.h) and are not used by symjit itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

#include "symjit_internal.h"

static int64_t thread_id(void) {
#ifdef __linux__
    return (int64_t)syscall(SYS_gettid);
#else
    return (int64_t)(uintptr_t)&errno;
#endif
}

/* args[0]: int32 counts[n], incremented atomically for every index in [begin, end)
 * args[1]: int64 tids[n] or NULL, receives the id of the thread that ran the index
 * args[2]: int64 *sleep_us or NULL, sleep this long per chunk (to force overlap) */
void symjit__test_kernel_count(int64_t begin, int64_t end, void **args) {
    _Atomic int32_t *counts = (_Atomic int32_t *)args[0];
    int64_t *tids = (int64_t *)args[1];
    const int64_t *sleep_us = (const int64_t *)args[2];
    int64_t tid = thread_id();
    if (sleep_us != NULL && *sleep_us > 0) {
        struct timespec ts = {(time_t)(*sleep_us / 1000000), (long)(*sleep_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    for (int64_t i = begin; i < end; i++) {
        atomic_fetch_add(&counts[i], 1);
        if (tids != NULL) tids[i] = tid;
    }
}

/* args as for the count kernel, plus args[3]: int32 codes[n] receiving, at each chunk's `begin`,
 * the code returned by a nested parallel_for over the chunk (which must run inline). */
void symjit__test_kernel_nested(int64_t begin, int64_t end, void **args) {
    void *inner[3];
    int32_t *codes = (int32_t *)args[3];
    inner[0] = (int32_t *)args[0] + begin;
    inner[1] = args[1] != NULL ? (void *)((int64_t *)args[1] + begin) : NULL;
    inner[2] = args[2];
    codes[begin] = symjit_parallel_for(symjit__test_kernel_count, end - begin, 1, inner);
}

/* args[0]: int64 *bad_index; the chunk containing it reports SYMJIT_ERR_INDEX.
 * args[1]: int32 counts[n] or NULL, incremented (non-atomically, indices are disjoint). */
void symjit__test_kernel_fail(int64_t begin, int64_t end, void **args) {
    int64_t bad = *(const int64_t *)args[0];
    int32_t *counts = (int32_t *)args[1];
    if (counts != NULL)
        for (int64_t i = begin; i < end; i++) counts[i] += 1;
    if (bad >= begin && bad < end)
        symjit_set_error(SYMJIT_ERR_INDEX, "test kernel: index %lld is out of range", (long long)bad);
}

/* Does nothing: measures the pool's dispatch cost. */
void symjit__test_kernel_noop(int64_t begin, int64_t end, void **args) {
    (void)begin;
    (void)end;
    (void)args;
}

/* args[0]: int64 *sleep_us; sleeps once per chunk (to keep the pool busy in concurrency tests). */
void symjit__test_kernel_sleep(int64_t begin, int64_t end, void **args) {
    int64_t us = *(const int64_t *)args[0];
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    (void)begin;
    (void)end;
    nanosleep(&ts, NULL);
}

static void axpy_kernel(int64_t begin, int64_t end, void **args) {
    const float *x = (const float *)args[0], *y = (const float *)args[1];
    float a = *(const float *)args[2];
    float *scratch = (float *)args[3], *out = (float *)args[4];
    for (int64_t i = begin; i < end; i++) scratch[i] = a * x[i];
    for (int64_t i = begin; i < end; i++) out[i] = scratch[i] + y[i];
}

/* A graph computing out0 = a * x + y (float32, n elements) through the workspace, and
 * out1[0] = workspace address modulo SYMJIT_ALIGNMENT (int64[1]).
 * inputs: x float32[n], y float32[n]; params: n int64[1], a float32[1].
 * Returns SYMJIT_ERR_INVALID_ARGUMENT when n < 0 (the error path of the ABI). */
int32_t symjit__test_entry_axpy(void **inputs, void **outputs, void **params, void *workspace) {
    int64_t n = *(const int64_t *)params[0];
    void *args[5];
    if (n < 0) return symjit_set_error(SYMJIT_ERR_INVALID_ARGUMENT, "axpy: n must be >= 0, got %lld", (long long)n);
    args[0] = inputs[0];
    args[1] = inputs[1];
    args[2] = params[1];
    args[3] = workspace;
    args[4] = outputs[0];
    ((int64_t *)outputs[1])[0] = (int64_t)((uintptr_t)workspace % SYMJIT_ALIGNMENT);
    return symjit_parallel_for(axpy_kernel, n, 4096, args);
}
