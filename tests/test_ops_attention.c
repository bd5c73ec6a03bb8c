/* Scaled dot-product attention: finite-difference gradients (padding masks of every
 * dtype, causal, Tq != Tk, fully masked rows), forward and backward against a naive
 * double-precision reference with an explicit (Tq, Tk) softmax, several query tiles,
 * zero output and grads for fully masked rows, thread-count independence, no heap
 * growth after warm-up, and shape/dtype errors that name the op and both shapes.
 * Attention dropout (volt_attention_dropout): finite-difference gradients with fixed
 * masks, the same output and grads as the unfused volt_dropout(volt_softmax(...)) with the
 * same seed (and the same masks for the step's other dropouts), identity when p == 0 or
 * evaluating, thread-count independence, no (T, T) tensor in the arena, bad p. */
#include <omp.h>
#include "gradcheck.h"
#include "core/internal.h"   /* volt__rng_uniform: the dropout mask is pinned to it */

typedef struct attn_ctx { bool causal, mask; } attn_ctx;

static volt_tensor *f_attn(volt_step *s, volt_tensor **in, void *c) {
    const attn_ctx *a = c;
    return volt_attention(s, in[0], in[1], in[2], a->mask ? in[3] : NULL, a->causal);
}

static gc_input mask_input(volt_dtype dt, int64_t B, int64_t Tk, const void *data) {
    return (gc_input){ .dt = dt, .shape = VOLT_SHAPE(B, Tk), .diff = false, .data = data };
}


/* gradcheck's double-precision reference: softmax(q k^T / sqrt(D) + mask) v with an explicit
 * (Tq, Tk) matrix per (b, h); a row that sees no key gives zeros. With p > 0 the
 * probabilities are multiplied by the mask volt_dropout would draw on the (B, H, Tq, Tk)
 * probabilities: keep element ((b*H + h)*Tq + i)*Tk + j iff
 * volt__rng_uniform(seed 1234, step offset 7, call 0, e) >= p, scaled by 1/(1-p)
 * (gradcheck's step: seed 1234, offset 7; the op is the step's first dropout call). */
static void attn_ref(const gc_input *ins, double *const *x, double *y, bool causal, bool mask, float drop) {
    const int64_t *qs = ins[0].shape.d;
    int64_t B = qs[0], H = qs[1], Tq = qs[2], D = qs[3], Tk = ins[1].shape.d[2];
    double p[64], scale = 1 / sqrt((double)D), keep_scale = 1 / (1 - (double)drop);
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H;
        const double *q = x[0] + bh * Tq * D, *k = x[1] + bh * Tk * D, *v = x[2] + bh * Tk * D;
        for (int64_t i = 0; i < Tq; i++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < Tk; j++) {
                bool vis = !(mask && x[3][b * Tk + j] == 0) && !(causal && j > i);
                double sij = 0;
                for (int64_t d = 0; d < D; d++) sij += q[i * D + d] * k[j * D + d];
                p[j] = vis ? sij * scale : -INFINITY;
                mx = fmax(mx, p[j]);
            }
            for (int64_t j = 0; j < Tk; j++) sum += p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx);
            for (int64_t j = 0; j < Tk; j++) {
                double keep = 1;
                if (drop > 0) keep = volt__rng_uniform(1234, 7, 0, (uint64_t)((bh * Tq + i) * Tk + j)) >= drop ? keep_scale : 0;
                p[j] = sum > 0 ? p[j] / sum * keep : 0;
            }
            for (int64_t d = 0; d < D; d++) {
                double acc = 0;
                for (int64_t j = 0; j < Tk; j++) acc += p[j] * v[j * D + d];
                y[bh * Tq * D + i * D + d] = acc;
            }
        }
    }
}

static void r_attn(const gc_input *ins, double *const *x, double *y, void *c) {
    const attn_ctx *a = c;
    attn_ref(ins, x, y, a->causal, a->mask, 0.f);
}

static void grads(void) {
    attn_ctx plain = { false, false }, masked = { false, true }, causal = { true, false },
             causal_masked = { true, true };
    gradcheck("attention (1,1,5,4)", f_attn, r_attn, &plain, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(1, 1, 5, 4)), GC_F32(VOLT_SHAPE(1, 1, 5, 4)), GC_F32(VOLT_SHAPE(1, 1, 5, 4)) });

    /* padding: batch 0 attends 5 of 7 keys, batch 1 only 2 */
    uint8_t m8[14] = { 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0 };
    gradcheck("attention (2,3,7,8) u8 padding", f_attn, r_attn, &masked, 4,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 7, 8)), GC_F32(VOLT_SHAPE(2, 3, 7, 8)), GC_F32(VOLT_SHAPE(2, 3, 7, 8)),
                            mask_input(VOLT_U8, 2, 7, m8) });
    /* a hole in the middle, i32 */
    int32_t m32[14] = { 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0 };
    gradcheck("attention (2,3,7,8) i32 holes", f_attn, r_attn, &masked, 4,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 7, 8)), GC_F32(VOLT_SHAPE(2, 3, 7, 8)), GC_F32(VOLT_SHAPE(2, 3, 7, 8)),
                            mask_input(VOLT_I32, 2, 7, m32) });

    gradcheck("attention (2,2,6,5) causal", f_attn, r_attn, &causal, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 2, 6, 5)), GC_F32(VOLT_SHAPE(2, 2, 6, 5)), GC_F32(VOLT_SHAPE(2, 2, 6, 5)) });
    /* causal + padding: batch 1 masks key 0, so its query row 0 sees nothing */
    int64_t m64c[12] = { 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1 };
    gradcheck("attention (2,2,6,5) causal+padding", f_attn, r_attn, &causal_masked, 4,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 2, 6, 5)), GC_F32(VOLT_SHAPE(2, 2, 6, 5)), GC_F32(VOLT_SHAPE(2, 2, 6, 5)),
                            mask_input(VOLT_I64, 2, 6, m64c) });

    /* cross attention, Tq != Tk */
    gradcheck("attention q (2,1,3,4) kv (2,1,9,4)", f_attn, r_attn, &plain, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 1, 3, 4)), GC_F32(VOLT_SHAPE(2, 1, 9, 4)), GC_F32(VOLT_SHAPE(2, 1, 9, 4)) });
    int64_t m64[18] = { 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1 };
    gradcheck("attention q (2,1,3,4) kv (2,1,9,4) i64 mask", f_attn, r_attn, &masked, 4,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 1, 3, 4)), GC_F32(VOLT_SHAPE(2, 1, 9, 4)), GC_F32(VOLT_SHAPE(2, 1, 9, 4)),
                            mask_input(VOLT_I64, 2, 9, m64) });
    /* only some inputs differentiable: backward skips the dP/dS work or dv */
    gradcheck("attention v only", f_attn, r_attn, &causal, 3,
              (gc_input[]){ GC_F32_CONST(VOLT_SHAPE(2, 2, 6, 5)), GC_F32_CONST(VOLT_SHAPE(2, 2, 6, 5)), GC_F32(VOLT_SHAPE(2, 2, 6, 5)) });
    gradcheck("attention q only", f_attn, r_attn, &plain, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 2, 6, 5)), GC_F32_CONST(VOLT_SHAPE(2, 2, 7, 5)), GC_F32_CONST(VOLT_SHAPE(2, 2, 7, 5)) });
    /* a batch with every key masked: zero grads, matched by the (zero) numeric ones */
    uint8_t mz[10] = { 1, 1, 0, 1, 1, 0, 0, 0, 0, 0 };
    gradcheck("attention (2,2,4,3) fully masked batch", f_attn, r_attn, &masked, 4,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 2, 4, 3)), GC_F32(VOLT_SHAPE(2, 2, 5, 3)), GC_F32(VOLT_SHAPE(2, 2, 5, 3)),
                            mask_input(VOLT_U8, 2, 5, mz) });
}

/* ---- naive reference in double: explicit (Tq, Tk) softmax ---------------------------- */
typedef struct ref_case {
    int64_t B, H, Tq, Tk, D;
    bool causal;
    const uint8_t *mask;   /* (B, Tk) or NULL */
} ref_case;

static bool ref_visible(const ref_case *c, int64_t b, int64_t i, int64_t j) {
    if (c->mask && !c->mask[b * c->Tk + j]) return false;
    return !(c->causal && j > i);
}

/* out (B,H,Tq,D); with dout also dq, dk, dv (zeroed here). */
static void ref_attention(const ref_case *c, const float *q, const float *k, const float *v, const float *dout,
                          double *out, double *dq, double *dk, double *dv) {
    int64_t Tq = c->Tq, Tk = c->Tk, D = c->D;
    double scale = 1.0 / sqrt((double)D);
    double *P = malloc(sizeof(double) * (size_t)(Tq * Tk)), *dP = malloc(sizeof(double) * (size_t)(Tq * Tk));
    if (dout) {
        memset(dq, 0, sizeof(double) * (size_t)(c->B * c->H * Tq * D));
        memset(dk, 0, sizeof(double) * (size_t)(c->B * c->H * Tk * D));
        memset(dv, 0, sizeof(double) * (size_t)(c->B * c->H * Tk * D));
    }
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++) {
            int64_t bh = b * c->H + h;
            const float *qb = q + bh * Tq * D, *kb = k + bh * Tk * D, *vb = v + bh * Tk * D;
            for (int64_t i = 0; i < Tq; i++) {
                double mx = -INFINITY;
                for (int64_t j = 0; j < Tk; j++) {
                    double sij = 0;
                    for (int64_t d = 0; d < D; d++) sij += (double)qb[i * D + d] * kb[j * D + d];
                    P[i * Tk + j] = sij * scale;
                    if (ref_visible(c, b, i, j) && P[i * Tk + j] > mx) mx = P[i * Tk + j];
                }
                double sum = 0;
                for (int64_t j = 0; j < Tk; j++) {
                    P[i * Tk + j] = ref_visible(c, b, i, j) ? exp(P[i * Tk + j] - mx) : 0;
                    sum += P[i * Tk + j];
                }
                for (int64_t j = 0; j < Tk; j++) P[i * Tk + j] = sum > 0 ? P[i * Tk + j] / sum : 0;
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < Tk; j++) acc += P[i * Tk + j] * vb[j * D + d];
                    out[bh * Tq * D + i * D + d] = acc;
                }
            }
            if (!dout) continue;
            const float *gb = dout + bh * Tq * D;
            for (int64_t i = 0; i < Tq; i++) {
                double dot = 0;   /* sum_j P dP = sum_d dO O */
                for (int64_t j = 0; j < Tk; j++) {
                    double acc = 0;
                    for (int64_t d = 0; d < D; d++) acc += (double)gb[i * D + d] * vb[j * D + d];
                    dP[i * Tk + j] = acc;
                    dot += P[i * Tk + j] * acc;
                }
                for (int64_t j = 0; j < Tk; j++) {
                    double ds = P[i * Tk + j] * (dP[i * Tk + j] - dot) * scale;
                    for (int64_t d = 0; d < D; d++) {
                        dq[bh * Tq * D + i * D + d] += ds * kb[j * D + d];
                        dk[bh * Tk * D + j * D + d] += ds * qb[i * D + d];
                        dv[bh * Tk * D + j * D + d] += P[i * Tk + j] * gb[i * D + d];
                    }
                }
            }
        }
    free(P);
    free(dP);
}

static volt_step *mkstep(size_t arena) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = arena;
    volt_step *s = NULL;
    volt_step_create(&cfg, &s);
    return s;
}

static void fill(float *x, int64_t n) { for (int64_t t = 0; t < n; t++) x[t] = (float)gc_normal(); }

static double max_err(const float *got, const double *want, int64_t n, double *scale_out) {
    double e = 0, sc = 0;
    for (int64_t t = 0; t < n; t++) {
        double d = fabs((double)got[t] - want[t]);
        if (!(d <= e)) e = d;   /* NaN sticks */
        if (fabs(want[t]) > sc) sc = fabs(want[t]);
    }
    *scale_out = sc;
    return e;
}

static uint16_t bits_bf16(float x) { return volt_f32_to_bf16(x); }
static void round_bf16(float *x, int64_t n) { for (int64_t t = 0; t < n; t++) x[t] = volt_bf16_to_f32(bits_bf16(x[t])); }

/* Forward (inference and training) and backward against the reference; with a bf16
 * compute dtype against the reference on the bf16 roundings of q, k, v and dO, to bf16's
 * precision (native tiles round P and dS to bf16 as well). */
static void check_reference_dt(const char *name, const ref_case *c, volt_dtype cd) {
    int64_t nq = c->B * c->H * c->Tq * c->D, nk = c->B * c->H * c->Tk * c->D;
    float *q = malloc(sizeof(float) * (size_t)nq), *k = malloc(sizeof(float) * (size_t)nk),
          *v = malloc(sizeof(float) * (size_t)nk), *g = malloc(sizeof(float) * (size_t)nq);
    /* larger logits than N(0,1)/sqrt(D) so softmax is peaked and max-subtraction matters */
    fill(q, nq); fill(k, nk); fill(v, nk); fill(g, nq);
    for (int64_t t = 0; t < nq; t++) q[t] *= 3.f;
    if (cd == VOLT_BF16) { round_bf16(q, nq); round_bf16(k, nk); round_bf16(v, nk); round_bf16(g, nq); }
    const double tf = cd == VOLT_BF16 ? 1e-2 : 2e-5, tb = cd == VOLT_BF16 ? 2e-2 : 1e-4;
    double *ro = malloc(sizeof(double) * (size_t)nq), *rdq = malloc(sizeof(double) * (size_t)nq),
           *rdk = malloc(sizeof(double) * (size_t)nk), *rdv = malloc(sizeof(double) * (size_t)nk);
    ref_attention(c, q, k, v, g, ro, rdq, rdk, rdv);

    volt_step *s = mkstep(1 << 20);
    for (int training = 0; training < 2; training++) {
        volt_step_begin(s, training, 0);
        CHECK_OK(volt_step_set_compute_dtype(s, cd));
        volt_tensor *tq = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(c->B, c->H, c->Tq, c->D), q);
        volt_tensor *tk = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(c->B, c->H, c->Tk, c->D), k);
        volt_tensor *tv = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(c->B, c->H, c->Tk, c->D), v);
        volt_tensor *tm = c->mask ? volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(c->B, c->Tk), (void *)c->mask) : NULL;
        if (training) {
            volt_tensor_requires_grad(s, tq);
            volt_tensor_requires_grad(s, tk);
            volt_tensor_requires_grad(s, tv);
        }
        volt_tensor *o = volt_attention(s, tq, tk, tv, tm, c->causal);
        CHECK(o != NULL, "%s: %s", name, volt_step_errmsg(s));
        if (!o) { volt_step_end(s); continue; }
        double sc, e = max_err(o->data, ro, nq, &sc);
        CHECK(e <= tf * (1 + sc), "%s (training=%d): forward max error %g (max |out| %g)", name, training, e, sc);
        if (training) {
            CHECK_OK(volt_step_backward_grad(s, o, g));
            e = max_err(tq->grad, rdq, nq, &sc);
            CHECK(e <= tb * (1 + sc), "%s: dq max error %g (max %g)", name, e, sc);
            e = max_err(tk->grad, rdk, nk, &sc);
            CHECK(e <= tb * (1 + sc), "%s: dk max error %g (max %g)", name, e, sc);
            e = max_err(tv->grad, rdv, nk, &sc);
            CHECK(e <= tb * (1 + sc), "%s: dv max error %g (max %g)", name, e, sc);
        }
        volt_step_end(s);
    }
    volt_step_destroy(s);
    free(q); free(k); free(v); free(g); free(ro); free(rdq); free(rdk); free(rdv);
}

static void check_reference(const char *name, const ref_case *c) { check_reference_dt(name, c, VOLT_F32); }

static void reference(void) {
    uint8_t mask[2 * 150];
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 150; j++) mask[b * 150 + j] = b == 0 ? j < 150 - 7 : (j < 20 && j % 5 != 3);
    check_reference("attention (2,4,33,16)", &(ref_case){ 2, 4, 33, 33, 16, false, NULL });
    uint8_t m33[66];
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 33; j++) m33[b * 33 + j] = b == 0 ? j != 4 : j < 17;
    check_reference("attention (2,4,33,16) mask", &(ref_case){ 2, 4, 33, 33, 16, false, m33 });
    check_reference("attention (2,4,33,16) causal", &(ref_case){ 2, 4, 33, 33, 16, true, NULL });
    check_reference("attention (2,4,33,16) causal+mask", &(ref_case){ 2, 4, 33, 33, 16, true, m33 });
    /* several query tiles, padding trims the key range, cross attention */
    check_reference("attention (2,3,150,24) mask", &(ref_case){ 2, 3, 150, 150, 24, false, mask });
    check_reference("attention (2,3,150,24) causal+mask", &(ref_case){ 2, 3, 150, 150, 24, true, mask });
    check_reference("attention q (2,2,70,8) kv (2,2,150,8) mask", &(ref_case){ 2, 2, 70, 150, 8, false, mask });
}

/* bf16 compute (native bf16 tiles on CPUs with AVX512-BF16, else the rounding emulation):
 * several tiles, padding (key counts rounded up to 64 on the native path: batch 1 sees 19
 * keys of 150), causal, cross attention. */
static void reference_bf16(void) {
    uint8_t mask[2 * 150];
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 150; j++) mask[b * 150 + j] = b == 0 ? j < 150 - 7 : (j < 20 && j % 5 != 3);
    check_reference_dt("bf16 attention (2,4,33,16) causal", &(ref_case){ 2, 4, 33, 33, 16, true, NULL }, VOLT_BF16);
    check_reference_dt("bf16 attention (2,3,150,24) mask", &(ref_case){ 2, 3, 150, 150, 24, false, mask }, VOLT_BF16);
    check_reference_dt("bf16 attention (2,3,150,24) causal+mask", &(ref_case){ 2, 3, 150, 150, 24, true, mask }, VOLT_BF16);
    check_reference_dt("bf16 attention q (2,2,70,8) kv (2,2,150,8) mask", &(ref_case){ 2, 2, 70, 150, 8, false, mask },
                       VOLT_BF16);
}

/* A query row that sees no key gives zeros, and its q row, and k/v of fully masked
 * batches, get zero grads; nothing is NaN. */
static void fully_masked(void) {
    enum { B = 2, H = 2, T = 5, D = 4, N = B * H * T * D };
    float q[N], k[N], v[N], g[N];
    fill(q, N); fill(k, N); fill(v, N); fill(g, N);
    uint8_t mask[B * T] = { 0, 1, 1, 1, 0,  0, 0, 0, 0, 0 };   /* batch 1: nothing */
    volt_step *s = mkstep(1 << 16);
    volt_step_begin(s, true, 0);
    volt_tensor *tq = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), q));
    volt_tensor *tk = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), k));
    volt_tensor *tv = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), v));
    /* causal + key 0 masked: query row 0 of batch 0 sees nothing either */
    volt_tensor *o = volt_attention(s, tq, tk, tv, volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(B, T), mask), true);
    CHECK(o != NULL, "%s", volt_step_errmsg(s));
    if (o) {
        CHECK_OK(volt_step_backward_grad(s, o, g));
        const float *y = o->data;
        int nan = 0, nonzero = 0;
        for (int t = 0; t < N; t++) {
            int b = t / (H * T * D), i = t / D % T;
            nan += isnan(y[t]) || isnan(tq->grad[t]) || isnan(tk->grad[t]) || isnan(tv->grad[t]);
            bool dead_row = b == 1 || i == 0;
            if (dead_row) nonzero += y[t] != 0 || tq->grad[t] != 0;
            if (b == 1) nonzero += tk->grad[t] != 0 || tv->grad[t] != 0;
        }
        CHECK(nan == 0, "%d NaNs", nan);
        CHECK(nonzero == 0, "%d nonzero outputs/grads for fully masked rows", nonzero);
        /* keys 0 and 4 of batch 0 are masked: no grad either */
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) {
                int k0 = (h * T + 0) * D + d, k4 = (h * T + 4) * D + d;
                CHECK(tk->grad[k0] == 0 && tv->grad[k0] == 0 && tk->grad[k4] == 0 && tv->grad[k4] == 0,
                      "masked key got a grad");
            }
    }
    volt_step_end(s);
    volt_step_destroy(s);
}

/* Same bits for 1 and 2 threads; no heap allocation after the first steps. */
static void threads_and_arena(void) {
    enum { B = 2, H = 3, T = 70, D = 16, N = B * H * T * D };
    static float q[N], k[N], v[N], g[N], out1[N], dq1[N], dk1[N];
    fill(q, N); fill(k, N); fill(v, N); fill(g, N);
    volt_step *s = mkstep(1 << 16);
    int max_threads = omp_get_max_threads();
    uint64_t allocs = 0;
    for (int rep = 0; rep < 4; rep++) {
        omp_set_num_threads(rep == 0 ? 1 : (max_threads > 1 ? max_threads : 2));
        volt_step_begin(s, true, 0);
        volt_tensor *tq = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), q));
        volt_tensor *tk = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), k));
        volt_tensor *tv = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), v);
        volt_tensor *o = volt_attention(s, tq, tk, tv, NULL, true);
        CHECK(o && volt_step_backward_grad(s, o, g) == VOLT_OK, "%s", volt_step_errmsg(s));
        if (o) {
            if (rep == 0) {
                memcpy(out1, o->data, sizeof out1);
                memcpy(dq1, tq->grad, sizeof dq1);
                memcpy(dk1, tk->grad, sizeof dk1);
            } else {
                CHECK(!memcmp(out1, o->data, sizeof out1) && !memcmp(dq1, tq->grad, sizeof dq1) &&
                      !memcmp(dk1, tk->grad, sizeof dk1), "results depend on the thread count");
            }
            CHECK(tv->grad == NULL, "v does not require grad: no grad allocated");
        }
        volt_step_end(s);
        if (rep == 2) allocs = volt_step_heap_allocs(s);
    }
    CHECK(volt_step_heap_allocs(s) == allocs, "heap allocations after warm-up: %llu -> %llu",
          (unsigned long long)allocs, (unsigned long long)volt_step_heap_allocs(s));
    omp_set_num_threads(max_threads);
    volt_step_destroy(s);
}

static void errors(void) {
    volt_step *s = mkstep(1 << 16);
    struct { volt_shape q, k, v, m; bool causal; const char *want; } bad[] = {
        { VOLT_SHAPE(2, 3, 5, 8), VOLT_SHAPE(2, 3, 5, 4), VOLT_SHAPE(2, 3, 5, 4), { -1, { 0 } }, false, "(2, 3, 5, 4)" },
        { VOLT_SHAPE(2, 3, 5, 8), VOLT_SHAPE(2, 2, 5, 8), VOLT_SHAPE(2, 2, 5, 8), { -1, { 0 } }, false, "(2, 2, 5, 8)" },
        { VOLT_SHAPE(3, 5, 8), VOLT_SHAPE(2, 3, 5, 8), VOLT_SHAPE(2, 3, 5, 8), { -1, { 0 } }, false, "(3, 5, 8)" },
        { VOLT_SHAPE(2, 3, 5, 8), VOLT_SHAPE(2, 3, 6, 8), VOLT_SHAPE(2, 3, 5, 8), { -1, { 0 } }, false, "(2, 3, 5, 8)" },
        { VOLT_SHAPE(2, 3, 5, 8), VOLT_SHAPE(2, 3, 6, 8), VOLT_SHAPE(2, 3, 6, 8), { -1, { 0 } }, true, "(2, 3, 6, 8)" },
        { VOLT_SHAPE(2, 3, 5, 8), VOLT_SHAPE(2, 3, 6, 8), VOLT_SHAPE(2, 3, 6, 8), VOLT_SHAPE(2, 5), false, "(2, 5)" },
        { VOLT_SHAPE(2, 3, 5, 8), VOLT_SHAPE(2, 3, 6, 8), VOLT_SHAPE(2, 3, 6, 8), VOLT_SHAPE(12), false, "(12)" },
    };
    for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
        volt_step_begin(s, true, 0);
        volt_tensor *q = volt_tensor_new(s, VOLT_F32, bad[t].q), *k = volt_tensor_new(s, VOLT_F32, bad[t].k);
        volt_tensor *v = volt_tensor_new(s, VOLT_F32, bad[t].v);
        volt_tensor *m = bad[t].m.ndim >= 0 ? volt_tensor_new(s, VOLT_U8, bad[t].m) : NULL;
        volt_tensor *o = volt_attention(s, q, k, v, m, bad[t].causal);
        const char *msg = volt_step_errmsg(s);
        CHECK(o == NULL && volt_step_status(s) == VOLT_ERR_SHAPE, "case %zu accepted", t);
        CHECK(strstr(msg, "attention") && strstr(msg, bad[t].want), "case %zu message: %s", t, msg);
        volt_step_end(s);
    }
    /* dtypes: f32 q/k/v, integer mask */
    volt_step_begin(s, true, 0);
    volt_tensor *q = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(1, 1, 2, 2));
    volt_tensor *fm = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(1, 2));
    CHECK(volt_attention(s, q, q, q, fm, false) == NULL && volt_step_status(s) == VOLT_ERR_DTYPE &&
          strstr(volt_step_errmsg(s), "attention"), "float mask: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, true, 0);
    q = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(1, 1, 2, 2));
    volt_tensor *iq = volt_tensor_new(s, VOLT_I32, VOLT_SHAPE(1, 1, 2, 2));
    CHECK(volt_attention(s, q, iq, q, NULL, false) == NULL && volt_step_status(s) == VOLT_ERR_DTYPE,
          "i32 k: %s", volt_step_errmsg(s));
    volt_step_end(s);
    /* NULL input propagates */
    volt_step_begin(s, true, 0);
    q = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(1, 1, 2, 2));
    CHECK(volt_attention(s, q, NULL, q, NULL, false) == NULL && volt_step_status(s) < 0, "NULL k");
    volt_step_end(s);
    volt_step_destroy(s);
}


/* ---- attention dropout ------------------------------------------------------------------ */
typedef struct drop_ctx { bool causal, mask; float p; } drop_ctx;

static volt_tensor *f_attn_drop(volt_step *s, volt_tensor **in, void *c) {
    const drop_ctx *a = c;
    return volt_attention_dropout(s, in[0], in[1], in[2], a->mask ? in[3] : NULL, a->causal, a->p);
}

static void r_attn_drop(const gc_input *ins, double *const *x, double *y, void *c) {
    const drop_ctx *a = c;
    attn_ref(ins, x, y, a->causal, a->mask, a->p);
}

/* gradcheck runs every evaluation in a fresh step with one seed and offset: fixed masks */
static void drop_grads(void) {
    drop_ctx plain = { false, false, 0.3f }, masked = { false, true, 0.25f }, causal_masked = { true, true, 0.4f };
    gradcheck("attention_dropout (1,1,5,4) p 0.3", f_attn_drop, r_attn_drop, &plain, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(1, 1, 5, 4)), GC_F32(VOLT_SHAPE(1, 1, 5, 4)), GC_F32(VOLT_SHAPE(1, 1, 5, 4)) });
    uint8_t m8[14] = { 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, 0 };
    gradcheck("attention_dropout (2,3,7,8) u8 padding p 0.25", f_attn_drop, r_attn_drop, &masked, 4,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 7, 8)), GC_F32(VOLT_SHAPE(2, 3, 7, 8)), GC_F32(VOLT_SHAPE(2, 3, 7, 8)),
                            mask_input(VOLT_U8, 2, 7, m8) });
    /* causal + padding; batch 1 masks key 0, so its query row 0 sees nothing */
    int64_t m64c[12] = { 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1 };
    gradcheck("attention_dropout (2,2,6,5) causal+padding p 0.4", f_attn_drop, r_attn_drop, &causal_masked, 4,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 2, 6, 5)), GC_F32(VOLT_SHAPE(2, 2, 6, 5)), GC_F32(VOLT_SHAPE(2, 2, 6, 5)),
                            mask_input(VOLT_I64, 2, 6, m64c) });
    /* cross attention, Tk = 9: rows start off a Philox block */
    int32_t m32[18] = { 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1 };
    gradcheck("attention_dropout q (2,1,3,4) kv (2,1,9,4) i32 mask p 0.25", f_attn_drop, r_attn_drop, &masked, 4,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 1, 3, 4)), GC_F32(VOLT_SHAPE(2, 1, 9, 4)), GC_F32(VOLT_SHAPE(2, 1, 9, 4)),
                            mask_input(VOLT_I32, 2, 9, m32) });
    gradcheck("attention_dropout v only", f_attn_drop, r_attn_drop, &causal_masked, 4,
              (gc_input[]){ GC_F32_CONST(VOLT_SHAPE(2, 2, 6, 5)), GC_F32_CONST(VOLT_SHAPE(2, 2, 6, 5)),
                            GC_F32(VOLT_SHAPE(2, 2, 6, 5)), mask_input(VOLT_I64, 2, 6, m64c) });
    gradcheck("attention_dropout q, k only", f_attn_drop, r_attn_drop, &masked, 4,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 7, 8)), GC_F32(VOLT_SHAPE(2, 3, 7, 8)),
                            GC_F32_CONST(VOLT_SHAPE(2, 3, 7, 8)), mask_input(VOLT_U8, 2, 7, m8) });
    uint8_t mz[10] = { 1, 1, 0, 1, 1, 0, 0, 0, 0, 0 };
    gradcheck("attention_dropout (2,2,4,3) fully masked batch", f_attn_drop, r_attn_drop, &masked, 4,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 2, 4, 3)), GC_F32(VOLT_SHAPE(2, 2, 5, 3)), GC_F32(VOLT_SHAPE(2, 2, 5, 3)),
                            mask_input(VOLT_U8, 2, 5, mz) });
}

static volt_step *mkstep_seed(size_t arena, uint64_t seed) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = arena;
    cfg.seed = seed;
    volt_step *s = NULL;
    volt_step_create(&cfg, &s);
    return s;
}

/* What volt_attention_dropout replaces, in public ops (HF's attention):
 * dropout(softmax(scale q k^T + bias), p) v with bias (B*H, Tq, Tk) = -1e30 at masked keys
 * (and after the query for causal). q (B, H, Tq, D), k, v (B, H, Tk, D). */
static volt_tensor *unfused_attention(volt_step *s, volt_tensor *q, volt_tensor *k, volt_tensor *v, const ref_case *c,
                                      float p) {
    int64_t BH = c->B * c->H, Tq = c->Tq, Tk = c->Tk, D = c->D;
    volt_tensor *q3 = volt_reshape(s, volt_scale(s, q, (float)(1.0 / sqrt((double)D))), VOLT_SHAPE(BH, Tq, D));
    volt_tensor *kt = volt_reshape(s, volt_transpose(s, k, 2, 3), VOLT_SHAPE(BH, D, Tk));
    volt_tensor *scores = volt_matmul(s, q3, kt);   /* (B*H, Tq, Tk) */
    if (c->mask || c->causal) {
        volt_tensor *bias = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(BH, Tq, Tk));
        if (!bias) return NULL;
        float *d = bias->data;
        for (int64_t bh = 0; bh < BH; bh++)
            for (int64_t i = 0; i < Tq; i++)
                for (int64_t j = 0; j < Tk; j++)
                    d[(bh * Tq + i) * Tk + j] = ref_visible(c, bh / c->H, i, j) ? 0.f : -1e30f;
        scores = volt_add(s, scores, bias);
    }
    volt_tensor *probs = volt_dropout(s, volt_softmax(s, scores), p);
    volt_tensor *ctx = volt_matmul(s, probs, volt_reshape(s, v, VOLT_SHAPE(BH, Tk, D)));
    return volt_reshape(s, ctx, VOLT_SHAPE(c->B, c->H, Tq, D));
}

typedef struct drop_run { float *a, *y, *dq, *dk, *dv; size_t peak; } drop_run;

/* One training step (seed 99, offset 5): y = dropout(attn(dropout(q, 0.2), k, v), 0.3),
 * attn fused (volt_attention_dropout) or unfused; backward with upstream g. The dropouts
 * before and after take call indices 0 and 2 either way. */
static void drop_step(const ref_case *c, float p, bool fused, const float *q, const float *k, const float *v,
                      const float *g, drop_run *r) {
    int64_t nq = c->B * c->H * c->Tq * c->D, nk = c->B * c->H * c->Tk * c->D;
    volt_step *s = mkstep_seed(1 << 20, 99);
    volt_step_begin(s, true, 5);
    volt_tensor *tq = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(c->B, c->H, c->Tq, c->D), (void *)q));
    volt_tensor *tk = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(c->B, c->H, c->Tk, c->D), (void *)k));
    volt_tensor *tv = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(c->B, c->H, c->Tk, c->D), (void *)v));
    volt_tensor *tm = c->mask ? volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(c->B, c->Tk), (void *)c->mask) : NULL;
    volt_tensor *qd = volt_dropout(s, tq, 0.2f);
    volt_tensor *a = fused ? volt_attention_dropout(s, qd, tk, tv, tm, c->causal, p) : unfused_attention(s, qd, tk, tv, c, p);
    volt_tensor *y = volt_dropout(s, a, 0.3f);
    CHECK(y && volt_step_backward_grad(s, y, g) == VOLT_OK, "%s", volt_step_errmsg(s));
    if (y) {
        memcpy(r->a, a->data, sizeof(float) * (size_t)nq);
        memcpy(r->y, y->data, sizeof(float) * (size_t)nq);
        memcpy(r->dq, tq->grad, sizeof(float) * (size_t)nq);
        memcpy(r->dk, tk->grad, sizeof(float) * (size_t)nk);
        memcpy(r->dv, tv->grad, sizeof(float) * (size_t)nk);
    }
    r->peak = volt_step_arena_peak(s);
    volt_step_end(s);
    volt_step_destroy(s);
}

static double max_rel(const float *got, const float *want, int64_t n) {
    double e = 0, sc = 1;
    for (int64_t t = 0; t < n; t++) {
        double d = fabs((double)got[t] - want[t]);
        if (!(d <= e)) e = d;
        if (fabs(want[t]) > sc) sc = fabs(want[t]);
    }
    return e / sc;
}

static drop_run run_alloc(int64_t nq, int64_t nk) {
    return (drop_run){ malloc(sizeof(float) * (size_t)nq), malloc(sizeof(float) * (size_t)nq),
                       malloc(sizeof(float) * (size_t)nq), malloc(sizeof(float) * (size_t)nk),
                       malloc(sizeof(float) * (size_t)nk), 0 };
}
static void run_free(drop_run *r) { free(r->a); free(r->y); free(r->dq); free(r->dk); free(r->dv); }

/* Fused and unfused with the same seed: same attention output and grads within 1e-6
 * (relative to max(1, largest value); the two sum in different orders, a few f32 ulps),
 * the same mask after it (y: a's error times the 1 / (1 - 0.3) of that dropout); and p
 * matters (p = 0 differs), so the equality is not vacuous. */
static void check_unfused(const char *name, const ref_case *c, float p) {
    int64_t nq = c->B * c->H * c->Tq * c->D, nk = c->B * c->H * c->Tk * c->D;
    float *q = calloc((size_t)nq, sizeof(float)), *k = calloc((size_t)nk, sizeof(float)),
          *v = calloc((size_t)nk, sizeof(float)), *g = calloc((size_t)nq, sizeof(float));
    fill(q, nq); fill(k, nk); fill(v, nk); fill(g, nq);
    drop_run f = run_alloc(nq, nk), u = run_alloc(nq, nk), z = run_alloc(nq, nk);
    drop_step(c, p, true, q, k, v, g, &f);
    drop_step(c, p, false, q, k, v, g, &u);
    drop_step(c, 0.f, true, q, k, v, g, &z);
    double ea = max_rel(f.a, u.a, nq), ey = max_rel(f.y, u.y, nq), eq = max_rel(f.dq, u.dq, nq),
           ek = max_rel(f.dk, u.dk, nk), ev = max_rel(f.dv, u.dv, nk);
    CHECK(ea <= 1e-6 && ey <= 1e-6 / 0.7 && eq <= 1e-6 && ek <= 1e-6 && ev <= 1e-6,
          "%s: fused vs unfused: out %.2g, y %.2g, dq %.2g, dk %.2g, dv %.2g", name, ea, ey, eq, ek, ev);
    CHECK(max_rel(z.y, u.y, nq) > 1e-2, "%s: p = %g changes nothing", name, p);
    CHECK(f.peak < u.peak, "%s: fused arena peak %zu, unfused %zu", name, f.peak, u.peak);
    printf("%s: fused vs unfused max rel diff out %.1e y %.1e dq %.1e dk %.1e dv %.1e; arena peak %zu vs %zu\n", name,
           ea, ey, eq, ek, ev, f.peak, u.peak);
    run_free(&f); run_free(&u); run_free(&z);
    free(q); free(k); free(v); free(g);
}

static void drop_vs_unfused(void) {
    static uint8_t mask[2 * 150];
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 150; j++) mask[b * 150 + j] = b == 0 ? j < 150 - 9 : (j < 61 && j % 7 != 3);
    uint8_t m70[2 * 70];
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 70; j++) m70[b * 70 + j] = b == 0 ? j != 5 : j < 43;
    check_unfused("attention_dropout (2,3,70,16) p 0.1", &(ref_case){ 2, 3, 70, 70, 16, false, NULL }, 0.1f);
    check_unfused("attention_dropout (2,3,70,16) mask p 0.1", &(ref_case){ 2, 3, 70, 70, 16, false, m70 }, 0.1f);
    check_unfused("attention_dropout (2,3,70,16) causal+mask p 0.5", &(ref_case){ 2, 3, 70, 70, 16, true, m70 }, 0.5f);
    check_unfused("attention_dropout (2,2,150,24) mask p 0.1", &(ref_case){ 2, 2, 150, 150, 24, false, mask }, 0.1f);
    check_unfused("attention_dropout q (2,2,70,8) kv (2,2,150,8) mask p 0.3",
                  &(ref_case){ 2, 2, 70, 150, 8, false, mask }, 0.3f);
}

/* p == 0 in training: volt_attention's bits, and the call index is taken (the next
 * dropout's mask is the one after volt_dropout(x, 0)); evaluation: volt_attention's bits
 * whatever p. */
static void drop_identity(void) {
    enum { B = 2, H = 2, T = 9, D = 4, N = B * H * T * D };
    static float q[N], k[N], v[N], y0[N], y1[N];
    fill(q, N); fill(k, N); fill(v, N);
    uint8_t mask[B * T] = { 1, 1, 1, 1, 1, 1, 1, 0, 0,  1, 1, 1, 1, 1, 1, 1, 1, 1 };
    volt_step *s = mkstep_seed(1 << 18, 3);
    for (int mode = 0; mode < 3; mode++) {   /* 0: training p 0, 1: evaluation p 0.5, 2: eval p 0 */
        for (int fused = 0; fused < 2; fused++) {
            volt_step_begin(s, mode == 0, 11);
            volt_tensor *tq = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), q);
            volt_tensor *tk = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), k);
            volt_tensor *tv = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), v);
            volt_tensor *tm = volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(B, T), mask);
            volt_tensor *a = fused ? volt_attention_dropout(s, tq, tk, tv, tm, false, mode == 1 ? 0.5f : 0.f)
                                   : volt_dropout(s, volt_attention(s, tq, tk, tv, tm, false), 0.f);
            volt_tensor *y = volt_dropout(s, a, 0.5f);
            CHECK(y != NULL, "%s", volt_step_errmsg(s));
            if (y) memcpy(fused ? y1 : y0, y->data, sizeof y0);
            volt_step_end(s);
        }
        CHECK(!memcmp(y0, y1, sizeof y0), "mode %d: attention_dropout differs from attention + dropout(0)", mode);
    }
    volt_step_destroy(s);
}

/* Same bits for 1 and 2 threads with dropout; no heap allocation after warm-up. */
static void drop_threads(void) {
    enum { B = 2, H = 3, T = 70, D = 16, N = B * H * T * D };
    static float q[N], k[N], v[N], g[N], out1[N], dq1[N], dk1[N], dv1[N];
    fill(q, N); fill(k, N); fill(v, N); fill(g, N);
    uint8_t mask[B * T];
    for (int j = 0; j < B * T; j++) mask[j] = j < T || j % T < 50;
    volt_step *s = mkstep_seed(1 << 16, 5);
    int max_threads = omp_get_max_threads();
    uint64_t allocs = 0;
    for (int rep = 0; rep < 4; rep++) {
        omp_set_num_threads(rep == 0 ? 1 : (max_threads > 1 ? max_threads : 2));
        volt_step_begin(s, true, 2);
        volt_tensor *tq = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), q));
        volt_tensor *tk = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), k));
        volt_tensor *tv = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), v));
        volt_tensor *tm = volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(B, T), mask);
        volt_tensor *o = volt_attention_dropout(s, tq, tk, tv, tm, true, 0.2f);
        CHECK(o && volt_step_backward_grad(s, o, g) == VOLT_OK, "%s", volt_step_errmsg(s));
        if (o) {
            if (rep == 0) {
                memcpy(out1, o->data, sizeof out1);
                memcpy(dq1, tq->grad, sizeof dq1);
                memcpy(dk1, tk->grad, sizeof dk1);
                memcpy(dv1, tv->grad, sizeof dv1);
            } else {
                CHECK(!memcmp(out1, o->data, sizeof out1) && !memcmp(dq1, tq->grad, sizeof dq1) &&
                      !memcmp(dk1, tk->grad, sizeof dk1) && !memcmp(dv1, tv->grad, sizeof dv1),
                      "attention_dropout: results depend on the thread count");
            }
        }
        volt_step_end(s);
        if (rep == 2) allocs = volt_step_heap_allocs(s);
    }
    CHECK(volt_step_heap_allocs(s) == allocs, "attention_dropout: heap allocations after warm-up: %llu -> %llu",
          (unsigned long long)allocs, (unsigned long long)volt_step_heap_allocs(s));
    omp_set_num_threads(max_threads);
    volt_step_destroy(s);
}

/* At T = 512 a training step's arena (forward + backward, 2 threads) stays under a third of
 * one (B, H, T, T) f32 tensor: nothing T x T is kept, only per-thread (64, T) tiles and
 * (B, H, T, D) tensors; the unfused composition needs several T x T tensors. */
static void drop_memory(void) {
    const ref_case c = { 2, 4, 512, 512, 8, false, NULL };
    int64_t n = c.B * c.H * c.Tq * c.D, tt = (int64_t)sizeof(float) * c.B * c.H * c.Tq * c.Tk;
    float *q = calloc((size_t)n, sizeof(float)), *k = calloc((size_t)n, sizeof(float)),
          *v = calloc((size_t)n, sizeof(float)), *g = calloc((size_t)n, sizeof(float));
    fill(q, n); fill(k, n); fill(v, n); fill(g, n);
    int max_threads = omp_get_max_threads();
    omp_set_num_threads(2);
    drop_run f = run_alloc(n, n), u = run_alloc(n, n);
    drop_step(&c, 0.1f, true, q, k, v, g, &f);
    drop_step(&c, 0.1f, false, q, k, v, g, &u);
    CHECK(f.peak < (size_t)tt / 3, "fused attention_dropout: arena peak %zu, one (B,H,T,T) tensor is %lld", f.peak,
          (long long)tt);
    CHECK(u.peak > (size_t)tt * 2, "unfused reference: arena peak %zu (the bound above would catch it)", u.peak);
    omp_set_num_threads(max_threads);
    run_free(&f); run_free(&u);
    free(q); free(k); free(v); free(g);
}

static void drop_errors(void) {
    volt_step *s = mkstep(1 << 16);
    const float bad[] = { -0.1f, 1.f, 1.5f, NAN };
    for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
        for (int training = 0; training < 2; training++) {
            volt_step_begin(s, training, 0);
            volt_tensor *q = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(1, 1, 2, 2));
            CHECK(volt_attention_dropout(s, q, q, q, NULL, false, bad[t]) == NULL &&
                  volt_step_status(s) == VOLT_ERR_INVALID_ARG && strstr(volt_step_errmsg(s), "attention_dropout"),
                  "p %g (training %d) accepted: %s", bad[t], training, volt_step_errmsg(s));
            volt_step_end(s);
        }
    }
    /* shape errors as volt_attention's */
    volt_step_begin(s, true, 0);
    volt_tensor *q = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3, 5, 8)), *k = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3, 5, 4));
    CHECK(volt_attention_dropout(s, q, k, k, NULL, false, 0.1f) == NULL && volt_step_status(s) == VOLT_ERR_SHAPE &&
          strstr(volt_step_errmsg(s), "(2, 3, 5, 4)"), "shape: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_destroy(s);
}

/* volt_attention_heads (q, k, v, out as (B, T, H*D)) against the split/permute/merge it
 * replaces: the same bits forward and backward (the grads land on the same packed leaves),
 * the dropout mask and the later call indices included, for f32 and bf16 compute, padded
 * keys, causal, Tq != Tk, 1 and 2 threads. */
static void heads_run(int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t D, bool causal, const uint8_t *mask,
                      float p, volt_dtype cd, bool packed, const float *q, const float *k, const float *v,
                      const float *g, float *out) {
    int64_t nq = B * Tq * H * D, nk = B * Tk * H * D;
    volt_step *s = mkstep_seed(1 << 22, 77);
    volt_step_set_compute_dtype(s, cd);
    volt_step_begin(s, true, 3);
    volt_tensor *tq = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, Tq, H * D), (void *)q));
    volt_tensor *tk = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, Tk, H * D), (void *)k));
    volt_tensor *tv = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, Tk, H * D), (void *)v));
    volt_tensor *tm = mask ? volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(B, Tk), (void *)mask) : NULL;
    volt_tensor *o;
    if (packed) o = volt_attention_heads(s, tq, tk, tv, H, tm, causal, p);
    else {
        static const int split[4] = { 0, 2, 1, 3 };
        volt_tensor *q4 = volt_permute(s, volt_reshape(s, tq, VOLT_SHAPE(B, Tq, H, D)), split);
        volt_tensor *k4 = volt_permute(s, volt_reshape(s, tk, VOLT_SHAPE(B, Tk, H, D)), split);
        volt_tensor *v4 = volt_permute(s, volt_reshape(s, tv, VOLT_SHAPE(B, Tk, H, D)), split);
        o = volt_reshape(s, volt_permute(s, volt_attention_dropout(s, q4, k4, v4, tm, causal, p), split),
                         VOLT_SHAPE(B, Tq, H * D));
    }
    volt_tensor *y = volt_dropout(s, o, 0.3f);
    CHECK(y && volt_step_backward_grad(s, y, g) == VOLT_OK, "%s", volt_step_errmsg(s));
    if (y) {
        memcpy(out, y->data, sizeof(float) * (size_t)nq);
        memcpy(out + nq, tq->grad, sizeof(float) * (size_t)nq);
        memcpy(out + 2 * nq, tk->grad, sizeof(float) * (size_t)nk);
        memcpy(out + 2 * nq + nk, tv->grad, sizeof(float) * (size_t)nk);
    }
    volt_step_end(s);
    volt_step_destroy(s);
}

static void heads_layout(void) {
    static const struct { int64_t B, H, Tq, Tk, D; bool causal, mask; float p; } cs[] = {
        { 2, 3, 70, 70, 16, false, true, 0.1f }, { 2, 3, 70, 70, 16, true, true, 0.f },
        { 2, 2, 37, 150, 8, false, true, 0.3f }, { 1, 4, 130, 130, 64, true, false, 0.1f },
    };
    int max_threads = omp_get_max_threads();
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        int64_t B = cs[c].B, H = cs[c].H, Tq = cs[c].Tq, Tk = cs[c].Tk, D = cs[c].D;
        int64_t nq = B * Tq * H * D, nk = B * Tk * H * D, nout = 2 * nq + 2 * nk;
        float *q = malloc(sizeof(float) * (size_t)nq), *k = malloc(sizeof(float) * (size_t)nk),
              *v = malloc(sizeof(float) * (size_t)nk), *g = malloc(sizeof(float) * (size_t)nq);
        float *a = malloc(sizeof(float) * (size_t)nout), *b = malloc(sizeof(float) * (size_t)nout);
        uint8_t *mask = malloc((size_t)(B * Tk));
        fill(q, nq); fill(k, nk); fill(v, nk); fill(g, nq);
        for (int64_t t = 0; t < B * Tk; t++) mask[t] = (t / Tk == 0) ? t % Tk < Tk - 5 : (t % Tk) % 9 != 4;
        for (int cd = 0; cd < 2; cd++)
            for (int th = 1; th <= 2; th++) {
                omp_set_num_threads(th);
                volt_dtype dt = cd ? VOLT_BF16 : VOLT_F32;
                const uint8_t *m = cs[c].mask ? mask : NULL;
                heads_run(B, H, Tq, Tk, D, cs[c].causal, m, cs[c].p, dt, true, q, k, v, g, a);
                heads_run(B, H, Tq, Tk, D, cs[c].causal, m, cs[c].p, dt, false, q, k, v, g, b);
                int64_t bad = -1;
                for (int64_t t = 0; t < nout && bad < 0; t++)
                    if (memcmp(&a[t], &b[t], sizeof(float))) bad = t;
                CHECK(bad < 0, "attention_heads case %zu (%s, %d threads): differs from split/merge at element %lld "
                      "(%s): %.9g vs %.9g", c, cd ? "bf16" : "f32", th, (long long)bad,
                      bad < nq ? "out" : bad < 2 * nq ? "dq" : bad < 2 * nq + nk ? "dk" : "dv",
                      bad >= 0 ? a[bad] : 0., bad >= 0 ? b[bad] : 0.);
            }
        free(q); free(k); free(v); free(g); free(a); free(b); free(mask);
    }
    omp_set_num_threads(max_threads);
    /* errors: n_heads, shapes */
    volt_step *s = mkstep(1 << 16);
    volt_step_begin(s, true, 0);
    volt_tensor *x = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 5, 12)), *x4 = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 1, 5, 12));
    volt_tensor *y = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 5, 8));
    CHECK(!volt_attention_heads(s, x, x, x, 0, NULL, false, 0.f) && volt_step_status(s) == VOLT_ERR_INVALID_ARG &&
          strstr(volt_step_errmsg(s), "n_heads"), "n_heads 0: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, true, 0);
    CHECK(!volt_attention_heads(s, x, x, x, 5, NULL, false, 0.f) && volt_step_status(s) == VOLT_ERR_SHAPE &&
          strstr(volt_step_errmsg(s), "divide"), "12 %% 5: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, true, 0);
    CHECK(!volt_attention_heads(s, x4, x4, x4, 3, NULL, false, 0.f) && volt_step_status(s) == VOLT_ERR_SHAPE,
          "4-D input accepted: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, true, 0);
    CHECK(!volt_attention_heads(s, x, y, y, 3, NULL, false, 0.f) && volt_step_status(s) == VOLT_ERR_SHAPE,
          "k of another width accepted: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, true, 0);
    CHECK(!volt_attention_heads(s, x, x, x, 3, NULL, false, 1.f) && volt_step_status(s) == VOLT_ERR_INVALID_ARG,
          "p 1 accepted: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_destroy(s);
}

/* One tensor as several of q, k, v (self-attention on x itself): its grad is the sum of the
 * grads the separate tensors get. Their grads share one buffer, written in turns by the
 * kernel (core/cpu/attention.c block_betas): every product must add. Several query tiles,
 * padding and causal, f32 and bf16 compute; x = q = k = v, and x = q = k with v apart. */
static void aliased_inputs(void) {
    const int64_t B = 2, H = 2, T = 150, D = 16, n = B * H * T * D;
    uint8_t mask[2 * 150];
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 150; j++) mask[b * 150 + j] = b == 0 ? j < 150 - 7 : j < 90;
    float *x = malloc(sizeof(float) * (size_t)n), *v = malloc(sizeof(float) * (size_t)n);
    float *g = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n);
    fill(x, n); fill(v, n); fill(g, n);
    volt_step *s = mkstep(1 << 20);
    for (int cdi = 0; cdi < 2; cdi++)
        for (int causal = 0; causal < 2; causal++)
            for (int all3 = 0; all3 < 2; all3++) {
                volt_dtype cd = cdi ? VOLT_BF16 : VOLT_F32;
                const float *vd = all3 ? x : v;
                /* reference: three (or two) separate tensors with the same data */
                volt_step_begin(s, true, 0);
                CHECK_OK(volt_step_set_compute_dtype(s, cd));
                volt_tensor *q1 = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), x));
                volt_tensor *k1 = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), x));
                volt_tensor *v1 = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), (void *)vd));
                volt_tensor *m1 = volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(B, T), mask);
                volt_tensor *o1 = volt_attention(s, q1, k1, v1, m1, causal);
                CHECK(o1 && volt_step_backward_grad(s, o1, g) == VOLT_OK, "aliased reference: %s", volt_step_errmsg(s));
                for (int64_t t = 0; t < n; t++) want[t] = q1->grad[t] + k1->grad[t] + (all3 ? v1->grad[t] : 0.f);
                volt_step_end(s);
                /* the same tensor as q and k (and v) */
                volt_step_begin(s, true, 0);
                CHECK_OK(volt_step_set_compute_dtype(s, cd));
                volt_tensor *xt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), x));
                volt_tensor *vt = all3 ? xt : volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), v);
                volt_tensor *m2 = volt_tensor_wrap(s, VOLT_U8, VOLT_SHAPE(B, T), mask);
                volt_tensor *o2 = volt_attention(s, xt, xt, vt, m2, causal);
                CHECK(o2 && volt_step_backward_grad(s, o2, g) == VOLT_OK, "aliased: %s", volt_step_errmsg(s));
                double worst = 0, scale = 0;
                for (int64_t t = 0; t < n && o2; t++) {
                    double d = fabs((double)xt->grad[t] - want[t]);
                    if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
                    scale = fmax(scale, fabs(want[t]));
                }
                /* the same products, summed in another order: f32 rounding apart */
                CHECK(worst <= 1e-5 * (1 + scale), "%s attention, x as q, k%s%s: grad differs from the separate "
                      "tensors' sum by %g (max %g)", cdi ? "bf16" : "f32", all3 ? ", v" : "", causal ? ", causal" : "",
                      worst, scale);
                volt_step_end(s);
            }
    volt_step_destroy(s);
    free(x); free(v); free(g); free(want);
}

int main(void) {
    grads();
    reference();
    reference_bf16();
    fully_masked();
    threads_and_arena();
    errors();
    drop_grads();
    drop_vs_unfused();
    drop_identity();
    drop_threads();
    drop_memory();
    drop_errors();
    heads_layout();
    aliased_inputs();
    return vtest_finish();
}
