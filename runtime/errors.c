/*
 * errors.c -- per-thread last-error reporting (symjit_set_error / symjit_last_error).
 *
 * Each thread owns one error state in thread-local storage, so reporting never allocates or
 * locks and concurrent graph calls on different threads never see each other's errors.
 * The thread pool moves errors raised inside chunks to the thread that called parallel_for.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "symjit_internal.h"

static _Thread_local symjit_error_state tls_error;

symjit_error_state *symjit__thread_error(void) { return &tls_error; }

int32_t symjit_set_error(int32_t code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_error.message, sizeof tls_error.message, fmt ? fmt : "", ap);
    va_end(ap);
    tls_error.code = code;
    return code;
}

int32_t symjit_set_error_str(int32_t code, const char *message) {
    snprintf(tls_error.message, sizeof tls_error.message, "%s", message ? message : "");
    tls_error.code = code;
    return code;
}

int32_t symjit_last_error_code(void) { return tls_error.code; }

const char *symjit_last_error(void) { return tls_error.message; }

void symjit_clear_error(void) {
    tls_error.code = SYMJIT_OK;
    tls_error.message[0] = '\0';
}

int32_t symjit_abi_version(void) { return SYMJIT_ABI_VERSION; }
