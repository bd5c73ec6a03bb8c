/* Activations, softmax, layernorm, embedding, dropout: finite-difference gradients (odd
 * sizes, 1-element rows), values against formulas and a double-precision reference,
 * stability (large offsets, huge logits), determinism across thread counts, errors. */
#include "gradcheck.h"
#include "core/internal.h"   /* volt__rng_uniform: the dropout mask is pinned to it */
#ifdef _OPENMP
#include <omp.h>
#endif

static volt_tensor *f_gelu(volt_step *s, volt_tensor **in, void *c) { return volt_gelu(s, in[0]); }
static volt_tensor *f_gelu_tanh(volt_step *s, volt_tensor **in, void *c) { return volt_gelu_tanh(s, in[0]); }
static volt_tensor *f_tanh(volt_step *s, volt_tensor **in, void *c) { return volt_tanh(s, in[0]); }
static volt_tensor *f_sigmoid(volt_step *s, volt_tensor **in, void *c) { return volt_sigmoid(s, in[0]); }
static volt_tensor *f_softmax(volt_step *s, volt_tensor **in, void *c) { return volt_softmax(s, in[0]); }
static volt_tensor *f_log_softmax(volt_step *s, volt_tensor **in, void *c) { return volt_log_softmax(s, in[0]); }
static volt_tensor *f_ln(volt_step *s, volt_tensor **in, void *c) { return volt_layernorm(s, in[0], in[1], in[2], 1e-5f); }
static volt_tensor *f_ln_plain(volt_step *s, volt_tensor **in, void *c) { return volt_layernorm(s, in[0], NULL, NULL, 1e-5f); }
static volt_tensor *f_ln_w(volt_step *s, volt_tensor **in, void *c) { return volt_layernorm(s, in[0], in[1], NULL, 1e-5f); }
static volt_tensor *f_ln_b(volt_step *s, volt_tensor **in, void *c) { return volt_layernorm(s, in[0], NULL, in[1], 1e-5f); }
static volt_tensor *f_emb(volt_step *s, volt_tensor **in, void *c) { return volt_embedding(s, in[0], in[1]); }
static volt_tensor *f_dropout(volt_step *s, volt_tensor **in, void *c) { return volt_dropout(s, in[0], 0.3f); }
/* two dropouts in one step: different call indices, so different masks */
static volt_tensor *f_dropout2(volt_step *s, volt_tensor **in, void *c) {
    return volt_add(s, volt_dropout(s, in[0], 0.5f), volt_dropout(s, in[0], 0.5f));
}
/* softmax composed with a non-linear op so the upstream grad is not just R */
static volt_tensor *f_softmax_mul(volt_step *s, volt_tensor **in, void *c) {
    volt_tensor *p = volt_softmax(s, in[0]);
    return volt_mul(s, p, p);
}


/* ---- double-precision references (gradcheck): the formulas, in double ---------------- */
#define GC_N0 volt_shape_numel(ins[0].shape)
static void r_gelu(const gc_input *ins, double *const *x, double *y, void *c) {
    for (int64_t k = 0; k < GC_N0; k++) y[k] = 0.5 * x[0][k] * (1 + erf(x[0][k] / sqrt(2.0)));
}
static void r_gelu_tanh(const gc_input *ins, double *const *x, double *y, void *c) {
    for (int64_t k = 0; k < GC_N0; k++) {
        double v = x[0][k];
        y[k] = 0.5 * v * (1 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    }
}
static void r_tanh(const gc_input *ins, double *const *x, double *y, void *c) {
    for (int64_t k = 0; k < GC_N0; k++) y[k] = tanh(x[0][k]);
}
static void r_sigmoid(const gc_input *ins, double *const *x, double *y, void *c) {
    for (int64_t k = 0; k < GC_N0; k++) y[k] = 1 / (1 + exp(-x[0][k]));
}
/* softmax / log-softmax over the last dim */
static void r_softmax_rows(const gc_input *ins, const double *x, double *y, bool log_out) {
    int64_t C = gc_last(ins[0].shape), rows = gc_rows(ins[0].shape);
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * C;
        double m = -INFINITY, se = 0;
        for (int64_t j = 0; j < C; j++) m = fmax(m, xr[j]);
        for (int64_t j = 0; j < C; j++) se += exp(xr[j] - m);
        for (int64_t j = 0; j < C; j++) y[r * C + j] = log_out ? xr[j] - m - log(se) : exp(xr[j] - m) / se;
    }
}
static void r_softmax(const gc_input *ins, double *const *x, double *y, void *c) { r_softmax_rows(ins, x[0], y, false); }
static void r_log_softmax(const gc_input *ins, double *const *x, double *y, void *c) { r_softmax_rows(ins, x[0], y, true); }
static void r_softmax_mul(const gc_input *ins, double *const *x, double *y, void *c) {
    r_softmax_rows(ins, x[0], y, false);
    for (int64_t k = 0; k < GC_N0; k++) y[k] *= y[k];
}
/* layernorm over the last dim, biased variance, eps 1e-5; w = x[wi], b = x[bi] (-1: none) */
static void r_layernorm(const gc_input *ins, double *const *x, double *y, int wi, int bi) {
    int64_t C = gc_last(ins[0].shape), rows = gc_rows(ins[0].shape);
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x[0] + r * C;
        double mu = 0, var = 0;
        for (int64_t j = 0; j < C; j++) mu += xr[j];
        mu /= (double)C;
        for (int64_t j = 0; j < C; j++) var += (xr[j] - mu) * (xr[j] - mu);
        var /= (double)C;
        double inv = 1 / sqrt(var + (double)1e-5f);
        for (int64_t j = 0; j < C; j++)
            y[r * C + j] = (xr[j] - mu) * inv * (wi >= 0 ? x[wi][j] : 1) + (bi >= 0 ? x[bi][j] : 0);
    }
}
static void r_ln(const gc_input *ins, double *const *x, double *y, void *c) { r_layernorm(ins, x, y, 1, 2); }
static void r_ln_plain(const gc_input *ins, double *const *x, double *y, void *c) { r_layernorm(ins, x, y, -1, -1); }
static void r_ln_w(const gc_input *ins, double *const *x, double *y, void *c) { r_layernorm(ins, x, y, 1, -1); }
static void r_ln_b(const gc_input *ins, double *const *x, double *y, void *c) { r_layernorm(ins, x, y, -1, 1); }
/* ids (...) -> rows of the table (V, D) */
static void r_emb(const gc_input *ins, double *const *x, double *y, void *c) {
    int64_t D = gc_last(ins[1].shape);
    for (int64_t i = 0; i < GC_N0; i++)
        for (int64_t d = 0; d < D; d++) y[i * D + d] = x[1][(int64_t)x[0][i] * D + d];
}
/* dropout: keep k iff volt__rng_uniform(seed, step offset, call, k) >= p (gradcheck's step:
 * seed 1234, offset 7), kept values times 1/(1-p) */
static double r_keep(uint64_t call, int64_t k, double p) {
    return volt__rng_uniform(1234, 7, call, (uint64_t)k) >= (float)p ? 1 / (1 - (double)(float)p) : 0;
}
static void r_dropout(const gc_input *ins, double *const *x, double *y, void *c) {
    for (int64_t k = 0; k < GC_N0; k++) y[k] = x[0][k] * r_keep(0, k, 0.3);
}
static void r_dropout2(const gc_input *ins, double *const *x, double *y, void *c) {
    for (int64_t k = 0; k < GC_N0; k++) y[k] = x[0][k] * (r_keep(0, k, 0.5) + r_keep(1, k, 0.5));
}

typedef volt_tensor *(*unary_fn)(volt_step *, volt_tensor *);

static void grads(void) {
    static const struct { const char *name; gc_fn f; gc_ref_fn r; } un[] = {
        { "gelu", f_gelu, r_gelu }, { "gelu_tanh", f_gelu_tanh, r_gelu_tanh }, { "tanh", f_tanh, r_tanh },
        { "sigmoid", f_sigmoid, r_sigmoid }, { "softmax", f_softmax, r_softmax },
        { "log_softmax", f_log_softmax, r_log_softmax }, { "softmax*softmax", f_softmax_mul, r_softmax_mul },
        { "layernorm plain", f_ln_plain, r_ln_plain }, { "dropout", f_dropout, r_dropout },
        { "dropout x2", f_dropout2, r_dropout2 },
    };
    const volt_shape shapes[] = { VOLT_SHAPE(7, 13), VOLT_SHAPE(3, 5, 11), VOLT_SHAPE(1, 1), VOLT_SHAPE(4, 1),
                                  VOLT_SHAPE(2, 3, 4, 5), VOLT_SHAPE(37) };
    for (size_t i = 0; i < sizeof un / sizeof un[0]; i++)
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
            char name[96], sh[48];
            snprintf(name, sizeof name, "%s %s", un[i].name, volt_shape_str(shapes[j], sh, sizeof sh));
            gradcheck(name, un[i].f, un[i].r, NULL, 1, (gc_input[]){ GC_F32(shapes[j]) });
        }
    /* wider inputs exercise the tails of the activations (exp/erf/tanh branches) */
    gc_input wide = GC_F32(VOLT_SHAPE(7, 13));
    wide.scale = 4;
    gradcheck("gelu wide", f_gelu, r_gelu, NULL, 1, &wide);
    gradcheck("gelu_tanh wide", f_gelu_tanh, r_gelu_tanh, NULL, 1, &wide);
    gradcheck("tanh wide", f_tanh, r_tanh, NULL, 1, &wide);
    gradcheck("sigmoid wide", f_sigmoid, r_sigmoid, NULL, 1, &wide);
    gradcheck("softmax wide", f_softmax, r_softmax, NULL, 1, &wide);
    gradcheck("log_softmax wide", f_log_softmax, r_log_softmax, NULL, 1, &wide);

    /* layernorm: affine, weight only, bias only, 1-element rows */
    gradcheck("layernorm 7x13", f_ln, r_ln, NULL, 3, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)), GC_F32(VOLT_SHAPE(13)), GC_F32(VOLT_SHAPE(13)) });
    gradcheck("layernorm 3x5x11", f_ln, r_ln, NULL, 3, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 5, 11)), GC_F32(VOLT_SHAPE(11)), GC_F32(VOLT_SHAPE(11)) });
    gradcheck("layernorm 4x1", f_ln, r_ln, NULL, 3, (gc_input[]){ GC_F32(VOLT_SHAPE(4, 1)), GC_F32(VOLT_SHAPE(1)), GC_F32(VOLT_SHAPE(1)) });
    gradcheck("layernorm 1x1", f_ln, r_ln, NULL, 3, (gc_input[]){ GC_F32(VOLT_SHAPE(1, 1)), GC_F32(VOLT_SHAPE(1)), GC_F32(VOLT_SHAPE(1)) });
    gradcheck("layernorm 1x300", f_ln, r_ln, NULL, 3, (gc_input[]){ GC_F32(VOLT_SHAPE(1, 300)), GC_F32(VOLT_SHAPE(300)), GC_F32(VOLT_SHAPE(300)) });
    gradcheck("layernorm w only", f_ln_w, r_ln_w, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)), GC_F32(VOLT_SHAPE(13)) });
    gradcheck("layernorm b only", f_ln_b, r_ln_b, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 5, 11)), GC_F32(VOLT_SHAPE(11)) });
    /* large offset: x = 100 + N(0, 1) */
    float xo[91];
    for (int k = 0; k < 91; k++) xo[k] = 100.f + (float)gc_normal();
    gc_input lo = GC_F32(VOLT_SHAPE(7, 13));
    lo.data = xo;
    gradcheck("layernorm mean 100", f_ln, r_ln, NULL, 3, (gc_input[]){ lo, GC_F32(VOLT_SHAPE(13)), GC_F32(VOLT_SHAPE(13)) });

    /* embedding: repeated ids (accumulation), i32 and i64, 1-, 2- and 3-d ids */
    gradcheck("embedding 2-d i64", f_emb, r_emb, NULL, 2, (gc_input[]){ GC_INDEX(VOLT_SHAPE(3, 5), 7), GC_F32(VOLT_SHAPE(7, 13)) });
    gc_input i32 = { .dt = VOLT_I32, .shape = VOLT_SHAPE(2, 3, 4), .int_hi = 5 };
    gradcheck("embedding 3-d i32", f_emb, r_emb, NULL, 2, (gc_input[]){ i32, GC_F32(VOLT_SHAPE(5, 11)) });
    int64_t rep[6] = { 2, 2, 0, 2, 1, 2 };
    gc_input ri = GC_INDEX(VOLT_SHAPE(6), 3);
    ri.data = rep;
    gradcheck("embedding repeated", f_emb, r_emb, NULL, 2, (gc_input[]){ ri, GC_F32(VOLT_SHAPE(3, 1)) });
}

static volt_step *mkstep(uint64_t seed) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = 1 << 20;
    cfg.seed = seed;
    volt_step *s = NULL;
    volt_step_create(&cfg, &s);
    return s;
}

static float *fdata(volt_tensor *t) { return t ? (float *)t->data : NULL; }

/* values of the activations against libm in double on a sweep, including extremes */
static void activation_values(void) {
    volt_step *s = mkstep(0);
    volt_step_begin(s, false, 0);
    float pts[4] = { 1.f, -1.f, 0.5f, 3.f };
    volt_tensor *x = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(4), pts);
    float *g = fdata(volt_gelu(s, x)), *gt = fdata(volt_gelu_tanh(s, x));
    CHECK(g && gt, "gelu forward");
    if (g && gt) {
        CHECK_CLOSE(g[0], 0.8413447, 0, 2e-7);
        CHECK_CLOSE(g[1], -0.1586553, 0, 2e-7);
        CHECK_CLOSE(g[2], 0.3457312892, 0, 2e-7);
        CHECK_CLOSE(g[3], 2.9959502, 0, 5e-7);
        CHECK_CLOSE(gt[0], 0.8411920, 0, 2e-7);
        CHECK_CLOSE(gt[1], -0.1588080, 0, 2e-7);
        CHECK_CLOSE(gt[3], 2.9963627, 0, 5e-7);
    }
    enum { N = 4001 };
    static float xs[N + 8];
    for (int k = 0; k < N; k++) xs[k] = -20.f + 40.f * (float)k / (N - 1);
    float extremes[8] = { 0.f, 1e-6f, -1e-6f, 1e-30f, 100.f, -100.f, 1e4f, -1e4f };
    memcpy(xs + N, extremes, sizeof extremes);
    x = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(N + 8), xs);
    float *y[4] = { fdata(volt_gelu(s, x)), fdata(volt_gelu_tanh(s, x)), fdata(volt_tanh(s, x)), fdata(volt_sigmoid(s, x)) };
    const char *names[4] = { "gelu", "gelu_tanh", "tanh", "sigmoid" };
    for (int f = 0; f < 4; f++) {
        if (!y[f]) { CHECK(0, "%s forward: %s", names[f], volt_step_errmsg(s)); continue; }
        double worst = 0;
        int at = 0;
        for (int k = 0; k < N + 8; k++) {
            double v = xs[k], ref;
            switch (f) {
            /* 0.5 v (1 + erf(v/sqrt2)) and 0.5 v (1 + tanh(u)), written without the cancellation */
            case 0: ref = 0.5 * v * erfc(-v / sqrt(2.0)); break;
            case 1: ref = v / (1 + exp(-2 * sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); break;
            case 2: ref = tanh(v); break;
            default: ref = 1 / (1 + exp(-v)); break;
            }
            /* relative everywhere (the negative tails too), down to values near f32 underflow;
             * in the tails the f32 rounding of the exp argument (~x^2) sets the floor */
            double err = fabs(y[f][k] - ref) / (fabs(ref) + 1e-30) / fmax(1, v * v / 8);
            if (!(err <= worst)) { worst = err; at = k; }
        }
        CHECK(worst < 2e-6, "%s: worst relative error %.3g at x = %g", names[f], worst, xs[at]);
        if (getenv("VOLT_TEST_VERBOSE")) printf("%s: worst relative error %.3g at x = %g\n", names[f], worst, xs[at]);
    }
    /* small arguments keep relative precision (no 1 - 2/(e^2x + 1) cancellation) */
    if (y[2]) CHECK_CLOSE(y[2][N + 1], 1e-6, 1e-6, 0);
    if (y[0]) CHECK(y[0][N + 4] == 100.f && y[0][N + 5] == 0.f && y[0][N + 6] == 1e4f, "gelu saturates: %g %g", y[0][N + 4], y[0][N + 5]);
    if (y[3]) CHECK(y[3][N + 6] == 1.f && y[3][N + 7] == 0.f, "sigmoid saturates");
    float nan_in = NAN;
    float *yn = fdata(volt_tanh(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(1), &nan_in)));
    CHECK(yn && isnan(yn[0]), "tanh(nan) is nan");
    volt_step_end(s);
    volt_step_destroy(s);
}

static void softmax_values(void) {
    volt_step *s = mkstep(0);
    volt_step_begin(s, false, 0);
    /* by hand; the second row is the first + 1000 (stability), the third has -inf */
    float in[9] = { 1, 2, 3, 1001, 1002, 1003, -INFINITY, 0, 0 };
    volt_tensor *x = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(3, 3), in);
    float *p = fdata(volt_softmax(s, x)), *lp = fdata(volt_log_softmax(s, x));
    double z = exp(1) + exp(2) + exp(3);
    double want[9] = { exp(1) / z, exp(2) / z, exp(3) / z, exp(1) / z, exp(2) / z, exp(3) / z, 0, 0.5, 0.5 };
    CHECK(p && lp, "softmax forward: %s", volt_step_errmsg(s));
    if (p && lp)
        for (int k = 0; k < 9; k++) {
            CHECK_CLOSE(p[k], want[k], 1e-6, 1e-7);
            if (k != 6) CHECK_CLOSE(lp[k], log(want[k]), 1e-6, 1e-6);
            else CHECK(isinf(lp[k]) && lp[k] < 0, "log_softmax(-inf) = %g", lp[k]);
        }
    /* rows of a wide random input sum to 1 */
    enum { R = 17, C = 1001 };
    static float big[R * C];
    for (int k = 0; k < R * C; k++) big[k] = (float)(gc_normal() * 10);
    p = fdata(volt_softmax(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(R, C), big)));
    lp = fdata(volt_log_softmax(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(R, C), big)));
    CHECK(p && lp, "softmax wide forward");
    for (int r = 0; p && lp && r < R; r++) {
        double sum = 0, lsum = 0;
        for (int c = 0; c < C; c++) { sum += p[r * C + c]; lsum += exp(lp[r * C + c]); }
        CHECK_CLOSE(sum, 1.0, 1e-5, 0);
        CHECK_CLOSE(lsum, 1.0, 1e-5, 0);
    }
    /* errors */
    CHECK(volt_softmax(s, volt_tensor_new(s, VOLT_F32, VOLT_SCALAR)) == NULL && volt_step_status(s) == VOLT_ERR_SHAPE &&
          strstr(volt_step_errmsg(s), "softmax"), "softmax of a scalar: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, false, 0);
    CHECK(volt_log_softmax(s, volt_tensor_new(s, VOLT_I32, VOLT_SHAPE(2, 3))) == NULL && volt_step_status(s) == VOLT_ERR_DTYPE,
          "log_softmax of i32: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_destroy(s);
}

/* layernorm forward and backward against a double reference, at mean 0 and mean 100 */
static void layernorm_reference(float offset, bool affine) {
    enum { R = 9, C = 77 };
    static float x[R * C], w[C], b[C], dy[R * C];
    for (int k = 0; k < R * C; k++) { x[k] = offset + (float)(gc_normal() * 0.5); dy[k] = (float)gc_normal(); }
    for (int c = 0; c < C; c++) { w[c] = 1 + (float)(gc_normal() * 0.2); b[c] = (float)gc_normal(); }
    double eps = 1e-5, ref_y[R * C], ref_dx[R * C], ref_dw[C] = { 0 }, ref_db[C] = { 0 };
    for (int r = 0; r < R; r++) {
        double m = 0, v = 0, mg = 0, mgx = 0;
        for (int c = 0; c < C; c++) m += x[r * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[r * C + c] - m) * (x[r * C + c] - m);
        double rs = 1 / sqrt(v / C + eps);
        for (int c = 0; c < C; c++) {
            double xh = (x[r * C + c] - m) * rs, gw = affine ? w[c] : 1.0, g = dy[r * C + c] * gw;
            ref_y[r * C + c] = affine ? xh * w[c] + b[c] : xh;
            mg += g / C;
            mgx += g * xh / C;
            ref_dw[c] += dy[r * C + c] * xh;
            ref_db[c] += dy[r * C + c];
        }
        for (int c = 0; c < C; c++) {
            double xh = (x[r * C + c] - m) * rs, g = dy[r * C + c] * (affine ? w[c] : 1.0);
            ref_dx[r * C + c] = rs * (g - mg - xh * mgx);
        }
    }
    volt_step *s = mkstep(0);
    volt_step_begin(s, true, 0);
    volt_tensor *xt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(R, C), x));
    volt_tensor *wt = affine ? volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(C), w)) : NULL;
    volt_tensor *bt = affine ? volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(C), b)) : NULL;
    volt_tensor *y = volt_layernorm(s, xt, wt, bt, (float)eps);
    CHECK(y, "layernorm forward: %s", volt_step_errmsg(s));
    if (y) {
        CHECK_OK(volt_step_backward_grad(s, y, dy));
        double ey = 0, edx = 0, edw = 0;
        for (int k = 0; k < R * C; k++) {
            ey = fmax(ey, fabs(fdata(y)[k] - ref_y[k]));
            edx = fmax(edx, fabs(xt->grad[k] - ref_dx[k]) / (1 + fabs(ref_dx[k])));
        }
        for (int c = 0; affine && c < C; c++)
            edw = fmax(edw, fmax(fabs(wt->grad[c] - ref_dw[c]), fabs(bt->grad[c] - ref_db[c])) / (1 + fabs(ref_dw[c])));
        /* at mean 100 the f32 input itself is quantised to 7.6e-6, i.e. 1.5e-5 of a 0.5 std */
        double tol = offset ? 1e-4 : 2e-6;
        CHECK(ey < tol && edx < 10 * tol && edw < 10 * tol, "layernorm offset %g affine %d: max err y %.3g dx %.3g dw/db %.3g",
              offset, affine, ey, edx, edw);
    }
    volt_step_end(s);
    volt_step_destroy(s);
}

static void layernorm_errors(void) {
    volt_step *s = mkstep(0);
    volt_step_begin(s, true, 0);
    volt_tensor *x = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(4, 6)), *w = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(5));
    CHECK(volt_layernorm(s, x, w, NULL, 1e-5f) == NULL && volt_step_status(s) == VOLT_ERR_SHAPE &&
          strstr(volt_step_errmsg(s), "layernorm") && strstr(volt_step_errmsg(s), "(5)") && strstr(volt_step_errmsg(s), "(4, 6)"),
          "layernorm weight shape: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, true, 0);
    x = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(4, 6));
    CHECK(volt_layernorm(s, x, NULL, NULL, -1.f) == NULL && volt_step_status(s) == VOLT_ERR_INVALID_ARG, "negative eps: %s",
          volt_step_errmsg(s));
    volt_step_end(s);
    /* eval steps keep no stats and still normalise */
    volt_step_begin(s, false, 0);
    float in[3] = { 1, 2, 3 };
    float *y = fdata(volt_layernorm(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(1, 3), in), NULL, NULL, 0.f));
    CHECK(y && fabsf(y[0] + 1.2247449f) < 1e-6f && y[1] == 0.f && fabsf(y[2] - 1.2247449f) < 1e-6f, "layernorm by hand");
    volt_step_end(s);
    volt_step_destroy(s);
}

static void embedding_values(void) {
    volt_step *s = mkstep(0);
    volt_step_begin(s, false, 0);
    float tab[12] = { 0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32 };   /* (4, 3) */
    int32_t ids[4] = { 3, 0, 3, 1 };
    volt_tensor *T = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(4, 3), tab);
    volt_tensor *e = volt_embedding(s, volt_tensor_wrap(s, VOLT_I32, VOLT_SHAPE(2, 2), ids), T);
    CHECK(e && e->shape.ndim == 3 && e->shape.d[0] == 2 && e->shape.d[1] == 2 && e->shape.d[2] == 3, "embedding shape");
    if (e) {
        const float *y = e->data;
        CHECK(y[0] == 30 && y[2] == 32 && y[3] == 0 && y[6] == 30 && y[9] == 10 && y[11] == 12, "embedding values");
    }
    volt_step_end(s);
    /* out-of-range ids name the id and its position */
    volt_step_begin(s, false, 0);
    int64_t bad[6] = { 0, 1, 2, 3, 4, 1 };
    T = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(4, 3), tab);
    CHECK(volt_embedding(s, volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(2, 3), bad), T) == NULL &&
          volt_step_status(s) == VOLT_ERR_INVALID_ARG && strstr(volt_step_errmsg(s), "embedding") &&
          strstr(volt_step_errmsg(s), "ids[1, 1] = 4") && strstr(volt_step_errmsg(s), "[0, 4)"),
          "out-of-range id: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, true, 0);
    int32_t neg[2] = { 1, -1 };
    T = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(4, 3), tab));
    CHECK(volt_embedding(s, volt_tensor_wrap(s, VOLT_I32, VOLT_SHAPE(2), neg), T) == NULL &&
          strstr(volt_step_errmsg(s), "ids[1] = -1"), "negative id: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, false, 0);
    T = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(4, 3), tab);
    CHECK(volt_embedding(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2)), T) == NULL && volt_step_status(s) == VOLT_ERR_DTYPE,
          "float ids rejected: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, false, 0);
    T = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(4, 3), tab);
    CHECK(volt_embedding(s, volt_tensor_new(s, VOLT_I64, VOLT_SHAPE(1, 1, 1, 1)), T) == NULL && volt_step_status(s) == VOLT_ERR_SHAPE,
          "4-d ids rejected: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_destroy(s);
}

/* padding_idx: positions holding the pad id send nothing to the pad row; other rows get the
 * sum of their positions' upstream grads (repeated ids accumulate); values are unchanged. */
static void embedding_padding_idx(void) {
    volt_step *s = mkstep(0);
    float tab[12] = { 0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32 };   /* (4, 3) */
    int64_t ids[5] = { 2, 0, 2, 3, 2 };
    float dy[15];
    for (int k = 0; k < 15; k++) dy[k] = (float)(k + 1);
    for (int pad = -1; pad <= 2; pad += 3) {
        volt_step_begin(s, true, 0);
        volt_tensor *T = volt_tensor_requires_grad(s, volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4, 3), tab));
        volt_tensor *e = volt_embedding_padded(s, volt_tensor_from_host(s, VOLT_I64, VOLT_SHAPE(5), ids), T, pad);
        CHECK(e && volt_step_backward_grad(s, e, dy) == VOLT_OK, "padded embedding: %s", volt_step_errmsg(s));
        float y[15], g[12];
        CHECK_OK(volt_tensor_to_host(e, y));
        CHECK_OK(volt_tensor_to_host(volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(4, 3), T->grad), g));
        CHECK(y[0] == 20 && y[3] == 0 && y[6] == 20 && y[9] == 30 && y[14] == 22, "pad %d: values as without padding", pad);
        for (int c = 0; c < 3; c++) {
            float row2 = pad == 2 ? 0.f : dy[c] + dy[6 + c] + dy[12 + c];
            CHECK(g[6 + c] == row2, "pad %d: row 2 grad[%d] = %g, want %g", pad, c, g[6 + c], row2);
            CHECK(g[c] == dy[3 + c] && g[9 + c] == dy[9 + c] && g[3 + c] == 0.f, "pad %d: rows 0, 1, 3 grads", pad);
        }
        volt_step_end(s);
    }
    volt_step_begin(s, true, 0);
    volt_tensor *T = volt_tensor_from_host(s, VOLT_F32, VOLT_SHAPE(4, 3), tab);
    CHECK(volt_embedding_padded(s, volt_tensor_from_host(s, VOLT_I64, VOLT_SHAPE(5), ids), T, 4) == NULL &&
          volt_step_status(s) == VOLT_ERR_INVALID_ARG && strstr(volt_step_errmsg(s), "padding_idx 4"),
          "padding_idx out of range: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_destroy(s);
}

/* The batched Philox (8 blocks per AVX2 pass where available) equals the one-block one:
 * every length up to 40 blocks (full and partial groups), a block index crossing 2^32. */
static void rng_blocks(void) {
    float got[4 * 40], want[4];
    int bad = 0;
    uint64_t starts[3] = { 0, 5, 0xFFFFFFF0ull };
    for (int si = 0; si < 3; si++)
        for (int64_t nb = 1; nb <= 40; nb++) {
            volt__rng_uniform_blocks(7, 3, 0x100000002ull, starts[si], nb, got);
            for (int64_t b = 0; b < nb; b++) {
                volt__rng_uniform4(7, 3, 0x100000002ull, starts[si] + (uint64_t)b, want);
                bad += memcmp(got + 4 * b, want, sizeof want) != 0;
            }
        }
    CHECK(bad == 0, "volt__rng_uniform_blocks == volt__rng_uniform4 block by block: %d blocks differ", bad);
}

static void dropout_values(void) {
    enum { N = 100000 };
    static float x[N];
    for (int k = 0; k < N; k++) x[k] = 1.f + (float)k / N;
    volt_step *s = mkstep(42);
    float *m1 = malloc(sizeof(float) * N), *m2 = malloc(sizeof(float) * N);

    volt_step_begin(s, true, 5);
    volt_tensor *xt = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(100, 1000), x);
    volt_tensor *y = volt_dropout(s, xt, 0.3f);
    CHECK(y && y != xt, "dropout in training makes a new tensor");
    int64_t kept = 0, scaled = 0, pinned = 0;
    float scale = 1.f / (1.f - 0.3f);
    if (y) {
        memcpy(m1, y->data, sizeof(float) * N);
        for (int k = 0; k < N; k++) {
            kept += m1[k] != 0;
            scaled += m1[k] == 0 || m1[k] == x[k] * scale;
            pinned += (m1[k] != 0) == (volt__rng_uniform(42, 5, 0, (uint64_t)k) >= 0.3f);
        }
    }
    CHECK(fabs((double)kept / N - 0.7) < 0.01, "dropout keeps %.4f", (double)kept / N);
    CHECK(scaled == N, "kept values scaled by 1/(1-p): %lld of %d", (long long)scaled, N);
    CHECK(pinned == N, "mask = volt__rng_uniform(seed, offset, call 0, k) >= p: %lld of %d", (long long)pinned, N);
    /* the second call in the same step uses call index 1: a different mask */
    volt_tensor *y2 = volt_dropout(s, xt, 0.3f);
    CHECK(y2 && memcmp(y2->data, m1, sizeof(float) * N) != 0, "second call differs");
    volt_step_end(s);

    /* same (seed, offset) again: same mask, on 1 thread or many */
#ifdef _OPENMP
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    volt_step_begin(s, true, 5);
    y = volt_dropout(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(N), x), 0.3f);
    CHECK(y && memcmp(y->data, m1, sizeof(float) * N) == 0, "same seed/offset, same mask");
    volt_step_end(s);
#ifdef _OPENMP
    omp_set_num_threads(nt);
#endif
    volt_step_begin(s, true, 6);
    y = volt_dropout(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(N), x), 0.3f);
    if (y) memcpy(m2, y->data, sizeof(float) * N);
    int64_t same = 0;
    for (int k = 0; y && k < N; k++) same += (m1[k] != 0) == (m2[k] != 0);
    CHECK(y && same < N * 0.7, "another offset, another mask (%lld of %d agree)", (long long)same, N);
    volt_step_end(s);

    /* identity: eval mode, p == 0 */
    volt_step_begin(s, false, 5);
    xt = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(N), x);
    CHECK(volt_dropout(s, xt, 0.3f) == xt, "eval mode: identity");
    volt_step_end(s);
    volt_step_begin(s, true, 5);
    xt = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(N), x);
    CHECK(volt_dropout(s, xt, 0.f) == xt, "p = 0: identity");
    volt_step_end(s);

    /* p outside [0, 1) */
    const float badp[3] = { 1.f, -0.1f, NAN };
    for (int i = 0; i < 3; i++) {
        volt_step_begin(s, true, 5);
        xt = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(N), x);
        CHECK(volt_dropout(s, xt, badp[i]) == NULL && volt_step_status(s) == VOLT_ERR_INVALID_ARG &&
              strstr(volt_step_errmsg(s), "dropout"), "p = %g rejected: %s", badp[i], volt_step_errmsg(s));
        volt_step_end(s);
    }
    volt_step_destroy(s);
    free(m1);
    free(m2);
}

/* Forward and backward of every op are bitwise identical for 1 and several threads
 * (sizes large enough to run in parallel; the embedding has many repeated ids). */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t k = 0; k < n; k++) h = (h ^ c[k]) * 1099511628211ull;
    return h;
}

enum { BR = 64, BC = 768, BV = 50, NOPS = 9 };

static void run_big(uint64_t hash[NOPS]) {
    static float x[BR * BC], w[BC], b[BC], tab[BV * BC], dy[8 * BR * BC];
    static int64_t ids[8 * BR];
    uint64_t st = gc_rng_state;
    gc_rng_state = 0x1234567ull;
    for (int k = 0; k < BR * BC; k++) x[k] = (float)gc_normal() * 3 + 1;
    for (int k = 0; k < 8 * BR * BC; k++) dy[k] = (float)gc_normal();
    for (int c = 0; c < BC; c++) { w[c] = (float)gc_normal(); b[c] = (float)gc_normal(); }
    for (int k = 0; k < BV * BC; k++) tab[k] = (float)gc_normal();
    for (int k = 0; k < 8 * BR; k++) ids[k] = (int64_t)(gc_uniform() * 7);
    gc_rng_state = st;
    volt_step *s = mkstep(3);
    for (int op = 0; op < NOPS; op++) {
        volt_step_begin(s, true, 1);
        volt_tensor *xt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(BR, BC), x));
        volt_tensor *wt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(BC), w));
        volt_tensor *bt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(BC), b));
        volt_tensor *tt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(BV, BC), tab));
        volt_tensor *y = NULL;
        switch (op) {
        case 0: y = volt_gelu(s, xt); break;
        case 1: y = volt_gelu_tanh(s, xt); break;
        case 2: y = volt_tanh(s, xt); break;
        case 3: y = volt_sigmoid(s, xt); break;
        case 4: y = volt_softmax(s, xt); break;
        case 5: y = volt_log_softmax(s, xt); break;
        case 6: y = volt_layernorm(s, xt, wt, bt, 1e-5f); break;
        case 7: y = volt_embedding(s, volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(2, 4, BR), ids), tt); break;
        default: y = volt_dropout(s, xt, 0.1f); break;
        }
        uint64_t h = 1469598103934665603ull;
        if (y && volt_step_backward_grad(s, y, dy) == VOLT_OK) {
            h = fnv(h, y->data, sizeof(float) * (size_t)volt_tensor_numel(y));
            volt_tensor *ts[4] = { xt, wt, bt, tt };
            for (int i = 0; i < 4; i++)
                if (ts[i]->grad) h = fnv(h, ts[i]->grad, sizeof(float) * (size_t)volt_tensor_numel(ts[i]));
        } else {
            CHECK(0, "big op %d: %s", op, volt_step_errmsg(s));
        }
        hash[op] = h;
        volt_step_end(s);
    }
    volt_step_destroy(s);
}

static void thread_invariance(void) {
#ifdef _OPENMP
    uint64_t h1[NOPS], hn[NOPS];
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    run_big(h1);
    omp_set_num_threads(4);
    run_big(hn);
    omp_set_num_threads(nt);
    for (int op = 0; op < NOPS; op++) CHECK(h1[op] == hn[op], "op %d: 1 thread and 4 threads differ", op);
#endif
}

int main(void) {
    grads();
    activation_values();
    softmax_values();
    layernorm_reference(0.f, true);
    layernorm_reference(0.f, false);
    layernorm_reference(100.f, true);
    layernorm_reference(100.f, false);
    layernorm_errors();
    embedding_values();
    embedding_padding_idx();
    rng_blocks();
    dropout_values();
    thread_invariance();
    return vtest_finish();
}
