/* conv2d and max_pool2d: finite-difference gradients (odd sizes), forward values and full
 * gradients against direct loops written here, determinism, and shape errors. */
#include "gradcheck.h"

typedef struct conv_ctx { int stride, pad; } conv_ctx;
typedef struct pool_ctx { int k, stride; } pool_ctx;

static volt_tensor *f_conv(volt_step *s, volt_tensor **in, void *c) {
    conv_ctx *k = c;
    return volt_conv2d(s, in[0], in[1], in[2], k->stride, k->pad);
}
static volt_tensor *f_conv_nb(volt_step *s, volt_tensor **in, void *c) {
    conv_ctx *k = c;
    return volt_conv2d(s, in[0], in[1], NULL, k->stride, k->pad);
}
static volt_tensor *f_pool(volt_step *s, volt_tensor **in, void *c) {
    pool_ctx *k = c;
    return volt_max_pool2d(s, in[0], k->k, k->stride);
}

/* Distinct values 0.01 apart in a shuffled order: no ties, and a gradcheck nudge (1e-6)
 * never changes which element of a window is the max. */
static float *distinct(int64_t n, uint64_t seed) {
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = 0.01f * (float)(i - n / 2);
    for (int64_t i = n - 1; i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int64_t j = (int64_t)((seed >> 33) % (uint64_t)(i + 1));
        float t = v[i]; v[i] = v[j]; v[j] = t;
    }
    return v;
}


/* ---- double-precision references (gradcheck): direct loops ------------------------------ */
/* x (N, C, H, W) * w (O, C, KH, KW) [+ b (O)] -> (N, O, OH, OW), zero padding */
static void r_conv_any(const gc_input *ins, double *const *x, double *y, const conv_ctx *k, bool bias) {
    const int64_t *xs = ins[0].shape.d, *ws = ins[1].shape.d;
    int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], KH = ws[2], KW = ws[3];
    int64_t OH = (H + 2 * k->pad - KH) / k->stride + 1, OW = (W + 2 * k->pad - KW) / k->stride + 1;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = bias ? x[2][o] : 0;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t i = 0; i < KH; i++)
                            for (int64_t j = 0; j < KW; j++) {
                                int64_t h = oh * k->stride - k->pad + i, w = ow * k->stride - k->pad + j;
                                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                                acc += x[0][((n * C + c) * H + h) * W + w] * x[1][((o * C + c) * KH + i) * KW + j];
                            }
                    y[((n * O + o) * OH + oh) * OW + ow] = acc;
                }
}
static void r_conv(const gc_input *ins, double *const *x, double *y, void *c) { r_conv_any(ins, x, y, c, true); }
static void r_conv_nb(const gc_input *ins, double *const *x, double *y, void *c) { r_conv_any(ins, x, y, c, false); }
/* max over each k x k window, stride (0 = k), no padding */
static void r_pool(const gc_input *ins, double *const *x, double *y, void *c) {
    const pool_ctx *p = c;
    const int64_t *xs = ins[0].shape.d;
    int64_t NC = xs[0] * xs[1], H = xs[2], W = xs[3], st = p->stride ? p->stride : p->k;
    int64_t OH = (H - p->k) / st + 1, OW = (W - p->k) / st + 1;
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double m = -INFINITY;
                for (int64_t i = 0; i < p->k; i++)
                    for (int64_t j = 0; j < p->k; j++) m = fmax(m, x[0][(nc * H + oh * st + i) * W + ow * st + j]);
                y[(nc * OH + oh) * OW + ow] = m;
            }
}

static void grads(void) {
    conv_ctx s1p1 = { 1, 1 }, s2p0 = { 2, 0 }, s2p2 = { 2, 2 }, s1p0 = { 1, 0 };
    gradcheck("conv2d (2,3,7,6)x(4,3,3,3) s1 p1 bias", f_conv, r_conv, &s1p1, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 7, 6)), GC_F32(VOLT_SHAPE(4, 3, 3, 3)), GC_F32(VOLT_SHAPE(4)) });
    gradcheck("conv2d (2,3,7,6)x(4,3,3,3) s2 p0 bias", f_conv, r_conv, &s2p0, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 7, 6)), GC_F32(VOLT_SHAPE(4, 3, 3, 3)), GC_F32(VOLT_SHAPE(4)) });
    gradcheck("conv2d (2,3,7,6)x(4,3,3,3) s1 p1 no bias", f_conv_nb, r_conv_nb, &s1p1, 2,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 7, 6)), GC_F32(VOLT_SHAPE(4, 3, 3, 3)) });
    gradcheck("conv2d (2,3,7,6)x(4,3,3,3) s2 p0 no bias", f_conv_nb, r_conv_nb, &s2p0, 2,
              (gc_input[]){ GC_F32(VOLT_SHAPE(2, 3, 7, 6)), GC_F32(VOLT_SHAPE(4, 3, 3, 3)) });
    /* one sample (the sequential batch path), a non-square kernel, padding > 1 */
    gradcheck("conv2d (1,2,5,8)x(3,2,2,3) s2 p2 bias", f_conv, r_conv, &s2p2, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(1, 2, 5, 8)), GC_F32(VOLT_SHAPE(3, 2, 2, 3)), GC_F32(VOLT_SHAPE(3)) });
    /* 1x1 stride 1: the no-im2col path */
    gradcheck("conv2d (3,5,4,3)x(2,5,1,1) pointwise", f_conv, r_conv, &s1p0, 3,
              (gc_input[]){ GC_F32(VOLT_SHAPE(3, 5, 4, 3)), GC_F32(VOLT_SHAPE(2, 5, 1, 1)), GC_F32(VOLT_SHAPE(2)) });
    /* x constant (first layer on data), only w and b get grads */
    gradcheck("conv2d x without grad", f_conv, r_conv, &s1p1, 3,
              (gc_input[]){ GC_F32_CONST(VOLT_SHAPE(3, 3, 7, 6)), GC_F32(VOLT_SHAPE(4, 3, 3, 3)), GC_F32(VOLT_SHAPE(4)) });

    pool_ctx k2 = { 2, 0 }, k3s2 = { 3, 2 }, k3s1 = { 3, 1 };
    float *xv = distinct(2 * 3 * 8 * 7, 1);
    gc_input pin = GC_F32(VOLT_SHAPE(2, 3, 8, 7));
    pin.data = xv;
    gradcheck("max_pool2d (2,3,8,7) k2", f_pool, r_pool, &k2, 1, &pin);
    gradcheck("max_pool2d (2,3,8,7) k3 s2", f_pool, r_pool, &k3s2, 1, &pin);
    gradcheck("max_pool2d (2,3,8,7) k3 s1 (overlapping)", f_pool, r_pool, &k3s1, 1, &pin);
    free(xv);
}

static volt_step *mkstep(void) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = 1 << 16;
    volt_step *s = NULL;
    volt_step_create(&cfg, &s);
    return s;
}

static float *randv(int64_t n, uint64_t seed) {
    gc_rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = (float)gc_normal();
    return v;
}

/* Direct convolution and its gradients in double: y (N,O,OH,OW), given dy -> dx, dw, db. */
static void conv_ref(const float *x, const float *w, const float *b, const float *dy, int N, int C, int H, int W,
                     int O, int KH, int KW, int S, int P, double *y, double *dx, double *dw, double *db) {
    int OH = (H + 2 * P - KH) / S + 1, OW = (W + 2 * P - KW) / S + 1;
    for (int n = 0; n < N; n++) for (int o = 0; o < O; o++) for (int oh = 0; oh < OH; oh++) for (int ow = 0; ow < OW; ow++) {
        int q = ((n * O + o) * OH + oh) * OW + ow;
        double acc = b ? b[o] : 0;
        for (int c = 0; c < C; c++) for (int kh = 0; kh < KH; kh++) for (int kw = 0; kw < KW; kw++) {
            int ih = oh * S - P + kh, iw = ow * S - P + kw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            int xi = ((n * C + c) * H + ih) * W + iw, wi = ((o * C + c) * KH + kh) * KW + kw;
            acc += (double)x[xi] * w[wi];
            dx[xi] += (double)dy[q] * w[wi];
            dw[wi] += (double)dy[q] * x[xi];
        }
        y[q] = acc;
        db[o] += dy[q];
    }
}

static int close_all(const float *got, const double *want, int64_t n, double tol) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])));
    return bad;
}

static void conv_case(int N, int C, int H, int W, int O, int KH, int KW, int S, int P, bool bias) {
    int OH = (H + 2 * P - KH) / S + 1, OW = (W + 2 * P - KW) / S + 1;
    int64_t nx = (int64_t)N * C * H * W, nw = (int64_t)O * C * KH * KW, ny = (int64_t)N * O * OH * OW;
    float *x = randv(nx, 1), *w = randv(nw, 2), *b = randv(O, 3), *dy = randv(ny, 4);
    double *y = calloc((size_t)ny, sizeof(double)), *dx = calloc((size_t)nx, sizeof(double));
    double *dw = calloc((size_t)nw, sizeof(double)), *db = calloc((size_t)O, sizeof(double));
    conv_ref(x, w, bias ? b : NULL, dy, N, C, H, W, O, KH, KW, S, P, y, dx, dw, db);

    volt_step *s = mkstep();
    float *first_dw = malloc(sizeof(float) * (size_t)nw);
    for (int rep = 0; rep < 2; rep++) {
        volt_step_begin(s, true, 0);
        volt_tensor *xt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(N, C, H, W), x));
        volt_tensor *wt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(O, C, KH, KW), w));
        volt_tensor *bt = bias ? volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(O), b)) : NULL;
        volt_tensor *yt = volt_conv2d(s, xt, wt, bt, S, P);
        if (!yt) { CHECK(0, "conv2d failed: %s", volt_step_errmsg(s)); break; }
        CHECK(volt_shape_eq(yt->shape, VOLT_SHAPE(N, O, OH, OW)), "conv2d output shape");
        CHECK_OK(volt_step_backward_grad(s, yt, dy));
        if (rep == 0) {
            CHECK(close_all(yt->data, y, ny, 1e-4) == 0, "conv2d forward vs direct loops (%d,%d,%d,%d)x(%d,%d,%d,%d) s%d p%d",
                  N, C, H, W, O, C, KH, KW, S, P);
            CHECK(close_all(xt->grad, dx, nx, 1e-4) == 0, "conv2d dx vs direct loops");
            CHECK(close_all(wt->grad, dw, nw, 1e-4) == 0, "conv2d dw vs direct loops");
            if (bias) CHECK(close_all(bt->grad, db, O, 1e-4) == 0, "conv2d db vs direct loops");
            memcpy(first_dw, wt->grad, sizeof(float) * (size_t)nw);
        } else {
            CHECK(memcmp(first_dw, wt->grad, sizeof(float) * (size_t)nw) == 0, "conv2d dw is bitwise reproducible");
        }
        volt_step_end(s);
    }
    volt_step_destroy(s);
    free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db); free(first_dw);
}

static void conv_values(void) {
    conv_case(2, 3, 7, 6, 4, 3, 3, 1, 1, true);
    conv_case(2, 3, 7, 6, 4, 3, 3, 2, 0, false);
    conv_case(5, 3, 9, 11, 6, 3, 5, 2, 1, true);     /* batch > threads: the batch-parallel path */
    conv_case(1, 4, 6, 6, 3, 1, 1, 1, 0, true);      /* pointwise */
    conv_case(3, 2, 4, 4, 2, 4, 4, 1, 0, true);      /* kernel = input: one output pixel */
    conv_case(1, 16, 40, 40, 8, 3, 3, 1, 1, true);   /* big enough for the threaded im2col */
}

static void pool_values(void) {
    volt_step *s = mkstep();
    /* forward vs direct loops: (2,3,8,7) k3 s2 -> (2,3,3,3) */
    float *x = distinct(2 * 3 * 8 * 7, 5);
    volt_step_begin(s, false, 0);
    volt_tensor *y = volt_max_pool2d(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 3, 8, 7), x), 3, 2);
    int bad = !y || !volt_shape_eq(y->shape, VOLT_SHAPE(2, 3, 3, 3));
    for (int pl = 0; !bad && pl < 6; pl++) for (int oh = 0; oh < 3; oh++) for (int ow = 0; ow < 3; ow++) {
        float m = -INFINITY;
        for (int kh = 0; kh < 3; kh++) for (int kw = 0; kw < 3; kw++) m = fmaxf(m, x[pl * 56 + (oh * 2 + kh) * 7 + ow * 2 + kw]);
        bad += ((float *)y->data)[(pl * 3 + oh) * 3 + ow] != m;
    }
    CHECK(bad == 0, "max_pool2d forward vs direct loops");
    /* k2, stride 0 = k: (2,3,8,7) -> (2,3,4,3), the last column is dropped */
    y = volt_max_pool2d(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(2, 3, 8, 7), x), 2, 0);
    CHECK(y && volt_shape_eq(y->shape, VOLT_SHAPE(2, 3, 4, 3)), "max_pool2d k2 shape");
    volt_step_end(s);

    /* ties go to the first element of the window (row-major); overlapping windows add */
    float ones[16];
    for (int i = 0; i < 16; i++) ones[i] = 1.f;
    volt_step_begin(s, true, 0);
    volt_tensor *xt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(1, 1, 4, 4), ones));
    y = volt_max_pool2d(s, xt, 2, 1);                 /* (1,1,3,3) */
    float g[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    CHECK_OK(volt_step_backward_grad(s, y, g));
    float want[16] = { 1, 2, 3, 0, 4, 5, 6, 0, 7, 8, 9, 0, 0, 0, 0, 0 };
    CHECK(xt->grad && memcmp(xt->grad, want, sizeof want) == 0, "max_pool2d ties pick the first");
    volt_step_end(s);
    /* overlapping windows sharing one max accumulate into it */
    float peak[16] = { 0 };
    peak[5] = 3.f;                                     /* (1,1): in 4 of the 3x3 k2 s1 windows */
    volt_step_begin(s, true, 0);
    xt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(1, 1, 4, 4), peak));
    y = volt_max_pool2d(s, xt, 2, 1);
    CHECK_OK(volt_step_backward_grad(s, y, g));
    CHECK(xt->grad && xt->grad[5] == 1 + 2 + 4 + 5, "max_pool2d overlapping windows accumulate: %g", xt->grad ? xt->grad[5] : 0);
    volt_step_end(s);
    /* NaN propagates like PyTorch */
    float nanin[4] = { 1, NAN, 2, 3 };
    volt_step_begin(s, false, 0);
    y = volt_max_pool2d(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(1, 1, 2, 2), nanin), 2, 0);
    CHECK(y && isnan(((float *)y->data)[0]), "max_pool2d NaN propagates");
    volt_step_end(s);
    free(x);
    volt_step_destroy(s);
}

static void expect_err(volt_step *s, volt_tensor *y, volt_status want, const char *a, const char *b, const char *c) {
    const char *m = volt_step_errmsg(s);
    CHECK(y == NULL && volt_step_status(s) == want, "expected %s, got %s: %s", volt_status_str(want),
          volt_status_str(volt_step_status(s)), m);
    CHECK(strstr(m, a) && (!b || strstr(m, b)) && (!c || strstr(m, c)), "message: %s", m);
    volt_step_end(s);
}

static void errors(void) {
    volt_step *s = mkstep();
#define T(...) volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(__VA_ARGS__))
    volt_step_begin(s, true, 0);
    expect_err(s, volt_conv2d(s, T(2, 3, 7, 6), T(4, 5, 3, 3), NULL, 1, 1), VOLT_ERR_SHAPE, "conv2d", "(2, 3, 7, 6)", "(4, 5, 3, 3)");
    volt_step_begin(s, true, 0);
    expect_err(s, volt_conv2d(s, T(2, 3, 7, 6), T(4, 3, 3, 3), T(5), 1, 1), VOLT_ERR_SHAPE, "conv2d", "bias", "(5)");
    volt_step_begin(s, true, 0);
    expect_err(s, volt_conv2d(s, T(3, 7, 6), T(4, 3, 3, 3), NULL, 1, 1), VOLT_ERR_SHAPE, "conv2d", "(3, 7, 6)", NULL);
    volt_step_begin(s, true, 0);
    expect_err(s, volt_conv2d(s, T(2, 3, 2, 6), T(4, 3, 3, 3), NULL, 1, 0), VOLT_ERR_SHAPE, "conv2d", "kernel larger", "(2, 3, 2, 6)");
    volt_step_begin(s, true, 0);
    expect_err(s, volt_conv2d(s, T(2, 3, 7, 6), T(4, 3, 3, 3), NULL, 0, 0), VOLT_ERR_INVALID_ARG, "conv2d", "stride", NULL);
    volt_step_begin(s, true, 0);
    expect_err(s, volt_conv2d(s, volt_tensor_new(s, VOLT_I32, VOLT_SHAPE(2, 3, 7, 6)), T(4, 3, 3, 3), NULL, 1, 0),
               VOLT_ERR_DTYPE, "conv2d", "i32", NULL);
    volt_step_begin(s, true, 0);
    expect_err(s, volt_max_pool2d(s, T(3, 8, 7), 2, 0), VOLT_ERR_SHAPE, "max_pool2d", "(3, 8, 7)", NULL);
    volt_step_begin(s, true, 0);
    expect_err(s, volt_max_pool2d(s, T(1, 3, 8, 2), 3, 0), VOLT_ERR_SHAPE, "max_pool2d", "window 3", "(1, 3, 8, 2)");
    volt_step_begin(s, true, 0);
    expect_err(s, volt_max_pool2d(s, T(1, 3, 8, 7), 0, 0), VOLT_ERR_INVALID_ARG, "max_pool2d", "k 0", NULL);
#undef T
    volt_step_destroy(s);
}

int main(void) {
    grads();
    conv_values();
    pool_values();
    errors();
    return vtest_finish();
}
