/*
 * threadpool.c -- the persistent thread pool behind symjit_parallel_for.
 *
 * Design (why it looks like this):
 *   - One process-wide pool of (threads - 1) workers; the thread that calls parallel_for does a
 *     share of the work too, so `threads` cores are busy and never more (no oversubscription).
 *   - [0, n) is cut into `nchunks` contiguous chunks of about n / nchunks >= `grain` indices (at most
 *     CHUNKS_PER_THREAD per thread, so one slow thread costs a fraction, not a multiple, of the
 *     run time); threads take chunks from an atomic counter, so a late-waking worker never
 *     delays a job: the others simply take its chunks.
 *   - Low-latency wake-up: idle workers spin for `spin_ns` (default 100 us, env SYMJIT_SPIN_US)
 *     watching the job generation, then sleep on a futex (a condition variable off Linux).
 *     Consecutive kernels of one graph therefore start without system calls.
 *   - Workers wake away from the caller (Linux): before it wakes sleeping workers, the caller
 *     leaves its own CPU out of their affinity masks (keep_sleepers_off; a syscall per worker,
 *     only when some sleep and the caller has moved since the last time). The scheduler wakes
 *     a thread beside its waker when the other CPUs look busy, as an idle vCPU that the host of
 *     a virtual machine has descheduled does; the worker then waits for the caller's CPU while
 *     the job runs on the caller alone, spins out its spin time there and sleeps again, and the
 *     idle CPU does not pull the cache-hot threads apart for many milliseconds. Measured on a
 *     2-vCPU VM (Xeon), four 1x7 convolutions in bursts of 8 calls after a 0.2 s pause: the
 *     worker joined 17-31 of 80 jobs (200-290 us after they opened), 3.6-4.3 ms a call; with
 *     its mask kept off the caller's CPU it joins 76-78 (4-9 us after), 2.6-2.8 ms a call,
 *     as in a tight loop. SYMJIT_WAKE_AWAY=0 turns it off (benchmarks/bench_pool_wake.py).
 *   - Job lifetime is guarded by one 64-bit word `state` = generation << 32 | active workers.
 *     An odd generation is an open job that workers may join (CAS, so joining and checking the
 *     generation are one step); the caller closes it (generation + 1, even) when all chunks are
 *     done, and the next publisher waits for `active` to drain to zero before it rewrites the job.
 *   - Submissions from several threads are serialized by `lock`; a parallel_for issued from
 *     inside a chunk (nested) runs inline on that thread.
 *   - fork(): the child has no workers; pthread_atfork resets the pool there, and it restarts
 *     lazily on the next parallel_for.
 *   - Oversubscribed machines (dynamic mode, off by default as OpenMP's OMP_DYNAMIC): when the 1-minute load
 *     average says other work already fills every CPU this process may use (load >= CPUs +
 *     threads), a job's chunks all run on the caller, one after another, without waking workers.
 *     A fork-join job otherwise ends when its slowest thread does, and a worker preempted in the
 *     middle of a chunk holds the job up for a scheduler time slice; under per-session CPU
 *     shares (Linux autogroup) two threads get little more CPU than one, so the extra threads
 *     only add waits and spinning. The job is cut into the same chunks either way (only who runs
 *     them changes), so results never depend on the load. The load is sampled at most every
 *     LOAD_SAMPLE_NS. SYMJIT_DYNAMIC=1 (or symjit_set_dynamic(1)) turns it on; "always" (2) runs
 *     every job that way. Off by default: on the loaded 2-core development machine its gain on a
 *     CNN training step was within the noise (benchmarks/bench_pool_dynamic.py), and the load
 *     average is machine-wide, so a process pinned to idle CPUs of a busy machine would lose.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "symjit_internal.h"

#define MAX_THREADS 1024
#define CHUNKS_PER_THREAD 4
#define DEFAULT_SPIN_NS 100000L
#define LOAD_SAMPLE_NS 200000000LL

/* ------------------------------------------------------------------ wait / wake primitives */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#ifdef __linux__
/* Sleep while *addr == expected (may return spuriously). */
static void wait_on(_Atomic uint32_t *addr, uint32_t expected) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}
static void wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
static void wait_reset_after_fork(void) {}
#else
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wait_cond = PTHREAD_COND_INITIALIZER;
static void wait_on(_Atomic uint32_t *addr, uint32_t expected) {
    pthread_mutex_lock(&wait_lock);
    if (atomic_load(addr) == expected) pthread_cond_wait(&wait_cond, &wait_lock);
    pthread_mutex_unlock(&wait_lock);
}
static void wake_all(_Atomic uint32_t *addr) {
    (void)addr;
    pthread_mutex_lock(&wait_lock);
    pthread_cond_broadcast(&wait_cond);
    pthread_mutex_unlock(&wait_lock);
}
static void wait_reset_after_fork(void) {
    pthread_mutex_init(&wait_lock, NULL);
    pthread_cond_init(&wait_cond, NULL);
}
#endif

/* ------------------------------------------------------------------ pool state */

typedef struct job {
    symjit_kernel_fn fn;
    void **args;
    int64_t n;
    int64_t nchunks;
    int64_t round_to; /* chunk starts are multiples of this (1: exact split) */
    _Alignas(64) _Atomic int64_t next; /* next chunk index to take (own cache line) */
    _Alignas(64) _Atomic uint32_t done; /* chunks finished (futex word for the caller) */
    _Atomic uint32_t caller_waiting; /* the caller sleeps on `done` */
    _Atomic int32_t error_claimed;   /* first failing chunk owns `error` */
    symjit_error_state error;
} job_t;

static struct {
    pthread_mutex_t lock;       /* serializes submitters, resizes and fork */
    int32_t nworkers;           /* running worker threads */
    int32_t started_for;        /* thread count the workers were started for (0: none) */
    pthread_t *workers;
    _Alignas(64) _Atomic uint64_t state; /* generation << 32 | active workers */
    _Atomic uint32_t wake_seq;  /* futex word idle workers sleep on */
    _Atomic uint32_t sleepers;  /* workers asleep (or about to be) on wake_seq */
    _Atomic int32_t shutdown;   /* workers exit when set */
    _Alignas(64) int64_t spin_ns;
    int excluded_cpu;           /* the CPU left out of the workers' masks (-1: none) */
    int wake_away;              /* keep_sleepers_off on (SYMJIT_WAKE_AWAY=0: off) */
#ifdef __linux__
    cpu_set_t start_mask;       /* the affinity mask the workers started with (inherited) */
#endif
    job_t job;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic int32_t configured_threads; /* 0 = not yet computed */
/* Dynamic mode: DYNAMIC_OFF, DYNAMIC_BY_LOAD (jobs run on the caller alone while the machine is
 * oversubscribed) or DYNAMIC_ALWAYS (every job on the caller alone, in the same chunks: measures
 * and tests the serial path). */
enum { DYNAMIC_OFF = 0, DYNAMIC_BY_LOAD = 1, DYNAMIC_ALWAYS = 2 };
static _Atomic int32_t dynamic_mode = DYNAMIC_OFF;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static _Thread_local int in_parallel;      /* this thread runs chunks (or is a worker) */

#define GEN(s) ((uint32_t)((s) >> 32))
#define ACTIVE(s) ((uint32_t)((s)&0xffffffffu))

/* ------------------------------------------------------------------ thread counts */

static int32_t parse_positive_env(const char *name, int32_t fallback) {
    const char *text = getenv(name);
    char *end = NULL;
    long value;
    if (text == NULL || *text == '\0') return fallback;
    errno = 0;
    value = strtol(text, &end, 10);
    while (end && (*end == ' ' || *end == '\t' || *end == '\n')) end++;
    if (errno != 0 || end == text || (end && *end != '\0') || value < 1) return fallback;
    return value > INT32_MAX ? INT32_MAX : (int32_t)value;
}

static int32_t available_cpus(void) {
#ifdef __linux__
    for (int size = 1024; size <= (1 << 20); size *= 2) {
        cpu_set_t *set = CPU_ALLOC(size);
        size_t bytes = CPU_ALLOC_SIZE(size);
        if (set == NULL) break;
        if (sched_getaffinity(0, bytes, set) == 0) {
            int count = CPU_COUNT_S(bytes, set);
            CPU_FREE(set);
            return count > 0 ? count : 1;
        }
        CPU_FREE(set);
        if (errno != EINVAL) break;
    }
#endif
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int32_t)online : 1;
}

static int32_t clamp_threads(int32_t n) {
    if (n < 1) return 1;
    return n > MAX_THREADS ? MAX_THREADS : n;
}

static int32_t default_threads(void) {
    return clamp_threads(parse_positive_env("SYMJIT_NUM_THREADS", available_cpus()));
}

int32_t symjit_get_num_threads(void) {
    int32_t n = atomic_load_explicit(&configured_threads, memory_order_relaxed);
    if (n == 0) {
        int32_t expected = 0;
        n = default_threads();
        if (!atomic_compare_exchange_strong(&configured_threads, &expected, n)) n = expected;
    }
    return n;
}

/* ------------------------------------------------------------------ load (dynamic mode) */

/* The 1-minute load average, or -1 where it cannot be read. */
static double load_average(void) {
    double load[1];
    return getloadavg(load, 1) == 1 ? load[0] : -1.0;
}

/* True when other work fills the CPUs: load (which counts this process's own busy threads, at
 * most `threads`) >= usable CPUs + threads. Sampled at most every LOAD_SAMPLE_NS; call with
 * pool.lock held (the cache is not otherwise synchronized). */
static int machine_oversubscribed(int32_t threads) {
    static int64_t sampled_at = INT64_MIN / 2;
    static int cached;
    int32_t mode = atomic_load_explicit(&dynamic_mode, memory_order_relaxed);
    int64_t t;
    if (mode != DYNAMIC_BY_LOAD) return mode == DYNAMIC_ALWAYS;
    t = now_ns();
    if (t - sampled_at >= LOAD_SAMPLE_NS) {
        double load = load_average();
        sampled_at = t;
        cached = load >= 0 && load >= (double)available_cpus() + (double)threads;
    }
    return cached;
}

static void pool_init(void);

int32_t symjit_set_dynamic(int32_t mode) {
    pthread_once(&init_once, pool_init); /* the environment's setting first, then this one */
    if (mode < DYNAMIC_OFF || mode > DYNAMIC_ALWAYS) mode = DYNAMIC_BY_LOAD;
    return atomic_exchange(&dynamic_mode, mode);
}

/* ------------------------------------------------------------------ workers */

/* Chunk boundaries are multiples of CHUNK_ALIGN indices whenever that keeps every chunk at
 * least `grain` long: elementwise kernels over float32 (or wider) data then start every chunk on
 * a 64-byte boundary of a 64-byte-aligned buffer, so their vector stores stay aligned (and large
 * outputs can stream past the cache, see codegen/llvm/nontemporal.py). */
#define CHUNK_ALIGN 16

/* First index of chunk k: k * n / nchunks (spread evenly), rounded down to a multiple of
 * job->round_to; 0 for the first chunk and n past the last. Chunks are contiguous and cover
 * [0, n); rounding moves a boundary by less than round_to, so a chunk shrinks by less than that. */
static int64_t chunk_start(const job_t *job, int64_t k) {
    int64_t base = job->n / job->nchunks, extra = job->n % job->nchunks, s;
    if (k >= job->nchunks) return job->n;
    s = k * base + (k < extra ? k : extra);
    return s - s % job->round_to;
}

static void chunk_bounds(const job_t *job, int64_t k, int64_t *begin, int64_t *end) {
    *begin = chunk_start(job, k);
    *end = chunk_start(job, k + 1);
}

/* Take and run chunks until none is left. Errors a chunk reports go to the job's error slot. */
static void run_chunks(job_t *job) {
    symjit_error_state *tls = symjit__thread_error();
    for (;;) {
        int64_t k = atomic_fetch_add(&job->next, 1);
        int64_t begin, end;
        int32_t saved;
        if (k >= job->nchunks) return;
        chunk_bounds(job, k, &begin, &end);
        saved = tls->code;
        tls->code = SYMJIT_OK;
        job->fn(begin, end, job->args);
        if (tls->code != SYMJIT_OK) {
            int32_t unclaimed = 0;
            if (atomic_compare_exchange_strong(&job->error_claimed, &unclaimed, 1)) {
                job->error.code = tls->code;
                memcpy(job->error.message, tls->message, sizeof job->error.message);
            }
        }
        tls->code = saved;
        if (atomic_fetch_add(&job->done, 1) + 1 == (uint32_t)job->nchunks &&
            atomic_load(&job->caller_waiting))
            wake_all(&job->done);
    }
}

static int job_ready(uint64_t s, uint32_t last_gen) {
    return (GEN(s) & 1u) && GEN(s) != last_gen;
}

/* Wait until a job newer than last_gen is open, or shutdown. Spins first, then sleeps. */
static uint64_t wait_for_job(uint32_t last_gen) {
    int64_t deadline = now_ns() + pool.spin_ns;
    uint64_t s;
    for (unsigned i = 1;; i++) {
        s = atomic_load(&pool.state);
        if (job_ready(s, last_gen) || atomic_load_explicit(&pool.shutdown, memory_order_relaxed))
            return s;
        cpu_relax();
        if ((i & 63u) == 0 && now_ns() > deadline) break;
    }
    for (;;) {
        uint32_t seq;
        atomic_fetch_add(&pool.sleepers, 1);
        seq = atomic_load(&pool.wake_seq);
        s = atomic_load(&pool.state);
        if (job_ready(s, last_gen) || atomic_load(&pool.shutdown)) {
            atomic_fetch_sub(&pool.sleepers, 1);
            return s;
        }
        wait_on(&pool.wake_seq, seq);
        atomic_fetch_sub(&pool.sleepers, 1);
    }
}

/* Before waking sleeping workers (caller, under the lock): give them the caller's affinity mask
 * without the caller's CPU (a caller pinned to that CPU alone: the workers' starting mask
 * without it), so that the scheduler wakes them on other CPUs (see the header). Only when some
 * worker sleeps and the caller's CPU is not the one already left out: then a syscall per
 * worker. */
static void keep_sleepers_off(void) {
#ifdef __linux__
    if (!pool.wake_away || atomic_load(&pool.sleepers) == 0) return;
    const int cpu = sched_getcpu();
    cpu_set_t mask;
    if (cpu < 0 || cpu == pool.excluded_cpu || sched_getaffinity(0, sizeof mask, &mask) != 0) return;
    CPU_CLR(cpu, &mask);
    if (CPU_COUNT(&mask) == 0) {
        mask = pool.start_mask;
        CPU_CLR(cpu, &mask);
        if (CPU_COUNT(&mask) == 0) return;
    }
    for (int32_t i = 0; i < pool.nworkers; i++) pthread_setaffinity_np(pool.workers[i], sizeof mask, &mask);
    pool.excluded_cpu = cpu;
#endif
}

static void *worker_main(void *arg) {
    uint32_t last_gen = (uint32_t)(uintptr_t)arg;
    in_parallel = 1; /* parallel_for inside a kernel runs inline */
    for (;;) {
        uint64_t s = wait_for_job(last_gen);
        uint32_t gen = GEN(s);
        int joined = 0;
        if (atomic_load(&pool.shutdown)) break;
        while (GEN(s) == gen) {
            if (atomic_compare_exchange_weak(&pool.state, &s, s + 1)) {
                joined = 1;
                break;
            }
        }
        last_gen = gen;
        if (!joined) continue;
        run_chunks(&pool.job);
        atomic_fetch_sub(&pool.state, 1);
    }
    return NULL;
}

static void stop_workers_locked(void) {
    pool.started_for = 0;
    if (pool.nworkers == 0) {
        free(pool.workers);
        pool.workers = NULL;
        return;
    }
    atomic_store(&pool.shutdown, 1);
    atomic_fetch_add(&pool.wake_seq, 1);
    wake_all(&pool.wake_seq);
    for (int32_t i = 0; i < pool.nworkers; i++) pthread_join(pool.workers[i], NULL);
    free(pool.workers);
    pool.workers = NULL;
    pool.nworkers = 0;
    pool.started_for = 0;
    atomic_store(&pool.shutdown, 0);
}

/* Start workers so that the pool has `threads` threads counting the caller (best effort:
 * if the system refuses threads, the pool runs with those it got). */
static void start_workers_locked(int32_t threads) {
    sigset_t all, old;
    int32_t wanted = threads - 1;
    uint32_t gen = GEN(atomic_load(&pool.state));
    pool.started_for = threads;
    pool.excluded_cpu = -1;
#ifdef __linux__
    if (sched_getaffinity(0, sizeof pool.start_mask, &pool.start_mask) != 0) CPU_ZERO(&pool.start_mask);
#endif
    if (wanted <= 0) return;
    pool.workers = calloc((size_t)wanted, sizeof(pthread_t));
    if (pool.workers == NULL) return;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals go to the application's threads */
    for (int32_t i = 0; i < wanted; i++) {
        if (pthread_create(&pool.workers[i], NULL, worker_main, (void *)(uintptr_t)gen) != 0) break;
        pool.nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ------------------------------------------------------------------ fork handling */

static void atfork_prepare(void) { pthread_mutex_lock(&pool.lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&pool.lock); }
static void atfork_child(void) {
    /* Only the forking thread exists in the child: forget the workers and start clean. */
    free(pool.workers);
    pool.workers = NULL;
    pool.nworkers = 0;
    pool.started_for = 0;
    atomic_store(&pool.state, 0);
    atomic_store(&pool.wake_seq, 0);
    atomic_store(&pool.sleepers, 0);
    atomic_store(&pool.shutdown, 0);
    in_parallel = 0;
    wait_reset_after_fork();
    pthread_mutex_init(&pool.lock, NULL);
}

static void pool_init(void) {
    /* SYMJIT_SPIN_US=0 disables spinning (workers sleep at once); unset or invalid: default. */
    const char *text = getenv("SYMJIT_SPIN_US");
    char *end = NULL;
    long us = -1;
    if (text != NULL && *text != '\0') {
        errno = 0;
        us = strtol(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0' || us < 0 || us > 10000000L) us = -1;
    }
    pool.spin_ns = us >= 0 ? (int64_t)us * 1000 : DEFAULT_SPIN_NS;
    text = getenv("SYMJIT_WAKE_AWAY"); /* "0": workers may wake on the caller's CPU (measurements) */
    pool.wake_away = !(text != NULL && strcmp(text, "0") == 0);
    text = getenv("SYMJIT_DYNAMIC"); /* "1": by load; "always": every job on the caller; else off */
    if (text != NULL && strcmp(text, "1") == 0) atomic_store(&dynamic_mode, DYNAMIC_BY_LOAD);
    if (text != NULL && strcmp(text, "always") == 0) atomic_store(&dynamic_mode, DYNAMIC_ALWAYS);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* ------------------------------------------------------------------ public API */

int32_t symjit_set_num_threads(int32_t n) {
    int32_t previous;
    if (in_parallel) return symjit_get_num_threads(); /* inside a chunk: resizing would deadlock */
    pthread_once(&init_once, pool_init);
    pthread_mutex_lock(&pool.lock);
    previous = symjit_get_num_threads();
    n = n <= 0 ? default_threads() : clamp_threads(n);
    atomic_store(&configured_threads, n);
    if (pool.started_for != n) stop_workers_locked(); /* restarted lazily with the new size */
    pthread_mutex_unlock(&pool.lock);
    return previous;
}

static int32_t run_inline(symjit_kernel_fn fn, int64_t n, void **args) {
    symjit_error_state *tls = symjit__thread_error();
    int32_t saved = tls->code, code;
    tls->code = SYMJIT_OK;
    fn(0, n, args);
    code = tls->code;
    if (code == SYMJIT_OK) tls->code = saved;
    return code;
}

/* After every chunk of `job` ran: hand its first error (if any) to this thread, release the
 * pool lock, return the error code. */
static int32_t finish_job_locked(job_t *job) {
    int32_t code = SYMJIT_OK;
    if (atomic_load(&job->error_claimed)) {
        symjit_error_state *tls = symjit__thread_error();
        code = job->error.code;
        tls->code = code;
        memcpy(tls->message, job->error.message, sizeof tls->message);
    }
    pthread_mutex_unlock(&pool.lock);
    return code;
}

int32_t symjit_parallel_for(symjit_kernel_fn fn, int64_t n, int64_t grain, void **args) {
    int32_t threads;
    int64_t nchunks;
    uint64_t s;
    job_t *job = &pool.job;

    if (n <= 0) return SYMJIT_OK;
    if (grain < 1) grain = 1;
    if (n <= grain || in_parallel) return run_inline(fn, n, args);
    threads = symjit_get_num_threads();
    if (threads <= 1) return run_inline(fn, n, args);

    pthread_once(&init_once, pool_init);
    pthread_mutex_lock(&pool.lock);
    threads = symjit_get_num_threads();
    if (pool.started_for != threads) {
        stop_workers_locked();
        start_workers_locked(threads);
    }
    nchunks = n / grain;
    if (nchunks > (int64_t)(pool.nworkers + 1) * CHUNKS_PER_THREAD)
        nchunks = (int64_t)(pool.nworkers + 1) * CHUNKS_PER_THREAD;
    if (pool.nworkers == 0 || nchunks <= 1) {
        pthread_mutex_unlock(&pool.lock);
        return run_inline(fn, n, args);
    }

    /* Wait for workers still leaving the previous (closed) job, then publish this one. */
    for (unsigned i = 1; ACTIVE(s = atomic_load(&pool.state)) != 0; i++) {
        cpu_relax();
        if ((i & 1023u) == 0) sched_yield();
    }
    job->fn = fn;
    job->args = args;
    job->n = n;
    job->nchunks = nchunks;
    job->round_to = n / nchunks >= grain + CHUNK_ALIGN ? CHUNK_ALIGN : 1;
    atomic_store_explicit(&job->next, 0, memory_order_relaxed);
    atomic_store_explicit(&job->done, 0, memory_order_relaxed);
    atomic_store_explicit(&job->caller_waiting, 0, memory_order_relaxed);
    atomic_store_explicit(&job->error_claimed, 0, memory_order_relaxed);
    job->error.code = SYMJIT_OK;
    if (machine_oversubscribed(threads)) {
        /* Same chunks, all on the caller; the job is never opened, so no worker joins it. */
        in_parallel = 1;
        run_chunks(job);
        in_parallel = 0;
        return finish_job_locked(job);
    }
    keep_sleepers_off();
    atomic_store(&pool.state, (uint64_t)(GEN(s) + 1u) << 32); /* open (odd), no one active */
    atomic_fetch_add(&pool.wake_seq, 1);
    if (atomic_load(&pool.sleepers) > 0) wake_all(&pool.wake_seq);

    in_parallel = 1;
    run_chunks(job);
    in_parallel = 0;

    /* Wait for chunks other threads are still running: spin, then sleep on `done`. */
    {
        int64_t deadline = now_ns() + pool.spin_ns;
        uint32_t d;
        for (unsigned i = 1; (d = atomic_load(&job->done)) < (uint32_t)nchunks; i++) {
            if ((i & 63u) == 0 && now_ns() > deadline) {
                atomic_store(&job->caller_waiting, 1);
                d = atomic_load(&job->done);
                if (d < (uint32_t)nchunks) wait_on(&job->done, d);
            } else {
                cpu_relax();
            }
        }
    }
    atomic_fetch_add(&pool.state, (uint64_t)1 << 32); /* close: generation even, no new joins */
    return finish_job_locked(job);
}
