/* The optimizer boundary, written once for every strategy (Lightning's
 * Strategy.optimizer_step with its precision plugin):
 *
 *   reduce grads (strategy)  ->  unscale + found_inf OR-ed over ranks (precision plugin)
 *   ->  before_step hooks  ->  clip (by value, or by the global norm summed over shards; or
 *   the module's configure_gradient_clipping in its place)
 *   ->  optimizer step (skipped when any rank found inf/NaN)  ->  gather params (strategy)
 *   ->  before_zero_grad hooks  ->  zero grads (strategy; sharded grads give their pages back)
 *   ->  scaler update
 *
 * A captured step (b->on_device, compile) reads nothing on the host: the norm's clip
 * coefficient and 16-mixed's skip are decided on the device (volt_boundary), summed over
 * ranks there (volt__strategy_device_sum) when there are several.
 *
 * The parameter math is the core's (volt_params_*, volt_optimizer_step) and the plugin's;
 * this file only orders it, so the floating-point operations are the same as before it
 * existed (tests/golden.sh). */
#include <math.h>
#include <stdio.h>
#include "strategies/strategy.h"
#include "core/internal.h"

#define BFAIL(s, ...) do { snprintf(err, errlen, __VA_ARGS__); return (s); } while (0)

static volt_status unscale(volt_strategy *st, const volt_boundary *b, bool *skip, float **flag, char *err,
                           size_t errlen) {
    *skip = false;
    *flag = NULL;
    volt_precision *p = st->prec;
    if (!p || !p->ops->unscale_grads) return VOLT_OK;
    if (b->on_device) {   /* captured: the updates read the flag where unscale leaves it */
        if (!p->ops->skip_flag || !p->ops->update_on_device)
            BFAIL(VOLT_ERR_UNSUPPORTED, "strategy '%s': precision '%s': the inf/NaN skip cannot be decided on the "
                  "device", st->row->name, p->ops->info.name);
        p->ops->unscale_grads(p, st->ps, NULL);
        if (!(*flag = p->ops->skip_flag(p)))
            BFAIL(VOLT_ERR_STATE, "precision '%s': the grad scaler has no device state", p->ops->info.name);
        /* every rank takes the same decision: the flags (0 or 1) summed, nonzero skips */
        volt_status s = volt__strategy_device_sum(st, *flag, 1, false, "grad scaler inf/NaN flag");
        if (s < 0) BFAIL(s, "strategy '%s': grad scaler inf/NaN flag: %s", st->row->name, st->errmsg);
        return VOLT_OK;
    }
    bool found = false;
    p->ops->unscale_grads(p, st->ps, &found);
    if (st->world > 1) {   /* every rank takes the same decision */
        double f = found ? 1.0 : 0.0;
        volt_status s = volt__strategy_all_reduce_mean(st, &f, 1, "grad scaler inf/NaN flag");
        if (s < 0) BFAIL(s, "strategy '%s': grad scaler inf/NaN flag: %s", st->row->name, st->errmsg);
        found = f > 0;
    }
    *skip = found;
    return VOLT_OK;
}

volt_status volt__strategy_clip(volt_strategy *st, float clip_val, bool by_value, bool on_device, char *err, size_t errlen) {
    if (!(clip_val > 0)) return VOLT_OK;
    volt_status s;
    if (by_value) {
        if ((s = volt_params_clip_grad_value(st->ps, clip_val)) < 0)
            BFAIL(s, "gradient clipping: %s", volt_params_errmsg(st->ps));
        return VOLT_OK;
    }
    if (on_device) {   /* the coefficient from the device norm: the same formula, no host read */
        double *sq = NULL;
        if ((s = volt__params_grad_sqnorm_dev(st->ps, &sq)) < 0)
            BFAIL(s, "gradient clipping: %s", volt_params_errmsg(st->ps));
        if (st->ops->grad_sqnorm && (s = volt__strategy_device_sum(st, sq, 1, true, "grad norm")) < 0)   /* shards */
            BFAIL(s, "strategy '%s': gradient norm: %s", st->row->name, st->errmsg);
        volt__params_clip_by_dev_norm(st->ps, clip_val);
        return VOLT_OK;
    }
    /* global norm, summed over shards, like torch.nn.utils.clip_grad_norm_ */
    double sq = 0;
    if (st->ops->grad_sqnorm) {
        if ((s = st->ops->grad_sqnorm(st, &sq)) < 0)
            BFAIL(s, "strategy '%s': gradient norm: %s", st->row->name, st->errmsg);
    } else {
        sq = volt_params_grad_sqnorm(st->ps);   /* the grads are this process's whole */
    }
    double norm = sqrt(sq);
    float coef = (float)(clip_val / (norm + 1e-6));
    if (isfinite(norm) && coef < 1.0f) volt_params_scale_grads(st->ps, coef);   /* grad ranges only */
    return VOLT_OK;
}

volt_status volt__strategy_optimizer_boundary(volt_strategy *st, const volt_boundary *b, bool *skipped, bool *ended,
                                              char *err, size_t errlen) {
    err[0] = 0;
    *skipped = *ended = false;
    volt_status s;
    if (st->ops->reduce_grads && (s = st->ops->reduce_grads(st)) < 0)
        BFAIL(s, "strategy '%s': gradient reduction: %s", st->row->name, st->errmsg);
    bool skip = false;   /* 16-mixed: grads unscaled here; inf/NaN on any rank skips the step */
    float *flag = NULL;   /* captured: the same decision, on the device */
    VOLT_TRY(unscale(st, b, &skip, &flag, err, errlen));
    /* Lightning's order: on_before_optimizer_step sees the grads unscaled and not yet clipped */
    if (b->before_step && (s = b->before_step(b->ctx)) < 0) return s;
    if (b->configure_clip) {
        if ((s = b->configure_clip(b->ctx)) < 0) return s;
    } else {
        VOLT_TRY(volt__strategy_clip(st, b->clip_val, b->clip_by_value, b->on_device, err, errlen));
    }
    if (!skip && (s = volt__optimizer_step_unless(st->opt, flag)) < 0)
        BFAIL(s, "optimizer step: %s", volt_optimizer_errmsg(st->opt));
    if (st->ops->after_optimizer_step && (s = st->ops->after_optimizer_step(st)) < 0)
        BFAIL(s, "strategy '%s': parameter gather: %s", st->row->name, st->errmsg);
    if (b->on_device && (s = volt__strategy_wait_params(st)) < 0)   /* a graph ends with its collectives joined */
        BFAIL(s, "strategy '%s': parameter gather: %s", st->row->name, st->errmsg);
    /* a hook that fails still leaves the boundary whole (grads cleared, the scaler updated) */
    const volt_status hs = b->before_zero_grad ? b->before_zero_grad(b->ctx) : VOLT_OK;
    volt__strategy_zero_grad(st);
    if (st->prec && flag) {
        st->prec->ops->update_on_device(st->prec);   /* skipped_steps: counted at read_back */
    } else if (st->prec) {
        if (skip) st->prec->skipped_steps++;
        if (st->prec->ops->update) st->prec->ops->update(st->prec, skip);
    }
    *skipped = skip;
    *ended = true;
    return hs < 0 ? hs : VOLT_OK;
}
