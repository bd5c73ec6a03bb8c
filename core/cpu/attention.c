/* CPU scaled dot-product attention, fused.
 *
 * q (B,H,Tq,D), k and v (B,H,Tk,D), out (B,H,Tq,D); packed (volt_attention_heads): q
 * (B,Tq,H*D), k and v (B,Tk,H*D), out (B,Tq,H*D), head h in columns [hD, (h+1)D). The
 * kernels see a head's rows through a row stride (D, or H*D packed) and a block offset
 * (attn_block): the tile products read them in place, so both layouts give the same
 * bits. Work goes by (b, h) block and, inside
 * a block, by tiles of QTILE query rows: S = scale q k^T and P = softmax(S) for one tile live
 * only in a per-thread scratch (QTILE x Tk floats), so no (Tq, Tk) matrix is ever kept.
 * Forward saves the per-row logsumexp lse (B,H,Tq) for backward, which recomputes
 * P = exp(S - lse) tile by tile. Keys past the last unmasked one of a batch row (padding),
 * and for causal attention past the tile's last query, are left out of the GEMMs.
 *
 * Attention dropout (volt_attr_attention: dropout > 0, call = the step's RNG call index): the softmax
 * probabilities A are multiplied by the factors W = (u >= p) / (1 - p), u the uniform of
 * element ((b H + h) Tq + i) Tk + j of the call's Philox stream — volt_dropout's numbering
 * on (B, H, Tq, Tk) probabilities, so the mask is the unfused path's, element for element.
 * Forward draws u row by row after the softmax and, in a training step, keeps the keep
 * test (u >= p) as bits (one bit per visible (row, key): B H Tq ceil(Tk/64) words in the
 * arena, 4.7 MB at 12 x 12 x 512 x 512), which backward reads instead of redrawing the
 * stream. With Z = A * W and o = Z v:
 *   dv = Z^T do;  dA = (do v^T) * W;  dS = A * (dA - rowsum(dA * A)),
 * and rowsum(dA * A) = rowsum((do v^T) * Z) = rowsum(do * o), as without dropout.
 *
 * Each (b, h) block is owned by one thread (its slices of dq, dk, dv included), tiles are
 * visited in order, so results do not depend on the thread count or schedule. OpenBLAS
 * (OpenMP build) runs single-threaded when called inside our parallel region.
 *
 * Native bf16 tiles (compute dtype bf16 on a CPU where volt__cpu_bf16_native(), core/cpu/
 * gemm.c): q, k, v are converted to bf16 once per step (forward; a training step keeps the
 * copies in the arena for backward, attn_saved), dO once in backward, and every tile GEMM takes
 * bf16 operands (f32 accumulation, f32 S / dP / dq / dk / dv) through oneDNN, as a GPU's
 * flash attention does: the probabilities P (times the dropout factors) and dS are rounded
 * to bf16 for the products that read them (a per-thread tile buffer), the softmax and its
 * gradient stay in f32. A tile's key count is rounded up to a multiple of KEY_ROUND (at
 * most Tk; the extra keys are masked or past the causal limit, so their P is exactly 0):
 * the GEMM shapes, hence oneDNN primitives, stay few with padded batches. Elsewhere (f32,
 * f16, no AVX512-BF16) the f32 tiles below, 16-bit operands emulated by rounding. */
#include <math.h>
#include <cblas.h>
#include <omp.h>
#include <string.h>
#include "core/cpu/kernels.h"
#include "core/convert.h"
#include "volt/dtype.h"

#define QTILE 64          /* query rows per tile */
#define KEY_ROUND 64      /* native bf16 tiles: key counts rounded up to this (at most Tk) */

/* The row loops (exp, max, sums) are compiled for AVX-512 and AVX2 too and picked at load
 * time; the library itself targets x86-64-v2 (SSE4.2). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VOLT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VOLT_SIMD_CLONES
#endif

typedef struct attn_dims {
    int64_t B, H, Tq, Tk, D;
    bool causal;
    bool bf;                          /* native bf16 tiles: q, k, v, dO are bf16 bits */
    int64_t ld;                       /* row stride of q, k, v, out and their grads: D, or H*D packed */
    bool packed;
    float scale;
    float p;                          /* attention dropout, 0 = none */
    uint64_t seed, offset, call;      /* its Philox stream (volt_dropout's counters) */
} attn_dims;

static attn_dims dims_of(const volt_step *s, const volt_node *n) {
    const volt_attr_attention *at = &n->attr.attention;
    bool bf = at->compute == VOLT_BF16 && volt__cpu_bf16_native();
    return (attn_dims){ at->B, at->H, at->Tq, at->Tk, at->D, at->causal, bf, at->packed ? at->H * at->D : at->D,
                        at->packed, at->scale, at->dropout, s->seed, s->rng_offset, at->call };
}

/* Element offset of row 0 of block bh (= b H + h) in a tensor of T rows per head. */
static int64_t attn_block(const attn_dims *a, int64_t bh, int64_t T) {
    return a->packed ? (bh / a->H) * T * a->ld + (bh % a->H) * a->D : bh * T * a->D;
}

/* ---- tile GEMMs: f32, or bf16 operands (bits) when a->bf ----------------------------- */
/* Operands are addressed in elements: f32 or bf16 by a->bf. */
static inline const void *elem(const attn_dims *a, const void *p, int64_t i) {
    return a->bf ? (const void *)((const uint16_t *)p + i) : (const void *)((const float *)p + i);
}

static void tile_gemm(const attn_dims *a, char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const void *A, int64_t lda, const void *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (a->bf) volt__cpu_gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else volt__cpu_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* x (n) as the operand of a tile GEMM: itself in f32, else rounded to bf16 bits into hb
 * (RNE, volt_f32_to_bf16's bits; serial: we are inside the tile loop's parallel region). */
VOLT_SIMD_CLONES
static void tile_bf16(const uint32_t *x, uint16_t *hb, int64_t n) {
    for (int64_t t = 0; t < n; t++) hb[t] = volt__f2bf(x[t]);
}

static const void *tile_operand(const attn_dims *a, const float *x, int64_t n, uint16_t *hb) {
    if (!a->bf) return x;
    tile_bf16((const uint32_t *)(const void *)x, hb, n);
    return hb;
}

/* A tensor of the node as the tiles' operand: bf16 bits (scratch slot) when a->bf, else
 * f32 rounded to the compute dtype (f32: itself). */
static const void *attn_operand(volt_step *s, const attn_dims *a, const float *x, int64_t n, volt_dtype cd,
                                int slot) {
    return a->bf ? (const void *)volt__cpu_to_bf16(s, x, n, slot) : (const void *)volt__cpu_round_f32(s, x, n, cd, slot);
}

/* ---- the dropout keep bits: bit j of a row = (u[j] >= p), 64 keys per word ------------ */
static int64_t keep_words(const attn_dims *a) { return (a->Tk + 63) / 64; }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ATTN_AVX512 1
__attribute__((target("avx512f"))) static void keep_pack_avx512(const float *u, int64_t n, float pd, uint64_t *bits) {
    const __m512 p = _mm512_set1_ps(pd);
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) {
        uint64_t w = 0;
        for (int g = 0; g < 4; g++)
            w |= (uint64_t)_mm512_cmp_ps_mask(_mm512_loadu_ps(u + j + 16 * g), p, _CMP_GE_OQ) << (16 * g);
        bits[j / 64] = w;
    }
    if (j < n) {
        uint64_t w = 0;
        for (int64_t t = j; t < n; t++) w |= (uint64_t)(u[t] >= pd) << (t - j);
        bits[j / 64] = w;
    }
}
__attribute__((target("avx512f"))) static void keep_unpack_avx512(const uint64_t *bits, int64_t n, float scale, float *w) {
    const __m512 s = _mm512_set1_ps(scale);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(w + j, _mm512_maskz_mov_ps((__mmask16)(bits[j / 64] >> (j & 63)), s));
    for (; j < n; j++) w[j] = (float)((bits[j / 64] >> (j & 63)) & 1u) * scale;
}
static bool have_avx512(void) {
    static int have = -1;   /* a benign race: every thread computes the same value */
    if (have < 0) have = __builtin_cpu_supports("avx512f") ? 1 : 0;
    return have == 1;
}
#endif

/* bits of u[0:n] >= pd (n <= 64 * words) */
static void keep_pack(const float *u, int64_t n, float pd, uint64_t *bits) {
#ifdef ATTN_AVX512
    if (have_avx512()) { keep_pack_avx512(u, n, pd, bits); return; }
#endif
    for (int64_t j = 0; j < n; j += 64) {
        uint64_t w = 0;
        for (int64_t t = j; t < n && t < j + 64; t++) w |= (uint64_t)(u[t] >= pd) << (t - j);
        bits[j / 64] = w;
    }
}

/* w[j] = bit j ? scale : 0, j < n */
static void keep_unpack(const uint64_t *bits, int64_t n, float scale, float *w) {
#ifdef ATTN_AVX512
    if (have_avx512()) { keep_unpack_avx512(bits, n, scale, w); return; }
#endif
    for (int64_t j = 0; j < n; j++) w[j] = (float)((bits[j / 64] >> (j & 63)) & 1u) * scale;
}

/* Floats of the per-thread buffer drop_uniforms fills for up to Tk elements. */
static int64_t ubuf_len(const attn_dims *a) { return a->p > 0.f ? a->Tk + 8 : 0; }

/* The dropout uniforms of elements [e, e + n) of the call's stream, as volt_dropout draws
 * them (element e is lane e % 4 of Philox block e / 4); buf holds n + 8 floats. Returns
 * the pointer to element e's uniform. */
static const float *drop_uniforms(const attn_dims *a, uint64_t e, int64_t n, float *buf) {
    uint64_t off = e % 4;
    volt__rng_uniform_blocks(a->seed, a->offset, a->call, e / 4, (int64_t)((off + (uint64_t)n + 3) / 4), buf);
    return buf + off;
}

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

/* valid (2, B, Tk): [0] 1.f where the key may be attended (key_mask != 0, or no mask),
 * else 0.f; [1] the same as an additive bias, 0.f or -inf (floats so that the row loops
 * multiply or add them and vectorise). kv_len (B): 1 + index of the last valid key (0 when
 * none). From the step arena. */
static volt_status key_valid(volt_step *s, const volt_node *n, const attn_dims *a,
                             float **valid_out, int64_t **kv_len_out) {
    int64_t N = a->B * a->Tk;
    float *valid = volt_step_alloc(s, sizeof(float) * (size_t)(N > 0 ? 2 * N : 1));
    int64_t *kv_len = volt_step_alloc(s, sizeof(int64_t) * (size_t)(a->B > 0 ? a->B : 1));
    if (!valid || !kv_len) return VOLT_ERR_NOMEM;
    const volt_tensor *m = n->n_in == 4 ? n->in[3] : NULL;
    if (!m) for (int64_t t = 0; t < N; t++) valid[t] = 1.f;
    else if (m->dtype == VOLT_U8) for (int64_t t = 0; t < N; t++) valid[t] = ((const uint8_t *)m->data)[t] != 0;
    else if (m->dtype == VOLT_I32) for (int64_t t = 0; t < N; t++) valid[t] = ((const int32_t *)m->data)[t] != 0;
    else for (int64_t t = 0; t < N; t++) valid[t] = ((const int64_t *)m->data)[t] != 0;
    for (int64_t t = 0; t < N; t++) valid[N + t] = valid[t] != 0.f ? 0.f : -INFINITY;
    for (int64_t b = 0; b < a->B; b++) {
        int64_t L = a->Tk;
        while (L > 0 && valid[b * a->Tk + L - 1] == 0.f) L--;
        kv_len[b] = L;
    }
    *valid_out = valid;
    *kv_len_out = kv_len;
    return VOLT_OK;
}

/* Keys a tile of rows [i0, i1) can see: those before kv_len, and for causal before i1. */
static int64_t tile_keys(const attn_dims *a, int64_t kv_len, int64_t i1) {
    int64_t L = a->causal && i1 < kv_len ? i1 : kv_len;
    if (a->bf && L > 0) {
        L = (L + KEY_ROUND - 1) / KEY_ROUND * KEY_ROUND;
        if (L > a->Tk) L = a->Tk;
    }
    return L;
}

/* Keys row i can see inside a tile of L keys (valid[] decides the rest). */
static int64_t row_keys(const attn_dims *a, int64_t L, int64_t i) {
    return a->causal && i + 1 < L ? i + 1 : L;
}

/* Threads for `items` independent work items: scratch is sized for this many. The blocks'
 * GEMMs run inside our parallel region, single-threaded, which the OpenMP build of OpenBLAS
 * (the one cmake/deps.cmake picks) does by itself. The pthreads build would make every
 * thread queue on its one thread pool, so with it the blocks run one after another and
 * each GEMM is threaded instead. */
static int team_size(int64_t items) {
    int nt = omp_get_max_threads();
    if (nt < 1 || (openblas_get_parallel() == 1 && openblas_get_num_threads() > 1)) nt = 1;
    return items < nt ? (int)(items > 0 ? items : 1) : nt;
}

/* What forward keeps for backward (n->saved, the step arena): the per-row logsumexp and,
 * with native bf16 tiles, the bf16 copies of q, k, v (the inputs cannot change between a
 * node's forward and backward in one step), so backward converts only dO. */
typedef struct attn_saved { float *lse; const uint16_t *q, *k, *v; uint64_t *keep; } attn_saved;

/* q, k, v as the tiles' operands. With bf16 tiles and keep set, converted into the arena
 * (kept for backward), else into scratch slots 0-2. */
static volt_status attn_qkv(volt_step *s, const volt_node *n, const attn_dims *a, bool keep, const void *qkv[3]) {
    const volt_dtype cd = n->attr.attention.compute;
    for (int i = 0; i < 3; i++) {
        const volt_tensor *t = n->in[i];
        int64_t cnt = volt_tensor_numel(t);
        if (a->bf && keep) {
            uint16_t *b = volt_step_alloc(s, sizeof(uint16_t) * (size_t)(cnt > 0 ? cnt : 1));
            if (!b) return s->status;
            volt_f32_to_bf16_array(t->data, b, cnt);
            qkv[i] = b;
        } else if (!(qkv[i] = attn_operand(s, a, t->data, cnt, cd, i))) return s->status;
    }
    return VOLT_OK;
}

/* ---- forward -------------------------------------------------------------------------- */
/* exp(x) for -87 <= x (Cephes' expf: x = n ln2 + r, |r| <= ln2/2, degree-5 polynomial
 * for e^r, about 2 ulp). Branch-free and inlined, so `omp simd` loops vectorise it; the
 * caller clamps x in a separate loop (a clamp in here makes GCC split the loop on it and
 * give up). */
static inline float exp_clamped(float x) {
    float n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;   /* round(x / ln2) */
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * (r * r) + r + 1.f;
    int32_t bits = ((int32_t)n + 127) << 23;   /* 2^n, n >= -126 */
    float p2;
    memcpy(&p2, &bits, sizeof p2);
    return y * p2;
}

/* p[j] = exp(p[j] - sub) where visible (j < lim and valid), else 0, for j < L; returns the
 * sum. Arguments below -87 give ~1e-38 instead of 0: nothing next to the row's max term. */
static inline float row_exp(float *p, const float *valid, int64_t lim, int64_t L, float sub) {
    #pragma omp simd
    for (int64_t j = 0; j < lim; j++) {
        float x = p[j] - sub;
        p[j] = x < -87.f ? -87.f : x;
    }
    float sum = 0.f;
    #pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < lim; j++) {
        float e = exp_clamped(p[j]) * valid[j];
        p[j] = e;
        sum += e;
    }
    for (int64_t j = lim; j < L; j++) p[j] = 0.f;
    return sum;
}

/* max over j < lim of p[j] + bias[j] (-inf if lim is 0 or all masked). 16 running maxima
 * in an `omp simd` loop: the form both GCC and Clang vectorise (a plain max reduction needs
 * -ffast-math, and Clang refuses `omp simd reduction(max)` on it). */
static inline float row_max(const float *p, const float *bias, int64_t lim) {
    float m16[16];
    for (int l = 0; l < 16; l++) m16[l] = -INFINITY;
    int64_t j = 0;
    for (; j + 16 <= lim; j += 16) {
        #pragma omp simd
        for (int l = 0; l < 16; l++) {
            float x = p[j + l] + bias[j + l], y = m16[l];
            m16[l] = y > x ? y : x;
        }
    }
    float mx = -INFINITY;
    for (; j < lim; j++) {
        float x = p[j] + bias[j];
        mx = mx > x ? mx : x;
    }
    for (int l = 0; l < 16; l++) mx = mx > m16[l] ? mx : m16[l];
    return mx;
}

/* Softmax numerators of a tile in place: S (m, L) scores of rows [i0, i0+m) -> exp(S - max)
 * on visible keys, 0 elsewhere; inv (m) = 1 / row sum (0 for a fully masked row); lse (m)
 * = max + log(sum) (-inf when fully masked), if not NULL. valid and bias: see key_valid. */
VOLT_SIMD_CLONES
static void tile_softmax(const attn_dims *a, const float *valid, const float *bias, float *S, int64_t L,
                         int64_t i0, int64_t m, float *inv, float *lse) {
    for (int64_t r = 0; r < m; r++) {
        float *p = S + r * L;
        int64_t lim = row_keys(a, L, i0 + r);
        float mx = row_max(p, bias, lim);
        if (mx == -INFINITY) {   /* fully masked row */
            memset(p, 0, sizeof(float) * (size_t)L);
            inv[r] = 0.f;
            if (lse) lse[r] = -INFINITY;
            continue;
        }
        float sum = row_exp(p, valid, lim, L, mx);   /* >= 1: the max term is exp(0) */
        inv[r] = 1.f / sum;
        if (lse) lse[r] = mx + logf(sum);
    }
}

/* p[j] *= W[j] = (u[j] >= p) / (1 - p), for j < n: volt_dropout's keep test and scale */
VOLT_SIMD_CLONES
static void row_drop(float *p, const float *u, int64_t n, float pd, float scale) {
    #pragma omp simd
    for (int64_t j = 0; j < n; j++) p[j] *= (float)(u[j] >= pd) * scale;
}

/* One tile: rows [i0, i0+m) of block bh, keys [0, L). S (m, L) and inv (m) scratch; o, lse
 * rows written. P is left unnormalised and o's rows are divided by the row sums instead.
 * With dropout, e0 is the stream element of (row i0, key 0), ubuf (ubuf_len) scratch, and
 * keep (may be NULL) the block's keep bits, keep_words per row, written. */
static void fwd_tile(const attn_dims *a, const float *valid, const float *bias, int64_t L, int64_t i0,
                     int64_t m, const void *q, const void *k, const void *v, float *o, float *lse,
                     float *S, float *inv, uint64_t e0, float *ubuf, uint64_t *keep, uint16_t *hb) {
    int64_t D = a->D, ld = a->ld;
    float *ot = o + i0 * ld;
    if (L == 0) {   /* every key masked: zero output, no NaN */
        for (int64_t r = 0; r < m; r++) memset(ot + r * ld, 0, sizeof(float) * (size_t)D);
        if (lse) for (int64_t r = 0; r < m; r++) lse[i0 + r] = -INFINITY;
        return;
    }
    /* S (m, L) = scale * q[i0:i0+m] (m, D) k[0:L]^T (D, L) */
    tile_gemm(a, 'N', 'T', m, L, D, a->scale, elem(a, q, i0 * ld), ld, k, ld, 0.f, S, L);
    tile_softmax(a, valid, bias, S, L, i0, m, inv, lse ? lse + i0 : NULL);
    if (a->p > 0.f) {   /* the row sums (inv) are taken before dropping, as softmax then dropout */
        float scale = 1.f / (1.f - a->p);
        for (int64_t r = 0; r < m; r++) {
            if (inv[r] == 0.f) continue;   /* fully masked row: zeros already */
            int64_t lim = row_keys(a, L, i0 + r);
            const float *u = drop_uniforms(a, e0 + (uint64_t)(r * a->Tk), lim, ubuf);
            row_drop(S + r * L, u, lim, a->p, scale);
            if (keep) keep_pack(u, lim, a->p, keep + (i0 + r) * keep_words(a));
        }
    }
    /* o[i0:i0+m] (m, D) = diag(inv) P (m, L) v[0:L] (L, D) */
    tile_gemm(a, 'N', 'N', m, D, L, 1.f, tile_operand(a, S, m * L, hb), L, v, ld, 0.f, ot, ld);
    for (int64_t r = 0; r < m; r++) {
        float f = inv[r];
        #pragma omp simd
        for (int64_t d = 0; d < D; d++) ot[r * ld + d] *= f;
    }
}

volt_status volt__cpu_ATTENTION_fwd(volt_step *s, volt_node *n) {
    attn_dims a = dims_of(s, n);
    int64_t BH = a.B * a.H, ntiles = (a.Tq + QTILE - 1) / QTILE, items = BH * ntiles;
    if (items == 0) return VOLT_OK;
    float *valid;
    int64_t *kv_len;
    VOLT_TRY(key_valid(s, n, &a, &valid, &kv_len));
    /* lse (B,H,Tq) and the bf16 operands only when backward will need them */
    float *lse = NULL;
    attn_saved *sv = NULL;
    if (volt__needs_grad(n->out)) {
        if (!(lse = volt_step_alloc(s, sizeof(float) * (size_t)(BH * a.Tq))) ||
            !(sv = volt_step_alloc(s, sizeof *sv)))
            return VOLT_ERR_NOMEM;
        *sv = (attn_saved){ .lse = lse };
        n->saved = sv;
        if (a.p > 0.f &&
            !(sv->keep = volt_step_alloc(s, sizeof(uint64_t) * (size_t)(BH * a.Tq * keep_words(&a)))))
            return VOLT_ERR_NOMEM;
    }
    int nt = team_size(items);
    /* S, inv, the uniforms, and with bf16 tiles P's bf16 copy (QTILE x Tk halves) */
    int64_t hbo = round16(QTILE * a.Tk + QTILE + ubuf_len(&a)), per = hbo + (a.bf ? round16(QTILE * a.Tk / 2 + 1) : 0);
    float *scratch = volt_step_alloc(s, sizeof(float) * (size_t)(per * nt));
    if (!scratch) return VOLT_ERR_NOMEM;
    /* 16-bit compute (attr compute, volt/ops.h): q, k, v read as their 16-bit roundings */
    const void *qkv[3];
    VOLT_TRY(attn_qkv(s, n, &a, sv != NULL, qkv));
    const void *q = qkv[0], *k = qkv[1], *v = qkv[2];
    if (sv && a.bf) {   /* backward reads these copies, never q, k, v again */
        sv->q = q, sv->k = k, sv->v = v;
        n->bwd_reads &= ~7u;
    }
    float *o = n->out->data;
    /* tiles are independent in forward: schedule them all; dynamic because padding makes
     * blocks unequal (the result does not depend on which thread runs a tile) */
    #pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (int64_t it = 0; it < items; it++) {
        int64_t bh = it / ntiles, t = it % ntiles, b = bh / a.H;
        int64_t i0 = t * QTILE, m = a.Tq - i0 < QTILE ? a.Tq - i0 : QTILE;
        int64_t L = tile_keys(&a, kv_len[b], i0 + m);
        float *S = scratch + per * omp_get_thread_num();
        int64_t qo = attn_block(&a, bh, a.Tq), ko = attn_block(&a, bh, a.Tk);
        fwd_tile(&a, valid + b * a.Tk, valid + (a.B + b) * a.Tk, L, i0, m, elem(&a, q, qo), elem(&a, k, ko),
                 elem(&a, v, ko), o + qo, lse ? lse + bh * a.Tq : NULL, S, S + QTILE * a.Tk,
                 (uint64_t)((bh * a.Tq + i0) * a.Tk), S + QTILE * a.Tk + QTILE,
                 sv && sv->keep ? sv->keep + bh * a.Tq * keep_words(&a) : NULL, (uint16_t *)(void *)(S + hbo));
    }
    return VOLT_OK;
}

/* ---- backward ------------------------------------------------------------------------- */
/* The grads a tile writes and, per grad, its GEMM's beta: 0 when the tile's product is the
 * first write of the rows it covers (STORE grads: see volt__cpu_ATTENTION_bwd), else 1. */
typedef struct attn_grads { float *dq, *dk, *dv; float beta_q, beta_k, beta_v; } attn_grads;

/* P (m, L) in place: scores of rows [i0, i0+m) -> exp(S - lse) on visible keys, else 0. */
VOLT_SIMD_CLONES
static void tile_probs(const attn_dims *a, const float *valid, float *P, int64_t L, int64_t i0, int64_t m,
                       const float *lse) {
    for (int64_t r = 0; r < m; r++) {
        int64_t lim = lse[r] == -INFINITY ? 0 : row_keys(a, L, i0 + r);   /* fully masked row */
        row_exp(P + r * L, valid, lim, L, lse[r]);
    }
}

/* W (m, L): the dropout factors (u >= p) / (1 - p) of rows [i0, i0+m), from forward's keep
 * bits (keep: row i0's, keep_words per row); 0 past the keys a row sees and on fully masked
 * rows (their P is 0 there: a 0 factor keeps P * W finite). */
static void tile_drop_factors(const attn_dims *a, const uint64_t *keep, int64_t L, int64_t i0, int64_t m,
                              const float *lse, float *W) {
    float scale = 1.f / (1.f - a->p);
    for (int64_t r = 0; r < m; r++) {
        float *w = W + r * L;
        int64_t lim = lse[r] == -INFINITY ? 0 : row_keys(a, L, i0 + r);
        keep_unpack(keep + r * keep_words(a), lim, scale, w);
        for (int64_t j = lim; j < L; j++) w[j] = 0.f;
    }
}

/* dS (m, L) in place, from dP = do v^T: dS = P * (dP - delta), delta (m) = rowsum(do * o);
 * with dropout factors W (m, L) (NULL = none), dS = P * (dP * W - delta). o and dout are
 * the tile's rows (m, D), ld apart. */
VOLT_SIMD_CLONES
static void tile_dsoftmax(const float *P, const float *W, float *dS, int64_t L, int64_t m, const float *o,
                          const float *dout, int64_t D, int64_t ld) {
    for (int64_t r = 0; r < m; r++) {
        const float *orow = o + r * ld, *drow = dout + r * ld, *p = P + r * L;
        float dl = 0.f, *ds = dS + r * L;
        #pragma omp simd reduction(+ : dl)
        for (int64_t d = 0; d < D; d++) dl += orow[d] * drow[d];
        if (W) {
            const float *w = W + r * L;
            #pragma omp simd
            for (int64_t j = 0; j < L; j++) ds[j] = p[j] * (ds[j] * w[j] - dl);
        } else {
            #pragma omp simd
            for (int64_t j = 0; j < L; j++) ds[j] = p[j] * (ds[j] - dl);
        }
    }
}

/* Z (n) = P * W over a tile's n = m L elements */
VOLT_SIMD_CLONES
static void tile_mul(const float *P, const float *W, float *Z, int64_t n) {
    #pragma omp simd
    for (int64_t t = 0; t < n; t++) Z[t] = P[t] * W[t];
}

/* One tile of block bh: rows [i0, i0+m), keys [0, L). P and dS (m, L) scratch.
 *   P  = exp(S - lse) on visible keys, S = scale q k^T
 *   dv += P^T do;  dP = do v^T;  dS = P * (dP - rowsum(do * o))
 *   dq += scale dS k;  dk += scale dS^T q
 * With dropout, W (m, L) is scratch too and keep the block's keep bits (forward's):
 * dv += (P * W)^T do and dS = P * (dP * W - rowsum(do * o)). */
static void bwd_tile(const attn_dims *a, const float *valid, int64_t L, int64_t i0, int64_t m,
                     const void *q, const void *k, const void *v, const float *o, const void *dout,
                     const float *dout32, const float *lse, attn_grads g, float *P, float *dS, float *W,
                     const uint64_t *keep, uint16_t *hb) {
    /* g.beta_*: 0 where this tile stores the rows it writes (their first write), else 1 */
    int64_t D = a->D, ld = a->ld;
    if (L == 0) return;   /* every key masked: no gradient */
    const void *qt = elem(a, q, i0 * ld), *dot = elem(a, dout, i0 * ld);
    tile_gemm(a, 'N', 'T', m, L, D, a->scale, qt, ld, k, ld, 0.f, P, L);
    tile_probs(a, valid, P, L, i0, m, lse + i0);
    bool drop = a->p > 0.f;
    if (drop) tile_drop_factors(a, keep + i0 * keep_words(a), L, i0, m, lse + i0, W);
    if (g.dv) {   /* dv[0:L] (L, D) += Z^T (L, m) do (m, D), Z = P (* W): dS holds it for now */
        if (drop) tile_mul(P, W, dS, m * L);
        tile_gemm(a, 'T', 'N', L, D, m, 1.f, tile_operand(a, drop ? dS : P, m * L, hb), L, dot, ld, g.beta_v, g.dv, ld);
    }
    if (!g.dq && !g.dk) return;
    /* dP (m, L) = do (m, D) v[0:L]^T (D, L) */
    tile_gemm(a, 'N', 'T', m, L, D, 1.f, dot, ld, v, ld, 0.f, dS, L);
    tile_dsoftmax(P, drop ? W : NULL, dS, L, m, o + i0 * ld, dout32 + i0 * ld, D, ld);
    const void *dSo = tile_operand(a, dS, m * L, hb);   /* dS as both products read it */
    if (g.dq)   /* dq[i0:i0+m] (m, D) += scale dS (m, L) k[0:L] (L, D) */
        tile_gemm(a, 'N', 'N', m, D, L, a->scale, dSo, L, k, ld, g.beta_q, g.dq + i0 * ld, ld);
    if (g.dk)   /* dk[0:L] (L, D) += scale dS^T (L, m) q (m, D) */
        tile_gemm(a, 'T', 'N', L, D, m, a->scale, dSo, L, qt, ld, g.beta_k, g.dk, ld);
}

/* Rows [r0, r1) of a block's slice g of a grad (row stride a->ld) set to 0. */
static void zero_rows(const attn_dims *a, float *g, int64_t r0, int64_t r1) {
    if (r1 <= r0) return;
    if (a->ld == a->D) memset(g + r0 * a->D, 0, sizeof(float) * (size_t)((r1 - r0) * a->D));
    else for (int64_t r = r0; r < r1; r++) memset(g + r * a->ld, 0, sizeof(float) * (size_t)a->D);
}

/* Grads in STORE mode (core/internal.h: fresh, uninitialised) are written first by the tile
 * products themselves, with beta 0, instead of being zeroed and accumulated into: dq's rows
 * [i0, i0+m) belong to one tile, and dk, dv's rows [0, L0) are covered by tile 0 (a later
 * tile's keys include tile 0's). What no product writes is zeroed by the block's owner:
 * dq rows of tiles that see no key, dk and dv rows past tile 0's keys (later tiles of a
 * causal block add into them; padding keys get no gradient). When q, k, v are one tensor
 * their grads are one buffer written in turns: then the block is zeroed and every product
 * adds, as for ADD grads. */
static void block_betas(const attn_dims *a, const volt_node *n, bool alias, int64_t L0, attn_grads *g) {
    g->beta_q = g->beta_k = g->beta_v = 1.f;
    float *gr[3] = { g->dq, g->dk, g->dv };
    for (int i = 0; i < 3; i++) {
        if (!gr[i] || n->grad_mode[i] != VOLT_GRAD_STORE) continue;
        int64_t T = i == 0 ? a->Tq : a->Tk;
        if (alias) { zero_rows(a, gr[i], 0, T); continue; }
        if (i == 0) g->beta_q = 0.f;
        else {
            zero_rows(a, gr[i], L0, T);
            if (L0 > 0) *(i == 1 ? &g->beta_k : &g->beta_v) = 0.f;
        }
    }
}

volt_status volt__cpu_ATTENTION_bwd(volt_step *s, volt_node *n) {
    attn_dims a = dims_of(s, n);
    int64_t BH = a.B * a.H, ntiles = (a.Tq + QTILE - 1) / QTILE;
    const attn_saved *sv = n->saved;
    const float *lse = sv ? sv->lse : NULL;
    if (BH == 0 || a.Tq == 0 || a.Tk == 0) {   /* nothing to sum: stored grads are 0 */
        volt__cpu_zero_stores(n);
        return VOLT_OK;
    }
    if (!lse) return volt_step_fail(s, VOLT_ERR_STATE, "attention: backward without saved logsumexp");
    if (a.p > 0.f && !sv->keep) return volt_step_fail(s, VOLT_ERR_STATE, "attention: backward without saved dropout mask");
    volt_tensor *tq = n->in[0], *tk = n->in[1], *tv = n->in[2];
    bool gq = volt__needs_grad(tq), gk = volt__needs_grad(tk), gv = volt__needs_grad(tv);
    if (!gq && !gk && !gv) return VOLT_OK;
    float *valid;
    int64_t *kv_len;
    VOLT_TRY(key_valid(s, n, &a, &valid, &kv_len));
    /* q, k, v one tensor (or two of them): one grad buffer, written in turns (block_betas) */
    const bool alias = tq == tk || tq == tv || tk == tv;
    /* dk/dv of a block gather every tile of it: a block belongs to one thread */
    int nt = team_size(BH);
    /* P, dS and, with dropout, W (QTILE, Tk) each */
    /* and with bf16 tiles a bf16 copy of P or dS (QTILE x Tk halves) */
    int64_t tile = QTILE * a.Tk, hbo = round16((a.p > 0.f ? 3 : 2) * tile);
    int64_t per = hbo + (a.bf ? round16(tile / 2 + 1) : 0);
    float *scratch = volt_step_alloc(s, sizeof(float) * (size_t)(per * nt));
    if (!scratch) return VOLT_ERR_NOMEM;
    const volt_dtype cd = n->attr.attention.compute;   /* as in forward; dO rounded too */
    const void *qkv[3] = { sv->q, sv->k, sv->v };   /* forward's bf16 copies, or convert now */
    if (!qkv[0]) VOLT_TRY(attn_qkv(s, n, &a, false, qkv));
    const void *q = qkv[0], *k = qkv[1], *v = qkv[2];
    const void *dout = attn_operand(s, &a, n->out->grad, volt_tensor_numel(n->out), cd, 3);
    /* rowsum(dO * o) in f32: dO's bf16 rounding in the GEMMs only (bf16 tiles) */
    const float *dout32 = a.bf ? n->out->grad : dout;
    const float *o = n->out->data;
    if (!q || !k || !v || !dout) return s->status;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
    for (int64_t bh = 0; bh < BH; bh++) {
        int64_t b = bh / a.H;
        float *P = scratch + per * omp_get_thread_num(), *dS = P + tile, *W = dS + tile;
        uint16_t *hb = (uint16_t *)(void *)(P + hbo);
        int64_t qo = attn_block(&a, bh, a.Tq), ko = attn_block(&a, bh, a.Tk);
        attn_grads g = { gq ? tq->grad + qo : NULL, gk ? tk->grad + ko : NULL, gv ? tv->grad + ko : NULL, 1.f, 1.f, 1.f };
        block_betas(&a, n, alias, tile_keys(&a, kv_len[b], a.Tq < QTILE ? a.Tq : QTILE), &g);
        const float beta_k = g.beta_k, beta_v = g.beta_v;
        for (int64_t t = 0; t < ntiles; t++) {
            int64_t i0 = t * QTILE, m = a.Tq - i0 < QTILE ? a.Tq - i0 : QTILE;
            int64_t L = tile_keys(&a, kv_len[b], i0 + m);
            if (L == 0 && g.dq && g.beta_q == 0.f) zero_rows(&a, g.dq, i0, i0 + m);   /* no key: no product */
            g.beta_k = t == 0 ? beta_k : 1.f;   /* later tiles add to tile 0's rows */
            g.beta_v = t == 0 ? beta_v : 1.f;
            bwd_tile(&a, valid + b * a.Tk, L, i0, m, elem(&a, q, qo), elem(&a, k, ko), elem(&a, v, ko),
                     o + qo, elem(&a, dout, qo), dout32 + qo, lse + bh * a.Tq, g, P, dS, W,
                     sv->keep ? sv->keep + bh * a.Tq * keep_words(&a) : NULL, hb);
        }
    }
    return VOLT_OK;
}
