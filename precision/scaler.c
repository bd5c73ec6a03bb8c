/* The dynamic grad scaler of 16-mixed: torch.amp.GradScaler's unscale_ and update, on the
 * param store's f32 grad buffers, as the backend's parameter math on a device state.
 *
 * unscale: g *= 1/scale (the reciprocal rounded to f32 once, as torch does; scales are
 * powers of two in practice, so this is exact), found_inf if any scaled grad is inf/NaN.
 * update: on inf/NaN scale *= backoff and the tracker restarts; otherwise the tracker
 * counts good steps and every growth_interval of them scale *= growth (kept finite).
 *
 * Host reads: found_inf once per boundary (unscale), the state once after update (the
 * host copy logging and checkpoints use). A captured step (compile) reads neither: the
 * optimizer's updates and the scaler update read found_inf on the device, and the host
 * copy is refreshed once after each launch (read_back), which also says if it skipped. */
#include <math.h>
#include <string.h>
#include "precision/precision.h"
#include "core/units.h"
#include "core/internal.h"

volt_status volt__scaler_attach(volt_grad_scaler *g, volt_device *d) {
    if (g->state) return VOLT_OK;
    if (!(g->state = volt__dev_alloc(d, sizeof *g->state))) return VOLT_ERR_NOMEM;
    g->dev = d;
    const volt_scaler_state h = { .scale = g->scale, .found_inf = 0.f, .growth_tracker = g->growth_tracker };
    volt__dev_h2d(d, g->state, &h, sizeof h);
    return VOLT_OK;
}

void volt__scaler_unscale(volt_grad_scaler *g, volt_params *ps, bool *found_inf) {
    if (volt__scaler_attach(g, ps->dev) < 0) {   /* no state: skip the step */
        if (found_inf) *found_inf = true;
        return;
    }
    const volt_param_math *pm = g->dev->be->pm;
    /* static: a captured step re-issues its H2D copies from the same host address per launch */
    static const float zero = 0.f;
    volt__dev_h2d(g->dev, &g->state->found_inf, &zero, sizeof zero);   /* address arithmetic only */
    for (int i = 0; i < volt_params_unit_count(ps); i++) {
        volt_unit *u = volt_params_unit_at(ps, i);
        int64_t lo, hi;
        volt__unit_grad_range(u, &lo, &hi);   /* the owned slice under ZeRO-2/FSDP */
        float *gr = volt_unit_grad(u);
        if (gr && hi > lo) pm->unscale(g->dev, gr + lo, hi - lo, g->state);
    }
    if (!found_inf) return;   /* a captured step: the flag stays on the device */
    float f = 0.f;
    volt__dev_d2h(g->dev, &f, &g->state->found_inf, sizeof f);   /* the one read per boundary */
    *found_inf = f != 0.f;
}

void volt__scaler_update_on_device(volt_grad_scaler *g) {
    if (g->state) g->dev->be->pm->scaler_update(g->dev, g->state, g->growth_factor, g->backoff_factor, g->growth_interval);
}

void volt__scaler_read_back(volt_grad_scaler *g, bool *skipped) {
    *skipped = false;
    if (!g->state) return;
    volt_scaler_state h;
    volt__dev_d2h(g->dev, &h, g->state, sizeof h);
    g->scale = h.scale;
    g->growth_tracker = h.growth_tracker;
    *skipped = h.found_inf != 0.f;
}

void volt__scaler_update(volt_grad_scaler *g, bool found_inf) {
    if (!g->state) {   /* no unscale ran yet: the default device ("auto") holds the state */
        volt_device *d = NULL;
        char err[256];
        if (volt__device_get(NULL, 0, &d, err, sizeof err) < 0 || volt__scaler_attach(g, d) < 0) {
            if (found_inf) { g->scale *= g->backoff_factor; g->growth_tracker = 0; }   /* torch's rule, on the host */
            else if (++g->growth_tracker >= g->growth_interval) {
                const float grown = g->scale * g->growth_factor;
                if (isfinite(grown)) g->scale = grown;
                g->growth_tracker = 0;
            }
            return;
        }
    }
    const float f = found_inf ? 1.f : 0.f;   /* the all-rank vote */
    volt__dev_h2d(g->dev, &g->state->found_inf, &f, sizeof f);
    g->dev->be->pm->scaler_update(g->dev, g->state, g->growth_factor, g->backoff_factor, g->growth_interval);
    volt_scaler_state h;
    volt__dev_d2h(g->dev, &h, g->state, sizeof h);
    g->scale = h.scale;
    g->growth_tracker = h.growth_tracker;
}

void volt__scaler_set(volt_grad_scaler *g, float scale, int64_t growth_tracker) {
    g->scale = scale;
    g->growth_tracker = growth_tracker;
    if (!g->state) return;
    const volt_scaler_state h = { .scale = scale, .found_inf = 0.f, .growth_tracker = growth_tracker };
    volt__dev_h2d(g->dev, g->state, &h, sizeof h);
}

void volt__scaler_release(volt_grad_scaler *g) {
    if (g->state) volt__dev_free(g->dev, g->state);
    g->state = NULL;
    g->dev = NULL;
}
