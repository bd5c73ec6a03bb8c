/* The "cuda" backend's parameter math (core/device.h, volt_param_math) over the kernels of
 * core/cuda/param_math.cu and the double reductions of rows.cu. Every scalar the math
 * needs (the squared norm, the scaler's state, the optimizer's coefficients) is read on the
 * device: nothing here synchronizes with the host. */
#include <stddef.h>
#include "core/cuda/cuda.h"

_Static_assert(sizeof(volt_cu_scaler) == sizeof(volt_scaler_state) &&
               offsetof(volt_cu_scaler, found_inf) == offsetof(volt_scaler_state, found_inf) &&
               offsetof(volt_cu_scaler, growth_tracker) == offsetof(volt_scaler_state, growth_tracker),
               "volt_cu_scaler mirrors volt_scaler_state");
_Static_assert(sizeof(volt_cu_coef) == sizeof(volt_opt_coef) &&
               offsetof(volt_cu_coef, first) == offsetof(volt_opt_coef, first) &&
               offsetof(volt_cu_coef, decay) == offsetof(volt_opt_coef, decay) &&
               offsetof(volt_cu_coef, neg_step_size) == offsetof(volt_opt_coef, neg_step_size) &&
               offsetof(volt_cu_coef, avg_op) == offsetof(volt_opt_coef, avg_op) &&
               offsetof(volt_cu_coef, avg_b) == offsetof(volt_opt_coef, avg_b),
               "volt_cu_coef mirrors volt_opt_coef");

static volt_cuda_ctx *use(volt_device *d) {
    volt_cuda_ctx *c = volt__cuda_ctx(d);
    volt__cuda_use(c);
    return c;
}
static void note(volt_cuda_ctx *c, int rc) {
    if (rc && !c->error) c->error = rc;
}

static void pm_scale(volt_device *d, float *x, int64_t n, float coef) {
    volt_cuda_ctx *c = use(d);
    note(c, volt_cu_pm_scale(c->stream, x, n, coef));
}
static void pm_sqnorm_acc(volt_device *d, const float *x, int64_t n, double *acc) {
    volt_cuda_ctx *c = use(d);
    note(c, volt_cu_reduce(c->stream, 1, x, NULL, n, c->partials, NULL, 1.0, acc));
}
static void pm_clip_by_norm(volt_device *d, float *x, int64_t n, const double *sqnorm, float max_norm) {
    volt_cuda_ctx *c = use(d);
    note(c, volt_cu_pm_clip_by_norm(c->stream, x, n, sqnorm, max_norm));
}
static void pm_clip_value(volt_device *d, float *x, int64_t n, float v) {
    volt_cuda_ctx *c = use(d);
    note(c, volt_cu_pm_clip_value(c->stream, x, n, v));
}
static void pm_unscale(volt_device *d, float *x, int64_t n, volt_scaler_state *st) {
    volt_cuda_ctx *c = use(d);
    note(c, volt_cu_pm_unscale(c->stream, x, n, (volt_cu_scaler *)(void *)st));
}
static void pm_scaler_update(volt_device *d, volt_scaler_state *st, float growth, float backoff, int64_t interval) {
    volt_cuda_ctx *c = use(d);
    note(c, volt_cu_pm_scaler_update(c->stream, (volt_cu_scaler *)(void *)st, growth, backoff, interval));
}
static void pm_update(volt_device *d, const volt_update_args *a) {
    volt_cuda_ctx *c = use(d);
    note(c, volt_cu_pm_update(c->stream, (int)a->kind, a->p, (int)a->p_dt, a->g, a->s0, a->s1, (int)a->s_dt, a->n,
                              (const volt_cu_coef *)(const void *)a->coef, a->skip));
}
static void pm_convert(volt_device *d, void *dst, volt_dtype dst_dt, const void *src, volt_dtype src_dt, int64_t n) {
    volt_cuda_ctx *c = use(d);
    if (n <= 0) return;
    if (dst_dt == src_dt) {
        if (dst != src)
            note(c, (int)cudaMemcpyAsync(dst, src, (size_t)n * volt_dtype_size(dst_dt), cudaMemcpyDeviceToDevice, c->stream));
        return;
    }
    note(c, volt_cu_convert(c->stream, dst, (int)dst_dt, src, (int)src_dt, n));
}

static void pm_average(volt_device *d, void *avg, volt_dtype a_dt, const void *p, volt_dtype p_dt, int64_t n,
                       const volt_opt_coef *coef, const float *skip) {
    volt_cuda_ctx *c = use(d);
    note(c, volt_cu_pm_average(c->stream, avg, (int)a_dt, p, (int)p_dt, n, (const volt_cu_coef *)(const void *)coef, skip));
}

const volt_param_math volt__cuda_param_math = {
    .scale = pm_scale, .sqnorm_acc = pm_sqnorm_acc, .clip_by_norm = pm_clip_by_norm, .clip_value = pm_clip_value,
    .unscale = pm_unscale, .scaler_update = pm_scaler_update, .update = pm_update, .convert = pm_convert,
    .average = pm_average,
};
