/* The "cuda" backend's parameter math kernels (core/device.h, volt_param_math): scale, clip
 * by norm (the coefficient computed on the device from the device squared norm), clip by
 * value, unscale + found-inf, the grad scaler's update, and the SGD / Adam / AdamW update
 * over f32 or 16-bit values and states. Compiled with -fmad=false (CMakeLists.txt): the
 * same f32 operations in the same order as core/cpu/param_math.c, no FMA contraction, IEEE
 * division and sqrt (nvcc's defaults), so an update matches the CPU's baseline build
 * element for element. No host synchronisation: every scalar is read on the device. */
#include <math.h>
#include "core/cuda/common.cuh"
#include "core/kernel_math.h"

__global__ void k_pm_scale(float *x, int64_t n, float c) { VOLT_CU_FOR(i, n) x[i] *= c; }
extern "C" int volt_cu_pm_scale(void *s, float *x, int64_t n, float coef) {
    if (n <= 0) return 0;
    k_pm_scale<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, n, coef);
    VOLT_CU_DONE();
}

__global__ void k_pm_clip_norm(float *x, int64_t n, const double *sqnorm, float max_norm) {
    const double norm = sqrt(*sqnorm);
    if (!isfinite(norm)) return;   /* like PyTorch (error_if_nonfinite=False) */
    const float coef = (float)(max_norm / (norm + 1e-6));
    if (!(coef < 1.0f)) return;
    VOLT_CU_FOR(i, n) x[i] *= coef;
}
extern "C" int volt_cu_pm_clip_by_norm(void *s, float *x, int64_t n, const double *sqnorm, float max_norm) {
    if (n <= 0) return 0;
    k_pm_clip_norm<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, n, sqnorm, max_norm);
    VOLT_CU_DONE();
}

__global__ void k_pm_clip_value(float *x, int64_t n, float v) {
    VOLT_CU_FOR(i, n) x[i] = x[i] > v ? v : (x[i] < -v ? -v : x[i]);
}
extern "C" int volt_cu_pm_clip_value(void *s, float *x, int64_t n, float v) {
    if (n <= 0) return 0;
    k_pm_clip_value<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, n, v);
    VOLT_CU_DONE();
}

/* inf/NaN checked on the scaled value (exponent all ones), as torch does; found_inf is only
 * ever set (every writer stores 1.f) */
__global__ void k_pm_unscale(float *x, int64_t n, volt_cu_scaler *st) {
    const float inv = (float)(1.0 / (double)st->scale);
    bool bad = false;
    VOLT_CU_FOR(i, n) {
        bad |= (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
        x[i] *= inv;
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) st->found_inf = 1.f;
}
extern "C" int volt_cu_pm_unscale(void *s, float *x, int64_t n, volt_cu_scaler *st) {
    if (n <= 0) return 0;
    k_pm_unscale<<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(x, n, st);
    VOLT_CU_DONE();
}

__global__ void k_pm_scaler_update(volt_cu_scaler *st, float growth, float backoff, int64_t interval) {
    volt__scaler_update(&st->scale, &st->found_inf, &st->growth_tracker, growth, backoff, interval);
}
extern "C" int volt_cu_pm_scaler_update(void *s, volt_cu_scaler *st, float growth, float backoff, int64_t interval) {
    k_pm_scaler_update<<<1, 1, 0, VOLT_CU_STREAM(s)>>>(st, growth, backoff, interval);
    VOLT_CU_DONE();
}

/* One element of torch's _single_tensor_sgd / _single_tensor_adam (core/cpu/param_math.c). */
__device__ __forceinline__ void sgd_elem(const volt_cu_coef &c, float &p, float g, float *b) {
    if (c.wd != 0.f) g = g + c.wd * p;                          /* grad.add(param, alpha=wd) */
    if (b) {
        float bi = c.first ? g : *b * c.momentum + c.one_minus_damp * g;
        *b = bi;
        g = c.nesterov ? g + c.momentum * bi : bi;
    }
    p = p + c.neg_lr * g;                                        /* param.add_(grad, -lr) */
}
__device__ __forceinline__ void adam_elem(const volt_cu_coef &c, bool adamw, float &p, float g, float &m, float &v) {
    if (adamw && c.decay != 1.f) p = p * c.decay;                /* AdamW: param.mul_(1 - lr*wd) */
    if (!adamw && c.wd != 0.f) g = g + c.wd * p;                 /* Adam: grad.add(param, alpha=wd) */
    m = fabsf(c.w1) < 0.5f ? m + c.w1 * (g - m) : g - (g - m) * c.one_minus_w1;   /* lerp_ */
    v = v * c.beta2;
    v = v + c.w2 * g * g;                                        /* addcmul_(g, g, 1-b2) */
    float denom = sqrtf(v) / c.bc2_sqrt + c.eps;
    p = p + c.neg_step_size * m / denom;                         /* addcdiv_ */
}
/* One element, the value and states loaded and stored in their dtypes. */
__device__ __forceinline__ void pm_elem(int kind, const volt_cu_coef &c, float &pi, float g, float *b, float &m,
                                        float &v) {
    if (kind == 0) sgd_elem(c, pi, g, b);
    else adam_elem(c, kind == 2, pi, g, m, v);
}
struct op_pm_update {
    int kind;
    void *p;
    int p_dt;
    const float *g;
    void *s0, *s1;
    int s_dt;
    const volt_cu_coef *coef;
    const float *skip;   /* NULL or a device flag: nonzero = store nothing (16-mixed's inf/NaN step) */
    /* DRAM bytes per element (the simulator's launch trace: docs/CUDA.md's inventory) */
    __host__ __device__ int bytes_per_item() const {
        const int ps = p_dt == VOLT_CU_F32 ? 4 : 2, ss = s_dt == VOLT_CU_F32 ? 4 : 2;
        return 2 * ps + 4 + (s0 ? 2 * ss : 0) + (s1 ? 2 * ss : 0);
    }
    __device__ void one(int64_t i) const {
        if (skip && *skip != 0.f) return;
        const volt_cu_coef c = *coef;
        float pi = vcu_load(p, p_dt, i), b = 0.f, m = 0.f, v = 0.f;
        if (kind == 0) {
            if (s0) b = vcu_load(s0, s_dt, i);
        } else {
            m = vcu_load(s0, s_dt, i);
            v = vcu_load(s1, s_dt, i);
        }
        pm_elem(kind, c, pi, g[i], kind == 0 && s0 ? &b : nullptr, m, v);
        if (kind == 0 && s0) vcu_store(s0, s_dt, i, b);
        if (kind != 0) { vcu_store(s0, s_dt, i, m); vcu_store(s1, s_dt, i, v); }
        vcu_store(p, p_dt, i, pi);
    }
    /* all f32 and 16-byte aligned (the launcher checked): float4 loads and stores */
    __device__ void four(int64_t q) const {
        if (skip && *skip != 0.f) return;
        const volt_cu_coef c = *coef;
        float4 P = VCU_F4(p, q), G = VCU_CF4(g, q), M = make_float4(0.f, 0.f, 0.f, 0.f), V = M;
        if (s0) M = VCU_F4(s0, q);
        if (kind != 0) V = VCU_F4(s1, q);
        float *pp = &P.x, *gg = &G.x, *mm = &M.x, *vv = &V.x;
        for (int k = 0; k < 4; k++) pm_elem(kind, c, pp[k], gg[k], kind == 0 && s0 ? &mm[k] : nullptr, mm[k], vv[k]);
        VCU_F4(p, q) = P;
        if (s0) VCU_F4(s0, q) = M;
        if (kind != 0) VCU_F4(s1, q) = V;
    }
};
extern "C" int volt_cu_pm_update(void *s, int kind, void *p, int p_dt, const float *g, void *s0, void *s1, int s_dt,
                                 int64_t n, const volt_cu_coef *coef, const float *skip) {
    if (n <= 0) return 0;
    const bool vec = n >= 4 && p_dt == VOLT_CU_F32 && volt_cu_aligned(p, 16) && volt_cu_aligned(g, 16) &&
                     (!s0 || (s_dt == VOLT_CU_F32 && volt_cu_aligned(s0, 16))) &&
                     (!s1 || (s_dt == VOLT_CU_F32 && volt_cu_aligned(s1, 16)));
    const op_pm_update op{kind, p, p_dt, g, s0, s1, s_dt, coef, skip};
    k_map<op_pm_update><<<volt_cu_blocks(vec ? n / 4 : n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(op, n, vec);
    VOLT_CU_DONE();
}

/* Weight averaging: one element of volt_avg_op (core/cpu/param_math.c's avg_elem, the same
 * f32 operations; -fmad=false keeps the EMA's two products and sum apart). */
struct op_pm_average {
    void *avg;
    int a_dt;
    const void *p;
    int p_dt;
    const volt_cu_coef *coef;
    const float *skip;
    __host__ __device__ int bytes_per_item() const {
        return 2 * (a_dt == VOLT_CU_F32 ? 4 : 2) + (p_dt == VOLT_CU_F32 ? 4 : 2);
    }
    __device__ void one(int64_t i) const {
        if (skip && *skip != 0.f) return;
        const int op = coef->avg_op;
        if (op == 0) return;
        const float a = coef->avg_a, b = coef->avg_b, pv = vcu_load(p, p_dt, i);
        float av = vcu_load(avg, a_dt, i);
        if (op == 1) av = pv;
        else if (op == 2) { const float x = a * av, y = b * pv; av = x + y; }
        else av = a < 0.5f ? av + a * (pv - av) : pv - (pv - av) * (1.f - a);
        vcu_store(avg, a_dt, i, av);
    }
    __device__ void four(int64_t q) const {
        for (int k = 0; k < 4; k++) one(4 * q + k);
    }
};
extern "C" int volt_cu_pm_average(void *s, void *avg, int a_dt, const void *p, int p_dt, int64_t n, const volt_cu_coef *coef,
                                  const float *skip) {
    if (n <= 0) return 0;
    const op_pm_average op{avg, a_dt, p, p_dt, coef, skip};
    k_map<op_pm_average><<<volt_cu_blocks(n), VOLT_CU_THREADS, 0, VOLT_CU_STREAM(s)>>>(op, n, false);
    VOLT_CU_DONE();
}
