/* CPU kernels: activations (gelu, gelu_tanh, tanh, sigmoid), softmax / log_softmax over
 * the last dim, layernorm, embedding, dropout. Shapes in comments; backward accumulates.
 *
 * exp/Phi/tanh are written out below (Cephes-style polynomials, branch-free) instead of
 * calling libm so that the element loops vectorise without -ffast-math; the tests compare
 * them with libm. Row reductions use 8 partial sums in a fixed order, so results do not
 * depend on the thread count. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "core/cpu/kernels.h"
#include "core/convert.h"   /* volt__f2bf: GELU's kept bf16 input */
#include "volt/dtype.h"

#define PAR_MIN 32768   /* below this many elements a loop runs on one thread */
#define LANES 8         /* partial sums per row reduction */
#define COLS 64         /* column chunk for deterministic column sums */
/* The hot loops (gelu, softmax, layernorm, dropout) are functions over a span of SPAN
 * elements (or of rows) compiled for AVX-512 / AVX2 / baseline (VOLT__SIMD_CLONES), called
 * from the parallel loops; an element's value depends on neither the span nor the thread.
 * Their backward kernels are first writers (core/internal.h): a fresh input grad is
 * stored, not added to zeros. */
#define SPAN 2048

static inline int64_t span_len(int64_t N, int64_t o) { return N - o < SPAN ? N - o : SPAN; }
/* rows per call for rows of C elements: about SPAN elements */
static inline int64_t rows_per(int64_t C) { return C >= SPAN ? 1 : SPAN / (C > 0 ? C : 1); }

/* ---- vectorisable math ------------------------------------------------------------ */
static inline float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
/* c ? a : b as a bit blend: GCC keeps a float ?: as control flow under -ftrapping-math
 * (the default), which stops the element loops from vectorising. */
static inline float sel(int c, float a, float b) {
    uint32_t m = 0u - (uint32_t)c;
    return bits_f((f_bits(a) & m) | (f_bits(b) & ~m));
}

/* e^x, ~1 ulp for x in [-87.3, 88.37]; 0 below, +inf above, NaN stays NaN. */
static inline float v_exp(float x) {
    const float hi = 88.3762626647949f, lo = -87.33f, magic = 12582912.f;   /* 1.5 * 2^23 */
    float xc = sel(x > hi, hi, x);
    xc = sel(xc < lo, lo, xc);
    float t = xc * 1.44269504088896341f + magic;   /* round(x / ln2) in the low mantissa bits */
    float nf = t - magic;
    uint32_t n = f_bits(t) - f_bits(magic);        /* n in [-126, 127], two's complement */
    float r = xc - nf * 0.693359375f;
    r = r + nf * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = (p * r * r + r + 1.f) * bits_f((n + 127u) << 23);
    y = sel(x < lo, 0.f, y);
    return sel(x > hi, INFINITY, y);
}

/* tanh: odd polynomial near 0 (no cancellation), 1 - 2/(e^2|x| + 1) elsewhere. */
static inline float v_tanh(float x) {
    float a = fabsf(x), z = x * x;
    float sp = -5.70498872745e-3f;
    sp = sp * z + 2.06390887954e-2f;
    sp = sp * z - 5.37397155531e-2f;
    sp = sp * z + 1.33314422036e-1f;
    sp = sp * z - 3.33332819422e-1f;
    float small = sp * z * x + x;
    float big = 1.f - 2.f / (v_exp(2.f * a) + 1.f);
    big = sel(x < 0.f, -big, big);
    return sel(a < 0.625f, small, big);
}

/* Phi(x) = P(X <= x), X ~ N(0, 1), through erfc(|x|/sqrt2) with the Chebyshev fit of
 * Numerical Recipes' erfcc (fractional error < 1.2e-7 everywhere): the tail Phi(-5) keeps
 * its relative precision instead of cancelling in 1 + erf. */
static inline float v_cdf(float x) {
    float a = fabsf(x) * 0.70710678118654752f, t = 1.f / (1.f + 0.5f * a);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    float half_erfc = 0.5f * t * v_exp(p - a * a);
    return sel(x < 0.f, half_erfc, 1.f - half_erfc);
}

#define INV_SQRT_2PI 0.39894228040143268f
#define GELU_K0 0.79788456080286536f     /* sqrt(2/pi) */
#define GELU_K1 0.044715f

/* ---- row reductions: LANES partial sums, combined in a fixed order ------------------- */
static inline float lanes_combine(const float *a) {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

static inline float row_sum(const float *x, int64_t n) {
    float a[LANES] = { 0 };
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) a[l] += x[k + l];
    for (; k < n; k++) a[k % LANES] += x[k];
    return lanes_combine(a);
}

static inline float row_dot(const float *x, const float *y, int64_t n) {
    float a[LANES] = { 0 };
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) a[l] += x[k + l] * y[k + l];
    for (; k < n; k++) a[k % LANES] += x[k] * y[k];
    return lanes_combine(a);
}

/* sum over k of (x[k] - m)^2 */
static inline float row_sqdev(const float *x, float m, int64_t n) {
    float a[LANES] = { 0 };
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) { float d = x[k + l] - m; a[l] += d * d; }
    for (; k < n; k++) { float d = x[k] - m; a[k % LANES] += d * d; }
    return lanes_combine(a);
}

static inline float row_max(const float *x, int64_t n) {
    float a[LANES];
    for (int l = 0; l < LANES; l++) a[l] = -INFINITY;
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES)
        for (int l = 0; l < LANES; l++) a[l] = sel(x[k + l] > a[l], x[k + l], a[l]);
    for (; k < n; k++) a[k % LANES] = sel(x[k] > a[k % LANES], x[k], a[k % LANES]);
    float m = a[0];
    for (int l = 1; l < LANES; l++) m = a[l] > m ? a[l] : m;
    return m;
}

/* ---- elementwise activations: x, y any shape ------------------------------------------ */
VOLT__SIMD_CLONES
static void gelu_span(const float *x, float *y, int64_t n) {
    for (int64_t k = 0; k < n; k++) y[k] = x[k] * v_cdf(x[k]);
}

/* d/dx x*Phi(x) = Phi(x) + x*phi(x); dx = (acc ? dx : 0) + dy * that */
VOLT__SIMD_CLONES
static void gelu_grad_span(const float *x, const float *dy, float *dx, int64_t n, bool acc) {
    if (acc)
        for (int64_t k = 0; k < n; k++) {
            float v = x[k];
            dx[k] += dy[k] * (v_cdf(v) + v * v_exp(-0.5f * v * v) * INV_SQRT_2PI);
        }
    else
        for (int64_t k = 0; k < n; k++) {
            float v = x[k];
            dx[k] = dy[k] * (v_cdf(v) + v * v_exp(-0.5f * v * v) * INV_SQRT_2PI);
        }
}

/* a span of x for f'(x): x itself, or its kept bf16 rounding widened into buf (a span is
 * below the converters' threading threshold: no nested parallel region) */
static const float *grad_input(const float *x, const volt_kept16 *kept, int64_t o, int64_t n, float *buf) {
    if (!kept) return x + o;
    volt_bf16_to_f32_array((const uint16_t *)kept->x + o, buf, n);
    return buf;
}

volt_status volt__cpu_GELU_fwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out), ns = (N + SPAN - 1) / SPAN;
    const float *x = n->in[0]->data;
    float *y = n->out->data;
    volt_kept16 *kept = volt__gelu_keep(s, n);
    if (!kept && s->status < 0) return s->status;
    uint16_t *h = kept ? kept->x : NULL;
    #pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t c = 0; c < ns; c++) {
        gelu_span(x + c * SPAN, y + c * SPAN, span_len(N, c * SPAN));
        if (h) volt_f32_to_bf16_array(x + c * SPAN, h + c * SPAN, span_len(N, c * SPAN));   /* backward's copy */
    }
    return VOLT_OK;
}

volt_status volt__cpu_GELU_bwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out), ns = (N + SPAN - 1) / SPAN;
    const float *x = n->in[0]->data, *dy = n->out->grad;
    const volt_kept16 *kept = volt__gelu_kept(n);
    const bool acc = volt__cpu_acc(n, 0);
    float *dx = n->in[0]->grad;
    #pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t c = 0; c < ns; c++) {
        float buf[SPAN];
        const int64_t len = span_len(N, c * SPAN);
        gelu_grad_span(grad_input(x, kept, c * SPAN, len, buf), dy + c * SPAN, dx + c * SPAN, len, acc);
    }
    return VOLT_OK;
}

/* 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): one exp and
 * no cancellation in the negative tail. d/dx = s + 2 x s (1 - s) du/dx with s = sigmoid(2u). */
volt_status volt__cpu_GELU_TANH_fwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *x = n->in[0]->data;
    float *y = n->out->data;
    volt_kept16 *kept = volt__gelu_keep(s, n);
    if (!kept && s->status < 0) return s->status;
    uint16_t *h = kept ? kept->x : NULL;
    #pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t k = 0; k < N; k++) {
        float v = x[k];
        y[k] = v / (1.f + v_exp(-2.f * GELU_K0 * (v + GELU_K1 * v * v * v)));
        if (h) h[k] = volt__f2bf(volt__f_bits(v));
    }
    return VOLT_OK;
}

volt_status volt__cpu_GELU_TANH_bwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *x = n->in[0]->data, *dy = n->out->grad;
    const volt_kept16 *kept = volt__gelu_kept(n);
    const uint16_t *h = kept ? kept->x : NULL;
    float *dx = n->in[0]->grad;
    const bool acc = volt__cpu_acc(n, 0);
    #pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t k = 0; k < N; k++) {
        float v = h ? volt__bits_f(volt__bf2f(h[k])) : x[k], v2 = v * v;
        float sg = 1.f / (1.f + v_exp(-2.f * GELU_K0 * (v + GELU_K1 * v2 * v)));
        float du = GELU_K0 * (1.f + 3.f * GELU_K1 * v2);
        dx[k] = (acc ? dx[k] : 0.f) + dy[k] * (sg + 2.f * v * sg * (1.f - sg) * du);
    }
    return VOLT_OK;
}

volt_status volt__cpu_TANH_fwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *x = n->in[0]->data;
    float *y = n->out->data;
    #pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t k = 0; k < N; k++) y[k] = v_tanh(x[k]);
    return VOLT_OK;
}

/* uses the output: dx = dy * (1 - y^2) */
volt_status volt__cpu_TANH_bwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *y = n->out->data, *dy = n->out->grad;
    float *dx = n->in[0]->grad;
    VOLT_CPU_GRAD_LOOP(volt__cpu_acc(n, 0), N, PAR_MIN, dx, dy[k] * (1.f - y[k] * y[k]));
    return VOLT_OK;
}

volt_status volt__cpu_SIGMOID_fwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *x = n->in[0]->data;
    float *y = n->out->data;
    #pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t k = 0; k < N; k++) y[k] = 1.f / (1.f + v_exp(-x[k]));
    return VOLT_OK;
}

/* uses the output: dx = dy * y * (1 - y) */
volt_status volt__cpu_SIGMOID_bwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out);
    const float *y = n->out->data, *dy = n->out->grad;
    float *dx = n->in[0]->grad;
    VOLT_CPU_GRAD_LOOP(volt__cpu_acc(n, 0), N, PAR_MIN, dx, dy[k] * y[k] * (1.f - y[k]));
    return VOLT_OK;
}

/* ---- softmax / log_softmax: x (R, C) over C (volt_attr_rows) ----------------------------- */
VOLT__SIMD_CLONES
static void softmax_rows(const float *x, float *y, int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float m = row_max(xr, C);
        for (int64_t c = 0; c < C; c++) yr[c] = v_exp(xr[c] - m);
        float inv = 1.f / row_sum(yr, C);
        for (int64_t c = 0; c < C; c++) yr[c] *= inv;
    }
}

/* dx = (acc ? dx : 0) + y * (dy - sum(dy * y)) */
VOLT__SIMD_CLONES
static void softmax_grad_rows(const float *y, const float *dy, float *dx, int64_t rows, int64_t C, bool acc) {
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * C, *gr = dy + r * C;
        float *dr = dx + r * C;
        float dot = row_dot(yr, gr, C);
        if (acc) for (int64_t c = 0; c < C; c++) dr[c] += yr[c] * (gr[c] - dot);
        else for (int64_t c = 0; c < C; c++) dr[c] = yr[c] * (gr[c] - dot);
    }
}

volt_status volt__cpu_SOFTMAX_fwd(volt_step *s, volt_node *n) {
    int64_t R = n->attr.rows.rows, C = n->attr.rows.cols, rp = rows_per(C), nb = (R + rp - 1) / rp;
    const float *x = n->in[0]->data;
    float *y = n->out->data;
    #pragma omp parallel for schedule(static) if (R * C > PAR_MIN)
    for (int64_t b = 0; b < nb; b++)
        softmax_rows(x + b * rp * C, y + b * rp * C, R - b * rp < rp ? R - b * rp : rp, C);
    return VOLT_OK;
}

volt_status volt__cpu_SOFTMAX_bwd(volt_step *s, volt_node *n) {
    int64_t R = n->attr.rows.rows, C = n->attr.rows.cols, rp = rows_per(C), nb = (R + rp - 1) / rp;
    const float *y = n->out->data, *dy = n->out->grad;
    const bool acc = volt__cpu_acc(n, 0);
    float *dx = n->in[0]->grad;
    #pragma omp parallel for schedule(static) if (R * C > PAR_MIN)
    for (int64_t b = 0; b < nb; b++)
        softmax_grad_rows(y + b * rp * C, dy + b * rp * C, dx + b * rp * C, R - b * rp < rp ? R - b * rp : rp, C, acc);
    return VOLT_OK;
}

/* y = x - m - log(sum exp(x - m)); the exps go through y as scratch */
volt_status volt__cpu_LOG_SOFTMAX_fwd(volt_step *s, volt_node *n) {
    int64_t R = n->attr.rows.rows, C = n->attr.rows.cols;
    const float *x = n->in[0]->data;
    float *y = n->out->data;
    #pragma omp parallel for schedule(static) if (R * C > PAR_MIN)
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float m = row_max(xr, C);
        for (int64_t c = 0; c < C; c++) yr[c] = v_exp(xr[c] - m);
        float ls = logf(row_sum(yr, C));
        for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - m) - ls;   /* not x - (m + ls): keeps precision at large m */
    }
    return VOLT_OK;
}

/* dx = dy - exp(y) * sum(dy) */
volt_status volt__cpu_LOG_SOFTMAX_bwd(volt_step *s, volt_node *n) {
    int64_t R = n->attr.rows.rows, C = n->attr.rows.cols;
    const float *y = n->out->data, *dy = n->out->grad;
    float *dx = n->in[0]->grad;
    volt__cpu_zero_stores(n);
    #pragma omp parallel for schedule(static) if (R * C > PAR_MIN)
    for (int64_t r = 0; r < R; r++) {
        const float *yr = y + r * C, *gr = dy + r * C;
        float *dr = dx + r * C;
        float sg = row_sum(gr, C);
        for (int64_t c = 0; c < C; c++) dr[c] += gr[c] - v_exp(yr[c]) * sg;
    }
    return VOLT_OK;
}

/* ---- layernorm: x (R, C), w, b (C) optional ---------------------------------------------
 * volt_attr_layernorm: rows R, cols C, where w and b sit in in[] (-1 = absent), eps.
 * saved: mean (R) then rstd (R), only when the node is on the tape. Stats: two passes in
 * float (mean, then squared deviations), biased variance as in PyTorch. */

/* Rows [r0, r0 + rows) of the forward; stats (2R: mean, then rstd) or NULL. */
VOLT__SIMD_CLONES
static void ln_rows(const float *x, const float *w, const float *b, float *y, float *stats, int64_t R, int64_t r0,
                    int64_t rows, int64_t C, float eps) {
    for (int64_t r = r0; r < r0 + rows; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float mean = row_sum(xr, C) / (float)C;
        float rstd = 1.f / sqrtf(row_sqdev(xr, mean, C) / (float)C + eps);
        if (stats) { stats[r] = mean; stats[R + r] = rstd; }
        if (w && b) for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
        else if (w) for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - mean) * rstd * w[c];
        else if (b) for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - mean) * rstd + b[c];
        else for (int64_t c = 0; c < C; c++) yr[c] = (xr[c] - mean) * rstd;
    }
}

volt_status volt__cpu_LAYERNORM_fwd(volt_step *s, volt_node *n) {
    int64_t R = n->attr.layernorm.rows, C = n->attr.layernorm.cols;
    float eps = n->attr.layernorm.eps;
    const float *x = n->in[0]->data;
    const int wi = n->attr.layernorm.w_index, bi = n->attr.layernorm.b_index;
    const float *w = wi >= 0 ? n->in[wi]->data : NULL;
    const float *b = bi >= 0 ? n->in[bi]->data : NULL;
    float *y = n->out->data, *stats = NULL;
    if (volt__needs_grad(n->out)) {
        stats = volt_step_alloc(s, sizeof(float) * 2 * (size_t)(R ? R : 1));
        if (!stats) return VOLT_ERR_NOMEM;
        n->saved = stats;
    }
    int64_t rp = rows_per(C), nb = (R + rp - 1) / rp;
    #pragma omp parallel for schedule(static) if (R * C > PAR_MIN)
    for (int64_t blk = 0; blk < nb; blk++)
        ln_rows(x, w, b, y, stats, R, blk * rp, R - blk * rp < rp ? R - blk * rp : rp, C, eps);
    return VOLT_OK;
}

/* ag += g, agx += g * xh over a row (LANES partial sums), g = dy * w or dy when w is NULL;
 * always inlined, so each call site gets a loop without the w test. */
static inline __attribute__((always_inline)) void ln_grad_sums(const float *dy, const float *w, const float *x, float mu, float rs,
                                                               int64_t C, float *ag, float *agx) {
    int64_t c = 0;
    for (; c + LANES <= C; c += LANES)
        for (int l = 0; l < LANES; l++) {
            float g = w ? dy[c + l] * w[c + l] : dy[c + l];
            ag[l] += g;
            agx[l] += g * ((x[c + l] - mu) * rs);
        }
    for (; c < C; c++) {
        float g = w ? dy[c] * w[c] : dy[c];
        ag[c % LANES] += g;
        agx[c % LANES] += g * ((x[c] - mu) * rs);
    }
}

/* dx rows [r0, r0 + rows) (see below); stored when !acc, else added */
VOLT__SIMD_CLONES
static void ln_grad_rows(const float *x, const float *dy, const float *w, const float *mean, const float *rstd,
                         float *dx, int64_t r0, int64_t rows, int64_t C, bool acc) {
    for (int64_t r = r0; r < r0 + rows; r++) {
        const float *xr = x + r * C, *gr = dy + r * C;
        float *dr = dx + r * C;
        float mu = mean[r], rs = rstd[r];
        float ag[LANES] = { 0 }, agx[LANES] = { 0 };
        if (w) ln_grad_sums(gr, w, xr, mu, rs, C, ag, agx);
        else ln_grad_sums(gr, NULL, xr, mu, rs, C, ag, agx);
        float mg = lanes_combine(ag) / (float)C, mgx = lanes_combine(agx) / (float)C;
        if (acc) {
            if (w) for (int64_t c = 0; c < C; c++) dr[c] += rs * (gr[c] * w[c] - mg - (xr[c] - mu) * rs * mgx);
            else for (int64_t c = 0; c < C; c++) dr[c] += rs * (gr[c] - mg - (xr[c] - mu) * rs * mgx);
        } else {
            if (w) for (int64_t c = 0; c < C; c++) dr[c] = rs * (gr[c] * w[c] - mg - (xr[c] - mu) * rs * mgx);
            else for (int64_t c = 0; c < C; c++) dr[c] = rs * (gr[c] - mg - (xr[c] - mu) * rs * mgx);
        }
    }
}

/* dw, db columns [c0, c1) (either may be NULL): rows summed in order; stored or added */
VOLT__SIMD_CLONES
static void ln_param_grad_cols(const float *x, const float *dy, const float *mean, const float *rstd, int64_t R,
                               int64_t C, int64_t c0, int64_t c1, float *gw, bool acc_w, float *gb, bool acc_b) {
    float aw[COLS] = { 0 }, ab[COLS] = { 0 };
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C, *gr = dy + r * C;
        float mu = mean[r], rs = rstd[r];
        for (int64_t c = c0; c < c1; c++) {
            aw[c - c0] += gr[c] * (xr[c] - mu) * rs;
            ab[c - c0] += gr[c];
        }
    }
    if (gw && acc_w) for (int64_t c = c0; c < c1; c++) gw[c] += aw[c - c0];
    else if (gw) for (int64_t c = c0; c < c1; c++) gw[c] = aw[c - c0];
    if (gb && acc_b) for (int64_t c = c0; c < c1; c++) gb[c] += ab[c - c0];
    else if (gb) for (int64_t c = c0; c < c1; c++) gb[c] = ab[c - c0];
}

/* With xh = (x - mean) * rstd and g = dy * w:
 *   dx = rstd * (g - mean(g) - xh * mean(g * xh)),  dw += sum_r dy * xh,  db += sum_r dy. */
volt_status volt__cpu_LAYERNORM_bwd(volt_step *s, volt_node *n) {
    int64_t R = n->attr.layernorm.rows, C = n->attr.layernorm.cols;
    const int wi = n->attr.layernorm.w_index, bi = n->attr.layernorm.b_index;
    volt_tensor *xt = n->in[0];
    volt_tensor *wt = wi >= 0 ? n->in[wi] : NULL;
    volt_tensor *bt = bi >= 0 ? n->in[bi] : NULL;
    const float *x = xt->data, *dy = n->out->grad, *w = wt ? wt->data : NULL;
    const float *mean = n->saved, *rstd = mean + R;
    if (n->grad_mode[0]) {
        const bool acc = volt__cpu_acc(n, 0);
        float *dx = xt->grad;
        int64_t rp = rows_per(C), nb = (R + rp - 1) / rp;
        #pragma omp parallel for schedule(static) if (R * C > PAR_MIN)
        for (int64_t blk = 0; blk < nb; blk++)
            ln_grad_rows(x, dy, w, mean, rstd, dx, blk * rp, R - blk * rp < rp ? R - blk * rp : rp, C, acc);
    }
    bool dw = wt && volt__needs_grad(wt), db = bt && volt__needs_grad(bt);
    if (dw || db) {   /* column chunks across threads, rows summed in order */
        const bool acc_w = dw && volt__cpu_acc(n, wi), acc_b = db && volt__cpu_acc(n, bi);
        float *gw = dw ? wt->grad : NULL, *gb = db ? bt->grad : NULL;
        int64_t nchunks = (C + COLS - 1) / COLS;
        #pragma omp parallel for schedule(static) if (R * C > PAR_MIN)
        for (int64_t ch = 0; ch < nchunks; ch++)
            ln_param_grad_cols(x, dy, mean, rstd, R, C, ch * COLS, ch * COLS + COLS < C ? ch * COLS + COLS : C,
                               gw, acc_w, gb, acc_b);
    }
    return VOLT_OK;
}

/* ---- embedding: ids (N) i32/i64, table (V, D) -> (N, D) (volt_attr_embedding) --------- */
static inline int64_t id_at(const volt_tensor *t, int64_t i) {
    return t->dtype == VOLT_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

volt_status volt__cpu_EMBEDDING_fwd(volt_step *s, volt_node *n) {
    int64_t N = n->attr.embedding.n, V = n->attr.embedding.num, D = n->attr.embedding.dim;
    const volt_tensor *ids = n->in[0];
    for (int64_t p = 0; p < N; p++) {
        int64_t id = id_at(ids, p);
        if (id >= 0 && id < V) continue;
        return volt__embedding_id_err(s, ids, p, id, V);
    }
    const float *tab = n->in[1]->data;
    float *y = n->out->data;
    #pragma omp parallel for schedule(static) if (N * D > PAR_MIN)
    for (int64_t p = 0; p < N; p++)
        memcpy(y + p * D, tab + id_at(ids, p) * D, sizeof(float) * (size_t)D);
    return VOLT_OK;
}

/* dtable[id] += dy[p] for every position p in order, except positions holding padding_idx
 * (-1 = none: nn.Embedding's padding_idx, the pad row gets no gradient); threads own
 * disjoint column chunks, so repeated ids accumulate in the same order for any thread
 * count (no atomics). */
volt_status volt__cpu_EMBEDDING_bwd(volt_step *s, volt_node *n) {
    volt_tensor *tab = n->in[1];
    volt__cpu_zero_stores(n);
    if (!n->grad_mode[1]) return VOLT_OK;
    int64_t N = n->attr.embedding.n, V = n->attr.embedding.num, D = n->attr.embedding.dim, pad = n->attr.embedding.padding_idx;
    const volt_tensor *ids = n->in[0];
    /* forward checked the ids, but the caller may have rewritten them since
     * (volt_tensor_copy_from_host, a wrapped buffer): a row outside the table is never written */
    for (int64_t p = 0; p < N; p++) {
        const int64_t id = id_at(ids, p);
        if (id < 0 || id >= V)
            return volt__embedding_id_err_in(s, "embedding backward", " (the ids changed after the forward)", ids, p, id, V);
    }
    const float *dy = n->out->grad;
    float *g = tab->grad;
    int64_t nchunks = (D + COLS - 1) / COLS;
    #pragma omp parallel for schedule(static) if (N * D > PAR_MIN)
    for (int64_t ch = 0; ch < nchunks; ch++) {
        int64_t c0 = ch * COLS, c1 = c0 + COLS < D ? c0 + COLS : D;
        for (int64_t p = 0; p < N; p++) {
            const int64_t id = id_at(ids, p);
            if (id == pad) continue;
            float *gr = g + id * D;
            const float *dr = dy + p * D;
            for (int64_t c = c0; c < c1; c++) gr[c] += dr[c];
        }
    }
    return VOLT_OK;
}

/* ---- arange: y (n) = 0..n-1, i32 or i64; no inputs, no backward ----------------------- */
volt_status volt__cpu_ARANGE_fwd(volt_step *s, volt_node *n) {
    (void)s;
    int64_t N = volt_tensor_numel(n->out);
    if (n->out->dtype == VOLT_I64) {
        int64_t *y = n->out->data;
        for (int64_t k = 0; k < N; k++) y[k] = k;
    } else {
        int32_t *y = n->out->data;
        for (int64_t k = 0; k < N; k++) y[k] = (int32_t)k;
    }
    return VOLT_OK;
}

/* ---- dropout: volt_attr_dropout (call index in the step, p) ----------------------------
 * keep element k iff volt__rng_uniform(seed, step offset, call, k) >= p; kept values are
 * scaled by 1/(1-p). Backward recomputes the mask from the same counters. */
#define DROPOUT_PAR_MIN 4096   /* the RNG is several times the cost of an add per element */

/* y = (acc ? y : 0) + (u >= p ? x * scale : 0) over a span (x = dy, y = dx in backward) */
VOLT__SIMD_CLONES
static void dropout_span(const float *x, const float *u, float *y, int64_t n, float p, float scale, bool acc) {
    if (acc) for (int64_t k = 0; k < n; k++) y[k] += sel(u[k] >= p, x[k] * scale, 0.f);
    else for (int64_t k = 0; k < n; k++) y[k] = sel(u[k] >= p, x[k] * scale, 0.f);
}

/* Span c's uniforms (SPAN is a multiple of 4: a span starts on a Philox block). */
static void dropout_uniforms(const volt_step *s, const volt_node *n, int64_t N, int64_t c, float *u) {
    int64_t o = c * SPAN;
    volt__rng_uniform_blocks(s->seed, s->rng_offset, (uint64_t)n->attr.dropout.call, (uint64_t)(o / 4), (span_len(N, o) + 3) / 4, u);
}

volt_status volt__cpu_DROPOUT_fwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out), ns = (N + SPAN - 1) / SPAN;
    float p = n->attr.dropout.p, scale = 1.f / (1.f - p);
    const float *x = n->in[0]->data;
    float *y = n->out->data;
    #pragma omp parallel for schedule(static) if (N > DROPOUT_PAR_MIN)
    for (int64_t c = 0; c < ns; c++) {
        float u[SPAN];
        dropout_uniforms(s, n, N, c, u);
        dropout_span(x + c * SPAN, u, y + c * SPAN, span_len(N, c * SPAN), p, scale, false);
    }
    return VOLT_OK;
}

volt_status volt__cpu_DROPOUT_bwd(volt_step *s, volt_node *n) {
    int64_t N = volt_tensor_numel(n->out), ns = (N + SPAN - 1) / SPAN;
    float p = n->attr.dropout.p, scale = 1.f / (1.f - p);
    const float *dy = n->out->grad;
    const bool acc = volt__cpu_acc(n, 0);
    float *dx = n->in[0]->grad;
    #pragma omp parallel for schedule(static) if (N > DROPOUT_PAR_MIN)
    for (int64_t c = 0; c < ns; c++) {
        float u[SPAN];
        dropout_uniforms(s, n, N, c, u);
        dropout_span(dy + c * SPAN, u, dx + c * SPAN, span_len(N, c * SPAN), p, scale, acc);
    }
    return VOLT_OK;
}
