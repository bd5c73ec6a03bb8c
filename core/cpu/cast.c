/* CPU conversions between f32, bf16 and f16 (volt/dtype.h), and the CAST kernels.
 *
 * Every conversion is branch-free integer/float arithmetic on the bit patterns, so the
 * array loops vectorise (no F16C/AVX512-BF16 needed: the build targets x86-64-v2) and
 * give the same bits as the scalar functions. RNE relies on the default rounding mode.
 * bf16 = f32 >> 16; f16 after F. Giesen's float_to_half_fast3_rtne / half_to_float. */
#include <string.h>
#include "core/cpu/kernels.h"
#include "volt/dtype.h"

#define CONV_PAR_MIN 65536   /* below this many elements a conversion runs on one thread */

/* uint32_t that may alias a float: the loops read and write float arrays through it */
typedef uint32_t __attribute__((may_alias)) u32a;

static inline uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Selects are written as masks (all ones / zero) so the loops if-convert and vectorise. */
static inline uint32_t sel(uint32_t mask, uint32_t a, uint32_t b) { return (mask & a) | (~mask & b); }
static inline uint32_t mask_if(bool c) { return 0u - (uint32_t)c; }

/* f32 bits -> bf16 bits: round to nearest even on the low 16 bits; NaN -> quiet NaN with
 * the sign and top payload bits (rounding could carry a NaN's payload into inf). */
static inline uint16_t f2bf(uint32_t u) {
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t q = (u >> 16) | 0x40u;
    return (uint16_t)sel(0u - (uint32_t)((u & 0x7fffffffu) > 0x7f800000u), q, r);
}

/* f32 bits -> f16 bits. Three candidates, one select:
 *   normal  (2^-14 <= |x| < 65536): rebias the exponent, add 0xfff + lsb, shift: RNE, and a
 *           carry out of the top mantissa makes the exponent 31 = inf (65520 and up);
 *   subnormal (|x| < 2^-14): |x| + 0.5f puts the 10 f16 mantissa bits at the bottom of a
 *           float whose ulp is 2^-24; the FP add rounds to nearest even;
 *   |x| >= 65536: inf, or a quiet NaN keeping the top 10 payload bits. */
static inline uint16_t f2h(uint32_t x) {
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;   /* a - (112 << 23) + 0xfff + odd */
    uint32_t sub = f_bits(bits_f(a) + 0.5f) - 0x3f000000u;
    uint32_t big = sel(mask_if(a > 0x7f800000u), 0x7e00u | ((a >> 13) & 0x3ffu), 0x7c00u);
    uint32_t r = sel(mask_if(a >= 0x47800000u), big, sel(mask_if(a < 0x38800000u), sub, norm));
    return (uint16_t)(r | sign);
}

/* f16 bits -> f32 bits, exact. Subnormals: (mantissa as a float with exponent 2^-14) - 2^-14.
 * NaN payloads are kept and the quiet bit set. */
static inline uint32_t h2f(uint16_t h) {
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    uint32_t e = o & 0x0f800000u;
    uint32_t normal = o + 0x38000000u;
    uint32_t special = (o + 0x70000000u) | (mask_if((o & 0x007fe000u) != 0) & 0x00400000u);
    uint32_t sub = f_bits(bits_f(o + 0x38800000u) - bits_f(0x38800000u));
    uint32_t r = sel(mask_if(e == 0x0f800000u), special, sel(mask_if(e == 0), sub, normal));
    return r | (((uint32_t)h & 0x8000u) << 16);
}

static inline uint32_t bf2f(uint16_t h) { return (uint32_t)h << 16; }

uint16_t volt_f32_to_bf16(float x) { return f2bf(f_bits(x)); }
float volt_bf16_to_f32(uint16_t h) { return bits_f(bf2f(h)); }
uint16_t volt_f32_to_f16(float x) { return f2h(f_bits(x)); }
float volt_f16_to_f32(uint16_t h) { return bits_f(h2f(h)); }

/* The loops read and write the float arrays as u32a: no memcpy in the body, so GCC
 * vectorises them. Each runs in spans of CONV_SPAN elements, one span per call of a
 * function compiled for AVX-512 and AVX2 too (VOLT__SIMD_CLONES: integer bit arithmetic,
 * the same bits on every ISA), the spans split across threads. */
#define CONV_SPAN 16384
#define CONV_LOOP(span_fn, src, dst, n) do { \
    int64_t nsp_ = ((n) + CONV_SPAN - 1) / CONV_SPAN; \
    _Pragma("omp parallel for schedule(static) if ((n) > CONV_PAR_MIN)") \
    for (int64_t c_ = 0; c_ < nsp_; c_++) { \
        int64_t i0_ = c_ * CONV_SPAN, m_ = (n) - i0_ < CONV_SPAN ? (n) - i0_ : CONV_SPAN; \
        span_fn((src) + i0_, (dst) + i0_, m_); \
    } } while (0)

static VOLT__SIMD_CLONES void f2bf_span(const u32a *s, uint16_t *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = f2bf(s[i]);
}
static VOLT__SIMD_CLONES void bf2f_span(const uint16_t *s, u32a *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = bf2f(s[i]);
}
static VOLT__SIMD_CLONES void f2h_span(const u32a *s, uint16_t *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = f2h(s[i]);
}
static VOLT__SIMD_CLONES void h2f_span(const uint16_t *s, u32a *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = h2f(s[i]);
}
static VOLT__SIMD_CLONES void round_bf_span(const u32a *s, u32a *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = bf2f(f2bf(s[i]));
}
static VOLT__SIMD_CLONES void round_h_span(const u32a *s, u32a *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = h2f(f2h(s[i]));
}

void volt_f32_to_bf16_array(const float *src, uint16_t *dst, int64_t n) {
    CONV_LOOP(f2bf_span, (const u32a *)(const void *)src, dst, n);
}

void volt_bf16_to_f32_array(const uint16_t *src, float *dst, int64_t n) {
    CONV_LOOP(bf2f_span, src, (u32a *)(void *)dst, n);
}

void volt_f32_to_f16_array(const float *src, uint16_t *dst, int64_t n) {
    CONV_LOOP(f2h_span, (const u32a *)(const void *)src, dst, n);
}

void volt_f16_to_f32_array(const uint16_t *src, float *dst, int64_t n) {
    CONV_LOOP(h2f_span, src, (u32a *)(void *)dst, n);
}

bool volt_dtype_is_float(volt_dtype dt) { return dt == VOLT_F32 || dt == VOLT_BF16 || dt == VOLT_F16; }

volt_status volt_convert(void *dst, volt_dtype dd, const void *src, volt_dtype sd, int64_t n) {
    if (!volt_dtype_is_float(dd) || !volt_dtype_is_float(sd) || n < 0) return VOLT_ERR_DTYPE;
    if (n == 0) return VOLT_OK;
    if (dd == sd) { memcpy(dst, src, (size_t)n * volt_dtype_size(dd)); return VOLT_OK; }
    if (sd == VOLT_F32) {
        if (dd == VOLT_BF16) volt_f32_to_bf16_array(src, dst, n);
        else volt_f32_to_f16_array(src, dst, n);
        return VOLT_OK;
    }
    if (dd == VOLT_F32) {
        if (sd == VOLT_BF16) volt_bf16_to_f32_array(src, dst, n);
        else volt_f16_to_f32_array(src, dst, n);
        return VOLT_OK;
    }
    /* bf16 <-> f16: through f32 (exact), one element at a time (rare: no scratch) */
    const uint16_t *s = src;
    uint16_t *d = dst;
    if (sd == VOLT_BF16)
        for (int64_t i = 0; i < n; i++) d[i] = f2h(bf2f(s[i]));
    else
        for (int64_t i = 0; i < n; i++) d[i] = f2bf(h2f(s[i]));
    return VOLT_OK;
}

/* ---- cast: y = x as another float dtype; dx += dy (f32 grads) ---------------------------- */
volt_status volt__cpu_CAST_fwd(volt_step *s, volt_node *n) {
    return volt_convert(n->out->data, n->out->dtype, n->in[0]->data, n->in[0]->dtype, volt_tensor_numel(n->out));
}

volt_status volt__cpu_CAST_bwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *dy = n->out->grad;
    float *dx = n->in[0]->grad;
    if (!n->grad_mode[0]) return VOLT_OK;
    VOLT_CPU_GRAD_LOOP(volt__cpu_acc(n, 0), N, CONV_PAR_MIN, dx, dy[k]);
    return VOLT_OK;
}

/* ---- GEMM operands: any float tensor as f32 --------------------------------------------- */
const float *volt__cpu_as_f32(volt_step *s, const volt_tensor *t, int slot) {
    if (t->dtype == VOLT_F32) return t->data;
    int64_t n = volt_tensor_numel(t);
    float *buf = volt__scratch(s, slot, (size_t)n);
    if (buf) volt_convert(buf, VOLT_F32, t->data, t->dtype, n);
    return buf;
}

const float *volt__cpu_round_f32(volt_step *s, const float *x, int64_t n, volt_dtype dt, int slot) {
    if (dt == VOLT_F32) return x;
    float *buf = volt__scratch(s, slot, (size_t)n);
    if (!buf) return NULL;
    u32a *b = (u32a *)(void *)buf;
    const u32a *xs = (const u32a *)(const void *)x;
    if (dt == VOLT_BF16) CONV_LOOP(round_bf_span, xs, b, n);
    else CONV_LOOP(round_h_span, xs, b, n);
    return buf;
}

const uint16_t *volt__cpu_to_bf16(volt_step *s, const float *x, int64_t n, int slot) {
    uint16_t *buf = (uint16_t *)volt__scratch(s, slot, (size_t)(n + 1) / 2);
    if (buf) volt_f32_to_bf16_array(x, buf, n);
    return buf;
}

const uint16_t *volt__cpu_as_bf16(volt_step *s, const volt_tensor *t, int slot) {
    if (t->dtype == VOLT_BF16) return t->data;
    int64_t n = volt_tensor_numel(t);
    uint16_t *buf = (uint16_t *)volt__scratch(s, slot, (size_t)(n + 1) / 2);
    if (buf) volt_convert(buf, VOLT_BF16, t->data, t->dtype, n);
    return buf;
}
