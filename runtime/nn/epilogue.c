/* Library epilogues for the activations dense and convolution layers end with most often
 * besides ReLU (gemm.c symjit_nn_epi_relu): sigmoid and tanh, in place over floats
 * [begin, end) of args[0] into args[1] (a symjit_kernel_fn, called on each finished block of
 * the output). lower_gemm.py uses them where an epilogue is exactly that activation of the
 * result, so no kernel is generated for it: LLVM spent 12-14 ms optimising and emitting one such
 * vectorized loop (exp or tanh inlined), most of a small model's compile time.
 *
 * The arithmetic is symjit's own float32 exp and tanh (codegen/llvm/vecmath.py m_exp, m_tanh)
 * step for step: the same clamps, the same two-part ln2 reduction, the same minimax
 * polynomials evaluated as even and odd Horner chains in r*r joined by one FMA, and the same
 * power-of-two scaling by exponent bits, so the library and generated epilogues agree (to the
 * last bit where the compiler contracts nothing else). NaN propagates; no float-to-int
 * conversion of a NaN happens (integers come from the 1.5*2^23 bit trick).
 * Part of the kernel library: compiled only as part of nnkernels.c (one translation unit). */

#define EPI_LOG2E 1.4426950408889634f
#define EPI_LN2_HI 0.693359375f
#define EPI_LN2_LO -2.1219444005469057e-4f
#define EPI_MAGIC 12582912.0f   /* 1.5 * 2^23 */

static inline int32_t epi_bits(float x) { int32_t i; memcpy(&i, &x, 4); return i; }
static inline float epi_float(int32_t i) { float x; memcpy(&x, &i, 4); return x; }

/* the integer value of an integral float k with |k| < 2**22 (vecmath _float_to_small_int) */
static inline int32_t epi_int(float k) { return epi_bits(k + EPI_MAGIC) - epi_bits(EPI_MAGIC); }

/* 2**k for an integer k within the normal exponent range (vecmath _pow2) */
static inline float epi_pow2(int32_t k) { return epi_float((int32_t)((uint32_t)(k + 127) << 23)); }

/* e**x (vecmath m_exp, float32) */
static inline float epi_exp(float x) {
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    float k = rintf(xc * EPI_LOG2E);
    float r = fmaf(-k, EPI_LN2_HI, xc);
    r = fmaf(-k, EPI_LN2_LO, r);
    float r2 = r * r;   /* EXP_F32: even (c0 c2 c4 c6) and odd (c1 c3 c5) chains in r*r */
    float even = fmaf(fmaf(fmaf(0.001381461275741458f, r2, 0.04166838899254799f), r2, 0.4999999403953552f), r2, 1.0f);
    float odd = fmaf(fmaf(0.008368710055947304f, r2, 0.1666652113199234f), r2, 1.0f);
    float p = fmaf(odd, r, even);
    /* split so that 2**k never overflows on its own: k1 = floor(k / 2) (an arithmetic shift) */
    int32_t ki = epi_int(k), k1 = ki >> 1;
    return p * epi_pow2(k1) * epi_pow2(ki - k1);
}

/* tanh(x) = u / (u + 2), u = expm1(2|x|), |x| clamped at 9.5 (vecmath m_tanh, float32) */
static inline float epi_tanh(float x) {
    float a = fabsf(x);
    a = a > 9.5f ? 9.5f : a;
    float xc = a * 2.0f;
    float y = xc * EPI_LOG2E;
    float k = rintf(y);
    float r = fmaf(-k, EPI_LN2_HI, xc);
    r = fmaf(-k, EPI_LN2_LO, r);
    float r2 = r * r;   /* EXPM1_F32: even (c0 c2 c4) and odd (c1 c3 c5) chains in r*r */
    float even = fmaf(fmaf(0.008366424590349197f, r2, 0.1666654497385025f), r2, 1.0f);
    float odd = fmaf(fmaf(0.00139405089430511f, r2, 0.04166640341281891f), r2, 0.5f);
    float u = r * fmaf(odd, r, even);
    float s = epi_pow2(epi_int(k));
    float big = fmaf(s, u, s - 1.0f);
    float e = y <= 0.5f ? u : big;
    return copysignf(e / (e + 2.0f), x);
}

NN_CLONES
NN_API void symjit_nn_epi_sigmoid(int64_t begin, int64_t end, void **args) {
    const float *x = (const float *)args[0];
    float *y = (float *)args[1];
    for (int64_t i = begin; i < end; i++) y[i] = 1.0f / (1.0f + epi_exp(-x[i]));
}

NN_CLONES
NN_API void symjit_nn_epi_tanh(int64_t begin, int64_t end, void **args) {
    const float *x = (const float *)args[0];
    float *y = (float *)args[1];
    for (int64_t i = begin; i < end; i++) y[i] = epi_tanh(x[i]);
}
