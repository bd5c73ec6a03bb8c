/* core/cuda/philox.cuh — the Philox-4x32-10 stream of core/rng.c, for CUDA kernels and, the
 * same text compiled as C, for the host test that checks it (tests/test_cuda_philox.c).
 *
 * Bit-identical to the CPU backend's uniforms (core/rng.c, core/cpu/rng_blocks.c):
 *   - element e of a stream (seed, c0 = step offset, c1 = call index) is lane e % 4 of
 *     Philox block e / 4;
 *   - block blk's counter is (blk lo, blk hi, c0 lo, c1 lo); the high halves of c0 and c1
 *     fold into the key: seed ^ (c0 >> 32) * 0x9E3779B97F4A7C15 ^ (c1 >> 32) * 0xC2B2AE3D27D4EB4F;
 *   - a word w becomes the float (w >> 8) * 2^-24 in [0, 1) (exact: 24 bits).
 * Integer math only, so device and host agree bit for bit. On the device the high halves of
 * the products come from __umulhi (one instruction); the host form is the 64-bit product. */
#ifndef VOLT_CUDA_PHILOX_CUH
#define VOLT_CUDA_PHILOX_CUH
#include <stdint.h>

#ifdef __CUDACC__
#define VOLT_PHILOX_FN __host__ __device__ __forceinline__
#else
#define VOLT_PHILOX_FN static inline
#endif

/* The key of stream (seed, c0, c1): core/rng.c's block(). */
VOLT_PHILOX_FN uint64_t volt_philox_key(uint64_t seed, uint64_t c0, uint64_t c1) {
    return seed ^ ((c0 >> 32) * 0x9E3779B97F4A7C15ull) ^ ((c1 >> 32) * 0xC2B2AE3D27D4EB4Full);
}

VOLT_PHILOX_FN uint32_t volt_philox_mulhi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return (uint32_t)(((uint64_t)a * b) >> 32);
#endif
}

/* Ten rounds on counter (x0..x3) with key (k0, k1): volt__philox4x32. */
VOLT_PHILOX_FN void volt_philox_rounds(uint32_t k0, uint32_t k1, uint32_t x[4]) {
    uint32_t c0 = x[0], c1 = x[1], c2 = x[2], c3 = x[3];
    for (int r = 0; r < 10; r++) {
        uint32_t hi0 = volt_philox_mulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = volt_philox_mulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c2 = hi0 ^ c3 ^ k1;
        c1 = lo1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    x[0] = c0; x[1] = c1; x[2] = c2; x[3] = c3;
}

VOLT_PHILOX_FN float volt_philox_unit(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

/* The four uniforms of block blk of stream (key, c0, c1): elements 4 blk .. 4 blk + 3. */
VOLT_PHILOX_FN void volt_philox_uniform4(uint64_t key, uint64_t c0, uint64_t c1, uint64_t blk, float out[4]) {
    uint32_t x[4] = { (uint32_t)blk, (uint32_t)(blk >> 32), (uint32_t)c0, (uint32_t)c1 };
    volt_philox_rounds((uint32_t)key, (uint32_t)(key >> 32), x);
    for (int l = 0; l < 4; l++) out[l] = volt_philox_unit(x[l]);
}

/* The uniform of element e alone (one block for one value: for sparse draws only). */
VOLT_PHILOX_FN float volt_philox_uniform(uint64_t key, uint64_t c0, uint64_t c1, uint64_t e) {
    float u[4];
    volt_philox_uniform4(key, c0, c1, e / 4, u);
    return u[e % 4];
}

#endif
