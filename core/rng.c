/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"):
 * counter-based, so the value at (seed, counter) is the same on any backend, thread or
 * rank, and the RNG "state" is just (seed, offset). */
#include <math.h>
#include "core/internal.h"

void volt__philox4x32(uint64_t key, uint32_t ctr[4], uint32_t out[4]) {
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0; c1 = (uint32_t)p1; c2 = n2; c3 = (uint32_t)p0;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* Counter layout: (index lo, index hi, c0 lo, c1 lo); the high halves of c0/c1 fold into
 * the key. c0 is the step offset, c1 the stream (op call) inside the step. */
static void block(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t index, uint32_t out[4]) {
    uint32_t ctr[4] = { (uint32_t)index, (uint32_t)(index >> 32), (uint32_t)c0, (uint32_t)c1 };
    uint64_t key = seed ^ ((c0 >> 32) * 0x9E3779B97F4A7C15ull) ^ ((c1 >> 32) * 0xC2B2AE3D27D4EB4Full);
    volt__philox4x32(key, ctr, out);
}

/* Element k of a stream is lane k % 4 of Philox block k / 4: one block gives four values. */
void volt__rng_uniform4(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t blk, float out[4]) {
    uint32_t r[4];
    block(seed, c0, c1, blk, r);
    for (int l = 0; l < 4; l++) out[l] = (float)(r[l] >> 8) * (1.0f / 16777216.0f);
}


float volt__rng_uniform(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t index) {
    float v[4];
    volt__rng_uniform4(seed, c0, c1, index / 4, v);
    return v[index % 4];
}

float volt__rng_normal(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t index) {
    uint32_t out[4];
    block(seed, c0, c1, index, out);
    double u1 = ((out[0] >> 8) + 1.0) / 16777217.0;   /* (0,1] */
    double u2 = (out[1] >> 8) / 16777216.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}
