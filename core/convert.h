/* core/convert.h — the f32 <-> bf16/f16 bit conversions as inline functions, for loops
 * that convert a span at a time inside their own parallel region (the optimizer's 16-bit
 * update, core/cpu/param_math.c) instead of calling volt_convert, whose OpenMP region per
 * call costs more than a 2048-element span. One copy of the formulas for every backend,
 * so a value rounds to the same bits everywhere: core/cpu/cast.c's array conversions use
 * them, and the cuda kernels compile the same functions for the device (core/cuda/
 * common.cuh; VOLT_CONVERT_FN is __host__ __device__ under nvcc). RNE relies on the
 * default rounding mode (the f16 subnormal case's float add; nvcc does not contract an add
 * alone); selects are masks so the loops if-convert and vectorise. */
#ifndef VOLT_CONVERT_H
#define VOLT_CONVERT_H
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define VOLT_CONVERT_FN static __host__ __device__ __forceinline__
#else
#define VOLT_CONVERT_FN static inline
#endif

VOLT_CONVERT_FN uint32_t volt__f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
VOLT_CONVERT_FN float volt__bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
VOLT_CONVERT_FN uint32_t volt__sel(uint32_t mask, uint32_t a, uint32_t b) { return (mask & a) | (~mask & b); }
VOLT_CONVERT_FN uint32_t volt__mask_if(bool c) { return 0u - (uint32_t)c; }

/* f32 bits -> bf16 bits: round to nearest even; NaN -> quiet NaN with the sign and top
 * payload bits. */
VOLT_CONVERT_FN uint16_t volt__f2bf(uint32_t u) {
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t q = (u >> 16) | 0x40u;
    return (uint16_t)volt__sel(0u - (uint32_t)((u & 0x7fffffffu) > 0x7f800000u), q, r);
}
/* f32 bits -> f16 bits (F. Giesen's float_to_half_fast3_rtne). Three candidates, one select:
 *   normal  (2^-14 <= |x| < 65536): rebias the exponent, add 0xfff + lsb, shift: RNE, and a
 *           carry out of the top mantissa makes the exponent 31 = inf (65520 and up);
 *   subnormal (|x| < 2^-14): |x| + 0.5f puts the 10 f16 mantissa bits at the bottom of a
 *           float whose ulp is 2^-24; the FP add rounds to nearest even;
 *   |x| >= 65536: inf, or a quiet NaN keeping the top 10 payload bits. */
VOLT_CONVERT_FN uint16_t volt__f2h(uint32_t x) {
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    uint32_t sub = volt__f_bits(volt__bits_f(a) + 0.5f) - 0x3f000000u;
    uint32_t big = volt__sel(volt__mask_if(a > 0x7f800000u), 0x7e00u | ((a >> 13) & 0x3ffu), 0x7c00u);
    uint32_t r = volt__sel(volt__mask_if(a >= 0x47800000u), big, volt__sel(volt__mask_if(a < 0x38800000u), sub, norm));
    return (uint16_t)(r | sign);
}
/* f16 bits -> f32 bits, exact; NaN payloads kept, quiet bit set. */
VOLT_CONVERT_FN uint32_t volt__h2f(uint16_t h) {
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    uint32_t e = o & 0x0f800000u;
    uint32_t normal = o + 0x38000000u;
    uint32_t special = (o + 0x70000000u) | (volt__mask_if((o & 0x007fe000u) != 0) & 0x00400000u);
    uint32_t sub = volt__f_bits(volt__bits_f(o + 0x38800000u) - volt__bits_f(0x38800000u));
    uint32_t r = volt__sel(volt__mask_if(e == 0x0f800000u), special, volt__sel(volt__mask_if(e == 0), sub, normal));
    return r | (((uint32_t)h & 0x8000u) << 16);
}
VOLT_CONVERT_FN uint32_t volt__bf2f(uint16_t h) { return (uint32_t)h << 16; }
#endif
