/* gradcheck.h — gradient check for any op (or composition of ops) against a reference
 * written in double precision in the test.
 *
 *   static volt_tensor *f(volt_step *s, volt_tensor **in, void *ctx) { return volt_gelu(s, in[0]); }
 *   static void f_ref(const gc_input *ins, double *const *x, double *y, void *ctx) {
 *       for (int64_t k = 0; k < volt_shape_numel(ins[0].shape); k++) y[k] = 0.5 * x[0][k] * (1 + erf(x[0][k] / sqrt(2)));
 *   }
 *   gc_input ins[] = { GC_F32(VOLT_SHAPE(7, 13)) };
 *   gradcheck("gelu", f, f_ref, NULL, 1, ins);
 *
 * The scalar checked is L = sum(out * R) for fixed random R. The analytic grads come from
 * volt_step_backward_grad(out, R). With a reference (ref != NULL):
 *   - the f32 forward must equal ref's double forward (gc_fwd_rtol / gc_fwd_atol), so the
 *     reference is the same function as the op;
 *   - every element of every differentiable input is checked against central differences
 *     of sum(ref(x) * R) in double (step gc_h = 1e-6: truncation and rounding both below
 *     1e-9), to |ana - num| <= gc_atol + gc_rtol * max(|ana|, |num|) with gc_rtol = gc_atol
 *     = 2e-5: a derivative wrong by 1e-4 fails.
 * ref == NULL is for ops whose f32 forward is exact (data movement: permute, slice,
 * select, concat, reshape). Then L is summed in double from the f32 forward at x ± gc_eps
 * and divided by the step actually taken in f32, which for a linear exact op gives the
 * exact derivative; same tolerances. (test_precision uses this mode on 16-bit casts,
 * with its own wider tolerances, since the rounding is the point there.)
 * Each check prints one line with the worst error relative to its tolerance.
 * Returns the number of mismatches (also CHECKed). */
#ifndef GRADCHECK_H
#define GRADCHECK_H
#include "vtest.h"
#include "volt/volt.h"
#include "core/device.h"   /* grads read through device copies */

typedef volt_tensor *(*gc_fn)(volt_step *s, volt_tensor **in, void *ctx);
typedef struct gc_input {
    volt_dtype dt;
    volt_shape shape;
    bool diff;            /* check the gradient w.r.t. this input */
    const void *data;     /* initial values, or NULL for random: floats ~ N(0,1)*scale, ints in [0, int_hi) */
    int64_t int_hi;
    float scale;          /* 0 = 1 */
} gc_input;
/* The double-precision reference: y (the op's output, in its layout) from x[i] (input i as
 * doubles: floats exactly, integer ids and masks as their values). */
typedef void (*gc_ref_fn)(const gc_input *ins, double *const *x, double *y, void *ctx);
#define GC_F32(shp) ((gc_input){ .dt = VOLT_F32, .shape = shp, .diff = true })
#define GC_F32_CONST(shp) ((gc_input){ .dt = VOLT_F32, .shape = shp, .diff = false })
#define GC_INDEX(shp, hi) ((gc_input){ .dt = VOLT_I64, .shape = shp, .diff = false, .int_hi = hi })

static double gc_rtol = 2e-5, gc_atol = 2e-5;           /* analytic (f32) vs numeric (f64) */
static double gc_fwd_rtol = 1e-5, gc_fwd_atol = 1e-5;   /* f32 forward vs the f64 reference */
static double gc_h = 1e-6;                              /* f64 central-difference step */
static double gc_eps = 0.25;                            /* f32 step for ref == NULL (exact ops) */

static uint64_t gc_rng_state = 0x9E3779B97F4A7C15ull;
static inline double gc_uniform(void) {   /* xorshift64*, [0,1) */
    gc_rng_state ^= gc_rng_state >> 12; gc_rng_state ^= gc_rng_state << 25; gc_rng_state ^= gc_rng_state >> 27;
    return (double)((gc_rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static inline double gc_normal(void) {
    double u1 = gc_uniform() + 1e-12, u2 = gc_uniform();
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}
/* Helpers for references: the last dim and the number of rows before it. */
static inline int64_t gc_last(volt_shape s) { return s.ndim ? s.d[s.ndim - 1] : 1; }
static inline int64_t gc_rows(volt_shape s) { int64_t c = gc_last(s); return c ? volt_shape_numel(s) / c : 0; }

/* A float tensor's values (or grad) in a fresh host buffer: device memory is read only
 * through copies (the cpu-strict backend faults on a direct read). */
static float *gc_host_f32(const volt_tensor *t) {
    int64_t ne = volt_tensor_numel(t);
    float *h = malloc(sizeof(float) * (size_t)(ne ? ne : 1));
    volt_tensor_to_host(t, h);
    return h;
}
static void gc_grad_to_host(const volt_tensor *t, float *dst) {
    volt__dev_d2h(t->device, dst, t->grad, sizeof(float) * (size_t)volt_tensor_numel(t));
}

static double gc_loss(volt_step *s, gc_fn f, void *ctx, int n, const gc_input *ins, void **bufs,
                      const float *R, int64_t *numel_out, volt_tensor **out_t, volt_tensor **in_t) {
    volt_step_begin(s, true, 7);
    for (int i = 0; i < n; i++) {
        in_t[i] = volt_tensor_from_host(s, ins[i].dt, ins[i].shape, bufs[i]);   /* onto the step's device */
        if (ins[i].diff) volt_tensor_requires_grad(s, in_t[i]);
    }
    volt_tensor *out = f(s, in_t, ctx);
    *out_t = out;
    if (!out) return NAN;
    *numel_out = volt_tensor_numel(out);
    if (!R) return 0;
    double L = 0;
    float *y = gc_host_f32(out);
    for (int64_t k = 0; k < *numel_out; k++) L += (double)y[k] * R[k];
    free(y);
    return L;
}

static double gc_ref_loss(gc_ref_fn ref, void *ctx, const gc_input *ins, double *const *xd, double *yd,
                          const float *R, int64_t on) {
    ref(ins, xd, yd, ctx);
    double L = 0;
    for (int64_t k = 0; k < on; k++) L += yd[k] * R[k];
    return L;
}

static double gc_as_double(const void *buf, volt_dtype dt, int64_t k) {
    switch (dt) {
    case VOLT_F32: return ((const float *)buf)[k];
    case VOLT_I64: return (double)((const int64_t *)buf)[k];
    case VOLT_I32: return ((const int32_t *)buf)[k];
    case VOLT_U8: return ((const uint8_t *)buf)[k];
    default: return NAN;
    }
}

__attribute__((unused)) static int gradcheck(const char *name, gc_fn f, gc_ref_fn ref, void *ctx, int n, const gc_input *ins) {
    volt_step_config cfg;
    volt_step_config_init(&cfg);
    cfg.arena_bytes = 1 << 20;
    cfg.seed = 1234;
    volt_step *s;
    if (volt_step_create(&cfg, &s) != VOLT_OK) { CHECK(0, "%s: step_create", name); return 1; }
    void *bufs[8];
    double *xd[8] = { 0 }, *yd = NULL;
    volt_tensor *in_t[8], *out;
    for (int i = 0; i < n; i++) {
        int64_t ne = volt_shape_numel(ins[i].shape);
        size_t bytes = (size_t)(ne ? ne : 1) * volt_dtype_size(ins[i].dt);
        bufs[i] = malloc(bytes);
        if (ins[i].data) memcpy(bufs[i], ins[i].data, bytes);
        else for (int64_t k = 0; k < ne; k++) {
            if (ins[i].dt == VOLT_F32) ((float *)bufs[i])[k] = (float)(gc_normal() * (ins[i].scale ? ins[i].scale : 1));
            else if (ins[i].dt == VOLT_I64) ((int64_t *)bufs[i])[k] = (int64_t)(gc_uniform() * (double)ins[i].int_hi);
            else if (ins[i].dt == VOLT_I32) ((int32_t *)bufs[i])[k] = (int32_t)(gc_uniform() * (double)ins[i].int_hi);
            else if (ins[i].dt == VOLT_U8) ((uint8_t *)bufs[i])[k] = (uint8_t)(gc_uniform() * (double)ins[i].int_hi);
        }
        xd[i] = malloc(sizeof(double) * (size_t)(ne ? ne : 1));
        for (int64_t k = 0; k < ne; k++) xd[i][k] = gc_as_double(bufs[i], ins[i].dt, k);
    }
    int64_t on = 0;
    gc_loss(s, f, ctx, n, ins, bufs, NULL, &on, &out, in_t);
    int bad = 0, fwd_bad = 0;
    double worst = 0, worst_fwd = 0;
    int64_t checked = 0;
    if (!out) {
        CHECK(0, "%s: forward failed: %s", name, volt_step_errmsg(s));
        bad = 1;
        goto done;
    }
    float *R = malloc(sizeof(float) * (size_t)(on ? on : 1));
    for (int64_t k = 0; k < on; k++) R[k] = (float)gc_normal();
    if (ref) {   /* the f32 forward is the reference's function */
        yd = malloc(sizeof(double) * (size_t)(on ? on : 1));
        ref(ins, xd, yd, ctx);
        float *y = gc_host_f32(out);
        for (int64_t k = 0; k < on; k++) {
            double e = fabs(y[k] - yd[k]), tol = gc_fwd_atol + gc_fwd_rtol * fabs(yd[k]);
            if (e / tol > worst_fwd || isnan(e)) worst_fwd = isnan(e) ? INFINITY : e / tol;
            if (!(e <= tol)) {
                if (fwd_bad < 5)
                    fprintf(stderr, "FAIL gradcheck %s: forward elem %lld: f32 %.9g reference %.9g\n",
                            name, (long long)k, y[k], yd[k]);
                fwd_bad++;
            }
        }
        free(y);
    }
    /* analytic */
    volt_status st = volt_step_backward_grad(s, out, R);
    CHECK(st == VOLT_OK, "%s: backward: %s", name, volt_step_errmsg(s));
    float *ana[8] = { 0 };
    for (int i = 0; i < n; i++) {
        if (!ins[i].diff) continue;
        int64_t ne = volt_shape_numel(ins[i].shape);
        ana[i] = calloc((size_t)(ne ? ne : 1), sizeof(float));
        if (in_t[i]->grad) gc_grad_to_host(in_t[i], ana[i]);
    }
    for (int i = 0; i < n; i++) {
        if (!ins[i].diff) continue;
        int64_t ne = volt_shape_numel(ins[i].shape);
        for (int64_t idx = 0; idx < ne; idx++) {   /* every element */
            double num;
            if (ref) {
                double x0 = xd[i][idx];
                xd[i][idx] = x0 + gc_h;
                double lp = gc_ref_loss(ref, ctx, ins, xd, yd, R, on);
                xd[i][idx] = x0 - gc_h;
                double lm = gc_ref_loss(ref, ctx, ins, xd, yd, R, on);
                xd[i][idx] = x0;
                num = (lp - lm) / (2 * gc_h);
            } else {
                float *x = bufs[i], x0 = x[idx], xp = x0 + (float)gc_eps, xm = x0 - (float)gc_eps;
                x[idx] = xp;
                double lp = gc_loss(s, f, ctx, n, ins, bufs, R, &on, &out, in_t);
                x[idx] = xm;
                double lm = gc_loss(s, f, ctx, n, ins, bufs, R, &on, &out, in_t);
                x[idx] = x0;
                num = (lp - lm) / ((double)xp - (double)xm);
            }
            double an = ana[i][idx], e = fabs(num - an);
            double tol = gc_atol + gc_rtol * fmax(fabs(num), fabs(an));
            if (e / tol > worst || isnan(e)) worst = isnan(e) ? INFINITY : e / tol;
            checked++;
            if (!(e <= tol)) {
                if (bad < 5)
                    fprintf(stderr, "FAIL gradcheck %s: input %d elem %lld: analytic %.9g numeric %.9g\n",
                            name, i, (long long)idx, an, num);
                bad++;
            }
        }
        free(ana[i]);
    }
    free(R);
    printf("gradcheck %-44s %5lld grads, worst |err|/tol %.3f%s", name, (long long)checked, worst,
           ref ? "" : " (f32 differences)\n");
    if (ref) printf(", forward %.3f\n", worst_fwd);
    CHECK(fwd_bad == 0, "gradcheck %s: forward differs from the double reference at %d elements", name, fwd_bad);
    CHECK(bad == 0, "gradcheck %s: %d mismatches", name, bad);
    bad += fwd_bad;
done:
    volt_step_end(s);
    volt_step_destroy(s);
    for (int i = 0; i < n; i++) { free(bufs[i]); free(xd[i]); }
    free(yd);
    return bad;
}
#endif
