/*
 * cuda_host_emu.h -- compile symjit's generated CUDA source for the host CPU, to test the generated
 * code's logic where no GPU exists (symjit/codegen/cuda/emulate.py; tests/codegen_cuda).
 *
 * Usage: c++ -std=c++17 -DSYMJIT_CUDA_EMULATION -include cuda_host_emu.h -x c++ OUT.cu ...
 *
 * What it provides:
 *   - the CUDA C++ keywords as host C++ (__global__, __device__, __forceinline__, __launch_bounds__,
 *     __shared__ as a static array: the threads of a block share it, blocks run one after another);
 *   - threadIdx / blockIdx / blockDim / gridDim of the thread being emulated;
 *   - the launch macros of the generated prelude: SJ_LAUNCH runs every thread of every block as a
 *     plain call, one after another (kernels without barriers); SJ_LAUNCH_SYNC runs the threads of
 *     a block as fibers (ucontext) and __syncthreads() switches to the next fiber, so every thread
 *     reaches a barrier before any passes it, as on the GPU. A __syncthreads in a kernel launched
 *     with SJ_LAUNCH, or a barrier that only some threads of a block reach, is a launch error;
 *   - launch-configuration checks of the GPU (1..1024 threads per block, grid.x < 2^31,
 *     grid.y/z <= 65535), reported like CUDA (cudaGetLastError after the launch);
 *   - the CUDA runtime functions the generated host code calls (cudaMalloc -- memory filled with
 *     0xFF bytes, NaN for floats, so reads of unwritten memory show --, cudaMemcpy[Async],
 *     streams, device queries reporting one device of compute capability 8.0, errors);
 *   - CUDA math functions the host C library lacks (erfinvf, erfinv).
 *
 * Emulated launches must not run concurrently in one process (shared arrays are function statics);
 * the generated host entry serializes its calls.
 *
 * What it does not do: it verifies the logic of generated kernels (indexing, tiling, barriers,
 * boundary handling, the launch plan, the host entry), not GPU execution. Threads of a block never
 * run concurrently (a data race between threads cannot show), warp-level behaviour, memory
 * ordering, shared-memory capacity, register limits and CUDA's own math library accuracy are not
 * emulated.
 */
#ifndef SYMJIT_CUDA_HOST_EMU_H
#define SYMJIT_CUDA_HOST_EMU_H

#ifndef __cplusplus
#error "cuda_host_emu.h is for C++ (compile the .cu file with -x c++)"
#endif

#ifndef SYMJIT_CUDA_EMULATION
#define SYMJIT_CUDA_EMULATION 1
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};

/* ---------------------------------------------------------------- runtime API subset */
typedef int cudaError_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorLaunchFailure = 719
};
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
enum cudaDeviceAttr { cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76 };
struct sj_emu_stream_t {
    int unused;
};
typedef sj_emu_stream_t *cudaStream_t;
#define cudaStreamNonBlocking 0x01

namespace sj_emu {

struct ThreadState {
    uint3 threadIdx, blockIdx;
    dim3 blockDim, gridDim;
    bool fibers;         /* launched with SJ_LAUNCH_SYNC */
    bool waiting;        /* stopped at a barrier */
    bool done;           /* returned from the kernel */
    ucontext_t ctx;      /* this thread's fiber (fibers only) */
    ucontext_t *sched;   /* the block scheduler to return to at a barrier */
};

inline thread_local ThreadState *cur = nullptr;
inline thread_local cudaError_t last_error = cudaSuccess;
inline thread_local char last_message[256];
inline thread_local void (*fiber_invoke)(void *) = nullptr;
inline thread_local void *fiber_body = nullptr;

inline cudaError_t fail(cudaError_t code, const char *kernel, const char *what) {
    if (last_error == cudaSuccess) {
        last_error = code;
        snprintf(last_message, sizeof last_message, "emulated launch of %s: %s", kernel, what);
    }
    return code;
}

inline bool config_ok(const char *kernel, dim3 g, dim3 b) {
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (threads < 1 || threads > 1024)
        return fail(cudaErrorInvalidConfiguration, kernel, "block size outside 1..1024 threads") == cudaSuccess;
    if (g.x < 1 || g.y < 1 || g.z < 1 || g.x > 2147483647u || g.y > 65535 || g.z > 65535)
        return fail(cudaErrorInvalidConfiguration, kernel, "grid dimensions out of range") == cudaSuccess;
    return true;
}

/* the thread (tx, ty, tz) of block (bx, by, bz) */
inline void set_ids(ThreadState &s, dim3 g, dim3 b, unsigned bx, unsigned by, unsigned bz, unsigned t) {
    s.gridDim = g;
    s.blockDim = b;
    s.blockIdx = {bx, by, bz};
    s.threadIdx = {t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
}

/* SJ_LAUNCH: every thread runs to completion, one after another */
template <typename F> void launch_plain(const char *kernel, dim3 g, dim3 b, F &body) {
    if (!config_ok(kernel, g, b)) return;
    ThreadState s{};
    ThreadState *saved = cur;
    cur = &s;
    unsigned nt = b.x * b.y * b.z;
    for (unsigned bz = 0; bz < g.z; bz++)
        for (unsigned by = 0; by < g.y; by++)
            for (unsigned bx = 0; bx < g.x; bx++)
                for (unsigned t = 0; t < nt; t++) {
                    set_ids(s, g, b, bx, by, bz, t);
                    body();
                    if (last_error != cudaSuccess) {
                        cur = saved;
                        return;
                    }
                }
    cur = saved;
}

inline void fiber_main() {
    ThreadState *s = cur;
    fiber_invoke(fiber_body);
    s->done = true;   /* returns to uc_link: the scheduler */
}

const size_t FIBER_STACK = 128 * 1024;

/* SJ_LAUNCH_SYNC: one fiber per thread of a block; a round resumes every fiber until it returns or
 * reaches a barrier; the block proceeds when all fibers wait at the barrier or all have returned. */
template <typename F> void launch_fibers(const char *kernel, dim3 g, dim3 b, F &body) {
    if (!config_ok(kernel, g, b)) return;
    unsigned nt = b.x * b.y * b.z;
    ThreadState *fib = new ThreadState[nt]();
    char *stacks = (char *)malloc(FIBER_STACK * nt);
    if (stacks == nullptr) {
        delete[] fib;
        fail(cudaErrorMemoryAllocation, kernel, "no memory for the emulated threads' stacks");
        return;
    }
    ThreadState *saved = cur;
    void (*saved_invoke)(void *) = fiber_invoke;
    void *saved_body = fiber_body;
    fiber_invoke = [](void *p) { (*(F *)p)(); };
    fiber_body = (void *)&body;
    ucontext_t sched;
    for (unsigned bz = 0; bz < g.z && last_error == cudaSuccess; bz++)
        for (unsigned by = 0; by < g.y && last_error == cudaSuccess; by++)
            for (unsigned bx = 0; bx < g.x && last_error == cudaSuccess; bx++) {
                for (unsigned t = 0; t < nt; t++) {
                    ThreadState &s = fib[t];
                    set_ids(s, g, b, bx, by, bz, t);
                    s.fibers = true;
                    s.waiting = s.done = false;
                    s.sched = &sched;
                    getcontext(&s.ctx);
                    s.ctx.uc_stack.ss_sp = stacks + FIBER_STACK * t;
                    s.ctx.uc_stack.ss_size = FIBER_STACK;
                    s.ctx.uc_link = &sched;
                    makecontext(&s.ctx, fiber_main, 0);
                }
                for (;;) {
                    unsigned n_done = 0, n_wait = 0;
                    for (unsigned t = 0; t < nt; t++) {
                        ThreadState &s = fib[t];
                        if (s.done) continue;
                        s.waiting = false;
                        cur = &s;
                        swapcontext(&sched, &s.ctx);
                    }
                    for (unsigned t = 0; t < nt; t++) {
                        n_done += fib[t].done;
                        n_wait += fib[t].waiting;
                    }
                    if (last_error != cudaSuccess || n_done == nt) break;
                    if (n_wait != nt) {
                        fail(cudaErrorLaunchFailure, kernel, "__syncthreads reached by only some threads of a block");
                        break;
                    }
                }
            }
    cur = saved;
    fiber_invoke = saved_invoke;
    fiber_body = saved_body;
    free(stacks);
    delete[] fib;
}

template <typename F> void launch(const char *kernel, bool barriers, dim3 g, dim3 b, F body) {
    if (barriers)
        launch_fibers(kernel, g, b, body);
    else
        launch_plain(kernel, g, b, body);
}

}  // namespace sj_emu

#define threadIdx (sj_emu::cur->threadIdx)
#define blockIdx (sj_emu::cur->blockIdx)
#define blockDim (sj_emu::cur->blockDim)
#define gridDim (sj_emu::cur->gridDim)

inline void __syncthreads() {
    sj_emu::ThreadState *s = sj_emu::cur;
    if (!s->fibers) {
        sj_emu::fail(cudaErrorLaunchFailure, "a kernel", "__syncthreads in a kernel launched without barriers (SJ_LAUNCH)");
        return;
    }
    s->waiting = true;
    swapcontext(&s->ctx, s->sched);
    sj_emu::cur = s;
}

#define SJ_LAUNCH(kernel, grid, threads, stream, ...) \
    sj_emu::launch(#kernel, false, dim3(grid), dim3(threads), [&]() { kernel(__VA_ARGS__); })
#define SJ_LAUNCH_SYNC(kernel, grid, threads, stream, ...) \
    sj_emu::launch(#kernel, true, dim3(grid), dim3(threads), [&]() { kernel(__VA_ARGS__); })

inline cudaError_t cudaGetLastError(void) {
    cudaError_t e = sj_emu::last_error;
    sj_emu::last_error = cudaSuccess;
    return e;
}
inline cudaError_t cudaPeekAtLastError(void) { return sj_emu::last_error; }
inline const char *cudaGetErrorString(cudaError_t e) {
    if (e == cudaSuccess) return "no error";
    if (sj_emu::last_message[0]) return sj_emu::last_message;
    return e == cudaErrorMemoryAllocation ? "out of memory" : "emulated CUDA error";
}
inline cudaError_t cudaGetDeviceCount(int *n) {
    *n = 1;
    return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int *d) {
    *d = 0;
    return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr attr, int) {
    *v = attr == cudaDevAttrComputeCapabilityMajor ? 8 : 0;
    return cudaSuccess;
}
inline cudaError_t cudaMalloc(void **p, size_t n) {
    size_t size = (n + 255) / 256 * 256;
    *p = aligned_alloc(256, size ? size : 256);
    if (*p == nullptr) return cudaErrorMemoryAllocation;
    memset(*p, 0xFF, size ? size : 256);   /* NaN for floats: unwritten memory shows */
    return cudaSuccess;
}
inline cudaError_t cudaFree(void *p) {
    free(p);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) {
    if (n && (dst == nullptr || src == nullptr)) return cudaErrorInvalidValue;
    memmove(dst, src, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k, cudaStream_t = nullptr) {
    return cudaMemcpy(dst, src, n, k);
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    *s = new sj_emu_stream_t();
    return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    delete s;
    return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return sj_emu::last_error; }
inline cudaError_t cudaDeviceSynchronize(void) { return sj_emu::last_error; }

/* ---------------------------------------------------------------- CUDA math the C library lacks */
/* erfinv: Giles' approximation refined by two Newton steps on erf (double precision result) */
inline double erfinv(double y) {
    if (y != y || y < -1.0 || y > 1.0) return (double)NAN;
    if (y == 1.0) return (double)INFINITY;
    if (y == -1.0) return -(double)INFINITY;
    double w = -log((1.0 - y) * (1.0 + y)), x;
    if (w < 6.25) {
        w -= 3.125;
        x = -3.6444120640178196996e-21;
        x = -1.685059138182016589e-19 + x * w;
        x = 1.2858480715256400167e-18 + x * w;
        x = 1.115787767802518096e-17 + x * w;
        x = -1.333171662854620906e-16 + x * w;
        x = 2.0972767875968561637e-17 + x * w;
        x = 6.6376381343583238325e-15 + x * w;
        x = -4.0545662729752068639e-14 + x * w;
        x = -8.1519341976054721522e-14 + x * w;
        x = 2.6335093153082322977e-12 + x * w;
        x = -1.2975133253453532498e-11 + x * w;
        x = -5.4154120542946279317e-11 + x * w;
        x = 1.051212273321532285e-09 + x * w;
        x = -4.1126339803469836976e-09 + x * w;
        x = -2.9070369957882005086e-08 + x * w;
        x = 4.2347877827932403518e-07 + x * w;
        x = -1.3654692000834678645e-06 + x * w;
        x = -1.3882523362786468719e-05 + x * w;
        x = 0.0001867342080340571352 + x * w;
        x = -0.00074070253416626697512 + x * w;
        x = -0.0060336708714301490533 + x * w;
        x = 0.24015818242558961693 + x * w;
        x = 1.6536545626831027356 + x * w;
    } else if (w < 16.0) {
        w = sqrt(w) - 3.25;
        x = 2.2137376921775787049e-09;
        x = 9.0756561938885390979e-08 + x * w;
        x = -2.7517406297064545428e-07 + x * w;
        x = 1.8239629214389227755e-08 + x * w;
        x = 1.5027403968909827627e-06 + x * w;
        x = -4.013867526981545969e-06 + x * w;
        x = 2.9234449089955446044e-06 + x * w;
        x = 1.2475304481671778723e-05 + x * w;
        x = -4.7318229009055733981e-05 + x * w;
        x = 6.8284851459573175448e-05 + x * w;
        x = 2.4031110387097893999e-05 + x * w;
        x = -0.0003550375203628474796 + x * w;
        x = 0.00095328937973738049703 + x * w;
        x = -0.0016882755560235047313 + x * w;
        x = 0.0024914420961078508066 + x * w;
        x = -0.0037512085075692412107 + x * w;
        x = 0.005370914553590063617 + x * w;
        x = 1.0052589676941592334 + x * w;
        x = 3.0838856104922207635 + x * w;
    } else {
        w = sqrt(w) - 5.0;
        x = -2.7109920616438573243e-11;
        x = -2.5556418169965252055e-10 + x * w;
        x = 1.5076572693500548083e-09 + x * w;
        x = -3.7894654401267369937e-09 + x * w;
        x = 7.6157012080783393804e-09 + x * w;
        x = -1.4960026627149240478e-08 + x * w;
        x = 2.9147953450901080826e-08 + x * w;
        x = -6.7711997758452339498e-08 + x * w;
        x = 2.2900482228026654717e-07 + x * w;
        x = -9.9298272942317002539e-07 + x * w;
        x = 4.5260625972231537039e-06 + x * w;
        x = -1.9681778105531670567e-05 + x * w;
        x = 7.5995277030017761139e-05 + x * w;
        x = -0.00021503011930044477347 + x * w;
        x = -0.00013871931833623122026 + x * w;
        x = 1.0103004648645343977 + x * w;
        x = 4.8499064014085844221 + x * w;
    }
    x *= y;
    for (int i = 0; i < 2; i++) {   /* Newton on erf(x) = y */
        double err = erf(x) - y;
        x -= err / (1.1283791670955126 * exp(-x * x));
    }
    return x;
}
inline float erfinvf(float y) { return (float)erfinv((double)y); }

#endif /* SYMJIT_CUDA_HOST_EMU_H */
