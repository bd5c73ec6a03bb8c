/* Scaled dot-product attention: finite-difference gradients (padding masks of every
 * dtype, causal, Tq != Tk, fully masked rows), forward and backward against a naive
 * double-precision reference with an explicit (Tq, Tk) softmax, several query tiles,
 * zero output and grads for fully masked rows, thread-count independence, no heap
 * growth after warm-up, and shape/dtype errors that name the op and both shapes. */
#include <omp.h>
#include "gradcheck.h"

typedef struct attn_ctx { bool causal, mask; } attn_ctx;

static volt_tensor *f_attn(volt_step *s, volt_tensor **in, void *c) {
    const attn_ctx *a = c;
    return volt_attention(s, in[0], in[1], in[2], a->mask ? in[3] : NULL, a->causal);
}

static gc_input mask_input(volt_dtype dt, int64_t B, int64_t Tk, const void *data) {
    return (gc_input){ .dt = dt, .shape = VOLT_SHAPE(B, Tk), .diff = false, .data = data };
}


/* gradcheck's double-precision reference: softmax(q k^T / sqrt(D) + mask) v with an explicit
 * (Tq, Tk) matrix per (b, h); a row that sees no key gives zeros. */
static void r_attn(const gc_input *ins, double *const *x, double *y, void *c) {
    const attn_ctx *a = c;
    const int64_t *qs = ins[0].shape.d;
    int64_t B = qs[0], H = qs[1], Tq = qs[2], D = qs[3], Tk = ins[1].shape.d[2];
    double p[64], scale = 1 / sqrt((double)D);
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H;
        const double *q = x[0] + bh * Tq * D, *k = x[1] + bh * Tk * D, *v = x[2] + bh * Tk * D;
        for (int64_t i = 0; i < Tq; i++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < Tk; j++) {
                bool vis = !(a->mask && x[3][b * Tk + j] == 0) && !(a->causal && j > i);
                double sij = 0;
                for (int64_t d = 0; d < D; d++) sij += q[i * D + d] * k[j * D + d];
                p[j] = vis ? sij * scale : -INFINITY;
                mx = fmax(mx, p[j]);
            }
            for (int64_t j = 0; j < Tk; j++) sum += p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx);
            for (int64_t d = 0; d < D; d++) {
                double acc = 0;
                for (int64_t j = 0; j < Tk; j++) acc += (sum > 0 ? p[j] / sum : 0) * v[j * D + d];
                y[bh * Tq * D + i * D + d] = acc;
            }
        }
    }
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

/* Forward (inference and training) and backward against the reference. */
static void check_reference(const char *name, const ref_case *c) {
    int64_t nq = c->B * c->H * c->Tq * c->D, nk = c->B * c->H * c->Tk * c->D;
    float *q = malloc(sizeof(float) * (size_t)nq), *k = malloc(sizeof(float) * (size_t)nk),
          *v = malloc(sizeof(float) * (size_t)nk), *g = malloc(sizeof(float) * (size_t)nq);
    /* larger logits than N(0,1)/sqrt(D) so softmax is peaked and max-subtraction matters */
    fill(q, nq); fill(k, nk); fill(v, nk); fill(g, nq);
    for (int64_t t = 0; t < nq; t++) q[t] *= 3.f;
    double *ro = malloc(sizeof(double) * (size_t)nq), *rdq = malloc(sizeof(double) * (size_t)nq),
           *rdk = malloc(sizeof(double) * (size_t)nk), *rdv = malloc(sizeof(double) * (size_t)nk);
    ref_attention(c, q, k, v, g, ro, rdq, rdk, rdv);

    volt_step *s = mkstep(1 << 20);
    for (int training = 0; training < 2; training++) {
        volt_step_begin(s, training, 0);
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
        CHECK(e <= 2e-5 * (1 + sc), "%s (training=%d): forward max error %g (max |out| %g)", name, training, e, sc);
        if (training) {
            CHECK_OK(volt_step_backward_grad(s, o, g));
            e = max_err(tq->grad, rdq, nq, &sc);
            CHECK(e <= 1e-4 * (1 + sc), "%s: dq max error %g (max %g)", name, e, sc);
            e = max_err(tk->grad, rdk, nk, &sc);
            CHECK(e <= 1e-4 * (1 + sc), "%s: dk max error %g (max %g)", name, e, sc);
            e = max_err(tv->grad, rdv, nk, &sc);
            CHECK(e <= 1e-4 * (1 + sc), "%s: dv max error %g (max %g)", name, e, sc);
        }
        volt_step_end(s);
    }
    volt_step_destroy(s);
    free(q); free(k); free(v); free(g); free(ro); free(rdq); free(rdk); free(rdv);
}

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

int main(void) {
    grads();
    reference();
    fully_masked();
    threads_and_arena();
    errors();
    return vtest_finish();
}
