"""Which kernel runs a forward convolution, from its geometry alone: im2col/implicit GEMM,
depthwise, or Winograd F(2x2, 3x3). A pure function of the shapes and of whether the kernel
library runs its AVX-512 tiles, shared by the lowering (codegen/llvm/lower_conv.py) and by the
passes that weigh layouts against it (passes/blocked_layout.py). The method numbers are
runtime/nnkernels.h's `symjit_conv_method` (tests/runtime/test_kernel_header.py)."""
from __future__ import annotations

IM2COL, DEPTHWISE, WINOGRAD = 0, 1, 2

#: Portable path (BLAS GEMMs): Winograd F(2x2, 3x3) needs this many 2x2 output tiles (all
#: images) and channels to beat im2col + GEMM. Measured on a Zen 3 (AVX2) host
#: (benchmarks/bench_gemm_choices.py --threads 1 --clock cpu, CPU time of Winograd / im2col):
#: 64 channels 56x56: 1.29 (batch 1), 1.37 (batch 8) -- its 16 GEMMs have K=64 and the
#: transforms dominate; 128 ch 28x28: 0.90 / 0.90; 256 ch 14x14: 1.14 at batch 1 (49 tiles),
#: 0.63 at batch 8; 512 ch 7x7: 2.68 at batch 1 (16 tiles: the per-call weight transform of
#: 16 F C floats dominates), 0.85 at batch 8 (128 tiles).
WINOGRAD_MIN_TILES = 128
WINOGRAD_MIN_CHANNELS = 128

#: AVX-512 path (fused Winograd on the tiles vs implicit GEMM): the least channels (input and
#: output) and output positions per image. Measured on a Zen 5 (AVX-512) host, one thread,
#: constant weights (bench_gemm_choices.py, Winograd / implicit GEMM time): 64 ch 56x56 0.86
#: (batch 1), 0.89 (batch 8); 128 ch 28x28 0.70 / 0.72; 256 ch 14x14 0.69 / 0.67; 512 ch 7x7
#: 1.45 at batch 1 -- its 4x4 tiles per image make 20-column GEMMs and U is 16/9 of the
#: weights, read on every call.
WINOGRAD_TILES_MIN_CHANNELS = 64
WINOGRAD_TILES_MIN_POSITIONS = 100


def forward_conv_method(n, c, g, f, kernel, stride, dilate, out_sp, tiles: bool) -> int:
    """The forward convolution method (IM2COL, DEPTHWISE or WINOGRAD) for a geometry: `tiles`
    when the kernel library runs its AVX-512 tiles, else the portable (BLAS) path's choices."""
    if g > 1 and c // g == 1:
        return DEPTHWISE
    if not (g == 1 and len(kernel) == 2 and tuple(kernel) == (3, 3) and tuple(stride) == (1, 1)
            and tuple(dilate) == (1, 1)):
        return IM2COL
    if tiles:
        if min(c, f) >= WINOGRAD_TILES_MIN_CHANNELS and out_sp[0] * out_sp[1] >= WINOGRAD_TILES_MIN_POSITIONS:
            return WINOGRAD
        return IM2COL
    if (min(c, f) >= WINOGRAD_MIN_CHANNELS
            and n * ((out_sp[0] + 1) // 2) * ((out_sp[1] + 1) // 2) >= WINOGRAD_MIN_TILES):
        return WINOGRAD
    return IM2COL
