/* A fast 128-bit fingerprint of a byte buffer, for the whole-plan cache (codegen/plan_cache.py):
 * it keys compiled plans by the values of their bound parameters and checks the parameter blobs
 * read back from disk, so it must run near memory speed (hundreds of MB per model).
 *
 * Not cryptographic: it detects accidental change (a different weight, a truncated or corrupt
 * file), not a forgery; the cache's entries are authenticated separately (codegen/cache.py).
 * Construction: eight independent 64-bit lanes over 64-byte stripes, each lane updated with the
 * xxHash64 round acc = rotl(acc + x * P2, 31) * P1, which is a bijection of the word x for a
 * fixed acc and of acc for a fixed x: changing any one word of the input changes its lane's
 * final state. The tail is zero-padded into one more stripe, the length is mixed in, and the
 * lanes are folded twice with different constants into two 64-bit halves. Deterministic across
 * runs and machines of the same byte order (the words are read little-endian on x86-64). */
#include <stdint.h>
#include <string.h>

#include "symjit_internal.h"

#define FP_P1 0x9E3779B185EBCA87ULL
#define FP_P2 0xC2B2AE3D27D4EB4FULL
#define FP_P3 0x165667B19E3779F9ULL
#define FP_P4 0x85EBCA77C2B2AE63ULL
#define FP_P5 0x27D4EB2F165667C5ULL

static inline uint64_t fp_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t fp_round(uint64_t acc, uint64_t x) {
    acc += x * FP_P2;
    return fp_rotl(acc, 31) * FP_P1;
}

static inline uint64_t fp_avalanche(uint64_t h) {
    h ^= h >> 33;
    h *= FP_P2;
    h ^= h >> 29;
    h *= FP_P3;
    h ^= h >> 32;
    return h;
}

static void fp_stripe(uint64_t v[8], const unsigned char *p) {
    for (int i = 0; i < 8; i++) {
        uint64_t x;
        memcpy(&x, p + 8 * i, 8);
        v[i] = fp_round(v[i], x);
    }
}

void symjit_fingerprint(const void *data, int64_t n, uint64_t seed, uint64_t out[2]) {
    const unsigned char *p = (const unsigned char *)data;
    uint64_t v[8];
    for (int i = 0; i < 8; i++) v[i] = seed + FP_P1 * (uint64_t)(2 * i + 1) + FP_P5;
    int64_t left = n < 0 ? 0 : n;
    while (left >= 64) {
        fp_stripe(v, p);
        p += 64;
        left -= 64;
    }
    unsigned char tail[64] = {0};
    memcpy(tail, p, (size_t)left);
    tail[63] ^= (unsigned char)(0x80 | left);   /* the tail's length is part of its stripe */
    fp_stripe(v, tail);
    uint64_t h1 = (uint64_t)n * FP_P4 ^ seed, h2 = (uint64_t)n * FP_P3 + seed;
    for (int i = 0; i < 8; i++) {
        h1 = fp_rotl(h1 ^ fp_round(0, v[i]), 27) * FP_P1 + FP_P4;
        h2 = fp_rotl(h2 + fp_round(FP_P5, v[7 - i]), 29) * FP_P3 + FP_P2;
    }
    out[0] = fp_avalanche(h1);
    out[1] = fp_avalanche(h2 ^ out[0]);
}
