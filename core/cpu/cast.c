/* CPU conversions between f32, bf16 and f16 (volt/dtype.h), and the CAST kernels.
 *
 * Every conversion is branch-free integer/float arithmetic on the bit patterns, so the
 * array loops vectorise (no F16C/AVX512-BF16 needed: the build targets x86-64-v2) and
 * give the same bits as the scalar functions. RNE relies on the default rounding mode.
 * bf16 = f32 >> 16; f16 after F. Giesen's float_to_half_fast3_rtne / half_to_float. */
#include <string.h>
#include "core/cpu/kernels.h"
#include "core/convert.h"
#include "volt/dtype.h"

#define CONV_PAR_MIN 65536   /* below this many elements a conversion runs on one thread */

/* uint32_t that may alias a float: the loops read and write float arrays through it */
typedef uint32_t __attribute__((may_alias)) u32a;

/* the bit conversions themselves: core/convert.h (shared with the parameter math) */

uint16_t volt_f32_to_bf16(float x) { return volt__f2bf(volt__f_bits(x)); }
float volt_bf16_to_f32(uint16_t h) { return volt__bits_f(volt__bf2f(h)); }
uint16_t volt_f32_to_f16(float x) { return volt__f2h(volt__f_bits(x)); }
float volt_f16_to_f32(uint16_t h) { return volt__bits_f(volt__h2f(h)); }

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
    for (int64_t i = 0; i < n; i++) d[i] = volt__f2bf(s[i]);
}
static VOLT__SIMD_CLONES void bf2f_span(const uint16_t *s, u32a *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = volt__bf2f(s[i]);
}
static VOLT__SIMD_CLONES void f2h_span(const u32a *s, uint16_t *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = volt__f2h(s[i]);
}
static VOLT__SIMD_CLONES void h2f_span(const uint16_t *s, u32a *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = volt__h2f(s[i]);
}
static VOLT__SIMD_CLONES void round_bf_span(const u32a *s, u32a *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = volt__bf2f(volt__f2bf(s[i]));
}
static VOLT__SIMD_CLONES void round_h_span(const u32a *s, u32a *d, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = volt__h2f(volt__f2h(s[i]));
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
    if (!dst || !src) return VOLT_ERR_INVALID_ARG;
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
        for (int64_t i = 0; i < n; i++) d[i] = volt__f2h(volt__bf2f(s[i]));
    else
        for (int64_t i = 0; i < n; i++) d[i] = volt__f2bf(volt__h2f(s[i]));
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

/* ---- GEMM B operands packed for oneDNN's bf16 kernels ----------------------------------- */
/* oneDNN's brgemm matmul on AVX512-BF16 reads B (K x N) in the blocked layout BA16a64b2a
 * (core/cpu/kernels.h, volt__cpu_packed_at); given B so, the primitive skips its own
 * per-call copy of B (core/cpu/gemm.c, volt__cpu_gemm_op.b_packed). Tiles are packed whole,
 * one per loop iteration; the tile functions below write a tile's words in order. */
#define PK_K VOLT_PACK_K
#define PK_N VOLT_PACK_N
#define PK_TILE (PK_K * PK_N)

int64_t volt__cpu_packed_b_elems(int64_t K, int64_t N) {
    return (K + PK_K - 1) / PK_K * PK_K * ((N + PK_N - 1) / PK_N * PK_N);
}

static inline uint32_t pk_f32(const float *p, int64_t i) { return volt__f2bf(volt__f_bits(p[i])); }

/* one full tile of B (k, n) = src[k ld + n]: two rows of 64 interleaved per k-pair */
VOLT__SIMD_CLONES
static void pack_tile_n_f32(const float *src, int64_t ld, uint32_t *out) {
    for (int kp = 0; kp < PK_K / 2; kp++) {
        const float *r0 = src + (int64_t)(2 * kp) * ld, *r1 = r0 + ld;
        uint32_t *o = out + kp * PK_N;
        for (int nn = 0; nn < PK_N; nn++) o[nn] = pk_f32(r0, nn) | pk_f32(r1, nn) << 16;
    }
}

VOLT__SIMD_CLONES
static void pack_tile_n_bf16(const uint16_t *src, int64_t ld, uint32_t *out) {
    for (int kp = 0; kp < PK_K / 2; kp++) {
        const uint16_t *r0 = src + (int64_t)(2 * kp) * ld, *r1 = r0 + ld;
        uint32_t *o = out + kp * PK_N;
        for (int nn = 0; nn < PK_N; nn++) o[nn] = (uint32_t)r0[nn] | (uint32_t)r1[nn] << 16;
    }
}

/* One full tile of B (k, n) = src[n ld + k]: each row of src gives a column of the tile, so
 * the pack transposes. 16 rows at a time: each row's 32 floats become 16 k-pair words (the
 * loop of pack_tile_n_f32's shape, which vectorises), and the 16 x 16 words are transposed
 * in registers (4 stages of two-vector shuffles, stage s swapping bit s of row and column),
 * then stored as 16 runs of 16 words: storing word by word was 1.7x slower. GCC's / clang's
 * vector extensions: AVX-512 permutes in the x86-64-v4 clone, narrower ones elsewhere. */
typedef uint32_t pk_v16 __attribute__((vector_size(64)));
/* a two-vector shuffle with constant lane indices (0-15: a, 16-31: b), GCC's or clang's builtin */
#if defined(__clang__)
#define PK_SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define PK_SHUF(a, b, ...) __builtin_shuffle(a, b, (pk_v16){ __VA_ARGS__ })
#endif
#define PK_LANES(F, s) F(s, 0), F(s, 1), F(s, 2), F(s, 3), F(s, 4), F(s, 5), F(s, 6), F(s, 7), F(s, 8), F(s, 9), \
    F(s, 10), F(s, 11), F(s, 12), F(s, 13), F(s, 14), F(s, 15)
#define PK_L(s, j) (((j) & (s)) ? 16 + (j) - (s) : (j))   /* row i keeps its lanes without bit s, takes row i+s's */
#define PK_H(s, j) (((j) & (s)) ? 16 + (j) : (j) + (s))
#define PK_STAGE(m, s) \
    for (int i_ = 0; i_ < 16; i_++) \
        if (!(i_ & (s))) { \
            pk_v16 a_ = (m)[i_], b_ = (m)[i_ + (s)]; \
            (m)[i_] = PK_SHUF(a_, b_, PK_LANES(PK_L, s)); \
            (m)[i_ + (s)] = PK_SHUF(a_, b_, PK_LANES(PK_H, s)); \
        }

VOLT__SIMD_CLONES
static void pack_tile_t_f32(const float *src, int64_t ld, uint32_t *out) {
    for (int nb = 0; nb < PK_N; nb += 16) {
        pk_v16 m[16];
        for (int r = 0; r < 16; r++) {   /* row nb + r: its 32 k as 16 pair words */
            const float *row = src + (int64_t)(nb + r) * ld;
            uint32_t w[PK_K / 2];
            for (int kp = 0; kp < PK_K / 2; kp++) w[kp] = pk_f32(row, 2 * kp) | pk_f32(row, 2 * kp + 1) << 16;
            memcpy(&m[r], w, sizeof w);
        }
        PK_STAGE(m, 8)
        PK_STAGE(m, 4)
        PK_STAGE(m, 2)
        PK_STAGE(m, 1)
        for (int kp = 0; kp < PK_K / 2; kp++) memcpy(out + kp * PK_N + nb, &m[kp], sizeof m[kp]);
    }
}

/* a tile cut by the edge of B: element by element, zeros outside */
static void pack_tile_edge(const void *src, bool bf16_src, int64_t ld, bool trans, int64_t kw, int64_t nw,
                           uint16_t *out) {
    for (int kp = 0; kp < PK_K / 2; kp++)
        for (int nn = 0; nn < PK_N; nn++)
            for (int kk = 0; kk < 2; kk++) {
                int64_t k = 2 * kp + kk, i = trans ? nn * ld + k : k * ld + nn;
                uint16_t v = 0;
                if (k < kw && nn < nw)
                    v = bf16_src ? ((const uint16_t *)src)[i] : (uint16_t)pk_f32(src, i);
                out[(kp * PK_N + nn) * 2 + kk] = v;
            }
}

void volt__cpu_pack_b_bf16(const void *src, volt_dtype sdt, int64_t K, int64_t N, int64_t ld, bool trans,
                           uint16_t *dst) {
    const int64_t kt = (K + PK_K - 1) / PK_K, nt = (N + PK_N - 1) / PK_N;
    const bool bf = sdt == VOLT_BF16;
    const size_t es = bf ? 2 : 4;
    #pragma omp parallel for schedule(static) if (K * N > CONV_PAR_MIN)
    for (int64_t t = 0; t < kt * nt; t++) {
        int64_t nb = t / kt, kb = t % kt, k0 = kb * PK_K, n0 = nb * PK_N;
        const char *s = (const char *)src + (size_t)(trans ? n0 * ld + k0 : k0 * ld + n0) * es;
        uint16_t *o = dst + t * PK_TILE;
        if (k0 + PK_K > K || n0 + PK_N > N || (trans && bf))
            pack_tile_edge(s, bf, ld, trans, K - k0 < PK_K ? K - k0 : PK_K, N - n0 < PK_N ? N - n0 : PK_N, o);
        else if (trans)
            pack_tile_t_f32((const float *)(const void *)s, ld, (uint32_t *)(void *)o);
        else if (bf)
            pack_tile_n_bf16((const uint16_t *)(const void *)s, ld, (uint32_t *)(void *)o);
        else
            pack_tile_n_f32((const float *)(const void *)s, ld, (uint32_t *)(void *)o);
    }
}
