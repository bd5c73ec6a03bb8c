/* core/cuda/philox.cuh compiled as host C against the CPU backend's generator: the device
 * Philox stream must give the uniforms of volt__rng_uniform_blocks (the AVX-512 / AVX2 /
 * scalar paths dropout uses) and volt__rng_uniform bit for bit, so masks drawn on "cuda" are
 * the CPU's. Runs without a GPU (the same header text the kernels include). */
#include <stdint.h>
#include "core/internal.h"
#include "core/cuda/philox.cuh"
#include "vtest.h"

/* (seed, c0, c1, first block): small and large counters, high halves set (they fold into
 * the key), a block index crossing 2^32 (the counter's second word) */
static const uint64_t cases[][4] = {
    { 0, 0, 0, 0 },
    { 42, 7, 3, 0 },
    { 42, 7, 4, 0 },
    { 0x123456789ABCDEFull, 1000, 11, 123457 },
    { 5, 0x100000003ull, 2, 9 },
    { 5, 3, 0x700000002ull, 9 },
    { 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFull, 0xFFFFFFF0ull },
    { 99, 12, 1, 0x1FFFFFFF7ull },
};

int main(void) {
    enum { NB = 53 };   /* 3 x 16 (AVX-512) + 5: every vector path and the tail */
    float cpu[4 * NB], dev[4 * NB];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t seed = cases[c][0], c0 = cases[c][1], c1 = cases[c][2], blk = cases[c][3];
        volt__rng_uniform_blocks(seed, c0, c1, blk, NB, cpu);
        uint64_t key = volt_philox_key(seed, c0, c1);
        for (int64_t b = 0; b < NB; b++) volt_philox_uniform4(key, c0, c1, blk + (uint64_t)b, dev + 4 * b);
        int bad = -1;
        for (int i = 0; i < 4 * NB && bad < 0; i++)
            if (memcmp(&cpu[i], &dev[i], sizeof(float))) bad = i;
        CHECK(bad < 0, "case %zu: element %d: cpu %.9g, philox.cuh %.9g", c, bad, bad < 0 ? 0. : cpu[bad],
              bad < 0 ? 0. : dev[bad]);
        /* single elements at odd offsets: the e / 4, e % 4 numbering */
        for (uint64_t e = 4 * blk + 1; e < 4 * blk + 40; e += 7) {
            float a = volt__rng_uniform(seed, c0, c1, e), b = volt_philox_uniform(key, c0, c1, e);
            CHECK(!memcmp(&a, &b, sizeof a), "case %zu element %llu: %.9g vs %.9g", c, (unsigned long long)e, a, b);
        }
    }
    /* the values are uniforms in [0, 1) with 24-bit resolution, not a constant */
    float lo = 1.f, hi = 0.f;
    volt__rng_uniform_blocks(1, 2, 3, 0, NB, cpu);
    for (int i = 0; i < 4 * NB; i++) {
        lo = cpu[i] < lo ? cpu[i] : lo;
        hi = cpu[i] > hi ? cpu[i] : hi;
        CHECK(cpu[i] * 16777216.f == (float)(int32_t)(cpu[i] * 16777216.f), "not a multiple of 2^-24: %.9g", cpu[i]);
    }
    CHECK(lo < 0.1f && hi > 0.9f && hi < 1.f, "range [%g, %g]", lo, hi);
    return vtest_finish();
}
