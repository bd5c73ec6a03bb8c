/* Weight averaging on the optimizer (volt/optim.h, volt_optimizer_enable_average; Lightning's
 * WeightAveraging / torch's AveragedModel): the average is the optimizer's last state,
 * "weight_average", started as a copy of the values over each unit's range; the step
 * (core/optim.c) updates it per unit after the unit's parameter updates through the
 * backend's pm->average, what that does (copy, EMA, lerp, nothing) being part of the step's
 * coefficients. Swap, copy and reset are device-to-device copies: every bit comes back. */
#include <stdio.h>
#include <string.h>
#include "core/optim_internal.h"
#include "volt/dtype.h"

/* The average's part of the coefficients: what an update with `on` does (every group's the same). */
void volt__optim_avg_coef(const volt_optimizer *opt, bool on, volt_opt_coef *c) {
    c->avg_op = VOLT_AVG_NONE;
    c->avg_a = c->avg_b = 0.f;
    if (!opt->avg_mode || !on) return;
    if (opt->avg_count == 0) { c->avg_op = VOLT_AVG_COPY; return; }   /* AveragedModel: n_averaged == 0 copies */
    if (opt->avg_mode == VOLT_OPTIM_AVERAGE_EMA) {
        c->avg_op = VOLT_AVG_EMA;
        c->avg_a = opt->avg_decay;                                 /* decay * ema, the decay as an f32 scalar */
        c->avg_b = (float)(1.0 - (double)opt->avg_decay);          /* (1 - decay) in double (Python), then f32 */
    } else {
        c->avg_op = VOLT_AVG_LERP;
        c->avg_a = 1.0f / (float)(opt->avg_count + 1);             /* 1 / (n_averaged + 1): an f32 tensor in torch */
    }
}

/* The average of ou's range [lo, hi) from its values: one launch per unit, every element
 * (frozen parameters and padding too, as AveragedModel averages every parameter), after the
 * unit's updates; coef_dev's avg_op says what it does (NONE: nothing), so a captured step
 * holds the launch whatever the gate. */
void volt__optim_average_unit(volt_optimizer *opt, const opt_unit *ou, const float *skip) {
    if (!opt->avg_mode || ou->hi <= ou->lo) return;
    const volt_dtype vdt = volt_params_dtype(opt->ps);
    opt->dev->be->pm->average(opt->dev, ou->state[opt->avg_k], opt->state_dt,
                              (const char *)volt_unit_values(ou->u) + (size_t)ou->lo * volt_dtype_size(vdt), vdt,
                              ou->hi - ou->lo, opt->coef_dev, skip);
    opt->launches++;
}

volt_status volt_optimizer_enable_average(volt_optimizer *opt, volt_optim_average mode, float decay) {
    if (!opt) return VOLT_ERR_INVALID_ARG;
    opt->errmsg[0] = 0;
    if (mode != VOLT_OPTIM_AVERAGE_EMA && mode != VOLT_OPTIM_AVERAGE_SWA)
        return opt_fail(opt, VOLT_ERR_INVALID_ARG, "weight averaging: unknown mode %d", (int)mode);
    if (mode == VOLT_OPTIM_AVERAGE_EMA && !(decay >= 0.f && decay < 1.f))
        return opt_fail(opt, VOLT_ERR_INVALID_ARG, "weight averaging: decay %g is not in [0, 1)", (double)decay);
    if (opt->avg_mode) return opt_fail(opt, VOLT_ERR_STATE, "weight averaging: already enabled on this optimizer");
    if (opt->steps > 0) return opt_fail(opt, VOLT_ERR_STATE, "weight averaging: enable it before the first step");
    const volt_dtype vdt = volt_params_dtype(opt->ps);
    if (vdt != opt->state_dt)
        return opt_fail(opt, VOLT_ERR_UNSUPPORTED, "weight averaging: the parameters are %s and the optimizer states %s: the "
                        "average is kept in the states' dtype and swapped with the parameters, which is exact only when the "
                        "two match (set optimizer_dtype to the parameters' dtype)", volt_dtype_name(vdt),
                        volt_dtype_name(opt->state_dt));
    if (!volt__dev_pm_average(opt->dev))
        return opt_fail(opt, VOLT_ERR_UNSUPPORTED, "weight averaging: backend '%s' has no averaging kernel (backend table "
                        "version %u, 6 needed)", opt->dev->be->name, opt->dev->be->version);
    const int k = opt->n_states;
    for (int i = 0; i < opt->n_units; i++) {
        opt_unit *ou = &opt->units[i];
        if (ou->hi <= ou->lo) continue;
        if (!volt_unit_values(ou->u))
            return opt_fail(opt, VOLT_ERR_STATE, "weight averaging: unit '%s' has no values", volt_unit_name(ou->u));
        ou->state[k] = volt__dev_alloc(opt->dev, (size_t)(ou->hi - ou->lo) * volt_dtype_size(opt->state_dt));
        if (!ou->state[k]) {
            for (int j = 0; j < i; j++) { volt__dev_free(opt->dev, opt->units[j].state[k]); opt->units[j].state[k] = NULL; }
            return opt_fail(opt, VOLT_ERR_NOMEM, "weight averaging: out of device memory for the average of unit '%s'",
                            volt_unit_name(ou->u));
        }
    }
    opt->n_states = k + 1;
    opt->avg_k = k;
    opt->avg_mode = mode;
    opt->avg_decay = decay;
    opt->avg_next = true;
    return volt_optimizer_average_reset(opt);   /* AveragedModel starts as a copy of the model */
}

volt_optim_average volt_optimizer_average_mode(const volt_optimizer *opt) { return opt ? opt->avg_mode : VOLT_OPTIM_AVERAGE_NONE; }
void volt_optimizer_set_average_updates(volt_optimizer *opt, bool update) { if (opt) opt->avg_next = update; }
int64_t volt_optimizer_average_count(const volt_optimizer *opt) { return opt ? opt->avg_count : 0; }
void volt_optimizer_set_average_count(volt_optimizer *opt, int64_t n) { if (opt) opt->avg_count = n > 0 ? n : 0; }

volt_status volt_optimizer_average_update(volt_optimizer *opt) {
    if (!opt) return VOLT_ERR_INVALID_ARG;
    if (!opt->avg_mode) return opt_fail(opt, VOLT_ERR_STATE, "weight averaging: not enabled");
    volt_opt_coef c = opt->coef_host[0];
    volt__optim_avg_coef(opt, true, &c);
    /* its own coefficients in the first group's slot: the next step (or a replay) rewrites them */
    opt->coef_host[0] = c;
    volt__dev_h2d(opt->dev, opt->coef_dev, opt->coef_host, sizeof opt->coef_host[0]);
    for (int i = 0; i < opt->n_units; i++) volt__optim_average_unit(opt, &opt->units[i], NULL);
    opt->avg_count++;
    return VOLT_OK;
}

/* exchange (swap) or copy (average -> values) over every unit's range, through one scratch
 * buffer of the largest range: D2D copies only, so every bit comes back */
static volt_status avg_move(volt_optimizer *opt, bool swap) {
    if (!opt) return VOLT_ERR_INVALID_ARG;
    if (!opt->avg_mode) return opt_fail(opt, VOLT_ERR_STATE, "weight averaging: not enabled");
    const size_t esz = volt_dtype_size(opt->state_dt);
    int64_t most = 0;
    for (int i = 0; i < opt->n_units; i++)
        if (opt->units[i].hi - opt->units[i].lo > most) most = opt->units[i].hi - opt->units[i].lo;
    void *tmp = NULL;
    if (swap && most > 0 && !(tmp = volt__dev_alloc(opt->dev, (size_t)most * esz)))
        return opt_fail(opt, VOLT_ERR_NOMEM, "weight averaging: out of device memory for the swap (%lld bytes)",
                        (long long)((size_t)most * esz));
    for (int i = 0; i < opt->n_units; i++) {
        const opt_unit *ou = &opt->units[i];
        const int64_t n = ou->hi - ou->lo;
        if (n <= 0) continue;
        if (!volt_unit_values(ou->u)) {
            volt__dev_free(opt->dev, tmp);
            return opt_fail(opt, VOLT_ERR_STATE, "weight averaging: unit '%s' has no values", volt_unit_name(ou->u));
        }
        char *v = (char *)volt_unit_values(ou->u) + (size_t)ou->lo * esz;
        void *a = ou->state[opt->avg_k];
        if (swap) {
            volt__dev_d2d(opt->dev, tmp, v, (size_t)n * esz);
            volt__dev_d2d(opt->dev, v, a, (size_t)n * esz);
            volt__dev_d2d(opt->dev, a, tmp, (size_t)n * esz);
        } else {
            volt__dev_d2d(opt->dev, v, a, (size_t)n * esz);
        }
    }
    volt__dev_free(opt->dev, tmp);
    return VOLT_OK;
}
volt_status volt_optimizer_average_swap(volt_optimizer *opt) { return avg_move(opt, true); }
volt_status volt_optimizer_average_copy_to_params(volt_optimizer *opt) { return avg_move(opt, false); }

volt_status volt_optimizer_average_reset(volt_optimizer *opt) {
    if (!opt) return VOLT_ERR_INVALID_ARG;
    if (!opt->avg_mode) return opt_fail(opt, VOLT_ERR_STATE, "weight averaging: not enabled");
    const size_t esz = volt_dtype_size(opt->state_dt);
    for (int i = 0; i < opt->n_units; i++) {
        const opt_unit *ou = &opt->units[i];
        if (ou->hi > ou->lo)
            volt__dev_d2d(opt->dev, ou->state[opt->avg_k], (const char *)volt_unit_values(ou->u) + (size_t)ou->lo * esz,
                          (size_t)(ou->hi - ou->lo) * esz);
    }
    opt->avg_count = 0;
    return VOLT_OK;
}
