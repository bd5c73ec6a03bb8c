/* core/kernel_math.h — small formulas that the cpu kernels and the cuda kernels both
 * compute, written once (as core/convert.h does for the bit conversions), so the two
 * backends agree by construction, not by keeping two copies in step: the grad scaler's
 * update and max_pool2d's window. __host__ __device__ under nvcc. */
#ifndef VOLT_KERNEL_MATH_H
#define VOLT_KERNEL_MATH_H
#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define VOLT_KERNEL_FN static __host__ __device__ __forceinline__
#else
#define VOLT_KERNEL_FN static inline
#endif

/* torch.amp.GradScaler.update: back off after an inf/NaN step, grow after `interval` clean
 * steps (a growth that would overflow is skipped). found_inf stays: the step's decision until
 * the next unscale clears it (a captured step's host reads it after the launch). */
VOLT_KERNEL_FN void volt__scaler_update(float *scale, float *found_inf, int64_t *growth_tracker, float growth,
                                        float backoff, int64_t interval) {
    if (*found_inf != 0.f) {
        *scale *= backoff;
        *growth_tracker = 0;
    } else if (++*growth_tracker >= interval) {
        float grown = *scale * growth;
        if (isfinite(grown)) *scale = grown;
        *growth_tracker = 0;
    }
}

/* max_pool2d's window at output (oh, ow) of one (H, W) plane xp, kernel k, stride S: the
 * maximum (first one on ties, NaN wins, as PyTorch) into *m; returns its index in the plane. */
VOLT_KERNEL_FN int64_t volt__pool_window(const float *xp, int64_t W, int64_t oh, int64_t ow, int64_t k, int64_t S,
                                         float *m) {
    int64_t best = oh * S * W + ow * S;
    float mx = xp[best];
    for (int64_t kh = 0; kh < k; kh++)
        for (int64_t kw = 0; kw < k; kw++) {
            int64_t at = (oh * S + kh) * W + ow * S + kw;
            float v = xp[at];
            if (v > mx || (isnan(v) && !isnan(mx))) { mx = v; best = at; }
        }
    *m = mx;
    return best;
}
#endif
