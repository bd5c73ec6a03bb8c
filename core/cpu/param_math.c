/* The cpu backend's parameter math (core/device.h, volt_param_math): grad scaling, the
 * global squared norm, clipping, the grad scaler's unscale + found-inf and update, the
 * optimizer updates (SGD, Adam, AdamW over f32 or 16-bit values and states) and dtype
 * conversion. Pointers are device memory, which on cpu is host memory; cpu-strict wraps
 * each entry (core/cpu/strict.c).
 *
 * The optimizer math follows PyTorch's _single_tensor_sgd / _single_tensor_adam (torch
 * 2.x, non-foreach, non-capturable, maximize=False, amsgrad=False) operation by operation
 * in f32, with the per-step scalars (volt_opt_coef) computed by the host in double. Every
 * element is independent, so the OpenMP split cannot change a result bit; 16-bit values
 * or states are widened to f32 per span of OPT_SPAN elements (on the stack, with the
 * inline conversions of core/convert.h: no OpenMP region per span), updated with the
 * same operations and rounded to nearest even on store. */
#include <math.h>
#include <string.h>
#ifdef __SSE2__
#include <immintrin.h>
#endif
#include "core/cpu/kernels.h"
#include "core/convert.h"
#include "core/kernel_math.h"
#include "volt/dtype.h"

/* Below this many floats a segment is updated by one thread (fork/join costs more). */
#define OPT_PAR_MIN 32768
#define SCALE_PAR_MIN 65536
#define UNSCALE_PAR_MIN 65536
#define OPT_SPAN 2048   /* elements per adam_span call (its sqrt buffer) and per 16-bit span */

typedef uint32_t __attribute__((may_alias)) u32a;

/* ---- scale, norm, clipping ----------------------------------------------------------------- */
void volt__cpu_pm_scale(volt_device *d, float *x, int64_t n, float coef) {
    (void)d;
    #pragma omp parallel for schedule(static) if (n > SCALE_PAR_MIN)
    for (int64_t k = 0; k < n; k++) x[k] *= coef;
}

void volt__cpu_pm_sqnorm_acc(volt_device *d, const float *x, int64_t n, double *acc) {
    (void)d;
    /* sequential, four lanes: the same sum for any thread count */
    double l[4] = { 0, 0, 0, 0 };
    int64_t k = 0;
    for (; k + 4 <= n; k += 4)
        for (int j = 0; j < 4; j++) l[j] += (double)x[k + j] * x[k + j];
    for (; k < n; k++) l[0] += (double)x[k] * x[k];
    *acc += (l[0] + l[1]) + (l[2] + l[3]);
}

void volt__cpu_pm_clip_by_norm(volt_device *d, float *x, int64_t n, const double *sqnorm, float max_norm) {
    const double norm = sqrt(*sqnorm);
    if (!isfinite(norm)) return;   /* like PyTorch (error_if_nonfinite=False): grads left as they are */
    const float coef = (float)(max_norm / (norm + 1e-6));
    if (coef < 1.0f) volt__cpu_pm_scale(d, x, n, coef);
}

void volt__cpu_pm_clip_value(volt_device *d, float *x, int64_t n, float v) {
    (void)d;
    for (int64_t k = 0; k < n; k++) x[k] = x[k] > v ? v : (x[k] < -v ? -v : x[k]);
}

/* ---- grad scaler (torch.amp.GradScaler) ------------------------------------------------------- */
void volt__cpu_pm_unscale(volt_device *d, float *x, int64_t n, volt_scaler_state *st) {
    (void)d;
    const float inv = (float)(1.0 / (double)st->scale);
    const u32a *bits = (const u32a *)(const void *)x;
    unsigned bad = 0;
    /* inf/NaN: exponent all ones; checked on the scaled value, as torch does */
    #pragma omp parallel for simd schedule(static) reduction(|:bad) if (n > UNSCALE_PAR_MIN)
    for (int64_t k = 0; k < n; k++) {
        bad |= (bits[k] & 0x7f800000u) == 0x7f800000u;
        x[k] *= inv;
    }
    if (bad) st->found_inf = 1.f;
}

void volt__cpu_pm_scaler_update(volt_device *d, volt_scaler_state *st, float growth, float backoff, int64_t interval) {
    (void)d;
    volt__scaler_update(&st->scale, &st->found_inf, &st->growth_tracker, growth, backoff, interval);
}

/* ---- optimizer updates -------------------------------------------------------------------- */
/* p, g, b: n floats (b = momentum buffer, NULL without momentum). */
static inline __attribute__((always_inline)) void sgd_span(const volt_opt_coef *c, float *restrict p,
                                                           const float *restrict g, float *restrict b, int64_t n) {
    const float wd = c->wd, mom = c->momentum, omd = c->one_minus_damp, neg_lr = c->neg_lr;
    const bool first = c->first != 0, nesterov = c->nesterov != 0;
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        if (wd != 0.f) gi = gi + wd * p[i];                       /* grad.add(param, alpha=wd) */
        if (b) {
            float bi;
            if (first) bi = gi;                                   /* buf = clone(grad) */
            else bi = b[i] * mom + omd * gi;                      /* buf.mul_(m).add_(g, 1-d) */
            b[i] = bi;
            gi = nesterov ? gi + mom * bi : bi;                   /* grad.add(buf, alpha=m) */
        }
        p[i] = p[i] + neg_lr * gi;                                /* param.add_(grad, -lr) */
    }
}

static void sgd_f32(const volt_opt_coef *c, float *restrict p, const float *restrict g, float *restrict b, int64_t n) {
    const float wd = c->wd, mom = c->momentum, omd = c->one_minus_damp, neg_lr = c->neg_lr;
    const bool first = c->first != 0, nesterov = c->nesterov != 0;
    #pragma omp parallel for schedule(static) if (n >= OPT_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        if (wd != 0.f) gi = gi + wd * p[i];
        if (b) {
            float bi;
            if (first) bi = gi;
            else bi = b[i] * mom + omd * gi;
            b[i] = bi;
            gi = nesterov ? gi + mom * bi : bi;
        }
        p[i] = p[i] + neg_lr * gi;
    }
}

/* s[i] = sqrtf(x[i]) for i < n, four at a time with SSE where available (sqrtps is IEEE
 * sqrt like sqrtf): GCC keeps any sqrtf loop scalar because of errno. */
static void sqrt_span(const float *x, float *out, int64_t n) {
    int64_t i = 0;
#ifdef __SSE2__
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
    for (; i < n; i++) out[i] = sqrtf(x[i]);
}

/* m = exp_avg, v = exp_avg_sq; decay (AdamW), wd (Adam, != 0) and small_w (torch lerp's
 * branch) are constants in each inlined copy, so the loops have no branches and
 * vectorise. Elements [0, n <= OPT_SPAN): the update in three passes over the span (m, v
 * and the decayed p; sqrt(v); p), the same f32 operations in the same order as the
 * one-pass formula, so the same bits. */
static inline __attribute__((always_inline)) void adam_span_(const volt_opt_coef *c, bool decay_on, bool wd_on,
                                                             bool small_w, float *restrict p, const float *restrict g,
                                                             float *restrict m, float *restrict v, int64_t n) {
    const float wd = c->wd, decay = c->decay;
    const float w1 = c->w1, omw1 = c->one_minus_w1, beta2 = c->beta2, w2 = c->w2;
    const float bc2_sqrt = c->bc2_sqrt, eps = c->eps, neg_ss = c->neg_step_size;
    float sq[OPT_SPAN];
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i], gi = g[i];
        if (decay_on) pi = pi * decay;                            /* AdamW: param.mul_(1 - lr*wd) */
        if (wd_on) gi = gi + wd * pi;                             /* Adam: grad.add(param, alpha=wd) */
        float mi = m[i];
        mi = small_w ? mi + w1 * (gi - mi)                        /* exp_avg.lerp_(grad, 1-b1) */
                     : gi - (gi - mi) * omw1;
        float vi = v[i] * beta2;                                  /* exp_avg_sq.mul_(b2) */
        vi = vi + w2 * gi * gi;                                   /* .addcmul_(g, g, 1-b2) */
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
    }
    sqrt_span(v, sq, n);
    for (int64_t i = 0; i < n; i++) {
        float denom = sq[i] / bc2_sqrt + eps;                     /* (sqrt(v)/bc2_sqrt).add_(eps) */
        p[i] = p[i] + neg_ss * m[i] / denom;                      /* addcdiv_(m, denom, -step_size) */
    }
}

/* Compiled for AVX-512 and AVX2 too (core/internal.h): memory-bound, but the default
 * x86-64-v2 copy spent half its time in 4-wide arithmetic. */
static VOLT__SIMD_CLONES void adam_span(const volt_opt_coef *c, bool adamw, float *restrict p, const float *restrict g,
                                        float *restrict m, float *restrict v, int64_t n) {
    const bool small_w = fabsf(c->w1) < 0.5f, decay_on = adamw && c->decay != 1.f, wd_on = !adamw && c->wd != 0.f;
    if (decay_on) {
        if (small_w) adam_span_(c, true, false, true, p, g, m, v, n);
        else adam_span_(c, true, false, false, p, g, m, v, n);
    } else if (wd_on) {
        if (small_w) adam_span_(c, false, true, true, p, g, m, v, n);
        else adam_span_(c, false, true, false, p, g, m, v, n);
    } else {
        if (small_w) adam_span_(c, false, false, true, p, g, m, v, n);
        else adam_span_(c, false, false, false, p, g, m, v, n);
    }
}

static void adam_f32(const volt_opt_coef *c, bool adamw, float *restrict p, const float *restrict g,
                     float *restrict m, float *restrict v, int64_t n) {
    int64_t ns = (n + OPT_SPAN - 1) / OPT_SPAN;
    #pragma omp parallel for schedule(static) if (n >= OPT_PAR_MIN)
    for (int64_t k = 0; k < ns; k++) {
        int64_t o = k * OPT_SPAN;
        adam_span(c, adamw, p + o, g + o, m + o, v + o, n - o < OPT_SPAN ? n - o : OPT_SPAN);
    }
}

/* Span conversions (same bits as volt_convert), compiled for AVX-512 and AVX2 too. */
static VOLT__SIMD_CLONES void widen_span(const uint16_t *s, volt_dtype dt, u32a *d, int64_t n) {
    if (dt == VOLT_BF16)
        for (int64_t i = 0; i < n; i++) d[i] = volt__bf2f(s[i]);
    else
        for (int64_t i = 0; i < n; i++) d[i] = volt__h2f(s[i]);
}
static VOLT__SIMD_CLONES void narrow_span(const u32a *s, volt_dtype dt, uint16_t *d, int64_t n) {
    if (dt == VOLT_BF16)
        for (int64_t i = 0; i < n; i++) d[i] = volt__f2bf(s[i]);
    else
        for (int64_t i = 0; i < n; i++) d[i] = volt__f2h(s[i]);
}

/* Element o.. of a buffer of dtype dt as f32: itself when f32, else widened into buf. */
static float *widen(void *x, volt_dtype dt, int64_t o, int64_t m, float *buf) {
    if (dt == VOLT_F32) return (float *)x + o;
    widen_span((const uint16_t *)x + o, dt, (u32a *)(void *)buf, m);
    return buf;
}
static void narrow(void *x, volt_dtype dt, int64_t o, int64_t m, const float *buf) {
    if (dt != VOLT_F32) narrow_span((const u32a *)(const void *)buf, dt, (uint16_t *)x + o, m);
}

/* Some buffer is 16-bit: each OPT_SPAN span widened to f32 on this thread's stack, updated
 * with the same per-element operations, rounded back. */
static void update_mixed(const volt_update_args *a) {
    const volt_opt_coef *c = a->coef;
    const int64_t n = a->n, ns = (n + OPT_SPAN - 1) / OPT_SPAN;
    const bool sgd = a->kind == VOLT_UPDATE_SGD, adamw = a->kind == VOLT_UPDATE_ADAMW;
    #pragma omp parallel for schedule(static) if (n >= OPT_PAR_MIN)
    for (int64_t k = 0; k < ns; k++) {
        float pb[OPT_SPAN], s0b[OPT_SPAN], s1b[OPT_SPAN];
        const int64_t o = k * OPT_SPAN, m = n - o < OPT_SPAN ? n - o : OPT_SPAN;
        float *p = widen(a->p, a->p_dt, o, m, pb);
        float *s0 = a->s0 ? widen(a->s0, a->s_dt, o, m, s0b) : NULL;
        float *s1 = a->s1 ? widen(a->s1, a->s_dt, o, m, s1b) : NULL;
        if (sgd) sgd_span(c, p, a->g + o, s0, m);
        else adam_span(c, adamw, p, a->g + o, s0, s1, m);
        narrow(a->p, a->p_dt, o, m, p);
        if (s0) narrow(a->s0, a->s_dt, o, m, s0);
        if (s1) narrow(a->s1, a->s_dt, o, m, s1);
    }
}

void volt__cpu_pm_update(volt_device *d, const volt_update_args *a) {
    (void)d;
    if (a->n <= 0 || (a->skip && *a->skip != 0.f)) return;   /* device memory is host memory */
    if (a->p_dt == VOLT_F32 && (a->s_dt == VOLT_F32 || (!a->s0 && !a->s1))) {
        if (a->kind == VOLT_UPDATE_SGD) sgd_f32(a->coef, a->p, a->g, a->s0, a->n);
        else adam_f32(a->coef, a->kind == VOLT_UPDATE_ADAMW, a->p, a->g, a->s0, a->s1, a->n);
        return;
    }
    update_mixed(a);
}

/* ---- weight averaging ---------------------------------------------------------------------- */
/* One element of volt_avg_op (core/device.h): torch's AveragedModel updates, in f32. */
static inline __attribute__((always_inline)) float avg_elem(int op, float a, float b, float avg, float p) {
    if (op == VOLT_AVG_COPY) return p;
    if (op == VOLT_AVG_EMA) {   /* decay * ema + (1 - decay) * p: two products, then the sum */
        const float x = a * avg, y = b * p;
        return x + y;
    }
    return a < 0.5f ? avg + a * (p - avg) : p - (p - avg) * (1.f - a);   /* lerp_(p, a) */
}

void volt__cpu_pm_average(volt_device *d, void *avg, volt_dtype a_dt, const void *p, volt_dtype p_dt, int64_t n,
                          const volt_opt_coef *coef, const float *skip) {
    (void)d;
    const int op = coef->avg_op;
    if (n <= 0 || op == VOLT_AVG_NONE || (skip && *skip != 0.f)) return;   /* device memory is host memory */
    const float a = coef->avg_a, b = coef->avg_b;
    if (a_dt == VOLT_F32 && p_dt == VOLT_F32) {
        float *restrict av = avg;
        const float *restrict pv = p;
        #pragma omp parallel for schedule(static) if (n >= OPT_PAR_MIN)
        for (int64_t i = 0; i < n; i++) av[i] = avg_elem(op, a, b, av[i], pv[i]);
        return;
    }
    const int64_t ns = (n + OPT_SPAN - 1) / OPT_SPAN;
    #pragma omp parallel for schedule(static) if (n >= OPT_PAR_MIN)
    for (int64_t k = 0; k < ns; k++) {
        float ab[OPT_SPAN], pb[OPT_SPAN];
        const int64_t o = k * OPT_SPAN, m = n - o < OPT_SPAN ? n - o : OPT_SPAN;
        float *av = widen(avg, a_dt, o, m, ab);
        const float *pv = widen((void *)p, p_dt, o, m, pb);
        for (int64_t i = 0; i < m; i++) av[i] = avg_elem(op, a, b, av[i], pv[i]);
        narrow(avg, a_dt, o, m, av);
    }
}

/* ---- conversion --------------------------------------------------------------------------- */
void volt__cpu_pm_convert(volt_device *d, void *dst, volt_dtype dst_dt, const void *src, volt_dtype src_dt, int64_t n) {
    (void)d;
    volt_convert(dst, dst_dt, src, src_dt, n);
}

const volt_param_math volt__cpu_param_math = {
    .scale = volt__cpu_pm_scale, .sqnorm_acc = volt__cpu_pm_sqnorm_acc, .clip_by_norm = volt__cpu_pm_clip_by_norm,
    .clip_value = volt__cpu_pm_clip_value, .unscale = volt__cpu_pm_unscale, .scaler_update = volt__cpu_pm_scaler_update,
    .update = volt__cpu_pm_update, .convert = volt__cpu_pm_convert, .average = volt__cpu_pm_average,
};
