/* The dynamic grad scaler of 16-mixed: torch.amp.GradScaler's unscale_ and update, on the
 * param store's f32 grad buffers.
 *
 * unscale: g *= 1/scale (the reciprocal rounded to f32 once, as torch does; scales are
 * powers of two in practice, so this is exact), found_inf if any scaled grad is inf/NaN.
 * update: on inf/NaN scale *= backoff and the tracker restarts; otherwise the tracker
 * counts good steps and every growth_interval of them scale *= growth (kept finite). */
#include <math.h>
#include <string.h>
#include "precision/precision.h"
#include "core/units.h"

#define UNSCALE_PAR_MIN 65536

typedef uint32_t __attribute__((may_alias)) u32a;

void volt__scaler_unscale(volt_grad_scaler *g, volt_params *ps, bool *found_inf) {
    const float inv = (float)(1.0 / (double)g->scale);
    unsigned bad = 0;
    for (int i = 0; i < volt_params_unit_count(ps); i++) {
        volt_unit *u = volt_params_unit_at(ps, i);
        int64_t lo, hi;
        volt__unit_grad_range(u, &lo, &hi);   /* the owned slice under ZeRO-2/FSDP */
        float *gr = volt_unit_grad(u);
        if (!gr) continue;
        gr += lo;
        const int64_t n = hi - lo;
        const u32a *bits = (const u32a *)(const void *)gr;
        /* inf/NaN: exponent all ones; checked on the scaled value, as torch does */
        #pragma omp parallel for simd schedule(static) reduction(|:bad) if (n > UNSCALE_PAR_MIN)
        for (int64_t k = 0; k < n; k++) {
            bad |= (bits[k] & 0x7f800000u) == 0x7f800000u;
            gr[k] *= inv;
        }
    }
    *found_inf = bad != 0;
}

void volt__scaler_update(volt_grad_scaler *g, bool found_inf) {
    if (found_inf) {
        g->scale *= g->backoff_factor;
        g->growth_tracker = 0;
        return;
    }
    if (++g->growth_tracker >= g->growth_interval) {
        float grown = g->scale * g->growth_factor;
        if (isfinite(grown)) g->scale = grown;
        g->growth_tracker = 0;
    }
}
