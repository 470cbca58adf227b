/*
 * profile.c -- per-node wall-clock counters for graphs JIT-compiled with profiling on.
 *
 * A profiled segment calls symjit_profile_start() on entry and symjit_profile_mark(slot) after
 * each node's calls: the time since the previous mark on this thread is added to the slot (a
 * parallel-for returns when all its chunks are done, so a node's time is its wall time on all
 * threads). Slots are handed out by the compiler (symjit/codegen/llvm/profile.py) so graphs
 * compiled in one process never share one. Counters are atomic: graphs run from several
 * threads at once add up correctly, though their times then include each other's waits.
 * Not part of the AOT ABI (ahead-of-time libraries are never compiled with profiling).
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <time.h>

#include "symjit_internal.h"

static _Atomic int64_t slot_ns[SYMJIT_PROFILE_SLOTS];
static _Atomic int64_t slot_count[SYMJIT_PROFILE_SLOTS];
static _Thread_local int64_t last_mark_ns;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t symjit_profile_now_ns(void) { return now_ns(); }

void symjit_profile_start(void) { last_mark_ns = now_ns(); }

void symjit_profile_mark(int32_t slot) {
    int64_t t = now_ns();
    if (slot >= 0 && slot < SYMJIT_PROFILE_SLOTS) {
        atomic_fetch_add_explicit(&slot_ns[slot], t - last_mark_ns, memory_order_relaxed);
        atomic_fetch_add_explicit(&slot_count[slot], 1, memory_order_relaxed);
    }
    last_mark_ns = t;
}

int32_t symjit_profile_read(int32_t first, int32_t count, int64_t *ns, int64_t *calls, int32_t reset) {
    if (first < 0 || count < 0 || count > SYMJIT_PROFILE_SLOTS - first)
        return symjit_set_error(SYMJIT_ERR_INDEX, "profile slots [%d, %d) are outside [0, %d)", (int)first,
                                (int)(first + count), SYMJIT_PROFILE_SLOTS);
    for (int32_t i = 0; i < count; i++) {
        ns[i] = reset ? atomic_exchange(&slot_ns[first + i], 0) : atomic_load(&slot_ns[first + i]);
        calls[i] = reset ? atomic_exchange(&slot_count[first + i], 0) : atomic_load(&slot_count[first + i]);
    }
    return SYMJIT_OK;
}
