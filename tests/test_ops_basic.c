/* Basic ops: finite-difference gradients (odd sizes), forward values by hand, shape and
 * dtype errors that name the op and both shapes. */
#include "gradcheck.h"

static volt_tensor *f_matmul(volt_step *s, volt_tensor **in, void *c) { return volt_matmul(s, in[0], in[1]); }
static volt_tensor *f_linear(volt_step *s, volt_tensor **in, void *c) { return volt_linear(s, in[0], in[1], in[2]); }
static volt_tensor *f_linear_nb(volt_step *s, volt_tensor **in, void *c) { return volt_linear(s, in[0], in[1], NULL); }
static volt_tensor *f_add(volt_step *s, volt_tensor **in, void *c) { return volt_add(s, in[0], in[1]); }
static volt_tensor *f_bias(volt_step *s, volt_tensor **in, void *c) { return volt_bias(s, in[0], in[1]); }
static volt_tensor *f_mul(volt_step *s, volt_tensor **in, void *c) { return volt_mul(s, in[0], in[1]); }
static volt_tensor *f_scale(volt_step *s, volt_tensor **in, void *c) { return volt_scale(s, in[0], -2.5f); }
static volt_tensor *f_relu(volt_step *s, volt_tensor **in, void *c) { return volt_relu(s, in[0]); }
static volt_tensor *f_sum(volt_step *s, volt_tensor **in, void *c) { return volt_sum(s, in[0]); }
static volt_tensor *f_mean(volt_step *s, volt_tensor **in, void *c) { return volt_mean(s, in[0]); }
static volt_tensor *f_mse(volt_step *s, volt_tensor **in, void *c) { return volt_mse(s, in[0], in[1]); }
static volt_tensor *f_ce(volt_step *s, volt_tensor **in, void *c) {
    return volt_cross_entropy_ex(s, in[0], in[1], c ? (volt_ce_opts *)c : NULL);
}
static volt_tensor *f_reshape(volt_step *s, volt_tensor **in, void *c) {
    /* reshape then a non-linear op, so the grad flowing through the view is non-trivial */
    return volt_mul(s, volt_reshape(s, in[0], VOLT_SHAPE(13, -1)), volt_reshape(s, in[0], VOLT_SHAPE(13, 7)));
}


/* ---- double-precision references (gradcheck): index loops in double ------------------- */
#define GC_N0 volt_shape_numel(ins[0].shape)
/* a (..., M, K) x b (K, N), or batched a (B, M, K) x b (B, K, N) */
static void r_matmul(const gc_input *ins, double *const *x, double *y, void *c) {
    volt_shape as = ins[0].shape, bs = ins[1].shape;
    int64_t K = gc_last(as), N = gc_last(bs), batched = bs.ndim == 3;
    int64_t M = batched ? as.d[as.ndim - 2] : gc_rows(as), B = batched ? bs.d[0] : 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) acc += x[0][(b * M + i) * K + k] * x[1][(b * K + k) * N + j];
                y[(b * M + i) * N + j] = acc;
            }
}
/* x (..., in) w (out, in) [b (out)] -> x w^T + b */
static void r_linear(const gc_input *ins, double *const *x, double *y, void *c) {
    int64_t I = gc_last(ins[0].shape), R = gc_rows(ins[0].shape), O = ins[1].shape.d[0];
    for (int64_t r = 0; r < R; r++)
        for (int64_t o = 0; o < O; o++) {
            double acc = c ? 0 : x[2][o];   /* ctx != NULL: no bias */
            for (int64_t i = 0; i < I; i++) acc += x[0][r * I + i] * x[1][o * I + i];
            y[r * O + o] = acc;
        }
}
/* b broadcast over a: b's shape is a suffix of a's */
static void r_add(const gc_input *ins, double *const *x, double *y, void *c) {
    int64_t nb = volt_shape_numel(ins[1].shape);
    for (int64_t k = 0; k < GC_N0; k++) y[k] = x[0][k] + x[1][k % nb];
}
static void r_mul(const gc_input *ins, double *const *x, double *y, void *c) {
    int64_t nb = volt_shape_numel(ins[1].shape);
    for (int64_t k = 0; k < GC_N0; k++) y[k] = x[0][k] * x[1][k % nb];
}
static void r_scale(const gc_input *ins, double *const *x, double *y, void *c) {
    for (int64_t k = 0; k < GC_N0; k++) y[k] = -2.5 * x[0][k];
}
static void r_relu(const gc_input *ins, double *const *x, double *y, void *c) {
    for (int64_t k = 0; k < GC_N0; k++) y[k] = x[0][k] > 0 ? x[0][k] : 0;
}
static void r_sum(const gc_input *ins, double *const *x, double *y, void *c) {
    y[0] = 0;
    for (int64_t k = 0; k < GC_N0; k++) y[0] += x[0][k];
}
static void r_mean(const gc_input *ins, double *const *x, double *y, void *c) {
    r_sum(ins, x, y, c);
    y[0] /= (double)GC_N0;
}
static void r_mse(const gc_input *ins, double *const *x, double *y, void *c) {
    y[0] = 0;
    for (int64_t k = 0; k < GC_N0; k++) y[0] += (x[0][k] - x[1][k]) * (x[0][k] - x[1][k]);
    y[0] /= (double)GC_N0;
}
/* PyTorch's cross entropy: mean over non-ignored rows of
 * (1 - eps) * -log p_t + eps * mean_c(-log p_c) */
static void r_ce(const gc_input *ins, double *const *x, double *y, void *c) {
    volt_ce_opts o = c ? *(volt_ce_opts *)c : VOLT_CE_DEFAULTS;
    double eps = (double)o.label_smoothing, total = 0;
    int64_t C = gc_last(ins[0].shape), N = gc_rows(ins[0].shape), count = 0;
    for (int64_t r = 0; r < N; r++) {
        int64_t t = (int64_t)x[1][r];
        if (t == o.ignore_index) continue;
        const double *row = x[0] + r * C;
        double se = 0, mean_nll = 0;
        for (int64_t j = 0; j < C; j++) se += exp(row[j]);
        for (int64_t j = 0; j < C; j++) mean_nll += (log(se) - row[j]) / (double)C;
        total += (1 - eps) * (log(se) - row[t]) + eps * mean_nll;
        count++;
    }
    y[0] = total / (double)count;
}
/* reshape (7,13) -> (13,7) twice, multiplied: element k is x[k]^2 */
static void r_reshape(const gc_input *ins, double *const *x, double *y, void *c) {
    for (int64_t k = 0; k < GC_N0; k++) y[k] = x[0][k] * x[0][k];
}

static void grads(void) {
    gradcheck("matmul 7x13 * 13x5", f_matmul, r_matmul, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)), GC_F32(VOLT_SHAPE(13, 5)) });
    gradcheck("matmul 3x4x13 * 13x6", f_matmul, r_matmul, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 4, 13)), GC_F32(VOLT_SHAPE(13, 6)) });
    gradcheck("matmul batched", f_matmul, r_matmul, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 5, 7)), GC_F32(VOLT_SHAPE(3, 7, 2)) });
    gradcheck("linear", f_linear, r_linear, NULL, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)), GC_F32(VOLT_SHAPE(5, 13)), GC_F32(VOLT_SHAPE(5)) });
    gradcheck("linear 3-d no bias", f_linear_nb, r_linear, "no bias", 2, (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 13)), GC_F32(VOLT_SHAPE(9, 13)) });
    gradcheck("linear wide bias", f_linear, r_linear, NULL, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(3, 4)), GC_F32(VOLT_SHAPE(300, 4)), GC_F32(VOLT_SHAPE(300)) });
    gradcheck("add same", f_add, r_add, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)), GC_F32(VOLT_SHAPE(7, 13)) });
    gradcheck("add broadcast", f_add, r_add, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(2, 7, 13)), GC_F32(VOLT_SHAPE(7, 13)) });
    gradcheck("bias", f_bias, r_add, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)), GC_F32(VOLT_SHAPE(13)) });
    gradcheck("mul same", f_mul, r_mul, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)), GC_F32(VOLT_SHAPE(7, 13)) });
    gradcheck("mul broadcast", f_mul, r_mul, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(5, 7, 13)), GC_F32(VOLT_SHAPE(13)) });
    gradcheck("scale", f_scale, r_scale, NULL, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)) });
    /* relu: keep inputs away from the kink at 0 */
    float xr[91];
    for (int i = 0; i < 91; i++) xr[i] = (i % 2 ? 1.f : -1.f) * (0.1f + 0.01f * (float)i);
    gc_input ri = GC_F32(VOLT_SHAPE(7, 13));
    ri.data = xr;
    gradcheck("relu", f_relu, r_relu, NULL, 1, &ri);
    gradcheck("sum", f_sum, r_sum, NULL, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)) });
    gradcheck("mean", f_mean, r_mean, NULL, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(3, 7, 13)) });
    gradcheck("mse", f_mse, r_mse, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)), GC_F32(VOLT_SHAPE(7, 13)) });
    gradcheck("cross_entropy", f_ce, r_ce, NULL, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)), GC_INDEX(VOLT_SHAPE(7), 13) });
    int64_t tg[7] = { 1, -100, 12, 0, -100, 5, 5 };
    gc_input ti = GC_INDEX(VOLT_SHAPE(7), 13);
    ti.data = tg;
    volt_ce_opts o = { .ignore_index = -100, .label_smoothing = 0.1f };
    gradcheck("cross_entropy ignore+smoothing", f_ce, r_ce, &o, 2, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)), ti });
    gradcheck("reshape", f_reshape, r_reshape, NULL, 1, (gc_input[]){ GC_F32(VOLT_SHAPE(7, 13)) });
}

static volt_step *mkstep(void) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = 1 << 16;
    volt_step *s = NULL;
    volt_step_create(&cfg, &s);
    return s;
}

static void values(void) {
    volt_step *s = mkstep();
    volt_step_begin(s, false, 0);
    /* cross entropy by hand: logits [[1,2,3],[1,1,1]], targets [2, 0] */
    float lg[6] = { 1, 2, 3, 1, 1, 1 };
    int32_t t[2] = { 2, 0 };
    volt_tensor *L = volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 3), lg);
    volt_tensor *T = volt_tensor_wrap(s, VOLT_I32, VOLT_SHAPE(2), t);
    double l0 = log(exp(1) + exp(2) + exp(3)) - 3, l1 = log(3.0);
    CHECK_CLOSE(volt_tensor_item(volt_cross_entropy(s, L, T)), (l0 + l1) / 2, 1e-6, 0);
    volt_ce_opts o = { .ignore_index = 0, .label_smoothing = 0.2f };
    double lse0 = log(exp(1) + exp(2) + exp(3));
    double sm0 = 0.8 * l0 + 0.2 * (lse0 - 2.0);   /* row 1 has target 0 = ignored */
    CHECK_CLOSE(volt_tensor_item(volt_cross_entropy_ex(s, L, T, &o)), sm0, 1e-6, 0);
    CHECK_CLOSE(volt_tensor_item(volt_accuracy(s, L, T)), 1.0, 0, 0);   /* ties pick the first index */
    int32_t t2[2] = { 1, 0 };
    CHECK_CLOSE(volt_tensor_item(volt_accuracy(s, L, volt_tensor_wrap(s, VOLT_I32, VOLT_SHAPE(2), t2))), 0.5, 0, 0);
    /* matmul 2x3 * 3x2 */
    float a[6] = { 1, 2, 3, 4, 5, 6 }, b[6] = { 7, 8, 9, 10, 11, 12 };
    volt_tensor *C = volt_matmul(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 3), a), volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(3, 2), b));
    CHECK(C && ((float *)C->data)[0] == 58 && ((float *)C->data)[3] == 154, "matmul values");
    /* linear: w (2,3) */
    float bias[2] = { 0.5f, -1 };
    volt_tensor *Y = volt_linear(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 3), a), volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 3), b),
                                 volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2), bias));
    CHECK(Y && ((float *)Y->data)[0] == 50.5f && ((float *)Y->data)[1] == 67.f, "linear values %g %g",
          Y ? ((float *)Y->data)[0] : 0, Y ? ((float *)Y->data)[1] : 0);
    volt_step_end(s);

    /* errors name the op and both shapes, and chain through NULL */
    volt_step_begin(s, true, 0);
    volt_tensor *x = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(7, 13));
    volt_tensor *w = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(5, 12));
    volt_tensor *y = volt_relu(s, volt_linear(s, x, w, NULL));
    CHECK(y == NULL && volt_step_status(s) == VOLT_ERR_SHAPE, "linear shape error");
    CHECK(strstr(volt_step_errmsg(s), "linear") && strstr(volt_step_errmsg(s), "(7, 13)") && strstr(volt_step_errmsg(s), "(5, 12)"),
          "message: %s", volt_step_errmsg(s));
    CHECK(volt_step_backward(s, y) != VOLT_OK, "backward after error fails");
    volt_step_end(s);

    volt_step_begin(s, true, 0);
    x = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3));
    volt_tensor *ti = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2));
    CHECK(volt_cross_entropy(s, x, ti) == NULL && volt_step_status(s) == VOLT_ERR_DTYPE, "float targets rejected");
    volt_step_end(s);

    volt_step_begin(s, true, 0);
    int64_t bad[2] = { 0, 3 };
    CHECK(volt_cross_entropy(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3)), volt_tensor_wrap(s, VOLT_I64, VOLT_SHAPE(2), bad)) == NULL &&
          strstr(volt_step_errmsg(s), "target[1] = 3"), "out-of-range target: %s", volt_step_errmsg(s));
    volt_step_end(s);

    /* backward: non-scalar loss and a loss that depends on nothing */
    volt_step_begin(s, true, 0);
    x = volt_tensor_requires_grad(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3)));
    CHECK(volt_step_backward(s, volt_relu(s, x)) == VOLT_ERR_SHAPE && strstr(volt_step_errmsg(s), "scalar"), "non-scalar: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, true, 0);
    x = volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3));
    CHECK(volt_step_backward(s, volt_sum(s, x)) == VOLT_ERR_INVALID_ARG && strstr(volt_step_errmsg(s), "does not depend"),
          "no-param loss: %s", volt_step_errmsg(s));
    volt_step_end(s);
    volt_step_begin(s, true, 0);
    x = volt_tensor_requires_grad(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2, 3)));
    volt_tensor *l = volt_sum(s, x);
    CHECK_OK(volt_step_backward(s, l));
    CHECK(volt_step_backward(s, l) == VOLT_ERR_STATE, "second backward is an error");
    volt_step_end(s);
    volt_step_destroy(s);
}

int main(void) {
    grads();
    values();
    return vtest_finish();
}
