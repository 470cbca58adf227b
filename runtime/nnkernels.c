/*
 * nnkernels.c -- the kernel library: compute-bound neural-network kernels that generated code calls (float32, row-major).
 *
 * Two paths compute GEMM-shaped work (FullyConnected, dot, batch_dot, convolutions, their
 * backward passes, Deconvolution):
 *   - on x86-64 hosts with AVX-512 (F/BW/DQ/VL), the default: register-blocked tiles written
 *     here (R rows x 16V columns in zmm accumulators, "Native AVX-512 GEMM tiles" below),
 *     driven by convolution-specific blockings that avoid im2col (implicit GEMM over zero-padded
 *     stride phase planes, fused Winograd F(2x2, 3x3), filter-vector tiles over weights packed
 *     at compile time), a GEMM driver for dense layers and a dot-product GEMV; depthwise
 *     convolution and max pooling have vectorised AVX-512 loops too;
 *   - elsewhere, or after `symjit_nn_set_native(0)` (the portable path): a BLAS sgemm bound at
 *     run time (`symjit_nn_set_blas`: symjit binds scipy's OpenBLAS), im2col + GEMM, Winograd
 *     with sgemm, and built-in loop nests for tiny products.
 * benchmarks/bench_gemm_choices.py measures the choices (tiles against the BLAS, methods, tile
 * shapes, blocking); `symjit_nn_tune` overrides them for it.
 * Depthwise convolution, pooling, bias gradients and embedding gathers are direct loops. Work is
 * split over the runtime's pool (`symjit_parallel_for`) into output blocks; GEMM work inside a
 * block is single-threaded (no nested thread pools), and a node's elementwise epilogue (a
 * generated kernel `void epi(begin, end, args)` over flat output indices) runs on each output
 * block as soon as the block is complete, while it is still in cache.
 *
 * Geometry arrives as a typed descriptor struct declared in nnkernels.h (symjit_conv_desc, ...;
 * generated code keeps them as module constants). Spatial convolutions and pooling are handled as 3-D
 * (1-D and 2-D pad the leading spatial dims with size 1). These symbols have default
 * visibility so that symjit's code generator can find them with dlsym in the extension.
 *
 * The kernels are split by family into runtime/nn/, included below in dependency order as
 * one translation unit: the hot static helpers every family shares (the GEMM tiles, the ReLU
 * stores, the prefetches) inline across families without link-time optimisation, and every
 * build (setup.py, AOT libraries, `--cpu` targets) compiles this one file. The entry points
 * are declared in nnkernels.h.
 */
#include <float.h>
#include <stdatomic.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nnkernels.h"
#include "symjit_runtime.h"
#include "nn/common.c"
#include "nn/gemm.c"
#include "nn/epilogue.c"
#include "nn/gemm_packed.c"
#include "nn/conv.c"
#include "nn/implicit.c"
#include "nn/depthwise.c"
#include "nn/winograd.c"
#include "nn/conv_entry.c"
#include "nn/pool.c"
#include "nn/conv_pool.c"
#include "nn/embedding.c"
#include "nn/blocked.c"
#include "nn/rnn.c"
#include "nn/sparse.c"
