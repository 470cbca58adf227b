/*
 * symjit_internal.h -- declarations shared between the runtime's own C files (not part of the ABI).
 */
#ifndef SYMJIT_INTERNAL_H
#define SYMJIT_INTERNAL_H

#include "symjit_runtime.h"

#define SYMJIT_ERROR_MESSAGE_MAX 1024

/* A code plus message; the per-thread last error and the error slot of a parallel_for job. */
typedef struct symjit_error_state {
    int32_t code;
    char message[SYMJIT_ERROR_MESSAGE_MAX];
} symjit_error_state;

/* The calling thread's error state (never NULL). */
symjit_error_state *symjit__thread_error(void);

/* CLOCK_MONOTONIC now, in nanoseconds (profile.c): the clock of Python's time.monotonic_ns(). */
int64_t symjit_profile_now_ns(void);

/* Dynamic mode of the thread pool (threadpool.c): 0 off, 1 jobs run on the caller alone while the
 * load average says the machine is oversubscribed, 2 always; other values mean 1. Returns the
 * previous mode. */
int32_t symjit_set_dynamic(int32_t mode);

/* A 128-bit non-cryptographic fingerprint of n bytes (fingerprint.c). */
void symjit_fingerprint(const void *data, int64_t n, uint64_t seed, uint64_t out[2]);

/* Test kernels and a test entry compiled into the runtime, exposed to Python for the tests. */
void symjit__test_kernel_count(int64_t begin, int64_t end, void **args);
void symjit__test_kernel_nested(int64_t begin, int64_t end, void **args);
void symjit__test_kernel_fail(int64_t begin, int64_t end, void **args);
void symjit__test_kernel_noop(int64_t begin, int64_t end, void **args);
void symjit__test_kernel_sleep(int64_t begin, int64_t end, void **args);
int32_t symjit__test_entry_axpy(void **inputs, void **outputs, void **params, void *workspace);

#endif
