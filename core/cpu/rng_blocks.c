/* The CPU's vectorised Philox blocks (core/rng.h volt__rng_uniform_blocks): dropout masks in
 * AVX-512 / AVX2 lanes where the CPU has them, else one block at a time. A CPU specific: the
 * generator itself (core/rng.c) is the same on every backend. */
#include "core/internal.h"
/* volt__rng_uniform_blocks: the same Philox rounds as volt__philox4x32, 16 blocks at a time in
 * AVX-512 lanes or 8 in AVX2 lanes where the CPU has them (32x32->64-bit multiplies:
 * vpmuludq on even and odd lanes), else one block at a time; integer math, so all give the
 * same bits. */
static void blocks_scalar(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t blk, int64_t nblk, float *out) {
    for (int64_t i = 0; i < nblk; i++) volt__rng_uniform4(seed, c0, c1, blk + (uint64_t)i, out + 4 * i);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_BLOCKS_AVX2 1
/* (hi, lo) 32-bit halves of x * m in every lane; m = (M, M, ...) as 64-bit lanes */
__attribute__((target("avx2"))) static inline void mul_hilo(__m256i x, __m256i m, __m256i *hi, __m256i *lo) {
    __m256i pe = _mm256_mul_epu32(x, m), po = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
    *lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}

__attribute__((target("avx2")))
static void blocks_avx2(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t blk, int64_t nblk, float *out) {
    uint64_t key = seed ^ ((c0 >> 32) * 0x9E3779B97F4A7C15ull) ^ ((c1 >> 32) * 0xC2B2AE3D27D4EB4Full);
    const __m256i m0 = _mm256_set1_epi64x(0xD2511F53), m1 = _mm256_set1_epi64x(0xCD9E8D57);
    const __m256 unit = _mm256_set1_ps(1.0f / 16777216.0f);
    for (int64_t b = 0; b < nblk; b += 8) {
        uint32_t lo[8], hi[8];
        for (int l = 0; l < 8; l++) {
            uint64_t idx = blk + (uint64_t)b + (uint64_t)l;
            lo[l] = (uint32_t)idx;
            hi[l] = (uint32_t)(idx >> 32);
        }
        __m256i x0 = _mm256_loadu_si256((const __m256i *)lo), x1 = _mm256_loadu_si256((const __m256i *)hi);
        __m256i x2 = _mm256_set1_epi32((int)(uint32_t)c0), x3 = _mm256_set1_epi32((int)(uint32_t)c1);
        uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
        for (int r = 0; r < 10; r++) {
            __m256i h0, l0, h1, l1;
            mul_hilo(x0, m0, &h0, &l0);
            mul_hilo(x2, m1, &h1, &l1);
            x0 = _mm256_xor_si256(_mm256_xor_si256(h1, x1), _mm256_set1_epi32((int)k0));
            x2 = _mm256_xor_si256(_mm256_xor_si256(h0, x3), _mm256_set1_epi32((int)k1));
            x1 = l1;
            x3 = l0;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        /* words (x0..x3) of 8 blocks -> 8 blocks of 4 words, as floats in [0, 1) */
        __m256i t0 = _mm256_unpacklo_epi32(x0, x1), t1 = _mm256_unpackhi_epi32(x0, x1);
        __m256i t2 = _mm256_unpacklo_epi32(x2, x3), t3 = _mm256_unpackhi_epi32(x2, x3);
        __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);   /* blocks 0,4 | 1,5 */
        __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);   /* blocks 2,6 | 3,7 */
        __m256i v[4] = { _mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u2, u3, 0x20),
                         _mm256_permute2x128_si256(u0, u1, 0x31), _mm256_permute2x128_si256(u2, u3, 0x31) };
        float tmp[32];
        int64_t m = nblk - b < 8 ? nblk - b : 8;
        float *dst = m == 8 ? out + 4 * b : tmp;
        for (int j = 0; j < 4; j++)
            _mm256_storeu_ps(dst + 8 * j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v[j], 8)), unit));
        if (m < 8) for (int64_t j = 0; j < 4 * m; j++) out[4 * b + j] = tmp[j];
    }
}

/* The same, 16 blocks per pass in AVX-512 lanes (where the CPU has AVX-512F); the last
 * nblk % 16 blocks go to blocks_avx2. */
#define HAVE_BLOCKS_AVX512 1
__attribute__((target("avx512f"))) static inline void mul_hilo16(__m512i x, __m512i m, __m512i *hi, __m512i *lo) {
    __m512i pe = _mm512_mul_epu32(x, m), po = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
    *lo = _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
}

__attribute__((target("avx512f")))
static int64_t blocks_avx512(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t blk, int64_t nblk, float *out) {
    uint64_t key = seed ^ ((c0 >> 32) * 0x9E3779B97F4A7C15ull) ^ ((c1 >> 32) * 0xC2B2AE3D27D4EB4Full);
    const __m512i m0 = _mm512_set1_epi64(0xD2511F53), m1 = _mm512_set1_epi64(0xCD9E8D57);
    const __m512 unit = _mm512_set1_ps(1.0f / 16777216.0f);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int64_t b = 0;
    for (; b + 16 <= nblk; b += 16) {
        uint64_t i0 = blk + (uint64_t)b;
        /* block indices i0 + l: low words, and high words (+1 past a 2^32 wrap) */
        __m512i x0 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)i0), lane);
        __mmask16 wrap = _mm512_cmplt_epu32_mask(x0, _mm512_set1_epi32((int)(uint32_t)i0));
        __m512i x1 = _mm512_mask_add_epi32(_mm512_set1_epi32((int)(uint32_t)(i0 >> 32)), wrap,
                                           _mm512_set1_epi32((int)(uint32_t)(i0 >> 32)), _mm512_set1_epi32(1));
        __m512i x2 = _mm512_set1_epi32((int)(uint32_t)c0), x3 = _mm512_set1_epi32((int)(uint32_t)c1);
        uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
        for (int r = 0; r < 10; r++) {
            __m512i h0, l0, h1, l1;
            mul_hilo16(x0, m0, &h0, &l0);
            mul_hilo16(x2, m1, &h1, &l1);
            x0 = _mm512_xor_si512(_mm512_xor_si512(h1, x1), _mm512_set1_epi32((int)k0));
            x2 = _mm512_xor_si512(_mm512_xor_si512(h0, x3), _mm512_set1_epi32((int)k1));
            x1 = l1;
            x3 = l0;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        /* words (x0..x3) of 16 blocks -> floats, then 16 blocks of 4 in order */
        __m512 f0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(x0, 8)), unit);
        __m512 f1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(x1, 8)), unit);
        __m512 f2 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(x2, 8)), unit);
        __m512 f3 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(x3, 8)), unit);
        __m512 a01l = _mm512_unpacklo_ps(f0, f1), a01h = _mm512_unpackhi_ps(f0, f1);
        __m512 a23l = _mm512_unpacklo_ps(f2, f3), a23h = _mm512_unpackhi_ps(f2, f3);
        /* 128-bit lane g of bj holds block 4 g + j */
        __m512 b0 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a01l), _mm512_castps_pd(a23l)));
        __m512 b1 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a01l), _mm512_castps_pd(a23l)));
        __m512 b2 = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a01h), _mm512_castps_pd(a23h)));
        __m512 b3 = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a01h), _mm512_castps_pd(a23h)));
        __m512 t0 = _mm512_shuffle_f32x4(b0, b1, 0x44), t1 = _mm512_shuffle_f32x4(b2, b3, 0x44);   /* 0 4 1 5 | 2 6 3 7 */
        __m512 t2 = _mm512_shuffle_f32x4(b0, b1, 0xEE), t3 = _mm512_shuffle_f32x4(b2, b3, 0xEE);   /* 8 12 9 13 | 10 14 11 15 */
        float *dst = out + 4 * b;
        _mm512_storeu_ps(dst, _mm512_shuffle_f32x4(t0, t1, 0x88));
        _mm512_storeu_ps(dst + 16, _mm512_shuffle_f32x4(t0, t1, 0xDD));
        _mm512_storeu_ps(dst + 32, _mm512_shuffle_f32x4(t2, t3, 0x88));
        _mm512_storeu_ps(dst + 48, _mm512_shuffle_f32x4(t2, t3, 0xDD));
    }
    return b;
}
#endif

void volt__rng_uniform_blocks(uint64_t seed, uint64_t c0, uint64_t c1, uint64_t blk, int64_t nblk, float *out) {
#ifdef HAVE_BLOCKS_AVX512
    if (nblk >= 16 && __builtin_cpu_supports("avx512f")) {
        int64_t done = blocks_avx512(seed, c0, c1, blk, nblk, out);
        blk += (uint64_t)done;
        nblk -= done;
        out += 4 * done;
    }
#endif
#ifdef HAVE_BLOCKS_AVX2
    if (__builtin_cpu_supports("avx2")) {
        blocks_avx2(seed, c0, c1, blk, nblk, out);
        return;
    }
#endif
    blocks_scalar(seed, c0, c1, blk, nblk, out);
}
