/* The "cuda" backend against the "cpu" backend (tests/gpu_cuda.cmake, label gpu).
 *
 * Every op the cuda backend implements (all of core/ops_list.h but attention and dropout,
 * which core/cuda/attention_op.c and dropout_op.c own) runs on both backends at odd sizes,
 * forward and backward (a fixed random upstream gradient through volt_step_backward_grad),
 * once as a first write of each input grad (STORE) and, for most ops, twice through an add
 * (the second write is ADD). Then the parameter math (every volt_param_math entry, f32 and
 * 16-bit values/states), the memory table (alloc, copies, memset, give_back, events) and the
 * error paths (bad ids and targets give the CPU's messages). Each case also runs twice on the
 * backend and must give the same bits (the embedding's table grad: the CPU's bits too). A
 * mismatch prints the case, which output or grad, the element, got (cuda) vs want (cpu)
 * and the largest error.
 *
 * Without a CUDA device it checks what it can (the backend is registered when compiled in,
 * counts 0 devices, "auto" falls back to the CPU) and exits 77 (skipped). VOLT_TEST_BACKEND
 * names another backend to compare with the CPU instead of "cuda": the ctest
 * test_cuda_ops_harness runs the whole file against "cpu-strict" on every machine, so the
 * comparisons themselves are exercised where no GPU is. */
#include <stdint.h>
#include "vtest.h"
#include "core/internal.h"
#include "volt/ops.h"

static const char *g_other = "cuda";
static int g_cases;

/* ---- deterministic data --------------------------------------------------------------- */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double uni(void) {   /* xorshift64*, [0, 1) */
    g_rng ^= g_rng >> 12; g_rng ^= g_rng << 25; g_rng ^= g_rng >> 27;
    return (double)((g_rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

enum { F_GRAD = 0, F_NOGRAD, IDS, TARGETS, F_POS };
typedef struct { volt_dtype dt; volt_shape sh; int kind; int64_t range; } spec;
typedef volt_tensor *(*build_fn)(volt_step *s, volt_tensor **in, const void *arg);
typedef struct {
    const char *name;
    int n_in;
    spec in[4];
    build_fn fn;
    const void *arg;
    double rtol, atol;
    volt_dtype compute;
    bool twice;          /* y = f(x) + f(x): every input grad gets a STORE then an ADD */
} op_case;

#define MAXIN 4
typedef struct {
    double *out;         /* numel(y) values (ints as doubles) */
    int64_t n_out;
    float *grad[MAXIN];
    bool ok;
    char err[512];
} run_result;

static void fill_host(const spec *sp, void *dst, int64_t n) {
    if (sp->kind == IDS || sp->kind == TARGETS) {
        for (int64_t i = 0; i < n; i++) {
            int64_t v = (int64_t)(uni() * (double)sp->range);
            if (sp->kind == TARGETS && i % 5 == 3) v = -100;
            if (sp->dt == VOLT_I64) ((int64_t *)dst)[i] = v;
            else ((int32_t *)dst)[i] = (int32_t)v;
        }
        return;
    }
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) f[i] = sp->kind == F_POS ? (float)(0.1 + 2 * uni()) : (float)(4 * uni() - 2);
    volt_convert(dst, sp->dt, f, VOLT_F32, n);
    free(f);
}

static run_result run_on(const char *backend, const op_case *c, void *const *host_in, const float *up) {
    run_result r;
    memset(&r, 0, sizeof r);
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.backend = backend;
    cfg.seed = 7;
    /* the cases are small: 4 MiB (it grows when a case needs more) instead of the default 64,
     * which the simulator fills with 0xff bytes per case: half of this test's time there */
    cfg.arena_bytes = 4u << 20;
    volt_step *s = NULL;
    if (volt_step_create(&cfg, &s) != VOLT_OK) { snprintf(r.err, sizeof r.err, "step_create failed"); return r; }
    volt_step_begin(s, true, 0);
    volt_step_set_compute_dtype(s, c->compute);
    volt_tensor *in[MAXIN] = { 0 };
    for (int k = 0; k < c->n_in; k++) {
        in[k] = volt_tensor_from_host(s, c->in[k].dt, c->in[k].sh, host_in[k]);
        if (in[k] && c->in[k].kind == F_GRAD) volt_tensor_requires_grad(s, in[k]);
    }
    volt_tensor *y = c->fn(s, in, c->arg);
    if (y && c->twice) y = volt_add(s, y, c->fn(s, in, c->arg));
    /* a bad index surfaces here on a backend with an error word (cuda), at the op on cpu */
    if (y && volt_step_check(s) < 0) y = NULL;
    if (!y) {
        snprintf(r.err, sizeof r.err, "%s", volt_step_errmsg(s));
        volt_step_end(s);
        volt_step_destroy(s);
        return r;
    }
    r.n_out = volt_tensor_numel(y);
    r.out = calloc((size_t)(r.n_out ? r.n_out : 1), sizeof(double));
    if (volt_dtype_is_float(y->dtype)) {
        float *f = malloc(sizeof(float) * (size_t)(r.n_out ? r.n_out : 1));
        vtest_f32(y, f);
        for (int64_t i = 0; i < r.n_out; i++) r.out[i] = f[i];
        free(f);
    } else {
        void *b = malloc(volt_tensor_bytes(y) + 8);
        volt_tensor_to_host(y, b);
        for (int64_t i = 0; i < r.n_out; i++)
            r.out[i] = y->dtype == VOLT_I64 ? (double)((int64_t *)b)[i] : (double)((int32_t *)b)[i];
        free(b);
    }
    r.ok = true;
    if (y->flags & VOLT_TENSOR_REQUIRES_GRAD) {
        if (volt_step_backward_grad(s, y, up) != VOLT_OK) {
            snprintf(r.err, sizeof r.err, "backward: %s", volt_step_errmsg(s));
            r.ok = false;
        } else {
            for (int k = 0; k < c->n_in; k++) {
                if (c->in[k].kind != F_GRAD) continue;
                int64_t n = volt_shape_numel(c->in[k].sh);
                r.grad[k] = calloc((size_t)(n ? n : 1), sizeof(float));
                if (volt_tensor_grad_to_host(in[k], r.grad[k]) != VOLT_OK) {
                    snprintf(r.err, sizeof r.err, "input %d has no grad", k);
                    r.ok = false;
                }
            }
        }
    }
    volt_step_end(s);
    volt_step_destroy(s);
    return r;
}

/* got vs want, element by element; the first bad element and the largest error are shown */
static void compare(const char *cs, const char *what, const double *got, const double *want, int64_t n, double rtol,
                    double atol) {
    int64_t bad = -1, nbad = 0;
    double maxerr = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]);
        bool same = got[i] == want[i] || (isnan(got[i]) && isnan(want[i]));
        if (!same && e > maxerr) maxerr = e;
        if (!same && !(e <= atol + rtol * fabs(want[i]))) { if (bad < 0) bad = i; nbad++; }
    }
    CHECK(bad < 0, "%s: %s: %lld of %lld elements differ; first [%lld]: got %.9g (%s), want %.9g (cpu); max |err| %.3g "
          "(rtol %.1e, atol %.1e)", cs, what, (long long)nbad, (long long)n, (long long)bad, bad >= 0 ? got[bad] : 0.0,
          g_other, bad >= 0 ? want[bad] : 0.0, maxerr, rtol, atol);
}

/* VOLT_TEST_ONLY=TEXT: only the op cases whose name holds TEXT, and none of the other sections
 * (tests/gpu_cuda.cmake runs the linears that way with the bias added by a kernel) */
static const char *g_only;

static void run_case(const op_case *c) {
    if (g_only && !strstr(c->name, g_only)) return;
    g_cases++;
    void *host[MAXIN] = { 0 };
    for (int k = 0; k < c->n_in; k++) {
        int64_t n = volt_shape_numel(c->in[k].sh);
        host[k] = calloc((size_t)(n ? n : 1), 8);
        fill_host(&c->in[k], host[k], n);
    }
    /* the upstream gradient: sized generously (outputs are at most 1 << 20 elements here) */
    static float *up;
    if (!up) {
        up = malloc(sizeof(float) << 20);
        for (int i = 0; i < 1 << 20; i++) up[i] = (float)(2 * uni() - 1);
    }
    run_result want = run_on("cpu", c, host, up), got = run_on(g_other, c, host, up), again = { 0 };
    /* the same bits run to run (no sum in arrival order: the embedding's scatter-add has none) */
    again = run_on(g_other, c, host, up);
    if (again.out && got.out) {
        bool same = again.n_out == got.n_out && !memcmp(again.out, got.out, sizeof(double) * (size_t)got.n_out);
        for (int k = 0; k < c->n_in; k++)
            if (again.grad[k] && got.grad[k])
                same &= !memcmp(again.grad[k], got.grad[k], sizeof(float) * (size_t)volt_shape_numel(c->in[k].sh));
        CHECK(same, "%s: two runs on %s differ (outputs or grads are not deterministic)", c->name, g_other);
    }
    for (int k = 0; k < MAXIN; k++) free(again.grad[k]);
    free(again.out);
    CHECK(want.out, "%s: the cpu reference failed: %s", c->name, want.err);
    CHECK(got.out, "%s: failed on %s: %s", c->name, g_other, got.err);
    if (want.out && got.out) {
        CHECK(want.n_out == got.n_out, "%s: output has %lld elements, want %lld", c->name, (long long)got.n_out,
              (long long)want.n_out);
        if (want.n_out == got.n_out) compare(c->name, "output", got.out, want.out, want.n_out, c->rtol, c->atol);
        CHECK(got.ok == want.ok, "%s: backward: %s (cpu: %s)", c->name, got.err, want.err);
        for (int k = 0; k < c->n_in; k++) {
            if (!want.grad[k] || !got.grad[k]) continue;
            int64_t n = volt_shape_numel(c->in[k].sh);
            double *g = malloc(sizeof(double) * (size_t)(n ? n : 1)), *w = malloc(sizeof(double) * (size_t)(n ? n : 1));
            for (int64_t i = 0; i < n; i++) { g[i] = got.grad[k][i]; w[i] = want.grad[k][i]; }
            char what[32];
            snprintf(what, sizeof what, "grad of input %d", k);
            compare(c->name, what, g, w, n, c->rtol, c->atol);
            /* the table's grad adds the rows in position order, as the CPU's loop: its bits */
            if (strstr(c->name, "embedding") && k == 1)
                CHECK(!memcmp(got.grad[k], want.grad[k], sizeof(float) * (size_t)n),
                      "%s: the table's grad is not the CPU's bit for bit (rows added out of position order?)", c->name);
            free(g);
            free(w);
        }
    }
    for (int k = 0; k < MAXIN; k++) { free(want.grad[k]); free(got.grad[k]); free(host[k]); }
    free(want.out);
    free(got.out);
}

/* ---- the ops --------------------------------------------------------------------------- */
static volt_tensor *b_matmul(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_matmul(s, in[0], in[1]); }
static volt_tensor *b_linear(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_linear(s, in[0], in[1], in[2]); }
static volt_tensor *b_linear_nb(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_linear(s, in[0], in[1], NULL); }
/* q, k, v: three linears of one x (the cuda backend converts x once and keeps the copy for
 * backward: core/cuda/gemm_ops.c) */
static volt_tensor *b_qkv(volt_step *s, volt_tensor **in, const void *a) {
    (void)a;
    volt_tensor *q = volt_linear(s, in[0], in[1], NULL), *k = volt_linear(s, in[0], in[2], NULL);
    volt_tensor *v = volt_linear(s, in[0], in[3], NULL);
    return volt_add(s, volt_add(s, q, volt_scale(s, k, 0.5f)), volt_scale(s, v, -2.f));
}
/* two linears of different inputs, recorded one after the other: no shared copy */
static volt_tensor *b_two_x(volt_step *s, volt_tensor **in, const void *a) {
    (void)a;
    return volt_add(s, volt_linear(s, in[0], in[1], NULL), volt_linear(s, in[2], in[3], NULL));
}
static volt_tensor *b_add(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_add(s, in[0], in[1]); }
static volt_tensor *b_add_self(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_add(s, in[0], in[0]); }
static volt_tensor *b_mul(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_mul(s, in[0], in[1]); }
static volt_tensor *b_scale(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_scale(s, in[0], -0.37f); }
static volt_tensor *b_relu(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_relu(s, in[0]); }
static volt_tensor *b_gelu(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_gelu(s, in[0]); }
static volt_tensor *b_gelu_tanh(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_gelu_tanh(s, in[0]); }
static volt_tensor *b_tanh(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_tanh(s, in[0]); }
static volt_tensor *b_sigmoid(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_sigmoid(s, in[0]); }
static volt_tensor *b_softmax(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_softmax(s, in[0]); }
static volt_tensor *b_log_softmax(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_log_softmax(s, in[0]); }
static volt_tensor *b_xent(volt_step *s, volt_tensor **in, const void *a) {
    return a ? volt_cross_entropy_ex(s, in[0], in[1], a) : volt_cross_entropy(s, in[0], in[1]);
}
static volt_tensor *b_mse(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_mse(s, in[0], in[1]); }
static volt_tensor *b_ln(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_layernorm(s, in[0], in[1], in[2], 1e-5f); }
static volt_tensor *b_ln_plain(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_layernorm(s, in[0], NULL, NULL, 1e-12f); }
static volt_tensor *b_emb(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_embedding(s, in[0], in[1]); }
static volt_tensor *b_emb_pad(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_embedding_padded(s, in[0], in[1], 3); }
static volt_tensor *b_reshape(volt_step *s, volt_tensor **in, const void *a) {
    (void)a;
    return volt_gelu(s, volt_reshape(s, in[0], VOLT_SHAPE(7, -1)));   /* a view needs a consumer */
}
static volt_tensor *b_permute(volt_step *s, volt_tensor **in, const void *a) { return volt_permute(s, in[0], a); }
static volt_tensor *b_transpose(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_transpose(s, in[0], 0, 1); }
static volt_tensor *b_slice(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_slice(s, in[0], 1, 2, 3); }
static volt_tensor *b_select(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_select(s, in[0], 1, 0); }
static volt_tensor *b_concat(volt_step *s, volt_tensor **in, const void *a) {
    (void)a;
    volt_tensor *xs[3] = { in[0], in[1], in[0] };
    return volt_concat(s, xs, 3, 1);
}
static volt_tensor *b_sum(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_sum(s, in[0]); }
static volt_tensor *b_mean(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_mean(s, in[0]); }
static volt_tensor *b_conv(volt_step *s, volt_tensor **in, const void *a) {
    const int *sp = a;
    return volt_conv2d(s, in[0], in[1], sp[2] ? in[2] : NULL, sp[0], sp[1]);
}
static volt_tensor *b_pool(volt_step *s, volt_tensor **in, const void *a) { const int *kp = a; return volt_max_pool2d(s, in[0], kp[0], kp[1]); }
static volt_tensor *b_cast(volt_step *s, volt_tensor **in, const void *a) {
    volt_dtype dt = *(const volt_dtype *)a;
    return volt_scale(s, volt_cast(s, volt_cast(s, in[0], dt), VOLT_F32), 1.5f);
}
static volt_tensor *b_cast16_in(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_gelu(s, in[0]); }
static volt_tensor *b_arange(volt_step *s, volt_tensor **in, const void *a) {
    (void)in;
    return volt_arange(s, *(const volt_dtype *)a, 1000);
}
static volt_tensor *b_argmax(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_argmax(s, in[0]); }
static volt_tensor *b_accuracy(volt_step *s, volt_tensor **in, const void *a) { (void)a; return volt_accuracy(s, in[0], in[1]); }

#define F32(...) { VOLT_F32, VOLT_SHAPE(__VA_ARGS__), F_GRAD, 0 }
#define FNG(...) { VOLT_F32, VOLT_SHAPE(__VA_ARGS__), F_NOGRAD, 0 }
#define T16(dt, ...) { dt, VOLT_SHAPE(__VA_ARGS__), F_GRAD, 0 }
#define TI(dt, range, ...) { dt, VOLT_SHAPE(__VA_ARGS__), IDS, range }
#define TT(dt, range, ...) { dt, VOLT_SHAPE(__VA_ARGS__), TARGETS, range }

static void test_ops(void) {
    const double R = 1e-4, A = 1e-5;           /* f32 */
    /* f32 GEMMs with long sums (K = 257 forward, 1000 rows for the weight grad): the two
     * backends add the products in other orders, and near a cancellation the results differ
     * by ~sqrt(K) 2^-24 sum|ab| ~ 1e-4 absolute (the CUDA simulator, which sums in double,
     * showed 7e-5 against the CPU's f32) */
    const double AK = 5e-4;
    const double R16 = 2e-3, A16 = 2e-3;        /* bf16 / f16 compute: same roundings, other sums */
    static const int perm4[] = { 2, 0, 3, 1 };
    static const int conv_a[] = { 2, 1, 1 }, conv_b[] = { 1, 0, 0 }, pool_a[] = { 2, 2 }, pool_b[] = { 3, 2 };
    static const volt_dtype bf = VOLT_BF16, hf = VOLT_F16, i32 = VOLT_I32, i64 = VOLT_I64;
    static const volt_ce_opts smooth = { .ignore_index = -100, .label_smoothing = 0.1f };
    const op_case cases[] = {
        { "matmul 3x5 x 5x7", 2, { F32(3, 5), F32(5, 7) }, b_matmul, NULL, R, A, VOLT_F32, true },
        { "matmul batched 3x(5x7 x 7x4)", 2, { F32(3, 5, 7), F32(3, 7, 4) }, b_matmul, NULL, R, A, VOLT_F32, false },
        { "matmul (2,129,65) x 65x33", 2, { F32(2, 129, 65), F32(65, 33) }, b_matmul, NULL, R, A, VOLT_F32, false },
        { "matmul bf16 compute", 2, { F32(3, 129, 64), F32(3, 64, 31) }, b_matmul, NULL, R16, A16, VOLT_BF16, false },
        { "matmul f16 compute", 2, { F32(129, 64), F32(64, 31) }, b_matmul, NULL, R16, A16, VOLT_F16, true },
        { "linear 129x65 -> 33 + bias", 3, { F32(129, 65), F32(33, 65), F32(33) }, b_linear, NULL, R, A, VOLT_F32, true },
        { "linear 1000x257 -> 129 + bias", 3, { F32(1000, 257), F32(129, 257), F32(129) }, b_linear, NULL, R, AK, VOLT_F32, false },
        { "linear (3,5,7) -> 9, no bias", 2, { F32(3, 5, 7), F32(9, 7) }, b_linear_nb, NULL, R, A, VOLT_F32, false },
        { "linear bf16 compute", 3, { F32(129, 96), F32(40, 96), F32(40) }, b_linear, NULL, R16, A16, VOLT_BF16, true },
        { "linear f16 compute", 3, { F32(129, 96), F32(40, 96), F32(40) }, b_linear, NULL, R16, A16, VOLT_F16, false },
        { "linear bf16 weight (16-bit parameter)", 3, { F32(33, 48), T16(VOLT_BF16, 17, 48), F32(17) }, b_linear, NULL, R16,
          A16, VOLT_F32, false },
        { "matmul f16 operand", 2, { T16(VOLT_F16, 9, 16), F32(16, 5) }, b_matmul, NULL, R16, A16, VOLT_F32, false },
        /* the column sums' row chunks (core/cuda/elementwise.cu: 18, 11, 9 chunks here, C not
         * a multiple of 32 or 4) and the vector paths (n = 4 k + 3, inner % 4 == 0) */
        { "linear 1100x37 -> 37 + bias (bias grad in 18 row chunks)", 3, { F32(1100, 37), F32(37, 37), F32(37) }, b_linear,
          NULL, R, AK, VOLT_F32, false },
        { "linear bf16 compute 700x40 -> 37 + bias (dy's copy fused with 11 row chunks)", 3,
          { F32(700, 40), F32(37, 40), F32(37) }, b_linear, NULL, R16, A16, VOLT_BF16, true },
        { "q, k, v: three bf16 linears of one x (one kept copy)", 4,
          { F32(129, 64), F32(24, 64), F32(24, 64), F32(24, 64) }, b_qkv, NULL, R16, A16, VOLT_BF16, false },
        { "two bf16 linears of different x (no sharing)", 4, { F32(129, 64), F32(24, 64), F32(129, 64), F32(24, 64) },
          b_two_x, NULL, R16, A16, VOLT_BF16, false },
        { "add (700,33) + (33) (11 row chunks)", 2, { F32(700, 33), F32(33) }, b_add, NULL, R, A, VOLT_F32, false },
        { "mul (520,12) * (12) (vector path, 9 row chunks)", 2, { F32(520, 12), F32(12) }, b_mul, NULL, R, A, VOLT_F32,
          false },
        { "add (5,1027) + (1027) (scalar path, tail)", 2, { F32(5, 1027), F32(1027) }, b_add, NULL, R, A, VOLT_F32, false },
        { "gelu (1027) (vector path + tail 3)", 1, { F32(1027) }, b_gelu, NULL, R, A, VOLT_F32, false },
        { "tanh (1031) (vector path from y + tail 3)", 1, { F32(1031) }, b_tanh, NULL, R, A, VOLT_F32, false },
        { "scale (1027)", 1, { F32(1027) }, b_scale, NULL, R, A, VOLT_F32, false },
        { "layernorm (700,33) affine (11 row chunks)", 3, { F32(700, 33), F32(33), F32(33) }, b_ln, NULL, R, A, VOLT_F32,
          false },
        { "layernorm (3,1500) affine (rows past the register cache)", 3, { F32(3, 1500), F32(1500), F32(1500) }, b_ln, NULL,
          R, A, VOLT_F32, false },
        { "cast f32 -> bf16 -> f32 (1027: tail)", 1, { F32(1027) }, b_cast, &bf, 0, 0, VOLT_F32, false },
        { "add (129,7) + (7)", 2, { F32(129, 7), F32(7) }, b_add, NULL, R, A, VOLT_F32, true },
        { "add same shape", 2, { F32(3, 5, 7), F32(3, 5, 7) }, b_add, NULL, R, A, VOLT_F32, false },
        { "add x + x", 1, { F32(1000) }, b_add_self, NULL, R, A, VOLT_F32, false },
        { "mul (129,7) * (7)", 2, { F32(129, 7), F32(7) }, b_mul, NULL, R, A, VOLT_F32, true },
        { "scale", 1, { F32(3, 5, 7) }, b_scale, NULL, R, A, VOLT_F32, true },
        { "relu", 1, { F32(1000) }, b_relu, NULL, R, A, VOLT_F32, true },
        { "gelu (erf)", 1, { F32(1000) }, b_gelu, NULL, R, A, VOLT_F32, true },
        { "gelu_tanh", 1, { F32(129) }, b_gelu_tanh, NULL, R, A, VOLT_F32, true },
        { "tanh", 1, { F32(3, 5, 7) }, b_tanh, NULL, R, A, VOLT_F32, true },
        { "sigmoid", 1, { F32(1000) }, b_sigmoid, NULL, R, A, VOLT_F32, true },
        { "softmax (33,1000)", 1, { F32(33, 1000) }, b_softmax, NULL, R, A, VOLT_F32, true },
        { "softmax (129,7)", 1, { F32(129, 7) }, b_softmax, NULL, R, A, VOLT_F32, false },
        { "log_softmax (33,1000)", 1, { F32(33, 1000) }, b_log_softmax, NULL, R, A, VOLT_F32, true },
        { "cross_entropy (129,7) i64, some ignored", 2, { F32(129, 7), TT(VOLT_I64, 7, 129) }, b_xent, NULL, R, A, VOLT_F32, true },
        { "cross_entropy (33,1000) i32, smoothing", 2, { F32(33, 1000), TT(VOLT_I32, 1000, 33) }, b_xent, &smooth, R, A,
          VOLT_F32, false },
        { "mse (3,5,7)", 2, { F32(3, 5, 7), F32(3, 5, 7) }, b_mse, NULL, R, A, VOLT_F32, true },
        { "layernorm (129,257) affine", 3, { F32(129, 257), F32(257), F32(257) }, b_ln, NULL, R, A, VOLT_F32, true },
        { "layernorm (3,5,768) plain", 1, { F32(3, 5, 768) }, b_ln_plain, NULL, R, A, VOLT_F32, false },
        { "embedding i64 (3,5) x (1000,33)", 2, { TI(VOLT_I64, 1000, 3, 5), F32(1000, 33) }, b_emb, NULL, R, A, VOLT_F32, true },
        { "embedding i32, repeats, padding_idx 3", 2, { TI(VOLT_I32, 7, 129), F32(7, 65) }, b_emb_pad, NULL, R, A, VOLT_F32,
          false },
        { "reshape", 1, { F32(3, 5, 7) }, b_reshape, NULL, R, A, VOLT_F32, true },
        { "permute (3,5,7,2) -> (7,3,2,5)", 1, { F32(3, 5, 7, 2) }, b_permute, perm4, R, A, VOLT_F32, true },
        { "permute bf16 input", 1, { T16(VOLT_BF16, 3, 5, 7, 2) }, b_permute, perm4, R, A, VOLT_F32, false },
        { "transpose (129,7)", 1, { F32(129, 7) }, b_transpose, NULL, R, A, VOLT_F32, false },
        { "slice (3,7,5) dim 1 [2,5)", 1, { F32(3, 7, 5) }, b_slice, NULL, R, A, VOLT_F32, true },
        { "select (3,7,5) dim 1 index 0", 1, { F32(3, 7, 5) }, b_select, NULL, R, A, VOLT_F32, false },
        { "concat (3,2,5),(3,4,5),(3,2,5) dim 1", 2, { F32(3, 2, 5), F32(3, 4, 5) }, b_concat, NULL, R, A, VOLT_F32, true },
        { "sum 100003", 1, { F32(100003) }, b_sum, NULL, R, A, VOLT_F32, true },
        { "mean (3,5,7)", 1, { F32(3, 5, 7) }, b_mean, NULL, R, A, VOLT_F32, true },
        { "conv2d (2,3,9,9) * (4,3,3,3) s2 p1 + bias", 3, { F32(2, 3, 9, 9), F32(4, 3, 3, 3), F32(4) }, b_conv, conv_a, R, A,
          VOLT_F32, true },
        { "conv2d (3,2,7,5) * (5,2,1,1) s1 p0", 2, { F32(3, 2, 7, 5), F32(5, 2, 1, 1) }, b_conv, conv_b, R, A, VOLT_F32, false },
        { "max_pool2d (2,3,9,9) k2 s2", 1, { F32(2, 3, 9, 9) }, b_pool, pool_a, R, A, VOLT_F32, true },
        { "max_pool2d (2,3,9,9) k3 s2 (overlapping)", 1, { F32(2, 3, 9, 9) }, b_pool, pool_b, R, A, VOLT_F32, false },
        { "cast f32 -> bf16 -> f32", 1, { F32(1000) }, b_cast, &bf, 0, 0, VOLT_F32, true },
        { "cast f32 -> f16 -> f32", 1, { F32(3, 5, 7) }, b_cast, &hf, 0, 0, VOLT_F32, false },
        { "gelu of a bf16 input (recorded cast)", 1, { T16(VOLT_BF16, 129) }, b_cast16_in, NULL, R, A, VOLT_F32, false },
        { "gelu of an f16 input (recorded cast)", 1, { T16(VOLT_F16, 129) }, b_cast16_in, NULL, R, A, VOLT_F32, false },
        { "arange i64", 0, { { 0 } }, b_arange, &i64, 0, 0, VOLT_F32, false },
        { "arange i32", 0, { { 0 } }, b_arange, &i32, 0, 0, VOLT_F32, false },
        { "argmax (129,7)", 1, { FNG(129, 7) }, b_argmax, NULL, 0, 0, VOLT_F32, false },
        { "accuracy (129,7)", 2, { FNG(129, 7), TT(VOLT_I64, 7, 129) }, b_accuracy, NULL, 0, 0, VOLT_F32, false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
}

/* ---- the same errors as the CPU --------------------------------------------------------- */
/* n inputs (2 or 3): both backends must fail with the same message */
static void error_case_n(const char *what, build_fn fn, int n, const spec *sp, void **host) {
    op_case c = { what, n, { sp[0], sp[1], n > 2 ? sp[2] : sp[1] }, fn, NULL, 0, 0, VOLT_F32, false };
    float up[1] = { 1 };
    run_result want = run_on("cpu", &c, host, up), got = run_on(g_other, &c, host, up);
    CHECK(!want.out && !got.out, "%s: both must fail (cpu: %s, %s: %s)", what, want.err, g_other, got.err);
    CHECK(!strcmp(want.err, got.err), "%s: error \"%s\", want \"%s\"", what, got.err, want.err);
    free(want.out);
    free(got.out);
}
static void error_case(const char *what, build_fn fn, spec a, spec b, void *ha, void *hb) {
    error_case_n(what, fn, 2, (spec[]){ a, b }, (void *[]){ ha, hb });
}
/* embedding then cross-entropy on its rows (ids (N), table (V, C), targets (N)): the error
 * of whichever op comes first in program order is reported */
static volt_tensor *b_emb_xent(volt_step *s, volt_tensor **in, const void *a) {
    (void)a;
    return volt_cross_entropy(s, volt_embedding(s, in[0], in[1]), in[2]);
}
static void error_case3(const char *what, spec a, spec b, spec c3, void *ha, void *hb, void *hc) {
    error_case_n(what, b_emb_xent, 3, (spec[]){ a, b, c3 }, (void *[]){ ha, hb, hc });
}
static void test_errors(void) {
    /* several bad ids: the first position is named (the device word keeps the minimum) */
    int64_t ids3[6] = { 0, 7, 2, -1, 10, 4 };
    float tab3[5 * 3] = { 0 };
    error_case("embedding: first of several bad ids", b_emb, (spec){ VOLT_I64, VOLT_SHAPE(3, 2), IDS, 0 },
               (spec){ VOLT_F32, VOLT_SHAPE(5, 3), F_GRAD, 0 }, ids3, tab3);
    int32_t ids4[4] = { 0, 1, -3, 2 };
    error_case("embedding: negative i32 id", b_emb, (spec){ VOLT_I32, VOLT_SHAPE(4), IDS, 0 },
               (spec){ VOLT_F32, VOLT_SHAPE(5, 3), F_GRAD, 0 }, ids4, tab3);
    /* the second op of the step is the bad one: its own message, not the first op's */
    int64_t ok_ids[4] = { 0, 4, 2, 1 }, bad_tg[4] = { 0, 2, 1, 3 }, ok_tg[4] = { 0, 2, 1, 1 };
    int64_t bad_ids[4] = { 0, 5, 2, 1 };
    error_case3("embedding ok, cross_entropy target bad", (spec){ VOLT_I64, VOLT_SHAPE(4), IDS, 0 },
                (spec){ VOLT_F32, VOLT_SHAPE(5, 3), F_GRAD, 0 }, (spec){ VOLT_I64, VOLT_SHAPE(4), IDS, 0 }, ok_ids, tab3,
                bad_tg);
    /* both bad: the embedding (first in program order) is named */
    error_case3("embedding and cross_entropy both bad", (spec){ VOLT_I64, VOLT_SHAPE(4), IDS, 0 },
                (spec){ VOLT_F32, VOLT_SHAPE(5, 3), F_GRAD, 0 }, (spec){ VOLT_I64, VOLT_SHAPE(4), IDS, 0 }, bad_ids, tab3,
                bad_tg);
    /* and a good pair passes through the same path (the error word was reset) */
    {
        void *host[3] = { ok_ids, tab3, ok_tg };
        op_case c = { "embedding + cross_entropy, all good", 3,
                      { (spec){ VOLT_I64, VOLT_SHAPE(4), IDS, 0 }, (spec){ VOLT_F32, VOLT_SHAPE(5, 3), F_GRAD, 0 },
                        (spec){ VOLT_I64, VOLT_SHAPE(4), IDS, 0 } }, b_emb_xent, NULL, 0, 0, VOLT_F32, false };
        float up[1] = { 1 };
        run_result got = run_on(g_other, &c, host, up);
        CHECK(got.out && got.ok, "%s: failed on %s: %s", c.name, g_other, got.err);
        free(got.out);
        for (int k = 0; k < MAXIN; k++) free(got.grad[k]);
    }
    int64_t ids[6] = { 0, 1, 2, 3, 10, 4 };
    float tab[5 * 3] = { 0 };
    error_case("embedding id out of range", b_emb, (spec){ VOLT_I64, VOLT_SHAPE(2, 3), IDS, 0 },
               (spec){ VOLT_F32, VOLT_SHAPE(5, 3), F_GRAD, 0 }, ids, tab);
    int32_t tg[4] = { 0, -100, 9, 1 };
    float logits[4 * 3] = { 0 };
    error_case("cross_entropy target out of range", b_xent, (spec){ VOLT_F32, VOLT_SHAPE(4, 3), F_GRAD, 0 },
               (spec){ VOLT_I32, VOLT_SHAPE(4), TARGETS, 0 }, logits, tg);
}

/* ---- parameter math ---------------------------------------------------------------------- */
typedef struct { volt_device *d; void *p[4]; } devbufs;

static volt_device *dev(const char *name) {
    volt_device *d = NULL;
    char err[256];
    CHECK_OK(volt__device_get(name, 0, &d, err, sizeof err));
    return d;
}
static void *up_(volt_device *d, const void *h, size_t bytes) {
    void *p = volt__dev_alloc(d, bytes ? bytes : 1);
    volt__dev_h2d(d, p, h, bytes);
    return p;
}
static void down_(volt_device *d, void *h, const void *p, size_t bytes) { volt__dev_d2h(d, h, p, bytes); }

static void cmp_f32(const char *what, const float *got, const float *want, int64_t n, double rtol, double atol) {
    double *g = malloc(sizeof(double) * (size_t)n), *w = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) { g[i] = got[i]; w[i] = want[i]; }
    compare("param math", what, g, w, n, rtol, atol);
    free(g);
    free(w);
}

static void test_pm_simple(volt_device *dc, volt_device *dg) {
    enum { N = 100003 };
    float *h = malloc(sizeof(float) * N), *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) h[i] = (float)(4 * uni() - 2);
    volt_device *ds[2] = { dc, dg };
    float *out[2] = { a, b };
    /* scale, clip_value */
    for (int k = 0; k < 2; k++) {
        float *x = up_(ds[k], h, sizeof(float) * N);
        ds[k]->be->pm->scale(ds[k], x, N, 0.37f);
        ds[k]->be->pm->clip_value(ds[k], x, N, 0.5f);
        down_(ds[k], out[k], x, sizeof(float) * N);
        volt__dev_free(ds[k], x);
    }
    cmp_f32("scale + clip_value", b, a, N, 0, 0);
    /* sqnorm_acc into 1.5, then clip_by_norm with that norm (coef < 1), and with an inf norm (no-op) */
    double acc[2];
    for (int k = 0; k < 2; k++) {
        float *x = up_(ds[k], h, sizeof(float) * N);
        double init = 1.5, inf = INFINITY;
        double *sq = up_(ds[k], &init, sizeof init), *sqi = up_(ds[k], &inf, sizeof inf);
        ds[k]->be->pm->sqnorm_acc(ds[k], x, N, sq);
        down_(ds[k], &acc[k], sq, sizeof(double));
        ds[k]->be->pm->clip_by_norm(ds[k], x, N, sq, 3.f);
        ds[k]->be->pm->clip_by_norm(ds[k], x, N, sqi, 3.f);
        down_(ds[k], out[k], x, sizeof(float) * N);
        volt__dev_free(ds[k], x);
        volt__dev_free(ds[k], sq);
        volt__dev_free(ds[k], sqi);
    }
    CHECK(fabs(acc[1] - acc[0]) <= 1e-12 * acc[0], "sqnorm_acc: got %.17g, want %.17g", acc[1], acc[0]);
    cmp_f32("clip_by_norm", b, a, N, 1e-6, 0);
    /* unscale (an inf at 777 in the second call) and scaler_update */
    volt_scaler_state st[2];
    for (int k = 0; k < 2; k++) {
        float *x = up_(ds[k], h, sizeof(float) * N);
        volt_scaler_state s0 = { .scale = 1024.f, .found_inf = 0.f, .growth_tracker = 3 };
        volt_scaler_state *sd = up_(ds[k], &s0, sizeof s0);
        ds[k]->be->pm->unscale(ds[k], x, N, sd);
        volt_scaler_state mid;
        down_(ds[k], &mid, sd, sizeof mid);
        CHECK(mid.found_inf == 0.f, "%s: unscale of finite grads found inf", ds[k]->be->name);
        ds[k]->be->pm->scaler_update(ds[k], sd, 2.f, 0.5f, 4);   /* tracker 3 -> 4: grows */
        float bad = INFINITY;
        volt__dev_h2d(ds[k], x + 777, &bad, sizeof bad);
        ds[k]->be->pm->unscale(ds[k], x, N, sd);
        down_(ds[k], &mid, sd, sizeof mid);
        CHECK(mid.found_inf == 1.f, "%s: unscale missed the inf", ds[k]->be->name);
        ds[k]->be->pm->scaler_update(ds[k], sd, 2.f, 0.5f, 4);   /* backs off */
        down_(ds[k], &st[k], sd, sizeof st[k]);
        down_(ds[k], out[k], x, sizeof(float) * N);
        volt__dev_free(ds[k], x);
        volt__dev_free(ds[k], sd);
    }
    CHECK(st[0].scale == 1024.f && st[1].scale == st[0].scale && st[1].growth_tracker == st[0].growth_tracker &&
          st[0].found_inf == 1.f && st[1].found_inf == 1.f, "scaler: got scale %g tracker %lld found %g, want %g %lld 1 (kept)", st[1].scale,
          (long long)st[1].growth_tracker, st[1].found_inf, st[0].scale, (long long)st[0].growth_tracker);
    cmp_f32("unscale", b, a, N, 0, 0);
    free(h); free(a); free(b);
}

/* convert: every bf16 / f16 rounding case (ties, subnormals, overflow, inf, NaN payloads) bit for bit */
static void test_pm_convert(volt_device *dc, volt_device *dg) {
    enum { N = 4096 };
    uint32_t *bits = malloc(sizeof(uint32_t) * N);
    const uint32_t special[] = { 0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0xffa12345u,
                                 0x477ff000u, 0x477fefffu, 0x33800000u, 0x33000001u, 0x387fc000u, 0x3f808000u,
                                 0x3f818000u, 0x00000001u, 0x007fffffu, 0x7f7fffffu };
    for (int i = 0; i < N; i++) bits[i] = i < 16 ? special[i] : (uint32_t)(uni() * 4294967296.0);
    const volt_dtype to[] = { VOLT_BF16, VOLT_F16 };
    for (int t = 0; t < 2; t++) {
        uint16_t h16[2][N];
        uint32_t back[2][N];
        uint16_t cross[2][N], mis[2][N];
        uint32_t mis32[2][N];
        volt_device *ds[2] = { dc, dg };
        for (int k = 0; k < 2; k++) {
            void *src = up_(ds[k], bits, sizeof(uint32_t) * N);
            void *d16 = volt__dev_alloc(ds[k], 2 * N), *d32 = volt__dev_alloc(ds[k], 4 * N), *dx = volt__dev_alloc(ds[k], 2 * N);
            void *dm = volt__dev_alloc(ds[k], 2 * N), *dm32 = volt__dev_alloc(ds[k], 4 * N);
            ds[k]->be->pm->convert(ds[k], d16, to[t], src, VOLT_F32, N);
            ds[k]->be->pm->convert(ds[k], d32, VOLT_F32, d16, to[t], N);
            ds[k]->be->pm->convert(ds[k], dx, to[1 - t], d16, to[t], N);
            /* starts off the 16-byte grid (the scalar path) and a count of 4 k + 1 (the tail) */
            ds[k]->be->pm->convert(ds[k], (char *)dm + 2, to[t], (const char *)src + 4, VOLT_F32, N - 3);
            ds[k]->be->pm->convert(ds[k], dm32, VOLT_F32, (const char *)d16 + 2, to[t], N - 3);
            down_(ds[k], mis[k], dm, 2 * N);
            down_(ds[k], mis32[k], dm32, 4 * N);
            volt__dev_free(ds[k], dm); volt__dev_free(ds[k], dm32);
            down_(ds[k], h16[k], d16, 2 * N);
            down_(ds[k], back[k], d32, 4 * N);
            down_(ds[k], cross[k], dx, 2 * N);
            volt__dev_free(ds[k], src); volt__dev_free(ds[k], d16); volt__dev_free(ds[k], d32); volt__dev_free(ds[k], dx);
        }
        int bad = -1;
        for (int i = 0; i < N && bad < 0; i++)
            if (h16[0][i] != h16[1][i] || back[0][i] != back[1][i] || cross[0][i] != cross[1][i]) bad = i;
        CHECK(bad < 0, "convert f32 <-> %s: element %d (f32 bits %08x): got %04x / %08x / %04x, want %04x / %08x / %04x",
              volt_dtype_name(to[t]), bad, bad >= 0 ? bits[bad] : 0, bad >= 0 ? h16[1][bad] : 0, bad >= 0 ? back[1][bad] : 0,
              bad >= 0 ? cross[1][bad] : 0, bad >= 0 ? h16[0][bad] : 0, bad >= 0 ? back[0][bad] : 0,
              bad >= 0 ? cross[0][bad] : 0);
        bad = -1;   /* elements 1 .. N - 3 of the misaligned conversions (the rest never written) */
        for (int i = 1; i < N - 2 && bad < 0; i++)
            if (mis[0][i] != mis[1][i] || mis32[0][i - 1] != mis32[1][i - 1]) bad = i;
        CHECK(bad < 0, "convert f32 <-> %s off the 16-byte grid, %d elements: element %d differs (%04x / %08x, want "
              "%04x / %08x)", volt_dtype_name(to[t]), N - 3, bad, bad >= 0 ? mis[1][bad] : 0,
              bad >= 0 ? mis32[1][bad - 1] : 0, bad >= 0 ? mis[0][bad] : 0, bad >= 0 ? mis32[0][bad - 1] : 0);
    }
    free(bits);
}

/* SGD (momentum, nesterov, wd), Adam (wd, both lerp branches), AdamW over f32 and 16-bit */
static void test_pm_update(volt_device *dc, volt_device *dg) {
    enum { N = 4099 };
    float *p = malloc(4 * N), *g = malloc(4 * N), *m = malloc(4 * N), *v = malloc(4 * N);
    for (int i = 0; i < N; i++) {
        p[i] = (float)(2 * uni() - 1); g[i] = (float)(2 * uni() - 1) * 0.1f;
        m[i] = (float)(2 * uni() - 1) * 0.01f; v[i] = (float)uni() * 1e-3f;
    }
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, wd = 0.01;
    const int t = 3;
    volt_opt_coef sgd = { .wd = 0.01f, .momentum = 0.9f, .one_minus_damp = 1.f, .neg_lr = -0.05f, .nesterov = 1, .first = 0,
                          .decay = 1.f };
    volt_opt_coef adam = { .wd = (float)wd, .decay = 1.f, .w1 = (float)(1 - b1), .one_minus_w1 = (float)b1,
                           .beta2 = (float)b2, .w2 = (float)(1 - b2), .bc2_sqrt = (float)sqrt(1 - pow(b2, t)), .eps = 1e-8f,
                           .neg_step_size = (float)(-lr / (1 - pow(b1, t))) };
    volt_opt_coef adam_bigw = adam;
    adam_bigw.w1 = 0.6f; adam_bigw.one_minus_w1 = 0.4f;
    volt_opt_coef adamw = adam;
    adamw.wd = 0; adamw.decay = (float)(1 - lr * wd);
    struct { const char *name; volt_update_kind kind; const volt_opt_coef *c; volt_dtype p_dt, s_dt; bool s0, s1; } u[] = {
        { "sgd nesterov f32", VOLT_UPDATE_SGD, &sgd, VOLT_F32, VOLT_F32, true, false },
        { "sgd no momentum bf16", VOLT_UPDATE_SGD, &sgd, VOLT_BF16, VOLT_F32, false, false },
        { "adam f32", VOLT_UPDATE_ADAM, &adam, VOLT_F32, VOLT_F32, true, true },
        { "adam lerp w >= 0.5 f32", VOLT_UPDATE_ADAM, &adam_bigw, VOLT_F32, VOLT_F32, true, true },
        { "adamw f32", VOLT_UPDATE_ADAMW, &adamw, VOLT_F32, VOLT_F32, true, true },
        { "adamw bf16 values, bf16 states", VOLT_UPDATE_ADAMW, &adamw, VOLT_BF16, VOLT_BF16, true, true },
        { "adam f16 values, f32 states", VOLT_UPDATE_ADAM, &adam, VOLT_F16, VOLT_F32, true, true },
    };
    for (size_t c = 0; c < sizeof u / sizeof u[0]; c++) {
        float res[2][3][N];
        volt_device *ds[2] = { dc, dg };
        for (int k = 0; k < 2; k++) {
            volt_device *d = ds[k];
            size_t pb = volt_dtype_size(u[c].p_dt) * N, sb = volt_dtype_size(u[c].s_dt) * N;
            void *hp = malloc(pb), *hm = malloc(sb), *hv = malloc(sb);
            volt_convert(hp, u[c].p_dt, p, VOLT_F32, N);
            volt_convert(hm, u[c].s_dt, m, VOLT_F32, N);
            volt_convert(hv, u[c].s_dt, v, VOLT_F32, N);
            volt_update_args a = { .kind = u[c].kind, .p = up_(d, hp, pb), .p_dt = u[c].p_dt, .g = up_(d, g, 4 * N),
                                   .s0 = u[c].s0 ? up_(d, hm, sb) : NULL, .s1 = u[c].s1 ? up_(d, hv, sb) : NULL,
                                   .s_dt = u[c].s_dt, .n = N, .coef = up_(d, u[c].c, sizeof *u[c].c) };
            d->be->pm->update(d, &a);
            d->be->pm->update(d, &a);   /* twice: the states feed back */
            down_(d, hp, a.p, pb);
            {   /* a third with the skip flag set (16-mixed's inf/NaN step, captured) changes nothing */
                const float one = 1.f;
                void *hp2 = malloc(pb), *hm2 = malloc(sb), *hm3 = malloc(sb), *hv2 = malloc(sb), *hv3 = malloc(sb);
                if (a.s0) down_(d, hm2, a.s0, sb);
                if (a.s1) down_(d, hv2, a.s1, sb);
                a.skip = up_(d, &one, sizeof one);
                d->be->pm->update(d, &a);
                down_(d, hp2, a.p, pb);
                if (a.s0) down_(d, hm3, a.s0, sb);
                if (a.s1) down_(d, hv3, a.s1, sb);
                CHECK(!memcmp(hp2, hp, pb) && (!a.s0 || !memcmp(hm2, hm3, sb)) && (!a.s1 || !memcmp(hv2, hv3, sb)),
                      "update %s on %s: a set skip flag still changed the values or states", u[c].name, d->be->name);
                volt__dev_free(d, (void *)a.skip);
                free(hp2); free(hm2); free(hm3); free(hv2); free(hv3);
            }
            volt_convert(res[k][0], VOLT_F32, hp, u[c].p_dt, N);
            memset(res[k][1], 0, sizeof res[k][1]);
            memset(res[k][2], 0, sizeof res[k][2]);
            if (a.s0) { down_(d, hm, a.s0, sb); volt_convert(res[k][1], VOLT_F32, hm, u[c].s_dt, N); }
            if (a.s1) { down_(d, hv, a.s1, sb); volt_convert(res[k][2], VOLT_F32, hv, u[c].s_dt, N); }
            volt__dev_free(d, a.p); volt__dev_free(d, (void *)a.g); volt__dev_free(d, a.s0); volt__dev_free(d, a.s1);
            volt__dev_free(d, (void *)a.coef);
            free(hp); free(hm); free(hv);
        }
        /* f32: the same operations in the same order (FMA contraction on the CPU's AVX2/512
         * clones may move the last bit); 16-bit: one rounding step apart at most */
        const bool b16 = u[c].p_dt != VOLT_F32 || u[c].s_dt != VOLT_F32;
        const double rt = b16 ? 1e-2 : 1e-5, at = b16 ? 1e-6 : 1e-9;
        char what[96];
        snprintf(what, sizeof what, "update %s: values", u[c].name);
        cmp_f32(what, res[1][0], res[0][0], N, rt, at);
        snprintf(what, sizeof what, "update %s: state 0", u[c].name);
        cmp_f32(what, res[1][1], res[0][1], N, rt, at);
        snprintf(what, sizeof what, "update %s: state 1", u[c].name);
        cmp_f32(what, res[1][2], res[0][2], N, rt, at);
    }
    free(p); free(g); free(m); free(v);
}

/* The weight average (pm->average): copy, EMA, both lerp branches, over f32 and 16-bit,
 * against the cpu backend bit for bit (the same f32 operations; -fmad=false keeps the EMA's
 * products apart), and a set skip flag changes nothing. */
static void test_pm_average(volt_device *dc, volt_device *dg) {
    enum { N = 4099 };
    CHECK(dg->be->version >= 6 && dg->be->pm->average, "cuda: no pm->average");
    if (!(dg->be->version >= 6 && dg->be->pm->average)) return;
    float *p = malloc(4 * N), *a = malloc(4 * N);
    for (int i = 0; i < N; i++) { p[i] = (float)(2 * uni() - 1); a[i] = (float)(2 * uni() - 1); }
    const volt_opt_coef cs[4] = { { .avg_op = VOLT_AVG_COPY }, { .avg_op = VOLT_AVG_EMA, .avg_a = 0.999f, .avg_b = 0.001f },
                                  { .avg_op = VOLT_AVG_LERP, .avg_a = 0.25f }, { .avg_op = VOLT_AVG_LERP, .avg_a = 0.5f } };
    const char *names[4] = { "copy", "ema", "lerp 1/4", "lerp 1/2" };
    const volt_dtype dts[3] = { VOLT_F32, VOLT_BF16, VOLT_F16 };
    for (int c = 0; c < 4; c++)
        for (int t = 0; t < 3; t++) {
            const size_t b = volt_dtype_size(dts[t]) * N;
            void *hp = malloc(b), *ha = malloc(b), *out[2] = { malloc(b), malloc(b) };
            volt_convert(hp, dts[t], p, VOLT_F32, N);
            volt_convert(ha, dts[t], a, VOLT_F32, N);
            volt_device *ds[2] = { dc, dg };
            for (int k = 0; k < 2; k++) {
                volt_device *d = ds[k];
                void *dp = up_(d, hp, b), *da = up_(d, ha, b), *dcf = up_(d, &cs[c], sizeof cs[c]);
                const float zero = 0.f, one = 1.f;
                float *flag = up_(d, &zero, sizeof zero);
                d->be->pm->average(d, da, dts[t], dp, dts[t], N, dcf, flag);
                d->be->pm->average(d, da, dts[t], dp, dts[t], N, dcf, NULL);   /* twice: the average feeds back */
                down_(d, out[k], da, b);
                volt__dev_free(d, flag);
                flag = up_(d, &one, sizeof one);
                d->be->pm->average(d, da, dts[t], dp, dts[t], N, dcf, flag);
                void *again = malloc(b);
                down_(d, again, da, b);
                CHECK(!memcmp(again, out[k], b), "average %s %s on %s: a set skip flag changed it", names[c],
                      volt_dtype_name(dts[t]), d->be->name);
                free(again);
                volt__dev_free(d, flag); volt__dev_free(d, dp); volt__dev_free(d, da); volt__dev_free(d, dcf);
            }
            CHECK(!memcmp(out[0], out[1], b), "average %s %s: cuda differs from cpu", names[c], volt_dtype_name(dts[t]));
            free(hp); free(ha); free(out[0]); free(out[1]);
        }
    free(p); free(a);
}

/* ---- memory and stream ------------------------------------------------------------------- */
static void test_memory(volt_device *d) {
    const size_t n = 3 * 4096 + 100;
    float *x = volt__dev_alloc(d, n * sizeof(float)), *y = volt__dev_alloc(d, n * sizeof(float));
    CHECK(x && y && ((uintptr_t)x & 63) == 0 && ((uintptr_t)y & 63) == 0, "%s: alloc, 64-byte aligned", d->be->name);
    CHECK(volt__dev_alloc(d, (size_t)1 << 50) == NULL, "%s: an impossible allocation returns NULL", d->be->name);
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = (float)i * 0.5f;
    volt__dev_h2d(d, x, h, n * sizeof(float));
    volt__dev_d2d(d, y, x, n * sizeof(float));
    volt__dev_memset(d, y, 0, 10 * sizeof(float));
    volt_device_event *e = d->be->event_create ? d->be->event_create(d) : NULL;
    if (e) { d->be->event_record(d, e); d->be->event_wait(d, e); }
    volt__dev_d2h(d, back, y, n * sizeof(float));
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok &= back[i] == (i < 10 ? 0.f : h[i]);
    CHECK(ok, "%s: h2d, d2d, memset, d2h", d->be->name);
    d->be->give_back(d, y + 1000, 2 * 4096 * sizeof(float));
    if (d->be->recommit) CHECK_OK(d->be->recommit(d, y + 1000, 2 * 4096 * sizeof(float)));
    volt__dev_d2h(d, back, y, n * sizeof(float));
    ok = true;
    for (size_t i = 10; i < n; i++) ok &= back[i] == (i >= 1000 && i < 1000 + 2 * 4096 ? 0.f : h[i]);
    CHECK(ok, "%s: give_back zeroes exactly its range", d->be->name);
    d->be->synchronize(d);
    if (e) d->be->event_destroy(d, e);
    volt__dev_free(d, x);
    volt__dev_free(d, y);
    free(h);
    free(back);
}

/* Unit buffers (alloc_givable): give_back really returns whole device granules (cuda: VMM,
 * 2 MiB granules; cpu-strict: pages), recommit maps them again reading zeros, the rest of the
 * buffer keeps its bytes, and a give_back followed at once by a recommit (the unmap still
 * waiting for the stream) keeps the memory. */
static void test_memory_givable(volt_device *d) {
    const size_t MiB = (size_t)1 << 20, n = (6 * MiB + 12288) / sizeof(float);
    const size_t lo = (MiB + 400) / sizeof(float), hi = (5 * MiB + 400) / sizeof(float);
    float *p = volt__dev_alloc_givable(d, n * sizeof(float));
    CHECK(p != NULL, "%s: alloc_givable of %zu bytes", d->be->name, n * sizeof(float));
    if (!p) return;
    float *h = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = (float)(i % 1000) + 1.f;
    volt__dev_h2d(d, p, h, n * sizeof(float));
    /* cuda gives granules back with VMM; CUDASIM_VMM_UNSUPPORTED plays a device without it: the
     * backend must see that at open (no GIVE_BACK) and fall back to zeroing */
    const bool cuda_dev = !strcmp(d->be->name, "cuda"), no_vmm = getenv("CUDASIM_VMM_UNSUPPORTED") != NULL;
    const bool cuda = cuda_dev && !no_vmm;
    int64_t full = d->be->resident_bytes ? d->be->resident_bytes(d, p, n * sizeof(float)) : -1;
    d->be->give_back(d, p + lo, (hi - lo) * sizeof(float));
    if (d->be->resident_bytes && (d->caps & VOLT_DEV_GIVE_BACK)) {
        d->be->synchronize(d);
        int64_t after = d->be->resident_bytes(d, p, n * sizeof(float));
        CHECK(after <= full - (int64_t)(2 * MiB) && after >= full - (int64_t)((hi - lo) * sizeof(float)),
              "%s: give_back of %zu bytes returned %lld of %lld resident bytes (at least one whole 2 MiB granule, at most "
              "the range)", d->be->name, (hi - lo) * sizeof(float), (long long)(full - after), (long long)full);
    }
    if (cuda_dev)
        CHECK(!(d->caps & VOLT_DEV_GIVE_BACK) == no_vmm, "cuda: VOLT_DEV_GIVE_BACK (virtual memory management) %s",
              no_vmm ? "advertised on a device without VMM" : "missing");
    if (d->be->recommit) CHECK_OK(d->be->recommit(d, p + lo, (hi - lo) * sizeof(float)));
    if (cuda) CHECK(d->be->resident_bytes(d, p, n * sizeof(float)) == full, "cuda: recommit maps the granules again");
    volt__dev_d2h(d, back, p, n * sizeof(float));
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok &= back[i] == (i >= lo && i < hi ? 0.f : h[i]);
    CHECK(ok, "%s: after give_back + recommit the range reads zeros and the rest is kept", d->be->name);
    /* again, with no synchronize between: the unmap is cancelled, the granules read zeros */
    volt__dev_h2d(d, p, h, n * sizeof(float));
    d->be->give_back(d, p + lo, (hi - lo) * sizeof(float));
    if (d->be->recommit) CHECK_OK(d->be->recommit(d, p, n * sizeof(float)));
    volt__dev_h2d(d, p + hi, h + hi, (n - hi) * sizeof(float));   /* writes right after the recommit */
    volt__dev_d2h(d, back, p, n * sizeof(float));
    ok = true;
    for (size_t i = 0; i < n; i++) ok &= back[i] == (i >= lo && i < hi ? 0.f : h[i]);
    CHECK(ok, "%s: give_back then recommit at once: zeros in the range, the rest kept", d->be->name);
    if (cuda) {
        d->be->synchronize(d);
        CHECK(d->be->resident_bytes(d, p, n * sizeof(float)) == full, "cuda: a cancelled give_back keeps its granules");
    }
    /* the whole buffer back, then freed while given back */
    d->be->give_back(d, p, n * sizeof(float));
    if (cuda) {
        d->be->synchronize(d);
        CHECK(d->be->resident_bytes(d, p, n * sizeof(float)) < (int64_t)MiB, "cuda: the whole buffer given back");
    }
    volt__dev_free(d, p);
    float *small = volt__dev_alloc_givable(d, 1000 * sizeof(float));   /* under a granule: the pool's */
    CHECK(small != NULL, "%s: a small alloc_givable", d->be->name);
    if (small) {
        volt__dev_h2d(d, small, h, 1000 * sizeof(float));
        d->be->give_back(d, small + 10, 20 * sizeof(float));
        if (d->be->recommit) CHECK_OK(d->be->recommit(d, small + 10, 20 * sizeof(float)));
        volt__dev_d2h(d, back, small, 1000 * sizeof(float));
        ok = true;
        for (size_t i = 0; i < 1000; i++) ok &= back[i] == (i >= 10 && i < 30 ? 0.f : h[i]);
        CHECK(ok, "%s: give_back on a small givable buffer zeroes its range", d->be->name);
        volt__dev_free(d, small);
    }
    free(h);
    free(back);
}

int main(void) {
    const char *env = getenv("VOLT_TEST_BACKEND");
    if (env && *env) g_other = env;
    const char *only = getenv("VOLT_TEST_ONLY");
    if (only && *only) g_only = only;
    const volt_backend *be = volt__backend_find(g_other);
#ifdef VOLT_HAVE_CUDA
    if (!strcmp(g_other, "cuda")) {   /* compiled in: registered, and no device is not an error */
        CHECK(be != NULL, "the cuda backend is registered");
        if (be && be->device_count() == 0) {
            volt_device *d = NULL;
            char err[256] = "";
            CHECK(volt__device_get("cuda", 0, &d, err, sizeof err) == VOLT_ERR_UNSUPPORTED && !d, "cuda without a device");
            CHECK(strstr(err, "'cuda'") && strstr(err, "no device present") && strstr(err, "\"cpu\""), "%s", err);
            unsetenv("VOLT_ACCELERATOR");
            CHECK_OK(volt__device_get("auto", 0, &d, err, sizeof err));
            CHECK(d && !strcmp(d->be->name, "cpu"), "auto without a GPU is the cpu");
        }
    }
#endif
    if (!be || be->device_count() < 1) {
        printf("%d passed, %d failed\nSKIP: no '%s' device (backend %s)\n", vtest_pass_, vtest_fail_, g_other,
               be ? "registered, 0 devices" : "not compiled in");
        return vtest_fail_ ? 1 : 77;
    }
    printf("comparing '%s' with 'cpu'\n", g_other);
    if (getenv("VOLT_TEST_MEMORY_ONLY")) {   /* the memory table alone (tests/gpu_sim.cmake: a device without VMM) */
        volt_device *dm = dev(g_other);
        if (dm) {
            test_memory(dm);
            test_memory_givable(dm);
        }
        return vtest_finish();
    }
    test_ops();
    if (g_only) {
        CHECK(g_cases > 0, "VOLT_TEST_ONLY='%s' names no op case", g_only);
        printf("%d op cases with '%s' in their name (VOLT_TEST_ONLY)\n", g_cases, g_only);
        return vtest_finish();
    }
    test_errors();
    volt_device *dc = dev("cpu"), *dg = dev(g_other);
    if (dc && dg) {
        test_pm_simple(dc, dg);
        test_pm_convert(dc, dg);
        test_pm_update(dc, dg);
        test_pm_average(dc, dg);
        test_memory(dg);
        test_memory_givable(dg);
    }
    printf("%d op cases\n", g_cases);
    return vtest_finish();
}
