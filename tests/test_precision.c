/* Precision: f32 <-> bf16/f16 conversions (exhaustive for 16 -> 32, reference-checked and
 * edge cases for 32 -> 16), the cast op and 16-bit GEMM operands (gradient checks), 16-bit
 * parameter storage and optimizer states, and the trainer's precision plugins: the grad
 * scaler skipping inf/NaN steps (scale, LR scheduler, resume), the memory report, f32
 * checkpoints, and a small MLP reaching 32-true's accuracy under all five precisions. */
#include <float.h>
#include <unistd.h>
#include "gradcheck.h"
#include "volt/volt.h"
#include "volt/trainer.h"
#include "volt/precision.h"
#include "core/device.h"
#include "core/internal.h"   /* volt_step: linear_keep_bf16_off */
#include "core/cpu/kernels.h"   /* volt__cpu_bf16_native */

/* Device memory (tensors' data and grads, unit buffers, optimizer states) is read and
 * written here only through copies, so the test runs on cpu-strict too. */
static float *host_data(const volt_tensor *t) {   /* malloc'ed copy of t's data, as f32 */
    const int64_t n = volt_tensor_numel(t);
    void *raw = malloc(volt_tensor_bytes(t));
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    volt_tensor_to_host(t, raw);
    volt_convert(f, VOLT_F32, raw, t->dtype, n);
    free(raw);
    return f;
}
static float *host_grad(const volt_tensor *t) {   /* malloc'ed copy of t's f32 grad */
    const int64_t n = volt_tensor_numel(t);
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    volt__dev_d2h(t->device, f, t->grad, sizeof(float) * (size_t)n);
    return f;
}
static void *host_buf(const volt_tensor *any, const void *dev, size_t bytes) {   /* malloc'ed copy */
    void *h = malloc(bytes ? bytes : 1);
    volt__dev_d2h(any->device, h, dev, bytes);
    return h;
}

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- 16 -> 32: every bit pattern ---------------------------------------------------------- */
/* The exact value of an f16 pattern from its fields (double). */
static double f16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static void test_16_to_32_exhaustive(void) {
    static uint16_t src[65536];
    static float arr[65536];
    int bad_bf = 0, bad_h = 0, bad_arr = 0, bad_rt = 0;
    for (uint32_t i = 0; i < 65536; i++) src[i] = (uint16_t)i;
    /* bf16: the value is the f32 whose top half is the pattern */
    volt_bf16_to_f32_array(src, arr, 65536);
    for (uint32_t i = 0; i < 65536; i++) {
        float v = volt_bf16_to_f32((uint16_t)i);
        uint32_t want = i << 16;
        if (fbits(v) != want) bad_bf++;
        if (fbits(arr[i]) != fbits(v)) bad_arr++;
        /* round trip: exact for every non-NaN; NaN stays NaN */
        uint16_t back = volt_f32_to_bf16(v);
        bool nan = isnan(v);
        if (nan ? !(isnan(volt_bf16_to_f32(back)) && (back >> 15) == (i >> 15)) : back != i) bad_rt++;
    }
    CHECK(bad_bf == 0 && bad_arr == 0 && bad_rt == 0, "bf16 -> f32: %d wrong, %d array mismatches, %d round trips", bad_bf, bad_arr, bad_rt);
    bad_arr = bad_rt = 0;
    /* f16: exact value incl. subnormals, +-0, +-inf; NaN quiet with payload kept */
    volt_f16_to_f32_array(src, arr, 65536);
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float v = volt_f16_to_f32(h);
        int e = (h >> 10) & 31, m = h & 1023;
        if (e == 31 && m) {
            uint32_t want = ((uint32_t)(h & 0x8000) << 16) | 0x7fc00000u | ((uint32_t)m << 13);
            if (fbits(v) != want) bad_h++;
        } else if (e == 31) {
            if (!(isinf(v) && (v < 0) == (h >> 15))) bad_h++;
        } else if ((double)v != f16_value(h) || (signbit(v) != 0) != (h >> 15)) {
            bad_h++;
        }
        if (fbits(arr[i]) != fbits(v)) bad_arr++;
        uint16_t back = volt_f32_to_f16(v);
        if (e == 31 && m ? back != (h | 0x0200) : back != h) bad_rt++;   /* NaN comes back quiet */
    }
    CHECK(bad_h == 0 && bad_arr == 0 && bad_rt == 0, "f16 -> f32: %d wrong, %d array mismatches, %d round trips", bad_h, bad_arr, bad_rt);
}

/* ---- 32 -> 16: against a reference (nearest by value, ties to even) ---------------------- */
/* Positive f16 patterns 0..0x7c00 in increasing value; 0x7c00 (inf) stands for 65536, the
 * value IEEE rounds against at the top of the range. */
static double f16_ref_value(uint16_t p) { return p == 0x7c00 ? 65536.0 : f16_value(p); }

static uint16_t ref_f32_to_f16(float x) {
    uint32_t u = fbits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    if (isnan(x)) return (uint16_t)(sign | 0x7e00 | ((u >> 13) & 0x3ff));
    double a = fabs((double)x);
    if (a >= 65536.0) return sign | 0x7c00;
    uint16_t lo = 0, hi = 0x7c00;     /* largest pattern with value <= a */
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (f16_ref_value(mid) <= a) lo = mid; else hi = (uint16_t)(mid - 1);
    }
    if (f16_ref_value(lo) == a) return sign | lo;
    uint16_t up = (uint16_t)(lo + 1);
    double dl = a - f16_ref_value(lo), du = f16_ref_value(up) - a;
    uint16_t r = dl < du ? lo : du < dl ? up : ((lo & 1) ? up : lo);
    return sign | r;
}

static uint16_t ref_f32_to_bf16(float x) {
    uint32_t u = fbits(x);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x40);
    uint32_t lo = u & 0xffff0000u, up = lo + 0x10000u;   /* |up| > |lo|: same sign */
    double a = fabs((double)x), vl = fabs((double)bitsf(lo));
    /* the pattern after the largest finite is inf: its value for rounding is 2^128 */
    double vu = ((up >> 16) & 0x7fff) == 0x7f80 ? ldexp(1, 128) : fabs((double)bitsf(up));
    double dl = a - vl, du = vu - a;
    uint32_t r = dl < du ? lo : du < dl ? up : (((lo >> 16) & 1) ? up : lo);
    return (uint16_t)(r >> 16);
}

static void test_32_to_16(void) {
    /* named cases */
    struct { float x; uint16_t bf, h; const char *what; } cases[] = {
        { 1.0f, 0x3f80, 0x3c00, "one" },
        { 1.0f + 0x1p-8f, 0x3f80, 0x3c04, "tie (bf16) -> even (down); exact in f16" },
        { 1.0f + 3 * 0x1p-8f, 0x3f82, 0x3c0c, "tie (bf16) -> even (up); exact in f16" },
        { 1.0f + 0x1p-11f, 0x3f80, 0x3c00, "tie (f16) -> even (down)" },
        { 1.0f + 3 * 0x1p-11f, 0x3f80, 0x3c02, "tie (f16) -> even (up)" },
        { -2.5f, 0xc020, 0xc100, "negative" },
        { 65504.f, 0x4780, 0x7bff, "f16 max" },
        { 65519.99f, 0x4780, 0x7bff, "just below the f16 overflow tie" },
        { 65520.f, 0x4780, 0x7c00, "f16 overflow tie -> inf" },
        { 1e6f, 0x4974, 0x7c00, "f16 overflow" },
        { -1e6f, 0xc974, 0xfc00, "negative overflow" },
        { FLT_MAX, 0x7f80, 0x7c00, "f32 max rounds to bf16 inf" },
        { 0x1p-24f, 0x3380, 0x0001, "f16 smallest subnormal" },
        { 0x1p-25f, 0x3300, 0x0000, "half the smallest f16 subnormal: tie -> 0" },
        { 3 * 0x1p-26f, 0x3340, 0x0001, "0.75 ulp rounds up" },
        { 3 * 0x1p-25f, 0x33c0, 0x0002, "1.5 ulp: tie -> 2" },
        { 0x1p-14f - 0x1p-25f, 0x3880, 0x0400, "largest subnormal tie rounds to min normal" },
        { 0x1p-15f, 0x3800, 0x0200, "subnormal" },
        { 0x1p-149f, 0x0000, 0x0000, "f32 denormal min -> 0 (bf16: tie to even 0)" },
        { 0x1.8p-133f, 0x0002, 0x0000, "bf16 subnormal (3 * 2^-134)" },
        { -0.0f, 0x8000, 0x8000, "negative zero" },
        { INFINITY, 0x7f80, 0x7c00, "inf" },
        { -INFINITY, 0xff80, 0xfc00, "-inf" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t b = volt_f32_to_bf16(cases[i].x), h = volt_f32_to_f16(cases[i].x);
        CHECK(b == cases[i].bf && h == cases[i].h, "%s (%a): bf16 0x%04x want 0x%04x, f16 0x%04x want 0x%04x",
              cases[i].what, (double)cases[i].x, b, cases[i].bf, h, cases[i].h);
    }
    /* NaN: quiet, sign kept, top payload bits kept */
    float snan = bitsf(0x7f800001u), nnan = bitsf(0xff812345u), qnan = bitsf(0x7fc00000u);
    CHECK(volt_f32_to_bf16(snan) == 0x7fc0 && volt_f32_to_bf16(nnan) == 0xffc1 && volt_f32_to_bf16(qnan) == 0x7fc0,
          "bf16 NaN: %04x %04x %04x", volt_f32_to_bf16(snan), volt_f32_to_bf16(nnan), volt_f32_to_bf16(qnan));
    CHECK(volt_f32_to_f16(snan) == 0x7e00 && volt_f32_to_f16(nnan) == 0xfe09 && volt_f32_to_f16(qnan) == 0x7e00,
          "f16 NaN: %04x %04x %04x", volt_f32_to_f16(snan), volt_f32_to_f16(nnan), volt_f32_to_f16(qnan));
    CHECK(isnan(volt_bf16_to_f32(volt_f32_to_bf16(bitsf(0x7f800001u)))), "bf16 sNaN with low payload stays NaN");

    /* every f32 exponent, sampled mantissas (incl. all ties near each exponent) vs the reference */
    enum { N = 1 << 18 };
    float *xs = malloc(sizeof(float) * N);
    uint16_t *ab = malloc(2 * N), *ah = malloc(2 * N);
    uint64_t r = 0x243F6A8885A308D3ull;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(r >> 32);
        if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u;            /* bf16 ties */
        if (i % 4 == 2) u = (u & 0xffffe000u) | 0x1000u;            /* f16 normal ties */
        if (i % 8 == 3) u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 24) % 45) << 23);   /* near f16 range */
        xs[i] = bitsf(u);
    }
    volt_f32_to_bf16_array(xs, ab, N);
    volt_f32_to_f16_array(xs, ah, N);
    int bad_b = 0, bad_h = 0, bad_arr = 0;
    for (int i = 0; i < N; i++) {
        uint16_t b = volt_f32_to_bf16(xs[i]), h = volt_f32_to_f16(xs[i]);
        if (b != ref_f32_to_bf16(xs[i])) { if (bad_b++ < 3) fprintf(stderr, "bf16(%a): 0x%04x want 0x%04x\n", (double)xs[i], b, ref_f32_to_bf16(xs[i])); }
        if (h != ref_f32_to_f16(xs[i])) { if (bad_h++ < 3) fprintf(stderr, "f16(%a): 0x%04x want 0x%04x\n", (double)xs[i], h, ref_f32_to_f16(xs[i])); }
        if (ab[i] != b || ah[i] != h) bad_arr++;
    }
    CHECK(bad_b == 0 && bad_h == 0 && bad_arr == 0, "32 -> 16 vs reference: bf16 %d, f16 %d wrong, %d array mismatches", bad_b, bad_h, bad_arr);
    /* the f16 neighbourhood densely: every f32 from 2^-26 to 2^17 with stride 97 */
    bad_h = 0;
    for (uint32_t u = 0x32800000u; u < 0x48000000u; u += 97) {
        float x = bitsf(u);
        if (volt_f32_to_f16(x) != ref_f32_to_f16(x) || volt_f32_to_f16(-x) != ref_f32_to_f16(-x)) bad_h++;
    }
    CHECK(bad_h == 0, "f16 dense sweep: %d wrong", bad_h);
    /* volt_convert between all pairs agrees with the composition through f32 */
    uint16_t hb[256], bh[256];
    uint16_t hs[256], bs[256];
    for (int i = 0; i < 256; i++) { hs[i] = (uint16_t)(i * 251); bs[i] = (uint16_t)(i * 257 + 3); }
    CHECK_OK(volt_convert(hb, VOLT_BF16, hs, VOLT_F16, 256));
    CHECK_OK(volt_convert(bh, VOLT_F16, bs, VOLT_BF16, 256));
    int bad_c = 0;
    for (int i = 0; i < 256; i++) {
        if (hb[i] != volt_f32_to_bf16(volt_f16_to_f32(hs[i]))) bad_c++;
        if (bh[i] != volt_f32_to_f16(volt_bf16_to_f32(bs[i]))) bad_c++;
    }
    CHECK(bad_c == 0, "bf16 <-> f16 convert: %d wrong", bad_c);
    CHECK(volt_convert(hb, VOLT_I32, hs, VOLT_F16, 1) == VOLT_ERR_DTYPE, "convert rejects ints");
    free(xs); free(ab); free(ah);
}

/* ---- the cast op and 16-bit GEMM operands ------------------------------------------------ */
/* Inputs on a grid of 1/64 in [-2, 2): exact in bf16 and f16, and with eps = 1/64 the
 * perturbed inputs stay exact, so finite differences see the op, not the rounding. */
static float *grid(int64_t n, int seed) {
    float *x = malloc(sizeof(float) * (size_t)n);
    uint64_t r = 88172645463325252ull + (uint64_t)seed;
    for (int64_t i = 0; i < n; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        x[i] = (float)((int)(r % 256) - 128) / 64.f;
    }
    return x;
}

static volt_dtype g_dt;
static volt_tensor *f_cast_tanh(volt_step *s, volt_tensor **in, void *ctx) {
    /* cast to 16 bits, then an f32-only op: volt__op inserts the cast back to f32 */
    return volt_tanh(s, volt_cast(s, in[0], g_dt));
}
static volt_tensor *f_cast_chain(volt_step *s, volt_tensor **in, void *ctx) {
    volt_tensor *h = volt_cast(s, in[0], g_dt);
    volt_tensor *o = volt_cast(s, volt_cast(s, h, g_dt == VOLT_BF16 ? VOLT_F16 : VOLT_BF16), VOLT_F32);
    return volt_mul(s, o, in[1]);
}
static volt_tensor *f_linear16(volt_step *s, volt_tensor **in, void *ctx) {
    volt_step_set_compute_dtype(s, g_dt);
    return volt_linear(s, in[0], in[1], in[2]);
}
static volt_tensor *f_matmul16(volt_step *s, volt_tensor **in, void *ctx) {
    volt_step_set_compute_dtype(s, g_dt);
    return volt_matmul(s, in[0], in[1]);
}

/* Gradients through 16-bit casts: gradcheck without a reference (f32 differences) on inputs
 * on the 16-bit grid, stepped along it (1/64). The rounding bounds what this can see, hence
 * the wider tolerances; the f32 ops themselves are checked against double references to
 * 2e-5 in test_ops_*. */
static void test_cast_gradcheck(void) {
    double eps0 = gc_eps, rtol0 = gc_rtol, atol0 = gc_atol;
    gc_eps = 1.0 / 64;
    gc_rtol = 1e-2;
    gc_atol = 1e-3;
    volt_dtype dts[2] = { VOLT_BF16, VOLT_F16 };
    for (int d = 0; d < 2; d++) {
        g_dt = dts[d];
        char name[64];
        float *x = grid(7 * 13, 1), *w = grid(5 * 13, 2), *b = grid(5, 3), *a3 = grid(2 * 3 * 4, 4), *b3 = grid(2 * 4 * 5, 5);
        float *y = grid(7 * 13, 6);
        gc_input in1[] = { { .dt = VOLT_F32, .shape = VOLT_SHAPE(7, 13), .diff = true, .data = x } };
        snprintf(name, sizeof name, "cast->%s->tanh", volt_dtype_name(g_dt));
        gradcheck(name, f_cast_tanh, NULL, NULL, 1, in1);
        gc_input in2[] = { { .dt = VOLT_F32, .shape = VOLT_SHAPE(7, 13), .diff = true, .data = x },
                           { .dt = VOLT_F32, .shape = VOLT_SHAPE(7, 13), .diff = true, .data = y } };
        snprintf(name, sizeof name, "cast chain via %s", volt_dtype_name(g_dt));
        gradcheck(name, f_cast_chain, NULL, NULL, 2, in2);
        gc_input in3[] = { { .dt = VOLT_F32, .shape = VOLT_SHAPE(7, 13), .diff = true, .data = x },
                           { .dt = VOLT_F32, .shape = VOLT_SHAPE(5, 13), .diff = true, .data = w },
                           { .dt = VOLT_F32, .shape = VOLT_SHAPE(5), .diff = true, .data = b } };
        /* the backward GEMMs read the upstream gradient (here random, not on the grid) rounded
         * to 16 bits, as a GPU does: a few percent; test_cast_values checks it exactly */
        gc_rtol = 5e-2;
        gc_atol = 2e-2;
        snprintf(name, sizeof name, "linear (%s compute)", volt_dtype_name(g_dt));
        gradcheck(name, f_linear16, NULL, NULL, 3, in3);
        gc_input in4[] = { { .dt = VOLT_F32, .shape = VOLT_SHAPE(2, 3, 4), .diff = true, .data = a3 },
                           { .dt = VOLT_F32, .shape = VOLT_SHAPE(2, 4, 5), .diff = true, .data = b3 } };
        snprintf(name, sizeof name, "batched matmul (%s compute)", volt_dtype_name(g_dt));
        gradcheck(name, f_matmul16, NULL, NULL, 2, in4);
        gc_rtol = 1e-2;
        gc_atol = 1e-3;
        free(x); free(w); free(b); free(a3); free(b3); free(y);
    }
    gc_eps = eps0;
    gc_rtol = rtol0;
    gc_atol = atol0;
}

static float rnd(float v, volt_dtype dt) {
    if (dt == VOLT_BF16) return volt_bf16_to_f32(volt_f32_to_bf16(v));
    if (dt == VOLT_F16) return volt_f16_to_f32(volt_f32_to_f16(v));
    return v;
}

/* Forward values: 16-bit compute = the f32 product of rounded operands; a 16-bit tensor
 * into an f32-only op; errors. */
static void test_cast_values(void) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = 1 << 20;
    volt_step *s;
    CHECK_OK(volt_step_create(&cfg, &s));
    enum { R = 9, I = 33, O = 7 };
    float x[R * I], w[O * I];
    for (int i = 0; i < R * I; i++) x[i] = sinf((float)i * 0.37f) * 3.f;
    for (int i = 0; i < O * I; i++) w[i] = cosf((float)i * 0.11f);
    volt_dtype dts[3] = { VOLT_F32, VOLT_BF16, VOLT_F16 };
    float dy[R * O];
    for (int i = 0; i < R * O; i++) dy[i] = sinf((float)i * 1.3f + 0.2f);
    for (int d = 0; d < 3; d++) {
        CHECK_OK(volt_step_begin(s, true, 0));
        CHECK_OK(volt_step_set_compute_dtype(s, dts[d]));
        volt_tensor *xt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(R, I), x));
        volt_tensor *wt = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(O, I), w));
        volt_tensor *y = volt_linear(s, xt, wt, NULL);
        CHECK(y && y->dtype == VOLT_F32, "linear output f32 (%s)", volt_step_errmsg(s));
        double maxerr = 0;
        float *yh = y ? host_data(y) : NULL;
        for (int r = 0; y && r < R; r++)
            for (int o = 0; o < O; o++) {
                double acc = 0;
                for (int k = 0; k < I; k++) {
                    float xr = x[r * I + k], wr = w[o * I + k];
                    if (dts[d] == VOLT_BF16) { xr = volt_bf16_to_f32(volt_f32_to_bf16(xr)); wr = volt_bf16_to_f32(volt_f32_to_bf16(wr)); }
                    if (dts[d] == VOLT_F16) { xr = volt_f16_to_f32(volt_f32_to_f16(xr)); wr = volt_f16_to_f32(volt_f32_to_f16(wr)); }
                    acc += (double)xr * wr;
                }
                double e = fabs(acc - yh[r * O + o]);
                if (e > maxerr) maxerr = e;
            }
        CHECK(maxerr < 1e-4, "linear with %s operands: max error %g vs rounded-operand reference", volt_dtype_name(dts[d]), maxerr);
        /* backward: dx = round(dy) round(w), dw = round(dy)^T round(x), accumulated in f32 */
        free(yh);
        CHECK_OK(volt_step_backward_grad(s, y, dy));
        double ex = 0, ew = 0;
        float *xg = host_grad(xt), *wg = host_grad(wt);
        for (int r = 0; r < R; r++)
            for (int k = 0; k < I; k++) {
                double acc = 0;
                for (int o = 0; o < O; o++) acc += (double)rnd(dy[r * O + o], dts[d]) * rnd(w[o * I + k], dts[d]);
                ex = fmax(ex, fabs(acc - xg[r * I + k]));
            }
        for (int o = 0; o < O; o++)
            for (int k = 0; k < I; k++) {
                double acc = 0;
                for (int r = 0; r < R; r++) acc += (double)rnd(dy[r * O + o], dts[d]) * rnd(x[r * I + k], dts[d]);
                ew = fmax(ew, fabs(acc - wg[o * I + k]));
            }
        free(xg);
        free(wg);
        CHECK(ex < 1e-4 && ew < 1e-4, "linear backward with %s operands: dx error %g, dw error %g", volt_dtype_name(dts[d]), ex, ew);
        volt_step_end(s);
    }
    CHECK_OK(volt_step_set_compute_dtype(s, VOLT_F32));
    CHECK(volt_step_set_compute_dtype(s, VOLT_I32) == VOLT_ERR_DTYPE, "compute dtype must be a float");
    /* a 16-bit tensor into relu: computed in f32, grads back to the f32 source */
    CHECK_OK(volt_step_begin(s, true, 0));
    float v[4] = { -1.5f, 0.25f, 3.0f, -0.f };
    volt_tensor *t = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(4), v));
    volt_tensor *h = volt_cast(s, t, VOLT_BF16);
    CHECK(h && h->dtype == VOLT_BF16 && volt_cast(s, h, VOLT_BF16) == h && volt_cast(s, t, VOLT_F32) == t, "cast to the same dtype is the identity");
    volt_tensor *rl = volt_relu(s, h);
    float *rlh = rl ? host_data(rl) : NULL;
    CHECK(rl && rl->dtype == VOLT_F32 && rlh[2] == 3.0f && rlh[0] == 0.f, "relu of bf16");
    free(rlh);
    float g[4] = { 1, 2, 3, 4 };
    CHECK_OK(volt_step_backward_grad(s, rl, g));
    float *tg = t->grad ? host_grad(t) : NULL;
    CHECK(tg && tg[0] == 0 && tg[1] == 2 && tg[2] == 3, "grad through the casts");
    free(tg);
    CHECK(volt_cast(s, volt_tensor_new(s, VOLT_I32, VOLT_SHAPE(2)), VOLT_BF16) == NULL && volt_step_status(s) == VOLT_ERR_DTYPE, "cast of ints rejected");
    volt_step_end(s);
    CHECK_OK(volt_step_begin(s, false, 0));
    CHECK(volt_cast(s, volt_tensor_new(s, VOLT_F32, VOLT_SHAPE(2)), VOLT_U8) == NULL && volt_step_status(s) == VOLT_ERR_DTYPE, "cast to u8 rejected");
    volt_step_end(s);
    volt_step_destroy(s);
}

/* Attention with 16-bit compute = f32 attention of the rounded q, k, v (and dO), bitwise;
 * with native bf16 tiles close to it (P and dS rounded as well). */
static void test_attention16(void) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = 1 << 20;
    volt_step *s;
    CHECK_OK(volt_step_create(&cfg, &s));
    enum { B = 2, H = 2, T = 19, D = 8, N = B * H * T * D };
    static float q[N], k[N], v[N], dout[N], rq[N], rk[N], rv[N], rdo[N];
    for (int i = 0; i < N; i++) {
        q[i] = sinf(i * 0.3f); k[i] = cosf(i * 0.7f) * 1.5f; v[i] = sinf(i * 1.1f + 1.f); dout[i] = cosf(i * 0.13f);
    }
    volt_dtype dts[2] = { VOLT_BF16, VOLT_F16 };
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < N; i++) {
            rq[i] = rnd(q[i], dts[d]); rk[i] = rnd(k[i], dts[d]); rv[i] = rnd(v[i], dts[d]); rdo[i] = rnd(dout[i], dts[d]);
        }
        float *out[2], *grads[2][3];
        for (int pass = 0; pass < 2; pass++) {   /* 0: 16-bit compute on the originals, 1: f32 on rounded copies */
            CHECK_OK(volt_step_begin(s, true, 0));
            CHECK_OK(volt_step_set_compute_dtype(s, pass ? VOLT_F32 : dts[d]));
            volt_tensor *t[3];
            float *src[2][3] = { { q, k, v }, { rq, rk, rv } };
            for (int j = 0; j < 3; j++)
                t[j] = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(B, H, T, D), src[pass][j]));
            volt_tensor *o = volt_attention(s, t[0], t[1], t[2], NULL, true);
            CHECK(o != NULL, "attention: %s", volt_step_errmsg(s));
            out[pass] = malloc(sizeof(float) * N);
            if (o) volt_tensor_to_host(o, out[pass]);
            CHECK_OK(volt_step_backward_grad(s, o, pass ? rdo : dout));
            for (int j = 0; j < 3; j++) {
                grads[pass][j] = host_grad(t[j]);
            }
            volt_step_end(s);
        }
        bool same = !memcmp(out[0], out[1], sizeof(float) * N);
        for (int j = 0; j < 3; j++) same &= !memcmp(grads[0][j], grads[1][j], sizeof(float) * N);
        if (dts[d] == VOLT_BF16 && volt__cpu_bf16_native()) {
            /* native bf16 tiles (core/cpu/attention.c): P and dS are rounded to bf16 too, so
             * not the emulation's bits, but close to them */
            double e = 0;
            for (int i = 0; i < N; i++) {
                double x = fabs((double)out[0][i] - out[1][i]);
                for (int j = 0; j < 3; j++) x = fmax(x, fabs((double)grads[0][j][i] - grads[1][j][i]));
                e = fmax(e, x);
            }
            CHECK(!same && e < 0.05, "native bf16 attention: max difference to the emulation %g (bitwise same: %d)", e, same);
        } else
            CHECK(same, "attention with %s compute = f32 attention of rounded q, k, v, dO", volt_dtype_name(dts[d]));
        for (int pass = 0; pass < 2; pass++) {
            free(out[pass]);
            for (int j = 0; j < 3; j++) free(grads[pass][j]);
        }
    }
    volt_step_destroy(s);
}

/* ---- 16-bit parameter storage and optimizer -------------------------------------------- */
static volt_params *make_store(volt_tensor **w, volt_tensor **b) {
    volt_params_config pc;
    volt_params_config_init(&pc);
    volt_params *ps;
    CHECK_OK(volt_params_create(&pc, &ps));
    CHECK_OK(volt_params_unit(ps, "fc"));
    CHECK_OK(volt_param_new(ps, "fc.weight", VOLT_SHAPE(37, 29), VOLT_INIT_TORCH_LINEAR, w));
    CHECK_OK(volt_param_new(ps, "fc.bias", VOLT_SHAPE(37), VOLT_INIT_UNIFORM(-0.5f, 0.5f), b));
    CHECK_OK(volt_params_finalize(ps));
    return ps;
}

static void fill_grads(volt_params *ps, int step) {
    for (int u = 0; u < volt_params_unit_count(ps); u++) {
        volt_unit *un = volt_params_unit_at(ps, u);
        float *g = malloc(sizeof(float) * (size_t)volt_unit_numel(un));
        for (int64_t k = 0; k < volt_unit_numel(un); k++) g[k] = 0.01f * sinf((float)(k * 7 + step * 3));
        volt__dev_h2d(volt_unit_param(un, 0)->device, volt_unit_grad(un), g, sizeof(float) * (size_t)volt_unit_numel(un));
        free(g);
    }
}

/* Round n device floats at x (on any's device) to dt and back, through a host copy. */
static void round_f32(const volt_tensor *any, float *x, int64_t n, volt_dtype dt) {
    float *h = host_buf(any, x, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        h[i] = dt == VOLT_BF16 ? volt_bf16_to_f32(volt_f32_to_bf16(h[i])) : volt_f16_to_f32(volt_f32_to_f16(h[i]));
    volt__dev_h2d(any->device, x, h, sizeof(float) * (size_t)n);
    free(h);
}

static void test_param_storage(void) {
    volt_dtype dts[2] = { VOLT_BF16, VOLT_F16 };
    for (int d = 0; d < 2; d++) {
        volt_dtype dt = dts[d];
        volt_tensor *w, *b, *rw, *rb;
        volt_params *ps = make_store(&w, &b), *ref = make_store(&rw, &rb);
        const char *acc = getenv("VOLT_ACCELERATOR");
        if (d == 0) printf("device: %s\n", w->device->be->name);
        CHECK(!acc || !*acc || !strcmp(acc, w->device->be->name), "store on %s, asked for %s", w->device->be->name, acc);
        int64_t bytes32 = volt_params_value_bytes(ps);
        int64_t nw = volt_tensor_numel(w);
        float *w0 = host_data(w);
        CHECK_OK(volt_params_convert(ps, dt));
        CHECK(volt_params_dtype(ps) == dt && w->dtype == dt && b->dtype == dt && volt_unit_data(w->unit) == NULL &&
              volt_unit_values(w->unit) == w->data, "store converted to %s", volt_dtype_name(dt));
        CHECK(volt_params_value_bytes(ps) * 2 == bytes32 && volt_params_grad_bytes(ps) == bytes32, "value bytes halve, grads stay f32");
        int bad = 0;
        uint16_t *wh = host_buf(w, w->data, 2 * (size_t)nw);
        for (int64_t i = 0; i < nw; i++) {
            uint16_t h = wh[i];
            if (h != (dt == VOLT_BF16 ? volt_f32_to_bf16(w0[i]) : volt_f32_to_f16(w0[i]))) bad++;
        }
        free(wh);
        CHECK(bad == 0, "values rounded to nearest even (%d wrong)", bad);
        /* optimizer on 16-bit params (16-bit states too): equals f32 math rounded on store */
        round_f32(rw, rw->data, volt_unit_numel(rw->unit), dt);
        volt_optimizer_config oc;
        volt_optimizer_config_init(&oc);
        oc.kind = VOLT_OPTIM_ADAMW;
        oc.lr = 3e-3f;
        oc.weight_decay = 0.01f;
        oc.state_dtype = dt;
        volt_optimizer *o16, *o32;
        CHECK_OK(volt_optimizer_create(&oc, ps, &o16));
        oc.state_dtype = VOLT_F32;
        CHECK_OK(volt_optimizer_create(&oc, ref, &o32));
        CHECK(volt_optimizer_state(o16, 0, 0, NULL, NULL) == NULL && volt_optimizer_state_raw(o16, 0, 0, NULL, NULL) != NULL &&
              volt_optimizer_state_dtype(o16) == dt && volt_optimizer_state_bytes(o16) * 2 == volt_optimizer_state_bytes(o32),
              "16-bit optimizer states");
        for (int step = 0; step < 3; step++) {
            fill_grads(ps, step);
            fill_grads(ref, step);
            CHECK_OK(volt_optimizer_step(o16));
            CHECK_OK(volt_optimizer_step(o32));
            /* the reference: f32 step, then round params and states as the 16-bit store does */
            round_f32(rw, rw->data, volt_unit_numel(rw->unit), dt);
            for (int k = 0; k < 2; k++) round_f32(rw, volt_optimizer_state(o32, 0, k, NULL, NULL), volt_unit_numel(rw->unit), dt);
        }
        bad = 0;
        const int64_t nu = volt_unit_numel(w->unit);
        uint16_t *vh = host_buf(w, volt_unit_values(w->unit), 2 * (size_t)nu);
        float *rh = host_buf(rw, volt_unit_data(rw->unit), sizeof(float) * (size_t)nu);
        for (int64_t i = 0; i < nu; i++) {
            float got = dt == VOLT_BF16 ? volt_bf16_to_f32(vh[i]) : volt_f16_to_f32(vh[i]);
            if (fbits(got) != fbits(rh[i])) bad++;
        }
        CHECK(bad == 0, "%s AdamW: %d params differ from f32 math rounded on store", volt_dtype_name(dt), bad);
        CHECK(fabsf(dt == VOLT_BF16 ? volt_bf16_to_f32(vh[0]) : volt_f16_to_f32(vh[0]) - w0[0]) > 0, "the params moved");
        /* back to f32: exact */
        uint16_t first = vh[5];
        free(vh);
        free(rh);
        CHECK_OK(volt_params_convert(ps, VOLT_F32));
        float *w32 = host_data(w);
        CHECK(w->dtype == VOLT_F32 && volt_unit_data(w->unit) != NULL &&
              w32[5] == (dt == VOLT_BF16 ? volt_bf16_to_f32(first) : volt_f16_to_f32(first)), "back to f32");
        free(w32);
        CHECK(volt_params_convert(ps, VOLT_I32) == VOLT_ERR_DTYPE, "int storage rejected");
        volt_optimizer_destroy(o16);
        volt_optimizer_destroy(o32);
        volt_params_destroy(ps);
        volt_params_destroy(ref);
        free(w0);
    }
}

/* ---- the trainer ---------------------------------------------------------------------------- */
enum { NTRAIN = 2048, NVAL = 2048, DIN = 16, NCLS = 8, HID = 64 };
static float Xtr[NTRAIN * DIN], Xva[NVAL * DIN];
static int64_t Ytr[NTRAIN], Yva[NVAL];

/* Gaussian blobs: class centres on a scaled random code, unit noise. */
static void make_blobs(void) {
    float centre[NCLS][DIN];
    uint64_t r = 12345;
    for (int c = 0; c < NCLS; c++)
        for (int k = 0; k < DIN; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            centre[c][k] = ((r >> 40) & 1) ? 0.7f : -0.7f;
        }
    for (int set = 0; set < 2; set++) {
        float *X = set ? Xva : Xtr;
        int64_t *Y = set ? Yva : Ytr;
        int n = set ? NVAL : NTRAIN;
        for (int i = 0; i < n; i++) {
            int c = (i * 5 + i / 3) % NCLS;
            Y[i] = c;
            for (int k = 0; k < DIN; k++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                double u1 = ((double)(r >> 11) + 1) / 9007199254740993.0;
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                double u2 = (double)(r >> 11) / 9007199254740992.0;
                X[i * DIN + k] = centre[c][k] + (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
            }
        }
    }
}

static volt_dataset *blobs(bool val) {
    volt_field f[2] = { { "x", VOLT_F32, VOLT_SHAPE(DIN) }, { "y", VOLT_I64, VOLT_SCALAR } };
    const void *d[2] = { val ? Xva : Xtr, val ? Yva : Ytr };
    volt_dataset *ds = NULL;
    CHECK_OK(volt_dataset_from_arrays(2, f, d, val ? NVAL : NTRAIN, &ds));
    return ds;
}

static volt_loader *loader(volt_dataset *ds, int64_t bs, bool shuffle) { return vtest_loader(ds, bs, shuffle); }

typedef struct {
    volt_tensor *w1, *b1, *w2, *b2;
    const int *overflow_at;     /* batch indices whose loss is multiplied by 1e38 (16-mixed tests) */
    int n_overflow;
    float lr;
    bool sched;
} mlp;

static volt_status mlp_setup(void *self, volt_params *ps) {
    mlp *m = self;
    VOLT_TRY(volt_params_unit(ps, "fc1"));
    VOLT_TRY(volt_param_new(ps, "fc1.weight", VOLT_SHAPE(HID, DIN), VOLT_INIT_TORCH_LINEAR, &m->w1));
    VOLT_TRY(volt_param_new(ps, "fc1.bias", VOLT_SHAPE(HID), VOLT_INIT_UNIFORM(-0.25f, 0.25f), &m->b1));
    VOLT_TRY(volt_params_unit(ps, "fc2"));
    VOLT_TRY(volt_param_new(ps, "fc2.weight", VOLT_SHAPE(NCLS, HID), VOLT_INIT_TORCH_LINEAR, &m->w2));
    return volt_param_new(ps, "fc2.bias", VOLT_SHAPE(NCLS), VOLT_INIT_UNIFORM(-0.125f, 0.125f), &m->b2);
}

static volt_tensor *mlp_fwd(mlp *m, volt_step *s, const volt_batch *b) {
    return volt_linear(s, volt_relu(s, volt_linear(s, volt_batch_x(b), m->w1, m->b1)), m->w2, m->b2);
}

static volt_status mlp_train(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    mlp *m = self;
    volt_tensor *loss = volt_cross_entropy(s, mlp_fwd(m, s, b), volt_batch_y(b));
    for (int k = 0; k < m->n_overflow; k++)
        if (m->overflow_at[k] == i) loss = volt_scale(s, loss, 1e38f);   /* finite; inf once scaled */
    return volt_step_set_loss(s, loss);
}

static volt_status mlp_val(void *self, volt_step *s, const volt_batch *b, int64_t i) {
    mlp *m = self;
    volt_tensor *logits = mlp_fwd(m, s, b);
    volt_log(s, "val_loss", volt_cross_entropy(s, logits, volt_batch_y(b)), 0);
    return volt_log(s, "val_acc", volt_accuracy(s, logits, volt_batch_y(b)), 0);
}

static volt_status mlp_opt(void *self, volt_optim_setup *o) {
    mlp *m = self;
    o->optimizer.kind = VOLT_OPTIM_ADAMW;
    o->optimizer.lr = m->lr > 0 ? m->lr : 3e-3f;
    o->optimizer.weight_decay = 0.01f;
    if (m->sched) {
        o->use_scheduler = true;
        o->scheduler.kind = VOLT_SCHED_LINEAR;
        o->scheduler.warmup_steps = 3;
        o->scheduler.total_steps = 400;
    }
    return VOLT_OK;
}

static const volt_module_ops mlp_ops = {
    .version = VOLT_MODULE_OPS_VERSION, .name = "mlp", .setup = mlp_setup, .configure_optimizers = mlp_opt,
    .training_step = mlp_train, .validation_step = mlp_val,
};

static volt_trainer *trainer(const char *precision, int64_t epochs, int64_t max_steps) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.precision = precision;
    c.max_epochs = epochs;
    c.max_steps = max_steps;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = false;
    c.num_sanity_val_steps = 0;
    c.default_root_dir = vtest_tmpdir();
    c.seed = 7;
    volt_trainer *t = NULL;
    volt_status st = volt_trainer_create(&c, &t);
    CHECK(st == VOLT_OK, "trainer '%s': %s", precision, t ? volt_trainer_errmsg(t) : "");
    return t;
}

static void test_precision_names(void) {
    const char *names[] = { "32-true", "32", "16-mixed", "16", "bf16-mixed", "bf16", "bf16-true", "16-true" };
    const char *canon[] = { "32-true", "32-true", "16-mixed", "16-mixed", "bf16-mixed", "bf16-mixed", "bf16-true", "16-true" };
    for (int i = 0; i < 8; i++) {
        volt_precision_info in;
        CHECK(volt_precision_lookup(names[i], &in) == VOLT_OK && !strcmp(in.name, canon[i]), "lookup %s", names[i]);
        volt_trainer *t = trainer(names[i], 1, -1);
        CHECK(t && !strcmp(volt_trainer_get_config(t)->precision, names[i]), "create with %s", names[i]);
        volt_trainer_destroy(t);
    }
    volt_precision_info in;
    CHECK_OK(volt_precision_lookup("bf16-true", &in));
    CHECK(in.compute_dtype == VOLT_BF16 && in.param_dtype == VOLT_BF16 && !in.master_weights && !in.grad_scaling, "bf16-true info");
    CHECK_OK(volt_precision_lookup("16-mixed", &in));
    CHECK(in.compute_dtype == VOLT_F16 && in.param_dtype == VOLT_F32 && in.master_weights && in.grad_scaling, "16-mixed info");
    CHECK(volt_precision_lookup("fp8", NULL) == VOLT_ERR_UNSUPPORTED, "unknown precision");
    /* bad settings */
    volt_trainer_config c;
    volt_trainer *t = NULL;
    volt_trainer_config_init(&c);
    c.precision = "bf17";
    CHECK(volt_trainer_create(&c, &t) == VOLT_ERR_UNSUPPORTED && strstr(volt_trainer_errmsg(t), "bf17") &&
          strstr(volt_trainer_errmsg(t), "bf16-true"), "bad name: %s", t ? volt_trainer_errmsg(t) : "");
    volt_trainer_destroy(t);
    volt_trainer_config_init(&c);
    c.precision = "16-mixed";
    c.grad_scaler_backoff_factor = 1.5f;
    CHECK(volt_trainer_create(&c, &t) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "backoff"), "bad backoff");
    volt_trainer_destroy(t);
    volt_trainer_config_init(&c);
    c.precision = "16-mixed";
    c.grad_scaler_growth_interval = 0;
    CHECK(volt_trainer_create(&c, &t) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "growth_interval"), "bad interval");
    volt_trainer_destroy(t);
    volt_trainer_config_init(&c);
    c.optimizer_dtype = "f8";
    CHECK(volt_trainer_create(&c, &t) == VOLT_ERR_INVALID_ARG && strstr(volt_trainer_errmsg(t), "f8"), "bad optimizer dtype");
    volt_trainer_destroy(t);
}

/* ---- grad scaler: forced overflow -------------------------------------------------------- */
typedef struct {
    int n;
    float scale[64];
    int64_t gstep[64], tracker[64], sched[64];
    float w_first[64];       /* fc1.weight[0] after the batch (as f32) */
} trace;

static volt_status trace_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    trace *tr = self;
    if (tr->n < 64) {
        tr->scale[tr->n] = volt_trainer_grad_scale(t);
        tr->gstep[tr->n] = volt_trainer_global_step(t);
        tr->tracker[tr->n] = volt_trainer_grad_scaler_growth_tracker(t);
        tr->sched[tr->n] = volt_trainer_scheduler(t) ? volt_scheduler_last_step(volt_trainer_scheduler(t)) : -1;
        float *wf = host_data(volt_params_at(volt_trainer_params(t), 0));   /* a test read: one copy */
        tr->w_first[tr->n] = wf[0];
        free(wf);
        tr->n++;
    }
    return VOLT_OK;
}
static const volt_callback_ops trace_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Trace",
                                             .on_train_batch_end = trace_batch_end };

static const int k_overflow[] = { 2, 7, 8, 15 };
enum { OVF_BATCHES = 20, OVF_BS = 16 };

static volt_trainer *scaler_trainer(const char *precision) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.precision = precision;
    c.max_epochs = 1;
    c.limit_train_batches = OVF_BATCHES;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = false;
    c.num_sanity_val_steps = 0;
    c.default_root_dir = vtest_tmpdir();
    c.seed = 11;
    c.grad_scaler_init_scale = 256.f;
    c.grad_scaler_growth_interval = 3;     /* short, to see growth */
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    return t;
}

static void test_scaler_overflow(volt_dataset *ds) {
    mlp m = { .overflow_at = k_overflow, .n_overflow = 4, .sched = true };
    volt_trainer *t = scaler_trainer("16-mixed");
    trace tr = { 0 };
    CHECK_OK(volt_trainer_add_callback(t, &trace_ops, &tr));
    volt_loader *l = loader(ds, OVF_BS, false);
    CHECK(volt_trainer_fit(t, &mlp_ops, &m, l, NULL, NULL) == VOLT_OK, "fit: %s", volt_trainer_errmsg(t));
    CHECK(tr.n == OVF_BATCHES, "%d batches traced", tr.n);
    /* the GradScaler rule, simulated */
    float scale = 256.f;
    int64_t tracker = 0, taken = 0;
    int bad = 0;
    for (int i = 0; i < tr.n; i++) {
        bool ovf = false;
        for (int k = 0; k < 4; k++) ovf |= k_overflow[k] == i;
        if (ovf) { scale *= 0.5f; tracker = 0; }
        else { taken++; if (++tracker == 3) { scale *= 2.f; tracker = 0; } }
        if (tr.scale[i] != scale || tr.tracker[i] != tracker || tr.gstep[i] != taken || tr.sched[i] != taken) {
            if (bad++ < 4)
                fprintf(stderr, "batch %d%s: scale %g (want %g) tracker %lld (%lld) global_step %lld sched %lld (want %lld)\n", i,
                        ovf ? " (overflow)" : "", (double)tr.scale[i], (double)scale, (long long)tr.tracker[i], (long long)tracker,
                        (long long)tr.gstep[i], (long long)tr.sched[i], (long long)taken);
        }
        if (ovf && i > 0 && tr.w_first[i] != tr.w_first[i - 1]) bad++;          /* skipped: weights unchanged */
        if (!ovf && i > 0 && tr.w_first[i] == tr.w_first[i - 1]) bad++;         /* taken: they move */
    }
    CHECK(bad == 0, "grad scaler trace: %d mismatches", bad);
    CHECK(volt_trainer_skipped_steps(t) == 4 && volt_trainer_global_step(t) == OVF_BATCHES - 4 &&
          volt_optimizer_step_count(volt_trainer_optimizer(t)) == OVF_BATCHES - 4,
          "skipped %lld, global_step %lld, optimizer steps %lld", (long long)volt_trainer_skipped_steps(t),
          (long long)volt_trainer_global_step(t), (long long)volt_optimizer_step_count(volt_trainer_optimizer(t)));
    volt_scheduler *sc = volt_trainer_scheduler(t);
    CHECK(sc && volt_scheduler_last_step(sc) == OVF_BATCHES - 4 &&
          volt_optimizer_lr(volt_trainer_optimizer(t)) == volt_scheduler_lr_at(volt_scheduler_get_config(sc), 3e-3f, OVF_BATCHES - 4),
          "the LR scheduler counts only the steps taken");
    volt_trainer_destroy(t);
    /* bf16-mixed has no scaler: the same module's huge loss is just a huge (finite) step */
    volt_trainer *tb = scaler_trainer("bf16-mixed");
    mlp mb = { .sched = true };
    CHECK_OK(volt_trainer_fit(tb, &mlp_ops, &mb, l, NULL, NULL));
    CHECK(volt_trainer_grad_scale(tb) == 1.f && volt_trainer_skipped_steps(tb) == 0 && volt_trainer_global_step(tb) == OVF_BATCHES,
          "bf16-mixed: no scaler");
    volt_trainer_destroy(tb);
    volt_loader_destroy(l);
}

/* ---- exact resume under each precision (16-mixed: scale and tracker restored) ---------------- */
typedef struct { int64_t at; const char *path; } stopper;
static volt_status stop_batch_end(void *self, volt_trainer *t, const volt_batch *b, int64_t i) {
    stopper *s = self;
    if (i != s->at) return VOLT_OK;
    volt_status st = volt_trainer_save_checkpoint(t, s->path);
    return st < 0 ? st : VOLT_STOP;
}
static const volt_callback_ops stopper_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "Stopper",
                                               .on_train_batch_end = stop_batch_end };

typedef struct { float scale; int64_t tracker, skipped; bool seen; } at_start;
static volt_status record_start(void *self, volt_trainer *t) {
    at_start *a = self;
    a->scale = volt_trainer_grad_scale(t);
    a->tracker = volt_trainer_grad_scaler_growth_tracker(t);
    a->skipped = volt_trainer_skipped_steps(t);
    a->seen = true;
    return VOLT_OK;
}
static const volt_callback_ops start_ops = { .version = VOLT_CALLBACK_OPS_VERSION, .name = "AtStart",
                                             .on_train_start = record_start };

/* All parameter values as f32 (whatever the storage dtype). */
static float *values(volt_trainer *t, int64_t *n) {
    volt_params *ps = volt_trainer_params(t);
    *n = volt_params_numel(ps);
    float *out = malloc(sizeof(float) * (size_t)*n), *o = out;
    for (int i = 0; i < volt_params_count(ps); i++) {
        volt_tensor *p = volt_params_at(ps, i);
        float *h = host_data(p);
        memcpy(o, h, sizeof(float) * (size_t)volt_tensor_numel(p));
        free(h);
        o += volt_tensor_numel(p);
    }
    return out;
}

static void test_resume(volt_dataset *ds, const char *precision) {
    char path[600];
    snprintf(path, sizeof path, "%s/resume_%s.safetensors", vtest_tmpdir(), precision);
    volt_loader *l = loader(ds, OVF_BS, true);
    const int stop_at = 9;     /* after the overflows at 7 and 8: scale 64, tracker 1 */
    mlp ma = { .overflow_at = k_overflow, .n_overflow = 4, .sched = true };
    volt_trainer *ta = scaler_trainer(precision);
    CHECK_OK(volt_trainer_fit(ta, &mlp_ops, &ma, l, NULL, NULL));
    mlp mb = ma;
    volt_trainer *tb = scaler_trainer(precision);
    stopper sp = { stop_at, path };
    CHECK_OK(volt_trainer_add_callback(tb, &stopper_ops, &sp));
    CHECK_OK(volt_trainer_fit(tb, &mlp_ops, &mb, l, NULL, NULL));
    float scale_b = volt_trainer_grad_scale(tb);
    int64_t tracker_b = volt_trainer_grad_scaler_growth_tracker(tb);
    volt_trainer_destroy(tb);
    mlp mc = ma;
    volt_trainer *tc = scaler_trainer(precision);
    at_start as = { 0 };
    CHECK_OK(volt_trainer_add_callback(tc, &start_ops, &as));
    volt_status st = volt_trainer_fit(tc, &mlp_ops, &mc, l, NULL, path);
    CHECK(st == VOLT_OK, "%s resume: %s", precision, volt_trainer_errmsg(tc));
    bool mixed16 = !strcmp(precision, "16-mixed");
    if (mixed16)
        CHECK(as.seen && as.scale == 64.f && as.tracker == 1 && as.skipped == 3 && scale_b == 64.f && tracker_b == 1,
              "restored scale %g tracker %lld skipped %lld", (double)as.scale, (long long)as.tracker, (long long)as.skipped);
    int64_t na, nc;
    float *wa = values(ta, &na), *wc = values(tc, &nc);
    CHECK(na == nc && !memcmp(wa, wc, sizeof(float) * (size_t)na), "%s: resumed weights differ from the straight run", precision);
    CHECK(volt_trainer_global_step(ta) == volt_trainer_global_step(tc) && volt_trainer_grad_scale(ta) == volt_trainer_grad_scale(tc) &&
          volt_trainer_grad_scaler_growth_tracker(ta) == volt_trainer_grad_scaler_growth_tracker(tc) &&
          volt_trainer_skipped_steps(ta) == volt_trainer_skipped_steps(tc),
          "%s: global_step %lld/%lld, scale %g/%g, skipped %lld/%lld", precision, (long long)volt_trainer_global_step(ta),
          (long long)volt_trainer_global_step(tc), (double)volt_trainer_grad_scale(ta), (double)volt_trainer_grad_scale(tc),
          (long long)volt_trainer_skipped_steps(ta), (long long)volt_trainer_skipped_steps(tc));
    free(wa); free(wc);
    volt_trainer_destroy(ta);
    volt_trainer_destroy(tc);
    volt_loader_destroy(l);
}

/* ---- memory report and f32 checkpoints ------------------------------------------------------ */
static void mem_of(volt_dataset *ds, const char *precision, const char *optim_dtype, volt_param_memory *m) {
    volt_trainer_config c;
    volt_trainer_config_init(&c);
    c.precision = precision;
    c.optimizer_dtype = optim_dtype;
    c.max_steps = 2;
    c.enable_checkpointing = c.enable_logger = c.enable_progress_bar = false;
    c.default_root_dir = vtest_tmpdir();
    volt_trainer *t = NULL;
    CHECK_OK(volt_trainer_create(&c, &t));
    mlp mm = { 0 };
    volt_loader *l = loader(ds, 32, false);
    CHECK_OK(volt_trainer_fit(t, &mlp_ops, &mm, l, NULL, NULL));
    CHECK_OK(volt_trainer_param_memory(t, m));
    volt_trainer_destroy(t);
    volt_loader_destroy(l);
}

static void test_memory(volt_dataset *ds) {
    volt_param_memory m32, mb, mh, mbf, mmix;
    mem_of(ds, "32-true", NULL, &m32);
    mem_of(ds, "bf16-true", NULL, &mb);
    mem_of(ds, "16-true", "auto", &mh);
    mem_of(ds, "bf16-true", "f32", &mbf);
    mem_of(ds, "bf16-mixed", NULL, &mmix);
    int64_t psi = (int64_t)HID * DIN + HID + NCLS * HID + NCLS;
    printf("memory (bytes)   params  grads  master  optimizer\n");
    const char *nm[5] = { "32-true", "bf16-true", "16-true", "bf16-true+f32opt", "bf16-mixed" };
    volt_param_memory *ms[5] = { &m32, &mb, &mh, &mbf, &mmix };
    for (int i = 0; i < 5; i++)
        printf("  %-16s %6lld %6lld %7lld %10lld\n", nm[i], (long long)ms[i]->param_bytes, (long long)ms[i]->grad_bytes,
               (long long)ms[i]->master_bytes, (long long)ms[i]->optim_bytes);
    CHECK(m32.numel == psi && m32.param_bytes >= 4 * psi && m32.param_dtype == VOLT_F32, "32-true: %lld params, %lld bytes",
          (long long)m32.numel, (long long)m32.param_bytes);
    CHECK(mb.param_bytes * 2 == m32.param_bytes && mb.param_dtype == VOLT_BF16 && mb.grad_bytes == m32.grad_bytes &&
          mb.optim_bytes * 2 == m32.optim_bytes && mb.optim_dtype == VOLT_BF16, "bf16-true halves parameter (and optimizer) bytes");
    CHECK(mh.param_bytes * 2 == m32.param_bytes && mh.param_dtype == VOLT_F16 && mh.optim_dtype == VOLT_F32 && mh.optim_bytes == m32.optim_bytes,
          "16-true halves parameter bytes; auto keeps Adam states in f32 (f16 underflows them)");
    CHECK(mbf.param_bytes * 2 == m32.param_bytes && mbf.optim_bytes == m32.optim_bytes && mbf.optim_dtype == VOLT_F32,
          "bf16-true with f32 optimizer states");
    CHECK(mmix.param_bytes == m32.param_bytes && mmix.master_bytes == 0 && mmix.optim_bytes == m32.optim_bytes,
          "bf16-mixed keeps f32 parameters (the masters)");
}

static void test_checkpoint_f32(volt_dataset *ds) {
    char p16[600], p32[600];
    snprintf(p16, sizeof p16, "%s/bf16true.safetensors", vtest_tmpdir());
    snprintf(p32, sizeof p32, "%s/f32.safetensors", vtest_tmpdir());
    volt_loader *l = loader(ds, 32, true);
    /* bf16-true run saves f32 weights equal to its bf16 values */
    mlp m1 = { 0 };
    volt_trainer *t1 = trainer("bf16-true", 1, 5);
    CHECK_OK(volt_trainer_fit(t1, &mlp_ops, &m1, l, NULL, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(t1, p16));
    int64_t n1;
    float *v1 = values(t1, &n1);
    volt_st_file *f = NULL;
    char err[512];
    CHECK_OK(volt_st_open(p16, &f, err, sizeof err));
    volt_st_info info;
    CHECK(f && volt_st_find(f, "fc1.weight", &info) == VOLT_OK && info.dtype == VOLT_F32 &&
          !memcmp(info.data, v1, sizeof(float) * HID * DIN), "bf16-true checkpoint holds the f32 values of its weights");
    CHECK(f && volt_st_find(f, "optimizer.exp_avg.fc1.weight", &info) == VOLT_OK && info.dtype == VOLT_F32, "optimizer states as f32");
    CHECK(f && volt_st_meta(f, "volt.precision") && !strcmp(volt_st_meta(f, "volt.precision"), "bf16-true"), "precision recorded");
    volt_st_close(f);
    /* a 32-true model loads it exactly, trains on, saves full precision */
    mlp m2 = { 0 };
    volt_trainer *t2 = trainer("32-true", 1, 5);
    CHECK_OK(volt_trainer_validate(t2, &mlp_ops, &m2, l, p16));
    int64_t n2;
    float *v2 = values(t2, &n2);
    CHECK(n1 == n2 && !memcmp(v1, v2, sizeof(float) * (size_t)n1), "32-true loads the bf16-true checkpoint exactly");
    CHECK_OK(volt_trainer_fit(t2, &mlp_ops, &m2, l, NULL, NULL));
    CHECK_OK(volt_trainer_save_checkpoint(t2, p32));
    free(v2);
    v2 = values(t2, &n2);
    /* a bf16-true model loading the f32 checkpoint rounds it */
    mlp m3 = { 0 };
    volt_trainer *t3 = trainer("bf16-true", 1, 5);
    CHECK_OK(volt_trainer_validate(t3, &mlp_ops, &m3, l, p32));
    int64_t n3;
    float *v3 = values(t3, &n3);
    int bad = 0, inexact = 0;
    for (int64_t i = 0; i < n3; i++) {
        if (fbits(v3[i]) != fbits(volt_bf16_to_f32(volt_f32_to_bf16(v2[i])))) bad++;
        inexact += v3[i] != v2[i];
    }
    CHECK(bad == 0 && inexact > 0 && m3.w1->dtype == VOLT_BF16, "f32 checkpoint into bf16 storage: %d wrong (%d rounded)", bad, inexact);
    free(v1); free(v2); free(v3);
    volt_trainer_destroy(t1);
    volt_trainer_destroy(t2);
    volt_trainer_destroy(t3);
    volt_loader_destroy(l);
}

/* ---- accuracy parity ---------------------------------------------------------------------------- */
static void test_accuracy(volt_dataset *tr, volt_dataset *va) {
    const char *precs[5] = { "32-true", "16-mixed", "bf16-mixed", "bf16-true", "16-true" };
    double acc[5] = { 0 }, loss[5] = { 0 };
    volt_loader *tl = loader(tr, 32, true), *vl = loader(va, 256, false);
    for (int i = 0; i < 5; i++) {
        mlp m = { .lr = 3e-3f };
        volt_trainer *t = trainer(precs[i], 4, -1);
        volt_status st = volt_trainer_fit(t, &mlp_ops, &m, tl, vl, NULL);
        CHECK(st == VOLT_OK, "%s: %s", precs[i], volt_trainer_errmsg(t));
        CHECK(volt_trainer_metric(t, "val_acc", &acc[i]) && volt_trainer_metric(t, "val_loss", &loss[i]), "%s: metrics", precs[i]);
        if (i == 1) {
            CHECK(volt_trainer_grad_scale(t) > 1.f, "16-mixed scale %g", (double)volt_trainer_grad_scale(t));
            printf("16-mixed: final scale %g, %lld of %lld steps skipped\n", (double)volt_trainer_grad_scale(t),
                   (long long)volt_trainer_skipped_steps(t), (long long)(volt_trainer_global_step(t) + volt_trainer_skipped_steps(t)));
        }
        volt_trainer_destroy(t);
    }
    printf("MLP on Gaussian blobs (%d train, %d val, 4 epochs):\n", NTRAIN, NVAL);
    for (int i = 0; i < 5; i++) {
        printf("  %-10s val_acc %.4f  val_loss %.4f\n", precs[i], acc[i], loss[i]);
        CHECK(fabs(acc[i] - acc[0]) <= 0.01, "%s accuracy %.4f vs 32-true %.4f", precs[i], acc[i], acc[0]);
    }
    CHECK(acc[0] > 0.8 && acc[0] < 0.999, "the problem is learnable but not trivial: %.4f", acc[0]);
    volt_loader_destroy(tl);
    volt_loader_destroy(vl);
}

/* Native bf16 linears keep forward's bf16 copies of x and w for backward, and linears of
 * one x share its copy (core/cpu/basic.c). Two steps on one step object, the weights
 * changed in between (as an optimizer step does): each step's outputs and grads must equal,
 * bit for bit, those of a fresh step with the copies off (every operand converted at use).
 * A copy surviving into the next step, or a shared x copy of the wrong tensor, differs. */
static void linear_run(volt_step *s, const float *x, const float *x2, const float *w1, const float *w2,
                       const float *b, const float *g, float *out[6]) {
    enum { R = 24, I = 40, O = 32 };
    CHECK_OK(volt_step_begin(s, true, 0));
    CHECK_OK(volt_step_set_compute_dtype(s, VOLT_BF16));
    volt_tensor *tx = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(R, I), (void *)x));
    volt_tensor *t1 = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(O, I), (void *)w1));
    volt_tensor *t2 = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(O, I), (void *)w2));
    volt_tensor *tb = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(O), (void *)b));
    volt_tensor *tx2 = volt_tensor_requires_grad(s, volt_tensor_wrap(s, VOLT_F32, VOLT_SHAPE(R, I), (void *)x2));
    /* x read by two linears, then another x through w1 again */
    volt_tensor *y = volt_add(s, volt_add(s, volt_linear(s, tx, t1, tb), volt_linear(s, tx, t2, NULL)),
                              volt_linear(s, tx2, t1, NULL));
    CHECK(y != NULL, "linear pair: %s", volt_step_errmsg(s));
    out[0] = malloc(sizeof(float) * R * O);
    if (y) {
        volt_tensor_to_host(y, out[0]);
        CHECK_OK(volt_step_backward_grad(s, y, g));
    }
    volt_tensor *ts[5] = { tx, t1, t2, tb, tx2 };
    for (int j = 0; j < 5; j++) out[1 + j] = ts[j]->grad ? host_grad(ts[j]) : NULL;
    volt_step_end(s);
}

static void test_linear_bf16_kept(void) {
    enum { R = 24, I = 40, O = 32 };
    static float x[R * I], x2[R * I], w1[O * I], w2[O * I], b[O], g[R * O];
    for (int i = 0; i < R * I; i++) { x[i] = sinf(i * 0.37f); x2[i] = cosf(i * 0.19f + 2.f); }
    for (int i = 0; i < O * I; i++) { w1[i] = cosf(i * 0.11f) * 0.3f; w2[i] = sinf(i * 0.23f + 1.f) * 0.3f; }
    for (int i = 0; i < O; i++) b[i] = 0.01f * (float)i;
    for (int i = 0; i < R * O; i++) g[i] = cosf(i * 0.05f);
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = 1 << 20;
    volt_step *s;
    CHECK_OK(volt_step_create(&cfg, &s));
    static const int64_t len[6] = { R * O, R * I, O * I, O * I, O, R * I };
    for (int it = 0; it < 3; it++) {
        float *kept[6], *plain[6];
        linear_run(s, x, x2, w1, w2, b, g, kept);
        volt_step *f;
        CHECK_OK(volt_step_create(&cfg, &f));
        f->linear_keep_bf16_off = true;   /* this step converts at use */
        linear_run(f, x, x2, w1, w2, b, g, plain);
        volt_step_destroy(f);
        bool same = true;
        for (int j = 0; j < 6; j++)
            same &= kept[j] && plain[j] && !memcmp(kept[j], plain[j], sizeof(float) * (size_t)len[j]);
        CHECK(same, "bf16 linear, step %d: kept bf16 operands give the bits of converting at use", it);
        for (int j = 0; j < 6; j++) { free(kept[j]); free(plain[j]); }
        /* the update between steps (an optimizer step would do it through the same memory) */
        for (int i = 0; i < O * I; i++) { w1[i] -= 0.05f * cosf(i * 0.7f + it); w2[i] *= 1.1f; }
    }
    volt_step_destroy(s);
}

int main(void) {
    test_16_to_32_exhaustive();
    test_32_to_16();
    test_cast_values();
    test_cast_gradcheck();
    test_attention16();
    test_linear_bf16_kept();
    test_param_storage();
    test_precision_names();
    make_blobs();
    volt_dataset *tr = blobs(false), *va = blobs(true);
    test_scaler_overflow(tr);
    test_resume(tr, "16-mixed");
    test_resume(tr, "bf16-mixed");
    test_resume(tr, "bf16-true");
    test_resume(tr, "16-true");
    test_memory(tr);
    test_checkpoint_f32(tr);
    test_accuracy(tr, va);
    volt_dataset_destroy(tr);
    volt_dataset_destroy(va);
    return vtest_finish();
}
